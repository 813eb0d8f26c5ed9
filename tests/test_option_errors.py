"""Bad estimator options end in one line naming the problem, before any work and with nothing written.

One table: ``(id, call, expected words)``.  ``call(inp, out)`` gets a directory of prepared inputs
(``inp``: model, data and schedule files) and an empty output directory (``out``) and must raise
(API calls) or exit with status 2 (command-line calls, through :func:`_cli`).  Adding a case is one
line.  Every case must fail before the estimator starts (its registry function is replaced by one
that fails the test) and leave ``out`` empty.
"""

import contextlib
import io
import os
import time

import numpy as np
import pandas as pd
import pytest
import torch

from logzbench import registry
from logzbench.api import estimate
from logzbench.cli import main
from logzbench.errors import LogzbenchError
from logzbench.estimators.context import EstimateContext
from logzbench.models import DBM, BinaryRBM, save_model
from logzbench.options import EstimateOptions, declared
from logzbench.utils import make_generator, save_npz_atomic, write_csv_atomic, write_json_atomic

RBM = BinaryRBM.random(8, 4, generator=torch.Generator().manual_seed(0))
X = (np.random.default_rng(0).random((20, 8)) > 0.5).astype(np.float32)


class CLIError(ValueError):
    """A command-line case that exited with status 2 (its message is the one stderr line)."""


def _cli(*argv, model="m.npz"):
    """A case running ``logzbench estimate MODEL ...`` with ``--json`` into ``out``: exit status 2 and
    exactly one stderr line, raised as :class:`CLIError` for the words check."""

    def call(inp, out):
        err = io.StringIO()
        args = [str(a).format(inp=inp) for a in argv]
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = main(
                [
                    "estimate",
                    str(inp / model),
                    *args,
                    "--json",
                    str(out / "res.json"),
                    "--log-weights",
                    str(out / "lw.npz"),
                ]
            )
        lines = err.getvalue().strip().splitlines()
        assert rc == 2 and len(lines) == 1, (rc, lines)
        raise CLIError(lines[0])

    return call


def _est(*args, **kw):
    """A case calling :func:`logzbench.api.estimate` on the 8 x 4 RBM (``'{inp}/...'`` paths filled in)."""

    def call(inp, out):
        kw2 = {k: (v.format(inp=inp) if isinstance(v, str) else v) for k, v in kw.items()}
        return estimate(*(args or (RBM, "ais")), **kw2)

    return call


CASES = [
    # integer options (EstimateOptions)
    ("raise-n-examples-0", _est(RBM, "raise", data=X, K=5, n_examples=0), ["n_examples", ">= 1", "0"]),
    ("raise-n-examples-neg", _est(RBM, "raise", data=X, K=5, n_examples=-1), ["n_examples", ">= 1", "-1"]),
    ("chains-0", _est(K=5, chains=0), ["chains", ">= 1"]),
    ("K-0", _est(K=0), ["K", ">= 1"]),
    ("burn-in-neg", _est(RBM, "csl", data=X, burn_in=-1), ["burn_in", ">= 0"]),
    ("thin-0", _est(RBM, "csl", data=X, thin=0), ["thin", ">= 1"]),
    ("chains-float", _est(K=5, chains=2.5), ["chains", "integer"]),
    (
        "cli-n-examples-0",
        _cli("--estimator", "raise", "--data", "{inp}/X.npy", "--n-examples", "0"),
        ["n_examples", "0"],
    ),
    # memory (EstimateContext.check_memory)
    ("chains-1e10", _est(K=2, chains=10**10), ["chains = 10000000000", "GiB", "available", "fewer chains"]),
    (
        "raise-chains-x-examples",
        _est(RBM, "raise", data=X, K=2, chains=10**9),
        ["chains x test examples = 1000000000 x 20", "GiB", "available"],
    ),
    ("csl-chains", _est(RBM, "csl", data=X, chains=10**10), ["chains = 10000000000", "GiB"]),
    (
        "cli-chains-1e9",
        _cli("--estimator", "ais", "--steps", "2", "--chains", "1000000000"),
        ["chains = 1000000000", "GiB"],
    ),
    # exact's time budget (estimators.exact.check_budget)
    (
        "exact-2^32",
        _est(BinaryRBM.random(784, 32), "exact", threads=1),
        ["2^32 states", "min (estimated", "exact_max_seconds=", "--exact-max-seconds"],
    ),
    (
        "exact-budget",
        _est(BinaryRBM.random(64, 30), "exact", threads=1, exact_max_seconds=1),
        ["2^30 states", "budget of 1 s", "exact_max_seconds="],
    ),
    ("exact-budget-0", _est(RBM, "exact", exact_max_seconds=0), ["exact_max_seconds", "> 0"]),
    ("exact-over-cap", _est(BinaryRBM.random(40, 33), "exact"), ["2^33", "refusing above 2^32"]),
    ("exact-dbm-log-f", _est(DBM.random([8, 30, 30]), "exact", data=X), ["log f(v)", "2^30", "refusing above 2^26"]),
    (
        "cli-exact-2^32",
        _cli("--estimator", "exact", "--threads", "1", model="big.npz"),
        ["2^32 states", "--exact-max-seconds"],
    ),
    # schedules (schedules.make_schedule, through EstimateOptions)
    ("sm14500-steps", _est(schedule="sm14500", K=10), ["sm14500", "14500", "10"]),
    ("file-steps", _est(schedule="{inp}/betas11.npy", K=500), ["betas11.npy", "K = 10", "500"]),
    ("file-2d", _est(schedule="{inp}/betas2d.npy"), ["betas2d.npy", "shape (2, 3)", "1-D"]),
    ("file-2-columns", _est(schedule="{inp}/cols.txt"), ["cols.txt", "shape (3, 2)"]),
    ("file-decreasing", _est(schedule="{inp}/down.txt"), ["down.txt", "non-decreasing"]),
    ("file-not-to-1", _est(schedule="{inp}/half.txt"), ["half.txt", "end at 1"]),
    ("file-nan", _est(schedule="{inp}/nan.txt"), ["nan.txt", "NaN"]),
    ("file-garbage", _est(schedule="{inp}/garbage.npy"), ["garbage.npy", "cannot be read"]),
    ("file-missing", _est(schedule="{inp}/nothere.npy"), ["schedule file not found", "nothere.npy"]),
    ("schedule-unknown", _est(schedule="cubic", K=5), ["unknown schedule 'cubic'"]),
    # without K, K defaults to 1000 (schedules.default_K) but for an estimator that reads it unswept (smc)
    ("linear-without-K", _est(RBM, "smc", schedule="linear"), ["'linear'", "needs", "K"]),
    ("tuned-without-K", _est(RBM, "smc", schedule="tuned"), ["tuned", "needs", "K"]),
    ("tuned-K-15", _est(schedule="tuned", K=15), ["K (--steps) = 15", "too small to double from", "K >= 16"]),
    ("tuned-rounds", _est(schedule="tuned", K=64, tune_rounds=4), ["4 round(s)", "K >= 128"]),
    ("tuned-start-sm14500", _est(schedule="tuned", K=64, tuned_start="sm14500"), ["'sm14500'", "length of its own"]),
    ("tuned-start-file", _est(schedule="tuned", K=64, tuned_start="{inp}/betas11.npy"), ["betas11.npy", "own"]),
    ("tuned-start-adaptive", _est(schedule="tuned", K=64, tuned_start="adaptive"), ["not a starting shape"]),
    ("tuned-start-unknown", _est(schedule="tuned", K=64, tuned_start="cubic"), ["'cubic'", "not a schedule"]),
    ("tuned-pilot-1", _est(schedule="tuned", K=64, pilot_chains=1), ["tuned schedule needs pilot_chains >= 2"]),
    ("tuned-sandwich", _est(RBM, "sandwich", schedule="tuned", K=32), ["sandwich doubles K itself"]),
    ("cli-sm14500-steps", _cli("--estimator", "ais", "--schedule", "sm14500", "--steps", "10"), ["14500", "10"]),
    (
        "cli-file-steps",
        _cli("--estimator", "ais", "--schedule", "{inp}/betas11.npy", "--steps", "500"),
        ["betas11.npy", "10", "500"],
    ),
    ("cli-file-2d", _cli("--estimator", "ais", "--schedule", "{inp}/betas2d.npy", "--steps", "5"), ["shape (2, 3)"]),
    ("options-only", lambda inp, out: EstimateOptions(schedule="sm14500", K=100), ["14500", "100"]),
    # issue 37, item 5: NaN and inf on the command line, for every number option (its declaration's check; a time
    # budget may be inf: no limit)
    *[
        (
            f"cli-{o.name}-{bad}",
            _cli("--estimator", "ais", "--steps", "2", f"{o.cli_flags[0]}={bad}"),
            [o.name, f"got {bad}"],
        )
        for o in declared().values()
        if o.cli and o.kind in ("float", "fraction", "seconds")
        for bad in ("nan", "inf", "-inf")
        if (o.kind, bad) != ("seconds", "inf")
    ],
]


@pytest.fixture(scope="module")
def inp(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    save_model(RBM, d / "m.npz")
    np.save(d / "X.npy", X.astype(np.uint8))
    np.save(d / "betas11.npy", np.linspace(0, 1, 11))
    np.save(d / "betas2d.npy", np.linspace(0, 1, 6).reshape(2, 3))
    (d / "cols.txt").write_text("0 0\n0.5 0.5\n1 1\n")
    (d / "down.txt").write_text("0\n0.6\n0.4\n1\n")
    (d / "half.txt").write_text("0\n0.25\n0.5\n")
    (d / "nan.txt").write_text("0\nnan\n1\n")
    (d / "garbage.npy").write_bytes(b"this is not an npy file\n")
    save_model(BinaryRBM.random(784, 32), d / "big.npz")  # 2^32 states: hours of enumeration
    return d


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if an estimator starts."""

    def started(ctx):
        raise AssertionError(f"estimator {ctx.name} started")

    monkeypatch.setattr(registry.EstimatorSpec, "function", property(lambda self: started))


@pytest.mark.parametrize("call, words", [pytest.param(c, w, id=i) for i, c, w in CASES])
def test_bad_option_is_one_line_before_any_work(call, words, inp, tmp_path, no_work):
    out = tmp_path / "out"
    out.mkdir()
    t0 = time.perf_counter()
    with pytest.raises((ValueError, LogzbenchError)) as info:
        call(inp, out)
    assert time.perf_counter() - t0 < 20  # refused up front, not after a long computation
    msg = str(info.value)
    assert "\n" not in msg.strip()
    for w in words:
        assert w in msg, (w, msg)
    assert not any(out.iterdir()), list(out.iterdir())


# ---------------------------------------------------------------------- valid uses are not refused
def _ctx(model, name, data=None, **options):
    return EstimateContext(
        spec=registry.estimator(name),
        family=registry.family(model.family),
        model=model,
        data=data,
        train_data=None,
        options=EstimateOptions(**options),
        generator=make_generator(0),
        device=torch.device("cpu"),
    )


@pytest.mark.parametrize(
    "name, chains, n_rows, options",
    [
        ("ais", 5000, 0, {"K": 100000}),  # RAISE Table 1: 5,000 AIS chains on a 784-500 RBM
        ("raise", 500, 500, {"K": 1000, "n_examples": 500}),  # Upadhya & Sastry: 500 chains x 500 test rows
        ("csl", 5000, 10000, {}),  # CSL with 5,000 chains on the whole MNIST test set
    ],
)
def test_paper_scale_runs_fit_in_8_gib(name, chains, n_rows, options):
    rbm = BinaryRBM.random(784, 500)
    data = torch.zeros(n_rows, 784) if n_rows else None
    _ctx(rbm, name, data, chains=chains, **options).check_memory(available=8 << 30)
    with pytest.raises(ValueError, match="GiB"):
        _ctx(rbm, name, data, chains=chains * 100, **options).check_memory(available=8 << 30)


def test_fixed_schedule_with_its_own_K_or_none_runs(inp):
    assert EstimateOptions(schedule="sm14500").K is None
    EstimateOptions(schedule="sm14500", K=14500)
    EstimateOptions(schedule=str(inp / "betas11.npy"), K=10)
    res = estimate(RBM, "ais", schedule=str(inp / "betas11.npy"), chains=10, n_bootstrap=0)
    assert res.settings["K"] == 10


def test_exact_within_budget_runs():
    res = estimate(BinaryRBM.random(20, 6), "exact", exact_max_seconds=1)
    assert np.isfinite(res.log_z)


# ---------------------------------------------------------------------- permissions of written files
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_get_the_umask_permissions(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        write_json_atomic(tmp_path / "a.json", {"x": 1})
        write_csv_atomic(tmp_path / "a.csv", pd.DataFrame({"x": [1, 2]}))
        save_npz_atomic(tmp_path / "a.npz", x=np.arange(3))
        existing = tmp_path / "old.json"  # an existing file is replaced by one with the umask's mode
        existing.write_text("{}")
        existing.chmod(0o640)
        write_json_atomic(existing, {"y": 2})
    finally:
        os.umask(old)
    for name in ("a.json", "a.csv", "a.npz", "old.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "a.json", "a.npz", "old.json"]  # no temporaries
