"""EnergyModel: a user's log-density, estimated by the same estimators with the same guarantees.

Every check is against an exact value (enumeration, a closed form, numerical quadrature) within a
tolerance taken from the estimate's own reported standard error, or an exact property of the
transitions (invariance, detailed balance) tested by chi-square.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import chi_square_p
from scipy import stats

from logzbench.api import estimate
from logzbench.errors import ModelFileError
from logzbench.estimators.raise_hmc import with_fresh_momentum
from logzbench.models import BinaryRBM, EnergyModel, load_model, save_torchscript
from logzbench.models.energy_path import FactorizedReference
from logzbench.models.hamiltonian import HamiltonianPath
from logzbench.models.poe import ProductOfExperts

#: standard errors an estimate may be off by (the tests' only tolerance besides rounding)
Z_SCORE = 4.0


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _rbm_energy(rbm: BinaryRBM) -> EnergyModel:
    W, a, b = rbm.W.double(), rbm.visible_bias.double(), rbm.hidden_bias.double()

    def free_energy(x):
        x = x.double()
        return x @ a + torch.nn.functional.softplus(x @ W + b).sum(1)

    return EnergyModel(free_energy, rbm.n_visible, "binary")


def _potts_energy(L: int = 6, q: int = 4, seed: int = 0) -> EnergyModel:
    g = _gen(seed)
    h = torch.randn(L, q, generator=g, dtype=torch.float64) * 0.5
    J = torch.randn(L, L, q, q, generator=g, dtype=torch.float64) * 0.3
    J = 0.5 * (J + J.permute(1, 0, 3, 2))
    for i in range(L):
        J[i, i] = 0.0

    def pairwise(x):
        oh = torch.nn.functional.one_hot(x.long(), q).double()
        return (oh * h).sum((1, 2)) + 0.5 * torch.einsum("nia,ijab,njb->n", oh, J, oh)

    return EnergyModel(pairwise, L, ("categorical", q))


def _exact_samples(model: EnergyModel, n: int, seed: int) -> torch.Tensor:
    xs = model.enumerate_states(0, model.n_enumerated())
    p = torch.softmax(model.log_f(xs), 0)
    return xs[torch.multinomial(p, n, replacement=True, generator=_gen(seed))].long()


def _within(value: float, exact: float, se: float, slack: float = 1e-6) -> bool:
    return abs(value - exact) <= Z_SCORE * se + slack


# --------------------------------------------------------------------------- agreement with exact values
def test_wrapping_the_shipped_rbm_gives_its_log_z():
    rbm = BinaryRBM.random(12, 6, scale=0.5, generator=_gen(1))
    model = _rbm_energy(rbm)
    native = estimate(rbm, "exact").log_z
    assert estimate(model, "exact").log_z == pytest.approx(native, abs=1e-9)
    for init in ("uniform", "base-rate"):
        train = (torch.rand(200, 12, generator=_gen(2)) < 0.3).float()
        res = estimate(model, "ais", train_data=train, K=200, chains=100, init=init, seed=0)
        assert _within(res.log_z, native, res.log_z_stderr), (init, res.log_z, res.log_z_stderr, native)
        ref = estimate(rbm, "ais", train_data=train, K=200, chains=100, init=init, seed=0)
        both = math.hypot(res.log_z_stderr, ref.log_z_stderr)
        assert _within(res.log_z, ref.log_z, both)


def test_wrapping_a_complete_poe_gives_its_closed_form():
    poe = ProductOfExperts.random(3, 3, generator=_gen(3))
    closed = poe.exact_log_z()
    assert closed is not None

    class NegEnergy(torch.nn.Module):
        def forward(self, x):
            return -poe.energy(x.double())

    model = EnergyModel(NegEnergy(), 3, "continuous", dtype=torch.float64)
    res = estimate(model, "hais", K=300, chains=200, seed=0)
    assert _within(res.log_z, closed, res.log_z_stderr), (res.log_z, res.log_z_stderr, closed)


class _Net2D(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).double()

    def forward(self, x):
        return self.net(x).squeeze(-1) - 0.35 * (x**2).sum(-1)


def _quadrature_log_z(model: EnergyModel, half_width: float = 9.0, n: int = 1201) -> float:
    g = np.linspace(-half_width, half_width, n)
    X, Y = np.meshgrid(g, g)
    lf = model.log_f(torch.tensor(np.stack([X.ravel(), Y.ravel()], 1)))
    return float(torch.logsumexp(lf, 0)) + 2 * math.log(g[1] - g[0])


def test_a_2d_neural_energy_against_quadrature():
    model = EnergyModel(_Net2D(), 2, "continuous")
    exact = _quadrature_log_z(model)
    res = estimate(model, "hais", K=400, chains=200, seed=0)
    assert _within(res.log_z, exact, res.log_z_stderr), (res.log_z, res.log_z_stderr, exact)
    # the fitted Gaussian start (data) gives the same answer
    data = torch.randn(500, 2, generator=_gen(4), dtype=torch.float64) * 1.5
    fitted = EnergyModel(_Net2D(), 2, "continuous", data=data)
    res = estimate(fitted, "hais", K=400, chains=200, seed=1)
    assert _within(res.log_z, exact, res.log_z_stderr), (res.log_z, res.log_z_stderr, exact)


def test_a_potts_energy_against_enumeration():
    model = _potts_energy()
    exact = estimate(model, "exact")
    # by hand: the log-sum-exp of log f over all 4^6 states
    xs = model.enumerate_states(0, 4**6)
    assert exact.log_z == pytest.approx(float(torch.logsumexp(model.log_f(xs), 0)), abs=1e-9)
    res = estimate(model, "ais", K=300, chains=200, seed=0)
    assert _within(res.log_z, exact.log_z, res.log_z_stderr), (res.log_z, res.log_z_stderr, exact.log_z)
    data = _exact_samples(model, 100, seed=5)
    exact_ll = float((model.log_f(data) - exact.log_z).mean())
    rs = estimate(model, "raise", data=data, K=100, chains=10, seed=0)
    # RAISE is a stochastic lower bound: not above the exact mean log-likelihood beyond its uncertainty
    assert rs.mean_log_likelihood <= exact_ll + Z_SCORE * rs.mean_log_likelihood_stderr + 1e-6


def test_the_sandwich_brackets_an_energy_model():
    model = _potts_energy(L=5, q=3, seed=2)
    exact = estimate(model, "exact").log_z
    res = estimate(model, "sandwich", chains=20, seed=0, target_width=0.2, max_sweeps=2_000_000)
    b = res.extra["bracket"]
    lo, hi = b["log_z_lower"], b["log_z_upper"]
    # each end is a stochastic bound: exact lies above the lower and below the upper within their noise
    assert lo - Z_SCORE * b["log_z_lower_stderr"] <= exact <= hi + Z_SCORE * b["log_z_upper_stderr"], (lo, exact, hi)


# --------------------------------------------------------------------------- the transitions


@pytest.mark.parametrize("domain,dim", [("binary", 4), (("categorical", 3), 3)])
def test_metropolis_sweep_leaves_p_beta_invariant(domain, dim):
    g = _gen(7)
    q = 2 if domain == "binary" else 3
    w = torch.randn(dim, q, generator=g, dtype=torch.float64)
    c = torch.randn(dim, dim, generator=g, dtype=torch.float64)

    def log_f(x):
        oh = torch.nn.functional.one_hot(x.long(), q).double()
        s = (oh * w).sum((1, 2))
        v = x.double()
        return s + torch.einsum("ni,ij,nj->n", v, c, v) * 0.3

    model = EnergyModel(log_f, dim, domain)
    rows = torch.randint(0, q, (50, dim), generator=g)
    path = model.annealing_path("base-rate", data=rows)
    beta = 0.6
    xs = model.enumerate_states(0, model.n_enumerated())
    st = path.state_from_data(xs)
    p = torch.softmax(path.log_f(st, beta), 0).numpy()
    n = 20000
    idx = torch.multinomial(torch.as_tensor(p), n, replacement=True, generator=g)
    state = path.state_from_data(xs[idx])
    for _ in range(3):
        state = path.transition(state, beta, g)
    codes = (state.x.long() * (q ** torch.arange(dim))).sum(1).numpy()  # enumerate_states: site 0 fastest
    counts = np.bincount(codes, minlength=len(p)).astype(float)
    assert chi_square_p(counts, p) > 1e-3
    # the cached log f and log r are those of the new states
    assert torch.allclose(state.lf, model.log_f(state.x))
    assert torch.allclose(state.lr, path.reference.log_prob(state.x))


def test_metropolis_sweep_is_reversible():
    """Detailed balance: pairs (x, T(x)) with x ~ p_beta are as frequent as (T(x), x)."""
    g = _gen(8)
    dim = 3
    w = torch.randn(dim, generator=g, dtype=torch.float64)

    def log_f(x):
        v = x.double()
        return v @ w + 0.8 * v[:, 0] * v[:, 1] - 0.6 * v[:, 1] * v[:, 2]

    model = EnergyModel(log_f, dim, "binary")
    path = model.annealing_path("uniform")
    xs = model.enumerate_states(0, 8)
    beta = 0.7
    p = torch.softmax(path.log_f(path.state_from_data(xs), beta), 0)
    idx = torch.multinomial(p, 40000, replacement=True, generator=g)
    after = path.transition(path.state_from_data(xs[idx]), beta, g)
    code = (after.x.long() * torch.tensor([1, 2, 4])).sum(1)  # the index in enumerate_states (site 0 fastest)
    joint = np.zeros((8, 8))
    np.add.at(joint, (idx.numpy(), code.numpy()), 1)
    # under reversibility joint[a, b] and joint[b, a] are two draws of the same count
    iu = np.triu_indices(8, 1)
    a, b = joint[iu], joint[iu[1], iu[0]]
    keep = a + b > 20
    stat = float((((a - b) ** 2) / (a + b))[keep].sum())
    assert stats.chi2.sf(stat, int(keep.sum())) > 1e-3


def test_hmc_transitions_leave_a_gaussian_invariant():
    mean = torch.tensor([1.0, -2.0], dtype=torch.float64)
    sd = torch.tensor([0.5, 2.0], dtype=torch.float64)

    def log_f(x):
        return -0.5 * (((x - mean) / sd) ** 2).sum(1)

    model = EnergyModel(log_f, 2, "continuous", dtype=torch.float64)
    e0, s0, lz0, g0 = model.proposal(1.0)
    path = HamiltonianPath(e0, s0, lz0, model.energy, kernel="hais", step_size=0.3, grad0=g0)
    g = _gen(9)
    n = 20000
    x = mean + sd * torch.randn(n, 2, generator=g, dtype=torch.float64)
    # the kernels leave pi(x) N(v; 0, I) invariant: start there, momentum included
    state = with_fresh_momentum(path.state_from_data(x), g)
    for _ in range(20):
        state = path.transition(state, 1.0, g)
    got = state.x
    se_mean = sd / math.sqrt(n)
    assert (torch.abs(got.mean(0) - mean) < 5 * se_mean).all(), got.mean(0)
    se_var = sd**2 * math.sqrt(2 / (n - 1))
    assert (torch.abs(got.var(0) - sd**2) < 5 * se_var).all(), got.var(0)


def test_the_same_seed_gives_the_same_estimate():
    model = _potts_energy(L=4, q=3)
    a = estimate(model, "ais", K=20, chains=10, seed=3)
    b = estimate(model, "ais", K=20, chains=10, seed=3)
    assert a.log_z == b.log_z
    assert np.array_equal(a.log_weights, b.log_weights)


def test_a_user_reference_replaces_the_default():
    model = _potts_energy(L=4, q=3, seed=6)
    exact = estimate(model, "exact").log_z
    inner = FactorizedReference(torch.randn(4, 3, generator=_gen(10), dtype=torch.float64))

    class UserReference:  # only what the documentation asks for: log_prob and sample
        def log_prob(self, x):
            return inner.log_prob(x)

        def sample(self, n, generator):
            return inner.sample(n, generator)

    for ref in (inner, UserReference()):
        with_ref = EnergyModel(model.log_f_fn, 4, ("categorical", 3), reference=ref)
        res = estimate(with_ref, "ais", K=200, chains=100, seed=0)
        assert _within(res.log_z, exact, res.log_z_stderr), (type(ref).__name__, res.log_z, exact)


# --------------------------------------------------------------------------- files
def test_torchscript_round_trip(tmp_path):
    model = EnergyModel(_Net2D(), 2, "continuous")
    path = tmp_path / "net.pt"
    save_torchscript(model, path)
    back = load_model(path)
    x = torch.randn(7, 2, generator=_gen(11), dtype=torch.float64)
    assert back.family == "energy-continuous" and back.dim == 2
    assert torch.allclose(back.log_f(x), model.log_f(x))


def test_file_py_name_loads(tmp_path):
    f = tmp_path / "user_energy.py"
    f.write_text(
        "import torch\nfrom logzbench.models import EnergyModel\n"
        "def model():\n    return EnergyModel(lambda x: x.double().sum(1), 5, 'binary')\n"
    )
    m = load_model(f"{f}:model")
    assert m.family == "energy-binary"
    # log Z of independent units with log f = sum x: 5 log(1 + e)
    assert estimate(m, "exact").log_z == pytest.approx(5 * math.log(1 + math.e), abs=1e-9)


@pytest.mark.parametrize(
    "body,needle",
    [
        ("raise RuntimeError('boom')\n", "raised on import (RuntimeError: boom)"),
        ("x = 1\n", "has no 'model'"),
        ("def model():\n    return 42\n", "not a logzbench.models.EnergyModel"),
        (
            "import torch\nfrom logzbench.models import EnergyModel\n"
            "def model():\n    return EnergyModel(lambda x: x.double(), 3, 'binary')\n",
            "returned shape (4, 3) for 4 states; expected (4,)",
        ),
        (
            "import torch\nfrom logzbench.models import EnergyModel\n"
            "def model():\n    return EnergyModel(lambda x: x.double().sum(1) * float('nan'), 3, 'binary')\n",
            "returned NaN",
        ),
        (
            "import numpy as np\nfrom logzbench.models import EnergyModel\n"
            "def model():\n    return EnergyModel(lambda x: np.zeros(len(x)), 3, 'binary')\n",
            "not a torch.Tensor",
        ),
    ],
)
def test_bad_sources_are_refused_in_one_line(tmp_path, body, needle):
    f = tmp_path / "bad.py"
    f.write_text(body)
    with pytest.raises(ModelFileError) as info:
        load_model(f"{f}:model")
    msg = str(info.value)
    assert needle in msg and "\n" not in msg


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(ModelFileError, match="model file not found"):
        load_model(f"{tmp_path / 'nope.py'}:model")


def test_bad_rows_and_domains_are_refused():
    model = _potts_energy(L=4, q=3)
    with pytest.raises(ValueError, match=r"outside 0..2"):
        estimate(model, "ais", data=np.full((3, 4), 3), K=5, chains=2)
    with pytest.raises(ValueError, match="4 categorical states"):
        estimate(model, "ais", data=np.zeros((3, 5), dtype=int), K=5, chains=2)
    with pytest.raises(ValueError, match="domain must be"):
        EnergyModel(lambda x: x.sum(1), 3, "ternary")
    with pytest.raises(ValueError, match="q >= 2"):
        EnergyModel(lambda x: x.sum(1), 3, ("categorical", 1))
    binary = EnergyModel(lambda x: x.double().sum(1), 6, "binary")
    with pytest.raises(ValueError, match="6 binary values"):
        estimate(binary, "ais", data=np.zeros((2, 7)), K=5, chains=2)
    with pytest.raises(ValueError, match="for continuous models"):
        estimate(binary, "hais", K=5, chains=2)


def test_an_enumeration_too_large_is_refused_before_work():
    model = EnergyModel(lambda x: x.double().sum(1), 40, "binary")
    with pytest.raises(ValueError, match="refusing above 2\\^32|over the budget"):
        estimate(model, "exact")


def test_the_start_is_recorded_and_base_rate_needs_rows():
    model = _potts_energy(L=4, q=3)
    with pytest.raises(ValueError, match="needs training rows"):
        estimate(model, "ais", K=5, chains=4, init="base-rate")
    rows = np.zeros((10, 4), dtype=int)
    assert estimate(model, "ais", K=5, chains=4, init="base-rate", train_data=rows).settings["reference"] == "base-rate"
    assert estimate(model, "ais", K=5, chains=4, init="uniform").settings["reference"] == "uniform"
    cont = EnergyModel(lambda x: -(x.double() ** 2).sum(1), 2, "continuous")
    assert estimate(cont, "hais", K=5, chains=4).settings["reference"] == "standard-normal"


def test_a_log_f_failing_later_is_one_line():
    def picky(x):
        if x.shape[0] > 8:
            raise IndexError("too many rows\nsecond line")
        return x.double().sum(1)

    model = EnergyModel(picky, 3, "binary").check()  # passes on 4 states
    with pytest.raises(ValueError) as info:
        estimate(model, "ais", K=3, chains=20)
    assert "raised IndexError: too many rows" in str(info.value) and "\n" not in str(info.value)


# ----------------------------------------------------------------------------- the time budget (issue 37, item 9)
#: seconds one call of :func:`_slow` sleeps: a floor under its measured time, whatever the machine's load
SLEEP = 0.01


def _slow(x):
    import time

    time.sleep(SLEEP)
    return -x.double().sum(1)


class _Checked(Exception):
    """Raised by :func:`_stop_after_check`'s estimator with the context the checks let through."""


def _stop_after_check(monkeypatch, module: str) -> None:
    """Replace ``module``'s ``estimate`` (the registry entry's function) by one that stops with the checked
    context (:meth:`EstimateContext.check` let it through; its ``estimated_seconds``)."""

    def stop(ctx):
        raise _Checked(ctx)

    monkeypatch.setattr(f"logzbench.estimators.{module}.estimate", stop)


def _checked_context(*args, **kwargs):
    with pytest.raises(_Checked) as info:
        estimate(*args, **kwargs)
    return info.value.args[0]


def test_a_sweep_is_estimated_from_timed_calls_of_log_f():
    """A discrete sweep calls log_f once per site: at least dim x the sleep of each call."""
    model = EnergyModel(_slow, 5, "binary")
    seconds, what = model.sweep_seconds(4)
    assert seconds >= 5 * SLEEP
    assert "5 calls of log_f per sweep" in what and "on 4 chains" in what


def test_a_run_over_the_time_budget_is_refused_and_a_larger_budget_lets_it_start(monkeypatch):
    model = EnergyModel(_slow, 5, "binary")
    # 2 sweeps x 5 sites x at least 10 ms: at least 0.1 s, over a budget of 0.05 s
    with pytest.raises(ValueError) as info:
        estimate(model, "ais", K=2, chains=4, max_seconds=0.05)
    msg = str(info.value)
    assert "over the budget of 0.05 s" in msg and "max_seconds=" in msg and "--max-seconds" in msg
    assert "2 sweeps of 4 chains" in msg and "\n" not in msg
    _stop_after_check(monkeypatch, "ais")
    assert _checked_context(model, "ais", K=2, chains=4, max_seconds=3600).estimated_seconds >= 2 * 5 * SLEEP


@pytest.mark.parametrize(
    "make, kw, passes",
    [
        (lambda: EnergyModel(_slow, 5, "binary"), {}, 3),  # AIS, then reverse AIS from its states
        (lambda: EnergyModel(_slow, 5, "binary"), {"data": np.zeros((3, 5))}, 2),  # AIS, RAISE: one batch
    ],
    ids=["no-data", "data"],
)
def test_the_sandwichs_first_round_counts_both_ends(monkeypatch, make, kw, passes):
    """The sandwich's estimate is its first round, both ends: at least ``passes`` annealing runs of ``K``
    sweeps, each sweep 5 calls of at least the sleep (RAISE's chains for every row in one batch of 4 x 3)."""
    _stop_after_check(monkeypatch, "sandwich")
    ctx = _checked_context(make(), "sandwich", K=2, chains=4, max_seconds=3600, **kw)
    assert ctx.estimated_seconds >= passes * 2 * 5 * SLEEP
    with pytest.raises(ValueError) as info:
        estimate(make(), "sandwich", K=2, chains=4, max_seconds=passes * 2 * 5 * SLEEP * 0.9, **kw)
    assert "its first round" in str(info.value) and "\n" not in str(info.value)


def test_timing_draws_nothing_from_the_runs_generator():
    """The same seed gives the same estimate whether the run was timed (a budget) or not (inf)."""
    model = EnergyModel(_slow, 5, "binary")
    timed = estimate(model, "ais", K=2, chains=4, seed=7, max_seconds=3600)
    untimed = estimate(model, "ais", K=2, chains=4, seed=7, max_seconds=math.inf)
    assert timed.log_z == untimed.log_z
    assert np.array_equal(timed.log_weights, untimed.log_weights)


@pytest.mark.parametrize(
    "make, module, estimator, kw",
    [
        (lambda: _potts_energy(), "ais", "ais", {}),
        (lambda: _potts_energy(), "raise_", "raise", {"data": np.zeros((20, 6), dtype=int)}),
        (lambda: _rbm_energy(BinaryRBM.random(20, 8)), "sandwich", "sandwich", {}),
        (lambda: EnergyModel(_Net2D(), 2, "continuous"), "hais", "hais", {}),
    ],
    ids=["potts-ais", "potts-raise", "rbm-energy-sandwich", "net2d-hais"],
)
def test_a_normal_energy_at_the_command_lines_defaults_is_not_refused(monkeypatch, make, module, estimator, kw):
    """K = 1000 and 100 chains (the command line's defaults) on the small energies above: estimated, within the
    default budget of a day."""
    _stop_after_check(monkeypatch, module)
    assert 0 < _checked_context(make(), estimator, K=1000, chains=100, **kw).estimated_seconds < 86400


def test_the_families_own_samplers_are_not_timed(monkeypatch):
    _stop_after_check(monkeypatch, "ais")
    assert _checked_context(BinaryRBM.random(20, 8), "ais", K=1000, chains=100).estimated_seconds is None
