"""An EnergyModel's exact conditional (block Gibbs over colour classes) and categorical sites scored in one
call (issue 39, items 2-3).

Every transition is checked against enumeration: invariance by chi-square on draws from ``p_beta``, detailed
balance exactly on the transition matrix (and the sampler against that matrix by chi-square), and AIS's
log Z against the exact one within its own standard error.  The conditional's check refuses, in one line,
every wrong input the issue names.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from conftest import chi_square_p
from scipy import stats

from logzbench.api import estimate
from logzbench.models import EnergyModel
from logzbench.models.energy_blocks import schedule
from logzbench.models.energy_path import FactorizedReference

V, H = 6, 3  # the joint RBM-like energy: visible sites 0..5, hidden 6..8
P_MIN = 1e-3  # chi-square p-values below this fail


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _joint_rbm(seed: int = 0, conditional=None, colouring=None, **kw) -> EnergyModel:
    """``log f(v, h) = a.v + b.h + v W h`` over 6 + 3 binary sites, with its two-class conditional."""
    g = _gen(seed)
    W = torch.randn(V, H, generator=g, dtype=torch.float64)
    a = 0.5 * torch.randn(V, generator=g, dtype=torch.float64)
    b = 0.5 * torch.randn(H, generator=g, dtype=torch.float64)

    def log_f(x):
        x = x.double()
        v, h = x[:, :V], x[:, V:]
        return v @ a + h @ b + ((v @ W) * h).sum(1)

    def rbm_conditional(x, c):  # the visible units given the hidden ones, or the hidden given the visible
        x = x.double()
        return x[:, V:] @ W.T + a if c == 0 else x[:, :V] @ W + b

    cond = rbm_conditional if conditional is None else conditional(rbm_conditional)
    return EnergyModel(
        log_f, V + H, "binary", conditional=cond, colouring=colouring or [range(V), range(V, V + H)], **kw
    )


def _potts_rbm(q: int = 3, nv: int = 3, nh: int = 2, seed: int = 1, **kw) -> EnergyModel:
    """A bipartite categorical energy: ``sum a[i, v_i] + sum b[j, h_j] + sum J[i, j, v_i, h_j]``."""
    g = _gen(seed)
    a = torch.randn(nv, q, generator=g, dtype=torch.float64) * 0.5
    b = torch.randn(nh, q, generator=g, dtype=torch.float64) * 0.5
    J = torch.randn(nv, nh, q, q, generator=g, dtype=torch.float64) * 0.7

    def log_f(x):
        oh = torch.nn.functional.one_hot(x.long(), q).double()
        v, h = oh[:, :nv], oh[:, nv:]
        return (v * a).sum((1, 2)) + (h * b).sum((1, 2)) + torch.einsum("nia,ijab,njb->n", v, J, h)

    def potts_conditional(x, c):
        oh = torch.nn.functional.one_hot(x.long(), q).double()
        if c == 0:
            return a + torch.einsum("ijab,njb->nia", J, oh[:, nv:])
        return b + torch.einsum("nia,ijab->njb", oh[:, :nv], J)

    colouring = [range(nv), range(nv, nv + nh)]
    return EnergyModel(log_f, nv + nh, ("categorical", q), conditional=potts_conditional, colouring=colouring, **kw)


def _codes(x: torch.Tensor, q: int) -> np.ndarray:
    """The index of each state in ``enumerate_states`` (site 0 the fastest digit)."""
    return (x.long() * (q ** torch.arange(x.shape[1]))).sum(1).numpy()


def _p_beta(path, model, beta):
    xs = model.enumerate_states(0, model.n_enumerated())
    return xs, torch.softmax(path.log_f(path.state_from_data(xs), beta), 0)


def _invariance_p(model, path, beta, n=20000, sweeps=2, seed=3) -> float:
    g = _gen(seed)
    xs, p = _p_beta(path, model, beta)
    state = path.state_from_data(xs[torch.multinomial(p, n, replacement=True, generator=g)])
    for _ in range(sweeps):
        state = path.transition(state, beta, g)
    # the cached log f and log r are those of the new states
    assert torch.allclose(state.lf, model.log_f(state.x))
    assert torch.allclose(state.lr, path._log_r(state.x))
    counts = np.bincount(_codes(state.x, int(model.n_states)), minlength=len(p)).astype(float)
    return chi_square_p(counts, p.numpy())


# --------------------------------------------------------------------------- block Gibbs
@pytest.mark.parametrize("beta", [0.0, 0.6, 1.0])
def test_block_gibbs_leaves_p_beta_invariant_binary(beta):
    model = _joint_rbm()
    rows = torch.randint(0, 2, (40, V + H), generator=_gen(2))
    path = model.annealing_path("base-rate", data=rows)  # a non-uniform factorised reference
    assert _invariance_p(model, path, beta) > P_MIN


def test_block_gibbs_leaves_p_beta_invariant_categorical():
    ref = FactorizedReference(torch.randn(5, 3, generator=_gen(4), dtype=torch.float64))
    model = _potts_rbm(q=3, reference=ref)  # a non-uniform factorised start
    path = model.annealing_path("uniform")
    assert _invariance_p(model, path, 0.7) > P_MIN


def test_block_gibbs_runs_every_class_in_2c_minus_1_calls():
    calls = []
    model = _joint_rbm(conditional=lambda f: lambda x, c: calls.append(c) or f(x, c))
    path = model.annealing_path("uniform")
    state = path.sample_initial(8, _gen(0))
    calls.clear()
    path.transition(state, 0.5, _gen(1))
    assert calls == [0, 1, 0] == [c for c, _ in schedule(2)]


def _chain_energy():
    """Four binary sites on a path 0-1-2-3 in three classes {0, 3}, {1}, {2}: forward and reverse scans
    differ, and a fixed scan is not reversible."""
    g = _gen(5)
    h = torch.randn(4, generator=g, dtype=torch.float64)
    J = torch.randn(3, generator=g, dtype=torch.float64) * 1.5

    def log_f(x):
        x = x.double()
        return x @ h + (J * x[:, :3] * x[:, 1:]).sum(1)

    def conditional(x, c):
        x = x.double()
        pad = torch.nn.functional.pad(x, (1, 1))  # neighbours of site i: pad[i] and pad[i + 2]
        Jp = torch.nn.functional.pad(J, (1, 1))  # the coupling to the left of site i: Jp[i], right: Jp[i + 1]
        field = h + Jp[:-1] * pad[:, :-2] + Jp[1:] * pad[:, 2:]
        return field[:, [[0, 3], [1], [2]][c]]

    return EnergyModel(log_f, 4, "binary", conditional=conditional, colouring=[[0, 3], [1], [2]])


def _class_matrix(model, path, beta, sites) -> np.ndarray:
    """The exact kernel of one class update: draw ``sites`` from ``p_beta``'s conditional (by enumeration)."""
    xs, p = _p_beta(path, model, beta)
    p = p.numpy()
    S = len(p)
    codes = _codes(xs, 2)
    T = np.zeros((S, S))
    off = [i for i in range(4) if i not in sites]
    key = {s: tuple(xs[s, off].long().tolist()) for s in range(S)}
    for s in range(S):
        same = [t for t in range(S) if key[t] == key[s]]
        w = p[same] / p[same].sum()
        T[codes[s], [codes[t] for t in same]] = w
    return T


def test_the_symmetrised_block_sweep_satisfies_detailed_balance():
    model = _chain_energy()
    path = model.annealing_path("uniform")
    beta = 0.8
    xs, p = _p_beta(path, model, beta)
    p = p.numpy()
    K = [_class_matrix(model, path, beta, s) for s in ([0, 3], [1], [2])]
    forward, backward = K[0] @ K[1] @ K[2], K[2] @ K[1] @ K[0]
    T = 0.5 * (forward + backward)
    flow = p[:, None] * T
    assert np.allclose(flow, flow.T, atol=1e-14)  # detailed balance, exactly
    assert not np.allclose(p[:, None] * forward, (p[:, None] * forward).T, atol=1e-3)  # a fixed scan: not
    # the sampler runs T: one sweep from every state, 3000 chains each, against T's rows
    n = 3000
    g = _gen(6)
    start = xs.repeat_interleave(n, 0)
    after = path.transition(path.state_from_data(start), beta, g)
    joint = np.zeros((16, 16))
    np.add.at(joint, (_codes(start, 2), _codes(after.x, 2)), 1)
    stat, dof = 0.0, 0
    for s in range(16):
        keep = T[s] * n >= 5
        obs = np.append(joint[s, keep], joint[s, ~keep].sum())
        exp = np.append(T[s, keep], T[s, ~keep].sum()) * n
        obs, exp = obs[exp > 0], exp[exp > 0]
        stat += float(((obs - exp) ** 2 / exp).sum())
        dof += len(obs) - 1
    assert joint[:, ~(T.sum(0) > 0)].sum() == 0 and (joint[T == 0] == 0).all()  # nothing T forbids
    assert stats.chi2.sf(stat, dof) > P_MIN


def test_ais_with_the_conditional_covers_the_exact_log_z():
    """Over 20 seeds, the exact log Z lies within 2 reported standard errors of AIS's estimate at least 15
    times (about 19 expected; fewer than 15 has probability below 1e-3 for an honest standard error)."""
    model = _joint_rbm(seed=3)
    exact = estimate(model, "exact").log_z
    hits = 0
    for seed in range(20):
        res = estimate(model, "ais", K=30, chains=30, seed=seed)
        assert res.settings.get("acceptance_rate", 1.0) == 1.0
        hits += abs(res.log_z - exact) <= 2 * res.log_z_stderr
    assert hits >= 15, hits


def test_the_mixture_path_takes_block_gibbs_too(monkeypatch):
    model = _potts_rbm(q=3)
    rows = torch.randint(0, 3, (60, 5), generator=_gen(7))
    exact = estimate(model, "exact").log_z
    sweeps = []
    block = model.block_gibbs
    monkeypatch.setattr(model, "block_gibbs", lambda *a: sweeps.append(a[3].shape) or block(*a))
    res = estimate(model, "ais", K=50, chains=100, seed=0, init="mixture", train_data=rows)
    assert abs(res.log_z - exact) <= 4 * res.log_z_stderr + 1e-6, (res.log_z, res.log_z_stderr, exact)
    assert sweeps and all(shape == (100, 5, 3) for shape in sweeps)  # each chain's component's site terms


# --------------------------------------------------------------------------- the check: one line each
def _scaled(f):
    return lambda x, c: f(x, c) * (1.02 if c == 1 else 1.0)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: _joint_rbm(conditional=_scaled), ["conditional (<lambda>) is wrong", "class 1", "log-odds"]),
        (lambda: _joint_rbm(conditional=lambda f: lambda x, c: -f(x, c)), ["is wrong", "class 0"]),
        (lambda: _joint_rbm(conditional=lambda f: lambda x, c: f(x, c)[:, :2]), ["shape (4, 2)", "expected (4, 6)"]),
        (lambda: _joint_rbm(conditional=lambda f: lambda x, c: f(x, c).float().half()), ["dtype torch.float16"]),
        (lambda: _joint_rbm(conditional=lambda f: lambda x, c: f(x, c).numpy()), ["not a torch.Tensor"]),
        (lambda: _joint_rbm(conditional=lambda f: lambda x, c: 1 / 0), ["raised ZeroDivisionError", "class 0"]),
        (lambda: _joint_rbm(colouring=[range(V - 1), range(V, V + H)]), ["site 5 is in no class"]),
        (lambda: _joint_rbm(colouring=[range(V + 1), range(V, V + H)]), ["site 6 is in classes 0 and 1"]),
        (lambda: _joint_rbm(colouring=[[0, 0, 1, 2, 3, 4, 5], range(V, V + H)]), ["site 0 is in class 0 twice"]),
        (lambda: _joint_rbm(colouring=[range(V), range(V, V + H + 1)]), ["class 1 has site 9, outside 0..8"]),
        (lambda: _joint_rbm(colouring=[range(V), []]), ["class 1 is empty"]),
        (lambda: _joint_rbm(colouring=[range(V + H)]), ["class 0 couples sites", "must not interact"]),
        (lambda: _joint_rbm(colouring=[[0, 1, 2, 3, 4, 6], [5, 7, 8]]), ["couples sites"]),
        (lambda: EnergyModel(lambda x: x.sum(1), 3, "binary", colouring=[[0, 1, 2]]), ["go together"]),
        (
            lambda: EnergyModel(lambda x: -(x**2).sum(1), 2, "continuous", conditional=len, colouring=[[0, 1]]),
            ["for discrete domains"],
        ),
    ],
)
def test_a_bad_conditional_or_colouring_is_refused_in_one_line(make, words):
    with pytest.raises(ValueError) as info:
        make().check()
    msg = str(info.value)
    assert all(w in msg for w in words) and "\n" not in msg, msg


def test_a_wrong_conditional_is_refused_before_a_run_of_a_model_built_in_code():
    model = _joint_rbm(conditional=_scaled)
    with pytest.raises(ValueError, match="is wrong"):
        estimate(model, "ais", K=5, chains=4)


def test_the_check_tolerates_float32_rounding():
    """A float32 energy of magnitude about 100 and its float32 conditional: accepted."""
    g = _gen(8)
    W = torch.randn(20, 10, generator=g) * 3

    def log_f(x):
        v, h = x[:, :20], x[:, 20:]
        return ((v @ W) * h).sum(1) + 10 * v.sum(1)

    def conditional(x, c):
        return x[:, 20:] @ W.T + 10 if c == 0 else x[:, :20] @ W

    model = EnergyModel(log_f, 30, "binary", conditional=conditional, colouring=[range(20), range(20, 30)])
    assert model.check().conditional is conditional


def test_a_hard_constraint_across_classes_is_not_a_coupling():
    """Sites 0 and 1 (one class) may not be 1 with site 2 (the other): log f = -inf there.  Accepted by the
    check (a value of mass zero says nothing about a coupling), and block Gibbs stays exact."""
    h = torch.tensor([0.3, -0.4, 0.8], dtype=torch.float64)

    def log_f(x):
        x = x.double()
        banned = (x[:, 2] == 1) & ((x[:, 0] == 1) | (x[:, 1] == 1))
        return torch.where(banned, -torch.inf, x @ h)

    def conditional(x, c):
        x = x.double()
        if c == 0:
            return torch.where(x[:, 2:] == 1, -torch.inf, h[:2].expand(x.shape[0], 2))
        free = (x[:, :2] == 0).all(1, keepdim=True)
        return torch.where(free, h[2:].expand(x.shape[0], 1), -torch.inf)

    model = EnergyModel(log_f, 3, "binary", conditional=conditional, colouring=[[0, 1], [2]]).check()
    path = model.annealing_path("uniform")
    assert _invariance_p(model, path, 0.5) > P_MIN


# --------------------------------------------------------------------------- categorical sites in one call
class _Counted:
    """A pairwise categorical energy counting its calls and rows."""

    def __init__(self, dim=5, q=4, seed=9):
        g = _gen(seed)
        self.q = q
        self.h = torch.randn(dim, q, generator=g, dtype=torch.float64) * 0.5
        J = torch.randn(dim, dim, q, q, generator=g, dtype=torch.float64) * 0.4
        self.J = 0.5 * (J + J.permute(1, 0, 3, 2))
        self.rows = []

    def __call__(self, x):
        self.rows.append(int(x.shape[0]))
        oh = torch.nn.functional.one_hot(x.long(), self.q).double()
        return (oh * self.h).sum((1, 2)) + 0.5 * torch.einsum("nia,ijab,njb->n", oh, self.J, oh)


def test_a_categorical_sweep_scores_each_site_in_one_call():
    f = _Counted()
    model = EnergyModel(f, 5, ("categorical", 4))
    path = model.annealing_path("uniform")
    state = path.sample_initial(7, _gen(0))
    f.rows.clear()
    path.transition(state, 0.5, _gen(1))
    assert f.rows == [7 * 3] * 5  # dim calls, each on every chain's 3 other states of its site


class _UserReference:
    """A factorised reference behind the documented interface only (no per-site terms)."""

    def __init__(self, log_p):
        self.inner = FactorizedReference(log_p)

    def log_prob(self, x):
        return self.inner.log_prob(x)

    def sample(self, n, generator):
        return self.inner.sample(n, generator)


@pytest.mark.parametrize("user", [False, True], ids=["factorised", "user-reference"])
def test_the_categorical_heat_bath_leaves_p_beta_invariant(user):
    f = _Counted(dim=5, q=4)
    log_p = torch.randn(5, 4, generator=_gen(10), dtype=torch.float64)
    ref = _UserReference(log_p) if user else FactorizedReference(log_p)
    model = EnergyModel(f, 5, ("categorical", 4), reference=ref)
    path = model.annealing_path("uniform")
    assert path.factorized is not user
    assert _invariance_p(model, path, 0.6, n=30000) > P_MIN


# --------------------------------------------------------------------------- time estimate, devices
SLEEP = 0.01  # seconds each call of a slow function sleeps: a floor under its measured time


def test_a_block_sweep_is_estimated_from_timed_calls_of_the_conditional():
    def slow(f):
        def conditional(x, c):
            time.sleep(SLEEP)
            return f(x, c)

        return conditional

    seconds, what = _joint_rbm(conditional=slow).sweep_seconds(4)
    assert seconds >= 3 * SLEEP  # 2C - 1 = 3 calls of the conditional
    assert "3 calls of the conditional per sweep" in what and "1 of log_f" in what and "on 4 chains" in what


def test_a_categorical_sweep_is_estimated_on_the_other_states():
    f = _Counted(dim=5, q=4)
    seconds, what = EnergyModel(f, 5, ("categorical", 4)).sweep_seconds(6)
    assert "5 calls of log_f per sweep (each on the 3 other states of a site)" in what
    assert max(f.rows) == 6 * 3  # timed on the batch one site's update scores


class _JointRBM(torch.nn.Module):
    """The joint RBM-like energy as a module, its conditional a method: both move with the model."""

    def __init__(self):
        super().__init__()
        g = _gen(11)
        self.W = torch.nn.Parameter(torch.randn(V, H, generator=g, dtype=torch.float64))
        self.a = torch.nn.Parameter(0.5 * torch.randn(V, generator=g, dtype=torch.float64))
        self.b = torch.nn.Parameter(0.5 * torch.randn(H, generator=g, dtype=torch.float64))

    def forward(self, x):
        v, h = x[:, :V], x[:, V:]
        return v @ self.a + h @ self.b + ((v @ self.W) * h).sum(1)

    def conditional(self, x, c):
        return x[:, V:] @ self.W.T + self.a if c == 0 else x[:, :V] @ self.W + self.b


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_block_gibbs_on_cuda_agrees_with_exact():
    net = _JointRBM()
    model = EnergyModel(net, V + H, "binary", conditional=net.conditional, colouring=[range(V), range(V, V + H)])
    exact = estimate(model, "exact").log_z
    res = estimate(model, "ais", K=200, chains=200, seed=0, device="cuda")
    assert res.settings["device"].startswith("cuda")
    assert abs(res.log_z - exact) <= 4 * res.log_z_stderr + 1e-6, (res.log_z, res.log_z_stderr, exact)
    on_gpu = model.to("cuda")
    assert on_gpu.colouring[0].device.type == "cuda" and net.W.device.type == "cuda"
    path = on_gpu.annealing_path("uniform")
    state = path.transition(
        path.sample_initial(8, torch.Generator(device="cuda").manual_seed(0)),
        0.5,
        torch.Generator(device="cuda").manual_seed(1),
    )
    assert state.x.device.type == "cuda"


def test_the_path_describes_its_block_sweep():
    """What a refusal or record says the gibbs transition is: block Gibbs with a conditional on a factorised
    reference, Metropolis-within-Gibbs without one."""
    model = _joint_rbm()
    assert "block-Gibbs sweep over 2 colour classes" in model.annealing_path("uniform").transition_description
    plain = EnergyModel(model.log_f_fn, model.dim, "binary")
    assert "Metropolis-within-Gibbs" in plain.annealing_path("uniform").transition_description
