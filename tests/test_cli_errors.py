"""Bad input to the command line (issue 15): one line on stderr naming the problem, exit status 2,
no traceback, and no file written or changed.

Each case is one row of :data:`CASES`: ``(id, setup, argv, words)``.  The fixture ``workdir`` makes
the tiny inputs in a temporary working directory (``model.npz``: a 6x3 RBM; ``rows.npy``: binary
rows; ``data.npz``: a prepared dataset with ``train`` / ``test``; ``file.txt``: a regular file;
``empty/``: an empty directory); ``setup(tmp, env)`` makes what else the case needs (``env`` is
pytest's ``monkeypatch``, e.g. for environment variables); ``argv`` uses paths relative to that
directory; ``words`` must all appear in the error line.

Running as root (as the tests do), ``os.access`` reports every directory writable, so "an output
directory without write permission" cannot be tested here; the same check refuses an output whose
parent is a regular file (``file.txt/out.json``), which is tested.
"""

import json

import numpy as np
import pytest
from conftest import assert_refused, write_tiny_inputs

from logzbench.cli import main

EST = ["estimate", "model.npz", "--estimator", "exact"]  # a cheap estimate, refused before it runs
SMC = ["estimate", "model.npz", "--estimator", "smc", "--json", "out.json"]  # refused before it runs
AIS = ["estimate", "model.npz", "--estimator", "ais", "-K", "10"]  # refused before it runs
TRAIN = ["train", "--data", "data.npz", "--n-hidden", "3", "--epochs", "1"]


def _truncate(src, dst):
    data = open(src, "rb").read()
    open(dst, "wb").write(data[: len(data) // 2])


def _bad_crc(tmp):
    """An uncompressed .npz with one byte of an array's data changed (the zip CRC no longer matches)."""
    np.savez(tmp / "crc.npz", test=np.zeros((50, 6), dtype=np.uint8))
    data = bytearray((tmp / "crc.npz").read_bytes())
    data[len(data) // 2] ^= 1
    (tmp / "crc.npz").write_bytes(bytes(data))


def _model(tmp, name, **arrays):
    np.savez(tmp / name, **{"W": np.zeros((6, 3)), "visible_bias": np.zeros(6), "hidden_bias": np.zeros(3), **arrays})


def _grid(tmp, name, **arrays):
    """A 3x4 grid MRF file (zero tables) with ``arrays`` replacing its tables."""
    tables = {"theta_unary": np.zeros((3, 4, 2)), "theta_h": np.zeros((3, 3, 2, 2)), "theta_v": np.zeros((2, 4, 2, 2))}
    np.savez(tmp / name, model_type="grid-mrf", **{**tables, **arrays})


def _json(tmp, name, obj):
    (tmp / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp / name).write_text(obj if isinstance(obj, str) else json.dumps(obj))


def _memory(env, gib):
    """The memory every size check sees as available (:func:`logzbench.utils.devices.available_memory`)."""
    env.setattr("logzbench.utils.devices.available_memory", lambda device="cpu": int(gib * 2**30))


def _text(tmp, name, data, env=None, gib=None):
    (tmp / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    if gib is not None:
        _memory(env, gib)


def _zip_bomb(tmp, name, mib):
    """A small zip archive holding one entry of ``mib`` MiB of zeros, deflated (about 1000 times smaller)."""
    import zipfile

    with zipfile.ZipFile(tmp / name, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/version", "3\n")
        with z.open("archive/data/0", "w", force_zip64=True) as fh:
            for _ in range(mib):
                fh.write(bytes(1 << 20))


def _torchscript(tmp, name):
    """A valid TorchScript energy (a 4-site binary quadratic) saved by ``save_torchscript``."""
    import torch

    from logzbench.models import EnergyModel
    from logzbench.models.source import save_torchscript

    class Quadratic(torch.nn.Module):
        def forward(self, x):
            return -(x * x).sum(dim=1)

    save_torchscript(EnergyModel(Quadratic(), 4, "binary"), tmp / name)


def _energy_file(tmp, name, dim):
    (tmp / name).write_text(
        "from logzbench.models import EnergyModel\n\n\n"
        "def make():\n"
        "    return EnergyModel(lambda x: -x.double().sum(dim=1), " + str(dim) + ", 'binary')\n"
    )


def _nothing(tmp, env):
    pass


def _dbn(tmp, name):
    from logzbench.models import DBN, save_model

    save_model(DBN.random([6, 3, 2]), tmp / name)


CASES = [
    # --- damaged or foreign data and model files
    (
        "data-truncated",
        lambda t, e: _truncate(t / "data.npz", t / "trunc.npz"),
        EST + ["--data", "trunc.npz"],
        ["trunc.npz", "not a readable .npz/.npy file"],
    ),
    (
        "train-data-truncated",
        lambda t, e: _truncate(t / "data.npz", t / "trunc.npz"),
        EST + ["--train-data", "trunc.npz", "--init", "base-rate"],
        ["trunc.npz", "not a readable .npz/.npy file"],
    ),
    # --- a user energy's transition (issue 39)
    (
        "transition-gwg-on-an-rbm",
        _nothing,
        AIS + ["--transition", "gwg"],
        ["transition gwg", "rbm model anneals with its own Gibbs sampler"],
    ),
    (
        "transition-dmala-on-a-continuous-energy",
        lambda t, e: _user(t),
        ["estimate", "user.py:exit_in_backward", "--estimator", "smc", "--transition", "dmala", "--json", "out.json"],
        ["transition dmala", "needs a discrete domain", "continuous"],
    ),
    (
        "sample-transition-gwg-on-an-rbm",
        _nothing,
        ["sample", "model.npz", "--n", "5", "--exact", "never", "--transition", "gwg", "--out", "s.npz"],
        ["transition gwg", "rbm model anneals with its own Gibbs sampler"],
    ),
    # --- the mixture reference (issue 38)
    (
        "mixture-without-train-data",
        _nothing,
        AIS + ["--init", "mixture"],
        ["--init mixture", "training rows", "--train-data"],
    ),
    (
        "mixture-components-above-rows",
        _nothing,
        AIS + ["--init", "mixture", "--train-data", "rows.npy", "--mixture-components", "9"],
        ["--mixture-components 9", "more than the 8 training rows"],
    ),
    (
        "mixture-components-without-mixture",
        _nothing,
        AIS + ["--init", "base-rate", "--train-data", "rows.npy", "--mixture-components", "2"],
        ["mixture_components", "init mixture only", "base-rate"],
    ),
    (
        "mixture-on-a-dbn",
        lambda t, e: _dbn(t, "dbn.npz"),
        ["estimate", "dbn.npz", "--estimator", "ais", "-K", "10", "--init", "mixture", "--train-data", "rows.npy"],
        ["--init mixture is not available for a dbn"],
    ),
    (
        "mixture-components-zero",
        _nothing,
        AIS + ["--init", "mixture", "--train-data", "rows.npy", "--mixture-components", "0"],
        ["mixture_components", ">= 1"],
    ),
    (
        "train-truncated",
        lambda t, e: _truncate(t / "data.npz", t / "trunc.npz"),
        ["train", "--data", "trunc.npz", "--out", "m2.npz", "--n-hidden", "3"],
        ["trunc.npz", "not a readable"],
    ),
    ("data-bad-crc", lambda t, e: _bad_crc(t), EST + ["--data", "crc.npz"], ["crc.npz", "not a readable", "CRC"]),
    (
        "data-garbage",
        lambda t, e: (t / "junk.npz").write_bytes(b"hello, not numpy\n" * 4),
        EST + ["--data", "junk.npz"],
        ["junk.npz", "not an .npz/.npy file"],
    ),
    (
        "data-empty-file",
        lambda t, e: (t / "nil.npy").write_bytes(b""),
        EST + ["--data", "nil.npy"],
        ["nil.npy", "not an .npz/.npy file", "empty"],
    ),
    (
        "data-objects",
        lambda t, e: np.savez(t / "obj.npz", test=np.array([{"a": 1}], dtype=object)),
        EST + ["--data", "obj.npz"],
        ["obj.npz", "Python objects"],
    ),
    ("data-is-directory", _nothing, EST + ["--data", "empty"], ["empty", "directory"]),
    # --- smc's options (tests/test_smc.py)
    ("smc-ess-threshold-above-1", _nothing, SMC + ["--ess-threshold", "1.5"], ["ess_threshold", "(0, 1)"]),
    ("smc-ess-threshold-0", _nothing, SMC + ["--ess-threshold", "0"], ["ess_threshold", "(0, 1)"]),
    ("smc-one-replica", _nothing, SMC + ["--replicas", "1"], ["replicas", ">= 2"]),
    ("smc-adaptive-one-chain", _nothing, SMC + ["--chains", "1"], ["chains >= 2", "conditional ESS"]),
    ("smc-linear-without-steps", _nothing, SMC + ["--schedule", "linear"], ["'linear'", "needs a number of steps K"]),
    (
        "model-garbage",
        lambda t, e: (t / "junk.npz").write_bytes(b"hello, not numpy\n" * 4),
        ["estimate", "junk.npz", "--estimator", "exact"],
        ["junk.npz", "not an .npz file"],
    ),
    (
        "model-truncated",
        lambda t, e: _truncate(t / "model.npz", t / "half.npz"),
        ["estimate", "half.npz", "--estimator", "exact"],
        ["half.npz", "not a readable .npz model file"],
    ),
    ("model-is-npy", _nothing, ["estimate", "rows.npy", "--estimator", "exact"], ["rows.npy", "single .npy array"]),
    (
        "pt-one-temperature",
        _nothing,
        ["estimate", "model.npz", "--estimator", "pt", "--temperatures", "1", "--json", "out.json"],
        ["temperatures", ">= 2", "got 1"],
    ),
    (
        "model-weight-overflow",
        lambda t, e: _model(t, "big.npz", W=np.full((6, 3), 5.52e21)),
        ["estimate", "big.npz", "--estimator", "exact"],
        ["big.npz", "'W'", "5.52e+21 > 1e+15"],
    ),
    (
        "model-bias-overflow",
        lambda t, e: _model(t, "big.npz", hidden_bias=np.full(3, 2e30)),
        ["estimate", "big.npz", "--estimator", "exact"],
        ["big.npz", "'hidden_bias'", "2e+30 > 1e+30"],
    ),
    # --- output paths, checked before anything is loaded
    ("json-is-directory", _nothing, EST + ["--json", "empty"], ["--json", "empty", "is a directory"]),
    ("json-trailing-slash", _nothing, EST + ["--json", "new/"], ["--json", "new/", "directory"]),
    ("json-is-model", _nothing, EST + ["--json", "model.npz"], ["--json", "model.npz", "model file", "overwrite"]),
    ("json-is-data", _nothing, EST + ["--data", "rows.npy", "--json", "./rows.npy"], ["--json", "--data", "overwrite"]),
    (
        "log-weights-is-train-data",
        _nothing,
        EST + ["--train-data", "rows.npy", "--log-weights", "rows.npy"],
        ["--log-weights", "--train-data", "overwrite"],
    ),
    (
        "log-weights-under-file",
        _nothing,
        EST + ["--json", "ok.json", "--log-weights", "file.txt/lw.npz"],
        ["--log-weights", "file.txt", "not a directory"],
    ),
    (
        "json-and-log-weights-same",
        _nothing,
        EST + ["--json", "a.npz", "--log-weights", "a.npz"],
        ["--log-weights", "--json", "same file"],
    ),
    (
        "prepare-out-under-file",
        _nothing,
        ["prepare", "digits", "--out", "file.txt/d.npz"],
        ["--out", "file.txt", "not a directory"],
    ),
    ("prepare-out-is-directory", _nothing, ["prepare", "digits", "--out", "empty"], ["--out", "is a directory"]),
    ("train-out-under-file", _nothing, TRAIN + ["--out", "file.txt/m.npz"], ["--out", "file.txt", "not a directory"]),
    ("train-out-is-data", _nothing, TRAIN + ["--out", "data.npz"], ["--out", "data.npz", "--data", "overwrite"]),
    (
        "train-history-is-out",
        _nothing,
        TRAIN + ["--out", "m2.npz", "--history", "m2.npz"],
        ["--history", "--out", "same file"],
    ),
    (
        "report-out-is-file",
        lambda t, e: _json(t, "est.json", {"estimator": "exact"}),
        ["report", "est.json", "--out", "file.txt"],
        ["--out", "file.txt", "not a directory"],
    ),
    (
        "report-out-under-file",
        lambda t, e: _json(t, "est.json", {"estimator": "exact"}),
        ["report", "est.json", "--out", "file.txt/rep"],
        ["--out", "file.txt", "not a directory"],
    ),
    # --- report inputs
    (
        "report-list-of-numbers",
        lambda t, e: _json(t, "list.json", [1, 2, 3]),
        ["report", "list.json", "--out", "rep"],
        ["list.json", "not an estimate record"],
    ),
    (
        "report-malformed-json",
        lambda t, e: _json(t, "bad.json", "{not json"),
        ["report", "bad.json", "--out", "rep"],
        ["bad.json", "not valid JSON"],
    ),
    (
        "report-malformed-in-tree",
        lambda t, e: _json(t, "res/a/bad.json", "[1,"),
        ["report", "res", "--out", "rep"],
        ["bad.json", "not valid JSON"],
    ),
    (
        "report-foreign-json",
        lambda t, e: _json(t, "other.json", {"a": 1}),
        ["report", "other.json", "--out", "rep"],
        ["other.json", "not an estimate record"],
    ),
    ("report-empty-directory", _nothing, ["report", "empty", "--out", "rep"], ["no estimate records in empty"]),
    (
        "report-only-foreign-json",
        lambda t, e: _json(t, "res/report.json", {"n_runs": 0}),
        ["report", "res", "--out", "rep"],
        ["no estimate records in res"],
    ),
    ("report-missing-input", _nothing, ["report", "nope.json", "--out", "rep"], ["nope.json"]),
    # --- prepare settings
    (
        "threshold-above-1",
        _nothing,
        ["prepare", "digits", "--out", "d.npz", "--binarize", "threshold", "--threshold", "2"],
        ["threshold 2.0", "[0, 1)"],
    ),
    (
        "threshold-1",
        _nothing,
        ["prepare", "digits", "--out", "d.npz", "--binarize", "threshold", "--threshold", "1"],
        ["threshold 1.0", "[0, 1)"],
    ),
    (
        "threshold-negative",
        _nothing,
        ["prepare", "digits", "--out", "d.npz", "--binarize", "threshold", "--threshold", "-0.5"],
        ["threshold -0.5"],
    ),
    (
        "threshold-nan",
        _nothing,
        ["prepare", "digits", "--out", "d.npz", "--binarize", "threshold", "--threshold", "nan"],
        ["threshold nan", "[0, 1)"],
    ),
    (
        "mirror-missing",
        _nothing,
        ["prepare", "mnist", "--out", "d.npz", "--mirror", "no-such-mirror"],
        ["data mirror", "no-such-mirror", "does not exist"],
    ),
    (
        "mirror-is-file",
        _nothing,
        ["prepare", "mnist", "--out", "d.npz", "--mirror", "file.txt"],
        ["data mirror", "file.txt", "not a directory"],
    ),
    (
        "mirror-env-missing",
        lambda t, e: e.setenv("LOGZBENCH_DATA_MIRROR", str(t / "no-such-mirror")),
        ["prepare", "mnist", "--out", "d.npz"],
        ["no-such-mirror", "LOGZBENCH_DATA_MIRROR", "does not exist"],
    ),
    # --- user code (issue 37, item 8): FILE.py:NAME (USER_ENERGY below) exiting, failing or without mass
    (
        "user-exit-0-in-name",
        lambda t, e: _user(t),
        ["estimate", "user.py:exit_in_name", "--estimator", "exact", "--json", "out.json"],
        ["user.py:exit_in_name()", "SystemExit: 0"],
    ),
    (
        "user-exit-3-in-log-f",
        lambda t, e: _user(t),
        ["estimate", "user.py:exit_in_log_f", "--estimator", "exact", "--json", "out.json"],
        ["log_f (log_f)", "SystemExit: 3"],
    ),
    (
        "user-exit-at-import",
        lambda t, e: (t / "exits.py").write_text("import sys\nsys.exit(0)\n"),
        ["estimate", "exits.py:model", "--estimator", "exact", "--json", "out.json"],
        ["exits.py", "raised on import", "SystemExit: 0"],
    ),
    (
        "user-exit-in-autograd-backward",  # outside every call the loader wraps: the command line's last net
        lambda t, e: _user(t),
        ["estimate", "user.py:exit_in_backward", "--estimator", "hais", "--steps", "3", "--json", "out.json"],
        ["user code raised SystemExit(4)"],
    ),
    (
        "user-reference-sample-exits",
        lambda t, e: _user(t),
        ["estimate", "user.py:reference_exits", "--estimator", "ais", "--steps", "3", "--json", "out.json"],
        ["reference.sample (ExitingReference)", "SystemExit: 1"],
    ),
    (
        "user-reference-raises-in-ais",
        lambda t, e: _user(t),
        [
            "estimate",
            "user.py:bad_reference",
            "--estimator",
            "ais",
            "--steps",
            "3",
            "--chains",
            "8",
            "--json",
            "o.json",
        ],
        ["reference.log_prob (PickyReference)", "ZeroDivisionError: the reference failed"],
    ),
    (
        "user-continuous-reference-raises-in-hais",
        lambda t, e: _user(t),
        [
            "estimate",
            "user.py:bad_gaussian",
            "--estimator",
            "hais",
            "--steps",
            "3",
            "--chains",
            "8",
            "--json",
            "o.json",
        ],
        ["reference.log_prob (PickyGaussian)", "ZeroDivisionError: the reference failed"],
    ),
    (
        "user-no-mass-exact",
        lambda t, e: _user(t),
        ["estimate", "user.py:no_mass", "--estimator", "exact", "--json", "out.json"],
        ["no mass", "log Z = -inf", "every one of its states has log f = -inf"],
    ),
    *(
        (
            f"user-log-f-returns-{dtype}",
            lambda t, e: _user(t),
            ["estimate", f"user.py:returns_{dtype}", "--estimator", "exact", "--json", "out.json"],
            [f"dtype torch.{dtype}", "expected float32 or float64"],
        )
        for dtype in ("float16", "bfloat16", "int64", "complex64")
    ),
    # --- an exact conditional (issue 39, item 2): refused at load time, before any estimate
    *(
        (
            f"user-conditional-{name.replace('_', '-')}",
            lambda t, e: _user(t),
            ["estimate", f"user.py:{name}", "--estimator", "ais", "-K", "10", "--json", "out.json"],
            words,
        )
        for name, words in (
            ("wrong_conditional", ["user.py:wrong_conditional", "conditional (halved) is wrong", "log-odds 0.5"]),
            ("conditional_shape", ["conditional (three_logits) returned shape (4, 3)", "expected (4, 2)"]),
            ("colouring_not_covering", ["user.py:colouring_not_covering()", "site 3 is in no class"]),
            ("colouring_repeats", ["colouring: site 1 is in classes 0 and 1"]),
            ("colouring_couples", ["colouring: class 0 couples sites 0 and 1", "must not interact"]),
        )
    ),
    # --- sizes and messages (issue 37, items 9-10)
    (
        "potts-huge-state-index",
        lambda t, e: _text(t, "big.txt", "# one typo\nh 0 999999 0.1\n"),
        ["estimate", "big.txt", "--estimator", "exact"],
        ["big.txt", "state index 999999 (line 2)", "q = 1000000", "TiB of memory", "available", "give the job more"],
    ),
    (
        "potts-large-site-index",
        lambda t, e: _text(t, "wide.txt", "h 20000 1 0.1\n", e, gib=16),
        ["estimate", "wide.txt", "--estimator", "exact"],
        ["wide.txt", "site index 20000 (line 1)", "L = 20001", "GiB of memory", "of the 16.0 GiB available"],
    ),
    (
        "potts-only-comments",
        lambda t, e: _text(t, "c.txt", "# a header\n\n# nothing else\n"),
        ["estimate", "c.txt", "--estimator", "exact"],
        ["c.txt", "no parameters", "only comments"],
    ),
    (
        "potts-unknown-line",
        lambda t, e: _text(t, "x.txt", "X 0 1 0.1\n"),
        ["estimate", "x.txt", "--estimator", "exact"],
        ["x.txt, line 1", "unknown parameter 'X'"],
    ),
    (
        "potts-not-utf8",
        lambda t, e: _text(t, "b.txt", b"h 0 1 0.1\nh 1 \xff 0.2\n"),
        ["estimate", "b.txt", "--estimator", "exact"],
        ["b.txt, line 2", "not a text file", "0xff"],
    ),
    (
        "potts-value-1e308",
        lambda t, e: _text(t, "v.txt", "J 0 1 0 1 0.5\nJ 0 2 1 0 1e308\nh 0 1 1e308\n"),
        ["estimate", "v.txt", "--estimator", "exact"],
        ["v.txt, line 2", "'1e308'", "1e+30"],
    ),
    (
        "potts-npz-inf",
        lambda t, e: np.savez(
            t / "p.npz",
            model_type="potts",
            h=np.zeros((3, 2)),
            J=np.where(np.eye(3)[:, :, None, None] + np.zeros((3, 3, 2, 2)), 0, np.inf),
        ),
        ["estimate", "p.npz", "--estimator", "exact"],
        ["p.npz", "'J' contains NaN or inf", "J[0, 1, 0, 0] = inf"],
    ),
    # --- the clustered source (issue 38, item 5)
    (
        "prepare-clustered-option-elsewhere",
        _nothing,
        ["prepare", "digits", "--prototypes", "3", "--out", "d.npz"],
        ["--prototypes does not apply to digits", "it applies to clustered"],
    ),
    (
        "prepare-clustered-no-width",
        _nothing,
        ["prepare", "clustered", "--out", "d.npz"],
        ["clustered: n_visible must be a positive integer"],
    ),
    (
        "prepare-clustered-weights",
        _nothing,
        ["prepare", "clustered", "--n-visible", "8", "--prototypes", "3", "--weights", "1", "2", "--out", "d.npz"],
        ["weights must be 3 positive numbers"],
    ),
    # --- grid MRF files (issue 38, item 5)
    (
        "grid-wrong-shape",
        lambda t, e: _grid(t, "g.npz", theta_h=np.zeros((3, 4, 2, 2))),
        ["estimate", "g.npz", "--estimator", "exact"],
        ["g.npz", "'theta_h' has shape (3, 4, 2, 2)", "expected (3, 3, 2, 2)"],
    ),
    (
        "grid-nan",
        lambda t, e: _grid(t, "g.npz", theta_v=np.full((2, 4, 2, 2), np.nan)),
        ["estimate", "g.npz", "--estimator", "ais", "--steps", "5"],
        ["g.npz", "'theta_v' contains NaN (32 entries)"],
    ),
    (
        "grid-missing-table",
        lambda t, e: np.savez(t / "g.npz", model_type="grid-mrf", theta_unary=np.zeros((3, 4, 2))),
        ["estimate", "g.npz", "--estimator", "exact"],
        ["g.npz", "missing array(s) ['theta_h', 'theta_v']"],
    ),
    (
        "grid-too-wide-for-exact",
        lambda t, e: _grid(
            t,
            "g.npz",
            theta_unary=np.zeros((21, 21, 2)),
            theta_h=np.zeros((21, 20, 2, 2)),
            theta_v=np.zeros((20, 21, 2, 2)),
        ),
        ["estimate", "g.npz", "--estimator", "exact"],
        ["21x21 grid", "min(H, W) <= 20", "ais"],
    ),
    (
        "grid-rows-wrong-width",
        lambda t, e: _grid(t, "g.npz"),
        ["estimate", "g.npz", "--estimator", "exact", "--data", "rows.npy"],
        ["test data has 6 columns", "rows of 12 binary values"],
    ),
    (
        "steps-1e10",
        lambda t, e: _memory(e, 16),
        ["estimate", "model.npz", "--estimator", "ais", "--steps", "10000000000"],
        ["K (--steps) = 10000000000", "298.0 GiB", "of the 16.0 GiB available", "use a smaller K"],
    ),
    (
        "pt-zip-bomb",
        lambda t, e: _zip_bomb(t, "bomb.pt", 64),
        ["estimate", "bomb.pt", "--estimator", "exact"],
        ["bomb.pt", "unpack to 64.0 MiB", "zip bomb"],
    ),
    (
        "pt-above-memory",
        lambda t, e: (_torchscript(t, "net.pt"), _memory(e, 2**-20)),
        ["estimate", "net.pt", "--estimator", "exact"],
        ["net.pt", "not loaded", "of memory", "of the 1.0 KiB available"],
    ),
    (
        "npz-bomb-above-memory",
        lambda t, e: (_zip_bomb(t, "bomb.npz", 64), _memory(e, 0.0625)),
        ["estimate", "bomb.npz", "--estimator", "exact"],
        ["bomb.npz", "unpack to 64.0 MiB", "of the 64.0 MiB available"],
    ),
    (
        "data-npz-bomb-above-memory",
        lambda t, e: (_zip_bomb(t, "rows.npz", 64), _memory(e, 0.0625)),
        EST + ["--data", "rows.npz"],
        ["rows.npz", "not loaded", "unpack to 64.0 MiB", "of the 64.0 MiB available"],
    ),
    (
        "energy-dim-1e6-chains",
        lambda t, e: (_energy_file(t, "wide.py", 10**6), _memory(e, 1)),
        ["estimate", "wide.py:make", "--estimator", "ais", "--steps", "2"],
        ["chains = 100", "2000000 units", "GiB of memory", "use fewer chains"],
    ),
    # --- cost (issue 37, item 9)
    (  # fits in memory with 10 chains, but a sweep calls log_f once per site: 10^7 calls on 10^8 states
        "energy-dim-1e7-time",
        lambda t, e: (_energy_file(t, "wide.py", 10**7), _memory(e, 64)),
        ["estimate", "wide.py:make", "--estimator", "ais", "--chains", "10"],
        [
            "ais on this energy-binary",
            "would take about",
            "1000 sweeps of 10 chains",
            "10000000 calls of log_f",
            "over the budget of 86400 s",
            "--max-seconds",
            "max_seconds=",
        ],
    ),
    # --- the tuned schedule (issue 38, item 4): a K it can double to, a start that can double, not in the sandwich
    (
        "tuned-K-too-small",
        lambda t, e: None,
        ["estimate", "model.npz", "--estimator", "ais", "--schedule", "tuned", "--steps", "10"],
        ["K (--steps) = 10", "too small to double from", "K >= 16"],
    ),
    (
        "tuned-too-many-rounds",
        lambda t, e: None,
        ["estimate", "model.npz", "--estimator", "ais", "--schedule", "tuned", "--steps", "64", "--tune-rounds", "4"],
        ["4 round(s)", "K >= 128", "fewer tune_rounds"],
    ),
    (
        "tuned-start-sm14500",
        lambda t, e: None,
        ["estimate", "model.npz", "--estimator", "ais", "--schedule", "tuned", "--tuned-start", "sm14500"],
        ["tuned_start (--tuned-start) 'sm14500'", "length of its own", "cannot double"],
    ),
    (
        "tuned-start-file",
        lambda t, e: np.save(t / "betas.npy", np.linspace(0, 1, 11)),
        ["estimate", "model.npz", "--estimator", "ais", "--schedule", "tuned", "--tuned-start", "betas.npy"],
        ["'betas.npy'", "length of its own"],
    ),
    (
        "tuned-one-pilot-chain",
        lambda t, e: None,
        ["estimate", "model.npz", "--estimator", "ais", "--schedule", "tuned", "--pilot-chains", "1"],
        ["tuned schedule needs pilot_chains >= 2"],
    ),
    (
        "tuned-sandwich",
        lambda t, e: None,
        ["estimate", "model.npz", "--estimator", "sandwich", "--schedule", "tuned"],
        ["sandwich doubles K itself", "tuned"],
    ),
]

#: the user's file of the ``user-*`` cases: binary energies on 4 sites, a continuous one on 2 coordinates
USER_ENERGY = """
import math
import sys

import torch
from logzbench.models.energy import EnergyModel


def _sum(x):
    return x.double().sum(dim=1)


def exit_in_name():
    sys.exit(0)


def exit_in_log_f():
    def log_f(x):
        if x.shape[0] > 4:  # past the load-time check on 4 states
            sys.exit(3)
        return _sum(x)

    return EnergyModel(log_f, 4, "binary")


class ExitInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        sys.exit(4)


def exit_in_backward():
    return EnergyModel(lambda x: -(ExitInBackward.apply(x.double()) ** 2).sum(dim=1), 2, "continuous")


class PickyReference:  # uniform on {0, 1}^4; log_prob fails past the load-time check
    def log_prob(self, x):
        if x.shape[0] > 4:
            raise ZeroDivisionError("the reference failed")
        return torch.full((x.shape[0],), -4 * math.log(2.0), dtype=torch.float64)

    def sample(self, n, generator):
        return torch.randint(0, 2, (n, 4), generator=generator).float()


class ExitingReference(PickyReference):
    def sample(self, n, generator):
        sys.exit(1)


class PickyGaussian:  # standard normal on R^2; log_prob fails past the load-time check
    def log_prob(self, x):
        if x.shape[0] > 4:
            raise ZeroDivisionError("the reference failed")
        return -0.5 * (x.double() ** 2).sum(dim=1) - math.log(2 * math.pi)

    def sample(self, n, generator):
        return torch.randn(n, 2, generator=generator, dtype=torch.float64)


def bad_reference():
    return EnergyModel(_sum, 4, "binary", reference=PickyReference())


def reference_exits():
    return EnergyModel(_sum, 4, "binary", reference=ExitingReference())


def bad_gaussian():
    return EnergyModel(lambda x: -(x.double() ** 2).sum(dim=1), 2, "continuous", reference=PickyGaussian())


def no_mass():
    return EnergyModel(lambda x: torch.full((x.shape[0],), -math.inf, dtype=torch.float64), 4, "binary")


def _ones(x, c):  # the conditional of _sum's independent sites: log-odds 1 each
    return torch.ones(x.shape[0], 2, dtype=torch.float64)


def halved(x, c):
    return _ones(x, c) / 2


def _with(conditional, colouring, log_f=_sum):
    return EnergyModel(log_f, 4, "binary", conditional=conditional, colouring=colouring)


def wrong_conditional():
    return _with(halved, [[0, 1], [2, 3]])


def three_logits(x, c):  # one too many for a class of two sites
    return torch.zeros(x.shape[0], 3)


def conditional_shape():
    return _with(three_logits, [[0, 1], [2, 3]])


def colouring_not_covering():
    return _with(_ones, [[0, 1], [2]])


def colouring_repeats():
    return _with(_ones, [[0, 1], [1, 2, 3]])


def colouring_couples():
    return _with(_ones, [[0, 1], [2, 3]], log_f=lambda x: _sum(x) + x[:, 0].double() * x[:, 1].double())


def _returning(dtype):
    return EnergyModel(lambda x: x.double().sum(dim=1).to(dtype), 4, "binary")


def returns_float16():
    return _returning(torch.float16)


def returns_bfloat16():
    return _returning(torch.bfloat16)


def returns_int64():
    return _returning(torch.int64)


def returns_complex64():
    return _returning(torch.complex64)
"""


def _user(tmp):
    (tmp / "user.py").write_text(USER_ENERGY)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory with the tiny inputs (see the module docstring)."""
    monkeypatch.chdir(tmp_path)
    write_tiny_inputs(tmp_path)
    (tmp_path / "file.txt").write_text("a regular file\n")
    (tmp_path / "empty").mkdir()
    return tmp_path


@pytest.mark.parametrize("setup, argv, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_nothing_written(workdir, monkeypatch, capsys, setup, argv, words):
    setup(workdir, monkeypatch)
    assert_refused(main, argv, words, workdir, capsys)


def test_outputs_in_new_folders_and_reruns_work(workdir, capsys):
    """The normal case: outputs in folders that do not exist yet are created; an existing output of a
    previous run is replaced; a report reads a tree holding an estimate and other JSON files."""
    for _ in range(2):  # the second run replaces the first run's files
        rc = main(EST + ["--data", "data.npz", "--json", "res/est/exact.json", "--log-weights", "res/lw/exact.npz"])
        out, err = capsys.readouterr()
        assert rc == 0, err
    printed = json.loads(out)
    assert json.loads((workdir / "res/est/exact.json").read_text())["log_z"] == printed["log_z"]
    assert (workdir / "res/lw/exact.npz").is_file()
    _json(workdir, "res/models/model.json", {"family": "rbm"})  # a foreign JSON in the tree: skipped
    rc = main(["report", "res", "--out", "out/report"])
    assert rc == 0, capsys.readouterr().err
    assert (workdir / "out/report/per_run.csv").is_file()
    rc = main(TRAIN + ["--out", "models/new/m.npz", "--history", "models/new/m.csv", "--batch-size", "4"])
    assert rc == 0, capsys.readouterr().err
    assert (workdir / "models/new/m.npz").is_file() and (workdir / "models/new/m.csv").is_file()
