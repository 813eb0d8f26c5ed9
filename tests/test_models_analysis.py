"""Analysis models of continuous data (Sohl-Dickstein & Culpepper 2012, Sec. 3, models 3 and 4):
products of Laplace / Student's t experts and the mcRBM.

Ground truth: numerical quadrature of exp(-E) (1-D / 2-D), exact sampling of complete PoEs,
a written-out loop evaluation of the documented mcRBM energy, autograd for the analytic
gradients, and HAIS (the other engineer's annealing path) for log Z.
"""

import math
import warnings

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from logzbench import schedules
from logzbench.errors import ModelFileError
from logzbench.estimators.ais import ais
from logzbench.models.hamiltonian import HamiltonianPath, gaussian_proposal
from logzbench.models.mcrbm import MCRBM
from logzbench.models.poe import ProductOfExperts, expert_log_normalizer


def _hais_log_z(model, n_dist=200, n_chains=500, seed=0):
    e0, s0, lz0, g0 = gaussian_proposal(model.n_dims)
    path = HamiltonianPath(e0, s0, lz0, model.energy, grad0=g0, grad1=model.energy_grad, kernel="hais")
    res = ais(path, schedules.linear(n_dist), n_chains, torch.Generator().manual_seed(seed), n_bootstrap=0)
    return res.log_z, res.log_z_stderr


def _poe_integrand(model):
    Phi, lam = model.Phi.numpy(), model.lam.numpy()

    def f(*x):
        u = Phi @ np.array(x[::-1])  # nquad passes the innermost variable first
        e = lam * (np.abs(u) if model.expert == "laplace" else np.log1p(u * u))
        return math.exp(-float(e.sum()))

    return f


# ---------------------------------------------------------------------- PoE: closed form
@pytest.mark.parametrize(
    "expert,lam",
    [("laplace", 1.0), ("laplace", 0.3), ("laplace", 2.5), ("student-t", 0.6), ("student-t", 1.0), ("student-t", 2.7)],
)
def test_poe_closed_form_equals_quadrature_1d(expert, lam):
    for phi in (0.4, -1.7):
        m = ProductOfExperts(np.array([[phi]]), np.array([lam]), expert)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            z, _ = integrate.quad(_poe_integrand(m), -np.inf, np.inf, epsabs=0, epsrel=1e-10, limit=500, points=None)
        assert m.exact_log_z() == pytest.approx(math.log(z), abs=1e-7)


@pytest.mark.parametrize(
    "expert,lam", [("laplace", 1.0), ("laplace", (0.5, 2.0)), ("student-t", (1.2, 3.0)), ("student-t", (1.5, 2.5))]
)
def test_poe_closed_form_equals_quadrature_2d(expert, lam):
    m = ProductOfExperts.random(2, expert=expert, lam=lam, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        z, _ = integrate.nquad(
            _poe_integrand(m), [[-np.inf, np.inf]] * 2, opts={"epsabs": 0, "epsrel": 1e-8, "limit": 200}
        )
    assert m.exact_log_z() == pytest.approx(math.log(z), abs=1e-5)


def test_poe_expert_normalisers():
    """Laplace z = 2 / lambda (log Z = log|det Phi^-1| + L log 2 at lambda = 1); Student's t z
    is the Beta-function integral, infinite for lambda <= 1/2."""
    assert expert_log_normalizer(np.ones(3), "laplace") == pytest.approx(np.full(3, math.log(2)))
    lam = np.array([0.75, 1.0, 4.0])
    ref = [math.log(math.sqrt(math.pi) * math.gamma(v - 0.5) / math.gamma(v)) for v in lam]
    assert expert_log_normalizer(lam, "student-t") == pytest.approx(ref)
    assert expert_log_normalizer(lam, "student-t")[1] == pytest.approx(math.log(math.pi))  # Cauchy
    assert np.isinf(expert_log_normalizer(np.array([0.5, 0.2]), "student-t")).all()
    m = ProductOfExperts.random(4, seed=0)
    assert m.exact_log_z() == pytest.approx(-float(np.linalg.slogdet(m.Phi.numpy())[1]) + 4 * math.log(2))


def test_poe_improper_or_overcomplete_log_z():
    with pytest.raises(ValueError, match="lambda <= 1/2"):
        ProductOfExperts.random(3, expert="student-t", lam=0.5, seed=0).exact_log_z()
    assert ProductOfExperts.random(3, 5, expert="student-t", lam=0.5, seed=0).exact_log_z() is None
    assert ProductOfExperts.random(3, 5, seed=0).exact_log_z() is None
    with pytest.raises(ModelFileError, match="'Phi'.*infinite"):
        ProductOfExperts(np.ones((2, 3)))  # L < M
    with pytest.raises(ModelFileError, match="'Phi' has rank 1"):
        ProductOfExperts(np.array([[1.0, 2.0], [2.0, 4.0]]))


@pytest.mark.parametrize("expert,lam", [("laplace", 1.0), ("student-t", (1.5, 3.0))])
def test_poe_hais_log_z_matches_closed_form(expert, lam):
    """HAIS (200 distributions x 500 chains) agrees with the closed form within 4 standard errors."""
    for seed in (0, 1):
        m = ProductOfExperts.random(3, expert=expert, lam=lam, seed=seed)
        log_z, se = _hais_log_z(m, seed=seed)
        assert 0 < se < 0.2
        assert abs(log_z - m.exact_log_z()) < 4 * se, (log_z, se, m.exact_log_z())


@pytest.mark.parametrize("expert", ["laplace", "student-t"])
def test_poe_exact_samples_have_expert_marginals(expert):
    """u = Phi x of :meth:`sample` follows each expert's 1-D density exactly (KS test)."""
    m = ProductOfExperts.random(3, expert=expert, lam=(1.0, 2.5), seed=4)
    u = (m.sample(4000, seed=1) @ m.Phi.T).numpy()
    for l, lam in enumerate(m.lam.numpy()):
        if expert == "laplace":
            dist = stats.laplace(scale=1 / lam)
        else:
            nu = 2 * lam - 1  # (1 + u^2)^-lambda = Student's t(nu) scaled by 1/sqrt(nu)
            dist = stats.t(df=nu, scale=1 / math.sqrt(nu))
        assert stats.kstest(u[:, l], dist.cdf).pvalue > 1e-3
    assert torch.equal(m.sample(5, seed=2), m.sample(5, seed=2))


def test_poe_log_prob_normalised_and_energy_values():
    m = ProductOfExperts.random(2, expert="student-t", lam=2.0, seed=0)
    x = torch.tensor([[0.3, -1.2], [2.0, 0.5]], dtype=torch.float64)
    u = x @ m.Phi.T
    assert torch.allclose(m.energy(x), (2.0 * torch.log1p(u**2)).sum(1))
    assert torch.allclose(m.log_prob(x), -m.energy(x) - m.exact_log_z())
    lap = ProductOfExperts(m.Phi, None, "laplace")
    assert torch.allclose(lap.energy(x), u.abs().sum(1))
    assert lap.energy(torch.zeros(1, 2, dtype=torch.float64)).item() == 0.0


@pytest.mark.parametrize("expert", ["laplace", "student-t"])
@pytest.mark.parametrize("L", [3, 5])
def test_poe_analytic_gradient_equals_autograd(expert, L):
    m = ProductOfExperts.random(3, L, expert=expert, lam=(0.7, 2.0), seed=2)
    x = torch.randn(50, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 2
    xg = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(m.energy(xg).sum(), xg)
    assert torch.allclose(m.energy_grad(x), g, atol=1e-12, rtol=1e-12)


# ---------------------------------------------------------------------- mcRBM
def _loop_energy(x, a):
    """The documented mcRBM energy, written out with scalar loops."""
    P, C, W, bm, bc, bv, sigma = (a[k] for k in ("P", "C", "W", "b_m", "b_c", "b_v", "sigma"))
    L, M = C.shape
    sq = sum(x[i] ** 2 for i in range(M))
    e = 0.0
    for k in range(P.shape[1]):
        pooled = sum(P[l, k] * sum(C[l, i] * x[i] for i in range(M)) ** 2 for l in range(L)) / (sq + 1.0)
        e -= math.log(1.0 + math.exp(-0.5 * pooled + bc[k]))
    for j in range(W.shape[0]):
        e -= math.log(1.0 + math.exp(sum(W[j, i] * x[i] for i in range(M)) + bm[j]))
    return e + sq / (2.0 * float(sigma) ** 2) - sum(x[i] * bv[i] for i in range(M))


def test_mcrbm_energy_matches_loop_evaluation():
    m = MCRBM.random(3, 7, n_mean=3, n_factors=5, seed=1, sigma=0.8, scale=1.5)
    a = m.to_arrays()
    g = torch.Generator().manual_seed(3)
    x = torch.cat([torch.zeros(1, 3, dtype=torch.float64), torch.randn(5, 3, generator=g, dtype=torch.float64) * 2])
    e = m.energy(x)
    for i in range(x.shape[0]):
        assert e[i].item() == pytest.approx(_loop_energy(x[i].tolist(), a), rel=1e-12, abs=1e-12)
    assert (m.n_mean, m.n_cov, m.n_factors, m.size, m.n_dims) == (3, 4, 5, 7, 3)


def test_mcrbm_energy_at_zero_symmetry_and_growth():
    """At x = 0 only the biases remain; the covariance term is even in x and bounded; the
    quadratic term dominates far away (so Z is finite)."""
    m = MCRBM.random(4, 8, seed=2, sigma=1.3)
    zero = torch.zeros(1, 4, dtype=torch.float64)
    ref = -torch.nn.functional.softplus(m.b_c).sum() - torch.nn.functional.softplus(m.b_m).sum()
    assert m.energy(zero).item() == pytest.approx(ref.item(), rel=1e-14)
    # covariance part alone (no mean units, no visible bias): even in x
    a = m.to_arrays()
    cov_only = MCRBM(a["P"], a["C"], np.zeros((0, 4)), np.zeros(0), a["b_c"], np.zeros(4), a["sigma"])
    x = torch.randn(20, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 3
    assert torch.allclose(cov_only.energy(x), cov_only.energy(-x), rtol=1e-13, atol=1e-13)
    # bounded below by the documented Gaussian-type bound, and E / ||x||^2 -> 1 / (2 sigma^2)
    assert (m.energy(x) >= m.energy_lower_bound(x)).all()
    xhat = x / x.norm(dim=1, keepdim=True)
    far = 1e4 * xhat
    assert torch.allclose(
        m.energy(far) / (far**2).sum(1), torch.full((20,), 0.5 / 1.3**2, dtype=torch.float64), rtol=1e-3
    )


def test_mcrbm_analytic_gradient_equals_autograd():
    m = MCRBM.random(5, 9, n_factors=6, seed=4, sigma=0.7, scale=2.0, bias_scale=1.0)
    x = torch.randn(40, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 2
    xg = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(m.energy(xg).sum(), xg)
    assert torch.allclose(m.energy_grad(x), g, atol=1e-12, rtol=1e-10)


def test_mcrbm_grid_log_z_matches_hais():
    """M = 2: a trapezoid rule on a fine grid (exp(-E) decays like a Gaussian) agrees with HAIS
    within 4 of its standard errors."""
    m = MCRBM.random(2, 6, seed=0, scale=2.0, bias_scale=1.0)
    h = 0.02
    t = torch.arange(-12.0, 12.0 + h / 2, h, dtype=torch.float64)
    xx, yy = torch.meshgrid(t, t, indexing="ij")
    e = m.energy(torch.stack([xx.reshape(-1), yy.reshape(-1)], dim=1))
    log_z_grid = float(torch.logsumexp(-e, 0)) + 2 * math.log(h)  # trapezoid = sum (edges negligible)
    e_edge = min(float(e.reshape(xx.shape)[[0, -1], :].min()), float(e.reshape(xx.shape)[:, [0, -1]].min()))
    assert e_edge + log_z_grid > 30  # exp(-E) / Z < e^-30 on the grid's edge: the truncation is negligible
    log_z, se = _hais_log_z(m, n_dist=200, n_chains=500)
    assert abs(log_z - log_z_grid) < 4 * se + 1e-6, (log_z, se, log_z_grid)
    assert m.exact_log_z() is None


# ---------------------------------------------------------------------- files
def _roundtrip(model, tmp_path, cls, **kw):
    arrays = model.to_arrays()
    assert str(arrays["model_type"]) == model.family and arrays["model_type"].ndim == 0
    assert all(a.dtype == np.float64 for k, a in arrays.items() if k != "model_type")
    np.savez(tmp_path / "m.npz", **arrays)
    with np.load(tmp_path / "m.npz", allow_pickle=False) as f:
        loaded = cls.from_arrays({k: f[k] for k in f.files}, source="m.npz", **kw)
    x = torch.randn(7, model.n_dims, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert torch.equal(loaded.energy(x), model.energy(x))
    assert (loaded.family, loaded.kind, loaded.size, loaded.n_dims) == (
        model.family,
        "analysis",
        model.size,
        model.n_dims,
    )
    return loaded


@pytest.mark.parametrize("expert", ["laplace", "student-t"])
def test_poe_roundtrip(expert, tmp_path):
    m = ProductOfExperts.random(4, 6, expert=expert, lam=(0.8, 2.0), seed=0)
    loaded = _roundtrip(m, tmp_path, ProductOfExperts)
    assert loaded.expert == expert and loaded.family == f"poe-{expert}"
    # without model_type the expert must be given
    arrays = {k: v for k, v in m.to_arrays().items() if k != "model_type"}
    assert ProductOfExperts.from_arrays(arrays, expert=expert).expert == expert
    with pytest.raises(ModelFileError, match="model_type"):
        ProductOfExperts.from_arrays(arrays, source="f.npz")
    assert m.to("cpu").device == torch.device("cpu")


def test_mcrbm_roundtrip(tmp_path):
    m = MCRBM.random(3, 5, seed=1, sigma=0.6)
    loaded = _roundtrip(m, tmp_path, MCRBM)
    assert loaded.family == "mcrbm" and float(loaded.sigma) == pytest.approx(0.6)
    a = {k: v for k, v in m.to_arrays().items() if k != "model_type"}
    a["sigma"] = np.array([0.6])  # a 1-element sigma is accepted too
    assert MCRBM.from_arrays(a).size == 5
    assert m.to("cpu").device == torch.device("cpu")


def _bad(arrays, **changes):
    out = dict(arrays)
    out.update(changes)
    return out


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda a: _bad(a, Phi=np.where(np.eye(3, dtype=bool), np.nan, a["Phi"])), r"'Phi' contains NaN"),
        (lambda a: _bad(a, lam=np.array([1.0, np.inf, 1.0])), r"'lam' contains inf"),
        (lambda a: _bad(a, lam=np.array([1.0, 0.0, 1.0])), r"'lam' must be > 0"),
        (lambda a: _bad(a, lam=np.array([1.0, -2.0, 1.0])), r"'lam' must be > 0"),
        (lambda a: _bad(a, lam=np.ones(4)), r"'lam' has shape \(4,\), expected \(3,\)"),
        (lambda a: _bad(a, Phi=np.ones(3)), r"'Phi' must have 2 dimension"),
        (lambda a: _bad(a, Phi=np.array([["a"] * 3] * 3)), r"'Phi' has non-real dtype"),
        (lambda a: {k: v for k, v in a.items() if k != "Phi"}, r"missing array 'Phi'"),
        (lambda a: _bad(a, extra=np.ones(2)), r"unexpected array\(s\) \['extra'\]"),
        (lambda a: _bad(a, model_type=np.array("mcrbm")), r"'model_type' is 'mcrbm'"),
    ],
)
def test_poe_from_arrays_refuses_bad_input(change, match):
    arrays = ProductOfExperts.random(3, expert="student-t", lam=2.0, seed=0).to_arrays()
    with pytest.raises(ModelFileError, match=match) as info:
        ProductOfExperts.from_arrays(change(arrays), source="bad.npz")
    assert str(info.value).startswith("bad.npz:")


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda a: _bad(a, C=np.full_like(a["C"], np.nan)), r"'C' contains NaN"),
        (lambda a: _bad(a, W=np.full_like(a["W"], -np.inf)), r"'W' contains inf"),
        (lambda a: _bad(a, P=np.where(a["P"] > -1, np.nan, 0.0)), r"'P' contains NaN"),
        (lambda a: _bad(a, b_v=np.array([np.nan, 0.0, 0.0])), r"'b_v' contains NaN"),
        (lambda a: _bad(a, b_c=np.array([np.inf] * a["b_c"].size)), r"'b_c' contains inf"),
        (lambda a: _bad(a, sigma=np.array(np.nan)), r"'sigma' contains NaN"),
        (lambda a: _bad(a, sigma=np.array(0.0)), r"'sigma' must be > 0"),
        (lambda a: _bad(a, sigma=np.array(-1.0)), r"'sigma' must be > 0"),
        (lambda a: _bad(a, sigma=np.array(1e-300)), r"'sigma' .* overflows"),
        (lambda a: _bad(a, sigma=np.ones(2)), r"'sigma' must hold one value"),
        (lambda a: _bad(a, b_v=np.zeros(4)), r"'b_v' has shape \(4,\), expected \(3,\)"),
        (lambda a: _bad(a, b_m=np.zeros(7)), r"'b_m' has shape \(7,\)"),
        (lambda a: _bad(a, b_c=np.zeros(1)), r"'b_c' has shape \(1,\)"),
        (lambda a: _bad(a, W=np.zeros((2, 5))), r"'W' has shape \(2, 5\), expected \(J, 3\)"),
        (lambda a: _bad(a, P=np.zeros((9, 2))), r"'P' has shape \(9, 2\)"),
        (lambda a: {k: v for k, v in a.items() if k != "b_m"}, r"missing array 'b_m'"),
        (lambda a: _bad(a, model_type=np.array("poe-laplace")), r"'model_type' is 'poe-laplace'"),
    ],
)
def test_mcrbm_from_arrays_refuses_bad_input(change, match):
    arrays = MCRBM.random(3, 5, n_mean=2, seed=0).to_arrays()
    with pytest.raises(ModelFileError, match=match) as info:
        MCRBM.from_arrays(change(arrays), source="bad.npz")
    assert str(info.value).startswith("bad.npz:")


def test_random_models_have_the_interface():
    for m in (
        ProductOfExperts.random(4, 6, expert="laplace", generator=torch.Generator().manual_seed(0)),
        ProductOfExperts.random(4, expert="student-t", seed=1, lam=1.5),
        MCRBM.random(4, 10, seed=0),
    ):
        assert m.kind == "analysis" and m.family in ("poe-laplace", "poe-student-t", "mcrbm")
        assert m.device == torch.device("cpu")
        x = torch.randn(3, 4, dtype=torch.float64)
        assert m.energy(x).shape == (3,) and m.energy(x).dtype == torch.float64
        assert m.energy_grad(x).shape == (3, 4)
    assert ProductOfExperts.random(4, 6, seed=0).size == 6 and MCRBM.random(4, 10, seed=0).size == 10
    a, b = ProductOfExperts.random(3, seed=7), ProductOfExperts.random(3, seed=7)
    assert torch.equal(a.Phi, b.Phi)
