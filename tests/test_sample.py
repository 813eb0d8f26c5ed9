"""Drawing samples (:mod:`logzbench.sampling`, ``logzbench sample``): exact, MCMC and annealed draws
agree with the distributions they claim by a chi-square test against exact enumeration (or, for a
continuous model, with its closed-form moments); the same seed gives the same samples; bad input is
refused with one line and nothing written."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import assert_refused
from scipy.stats import chisquare

from logzbench.cli import main
from logzbench.models import DBM, DBN, BinaryRBM, PottsModel, PottsRBM, save_model
from logzbench.models.grbm import GaussianBernoulliRBM
from logzbench.models.linear_generative import LinearGenerative
from logzbench.models.poe import ProductOfExperts
from logzbench.models.potts import states_range
from logzbench.sampling import EXACT_SAMPLE_BITS, SampleResult, sample

#: a goodness-of-fit test passes above this p-value (a correct sampler fails it once in 1000 runs)
P_MIN = 1e-3


def _chi_square_p(index: np.ndarray, probs: np.ndarray) -> float:
    """p-value of a chi-square test of the states ``index`` against ``probs``, the least likely states
    pooled until every bin expects at least 5 draws."""
    counts = np.bincount(index, minlength=len(probs)).astype(float)
    expected = probs * len(index)
    obs, exp, o, e = [], [], 0.0, 0.0
    for k in np.argsort(expected):
        o, e = o + counts[k], e + expected[k]
        if e >= 5.0:
            obs.append(o)
            exp.append(e)
            o = e = 0.0
    obs[-1] += o
    exp[-1] += e
    assert len(obs) >= 2
    return float(chisquare(obs, exp).pvalue)


def _bits(n: int) -> np.ndarray:
    """All binary states of ``n`` units, row ``k`` the state whose bit ``i`` is unit ``i``."""
    return ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(np.float64)


def _index(x: np.ndarray, q: int = 2) -> np.ndarray:
    """Index of each row of states (site 0 the fastest digit)."""
    return (np.asarray(x).astype(np.int64) * q ** np.arange(x.shape[1])).sum(axis=1)


def _softmax(lf) -> np.ndarray:
    lf = np.asarray(lf, dtype=np.float64)
    p = np.exp(lf - lf.max())
    return p / p.sum()


def _rbm(nv: int, nh: int, seed: int = 1, scale: float = 1.0) -> BinaryRBM:
    return BinaryRBM.random(nv, nh, scale=scale, bias_scale=0.5, generator=torch.Generator().manual_seed(seed))


def _p_beta(rbm: BinaryRBM, beta: float) -> np.ndarray:
    """The enumerated visible distribution of the tempered RBM ``f^beta`` (the uniform start's path)."""
    t = BinaryRBM(beta * rbm.W.double(), beta * rbm.visible_bias.double(), beta * rbm.hidden_bias.double())
    return _softmax(t.log_unnormalized_marginal(_bits(rbm.n_visible)).numpy())


# --------------------------------------------------------------------------- exact draws
@pytest.mark.parametrize("shape", [(6, 4), (4, 8)], ids=["hidden-side", "visible-side"])
@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_exact_rbm_samples_match_enumeration(shape, beta):
    rbm = _rbm(*shape)
    res = sample(rbm, 20_000, beta=beta, init="uniform", seed=3)
    assert res.method == "exact" and res.burn_in == 0 and res.sweeps == 0
    assert res.x.shape == (20_000, shape[0]) and res.h.shape == (20_000, shape[1])
    assert set(np.unique(res.x)) <= {0.0, 1.0} and res.x.dtype == np.float64
    assert _chi_square_p(_index(res.x), _p_beta(rbm, beta)) > P_MIN


def test_exact_hidden_units_are_drawn_jointly():
    """``h`` of an exact draw is ``p(h | x)``: the hidden marginal of the joint draws matches enumeration."""
    rbm = _rbm(4, 3)
    res = sample(rbm, 20_000, seed=5)
    p_h = _softmax(rbm.log_unnormalized_hidden_marginal(_bits(3)).numpy())
    assert _chi_square_p(_index(res.h), p_h) > P_MIN


def test_categorical_exact_samples_match_enumeration():
    g = torch.Generator().manual_seed(2)
    for model in (
        PottsModel.random(3, 3, scale=1.0, field_scale=0.5, generator=g),
        PottsRBM.random(3, 3, 2, scale=1.0, bias_scale=0.5, generator=g),  # enumerates its 4 hidden states
    ):
        res = sample(model, 20_000, seed=1)
        assert res.method == "exact" and res.x.dtype == np.int64 and res.x.shape == (20_000, 3)
        lf = model.log_unnormalized_marginal(states_range(0, 27, 3, 3, "cpu")).numpy()
        assert _chi_square_p(_index(res.x, 3), _softmax(lf)) > P_MIN, model.family


@pytest.mark.parametrize("family", ["dbm", "dbn"])
def test_exact_deep_model_samples_match_enumeration(family):
    """A DBM draws its even/odd view exactly, a DBN its top RBM and then ``v | h_1``: the visible rows
    match ``f(v)`` enumerated over the hidden layers by the models' own ``exact_log_f``."""
    g = torch.Generator().manual_seed(4)
    model = (DBM if family == "dbm" else DBN).random([5, 3, 2], scale=1.5, bias_scale=0.5, generator=g)
    res = sample(model, 20_000, seed=2)
    assert res.method == "exact" and res.h.shape == (20_000, 3)
    p = _softmax(model.exact_log_f(_bits(5)).numpy())
    assert _chi_square_p(_index(res.x), p) > P_MIN


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_grbm_exact_hidden_marginal(beta):
    """A GRBM's exact draws enumerate its hidden states: their marginal integrates ``v`` out to the model's
    own ``log Z`` (at beta = 1), and the hidden units of Gibbs chains (another code path) match it."""
    from logzbench.sampling import _hidden_log_f

    model = GaussianBernoulliRBM.random(4, 3, scale=0.8, bias_scale=0.5, generator=torch.Generator().manual_seed(5))
    path = model.annealing_path("uniform")
    lf = _hidden_log_f(path, torch.as_tensor(_bits(3)), beta)
    if beta == 1.0:  # + log of the Gaussian integral over v
        log_z = torch.logsumexp(lf, 0).item() + 0.5 * 4 * np.log(2 * np.pi * model.sigma**2)
        assert abs(log_z - model.exact_log_z()) < 1e-6
    p_h = _softmax(lf.numpy())
    exact = sample(model, 20_000, beta=beta, init="uniform", seed=1)
    gibbs = sample(model, 20_000, beta=beta, init="uniform", exact="never", burn_in=200, seed=1)
    assert exact.method == "exact" and gibbs.method == "gibbs"
    assert _chi_square_p(_index(exact.h), p_h) > P_MIN
    assert _chi_square_p(_index(gibbs.h), p_h) > P_MIN


# --------------------------------------------------------------------------- MCMC
def test_gibbs_samples_match_enumeration():
    rbm = _rbm(6, 4)
    res = sample(rbm, 20_000, init="uniform", exact="never", seed=4)
    assert res.method == "gibbs" and res.burn_in == 1000 and res.sweeps == 1000
    assert _chi_square_p(_index(res.x), _p_beta(rbm, 1.0)) > P_MIN


def test_gibbs_thinned_chains_from_the_base_rate():
    """Several kept states per chain (``thin`` sweeps apart), chains started at the data base rate."""
    rbm = _rbm(6, 4)
    data = (np.random.default_rng(0).random((50, 6)) < 0.3).astype(np.float64)
    res = sample(rbm, 6_000, data=data, exact="never", burn_in=200, thin=20, chains=2_000, seed=4)
    assert res.sweeps == 200 + 2 * 20 and res.settings["init"] == "base-rate" and res.settings["chains"] == 2_000
    assert _chi_square_p(_index(res.x), _p_beta(rbm, 1.0)) > P_MIN


def test_gibbs_on_a_potts_model():
    model = PottsModel.random(3, 3, scale=1.0, field_scale=0.5, generator=torch.Generator().manual_seed(2))
    res = sample(model, 5_000, init="uniform", exact="never", burn_in=100, seed=2)
    lf = model.log_unnormalized_marginal(states_range(0, 27, 3, 3, "cpu")).numpy()
    assert res.method == "gibbs" and _chi_square_p(_index(res.x, 3), _softmax(lf)) > P_MIN


# --------------------------------------------------------------------------- annealed draws
def _p_ann(rbm: BinaryRBM, a0: np.ndarray, betas) -> np.ndarray:
    """``p_ann`` of the visible units: ``p_0`` of the path, then one block-Gibbs kernel at each
    ``beta_1 .. beta_K``, composed exactly as matrices over the visible states."""
    V, H = _bits(rbm.n_visible), _bits(rbm.n_hidden)
    W, a, b = (t.double().numpy() for t in (rbm.W, rbm.visible_bias, rbm.hidden_bias))

    def factorial(states, prob):  # P[r, s] = prod_i prob[r, i]^s_i (1 - prob[r, i])^(1 - s_i)
        return np.exp(np.log(prob) @ states.T + np.log1p(-prob) @ (1.0 - states).T)

    sig = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    p = factorial(V, sig(a0)[None, :])[0]
    for beta in betas[1:]:
        T = factorial(H, sig(beta * (V @ W + b))) @ factorial(V, sig(a0 + beta * (a - a0) + beta * (H @ W.T)))
        p = p @ T
    return p


@pytest.mark.parametrize("init", ["uniform", "base-rate"])
def test_annealed_samples_match_the_annealing_model(init):
    rbm = _rbm(4, 3, seed=1, scale=2.5)
    data = (np.random.default_rng(1).random((40, 4)) < 0.8).astype(np.float64)
    K = 3
    res = sample(rbm, 20_000, annealed=K, init=init, data=data, seed=6)
    assert res.method == "ais-final" and res.sweeps == K and res.burn_in == 0 and res.h.shape == (20_000, 3)
    a0 = rbm.annealing_path(init, data=torch.as_tensor(data)).a0.double().numpy()
    p_ann, p = _p_ann(rbm, a0, np.linspace(0.0, 1.0, K + 1)), _p_beta(rbm, 1.0)
    assert abs(p_ann.sum() - 1.0) < 1e-9
    # the test can fail: p_ann is measurably not the model, and the draws tell them apart
    assert 0.5 * np.abs(p_ann - p).sum() > 0.05
    idx = _index(res.x)
    assert _chi_square_p(idx, p) < 1e-6
    assert _chi_square_p(idx, p_ann) > P_MIN


# --------------------------------------------------------------------------- continuous
def _poe() -> tuple[ProductOfExperts, np.ndarray]:
    """A complete Laplace product of experts and its covariance ``Phi^-1 diag(2 / lambda^2) Phi^-T``."""
    Phi, lam = np.array([[1.0, 0.5], [-0.3, 1.2]]), np.array([1.0, 2.0])
    inv = np.linalg.inv(Phi)
    return ProductOfExperts(Phi, lam, expert="laplace"), inv @ np.diag(2.0 / lam**2) @ inv.T


@pytest.mark.parametrize("exact", ["auto", "never"])
def test_continuous_samples_have_the_model_moments(exact):
    model, cov = _poe()
    n = 20_000 if exact == "auto" else 4_000
    res = sample(model, n, exact=exact, seed=8)
    assert res.method == ("exact" if exact == "auto" else "hmc") and res.h is None and res.x.shape == (n, 2)
    sd = np.sqrt(np.diag(cov))
    assert (np.abs(res.x.mean(axis=0)) < 5 * sd / np.sqrt(n)).all()
    # the sampling error of a (co)variance of Laplace-like rows: 3x the Gaussian's (excess kurtosis 3)
    tol = 5 * np.sqrt(3 * (np.outer(sd, sd) ** 2 + cov**2) / n)
    assert (np.abs(np.cov(res.x.T) - cov) < tol).all()


# --------------------------------------------------------------------------- every family, reproducibility
def _families():
    g = torch.Generator().manual_seed(3)
    return {
        "rbm": _rbm(5, 3),
        "dbm": DBM.random([5, 3, 2], scale=1.0, generator=g),
        "dbn": DBN.random([5, 3, 2], scale=1.0, generator=g),
        "grbm": GaussianBernoulliRBM.random(4, 3, scale=0.5, generator=g),
        "potts-rbm": PottsRBM.random(3, 3, 2, scale=1.0, generator=g),
        "poe": ProductOfExperts.random(2, 3, generator=g),  # overcomplete: HMC only
    }


@pytest.mark.parametrize("name", list(_families()))
@pytest.mark.parametrize("how", [{}, {"exact": "never", "burn_in": 5}, {"annealed": 4}])
def test_every_family_and_method_gives_rows_of_the_model(name, how):
    model = _families()[name]
    res = sample(model, 30, init="uniform", seed=1, **how)
    assert isinstance(res, SampleResult) and res.settings["model_family"] == model.family
    D = getattr(model, "n_visible", None) or model.n_dims
    assert res.x.shape == (30, D) and np.isfinite(res.x).all()
    if name in ("rbm", "dbm", "dbn"):
        assert set(np.unique(res.x)) <= {0.0, 1.0} and set(np.unique(res.h)) <= {0.0, 1.0}
        assert res.h.shape == (30, model.layer_sizes[1] if name != "rbm" else model.n_hidden)
    if "annealed" in how:
        assert res.method == "ais-final" and res.sweeps == 4
    elif "exact" in how:
        assert res.method in ("gibbs", "hmc") and res.burn_in == res.sweeps == 5


@pytest.mark.parametrize("how", [{}, {"exact": "never", "burn_in": 20}, {"annealed": 5}])
def test_same_seed_same_samples(how):
    for model in (_rbm(6, 4), _poe()[0]):
        a, b = (sample(model, 200, init="uniform", seed=11, **how) for _ in range(2))
        c = sample(model, 200, init="uniform", seed=12, **how)
        assert np.array_equal(a.x, b.x) and (a.h is None or np.array_equal(a.h, b.h))
        assert not np.array_equal(a.x, c.x)


# --------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "kw, words",
    [
        ({"n": 0}, "n (samples)"),
        ({"n": -3}, "n (samples)"),
        ({"beta": 1.5}, "beta"),
        ({"beta": -0.1}, "beta"),
        ({"exact": "sometimes"}, "exact"),
        ({"thin": 0}, "thin"),
        ({"annealed": 0}, "annealed"),
        ({"annealed": 5, "beta": 0.5}, "annealed"),
        ({"init": "zeros"}, "initial distribution"),
    ],
)
def test_bad_arguments_are_refused(kw, words):
    args = {"n": 10, **kw}
    with pytest.raises(ValueError, match=None) as exc:
        sample(_rbm(4, 3), **args)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_a_model_without_the_sampler_asked_for_is_refused_by_family():
    lin = LinearGenerative.random(3, 2, generator=torch.Generator().manual_seed(0))
    for kw in ({"exact": "never"}, {"beta": 0.5}, {"annealed": 3}):
        with pytest.raises(ValueError, match="linear-gaussian"):
            sample(lin, 5, **kw)
    big = _rbm(EXACT_SAMPLE_BITS + 2, EXACT_SAMPLE_BITS + 2, scale=0.01)
    with pytest.raises(ValueError, match="rbm model cannot be sampled exactly"):
        sample(big, 5, exact="always")
    with pytest.raises(ValueError, match="not a logzbench model"):
        sample(object(), 5)


# --------------------------------------------------------------------------- command line
@pytest.fixture
def files(tmp_path, monkeypatch):
    """A working directory with a 16-visible RBM (4 x 4 images), a 6-visible one and a linear model."""
    monkeypatch.chdir(tmp_path)
    save_model(_rbm(16, 5), tmp_path / "r16.npz")
    save_model(_rbm(6, 4), tmp_path / "r6.npz")
    save_model(LinearGenerative.random(3, 2, generator=torch.Generator().manual_seed(0)), tmp_path / "lin.npz")
    return tmp_path


def test_cli_writes_samples_and_a_grid(files, capsys):
    argv = ["sample", "r16.npz", "--n", "40", "--init", "uniform", "--out", "s.npz", "--grid", "g.png"]
    assert main([*argv, "--threads", "1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "method exact" in out[0]
    with np.load(files / "s.npz", allow_pickle=False) as z:
        x, h, meta = z["x"], z["h"], json.loads(str(z["meta"]))
    assert x.shape == (40, 16) and h.shape == (40, 5) and set(np.unique(x)) <= {0.0, 1.0}
    assert meta["method"] == "exact" and meta["settings"]["n"] == 40 and meta["sweeps"] == 0
    assert (files / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # MCMC: burn-in and sweeps recorded as run
    assert main(["sample", "r6.npz", "--n", "10", "--init", "uniform", "--exact", "never", "--burn-in", "7",
                 "--thin", "2", "--chains", "5", "--out", "m.npz", "--threads", "1"]) == 0  # fmt: skip
    with np.load(files / "m.npz", allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
    assert meta["method"] == "gibbs" and meta["burn_in"] == 7 and meta["sweeps"] == 9


@pytest.mark.parametrize(
    "argv, words",
    [
        (["r6.npz", "--n", "0"], ["n (samples)"]),
        (["r6.npz", "--n", "5", "--beta", "2"], ["beta"]),
        (["lin.npz", "--n", "5", "--exact", "never"], ["linear-gaussian"]),
        (["missing.npz", "--n", "5"], ["not found", "missing.npz"]),
        (["r6.npz", "--n", "5", "--grid", "g.png"], ["--grid", "not images"]),
    ],
)
def test_cli_bad_input_is_refused(files, capsys, argv, words):
    assert_refused(main, ["sample", *argv, "--out", "s.npz", "--threads", "1"], words, files, capsys)
    assert not (files / "s.npz").exists()
