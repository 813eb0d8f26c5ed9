import itertools
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from logzbench.models import BinaryRBM

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def pytest_configure(config):
    """Under pytest-xdist, each worker's torch gets its share of the CPUs (``-n 2`` on 2 CPUs: one thread each).

    torch starts with one intra-op thread per CPU.  Two workers with two threads each on two CPUs wait for
    each other's threads at every small tensor op, ten times slower and more (docs/benchmarks.md, "The test
    suite"; the oversubscription :mod:`logzbench.utils.threads` avoids for estimates).  The processes a test
    starts inherit the share through ``OMP_NUM_THREADS`` unless it is set already; a test that sets its own
    count still does; a serial run keeps torch's default."""
    import os

    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        from logzbench.utils.threads import usable_cpus

        share = min(torch.get_num_threads(), max(1, usable_cpus() // int(workers)))
        torch.set_num_threads(share)
        os.environ.setdefault("OMP_NUM_THREADS", str(share))  # the processes a test starts: the same share


def pytest_collection_modifyitems(config, items):
    """Tests marked ``start_first`` (the default suite's longest, each a minute or more of Snakemake or MLflow
    processes) run ahead of the rest, the rest in their usual order.  pytest-xdist hands tests out in this
    order: started late, one of them would end the run with one worker busy and the other idle."""
    items.sort(key=lambda item: item.get_closest_marker("start_first") is None)  # a stable sort


def write_tiny_inputs(root: Path) -> None:
    """The command-line tests' tiny inputs in ``root``: ``model.npz`` (a 6-3 RBM), ``rows.npy`` (8 binary
    rows of 6) and ``data.npz`` (a prepared dataset: those rows as train, the first 4 as test)."""
    import json

    from logzbench.models import save_model

    save_model(BinaryRBM.random(6, 3, generator=torch.Generator().manual_seed(0)), root / "model.npz")
    rows = np.random.default_rng(0).integers(0, 2, (8, 6)).astype(np.uint8)
    np.save(root / "rows.npy", rows)
    np.savez_compressed(
        root / "data.npz", train=rows, test=rows[:4], meta=np.asarray(json.dumps({"dataset": "tiny", "n_features": 6}))
    )


def all_states(n: int) -> torch.Tensor:
    """Every binary vector of length n, shape (2^n, n), float64."""
    return torch.tensor(list(itertools.product([0.0, 1.0], repeat=n)), dtype=torch.float64)


def yaml_alias_bomb(levels: int = 9, anchor: str = "b") -> str:
    """A YAML flow sequence of 9**levels numbers written in a few hundred characters: each level's anchor
    repeated nine times in the next (the anchors defined inline, where they are first used)."""
    text = f"&{anchor}0 [0, 1, 2, 3, 4, 5, 6, 7, 8]"
    for i in range(1, levels):
        text = f"&{anchor}{i} [{text}, " + ", ".join([f"*{anchor}{i - 1}"] * 8) + "]"
    return text


def random_rbm(nv: int, nh: int, seed: int, scale: float = 1.0, bias_scale: float = 0.5) -> BinaryRBM:
    g = torch.Generator().manual_seed(seed)
    return BinaryRBM.random(nv, nh, scale=scale, bias_scale=bias_scale, generator=g)


def model_samples(rbm: BinaryRBM, n: int, seed: int, sweeps: int = 300) -> torch.Tensor:
    """Approximate model samples by long Gibbs chains (test data for small models)."""
    g = torch.Generator().manual_seed(seed)
    v0 = torch.bernoulli(torch.full((n, rbm.n_visible), 0.5), generator=g)
    return rbm.gibbs(v0, g, n_sweeps=sweeps)


@pytest.fixture
def small_rbm() -> BinaryRBM:
    return random_rbm(12, 8, seed=0)


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"offline data mirror not found at {SHARED_DATA}")
    return SHARED_DATA


def brute_log_z(rbm: BinaryRBM) -> float:
    v = all_states(rbm.n_visible)
    h = all_states(rbm.n_hidden)
    W = rbm.W.double()
    E = (v @ rbm.visible_bias.double())[:, None] + (h @ rbm.hidden_bias.double())[None, :] + v @ W @ h.T
    return float(torch.logsumexp(E.reshape(-1), 0))


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No network, an empty per-test cache and no mirror from the environment; returns the URLs tried."""
    from logzbench.data import download

    calls = []

    def no_network(url, dest):
        calls.append(url)
        raise OSError("network disabled in tests")

    monkeypatch.setattr(download, "_download", no_network)
    monkeypatch.setenv(download.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(download.MIRROR_ENV, raising=False)
    return calls


CLUSTERED_N_VISIBLE = 12


def clustered_rows(n: int, rng: np.random.Generator, noise: float = 0.05) -> np.ndarray:
    """Rows of 4 fixed random 12-bit prototypes, each bit flipped with probability ``noise``.

    The data entropy is ``log 4 + 12 H(0.05) = 3.77`` nats per row; the factorial base-rate
    model scores about -6.7 nats.  Training tests fit small models to these.
    """
    prototypes = (np.random.default_rng(0).random((4, CLUSTERED_N_VISIBLE)) < 0.5).astype(np.float32)
    x = prototypes[rng.integers(4, size=n)]
    return np.where(rng.random(x.shape) < noise, 1.0 - x, x).astype(np.float32)


@pytest.fixture(scope="module")
def clustered_data():
    """(train, test): 2,000 and 500 clustered 12-bit rows."""
    rng = np.random.default_rng(123)
    return clustered_rows(2000, rng), clustered_rows(500, rng)


@pytest.fixture
def one_thread():
    """One torch thread for the test (small batched tensor ops are much faster single-threaded on a
    shared CPU); the previous count is restored afterwards."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


OTHER_UID = 65534  # "nobody": the second local user of the security tests


class OtherUser:
    """A second local user (uid/gid 65534) for the security tests, and a directory both users can
    write to, like the machine's /tmp (``shared``: mode 1777).  ``run(argv)`` runs a system program
    as that user; ``call(fn, *args)`` runs a Python function as that user in a child forked from
    this process (the interpreter may lie where the other user cannot read it, under /root), and
    returns ``(exit status, output)``; ``spawn(fn, *args)`` starts one and returns its pid."""

    def __init__(self, shared):
        self.shared = shared

    def run(self, argv, **kw):
        import subprocess

        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 120)
        kw.setdefault("cwd", "/")
        return subprocess.run([str(a) for a in argv], user=OTHER_UID, group=OTHER_UID, extra_groups=[], **kw)

    def _fork(self, fn, args, out_fd):
        import io
        import os
        import sys
        import traceback

        pid = os.fork()
        if pid:
            return pid
        status = 1
        try:
            os.dup2(out_fd, 1)
            os.dup2(out_fd, 2)
            sys.stdout = sys.stderr = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
            os.setgroups([])
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            os.chdir("/")
            result = fn(*args)
            status = result if isinstance(result, int) else 0
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
            finally:
                os._exit(status)

    def call(self, fn, *args, timeout=120):
        import os
        import select
        import signal
        import time

        r, w = os.pipe()
        pid = self._fork(fn, args, w)
        os.close(w)
        out, deadline = b"", time.monotonic() + timeout
        while True:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                break
            chunk = os.read(r, 65536)
            if not chunk:
                break
            out += chunk
        os.close(r)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), out.decode(errors="replace")

    def spawn(self, fn, *args):
        import os

        fd = os.open(os.devnull, os.O_WRONLY)
        try:
            return self._fork(fn, args, fd)
        finally:
            os.close(fd)


@pytest.fixture
def other_user():
    """A second local user (see :class:`OtherUser`); skips with the reason where the tests cannot
    play one (not root)."""
    import os
    import shutil
    import tempfile

    if not hasattr(os, "getuid") or os.getuid() != 0:
        pytest.skip("playing a second user needs root (to drop to uid 65534); not root here")
    shared = Path(tempfile.mkdtemp(prefix="logzbench-shared-", dir="/tmp"))
    shared.chmod(0o1777)
    user = OtherUser(shared)
    probe = user.run(["id", "-u"])
    if probe.returncode != 0 or probe.stdout.strip() != str(OTHER_UID):
        shutil.rmtree(shared, ignore_errors=True)
        pytest.skip(f"cannot run a process as uid {OTHER_UID}: {probe.stderr.strip() or probe.stdout.strip()}")
    yield user
    shutil.rmtree(shared, ignore_errors=True)


# --------------------------------------------------------------------------- children a test signals
#: the signals a test sends to a child it starts (Ctrl-C's SIGINT, a terminal's SIGQUIT and SIGHUP, a plain
#: ``kill``'s SIGTERM), each expecting the child's own handling or the default action
FOREGROUND_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM)


def foreground_signals() -> None:
    """``preexec_fn`` for a child that a test signals: the child starts with the default disposition of
    every one of :data:`FOREGROUND_SIGNALS`, none of them blocked, as under a user's foreground shell.

    An ignored signal stays ignored across ``exec``: a background job of a non-interactive shell
    (``pytest ... &`` in a script or a CI step) starts with SIGINT and SIGQUIT ignored and ``nohup``
    ignores SIGHUP, so without this a Snakemake the test interrupts inherits the ignoring, finishes its
    run and exits 0.  (``Popen``'s ``restore_signals`` resets only SIGPIPE, SIGXFZ and SIGXFSZ.)"""
    for signum in FOREGROUND_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FOREGROUND_SIGNALS)


# --------------------------------------------------------------------------- the command line's refusals
def tree_snapshot(root) -> dict:
    """Every file (contents, size, mtime, inode), symlink (target) and folder under ``root``, by lstat:
    equal before and after a command when it wrote, changed and removed nothing."""
    import hashlib
    import os

    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir",)
            elif os.path.isfile(p):
                with open(p, "rb") as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
                out[rel] = ("file", st.st_size, st.st_mtime_ns, st.st_ino, digest)
            else:
                out[rel] = ("special", st.st_mode)
    return out


def assert_refused(main, argv, words, root, capsys) -> None:
    """``main(argv)`` (the ``logzbench`` command line) refuses as the README promises: exit status 2,
    one line on stderr, ``logzbench <command>: error: ...`` holding every one of ``words``, nothing on
    stdout, no traceback, and nothing under ``root`` written, changed or removed."""
    capsys.readouterr()  # what a case's setup printed
    before = tree_snapshot(root)
    rc = main(list(argv))
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"logzbench {argv[0]}: error: "), err
    for word in words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"
    assert out == ""
    assert tree_snapshot(root) == before  # nothing created, changed or removed


# --------------------------------------------------------------------------- headless Chromium (browser tests)
#: the flags of every headless Chromium the browser tests start: no sandbox (root in CI), no GPU, no first-run
#: prompts, a profile of the test's own
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--mute-audio",
)


def chromium_binary() -> str | None:
    """The first Chromium (or Chrome) on the PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    """Chromium's path; the test skips where there is none."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("chromium is not installed: the browser tests need it (Debian: apt-get install -y chromium)")
    return binary


def headless(
    chromium: str, target: str, profile: Path, *args: str, size: tuple[int, int], budget_ms: int, timeout: float = 180
) -> subprocess.CompletedProcess:
    """One headless Chromium run on ``target`` (a URL) with a fresh profile (no remembered UI state) and a
    window of ``size``; ``args`` are e.g. ``--dump-dom`` or ``--screenshot=PATH``."""
    shutil.rmtree(profile, ignore_errors=True)
    cmd = [
        chromium,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={size[0]},{size[1]}",
        f"--virtual-time-budget={budget_ms}",
        *args,
        target,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def short_dir():
    """A fresh directory at a short path (``/tmp/lz...``), removed at the end: a warm directory whose
    sockets fit a Unix socket's 107 bytes however deep pytest's temporary directories are (pytest-xdist
    adds a level, and the basetemp's number grows with every session on a developer's machine)."""
    d = Path(tempfile.mkdtemp(prefix="lz"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def chi_square_p(counts: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square goodness-of-fit p-value of ``counts`` against ``probs`` (a sampler against enumeration), cells
    expecting fewer than 5 pooled into one."""
    from scipy import stats

    keep = probs * counts.sum() >= 5
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(probs[keep], probs[~keep].sum()) * counts.sum()
    obs, exp = obs[exp > 0], exp[exp > 0]
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def write_estimate_record(root, settings: dict, res, stem: str):
    """One estimate's files under ``root/results/estimates/<model>/<estimator>/`` (``<stem>.json`` and
    ``<stem>.npz``), as :func:`logzbench.pipeline.jobs.run_estimate` writes them, for report tests; returns the
    JSON file's path."""
    import json

    from logzbench.tracking import estimate_key

    d = Path(root) / "results" / "estimates" / settings["model"] / settings["estimator"]
    d.mkdir(parents=True, exist_ok=True)
    key = estimate_key(
        settings["model"], settings["estimator"], settings.get("K"), settings.get("init"), settings.get("seed")
    )
    record = {
        "key": key,
        **settings,
        "code_version": "test",
        "arrays": str(d / f"{stem}.npz"),
        "sweep_stems": [stem],
        "result": res.to_dict(),
        "started_at": "2026-11-25T10:00:00+00:00",
        "finished_at": "2026-11-25T10:00:05+00:00",
    }
    np.savez(d / f"{stem}.npz", **(res.arrays() or {"log_weights": np.zeros(0)}))
    (d / f"{stem}.json").write_text(json.dumps(record))
    return d / f"{stem}.json"


@pytest.fixture(scope="session")
def config_jobs_tool():
    """benchmarks/config_jobs.py (the job counts config/README.md quotes), imported from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("config_jobs", REPO / "benchmarks" / "config_jobs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
