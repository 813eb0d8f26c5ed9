"""The Gaussian-Bernoulli RBM family: exact log Z and log f(v) against brute force, its annealing
path through the registry's estimators, its conditionals, model files and its trainer."""

import json
import math

import numpy as np
import pytest
import torch
from conftest import all_states

from logzbench import registry
from logzbench.api import estimate
from logzbench.cli import main
from logzbench.errors import ModelFileError
from logzbench.models.grbm import GaussianBernoulliRBM
from logzbench.models.io import load_model, save_model


def random_grbm(
    D: int, H: int, seed: int, scale: float = 0.6, sigma: float = 0.8, bias_scale: float = 0.5
) -> GaussianBernoulliRBM:
    g = torch.Generator().manual_seed(seed)
    return GaussianBernoulliRBM.random(D, H, scale=scale, sigma=sigma, bias_scale=bias_scale, generator=g)


def grid_log_integral(log_f, half_width: float = 9.0, n: int = 1201) -> float:
    """``log int exp(log_f(v)) dv`` over R^2 by the trapezoid rule on a fine grid (the integrands are
    smooth and Gaussian-tailed, so the rule converges exponentially fast)."""
    x = torch.linspace(-half_width, half_width, n, dtype=torch.float64)
    X, Y = torch.meshgrid(x, x, indexing="ij")
    vals = log_f(torch.stack([X.reshape(-1), Y.reshape(-1)], dim=1)).reshape(n, n)
    w = torch.ones(n, dtype=torch.float64)
    w[0] = w[-1] = 0.5
    cell = float(x[1] - x[0]) ** 2
    return float(torch.logsumexp((vals + torch.log(w)[:, None] + torch.log(w)[None, :]).reshape(-1), 0)) + math.log(
        cell
    )


def brute_log_z_beta(m: GaussianBernoulliRBM, beta: float) -> float:
    """``log Z_beta`` of the path: ``(D/2) log(2 pi sigma^2) + logsumexp_h(beta e.h + beta^2 ||W h||^2 / 2)``."""
    h = all_states(m.n_hidden)
    W, b, c = (p.double() for p in (m.W, m.b, m.c))
    g = beta * (h @ (c + W.T @ b / m.sigma)) + 0.5 * beta**2 * ((h @ W.T) ** 2).sum(1)
    return 0.5 * m.n_visible * math.log(2 * math.pi * m.sigma**2) + float(torch.logsumexp(g, 0))


# --------------------------------------------------------------------------- exact values
@pytest.mark.parametrize("H", [2, 3])
def test_exact_log_z_matches_numerical_integration(H):
    m = random_grbm(2, H, seed=H, scale=0.8, sigma=0.7)
    log_z, bound = m.exact_log_z(return_bound=True)
    assert abs(log_z - grid_log_integral(m.log_unnormalized_marginal)) < 1e-6 * max(1.0, abs(log_z))
    assert 0 < bound < 1e-10
    assert abs(log_z - brute_log_z_beta(m, 1.0)) < 1e-12
    for chunk in (1, 2, 4):  # every blocking of the enumeration gives the same sum
        assert m.exact_log_z(chunk_size=chunk) == pytest.approx(log_z, abs=1e-12)


def test_path_log_f_integrates_to_log_z_beta():
    """The annealing path's f_beta(v) (h summed out) integrates to the closed form of Z_beta;
    at beta = 0 that is log Z_0."""
    m = random_grbm(2, 3, seed=5, scale=0.9, sigma=0.6)
    path = m.annealing_path()
    assert path.log_z0() == pytest.approx(brute_log_z_beta(m, 0.0), abs=1e-12)
    for beta in (0.0, 0.4, 1.0):
        got = grid_log_integral(lambda v: path.log_f(path.state_from_data(v), beta))
        assert got == pytest.approx(brute_log_z_beta(m, beta), abs=2e-5)  # float32 chain states


def test_log_f_matches_sum_over_hidden_states():
    m = random_grbm(4, 5, seed=1)
    v = torch.randn(7, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    h = all_states(5)
    joint = torch.stack([m.log_unnormalized_joint(v, h[j].expand(7, -1)) for j in range(len(h))], dim=1)
    assert torch.allclose(m.log_unnormalized_marginal(v), torch.logsumexp(joint, 1), atol=1e-12, rtol=0)
    assert torch.allclose(m.exact_log_f(v[0]), torch.logsumexp(joint[:1], 1), atol=1e-12, rtol=0)
    path = m.annealing_path()
    assert torch.allclose(path.log_f(path.state_from_data(v), 1.0), m.log_unnormalized_marginal(v), atol=1e-4)


def test_exact_refuses_mixed_precision_and_huge_models():
    with pytest.raises(ValueError, match="float64 only"):
        random_grbm(3, 2, seed=0).exact_log_z(precision="mixed")
    with pytest.raises(ValueError, match="2\\^40 hidden states"):
        GaussianBernoulliRBM(np.zeros((2, 40)), np.zeros(2), np.zeros(40)).exact_log_z()


# --------------------------------------------------------------------------- estimators through the registry
def test_registry_entry_and_kind():
    fam = registry.family("grbm")
    assert fam.kind == "gaussian-binary" and fam.data_kind == "real" and fam.inits == ("uniform",)
    assert fam.exact_units(560, [200]) == (200, 0)
    for name in ("exact", "ais", "raise", "reverse-ais", "ads", "is", "ds"):
        assert name in registry.estimators_for("grbm")
    for name in ("csl", "hais"):
        assert name not in registry.estimators_for("grbm")


@pytest.fixture(scope="module")
def model_10x8():
    m = random_grbm(10, 8, seed=3, scale=0.5, sigma=1.0)
    X = (
        m.gibbs(
            torch.randn(40, 10, generator=torch.Generator().manual_seed(4)),
            torch.Generator().manual_seed(5),
            n_sweeps=200,
        )
        .double()
        .numpy()
    )
    return m, X, m.exact_log_z()


def test_ais_agrees_with_exact(model_10x8):
    m, X, log_z = model_10x8
    ex = estimate(m, "exact", data=X)
    assert ex.log_z == pytest.approx(log_z, abs=1e-12)
    assert ex.mean_log_likelihood == pytest.approx(float(m.log_unnormalized_marginal(X).mean()) - log_z, abs=1e-9)
    res = estimate(m, "ais", data=X, K=300, chains=200, seed=0)
    assert abs(res.log_z - log_z) < 4 * res.log_z_stderr + 1e-3
    assert res.mean_log_likelihood == pytest.approx(float(m.log_unnormalized_marginal(X).mean()) - res.log_z, abs=1e-9)
    assert res.settings["model_family"] == "grbm" and "is_samples" not in res.settings


def test_raise_and_reverse_ais_agree_with_exact(model_10x8):
    m, X, log_z = model_10x8
    exact_ll = float(m.log_unnormalized_marginal(X[:8]).mean()) - log_z
    rai = estimate(m, "raise", data=X[:8], K=300, chains=20, seed=0)
    assert abs(rai.mean_log_likelihood - exact_ll) < 4 * rai.mean_log_likelihood_stderr + 0.02
    rev = estimate(m, "reverse-ais", K=300, chains=100, seed=0)
    assert abs(rev.log_z - log_z) < 4 * rev.log_z_stderr + 0.02


def test_same_seed_same_estimate(model_10x8):
    m, X, _ = model_10x8
    a, b = (estimate(m, "ais", data=X, K=50, chains=30, seed=7, threads=1) for _ in range(2))
    c = estimate(m, "ais", data=X, K=50, chains=30, seed=8, threads=1)
    assert np.array_equal(a.log_weights, b.log_weights) and a.log_z == b.log_z
    assert not np.array_equal(a.log_weights, c.log_weights)


def test_dispatch_refusals(model_10x8):
    m, X, _ = model_10x8
    with pytest.raises(ValueError, match="not available for a continuous \\(grbm\\)"):
        estimate(m, "hais", data=X)
    with pytest.raises(ValueError, match="init 'uniform' only"):
        estimate(m, "ais", data=X, init="base-rate", K=5, chains=2)
    with pytest.raises(ValueError, match="rows of 10 real values"):
        estimate(m, "exact", data=X[:, :9])


def test_cli_estimate_reads_real_rows(model_10x8, tmp_path, capsys):
    m, X, log_z = model_10x8
    save_model(m, tmp_path / "grbm.npz")
    np.save(tmp_path / "x.npy", X)
    rc = main(["estimate", str(tmp_path / "grbm.npz"), "--estimator", "exact", "--data", str(tmp_path / "x.npy")])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["log_z"] == pytest.approx(log_z, abs=1e-5)  # the file holds float32 parameters
    assert out["mean_log_likelihood"] == pytest.approx(float(m.log_unnormalized_marginal(X).mean()) - log_z, abs=1e-4)


# --------------------------------------------------------------------------- conditionals
def exact_moments(m: GaussianBernoulliRBM, beta: float = 1.0):
    """``E[v]``, ``E[v v^T]`` and ``E[h]`` under ``p_beta``: ``p_beta(h)`` from the closed form of the
    v-integral, ``v | h ~ N(b + sigma beta W h, sigma^2 I)``."""
    h = all_states(m.n_hidden)
    W, b, c = (p.double() for p in (m.W, m.b, m.c))
    g = beta * (h @ (c + W.T @ b / m.sigma)) + 0.5 * beta**2 * ((h @ W.T) ** 2).sum(1)
    p = torch.softmax(g, 0)
    mu = b + m.sigma * beta * h @ W.T  # (2^H, D)
    second = torch.einsum("s,si,sj->ij", p, mu, mu) + m.sigma**2 * torch.eye(m.n_visible, dtype=torch.float64)
    return p @ mu, second, p @ h


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_gibbs_leaves_the_joint_invariant(beta):
    """Long Gibbs chains (the model's sampler at beta = 1, the path's transition at beta = 0.5) reproduce
    the exact first and second moments of v and the mean of h."""
    m = random_grbm(2, 2, seed=11, scale=1.0, sigma=0.8)
    gen = torch.Generator().manual_seed(12)
    n = 4000
    path = m.annealing_path()
    state = path.sample_initial(n, gen)
    for _ in range(30):
        state = path.transition(state, beta, gen)
    v = state.v.double()
    ph = torch.sigmoid(beta * state.pre_h.double())  # E[h | v] at beta
    if beta == 1.0:  # the model's own conditionals give the same chain
        v1 = m.gibbs(torch.zeros(n, 2), gen, n_sweeps=30).double()
        mean, _, _ = exact_moments(m)
        assert torch.all((v1.mean(0) - mean).abs() < 5 * v1.std(0) / math.sqrt(n))
    mean, second, mean_h = exact_moments(m, beta)
    assert torch.all((v.mean(0) - mean).abs() < 5 * v.std(0) / math.sqrt(n))
    vv = v[:, :, None] * v[:, None, :]
    assert torch.all((vv.mean(0) - second).abs() < 5 * vv.std(0) / math.sqrt(n))
    assert torch.all((ph.mean(0) - mean_h).abs() < 5 * ph.std(0) / math.sqrt(n) + 1e-3)


def test_conditionals():
    m = random_grbm(3, 2, seed=2)
    v = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    x = m.c + v @ m.W / m.sigma
    assert torch.allclose(m.prob_h_given_v(v), torch.sigmoid(x), atol=1e-6)
    h = torch.tensor([[0.0, 1.0], [1.0, 1.0]])
    assert torch.allclose(m.mean_v_given_h(h), m.b + m.sigma * h @ m.W.T, atol=1e-6)
    draws = m.sample_v_given_h(h.repeat(20000, 1), torch.Generator().manual_seed(1)).reshape(20000, 2, 3)
    assert torch.allclose(draws.mean(0), m.mean_v_given_h(h), atol=0.03)
    assert torch.allclose(draws.std(0), torch.full((2, 3), m.sigma), atol=0.03)


# --------------------------------------------------------------------------- model files
def test_model_file_round_trip(tmp_path):
    m = random_grbm(5, 4, seed=0, sigma=0.37)
    save_model(m, tmp_path / "m.npz")
    back = load_model(tmp_path / "m.npz")
    assert isinstance(back, GaussianBernoulliRBM) and back.sigma == m.sigma
    for k, a in m.to_arrays().items():
        assert np.array_equal(back.to_arrays()[k], a), k
    assert str(np.load(tmp_path / "m.npz")["model_type"]) == "grbm"
    assert back.exact_log_z() == m.exact_log_z()


def _arrays(**over):
    a = dict(model_type=np.array("grbm"), W=np.zeros((3, 2)), b=np.zeros(3), c=np.zeros(2), sigma=np.array(1.0))
    a.update(over)
    return {k: v for k, v in a.items() if v is not None}


@pytest.mark.parametrize(
    "arrays, message",
    [
        (_arrays(W=np.full((3, 2), np.nan)), "'W' contains NaN"),
        (_arrays(c=np.array([0.0, np.inf])), "'c' contains inf"),
        (_arrays(sigma=np.array(0.0)), "'sigma' = 0 must be > 0"),
        (_arrays(sigma=np.array(-1.0)), "'sigma' = -1 must be > 0"),
        (_arrays(sigma=np.array(np.nan)), "'sigma' contains NaN"),
        (_arrays(sigma=np.ones(2)), "'sigma' must be a scalar"),
        (_arrays(b=np.zeros(4)), "'b' has shape \\(4,\\), expected \\(3,\\)"),
        (_arrays(c=np.zeros(3)), "'c' has shape \\(3,\\), expected \\(2,\\)"),
        (_arrays(W=np.zeros(3)), "'W' must be 2-D"),
        (_arrays(sigma=None), "missing array\\(s\\) \\['sigma'\\]"),
        (_arrays(visible_bias=np.zeros(3)), "unexpected array\\(s\\) \\['visible_bias'\\]"),
        (_arrays(W=np.full((3, 2), 1e35)), "parameters overflow"),
    ],
)
def test_bad_files_are_refused(tmp_path, arrays, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(ModelFileError, match=message) as info:
        load_model(path)
    assert str(info.value).startswith(str(path))


# --------------------------------------------------------------------------- training
def test_trainer_raises_the_exact_log_likelihood():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(3, 5)) * 2.0
    X = centers[rng.integers(0, 3, 400)] + 0.4 * rng.normal(size=(400, 5))
    X = (X - X.mean(0)) / X.std(0)
    from logzbench.training import train_model

    model, history = train_model(
        X[:300],
        X[300:],
        family="grbm",
        n_hidden=5,
        n_epochs=15,
        learning_rate=0.02,
        batch_size=50,
        init_scale=0.1,
        seed=0,
    )
    assert isinstance(model, GaussianBernoulliRBM) and model.sigma == 1.0
    assert [r["epoch"] for r in history] == list(range(16))
    first, last = history[0], history[-1]
    assert last["train_log_likelihood"] > first["train_log_likelihood"] + 0.3
    assert last["test_log_likelihood"] > first["test_log_likelihood"] + 0.3
    assert last["log_z"] == pytest.approx(model.exact_log_z(), abs=1e-9)
    again, _ = train_model(X[:300], family="grbm", n_hidden=5, n_epochs=2, seed=0)
    once, _ = train_model(X[:300], family="grbm", n_hidden=5, n_epochs=2, seed=0)
    assert torch.equal(again.W, once.W)


def test_trainer_refuses_bad_hyperparameters():
    from logzbench.training.grbm import train_grbm

    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match="unknown hyperparameter\\(s\\) \\['n_hiden'\\]"):
        train_grbm(X, n_hiden=3)
    with pytest.raises(ValueError, match="sigma must be a finite number"):
        train_grbm(X, n_hidden=3, sigma=0.0)
    with pytest.raises(ValueError, match="contains NaN"):
        train_grbm(np.full((4, 3), np.nan), n_hidden=3)
