"""Linear and bilinear generative models (Sohl-Dickstein & Culpepper 2012, Sec. 3, models 1-2).

Ground truth is analytic or numerical: the Gaussian-prior marginal N(0, Phi Phi^T + sigma_n^2 I)
(scipy), 1-D quadrature over the latent for L = 1, and Eq. 41 (Phi = 0 -> N(0, sigma_n^2 I)).
Hamiltonian AIS over the latent (prior -> unnormalised posterior, Eq. 29) must reproduce them.
"""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from logzbench import schedules
from logzbench.errors import ModelFileError
from logzbench.estimators import ais as ais_mod
from logzbench.estimators.ais import ais
from logzbench.estimators.result import log_mean_stderr
from logzbench.models.bilinear import BilinearGenerative
from logzbench.models.hamiltonian import HamiltonianPath, autograd_grad
from logzbench.models.linear_generative import LinearGenerative

pytestmark = pytest.mark.usefixtures("one_thread")


def _t(x):
    return torch.as_tensor(np.asarray(x, dtype=np.float64))


def _models():
    """One small model of each family (n_latent 3, 3 and 2 + 2)."""
    return {
        "linear-gaussian": LinearGenerative.random(4, 3, prior="gaussian", seed=1),
        "linear-laplace": LinearGenerative.random(4, 3, prior="laplace", seed=2),
        "bilinear": BilinearGenerative.random(4, 3, 2, 2, seed=3),
    }


def latent_path(model, X, n_chains, step_size, kernel="hais", analytic=True):
    """HAIS path over the latent for the rows of ``X``, each repeated ``n_chains`` times
    (chain ``i * n_chains + j`` belongs to row ``i``): prior -> prior x likelihood (Eq. 29).

    ``energy1 = prior_energy + prior_log_z + likelihood_energy`` is ``-log p(x, a)``, so its
    normaliser is ``p(x)``; the prior's ``log Z`` must be included, or ``log Z_1`` comes out as
    ``log p(x) + prior_log_z()``."""
    Xr = X.repeat_interleave(n_chains, dim=0)
    log_z_prior = model.prior_log_z()

    def energy1(a):
        return model.prior_energy(a) + log_z_prior + model.likelihood_energy(Xr, a)

    grads = {}
    if analytic:
        grads = {
            "grad0": model.prior_energy_grad,
            "grad1": lambda a: model.prior_energy_grad(a) + model.likelihood_energy_grad(Xr, a),
        }
    return HamiltonianPath(
        model.prior_energy,
        model.sample_prior,
        model.prior_log_z(),
        energy1,
        kernel=kernel,
        step_size=step_size,
        lower=model.latent_lower(),
        **grads,
    )


def _log_spaced(K, beta_min=1e-4):
    """``0`` then ``K`` log-spaced inverse temperatures up to 1: the posterior's width shrinks
    like ``1 / sqrt(beta)``, so equal steps in ``log beta`` keep successive distributions close."""
    return np.concatenate([[0.0], np.logspace(math.log10(beta_min), 0.0, K)])


def per_row_ais(model, X, n_chains, K, step_size, seed=0, schedule=None):
    """``(log p_hat(x_i), stderr_i)`` for every row of ``X`` from one batched AIS run."""
    path = latent_path(model, X, n_chains, step_size)
    betas = schedules.linear(K) if schedule is None else schedule
    state, _ = ais_mod.run(path, betas, X.shape[0] * n_chains, torch.Generator().manual_seed(seed))
    log_mean, se = log_mean_stderr(state.log_w.reshape(X.shape[0], n_chains), dim=1)
    return log_mean, se, path


# ---------------------------------------------------------------------- closed forms
def test_linear_gaussian_exact_matches_scipy():
    model = LinearGenerative.random(5, 3, prior="gaussian", sigma_n=0.1, seed=4)
    X = model.sample(50, torch.Generator().manual_seed(0))
    Phi = model.Phi.numpy()
    cov = Phi @ Phi.T + 0.01 * np.eye(5)
    want = stats.multivariate_normal(mean=np.zeros(5), cov=cov).logpdf(X.numpy())
    np.testing.assert_allclose(model.exact_log_likelihood(X).numpy(), want, rtol=1e-10, atol=1e-10)
    # a single row is accepted too
    np.testing.assert_allclose(model.exact_log_likelihood(X[0]).numpy(), want[:1], rtol=1e-10)


def _quad_log_likelihood(model, x):
    """``log int exp(-E_prior(a) - log Z_prior - E_lik(x, a)) da`` for L = 1 by adaptive quadrature
    (break points at the prior's kink 0 and at the posterior mode, where the mass is)."""
    xt = _t(x)[None, :]
    phi = model.Phi[:, 0]
    mode = float(xt[0] @ phi / (phi @ phi + model.sigma_n**2))
    e_mode = float(model.prior_energy(_t([[mode]])) + model.likelihood_energy(xt, _t([[mode]])))

    def f(a):
        at = _t([[a]])
        e = float(model.prior_energy(at) + model.likelihood_energy(xt, at))
        return math.exp(-(e - e_mode))

    width = model.sigma_n / float(phi.norm())
    pts = sorted({0.0, mode, mode - 5 * width, mode + 5 * width})
    lo, hi = min(pts) - 60.0, max(pts) + 60.0
    val, err = integrate.quad(f, lo, hi, points=pts, limit=500, epsabs=0, epsrel=1e-11)
    return math.log(val) - e_mode - model.prior_log_z()


@pytest.mark.parametrize("sigma_n", [0.1, 0.5])
def test_linear_gaussian_exact_matches_quadrature_L1(sigma_n):
    model = LinearGenerative.random(3, 1, prior="gaussian", sigma_n=sigma_n, seed=5)
    X = model.sample(4, torch.Generator().manual_seed(1))
    exact = model.exact_log_likelihood(X).numpy()
    quad = [_quad_log_likelihood(model, x) for x in X.numpy()]
    np.testing.assert_allclose(exact, quad, rtol=0, atol=1e-8)


def test_linear_laplace_ais_matches_quadrature_L1():
    """No closed form: HAIS over the latent agrees with 1-D quadrature within 4 standard errors."""
    model = LinearGenerative.random(2, 1, prior="laplace", sigma_n=0.1, seed=6)
    assert model.exact_log_likelihood(torch.zeros(1, 2)) is None
    X = model.sample(3, torch.Generator().manual_seed(2))
    X = torch.cat([X, 0.05 * model.Phi.T], dim=0)  # a point whose posterior straddles the kink at 0
    quad = torch.tensor([_quad_log_likelihood(model, x) for x in X.numpy()])
    est, se, path = per_row_ais(model, X, n_chains=400, K=400, step_size=0.1, seed=3, schedule=_log_spaced(400))
    assert 0.5 < path.acceptance_rate < 1.0
    z = (est - quad) / se
    assert bool((se < 0.2).all()), se
    assert bool((z.abs() < 4).all()), (est, quad, se)


# ---------------------------------------------------------------------- Phi = 0 (Eq. 41)
def _zero_phi_models(sigma_n=0.3):
    return [
        LinearGenerative(torch.zeros(4, 3), sigma_n=sigma_n, prior="gaussian"),
        LinearGenerative(torch.zeros(4, 3), sigma_n=sigma_n, prior="laplace"),
        BilinearGenerative(
            torch.zeros(4, 3),
            torch.randn(3, 2, dtype=torch.float64),
            torch.rand(3, 2, dtype=torch.float64),
            sigma_n=sigma_n,
        ),
    ]


@pytest.mark.parametrize("i", [0, 1, 2])
def test_phi_zero_closed_form_and_ais_recovers_it(i):
    model = _zero_phi_models()[i]
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(i), dtype=torch.float64)
    want = stats.multivariate_normal(mean=np.zeros(4), cov=0.09 * np.eye(4)).logpdf(x.numpy())
    np.testing.assert_allclose(model.exact_log_likelihood(x).numpy(), want, rtol=1e-12)
    path = latent_path(model, x[:1], 64, step_size=0.2)
    res = ais(path, schedules.linear(20), 64, torch.Generator().manual_seed(0), n_bootstrap=0)
    assert np.ptp(res.log_weights) < 1e-10  # the likelihood does not depend on the latent: equal weights
    assert res.log_z == pytest.approx(want[0], abs=1e-10)


def test_bilinear_zero_theta_or_psi_is_closed_form():
    x = torch.randn(3, 4, dtype=torch.float64)
    base = BilinearGenerative.random(4, 3, 2, 2, seed=0)
    assert base.exact_log_likelihood(x) is None
    for m in (
        BilinearGenerative(base.Phi, torch.zeros(3, 2), base.Psi),
        BilinearGenerative(base.Phi, base.Theta, torch.zeros(3, 2)),
    ):
        want = stats.multivariate_normal(mean=np.zeros(4), cov=0.01 * np.eye(4)).logpdf(x.numpy())
        np.testing.assert_allclose(m.exact_log_likelihood(x).numpy(), want, rtol=1e-12)


# ---------------------------------------------------------------------- HAIS vs closed form
def test_hais_over_latent_matches_gaussian_closed_form():
    """200 test points x 200 chains each (batched) against the closed form:

    * every point: ``|log p_hat - log p| < 4`` reported standard errors (at least 98 % of them);
    * the mean over points of the unbiased ratio ``p_hat / p`` is 1 within 4 standard errors;
    * the mean log error, corrected for the Jensen bias of ``log p_hat`` (``-se^2 / 2`` per point,
      which does not average away over points), is 0 within 4 standard errors of the mean.
    """
    model = LinearGenerative.random(3, 2, prior="gaussian", sigma_n=0.1, seed=7)
    n_x, n_chains = 200, 200
    X = model.sample(n_x, torch.Generator().manual_seed(4))
    exact = model.exact_log_likelihood(X)
    est, se, path = per_row_ais(model, X, n_chains=n_chains, K=200, step_size=0.1, seed=5, schedule=_log_spaced(200))
    assert bool(torch.isfinite(est).all())
    err = est - exact
    assert float((err.abs() < 4 * se).double().mean()) >= 0.98
    ratio = torch.exp(err)
    ratio_se = float(torch.sqrt(((ratio * se) ** 2).sum())) / n_x
    assert abs(float(ratio.mean()) - 1.0) < 4 * ratio_se, (float(ratio.mean()), ratio_se)
    se_mean = float(torch.sqrt((se**2).sum())) / n_x
    bias = -float((se**2).mean()) / 2
    assert abs(float(err.mean()) - bias) < 4 * se_mean, (float(err.mean()), bias, se_mean)
    assert se_mean < 0.05
    assert 0.5 < path.acceptance_rate < 1.0


# ---------------------------------------------------------------------- priors
@pytest.mark.parametrize("family", ["linear-gaussian", "linear-laplace", "bilinear"])
def test_sample_prior_matches_prior_energy(family):
    """KS test per coordinate against the 1-D marginal ``exp(-E(t e_j))`` of the energy itself
    (the priors factorise), normalised numerically on a fine grid."""
    model = _models()[family]
    samples = model.sample_prior(20_000, torch.Generator().manual_seed(8))
    assert samples.shape == (20_000, model.n_latent) and samples.dtype == torch.float64
    lower = model.latent_lower()
    for j in range(model.n_latent):
        lo = 0.0 if lower is not None and lower[j] == 0 else -40.0
        t = np.linspace(lo, 40.0, 400_001)
        z = torch.zeros(t.size, model.n_latent, dtype=torch.float64)
        z[:, j] = _t(t)
        e_origin = float(model.prior_energy(torch.zeros(1, model.n_latent, dtype=torch.float64)))
        dens = np.exp(-(model.prior_energy(z).numpy() - e_origin))
        cdf = integrate.cumulative_trapezoid(dens, t, initial=0.0)
        cdf /= cdf[-1]
        res = stats.kstest(samples[:, j].numpy(), lambda s: np.interp(s, t, cdf))
        assert res.pvalue > 1e-3, (family, j, res)
    if family == "bilinear":
        assert bool((samples[:, model.n_c :] >= 0).all())


@pytest.mark.parametrize("family", ["linear-gaussian", "linear-laplace"])
def test_prior_normalised_1d(family):
    model = LinearGenerative.random(3, 1, prior=family.split("-")[1], seed=0)
    lz = model.prior_log_z()

    def density(a):
        return math.exp(-float(model.prior_energy(_t([[a]]))) - lz)

    val = sum(integrate.quad(density, lo, hi, limit=200)[0] for lo, hi in ((-np.inf, 0.0), (0.0, np.inf)))
    assert val == pytest.approx(1.0, abs=1e-9)


def test_bilinear_prior_normalised_and_supported_on_positive_d():
    """Kc = Kd = 1: the prior factorises, so Z is the product of two 1-D integrals over the
    whole real line (the energy is +inf for d < 0, contributing nothing)."""
    model = BilinearGenerative.random(3, 2, 1, 1, seed=0)
    assert model.latent_lower().tolist() == [-math.inf, 0.0]
    assert math.isinf(float(model.prior_energy(_t([[0.3, -1e-9]]))))
    e00 = float(model.prior_energy(_t([[0.0, 0.0]])))

    def marginal(j):
        def f(t):
            z = [0.0, 0.0]
            z[j] = t
            return math.exp(-(float(model.prior_energy(_t([z]))) - e00))

        return sum(integrate.quad(f, lo, hi, limit=200)[0] for lo, hi in ((-np.inf, 0.0), (0.0, np.inf)))

    log_total = -e00 + math.log(marginal(0)) + math.log(marginal(1)) - model.prior_log_z()
    assert log_total == pytest.approx(0.0, abs=1e-9)
    assert model.prior_log_z() == pytest.approx(math.log(2.0))


# ---------------------------------------------------------------------- gradients
@pytest.mark.parametrize("family", ["linear-gaussian", "linear-laplace", "bilinear"])
def test_analytic_gradients_match_autograd(family):
    model = _models()[family]
    g = torch.Generator().manual_seed(9)
    z = model.sample_prior(64, g) + 0.0  # Laplace coordinates are a.s. away from the kink
    x = torch.randn(64, model.n_dims, generator=g, dtype=torch.float64)
    torch.testing.assert_close(model.prior_energy_grad(z), autograd_grad(model.prior_energy)(z), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(
        model.likelihood_energy_grad(x, z),
        autograd_grad(lambda a: model.likelihood_energy(x, a))(z),
        rtol=1e-9,
        atol=1e-9,
    )


def test_likelihood_energy_includes_normaliser():
    """``exp(-likelihood_energy(x, a))`` is the normal density N(x; Phi a, sigma_n^2 I)."""
    for model in _models().values():
        g = torch.Generator().manual_seed(10)
        z = model.sample_prior(7, g)
        x = torch.randn(7, model.n_dims, generator=g, dtype=torch.float64)
        mean = model.mean(z).numpy()
        want = [
            stats.multivariate_normal(mean=mean[i], cov=model.sigma_n**2 * np.eye(model.n_dims)).logpdf(x[i])
            for i in range(7)
        ]
        np.testing.assert_allclose(-model.likelihood_energy(x, z).numpy(), want, rtol=1e-12)


def test_bilinear_coefficients_and_gauge():
    model = BilinearGenerative(
        torch.randn(4, 3, dtype=torch.float64) * 3,
        torch.randn(3, 2, dtype=torch.float64),
        torch.rand(3, 2, dtype=torch.float64) * 5,
    )
    z = model.sample_prior(10, torch.Generator().manual_seed(0))
    c, d = z[:, :2], z[:, 2:]
    torch.testing.assert_close(model.coefficients(z), (c @ model.Theta.T) * (d @ model.Psi.T))
    norm = model.normalized()
    torch.testing.assert_close(norm.Phi.norm(dim=0), torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(norm.Psi.norm(dim=1), torch.ones(3, dtype=torch.float64))
    x = torch.randn(10, 4, dtype=torch.float64)
    torch.testing.assert_close(norm.likelihood_energy(x, z), model.likelihood_energy(x, z))


def test_interface_attributes():
    m = _models()
    lg, ll, bl = m["linear-gaussian"], m["linear-laplace"], m["bilinear"]
    assert (lg.family, ll.family, bl.family) == ("linear-gaussian", "linear-laplace", "bilinear")
    assert lg.kind == ll.kind == bl.kind == "generative"
    assert (lg.n_dims, lg.n_latent, lg.size) == (4, 3, 3)
    assert (bl.n_dims, bl.n_latent, bl.size, bl.n_coefficients) == (4, 4, 4, 3)
    assert lg.latent_lower() is None and ll.latent_lower() is None
    assert lg.device == torch.device("cpu")
    for model in m.values():
        assert model.prior_energy(model.sample_prior(3, torch.Generator())).shape == (3,)
    # exact samples use only the explicit generator
    a1 = ll.sample_prior(5, torch.Generator().manual_seed(3))
    a2 = ll.sample_prior(5, torch.Generator().manual_seed(3))
    assert torch.equal(a1, a2)


# ---------------------------------------------------------------------- files
@pytest.mark.parametrize("family", ["linear-gaussian", "linear-laplace", "bilinear"])
def test_arrays_round_trip(family, tmp_path):
    model = _models()[family]
    arrays = model.to_arrays()
    assert str(arrays["model_type"]) == family and arrays["model_type"].shape == ()
    assert all(a.dtype == np.float64 for k, a in arrays.items() if k != "model_type")
    np.savez(tmp_path / "m.npz", **arrays)
    with np.load(tmp_path / "m.npz", allow_pickle=False) as f:
        loaded = {k: f[k] for k in f.files}
    cls = BilinearGenerative if family == "bilinear" else LinearGenerative
    back = cls.from_arrays(loaded, source="m.npz")
    assert back.family == family and back.sigma_n == model.sigma_n
    for k, v in arrays.items():
        if k != "model_type":
            np.testing.assert_array_equal(back.to_arrays()[k], v)
    x = torch.randn(3, model.n_dims, dtype=torch.float64)
    z = model.sample_prior(3, torch.Generator().manual_seed(0))
    torch.testing.assert_close(back.likelihood_energy(x, z), model.likelihood_energy(x, z))
    moved = model.to("cpu")
    assert moved.device == torch.device("cpu") and moved is not model


def test_linear_from_arrays_without_model_type_needs_prior():
    arrays = {"Phi": np.ones((3, 2)), "sigma_n": np.array(0.2)}
    with pytest.raises(ModelFileError, match="src.npz.*model_type"):
        LinearGenerative.from_arrays(arrays, source="src.npz")
    assert LinearGenerative.from_arrays(arrays, prior="laplace").family == "linear-laplace"


def _bad_cases():
    good_lin = {"Phi": np.ones((3, 2)), "sigma_n": np.array(0.1), "model_type": np.array("linear-laplace")}
    good_bil = {
        "Phi": np.ones((3, 2)),
        "Theta": np.ones((2, 2)),
        "Psi": np.ones((2, 1)),
        "sigma_n": np.array(0.1),
        "model_type": np.array("bilinear"),
    }

    def edit(base, **kw):
        out = dict(base)
        for k, v in kw.items():
            if v is None:
                out.pop(k)
            else:
                out[k] = v
        return out

    nan_phi = np.ones((3, 2))
    nan_phi[1, 1] = np.nan
    inf_theta = np.ones((2, 2))
    inf_theta[0, 0] = np.inf
    return [
        (LinearGenerative, edit(good_lin, Phi=nan_phi), "'Phi'.*NaN"),
        (LinearGenerative, edit(good_lin, Phi=np.ones(3)), "'Phi'.*2-D"),
        (LinearGenerative, edit(good_lin, sigma_n=np.array(0.0)), "'sigma_n'.*> 0"),
        (LinearGenerative, edit(good_lin, sigma_n=np.array(-0.1)), "'sigma_n'.*> 0"),
        (LinearGenerative, edit(good_lin, sigma_n=np.array(np.nan)), "'sigma_n'.*nan"),
        (LinearGenerative, edit(good_lin, Phi=None), "missing array 'Phi'"),
        (LinearGenerative, edit(good_lin, sigma_n=None), "missing array 'sigma_n'"),
        (LinearGenerative, edit(good_lin, model_type=np.array("rbm")), "model_type 'rbm'"),
        (LinearGenerative, edit(good_lin, extra=np.ones(2)), "unexpected.*'extra'"),
        (BilinearGenerative, edit(good_bil, Theta=inf_theta), "'Theta'.*inf"),
        (BilinearGenerative, edit(good_bil, Psi=np.ones((3, 1))), "'Psi'.*shape \\(3, 1\\)"),
        (BilinearGenerative, edit(good_bil, Theta=np.ones((1, 2))), "'Theta'.*shape"),
        (BilinearGenerative, edit(good_bil, sigma_n=np.array(-1.0)), "'sigma_n'.*> 0"),
        (BilinearGenerative, edit(good_bil, Psi=None), "missing array 'Psi'"),
        (BilinearGenerative, edit(good_bil, model_type=np.array("linear-gaussian")), "model_type"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_cases())))
def test_from_arrays_refuses_bad_arrays(case):
    cls, arrays, pattern = _bad_cases()[case]
    with pytest.raises(ModelFileError, match=f"bad.npz: .*{pattern}"):
        cls.from_arrays(arrays, source="bad.npz")


def test_constructor_refuses_bad_parameters():
    with pytest.raises(ModelFileError, match="sigma_n"):
        LinearGenerative(np.ones((3, 2)), sigma_n=0.0)
    with pytest.raises(ValueError, match="prior"):
        LinearGenerative(np.ones((3, 2)), prior="cauchy")
    with pytest.raises(ModelFileError, match="'Phi'.*inf"):
        BilinearGenerative(np.full((3, 2), np.inf), np.ones((2, 2)), np.ones((2, 2)))
