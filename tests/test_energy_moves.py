"""The gradient-informed moves of a discrete user energy (GWG, DMALA; :mod:`logzbench.models.energy_moves`).

Each kernel is checked against exact values: invariance of ``p_beta`` by chi-square against enumeration (chains
started from exact draws), detailed balance by the full transition matrix built from the module's proposal and
acceptance functions (and the moves' empirical transitions against that matrix), and the coverage of AIS
``log Z`` against enumeration.  Every p-value threshold is fixed in advance (:data:`P_MIN`).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch
from conftest import chi_square_p

from logzbench.estimators import ais
from logzbench.models import EnergyModel
from logzbench.models.energy_moves import (
    MoveTarget,
    choose_transition,
    dmala_log_proposal,
    gwg_apply,
    gwg_log_proposal,
    log_acceptance,
    log_f_and_grad,
)
from logzbench.models.energy_path import DiscreteEnergyPath, FactorizedReference
from logzbench.stats import log_mean_stderr

#: the smallest p-value a correct kernel's chi-square test may give (fixed before the runs)
P_MIN = 1e-3


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------- energies (differentiable in x)
def _binary_energy(dim: int = 12, seed: int = 0, device: str = "cpu") -> EnergyModel:
    """Fields, pairs and three-body terms on ``{0, 1}^dim``: a polynomial, differentiable in ``x``."""
    g = _gen(seed)
    h = torch.randn(dim, generator=g, dtype=torch.float64) * 0.5
    J = torch.randn(dim, dim, generator=g, dtype=torch.float64) * 0.3
    J = torch.triu(J, 1)
    triples = torch.randint(0, dim, (dim, 3), generator=g)
    c = torch.randn(dim, generator=g, dtype=torch.float64) * 0.8
    h, J, triples, c = (t.to(device) for t in (h, J, triples, c))

    def three_body(x):
        v = x.double()
        return v @ h + torch.einsum("ni,ij,nj->n", v, J, v) + (v[:, triples].prod(2) * c).sum(1)

    return EnergyModel(three_body, dim, "binary", device=device)


def _one_hot_poly(x: torch.Tensor, q: int) -> torch.Tensor:
    """The one-hot encoding of integer states ``x`` by Lagrange polynomials (exact on ``0..q-1``, differentiable
    in ``x``, unlike ``one_hot(x.long())``)."""
    v = x.double().unsqueeze(-1)
    cols = []
    for a in range(q):
        e = torch.ones_like(v)
        for b in range(q):
            if b != a:
                e = e * (v - b) / (a - b)
        cols.append(e)
    return torch.cat(cols, -1)


def _categorical_energy(dim: int = 5, q: int = 4, seed: int = 1, device: str = "cpu") -> EnergyModel:
    """A Potts energy (fields, couplings) plus a three-body term on the values, differentiable in ``x``."""
    g = _gen(seed)
    h = torch.randn(dim, q, generator=g, dtype=torch.float64) * 0.6
    J = torch.randn(dim, dim, q, q, generator=g, dtype=torch.float64) * 0.4
    J = 0.5 * (J + J.permute(1, 0, 3, 2))
    for i in range(dim):
        J[i, i] = 0.0
    h, J = h.to(device), J.to(device)

    def potts(x):
        oh = _one_hot_poly(x, q)
        v = x.double()
        return (
            (oh * h).sum((1, 2)) + 0.5 * torch.einsum("nia,ijab,njb->n", oh, J, oh) + 0.1 * v[:, 0] * v[:, 1] * v[:, 2]
        )

    return EnergyModel(potts, dim, ("categorical", q), device=device)


def _rows(model: EnergyModel, n: int = 60, seed: int = 3) -> torch.Tensor:
    """Training rows with uneven site rates (a base-rate reference far from uniform)."""
    g = _gen(seed)
    p = torch.softmax(torch.randn(model.dim, int(model.n_states), generator=g, dtype=torch.float64) * 1.5, 1)
    return torch.multinomial(p, n, replacement=True, generator=g).T


class UserReference:
    """A reference given as an object with ``log_prob`` and ``sample`` only (no site table)."""

    def __init__(self, inner: FactorizedReference):
        self.inner = inner

    def log_prob(self, x):
        return self.inner.log_prob(x)

    def sample(self, n, generator):
        return self.inner.sample(n, generator)


def _codes(x: torch.Tensor, q: int) -> np.ndarray:
    """Index of each state in ``enumerate_states`` (site 0 the fastest digit)."""
    return (x.long().cpu() * (q ** torch.arange(x.shape[1]))).sum(1).numpy()


# --------------------------------------------------------------------------- invariance
def _path(model, ref: str, transition: str, param):
    rows = _rows(model)
    if ref == "user":
        inner = FactorizedReference.base_rate(rows, int(model.n_states))
        path = DiscreteEnergyPath(model, UserReference(inner), transition)
    elif ref == "mixture":
        path = model.annealing_path("mixture", data=rows, transition=transition)
    else:
        path = model.annealing_path(ref, data=rows, transition=transition)
    path.move_param = param
    return path


INVARIANCE = [
    # (energy, reference, transition, parameter, beta)
    *[
        (energy, "base-rate", t, p, beta)
        for energy in ("binary", "categorical")
        for t, p in (("gwg", 1), ("gwg", 2), ("dmala", None))
        for beta in (1.0, 0.5)
    ],
    ("binary", "user", "gwg", 2, 0.5),
    ("categorical", "user", "dmala", None, 0.5),
    ("binary", "mixture", "gwg", 1, 0.5),
    ("categorical", "mixture", "dmala", None, 0.5),
]


@pytest.mark.parametrize("energy,ref,transition,param,beta", INVARIANCE)
def test_a_gradient_move_leaves_p_beta_invariant(energy, ref, transition, param, beta):
    _check_invariance(energy, ref, transition, param, beta, "cpu")


#: where :func:`test_the_moves_run_on_the_device` runs (``LOGZBENCH_ENERGY_TEST_DEVICE=cpu``: a check of the test
#: itself on a machine without a GPU)
DEVICE = os.environ.get("LOGZBENCH_ENERGY_TEST_DEVICE", "cuda")


@pytest.mark.cuda
@pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize(
    "energy,ref,transition,param",
    [("binary", "base-rate", "gwg", 2), ("categorical", "base-rate", "dmala", None), ("binary", "mixture", "gwg", 1)],
)
def test_the_moves_run_on_the_device(energy, ref, transition, param):
    """All chains batched on the device, the generator there too: still invariant."""
    _check_invariance(energy, ref, transition, param, 0.5, DEVICE)


def _check_invariance(energy, ref, transition, param, beta, device):
    """Chains started from exact draws of ``p_beta`` (enumeration), three moves, chi-square against ``p_beta``."""
    model = _binary_energy(device=device) if energy == "binary" else _categorical_energy(device=device)
    q = int(model.n_states)
    alpha = 0.6 if energy == "binary" else 0.4  # a step that changes several sites, accepted often enough
    path = _path(model, ref, transition, param if transition == "gwg" else alpha)
    g = torch.Generator(device=device).manual_seed(11)
    xs = model.enumerate_states(0, model.n_enumerated())
    p = torch.softmax(path.log_f(path.state_from_data(xs), beta), 0)
    n = 20000
    idx = torch.multinomial(p, n, replacement=True, generator=g)
    state = path.state_from_data(xs[idx])
    start = state.x.clone()
    for _ in range(3):
        state = path.transition(state, beta, g)
    assert state.x.device.type == torch.device(device).type
    counts = np.bincount(_codes(state.x, q), minlength=len(p)).astype(float)
    assert chi_square_p(counts, p.cpu().numpy()) > P_MIN
    # the chains moved (an invariance test of a kernel that never moves could not fail)
    assert (state.x != start).any(1).double().mean() > 0.2, path.acceptance_rate
    base = getattr(state, "base", state)  # the mixture path's state wraps the energy's
    assert torch.allclose(base.lf, model.log_f(state.x))
    if ref != "mixture":
        assert torch.allclose(base.lr, _log_r(path, state.x))


def _log_r(path, x):
    return path.reference.log_prob(x).double()


# --------------------------------------------------------------------------- detailed balance
def _tiny(domain: str) -> EnergyModel:
    return _binary_energy(dim=4, seed=5) if domain == "binary" else _categorical_energy(dim=3, q=3, seed=6)


def _target(model, ref: str, beta: float) -> tuple[MoveTarget, torch.Tensor]:
    """The move target at ``beta`` and ``log r`` of every state (a base-rate table, or a user reference seen
    only through its ``log_prob``)."""
    table = FactorizedReference.base_rate(_rows(model), int(model.n_states))
    xs = model.enumerate_states(0, model.n_enumerated())
    if ref == "table":
        return MoveTarget(beta, table.log_p, None), table.log_prob(xs)
    return MoveTarget(beta, None, table.log_prob), table.log_prob(xs)


def _matrix(model, kernel: str, target: MoveTarget, log_r: torch.Tensor, param) -> tuple[np.ndarray, np.ndarray]:
    """``(pi, K)`` on the whole domain: the kernel's transition matrix from the module's proposal, apply and
    acceptance functions; the diagonal collects the rejected proposals (and GWG's changes that are no move)."""
    q, n_states = int(model.n_states), model.n_enumerated()
    xs = model.enumerate_states(0, n_states)
    lf, grad = log_f_and_grad(model, xs)
    beta = target.beta
    lp = (1 - beta) * log_r + beta * lf
    K = np.zeros((n_states, n_states))
    if kernel == "dmala":
        log_q = dmala_log_proposal(xs, grad, target, q, param)  # (N, dim, q): the proposal at every state
        for a in range(n_states):
            fwd = log_q[a].gather(1, xs.long().T).sum(0)  # log q(y | x_a) for every y
            rev = log_q.gather(2, xs[a].long().expand(n_states, -1).unsqueeze(2)).sum((1, 2))  # log q(x_a | y)
            acc = torch.exp(log_acceptance(lp, lp[a].expand(n_states), rev, fwd))
            prop = torch.exp(fwd)
            K[a] = (prop * acc).numpy()
            K[a, a] += float((prop * (1 - acc)).sum())
        return torch.softmax(lp, 0).numpy(), K
    log_q = gwg_log_proposal(xs, grad, target, q)  # (N, dim * q)
    for a in range(n_states):
        for combo in np.ndindex(*(log_q.shape[1],) * int(param)):  # every ordered draw of the changes
            idx = torch.tensor([combo])
            fwd = log_q[a : a + 1].gather(1, idx).sum(1)
            if float(fwd) == -math.inf:
                continue
            y, reverse, valid = gwg_apply(xs[a : a + 1], idx, q)
            b = int(_codes(y, q)[0])
            rev = log_q[b : b + 1].gather(1, reverse).sum(1)
            acc = float(torch.exp(log_acceptance(lp[b : b + 1], lp[a : a + 1], rev, fwd))) if bool(valid[0]) else 0.0
            K[a, b] += math.exp(float(fwd)) * acc
            K[a, a] += math.exp(float(fwd)) * (1 - acc)
    return torch.softmax(lp, 0).numpy(), K


@pytest.mark.parametrize("domain", ["binary", "categorical"])
@pytest.mark.parametrize("kernel,param", [("gwg", 1), ("gwg", 2), ("dmala", 0.5)])
@pytest.mark.parametrize("ref,beta", [("table", 0.6), ("user", 0.6), ("table", 1.0)])
def test_detailed_balance_of_the_transition_matrix(domain, kernel, param, ref, beta):
    model = _tiny(domain)
    target, log_r = _target(model, ref, beta)
    pi, K = _matrix(model, kernel, target, log_r, param)
    assert np.allclose(K.sum(1), 1.0, atol=1e-12)
    assert (K >= 0).all()
    flow = pi[:, None] * K
    assert np.allclose(flow, flow.T, rtol=1e-9, atol=1e-15)
    assert np.allclose(pi @ K, pi, atol=1e-12)
    assert (np.diag(K) < 1 - 1e-6).all()  # every state moves: the balance is not that of the identity


@pytest.mark.parametrize("domain", ["binary", "categorical"])
@pytest.mark.parametrize("kernel,param", [("gwg", 2), ("dmala", 0.5)])
def test_the_path_moves_as_the_transition_matrix_says(domain, kernel, param):
    """The path's own move, repeated from every state, against the matrix the detailed-balance test checks."""
    model = _tiny(domain)
    beta = 0.6
    target, log_r = _target(model, "table", beta)
    _, K = _matrix(model, kernel, target, log_r, param)
    path = model.annealing_path("base-rate", data=_rows(model), transition=kernel)
    path.move_param = param
    n_states, reps = model.n_enumerated(), 1500
    start = np.repeat(np.arange(n_states), reps)
    state = path.state_from_data(model.enumerate_states(0, n_states)[torch.as_tensor(start)])
    after = _codes(path.transition(state, beta, _gen(4)).x, int(model.n_states))
    counts = np.zeros_like(K)
    np.add.at(counts, (start, after), 1)
    assert chi_square_p(counts.ravel(), (K / n_states).ravel()) > P_MIN


# --------------------------------------------------------------------------- AIS coverage
#: estimates of 40 within two standard errors of the exact value, at least: fewer has probability about 1e-4 at
#: the nominal 95% coverage (binomial, 40 trials)
COVERED_MIN = 32


@pytest.mark.parametrize("energy", ["binary", "categorical"])
@pytest.mark.parametrize("transition", ["gwg", "dmala"])
def test_ais_log_z_covers_the_exact_value(transition, energy):
    """40 independent AIS estimates (40 groups of chains of one batched run: independent, the parameter fixed),
    each within two of its standard errors of the enumerated ``log Z`` about 95% of the time."""
    model = _binary_energy() if energy == "binary" else _categorical_energy()
    exact = model.exact_log_z()
    path = model.annealing_path("base-rate", data=_rows(model), transition=transition)
    path.move_param = 2 if transition == "gwg" else (0.5 if energy == "binary" else 0.4)
    groups, chains = 40, 100
    state, _ = ais.run(path, np.linspace(0.0, 1.0, 101), groups * chains, _gen(21))
    log_z, se = log_mean_stderr(state.log_w.reshape(groups, chains), dim=1)
    covered = int(((log_z - exact).abs() <= 2 * se).sum())
    assert covered >= COVERED_MIN, (covered, (log_z - exact).tolist(), se.tolist())
    assert float(se.median()) < 0.3  # useful estimates, not wide ones that cover anything


@pytest.mark.slow
@pytest.mark.parametrize("transition", ["gwg", "dmala"])
def test_ais_log_z_covers_the_exact_value_over_40_seeds_with_the_pilot(transition):
    """As above, one run per seed, each with its own pilot (``tune``) from its own generator."""
    model = _binary_energy()
    exact = model.exact_log_z()
    covered = 0
    for seed in range(40):
        g = _gen(1000 + seed)
        path = model.annealing_path("base-rate", data=_rows(model), transition=transition)
        path.tune(50, g)
        state, _ = ais.run(path, np.linspace(0.0, 1.0, 101), 100, g)
        log_z, se = log_mean_stderr(state.log_w)
        covered += int(abs(float(log_z) - exact) <= 2 * float(se))
    assert covered >= COVERED_MIN, covered


# --------------------------------------------------------------------------- tuning, the chooser
@pytest.mark.parametrize("transition,name", [("gwg", "n_flips"), ("dmala", "alpha")])
def test_tune_freezes_the_parameter(transition, name):
    model = _binary_energy()
    path = model.annealing_path("uniform", transition=transition)
    assert path.move_param is None
    out = path.tune(50, _gen(2))
    assert out["transition"] == transition and out["param_name"] == name
    assert out["sweeps"] > 0 and 0.0 <= out["acceptance"] <= 1.0
    assert path.move_param == out["param"]
    assert path.n_proposed == 0  # the pilot's moves are not the run's
    again = path.tune(50, _gen(3))
    assert again["sweeps"] == 0 and again["param"] == out["param"]  # frozen: no second pilot
    other = model.annealing_path("uniform", transition=transition)
    assert other.tune(50, _gen(2))["param"] == out["param"]  # the generator's draws only
    gibbs = model.annealing_path("uniform")
    assert gibbs.tune(50, _gen(2))["sweeps"] == 0 and gibbs.move_param is None


def test_tuned_gwg_takes_the_most_flips_above_the_target():
    """On independent sites near uniform every change is accepted: the pilot goes to many flips per move."""
    w = torch.linspace(-0.1, 0.1, 64, dtype=torch.float64)
    model = EnergyModel(lambda x: x.double() @ w, 64, "binary")
    path = model.annealing_path("uniform", transition="gwg")
    assert path.tune(20, _gen(0))["param"] >= 8


def test_choose_transition_picks_and_reports():
    model = _binary_energy()
    out = choose_transition(model, 20, _gen(0), n_transitions=8, burn_in=2)
    assert out["transition"] in ("gibbs", "gwg", "dmala")
    assert set(out["candidates"]) == {"gibbs", "gwg", "dmala"}
    assert out["sweeps"] >= 2 * 10 + 1
    measured = [c["ess_per_s"] for c in out["candidates"].values() if c["ess_per_s"] is not None]
    best = max(measured)
    assert out["candidates"][out["transition"]]["ess_per_s"] == best > 0
    assert out["candidates"]["gwg"]["param"] >= 1 and out["candidates"]["gibbs"]["param"] is None
    for c in out["candidates"].values():  # a candidate not measured could not have won
        assert c["ess_per_s"] is not None or c["ess_per_s_bound"] < best


def test_choose_transition_does_not_measure_a_sweep_that_cannot_win():
    """A log_f of 1 ms per call on 400 sites: a gibbs sweep (400 calls, 0.4 s) bounds its effective samples per
    second at 50 chains / 0.4 s = 125 after one sweep, below what a gradient move (two calls) measures, so it is
    recorded with that bound and not measured further."""
    import time

    w = torch.linspace(-0.5, 0.5, 400, dtype=torch.float64)

    def slow(x):
        time.sleep(1e-3)
        return x.double() @ w

    model = EnergyModel(slow, 400, "binary")
    out = choose_transition(model, 50, _gen(2), n_transitions=8, burn_in=2)
    gibbs, best = out["candidates"]["gibbs"], out["candidates"][out["transition"]]["ess_per_s"]
    assert out["transition"] in ("gwg", "dmala")
    assert gibbs["ess_per_s"] is None and gibbs["ess_per_s_bound"] < best and "at most" in gibbs["skipped"]


def test_choose_transition_skips_a_log_f_without_gradient():
    w = torch.randn(6, 3, generator=_gen(1), dtype=torch.float64)

    def one_hot_energy(x):
        return (torch.nn.functional.one_hot(x.long(), 3).double() * w).sum((1, 2))

    model = EnergyModel(one_hot_energy, 6, ("categorical", 3))
    out = choose_transition(model, 10, _gen(0), n_transitions=5, burn_in=1)
    assert out["transition"] == "gibbs"
    assert "not differentiable" in out["candidates"]["gwg"]["refused"]
    assert out["candidates"]["dmala"]["ess_per_s"] == 0.0


# --------------------------------------------------------------------------- refusals
def _nan_gradient(x):
    v = x.double()
    return torch.where(v > 2, torch.sqrt(v - 3), v).sum(1)  # finite values; the unused branch's gradient is NaN


def _one_hot(x):
    return torch.nn.functional.one_hot(x.long(), 2).double()[..., 1].sum(1)


@pytest.mark.parametrize(
    "make,needle",
    [
        (lambda: EnergyModel(_nan_gradient, 5, "binary").annealing_path("uniform", transition="gwg"), "NaN gradient"),
        (lambda: EnergyModel(_nan_gradient, 5, "binary").annealing_path("uniform", transition="dmala"), "NaN gradient"),
        (
            lambda: EnergyModel(_one_hot, 5, "binary").annealing_path("uniform", transition="dmala"),
            "not differentiable",
        ),
    ],
)
def test_a_log_f_without_a_usable_gradient_is_refused_in_one_line(make, needle):
    with pytest.raises(ValueError, match=needle) as err:  # where the path is built
        make()
    assert "\n" not in str(err.value) and "log_f" in str(err.value)


def test_a_nan_gradient_met_during_the_run_is_refused_in_one_line():
    """A gradient NaN only at one state (all six sites 1), met by a move rather than by the build's check."""

    def nan_at_all_ones(x):
        v = x.double()
        bad = torch.sqrt(5.5 - v.sum(1))  # NaN (unselected) only at the all-ones state: its gradient there is NaN
        return torch.where(v.sum(1) > 7, bad, v[:, 0])

    path = EnergyModel(nan_at_all_ones, 6, "binary").annealing_path(transition="gwg")  # the check's states pass
    state = path.state_from_data(torch.ones(3, 6))
    with pytest.raises(ValueError, match="NaN gradient at 3 of 3 states") as err:
        path.transition(state, 0.5, _gen(0))
    assert "\n" not in str(err.value) and "nan_at_all_ones" in str(err.value)


def _line(v):
    return v.double().sum(1)


@pytest.mark.parametrize(
    "build,needle",
    [
        (lambda: EnergyModel(_line, 3, "binary").annealing_path("uniform", transition="mh"), "unknown transition 'mh'"),
        (lambda: EnergyModel(_line, 3, "binary").annealing_path("uniform", transition="auto"), "choose_transition"),
        (lambda: DiscreteEnergyPath(EnergyModel(_line, 3, "binary"), None, transition=None), "unknown transition"),
        (lambda: EnergyModel(_line, 2, "continuous").annealing_path(transition="dmala"), "discrete domains"),
        (lambda: EnergyModel(_line, 2, "continuous").annealing_path(transition="gwg"), "discrete domains"),
        (lambda: choose_transition(EnergyModel(_line, 2, "continuous"), 4, _gen(0)), "discrete domains"),
        (lambda: setattr(EnergyModel(_line, 3, "binary").annealing_path(transition="gwg"), "move_param", 0), "n_flips"),
        (
            lambda: setattr(EnergyModel(_line, 3, "binary").annealing_path(transition="gwg"), "move_param", 1.5),
            "n_flips",
        ),
        (
            lambda: setattr(EnergyModel(_line, 3, "binary").annealing_path(transition="dmala"), "move_param", -1),
            "alpha",
        ),
        (
            lambda: setattr(EnergyModel(_line, 3, "binary").annealing_path(transition="dmala"), "move_param", "x"),
            "alpha",
        ),
        (lambda: setattr(EnergyModel(_line, 3, "binary").annealing_path(), "move_param", 2), "no parameter"),
    ],
)
def test_bad_transitions_are_refused_in_one_line(build, needle):
    with pytest.raises(ValueError, match=needle) as err:
        build()
    assert "\n" not in str(err.value)


def test_every_transition_is_reversible_and_says_what_it_runs():
    model = _binary_energy(dim=4)
    for t in ("gibbs", "gwg", "dmala"):
        path = model.annealing_path("uniform", transition=t)
        assert path.reversible and path.transition_name == t and path.transition_description


def test_sweep_seconds_prices_each_transition():
    """The time check's unit of work: a gradient move is one gradient of log_f; ``auto`` is priced as one where
    log_f has a gradient, and as the gibbs sweep (dim calls) where it has none (gibbs is then its only pick)."""
    model = _binary_energy()
    assert "calls of log_f per sweep" in model.sweep_seconds(10)[1]
    for t in ("gwg", "dmala", "auto"):
        assert "gradient of log_f per move" in model.sweep_seconds(10, transition=t)[1]
    w = torch.randn(6, 3, generator=_gen(1), dtype=torch.float64)
    no_grad = EnergyModel(
        lambda x: (torch.nn.functional.one_hot(x.long(), 3).double() * w).sum((1, 2)), 6, ("categorical", 3)
    )
    assert "calls of log_f per sweep" in no_grad.sweep_seconds(10, transition="auto")[1]
