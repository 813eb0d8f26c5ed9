"""TRW-BP and the mixture-of-trees reference for grid MRFs (discriminance-sampling paper,
Sec. 6, Fig. 2(c)): random spanning trees, exactness on trees, the upper bound, local
consistency, normalisation, sampling, importance sampling, input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.sparse.csgraph import connected_components

from logzbench.models import GridMRF, TreeMixtureReference, trw_mixture
from logzbench.models.grid import FactorialReference, enumerate_states
from logzbench.models.grid_trw import (
    edge_appearance_probabilities,
    grid_edges,
    random_spanning_trees,
    trw_bp,
)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def site_bits(x: torch.Tensor) -> np.ndarray:
    """States (n, H, W) as an (n, H*W) int array in row-major site order."""
    return x.reshape(len(x), -1).long().numpy()


# ---------------------------------------------------------------------- spanning trees
def test_grid_edges_order():
    H, W = 3, 4
    src, dst = grid_edges(H, W)
    assert len(src) == H * (W - 1) + (H - 1) * W
    # horizontal edges row-major, then vertical edges row-major
    for r in range(H):
        for c in range(W - 1):
            e = r * (W - 1) + c
            assert (src[e], dst[e]) == (r * W + c, r * W + c + 1)
    for r in range(H - 1):
        for c in range(W):
            e = H * (W - 1) + r * W + c
            assert (src[e], dst[e]) == (r * W + c, (r + 1) * W + c)


@pytest.mark.parametrize("shape", [(3, 4), (5, 5), (10, 10), (1, 6), (4, 1), (1, 1)])
def test_random_spanning_trees(shape):
    H, W = shape
    n = H * W
    src, dst = grid_edges(H, W)
    trees = random_spanning_trees(H, W, 6, 3)
    assert len(trees) >= 6
    covered = np.zeros(len(src), dtype=bool)
    for t in trees:
        assert len(t) == n - 1 and len(np.unique(t)) == n - 1
        g = sp.coo_matrix((np.ones(len(t)), (src[t], dst[t])), shape=(n, n))
        assert connected_components(g, directed=False)[0] == 1  # n-1 edges + connected = tree
        covered[t] = True
    assert covered.all()
    rho = edge_appearance_probabilities(trees, len(src))
    assert np.all(rho > 0) and np.all(rho <= 1)
    assert rho.sum() == pytest.approx(n - 1, abs=1e-12)
    # same seed, same trees; a Generator works too
    again = random_spanning_trees(H, W, 6, 3)
    assert len(again) == len(trees) and all(np.array_equal(a, b) for a, b in zip(trees, again))
    from_rng = random_spanning_trees(H, W, 6, np.random.default_rng(3))
    assert all(np.array_equal(a, b) for a, b in zip(trees, from_rng))
    if H > 1 and W > 1:
        other = random_spanning_trees(H, W, 6, 4)
        assert any(not np.array_equal(a, b) for a, b in zip(trees, other))
    else:  # a chain: every spanning tree is the whole graph
        assert np.all(rho == 1.0)


def test_covering_trees_added_until_every_edge_is_used():
    # one spanning tree of a 4x4 grid leaves 24 - 15 = 9 edges uncovered
    trees = random_spanning_trees(4, 4, 1, 0)
    assert len(trees) > 1
    src, _ = grid_edges(4, 4)
    rho = edge_appearance_probabilities(trees, len(src))
    assert np.all(rho > 0) and rho.sum() == pytest.approx(15, abs=1e-12)


# ---------------------------------------------------------------------- exact on trees
@pytest.mark.parametrize("shape", [(1, 7), (5, 1), (1, 2), (1, 1)])
@pytest.mark.parametrize("sigma_pair", [0.5, 3.0])
def test_trw_is_exact_on_chains(shape, sigma_pair):
    m = GridMRF.random(*shape, sigma_pair=sigma_pair, sigma_unary=0.5, seed=sum(shape) + int(sigma_pair))
    ref = trw_mixture(m, n_trees=3, seed=1)
    assert ref.converged and np.all(ref.rho == 1.0)
    assert ref.log_z_bound == pytest.approx(m.exact_log_z(), abs=1e-8)
    x = enumerate_states(*shape)
    torch.testing.assert_close(ref.log_prob(x), m.log_prob(x), rtol=0, atol=1e-8)


# ---------------------------------------------------------------------- bound, consistency
def _naive_decomposition_bound(m: GridMRF, ref: TreeMixtureReference) -> float:
    """``(1/T) sum_T log Z(theta^T)`` with ``theta^T = (theta_s, theta_e / rho_e on T)``: a valid
    upper bound (Jensen) that the TRW optimum over all decompositions cannot exceed."""
    H, W = m.shape
    xb = site_bits(enumerate_states(H, W))
    th_n = m.theta_unary.reshape(-1, 2).numpy()
    th_e = np.concatenate([m.theta_h.reshape(-1, 2, 2).numpy(), m.theta_v.reshape(-1, 2, 2).numpy()])
    src, dst = ref.edges[:, 0], ref.edges[:, 1]
    unary = th_n[np.arange(H * W)[None, :], xb].sum(1)
    pair = th_e[np.arange(len(src))[None, :], xb[:, src], xb[:, dst]] / ref.rho  # (n_states, E)
    vals = []
    for t in ref.trees:
        lf = unary + pair[:, t].sum(1)
        vals.append(float(torch.logsumexp(torch.as_tensor(lf), 0)))
    return float(np.mean(vals))


@pytest.mark.parametrize("shape", [(3, 3), (3, 4)])
@pytest.mark.parametrize("sigma_pair", [0.5, 2.0])
def test_trw_bound_normalisation_and_consistency(shape, sigma_pair):
    m = GridMRF.random(*shape, sigma_pair=sigma_pair, seed=7 * shape[1] + int(10 * sigma_pair))
    ref = trw_mixture(m, n_trees=5, seed=2)
    assert ref.converged and ref.n_iter < 10_000
    assert ref.name == "trw" and ref.shape == shape and ref.n_trees == len(ref.trees) >= 5
    log_z = m.brute_force_log_z()
    # upper bound, and no worse than the plain split of theta over the trees
    assert ref.log_z_bound >= log_z
    assert ref.log_z_bound <= _naive_decomposition_bound(m, ref) + 1e-9
    # the mixture is a normalised distribution
    x = enumerate_states(*shape)
    lp = ref.log_prob(x)
    assert float(lp.exp().sum()) == pytest.approx(1.0, abs=1e-10)
    torch.testing.assert_close(ref.log_prob(x.reshape(len(x), -1)), lp)
    # local consistency of the pseudo-marginals
    src, dst = ref.edges[:, 0], ref.edges[:, 1]
    tn, te = ref.tau_node, ref.tau_edge
    torch.testing.assert_close(te.sum(2), tn[src], rtol=0, atol=1e-6)
    torch.testing.assert_close(te.sum(1), tn[dst], rtol=0, atol=1e-6)
    # every tree distribution (hence the mixture) has marginals tau_s
    xb = site_bits(x)
    p = lp.exp().numpy()
    emp = np.array([(p * xb[:, s]).sum() for s in range(xb.shape[1])])
    np.testing.assert_allclose(emp, tn[:, 1].numpy(), rtol=0, atol=1e-6)
    # reparameterisation: sum_s log tau_s + sum_e rho_e log(tau_e / tau_s tau_t) = log f(x) - bound
    ltn, lte = tn.log().numpy(), te.log().numpy()
    E = len(src)
    g = ltn[np.arange(xb.shape[1])[None, :], xb].sum(1)
    g = g + (
        ref.rho
        * (
            lte[np.arange(E)[None, :], xb[:, src], xb[:, dst]]
            - ltn[src[None, :], xb[:, src]]
            - ltn[dst[None, :], xb[:, dst]]
        )
    ).sum(1)
    np.testing.assert_allclose(g - m.log_f(x).numpy(), -ref.log_z_bound, rtol=0, atol=1e-7)


def test_fixed_point_does_not_depend_on_damping():
    """The TRW objective is strictly concave for spanning-tree rho: one fixed point."""
    m = GridMRF.random(3, 4, sigma_pair=0.5, seed=31)
    a = trw_mixture(m, n_trees=4, seed=5, damping=0.5)
    b = trw_mixture(m, n_trees=4, seed=5, damping=1.0)
    c = trw_mixture(m, n_trees=4, seed=5, damping=0.2)
    assert a.converged and b.converged and c.converged
    assert a.log_z_bound == pytest.approx(b.log_z_bound, abs=1e-8)
    assert a.log_z_bound == pytest.approx(c.log_z_bound, abs=1e-8)
    torch.testing.assert_close(a.tau_edge, b.tau_edge, rtol=0, atol=1e-8)


def test_10x10_converges_and_bounds():
    m = GridMRF.random(10, 10, sigma_pair=2.0, seed=1)
    ref = trw_mixture(m)  # defaults (10 trees, seed 0)
    assert isinstance(ref, TreeMixtureReference) and ref.converged and ref.n_iter < 10_000
    assert ref.log_z_bound >= m.exact_log_z()
    assert ref.log_z_bound >= m.mean_field().log_z_bound
    assert ref.rho.sum() == pytest.approx(99, abs=1e-9)
    s = ref.sample(500, gen(0))
    assert s.shape == (500, 10, 10) and s.dtype == torch.float64 and ((s == 0) | (s == 1)).all()
    lp = ref.log_prob(s)
    assert lp.shape == (500,) and torch.isfinite(lp).all()


# ---------------------------------------------------------------------- sampling
def test_sampling_matches_log_prob():
    m = GridMRF.random(2, 3, sigma_pair=1.5, sigma_unary=0.5, seed=4)
    ref = trw_mixture(m, n_trees=3, seed=0)
    assert ref.n_trees >= 2 and len({tuple(t) for t in ref.trees}) >= 2  # a real mixture
    n = 200_000
    s = ref.sample(n, gen(11))
    codes = torch.as_tensor(site_bits(s) @ (2 ** np.arange(5, -1, -1)))
    freq = torch.bincount(codes, minlength=64).double() / n
    p = ref.log_prob(enumerate_states(2, 3)).exp()  # enumerate_states: site 0 = most significant bit
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-12)
    tol = 5 * torch.sqrt(p * (1 - p) / n) + 1e-4
    assert ((freq - p).abs() <= tol).all(), float(((freq - p).abs() / tol).max())
    # same seed, same samples; another seed, other samples
    assert torch.equal(ref.sample(n, gen(11)), s)
    assert torch.equal(ref.sample(1000, gen(5)), ref.sample(1000, gen(5)))
    assert not torch.equal(ref.sample(n, gen(12)), s)


def test_importance_sampling_recovers_log_z():
    m = GridMRF.random(4, 4, sigma_pair=1.0, seed=21)
    ref = trw_mixture(m, n_trees=10, seed=0)
    n = 4000
    x = ref.sample(n, gen(3))
    lw = (m.log_f(x) - ref.log_prob(x)).numpy()
    shift = lw.max()
    w = np.exp(lw - shift)
    est = shift + math.log(w.mean())
    se = math.sqrt(w.var(ddof=1) / n) / w.mean()
    log_z = m.exact_log_z()
    assert abs(est - log_z) < 4 * se + 1e-6, (est, log_z, se)
    assert ref.log_z_bound >= log_z


def test_same_interface_as_factorial_reference():
    m = GridMRF.random(3, 3, sigma_pair=1.0, seed=2)
    for ref in (m.mean_field(), trw_mixture(m, n_trees=4)):
        assert isinstance(ref.name, str) and isinstance(ref.log_z_bound, float) and isinstance(ref.n_iter, int)
        s = ref.sample(7, gen(0))
        assert s.shape == (7, 3, 3) and s.dtype == torch.float64
        assert ref.log_prob(s).shape == (7,) and ref.log_prob(s.reshape(7, 9)).shape == (7,)
        assert ref.marginals.shape == (3, 3)
    assert isinstance(m.mean_field(), FactorialReference)


# ---------------------------------------------------------------------- validation
def test_non_convergence_warns():
    m = GridMRF.random(4, 4, sigma_pair=2.0, seed=0)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        ref = trw_mixture(m, max_iter=2)
    assert not ref.converged and ref.n_iter == 2


def test_bad_inputs_raise_clear_errors():
    m = GridMRF.random(3, 3, sigma_pair=1.0, seed=0)
    with pytest.raises(ValueError, match="n_trees must be an integer >= 1"):
        trw_mixture(m, n_trees=0)
    with pytest.raises(ValueError, match="damping must be in \\(0, 1\\]"):
        trw_mixture(m, damping=0)
    with pytest.raises(ValueError, match="damping must be in \\(0, 1\\]"):
        trw_mixture(m, damping=1.5)
    with pytest.raises(ValueError, match="tol must be"):
        trw_mixture(m, tol=0.0)
    with pytest.raises(ValueError, match="max_iter must be"):
        trw_mixture(m, max_iter=0)
    with pytest.raises(ValueError, match="seed must be"):
        trw_mixture(m, seed="a")
    with pytest.raises(ValueError, match="needs a GridMRF"):
        trw_mixture("not a model")
    with pytest.raises(ValueError, match="grid size"):
        random_spanning_trees(0, 3, 2)
    ref = trw_mixture(m, n_trees=2)
    with pytest.raises(ValueError, match="expected \\(n, 3, 3\\)"):
        ref.log_prob(torch.zeros(2, 4, 4))
    with pytest.raises(ValueError, match="only 0 and 1"):
        ref.log_prob(torch.full((2, 3, 3), 0.5))
    with pytest.raises(ValueError, match="positive integer"):
        ref.sample(0, gen(0))
    src, dst = grid_edges(3, 3)
    with pytest.raises(ValueError, match="in \\(0, 1\\]"):
        trw_bp(np.zeros((9, 2)), np.zeros((len(src), 2, 2)), src, dst, np.zeros(len(src)))
