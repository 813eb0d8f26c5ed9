"""Bad options of ``logzbench train --learner`` and ``--threads`` (issue 22, items 5 and 6): one line on
stderr naming the problem, exit status 2, no traceback, and no file written or changed.

Each case is one row of :data:`CASES`: ``(id, setup, argv, words)``, as in tests/test_cli_errors.py.
The fixture ``workdir`` makes ``data.npz`` (a prepared dataset of 8 binary rows of 6 pixels, with
``train``, ``test`` and ``valid`` splits) in a temporary working directory; ``setup(tmp, env)`` makes what
else a case needs (``env``: pytest's ``monkeypatch``); ``words`` must all appear in the error line.

An argparse error (``--threads`` above :data:`logzbench.cli.MAX_THREADS`) prints the usage first, then
its one error line (:data:`ARGPARSE_CASES`).  The learners' hyperparameter rules are also checked
directly: every keyword each learner takes has a rule (or is checked elsewhere), and each rule refuses
a value of the wrong type.
"""

import json

import numpy as np
import pytest
from conftest import assert_refused, tree_snapshot

from logzbench import registry
from logzbench.cli import MAX_THREADS, main
from logzbench.training import learner_options as lo

#: a tiny learner run (refused before it starts, or diverging within a few iterations)
_TINY = ["--set", "iterations=4", "--set", "log_every=1"]
AVIL = [
    "train",
    "--data",
    "data.npz",
    "--out",
    "m.npz",
    "--learner",
    "avil",
    "--n-hidden",
    "3",
    "--set",
    "aux_size=2",
    "--set",
    "K1=1",
    "--set",
    "monitor_samples=50",
    *_TINY,
]
NVIL = [
    "train",
    "--data",
    "data.npz",
    "--out",
    "m.npz",
    "--learner",
    "nvil",
    "--n-hidden",
    "3",
    "--set",
    "aux_size=2",
    "--set",
    "K1=1",
    "--set",
    "monitor_samples=50",
    *_TINY,
]
VCD = [
    "train",
    "--data",
    "data.npz",
    "--out",
    "m.npz",
    "--learner",
    "vcd",
    "--family",
    "dbm",
    "--hidden-sizes",
    "3,2",
    *_TINY,
]
TRAIN = ["train", "--data", "data.npz", "--out", "m.npz", "--n-hidden", "3", "--epochs", "1"]


def _nothing(tmp, env):
    pass


def _env(name, value):
    return lambda tmp, env: env.setenv(name, value)


CASES = [
    # --- the families' trainer flags: refused naming the flag and the learner
    ("avil-method", _nothing, AVIL + ["--method", "pcd"], ["--method", "does not apply to --learner avil"]),
    ("nvil-epochs", _nothing, NVIL + ["--epochs", "7"], ["--epochs", "--learner nvil", "--set iterations=N"]),
    ("vcd-k", _nothing, VCD + ["--k", "2"], ["--k", "--learner vcd", "cd_k"]),
    ("avil-weight-decay", _nothing, AVIL + ["--weight-decay", "0.1"], ["--weight-decay", "--learner avil"]),
    ("avil-preset", _nothing, AVIL + ["--preset", "mnistCD1-20"], ["--preset", "does not apply to --learner avil"]),
    ("nvil-preset", _nothing, NVIL + ["--preset", "mnistCD1-20"], ["--preset", "--learner nvil"]),
    # --learning-rate is the learner's lr: checked as lr, and it must agree with --set lr
    ("avil-learning-rate-negative", _nothing, AVIL + ["--learning-rate", "-1"], ["lr must be", "(0.0, inf)", "-1"]),
    (
        "avil-learning-rate-and-lr",
        _nothing,
        AVIL + ["--learning-rate", ".5", "--set", "lr=0.1"],
        ["conflicting --learning-rate 0.5", "--set lr=0.1"],
    ),
    # --- a misspelt key: the closest name
    (
        "avil-set-typo",
        _nothing,
        AVIL + ["--set", "iteratoins=3"],
        ["unknown hyperparameter 'iteratoins'", "avil learner", "did you mean 'iterations'?"],
    ),
    ("vcd-set-other-learners-key", _nothing, VCD + ["--set", "K1=3"], ["unknown hyperparameter 'K1'", "vcd learner"]),
    ("nvil-set-trainers-key", _nothing, NVIL + ["--set", "n_epochs=3"], ["unknown hyperparameter 'n_epochs'", "nvil"]),
    # --- the workflow's figure keys: not the command line's
    (
        "avil-figure-samples",
        _nothing,
        AVIL + ["--set", "figure_samples=8"],
        ["--set figure_samples", "does not apply", "--learner avil", "draws none"],
    ),
    ("nvil-figure-sweeps", _nothing, NVIL + ["--set", "figure_sweeps=5"], ["--set figure_sweeps", "--learner nvil"]),
    # --- values (the same rules as the workflow's config check, tests/test_workflow.py BAD_CONFIGS)
    ("avil-z", _nothing, AVIL + ["--set", "z=bogus"], ["unknown z 'bogus'", "continuous", "discrete"]),
    ("avil-iterations-0", _nothing, AVIL + ["--set", "iterations=0"], ["iterations must be >= 1, got 0"]),
    ("avil-iterations-text", _nothing, AVIL + ["--set", "iterations=many"], ["iterations must be an integer", "many"]),
    ("nvil-lr-negative", _nothing, NVIL + ["--set", "lr=-1"], ["lr must be a finite number in (0.0, inf)", "-1"]),
    ("vcd-select", _nothing, VCD + ["--set", "select=bogus"], ["unknown select 'bogus'", "best-valid"]),
    ("avil-betas-out-of-range", _nothing, AVIL + ["--set", "betas=[2, 3]"], ["betas[0]", "[0.0, 1.0)", "2"]),
    ("avil-betas-scalar", _nothing, AVIL + ["--set", "betas=0.5"], ["betas must be a pair", "0.5"]),
    ("avil-K1-fraction", _nothing, AVIL + ["--set", "K1=2.5"], ["K1 must be an integer", "2.5"]),
    (
        "nvil-ais-every",
        _nothing,
        NVIL + ["--set", "ais_every=3", "--set", "log_every=2"],
        ["ais_every=3", "multiple of log_every=2"],
    ),
    ("vcd-ais-init", _nothing, VCD + ["--set", "ais_init=bogus"], ["unknown ais_init 'bogus'", "base-rate"]),
    ("avil-ablation", _nothing, AVIL + ["--set", "ablation=no_entropy"], ["unknown ablation 'no_entropy'"]),
    (
        "avil-straight-through",
        _nothing,
        AVIL + ["--set", "straight_through=yes"],
        ["straight_through", "true or false"],
    ),
    # --- limits that keep a run from hanging: refused up front
    (
        "avil-exact-max-units",
        _nothing,
        AVIL + ["--set", "exact_max_units=40"],
        ["exact_max_units must be <= 24, got 40", "2^units states"],
    ),
    (
        "avil-batch-size-huge",
        _nothing,
        AVIL + ["--set", "batch_size=1000000000"],
        ["batch_size must be <= 100000", "1000000000"],
    ),
    ("avil-batch-size-flag-huge", _nothing, AVIL + ["--batch-size", "1000000000"], ["batch_size must be <= 100000"]),
    (
        "nvil-monitor-samples-huge",
        _nothing,
        NVIL + ["--set", "monitor_samples=1000000000"],
        ["monitor_samples must be <= 1000000"],
    ),
    # --- a divergent run: an error naming the iteration, no model written
    ("avil-diverges", _nothing, AVIL + ["--set", "lr=1e10"], ["training diverged", "iteration"]),
    ("nvil-diverges", _nothing, NVIL + ["--set", "lr=1e10"], ["training diverged", "iteration"]),
    ("vcd-diverges", _nothing, VCD + ["--set", "lr=1e10"], ["training diverged", "iteration"]),
    # --- the thread count from the environment (the command line's limit)
    (
        "threads-env-too-many",
        _env("LOGZBENCH_THREADS", "100000"),
        TRAIN,
        ["LOGZBENCH_THREADS", f"at most {MAX_THREADS}"],
    ),
]

#: argparse errors: the usage, then one error line
ARGPARSE_CASES = [
    (
        "threads-99999999",
        TRAIN + ["--threads", "99999999"],
        ["argument --threads", f"at most {MAX_THREADS}", "99999999"],
    ),
    ("threads-100000", AVIL + ["--threads", "100000"], ["argument --threads", f"at most {MAX_THREADS}", "100000"]),
    (
        "threads-above-max",
        ["estimate", "m.npz", "--estimator", "exact", "--threads", str(MAX_THREADS + 1)],
        ["argument --threads", f"at most {MAX_THREADS}"],
    ),
]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory with ``data.npz`` (see the module docstring)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOGZBENCH_THREADS", "1")  # (a case may set another)
    rows = np.random.default_rng(0).integers(0, 2, (8, 6)).astype(np.uint8)
    np.savez_compressed(
        tmp_path / "data.npz",
        train=rows,
        test=rows[:4],
        valid=rows[4:],
        meta=np.asarray(json.dumps({"dataset": "tiny", "n_features": 6})),
    )
    return tmp_path


@pytest.mark.parametrize("setup, argv, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_learner_option_is_one_line_exit_2_nothing_written(workdir, monkeypatch, capsys, setup, argv, words):
    setup(workdir, monkeypatch)
    assert_refused(main, argv, words, workdir, capsys)


@pytest.mark.parametrize("argv, words", [c[1:] for c in ARGPARSE_CASES], ids=[c[0] for c in ARGPARSE_CASES])
def test_too_many_threads_is_an_argparse_error(workdir, capsys, argv, words):
    before = tree_snapshot(workdir)
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    errors = [line for line in err.strip().splitlines() if "error:" in line]
    assert exc.value.code == 2 and "Traceback" not in err, err
    assert len(errors) == 1 and err.strip().splitlines()[-1] == errors[0], err
    assert errors[0].startswith(f"logzbench {argv[0]}: error: "), err
    for word in words:
        assert word in errors[0], f"{word!r} not in {errors[0]!r}"
    assert out == "" and tree_snapshot(workdir) == before


def test_threads_at_the_limit_and_learning_rate_as_lr_run(workdir, capsys):
    """The normal cases beside the refusals: ``--learning-rate`` trains a learner with that ``lr``, a
    ``batch_size`` above the 8 training rows uses every row (documented), and the largest thread count
    is accepted by the parser."""
    rc = main(AVIL + ["--learning-rate", "0.001", "--set", "batch_size=50", "--threads", "1"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert (workdir / "m.npz").is_file() and json.loads(out)["final"]["iteration"] == 4
    from logzbench.cli import build_parser

    assert build_parser().parse_args(TRAIN + ["--threads", str(MAX_THREADS)]).threads == MAX_THREADS


# --------------------------------------------------------------------------- the rules themselves
@pytest.mark.parametrize("learner", sorted(registry.LEARNERS))
def test_every_learner_keyword_has_a_rule(learner):
    """Every keyword a learner reads is checked by a rule (so the workflow's config check refuses what the
    job would), except those checked elsewhere; and its defaults pass the rules."""
    keywords = lo.learner_keywords(learner)
    assert keywords - lo.NOT_RULED <= set(lo.RULES), sorted(keywords - lo.NOT_RULED - set(lo.RULES))
    defaults = lo.learner_defaults(learner)
    assert set(defaults) == keywords - lo.NOT_RULED
    lo.check_values(defaults)


#: a value of the wrong type for each kind of rule
_WRONG_TYPE = {"int": "3", "real": "0.1", "pair": 0.5, "bool": "yes", "choice": 3}


@pytest.mark.parametrize("name", sorted(lo.RULES))
def test_each_rule_refuses_a_value_of_the_wrong_type(name):
    with pytest.raises(ValueError, match=name):
        lo.check_value(name, _WRONG_TYPE[lo.RULES[name].kind])


def test_api_refuses_unknown_keys_with_the_closest():
    from logzbench.training import train_with_learner

    rows = np.zeros((4, 6), dtype=np.uint8)
    with pytest.raises(ValueError, match="did you mean 'iterations'"):
        train_with_learner(rows, family="rbm", learner="avil", n_hidden=3, iteratoins=3)


def test_a_nan_logged_bound_is_divergence_naming_the_iteration():
    """The parameters can stay finite while a logged bound is NaN (networks overflowed): an error too."""
    from types import SimpleNamespace

    from logzbench.training import TrainingDivergedError
    from logzbench.training.variational import History, Setup

    fake = SimpleNamespace(
        exact=lambda energy: {},
        ais=lambda it, energy: {},
        energy=None,
        best=SimpleNamespace(select="last", offer=lambda *a: None),
    )
    history = History()
    Setup.observe(
        fake,
        history,
        2,
        {
            "iteration": 2,
            "log_z_bound": 1.0,
            "log_z_bound_stderr": float("nan"),
            "valid_free_energy_bound": float("nan"),
        },
    )  # NaN where there is none: fine
    with pytest.raises(TrainingDivergedError, match="training diverged by iteration 3: the logged log_z_bound is nan"):
        Setup.observe(fake, history, 3, {"iteration": 3, "log_z_bound": float("nan")})
