"""Grid MRF (discriminance-sampling paper, Sec. 6): exact log Z, Gibbs invariance, mean field,
AIS on the grid path, reference distributions, input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from logzbench.estimators.ais import ais
from logzbench.models.base import AnnealingPath
from logzbench.models.grid import (
    FactorialReference,
    GridAnnealingPath,
    GridMRF,
    enumerate_states,
    mean_field,
    uniform_reference,
)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------- exact log Z
@pytest.mark.parametrize("shape", [(3, 3), (4, 4), (3, 5), (5, 3), (1, 4), (2, 1)])
@pytest.mark.parametrize("sigma_pair", [0.5, 2.0])
def test_transfer_matrix_matches_brute_force(shape, sigma_pair):
    m = GridMRF.random(*shape, sigma_pair=sigma_pair, seed=17 * shape[0] + shape[1] + int(10 * sigma_pair))
    assert m.exact_log_z() == pytest.approx(m.brute_force_log_z(), abs=1e-10)


def test_log_f_matches_tables():
    """The Ising rewrite reproduces the sum of table look-ups exactly."""
    m = GridMRF.random(3, 4, sigma_pair=1.3, sigma_unary=0.7, seed=3)
    x = enumerate_states(3, 4)[::37]
    xi = x.long()
    ref = torch.zeros(len(x), dtype=torch.float64)
    for n in range(len(x)):
        s = 0.0
        for r in range(3):
            for c in range(4):
                s += m.theta_unary[r, c, xi[n, r, c]]
                if c < 3:
                    s += m.theta_h[r, c, xi[n, r, c], xi[n, r, c + 1]]
                if r < 2:
                    s += m.theta_v[r, c, xi[n, r, c], xi[n, r + 1, c]]
        ref[n] = s
    torch.testing.assert_close(m.log_f(x), ref, rtol=0, atol=1e-12)
    # flat rows give the same values
    torch.testing.assert_close(m.log_f(x.reshape(len(x), -1)), ref, rtol=0, atol=1e-12)


def test_exact_log_z_refuses_wide_grids():
    m = GridMRF.random(21, 22, sigma_pair=0.1, seed=0)
    with pytest.raises(ValueError, match="min\\(H, W\\) <= 20"):
        m.exact_log_z()
    with pytest.raises(ValueError, match="refusing to enumerate"):
        GridMRF.random(5, 5, 0.1).brute_force_log_z()


def test_random_is_reproducible_and_scaled():
    a = GridMRF.random(10, 10, sigma_pair=2.0, seed=7)
    b = GridMRF.random(10, 10, sigma_pair=2.0, generator=gen(7))
    torch.testing.assert_close(a.theta_h, b.theta_h)
    assert a.theta_unary.shape == (10, 10, 2) and a.theta_h.shape == (10, 9, 2, 2) and a.theta_v.shape == (9, 10, 2, 2)
    assert a.theta_unary.std().item() == pytest.approx(0.1, rel=0.25)
    pair = torch.cat([a.theta_h.reshape(-1), a.theta_v.reshape(-1)])
    assert pair.std().item() == pytest.approx(2.0, rel=0.15)


# ---------------------------------------------------------------------- Gibbs invariance
def _tv_bound(n_states: int, n_samples: int) -> float:
    # E[TV] <= 0.5 sqrt(K / N); TV moves by at most 1/N per sample, so (McDiarmid) it exceeds
    # its mean by 0.01 with probability < exp(-2 N 0.01^2).
    return 0.5 * math.sqrt(n_states / n_samples) + 0.01


@pytest.mark.parametrize("beta", [1.0, 0.6])
def test_gibbs_leaves_p_beta_invariant(beta):
    m = GridMRF.random(3, 3, sigma_pair=1.0, sigma_unary=0.5, seed=11)
    logits0 = torch.randn(3, 3, generator=gen(1), dtype=torch.float64)
    path = GridAnnealingPath(m, logits0)
    states = enumerate_states(3, 3)
    log_p = path.log_f(states, beta)
    p = torch.softmax(log_p, dim=0)
    n = 40_000
    g = gen(2)
    x = path.sample_initial(n, g)
    for _ in range(20):
        x = path.transition(x, beta, g)
    codes = (x.reshape(n, -1).long() * (2 ** torch.arange(8, -1, -1))).sum(1)
    emp = torch.bincount(codes, minlength=512).double() / n
    tv = 0.5 * (emp - p).abs().sum().item()
    assert tv < _tv_bound(512, n), tv
    # and the GridMRF.gibbs entry point at beta = 1 samples the model
    if beta == 1.0:
        y = m.gibbs(torch.zeros(n, 3, 3, dtype=torch.float64), gen(3), n_sweeps=20)
        codes = (y.reshape(n, -1).long() * (2 ** torch.arange(8, -1, -1))).sum(1)
        emp = torch.bincount(codes, minlength=512).double() / n
        p1 = torch.exp(m.log_f(states) - m.exact_log_z())
        assert 0.5 * (emp - p1).abs().sum().item() < _tv_bound(512, n)


def test_gibbs_detects_wrong_distribution():
    """Sanity check of the test's power: chains of a different model are far in TV."""
    m = GridMRF.random(3, 3, sigma_pair=1.0, sigma_unary=0.5, seed=11)
    other = GridMRF.random(3, 3, sigma_pair=1.0, sigma_unary=0.5, seed=12)
    n = 40_000
    y = other.gibbs(torch.zeros(n, 3, 3, dtype=torch.float64), gen(3), n_sweeps=20)
    codes = (y.reshape(n, -1).long() * (2 ** torch.arange(8, -1, -1))).sum(1)
    emp = torch.bincount(codes, minlength=512).double() / n
    p1 = torch.exp(m.log_f(enumerate_states(3, 3)) - m.exact_log_z())
    assert 0.5 * (emp - p1).abs().sum().item() > 3 * _tv_bound(512, n)


# ---------------------------------------------------------------------- mean field
@pytest.mark.parametrize("sigma_pair", [0.5, 2.0])
@pytest.mark.parametrize("damping", [0.5, 1.0])
def test_mean_field_bound_and_fixed_point(sigma_pair, damping):
    m = GridMRF.random(4, 4, sigma_pair=sigma_pair, seed=5)
    ref = mean_field(m, damping=damping, tol=1e-12)
    assert ref.log_z_bound <= m.exact_log_z() + 1e-12
    q = ref.marginals
    eta = m.field + m.neighbour_field(q[None])[0]
    torch.testing.assert_close(q, torch.sigmoid(eta), rtol=0, atol=1e-10)
    # the bound is E_q[log f] + H(q), checked by enumeration
    x = enumerate_states(4, 4)
    lq = ref.log_prob(x)
    w = lq.exp()
    assert ref.log_z_bound == pytest.approx(float((w * (m.log_f(x) - lq)).sum()), abs=1e-9)


def test_mean_field_bound_beats_uniform_on_10x10():
    m = GridMRF.random(10, 10, sigma_pair=1.0, seed=1)
    ref = m.mean_field()
    u = uniform_reference(m)
    uniform_bound = m.const + 0.25 * (m.J_h.sum() + m.J_v.sum()).item() + 0.5 * m.field.sum().item() + u.entropy()
    assert uniform_bound <= ref.log_z_bound <= m.exact_log_z()


# ---------------------------------------------------------------------- AIS
@pytest.mark.parametrize("init", ["uniform", "mean-field"])
def test_ais_on_4x4_grid_agrees_with_exact(init):
    m = GridMRF.random(4, 4, sigma_pair=1.0, seed=21)
    path = m.annealing_path(init)
    assert isinstance(path, AnnealingPath)
    log_z = m.exact_log_z()
    res = ais(path, np.linspace(0.0, 1.0, 51), 2000, gen(4), n_bootstrap=200)
    assert abs(res.log_z - log_z) < 4 * res.log_z_stderr + 1e-3, (res.log_z, log_z, res.log_z_stderr)
    ratio = np.exp(res.log_weights - log_z)
    se = ratio.std(ddof=1) / math.sqrt(len(ratio))
    assert abs(ratio.mean() - 1.0) < 4 * se, (ratio.mean(), se)


def test_path_protocol_pieces():
    m = GridMRF.random(3, 4, sigma_pair=0.8, seed=2)
    ref = mean_field(m)
    path = GridAnnealingPath(m, ref)  # a FactorialReference is accepted
    x = enumerate_states(3, 4)
    # beta = 0 is p0, beta = 1 is the model
    torch.testing.assert_close(path.log_f(x, 0.0) - path.log_z0(), ref.log_prob(x))
    torch.testing.assert_close(path.log_f(x, 1.0), m.log_f(x))
    torch.testing.assert_close(path.log_f_ratio(x, 0.3, 0.7), path.log_f(x, 0.7) - path.log_f(x, 0.3))
    assert path.log_z0() == pytest.approx(float(torch.logsumexp(path.log_f(x, 0.0), 0)), abs=1e-12)
    s = path.state_from_data(x.reshape(len(x), -1))
    torch.testing.assert_close(s, x)
    torch.testing.assert_close(path.state_from_data(x), x)
    y = path.transition(path.sample_initial(5, gen(0)), 0.5, gen(1))
    assert y.shape == (5, 3, 4) and y.dtype == torch.float64 and ((y == 0) | (y == 1)).all()


# ---------------------------------------------------------------------- references
@pytest.mark.parametrize("kind", ["uniform", "mean-field", "random"])
def test_reference_log_prob_normalised_and_sampling(kind):
    m = GridMRF.random(3, 3, sigma_pair=1.5, seed=9)
    if kind == "uniform":
        ref = uniform_reference(m)
    elif kind == "mean-field":
        ref = mean_field(m)
    else:
        ref = FactorialReference(torch.randn(3, 3, generator=gen(5), dtype=torch.float64) * 2)
    x = enumerate_states(3, 3)
    assert float(torch.logsumexp(ref.log_prob(x), 0)) == pytest.approx(0.0, abs=1e-12)
    s = ref.sample(50_000, gen(6))
    assert s.shape == (50_000, 3, 3)
    torch.testing.assert_close(s.mean(0), ref.marginals, rtol=0, atol=0.02)


# ---------------------------------------------------------------------- validation
def test_bad_inputs_raise_clear_errors():
    tu = np.zeros((3, 4, 2))
    th = np.zeros((3, 3, 2, 2))
    tv = np.zeros((2, 4, 2, 2))
    GridMRF(tu, th, tv)
    with pytest.raises(ValueError, match="'theta_h' has shape"):
        GridMRF(tu, np.zeros((3, 4, 2, 2)), tv)
    with pytest.raises(ValueError, match="'theta_v' has shape"):
        GridMRF(tu, th, np.zeros((3, 4, 2, 2)))
    with pytest.raises(ValueError, match="theta_unary"):
        GridMRF(np.zeros((3, 4)), th, tv)
    bad = tv.copy()
    bad[0, 0, 1, 1] = np.nan
    with pytest.raises(ValueError, match="'theta_v' contains NaN"):
        GridMRF(tu, th, bad)
    bad = tu.copy()
    bad[1, 1, 0] = np.inf
    with pytest.raises(ValueError, match="'theta_unary' contains inf"):
        GridMRF(bad, th, tv)
    m = GridMRF(tu, th, tv)
    with pytest.raises(ValueError, match="expects"):
        m.log_f(torch.zeros(2, 4, 3))
    with pytest.raises(ValueError, match="only 0 and 1"):
        m.log_f(torch.full((2, 3, 4), 0.5))
    path = GridAnnealingPath(m, torch.zeros(3, 4))
    with pytest.raises(ValueError, match="expects"):
        path.state_from_data(torch.zeros(2, 11))
    with pytest.raises(ValueError, match="'p0_logits' has shape"):
        GridAnnealingPath(m, torch.zeros(4, 3))
    with pytest.raises(ValueError, match="'p0_logits' contains NaN"):
        GridAnnealingPath(m, torch.full((3, 4), float("nan")))
    with pytest.raises(ValueError, match="reference logits' contains NaN"):
        FactorialReference(torch.full((3, 4), float("nan")))
    with pytest.raises(ValueError, match="sigma_pair"):
        GridMRF.random(3, 3, sigma_pair=float("nan"))
    with pytest.raises(ValueError, match="damping"):
        mean_field(m, damping=0.0)
    with pytest.raises(ValueError, match="unknown initial distribution"):
        m.annealing_path("trees")
