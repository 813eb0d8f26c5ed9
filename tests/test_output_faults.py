"""Outputs that cannot be written as asked (issue 22, items 3 and 4).

* An output path that is a symlink is written *through*: the file it resolves to is replaced
  atomically and the link kept (a dangling link's target is created, as ``open(path, "w")`` would);
  one resolving to a special file (a FIFO, a character device, a pipe behind ``/proc/self/fd/N``
  like ``/dev/stdout``) is refused.
* A full disk under ``prepare``, ``estimate``, ``train`` and ``report``: one line on stderr naming the
  path (``logzbench CMD: error: cannot write PATH: No space left on device``), exit status 2, no
  traceback, and nothing written or changed: a command's outputs are all renamed into place only once
  every one of them is written (``logzbench.utils.output_transaction``).

Each refused case is one row of :data:`FAULTS` ``(id, setup, argv, words)``, each written-through
case one row of :data:`WRITES` ``(id, setup, argv, check)``.  The fixture ``workdir`` makes the tiny
inputs of ``tests/test_cli_errors.py`` (``model.npz``, ``rows.npy``, ``data.npz``, ``res/exact.json``:
an estimate record); ``setup(tmp, env)`` makes what else a case needs.  ``_full(tmp, ...)`` mounts a
64 KiB tmpfs at ``full/`` (root only: those cases skip with the reason otherwise) and fills it, leaving
``free`` bytes; it is unmounted after the test.  The snapshot compared before and after covers every
file (contents, size, mtime, inode), link (its target) and folder (that it exists) under the working
directory, the tmpfs included.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from conftest import assert_refused, tree_snapshot, write_tiny_inputs

from logzbench.cli import main
from logzbench.errors import OutputError
from logzbench.utils import io as output_io

EST = ["estimate", "model.npz", "--estimator", "exact"]
TRAIN = ["train", "--data", "data.npz", "--n-hidden", "3", "--epochs", "1", "--batch-size", "4"]
REPORT = ["report", "res"]
PAGE = 4096

_MOUNTS: list = []  # tmpfs mounted by the running test, unmounted by the fixture
_FDS: list = []  # pipe ends opened by the running test, closed by the fixture


def _full(tmp, free=0, before=None):
    """Mount a 64 KiB tmpfs at ``tmp/full``, run ``before(full)`` (files that exist before the
    command), then fill what is left with ``full/.filler`` but ``free`` bytes (whole pages)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs (a full disk) needs root")
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    full = tmp / "full"
    full.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        full.rmdir()
        pytest.skip(f"cannot mount a tmpfs: {proc.stderr.strip()}")
    _MOUNTS.append(full)
    if before is not None:
        before(full)
    with open(full / ".filler", "wb", buffering=0) as fh:  # fill page by page up to ENOSPC
        try:
            while True:
                fh.write(b"\0" * PAGE)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    if free:
        size = (full / ".filler").stat().st_size
        os.truncate(full / ".filler", max(0, size - free))
    with pytest.raises(OSError):  # the disk is full indeed
        (full / ".probe").write_bytes(b"x" * (free + 2 * PAGE))
    (full / ".probe").unlink(missing_ok=True)
    return full


def _old_report(full):
    """A report directory of an earlier run in ``full/rep`` (what a failed run must leave as it was)."""
    (full / "rep" / "plots").mkdir(parents=True)
    for name in ("per_run.csv", "summary.csv", "report.json", "plots/model.png"):
        (full / "rep" / name).write_text(f"old {name}\n")


def _old(tmp, *names):
    for name in names:
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(f"old {name}\n")


def _fail_second_rename(env):
    """The second rename of a command fails (after the first output was already put in place)."""
    calls = []
    real = output_io._replace

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(errno.EIO, "Input/output error")
        real(src, dst)

    env.setattr(output_io, "_replace", replace)


def _pipe_link(tmp, name):
    """``name`` -> ``/proc/<pid>/fd/N``, the read end of a pipe: what ``/dev/stdout`` is in a pipeline."""
    r, w = os.pipe()
    _FDS.extend([r, w])
    os.symlink(f"/proc/{os.getpid()}/fd/{w}", tmp / name)


def _fifo_link(tmp, name):
    os.mkfifo(tmp / "fifo")
    os.symlink("fifo", tmp / name)


FAULTS = [
    # --- special files behind a symlink (refused before anything is loaded)
    (
        "json-link-to-fifo",
        lambda t, e: _fifo_link(t, "stdout"),
        EST + ["--json", "stdout"],
        ["--json stdout", "not a regular file", "FIFO"],
    ),
    (
        "json-link-to-pipe-like-dev-stdout",
        lambda t, e: _pipe_link(t, "stdout"),
        EST + ["--json", "stdout"],
        ["--json stdout", "not a regular file", "FIFO or pipe"],
    ),
    (
        "log-weights-link-to-char-device",
        lambda t, e: os.symlink("/dev/null", t / "null"),
        EST + ["--log-weights", "null"],
        ["--log-weights null", "character device"],
    ),
    (
        "history-link-chain-to-char-device",
        lambda t, e: (os.symlink("/dev/null", t / "a"), os.symlink("a", t / "b")),
        TRAIN + ["--out", "m.npz", "--history", "b"],
        ["--history b", "character device"],
    ),
    (
        "json-dangling-link-into-missing-folder",
        lambda t, e: os.symlink("nowhere/e.json", t / "e.json"),
        EST + ["--json", "e.json"],
        ["--json e.json", "dangling symlink", "does not exist"],
    ),
    (
        "json-link-loop",
        lambda t, e: (os.symlink("l2", t / "l1"), os.symlink("l1", t / "l2")),
        EST + ["--json", "l1"],
        ["--json l1", "symbolic links"],
    ),
    # --- a full disk: each command, one output
    (
        "prepare-full",
        lambda t, e: _full(t),
        ["prepare", "digits", "--out", "full/d.npz"],
        ["cannot write", "full/d.npz", "No space left on device"],
    ),
    (
        "prepare-full-new-folder",
        lambda t, e: _full(t),
        ["prepare", "digits", "--out", "full/new/deeper/d.npz"],
        ["cannot write", "full/new/deeper/d.npz", "No space left"],
    ),
    (
        "estimate-json-full",
        lambda t, e: _full(t),
        EST + ["--json", "full/e.json"],
        ["cannot write", "full/e.json", "No space left on device"],
    ),
    (
        "train-out-full",
        lambda t, e: _full(t),
        TRAIN + ["--out", "full/m.npz"],
        ["cannot write", "full/m.npz", "No space left on device"],
    ),
    (
        "report-full-new-out",
        lambda t, e: _full(t),
        REPORT + ["--out", "full/rep"],
        ["cannot write", "full/rep", "No space left on device"],
    ),
    (
        "report-full-old-out-kept",
        lambda t, e: _full(t, free=3 * PAGE, before=_old_report),
        REPORT + ["--out", "full/rep"],
        ["cannot write", "full/rep/", "No space left on device"],
    ),
    (
        "report-full-after-some-files",
        lambda t, e: _full(t, free=5 * PAGE),
        REPORT + ["--out", "full/a/rep"],
        ["cannot write", "full/a/rep/", "No space left on device"],
    ),
    # --- a full disk under one of several outputs: none is written (the old files are kept)
    (
        "estimate-log-weights-full-json-not-written",
        lambda t, e: _full(t),
        EST + ["--json", "e.json", "--log-weights", "full/lw.npz"],
        ["cannot write", "full/lw.npz", "No space left"],
    ),
    (
        "estimate-log-weights-full-old-json-kept",
        lambda t, e: (_old(t, "out/e.json"), _full(t)),
        EST + ["--json", "out/e.json", "--log-weights", "full/lw.npz"],
        ["cannot write", "full/lw.npz", "No space left"],
    ),
    (
        "estimate-log-weights-full-new-json-folder-removed",
        lambda t, e: _full(t),
        EST + ["--json", "new/deeper/e.json", "--log-weights", "full/lw.npz"],
        ["cannot write", "full/lw.npz"],
    ),
    (
        "train-history-full-model-not-written",
        lambda t, e: _full(t),
        TRAIN + ["--out", "m.npz", "--history", "full/h.csv"],
        ["cannot write", "full/h.csv", "No space left"],
    ),
    (
        "train-history-full-old-model-kept",
        lambda t, e: (_old(t, "models/m.npz", "models/m.csv"), _full(t)),
        TRAIN + ["--out", "models/m.npz", "--history", "full/h.csv"],
        ["cannot write", "full/h.csv"],
    ),
    # --- the last rename fails after the first output was put in place: that one is put back
    (
        "estimate-second-rename-fails-first-restored",
        lambda t, e: (_old(t, "e.json", "lw.npz"), _fail_second_rename(e)),
        EST + ["--json", "e.json", "--log-weights", "lw.npz"],
        ["cannot write", "lw.npz", "Input/output error"],
    ),
    (
        "estimate-second-rename-fails-new-first-removed",
        lambda t, e: _fail_second_rename(e),
        EST + ["--json", "e.json", "--log-weights", "lw.npz"],
        ["cannot write", "lw.npz", "Input/output error"],
    ),
    (
        "train-second-rename-fails-through-link",
        lambda t, e: (_old(t, "real/m.npz"), os.symlink("real/m.npz", t / "m.npz"), _fail_second_rename(e)),
        TRAIN + ["--out", "m.npz", "--history", "h.csv"],
        ["cannot write", "h.csv", "Input/output error"],
    ),
]


def _record(tmp):
    """``res/exact.json``: an estimate record to report on."""
    assert main(EST + ["--data", "data.npz", "--json", "res/exact.json"]) == 0


@pytest.fixture
def workdir(tmp_path, monkeypatch, capsys):
    """A working directory with the tiny inputs (see the module docstring)."""
    monkeypatch.chdir(tmp_path)
    write_tiny_inputs(tmp_path)
    _record(tmp_path)
    capsys.readouterr()
    yield tmp_path
    while _FDS:
        os.close(_FDS.pop())
    while _MOUNTS:
        subprocess.run(["umount", str(_MOUNTS.pop())], check=False)


@pytest.mark.parametrize("setup, argv, words", [c[1:] for c in FAULTS], ids=[c[0] for c in FAULTS])
def test_fault_is_one_line_exit_2_nothing_written(workdir, monkeypatch, capsys, setup, argv, words):
    setup(workdir, monkeypatch)
    assert_refused(main, argv, words, workdir, capsys)


def _is_link_to(path, target):
    return os.path.islink(path) and os.readlink(path) == target


def _check_json_through(tmp):
    assert _is_link_to(tmp / "e.json", "real/e.json")
    assert "log_z" in json.loads((tmp / "real/e.json").read_text())


def _check_chain(tmp):
    assert _is_link_to(tmp / "b.json", "a.json") and _is_link_to(tmp / "a.json", "real/e.json")
    assert "log_z" in json.loads((tmp / "real/e.json").read_text())


def _check_dangling(tmp):
    assert _is_link_to(tmp / "new.json", "real/new.json")
    assert "log_z" in json.loads((tmp / "real/new.json").read_text())


def _check_train_through(tmp):
    assert _is_link_to(tmp / "m.npz", "real/m.npz") and _is_link_to(tmp / "h.csv", "real/h.csv")
    assert "W" in np.load(tmp / "real/m.npz") and (tmp / "real/h.csv").read_text().startswith("epoch")


def _check_proc_link_to_file(tmp):
    """A link through ``/proc/<pid>/fd/N`` to a regular file (``/dev/stdout`` of ``> file``)."""
    assert os.path.islink(tmp / "stdout")
    assert "log_z" in json.loads((tmp / "real/out.txt").read_text())


def _proc_link_to_file(tmp):
    _old(tmp, "real/out.txt")
    fd = os.open(tmp / "real/out.txt", os.O_WRONLY)
    _FDS.append(fd)
    os.symlink(f"/proc/{os.getpid()}/fd/{fd}", tmp / "stdout")


WRITES = [
    (
        "json-through-link-link-kept",
        lambda t, e: (_old(t, "real/e.json"), os.symlink("real/e.json", t / "e.json")),
        EST + ["--json", "e.json"],
        _check_json_through,
    ),
    (
        "json-through-link-chain",
        lambda t, e: (
            _old(t, "real/e.json"),
            os.symlink("real/e.json", t / "a.json"),
            os.symlink("a.json", t / "b.json"),
        ),
        EST + ["--json", "b.json"],
        _check_chain,
    ),
    (
        "json-dangling-link-target-created",
        lambda t, e: ((t / "real").mkdir(), os.symlink("real/new.json", t / "new.json")),
        EST + ["--json", "new.json"],
        _check_dangling,
    ),
    (
        "train-model-and-history-through-links",
        lambda t, e: (
            _old(t, "real/m.npz", "real/h.csv"),
            os.symlink("real/m.npz", t / "m.npz"),
            os.symlink("real/h.csv", t / "h.csv"),
        ),
        TRAIN + ["--out", "m.npz", "--history", "h.csv"],
        _check_train_through,
    ),
    (
        "json-through-proc-fd-link-to-file",
        lambda t, e: _proc_link_to_file(t),
        EST + ["--json", "stdout"],
        _check_proc_link_to_file,
    ),
]


@pytest.mark.parametrize("setup, argv, check", [c[1:] for c in WRITES], ids=[c[0] for c in WRITES])
def test_symlinked_output_is_written_through(workdir, monkeypatch, capsys, setup, argv, check):
    setup(workdir, monkeypatch)
    rc = main(list(argv))
    assert rc == 0, capsys.readouterr().err
    check(workdir)
    leftovers = [p.name for p in workdir.rglob(".*") if p.name.endswith((".tmp.json", ".tmp.npz", ".tmp.csv", ".bak"))]
    assert not leftovers, leftovers


def test_a_workflow_job_writes_all_its_outputs_or_none(workdir):
    """``logzbench.pipeline.jobs.run_estimate`` (``@transactional``): the record cannot be written on the full disk,
    so the arrays file of the same setting is not left either; the error names the record."""
    from logzbench.pipeline.jobs import run_estimate

    full = _full(workdir)
    settings = {
        "model": "tiny",
        "dataset": "tiny",
        "device": "cpu",
        "n_visible": 6,
        "family": "rbm",
        "hidden_sizes": [3],
        "n_hidden": 3,
        "estimator": "exact",
        "method": "exact",
        "K": None,
        "init": None,
        "seed": None,
    }
    before = tree_snapshot(workdir)
    with pytest.raises(OutputError, match=r"cannot write .*full/exact\.json: No space left on device"):
        run_estimate(
            settings,
            model=workdir / "model.npz",
            data=workdir / "data.npz",
            arrays=workdir / "exact.npz",
            record_path=full / "exact.json",
            tracking={"enabled": False},
            log=lambda msg: None,
        )
    assert tree_snapshot(workdir) == before


def test_published_outputs_are_undone_when_the_transaction_fails(tmp_path):
    """An output published early (for MLflow to read) is put back as it was when a later write fails."""
    (tmp_path / "a.txt").write_text("old a\n")
    with pytest.raises(RuntimeError, match="later failure"):
        with output_io.output_transaction():
            output_io.write_json_atomic(tmp_path / "a.txt", {"new": 1})
            output_io.write_json_atomic(tmp_path / "sub/b.json", {"new": 2})
            output_io.publish_outputs()
            assert json.loads((tmp_path / "a.txt").read_text()) == {"new": 1}  # in place now
            raise RuntimeError("later failure")
    assert (tmp_path / "a.txt").read_text() == "old a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]  # no b.json, no sub/, no backups


SPECIAL = [  # (id, setup making `out` in tmp, words): the library's own refusal, behind the CLI's check
    ("link-to-fifo", lambda t: _fifo_link(t, "out"), ["FIFO", "not a regular file"]),
    ("link-to-pipe-fd", lambda t: _pipe_link(t, "out"), ["FIFO", "not a regular file"]),
    ("link-to-dev-null", lambda t: os.symlink("/dev/null", t / "out"), ["character device"]),
    ("fifo-itself", lambda t: os.mkfifo(t / "out"), ["FIFO"]),
    ("link-loop", lambda t: os.symlink("out", t / "out"), ["symbolic links"]),
    ("dangling-link-into-missing-folder", lambda t: os.symlink("no/such/file", t / "out"), ["dangling symlink"]),
]


@pytest.mark.parametrize("setup, words", [c[1:] for c in SPECIAL], ids=[c[0] for c in SPECIAL])
def test_atomic_writes_refuse_special_files(tmp_path, setup, words):
    setup(tmp_path)
    before = tree_snapshot(tmp_path)
    try:
        with pytest.raises(OutputError) as info:
            output_io.write_json_atomic(tmp_path / "out", {"a": 1})
    finally:
        while _FDS:
            os.close(_FDS.pop())
    assert str(info.value).startswith(f"cannot write {tmp_path / 'out'}: ")
    for word in words:
        assert word in str(info.value), str(info.value)
    assert tree_snapshot(tmp_path) == before
