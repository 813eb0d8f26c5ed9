"""Thread counts that do not oversubscribe: logzbench.utils.choose_threads, the API's and the CLI's ``threads``."""

import json
import os

import numpy as np
import pytest
import torch
from conftest import model_samples, random_rbm

from logzbench.api import estimate
from logzbench.cli import main
from logzbench.models import save_model
from logzbench.options import option_names
from logzbench.utils import threads


def proc_stat(busy: list[int], idle: list[int]) -> str:
    """A /proc/stat text: per CPU ``i``, ``busy[i]`` user ticks and ``idle[i]`` idle ticks."""
    lines = [f"cpu  {sum(busy)} 0 0 {sum(idle)} 0 0 0 0 0 0"]
    lines += [f"cpu{i} {b} 0 0 {d} 0 0 0 0 0 0" for i, (b, d) in enumerate(zip(busy, idle))]
    return "\n".join(lines + ["intr 0", "ctxt 0"]) + "\n"


@pytest.fixture
def four_cpus(monkeypatch):
    """A process on CPUs 0-3 without a cgroup quota; returns ``show(busy)``, which makes the next
    measurement see ``busy`` (a list of 0/1 per CPU) running during the interval."""
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    monkeypatch.setattr(threads, "_affinity", lambda: {0, 1, 2, 3})
    monkeypatch.setattr(threads, "_cgroup_cpu_quota", lambda: None)

    def show(busy):
        texts = iter(
            [
                proc_stat([1000] * 4, [1000] * 4),
                proc_stat([1000 + 5 * b for b in busy], [1000 + 5 * (1 - b) for b in busy]),
            ]
        )
        monkeypatch.setattr(threads, "_read_proc_stat", lambda: next(texts))

    return show


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


@pytest.fixture
def tiny_model(tmp_path):
    rbm = random_rbm(10, 6, seed=2, scale=0.5)
    path = tmp_path / "model.npz"
    save_model(rbm, path)
    return rbm, path


# --------------------------------------------------------------------------- choose_threads
@pytest.mark.parametrize("n", [1, 3, 64, np.int64(2)])
def test_an_explicit_count_is_used_as_is(monkeypatch, n):
    monkeypatch.setenv(threads.THREADS_ENV, "5")  # an explicit count beats the environment
    assert threads.choose_threads(n) == n and type(threads.choose_threads(n)) is int
    assert threads.choose_threads(n, limit=1) == n  # the limit bounds the automatic choice only


@pytest.mark.parametrize("bad", [0, -2, 1.5, 2.0, "2", True])
def test_a_bad_explicit_count_is_refused(bad):
    with pytest.raises(ValueError, match="threads"):
        threads.choose_threads(bad)


def test_the_environment_variable_is_used_when_nothing_is_asked(monkeypatch):
    monkeypatch.setenv("LOGZBENCH_THREADS", " 3 ")
    assert threads.choose_threads() == 3 and threads.choose_threads(limit=1) == 3
    monkeypatch.setenv("LOGZBENCH_THREADS", "")  # empty: as if unset
    assert 1 <= threads.choose_threads() <= threads.usable_cpus()


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5"])
def test_a_bad_environment_variable_is_refused_by_name(monkeypatch, bad):
    monkeypatch.setenv("LOGZBENCH_THREADS", bad)
    with pytest.raises(ValueError, match="LOGZBENCH_THREADS"):
        threads.choose_threads()


def test_the_automatic_choice_is_between_one_and_the_usable_cpus(monkeypatch):
    monkeypatch.delenv("LOGZBENCH_THREADS", raising=False)
    usable = threads.usable_cpus()
    assert 1 <= usable <= os.cpu_count()
    for _ in range(3):
        assert 1 <= threads.choose_threads() <= usable
    assert threads.choose_threads(limit=1) == 1


def test_all_cpus_busy_gives_one_thread(four_cpus):
    four_cpus([1, 1, 1, 1])
    assert threads.choose_threads(interval=0) == 1


def test_no_cpu_busy_gives_every_cpu(four_cpus):
    four_cpus([0, 0, 0, 0])
    assert threads.choose_threads(interval=0) == 4


def test_each_busy_cpu_takes_one_thread_away(four_cpus):
    four_cpus([1, 0, 1, 0])
    assert threads.choose_threads(interval=0) == 2
    four_cpus([0, 0, 0, 1])
    assert threads.choose_threads(interval=0, limit=2) == 2  # at most the limit


def test_cpus_outside_the_affinity_set_do_not_count(four_cpus, monkeypatch):
    monkeypatch.setattr(threads, "_affinity", lambda: {0, 1})
    four_cpus([0, 0, 1, 1])  # the busy CPUs are not ours
    assert threads.choose_threads(interval=0) == 2


def test_a_cgroup_quota_bounds_the_choice(four_cpus, monkeypatch):
    monkeypatch.setattr(threads, "_cgroup_cpu_quota", lambda: 3)
    assert threads.usable_cpus() == 3
    four_cpus([0, 0, 0, 0])
    assert threads.choose_threads(interval=0) == 3


def test_the_cgroup_v2_quota_is_rounded_up(monkeypatch, tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    (tmp_path / "unlimited").mkdir()
    (tmp_path / "unlimited" / "cpu.max").write_text("max 100000\n")
    monkeypatch.setattr(
        threads, "_cgroup_quota_files", lambda: [str(tmp_path / "unlimited" / "cpu.max"), str(tmp_path / "cpu.max")]
    )
    assert threads._cgroup_cpu_quota() == 2
    monkeypatch.setattr(threads, "_cgroup_quota_files", lambda: [str(tmp_path / "unlimited" / "cpu.max")])
    assert threads._cgroup_cpu_quota() is None


def test_an_unreadable_proc_stat_falls_back_to_the_cpu_count(four_cpus, monkeypatch):
    def unreadable():
        raise OSError("no /proc here")

    monkeypatch.setattr(threads, "_read_proc_stat", unreadable)
    assert threads.choose_threads(interval=0) == 4
    monkeypatch.setattr(threads, "_read_proc_stat", lambda: "garbage\ncpu0 x y\n")
    assert threads.choose_threads(interval=0) == 4


def test_set_threads_sets_torch(monkeypatch, restore_threads):
    assert threads.set_threads(1) == 1 and torch.get_num_threads() == 1
    monkeypatch.setenv("LOGZBENCH_THREADS", "2")
    assert threads.set_threads() == 2 and torch.get_num_threads() == 2


def test_using_threads_restores_the_previous_count(restore_threads):
    torch.set_num_threads(2)
    with threads.using_threads(1) as n:
        assert n == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError), threads.using_threads(1):
        raise RuntimeError("restored on errors too")
    assert torch.get_num_threads() == 2


# --------------------------------------------------------------------------- API
def test_estimate_uses_and_records_the_count_and_restores_torch(tiny_model, restore_threads):
    rbm, path = tiny_model
    torch.set_num_threads(2)
    res = estimate(path, "ais", K=20, chains=10, seed=0, threads=1)
    assert res.settings["threads"] == 1 and torch.get_num_threads() == 2
    torch.set_num_threads(1)
    res = estimate(rbm, "exact", threads=2)
    assert res.settings["threads"] == 2 and torch.get_num_threads() == 1


def test_estimate_default_is_automatic_and_never_raises_torchs_count(tiny_model, monkeypatch, restore_threads):
    monkeypatch.delenv("LOGZBENCH_THREADS", raising=False)
    _, path = tiny_model
    res = estimate(path, "ais", K=20, chains=10)
    assert 1 <= res.settings["threads"] <= min(threads.usable_cpus(), restore_threads)
    torch.set_num_threads(1)  # e.g. a workflow job's threads: 1
    assert estimate(path, "ais", K=20, chains=10).settings["threads"] == 1
    monkeypatch.setenv("LOGZBENCH_THREADS", "2")
    assert estimate(path, "ais", K=20, chains=10).settings["threads"] == 2
    assert torch.get_num_threads() == 1


def test_estimate_refuses_a_bad_count_and_threads_is_not_an_option(tiny_model, restore_threads):
    _, path = tiny_model
    before = torch.get_num_threads()
    with pytest.raises(ValueError, match="threads"):
        estimate(path, "ais", K=20, chains=10, threads=0)
    assert torch.get_num_threads() == before
    assert "threads" not in option_names()


# --------------------------------------------------------------------------- command line
def test_cli_estimate_with_threads_one(tiny_model, tmp_path, capsys, caplog, restore_threads):
    rbm, path = tiny_model
    data = tmp_path / "test.npy"
    np.save(data, model_samples(rbm, 20, seed=1).numpy().astype(np.uint8))
    torch.set_num_threads(2)
    caplog.set_level("INFO", logger="logzbench.cli")
    rc = main(
        [
            "estimate",
            str(path),
            "--estimator",
            "ais",
            "--data",
            str(data),
            "--steps",
            "20",
            "--chains",
            "10",
            "--threads",
            "1",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["threads"] == 1 and out["log_z"] is not None
    assert [r.getMessage() for r in caplog.records if r.name == "logzbench.cli"] == [
        "logzbench estimate: 1 torch thread (--threads)"
    ]
    assert torch.get_num_threads() == 2  # an in-process caller gets its count back


def test_cli_train_with_threads_one(tmp_path, capsys, restore_threads):
    rbm = random_rbm(10, 6, seed=4)
    rows = model_samples(rbm, 40, seed=2, sweeps=20).numpy().astype(np.uint8)
    data = tmp_path / "data.npz"
    np.savez(data, train=rows[:30], test=rows[30:], meta=json.dumps({"dataset": "tiny"}))
    rc = main(
        [
            "train",
            "--data",
            str(data),
            "--out",
            str(tmp_path / "m.npz"),
            "--n-hidden",
            "4",
            "--epochs",
            "1",
            "--batch-size",
            "10",
            "--threads",
            "1",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["threads"] == 1 and (tmp_path / "m.npz").is_file()


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_cli_refuses_a_bad_threads_flag(tiny_model, capsys, value):
    _, path = tiny_model
    with pytest.raises(SystemExit) as exc:
        main(["estimate", str(path), "--estimator", "exact", "--threads", value])
    assert exc.value.code != 0 and "--threads" in capsys.readouterr().err


def test_cli_refuses_a_bad_environment_variable(tiny_model, monkeypatch, capsys, restore_threads):
    _, path = tiny_model
    monkeypatch.setenv("LOGZBENCH_THREADS", "0")
    rc = main(["estimate", str(path), "--estimator", "exact"])
    assert rc == 2 and "LOGZBENCH_THREADS" in capsys.readouterr().err
    monkeypatch.setenv("LOGZBENCH_THREADS", "1")
    assert main(["estimate", str(path), "--estimator", "exact"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["threads"] == 1


def test_cli_threads_help_names_the_rule_and_the_variable(capsys):
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--threads" in text and "LOGZBENCH_THREADS" in text and "automatic" in text
