"""DBMs and DBNs: exact enumeration, mean-field and importance-sampling log f(v), AIS and RAISE (Alg. 3, Sec. 3.3).

Ground truth is brute-force enumeration over every unit of models small enough to enumerate
(8-6-4 units); tolerances come from the estimators' own reported standard errors.
"""

import json
import math

import numpy as np
import pytest
import torch
from conftest import all_states

from logzbench import registry, schedules
from logzbench.api import estimate
from logzbench.errors import ModelFileError
from logzbench.estimators.raise_ import raise_log_weights
from logzbench.models import DBM, DBN, load_model, save_model


def _dbm(sizes=(8, 6, 4), seed=0, scale=0.8, bias_scale=0.5) -> DBM:
    return DBM.random(sizes, scale=scale, bias_scale=bias_scale, generator=torch.Generator().manual_seed(seed))


def _dbn(sizes=(8, 6, 4), seed=0, scale=0.8, bias_scale=0.5, tied=True) -> DBN:
    """Recognition weights tied to W_1, as after greedy training (untied random ones make a poor proposal)."""
    return DBN.random(
        sizes, scale=scale, bias_scale=bias_scale, generator=torch.Generator().manual_seed(seed), tied=tied
    )


def _brute_dbm(dbm: DBM) -> tuple[float, torch.Tensor]:
    """(log Z, log f(v) for every v) by summing exp(log f(v, h_1, ..., h_L)) over every state."""
    layers = [all_states(n) for n in dbm.layer_sizes]
    grids = torch.meshgrid(*[torch.arange(len(s)) for s in layers], indexing="ij")
    lf = dbm.log_unnormalized_joint([s[g.flatten()] for s, g in zip(layers, grids)])
    lf = lf.reshape(len(layers[0]), -1)
    return float(torch.logsumexp(lf.flatten(), 0)), torch.logsumexp(lf, 1)


def _brute_dbn(dbn: DBN) -> tuple[float, torch.Tensor]:
    V, H1 = all_states(dbn.n_visible), all_states(dbn.layer_sizes[1])
    lf2 = dbn.top.log_unnormalized_marginal(H1)  # h_2 summed out
    lpv = torch.stack([dbn.log_p_v_given_h1(V, H1[j].expand(len(V), -1)) for j in range(len(H1))], 1)
    return float(torch.logsumexp(lf2, 0)), torch.logsumexp(lpv + lf2, 1)


def _samples(model, n, seed) -> torch.Tensor:
    """Exact samples of v from a small model, drawn from its enumerated marginal."""
    log_z, log_f = _brute_dbm(model) if isinstance(model, DBM) else _brute_dbn(model)
    idx = torch.multinomial(torch.softmax(log_f, 0), n, replacement=True, generator=torch.Generator().manual_seed(seed))
    return all_states(model.n_visible)[idx].float()


# --------------------------------------------------------------------------- exact values
@pytest.mark.parametrize("sizes", [(8, 6, 4), (5, 4, 3, 2), (4, 3)])
def test_dbm_exact_matches_brute_force(sizes):
    dbm = _dbm(sizes, seed=1)
    log_z, log_f = _brute_dbm(dbm)
    assert dbm.exact_log_z() == pytest.approx(log_z, abs=1e-9)
    V = all_states(dbm.n_visible)
    torch.testing.assert_close(dbm.exact_log_f(V), log_f, atol=1e-9, rtol=0)


def test_dbm_even_odd_view_is_the_same_density():
    """The bipartite view with odd layers summed out equals the DBM summed over its odd layers."""
    dbm = _dbm((3, 2, 3, 2), seed=4, scale=1.0)
    L0, L1, L2, L3 = (all_states(n) for n in dbm.layer_sizes)
    x = torch.tensor([[1, 0, 1, 0, 1, 1]], dtype=torch.float64)  # v = 101, h_2 = 011
    v, h2 = x[:, :3], x[:, 3:]
    terms = [dbm.log_unnormalized_joint([v, h1.unsqueeze(0), h2, h3.unsqueeze(0)]) for h1 in L1 for h3 in L3]
    assert float(dbm.log_unnormalized_even(x)) == pytest.approx(float(torch.logsumexp(torch.cat(terms), 0)), abs=1e-9)


def test_dbn_exact_matches_brute_force():
    dbn = _dbn(seed=2)
    log_z, log_f = _brute_dbn(dbn)
    assert dbn.exact_log_z() == pytest.approx(log_z, abs=1e-9)
    torch.testing.assert_close(dbn.exact_log_f(all_states(8)), log_f, atol=1e-9, rtol=0)
    # p(v) sums to one
    assert float(torch.logsumexp(log_f - log_z, 0)) == pytest.approx(0.0, abs=1e-9)


# --------------------------------------------------------------------------- log f(v) approximations
def test_mean_field_bound_is_below_exact_and_tight_for_weak_coupling():
    V = all_states(8)
    dbm = _dbm(seed=3, scale=1.0)
    exact = dbm.exact_log_f(V)
    bound = dbm.mean_field_bound(V)
    assert torch.all(bound <= exact + 1e-9)
    assert float((exact - bound).mean()) > 1e-3  # strictly a bound here, not an identity
    weak = _dbm(seed=3, scale=0.01)
    assert float((weak.exact_log_f(V) - weak.mean_field_bound(V)).max()) < 1e-3


@pytest.mark.parametrize("family", ["dbm", "dbn"])
def test_importance_log_f_agrees_with_exact(family):
    model = _dbm(seed=5) if family == "dbm" else _dbn(seed=5)
    V = all_states(8)[::7].float()
    exact = model.exact_log_f(V)
    est, se, ess, khat = model.importance_log_f(V, 500, torch.Generator().manual_seed(0))
    assert torch.all((ess >= 1 - 1e-9) & (ess <= 500 + 1e-9))
    # each row's Pareto k-hat (PSIS) from its 500 weights; none from 10 samples (too few for a tail fit)
    assert khat.shape == est.shape and torch.all(torch.isfinite(khat)), khat
    assert torch.isnan(model.importance_log_f(V, 10, torch.Generator().manual_seed(0)).khat).all()
    z = (est - exact) / se
    assert torch.all(z.abs() < 4.5), z
    assert float(se.max()) < 0.2  # informative
    # unbiased in f, so on average log f-hat sits at or below log f (Jensen)
    assert float((est - exact).mean()) < 3 * float(se.mean()) / math.sqrt(len(V))


# --------------------------------------------------------------------------- AIS
@pytest.mark.parametrize("family, init", [("dbm", "uniform"), ("dbm", "base-rate"), ("dbn", "uniform")])
def test_ais_log_z_agrees_with_exact(family, init):
    model = _dbm(seed=6) if family == "dbm" else _dbn(seed=6)
    X = _samples(model, 200, seed=1)
    res = estimate(model, "ais", data=X, train_data=X, steps=300, chains=400, init=init, seed=3, is_samples=500)
    exact = model.exact_log_z()
    assert abs(res.log_z - exact) < 4 * res.log_z_stderr + 1e-3, (res.log_z, exact, res.log_z_stderr)
    exact_ll = float((model.exact_log_f(X) - exact).mean())
    assert abs(res.mean_log_likelihood - exact_ll) < 4 * res.mean_log_likelihood_stderr + 1e-3
    assert res.extra["is_samples"] == 500 and res.settings["model_family"] == family
    if family == "dbm":
        assert res.extra["mean_log_f_mean_field"] <= float(model.exact_log_f(X).mean()) + 1e-9


def test_dbm_ais_partition_function_is_unbiased():
    dbm = _dbm(seed=7, scale=1.2)
    from logzbench.estimators.ais import run

    state, _ = run(dbm.annealing_path("uniform"), schedules.linear(20), 20000, torch.Generator().manual_seed(0))
    w = torch.exp(state.log_w - dbm.exact_log_z())
    assert abs(float(w.mean()) - 1.0) < 4 * float(w.std()) / math.sqrt(len(w))


# --------------------------------------------------------------------------- RAISE
def _gibbs_matrix(view, a0, beta):
    """T_beta(x' | x) of one sweep x -> odd -> x' on the even/odd view (odd layers summed out)."""
    X, Y = all_states(view.n_visible), all_states(view.n_hidden)
    W, a, b = view.W.double(), view.visible_bias.double(), view.hidden_bias.double()
    py = torch.sigmoid(beta * (X @ W + b))
    p_y = torch.exp(Y @ torch.log(py).T + (1 - Y) @ torch.log1p(-py).T).T
    px = torch.sigmoid((1 - beta) * a0.double() + beta * (a + Y @ W.T))
    p_x = torch.exp(X @ torch.log(px).T + (1 - X) @ torch.log1p(-px).T).T
    return p_y @ p_x


def _p_ann(view, a0, betas):
    """Law of the AIS forward chain's last state: p_0 T_1 ... T_K over the view's 'visible' states."""
    X = all_states(view.n_visible)
    p = torch.softmax(X @ a0.double(), 0)  # p_0 on x (odd units uniform, summed out)
    for k in range(1, len(betas)):
        p = p @ _gibbs_matrix(view, a0, float(betas[k]))
    return p


@pytest.mark.parametrize("init", ["uniform", "base-rate"])
def test_raise_alg3_weights_are_unbiased_for_the_annealing_model(init):
    """Alg. 3 with the heating chain: mean(w) estimates p_ann(v) = sum_h [p_0 T_1 ... T_K](v, h)."""
    dbm = _dbm((3, 3, 2), seed=8, scale=1.5)
    train = torch.tensor([[1, 0, 1], [1, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=torch.float32)
    path = dbm.annealing_path(init, data=train)
    betas = schedules.linear(4)
    p_x = _p_ann(path.rbm, path.a0, betas).reshape(8, 4)  # (v, h_2): v is the leading 3 bits
    p_v = p_x.sum(1)
    rows = [0, 3, 5, 6]
    log_w, sweeps = raise_log_weights(path, all_states(3)[rows].float(), betas, 40000, torch.Generator().manual_seed(0))
    assert sweeps == 8
    w = torch.exp(log_w)
    mean, se = w.mean(1), w.std(1) / math.sqrt(w.shape[1])
    assert torch.all(torch.abs(mean - p_v[rows]) < 4 * se), (mean, p_v[rows], se)
    assert torch.all(se < 0.05 * p_v[rows])  # the test has power
    # and p_ann differs from the DBM itself at K = 4 (so the check above is about p_ann)
    log_z, log_f = _brute_dbm(dbm)
    assert float((torch.exp(log_f - log_z)[rows] - p_v[rows]).abs().max()) > 5 * float(se.max())


def test_raise_dbn_weights_are_unbiased_for_the_unrolled_model():
    """Sec. 3.3: mean(w) estimates p_ann(v) = sum_{h_1} p(v | h_1) p_ann,top(h_1)."""
    dbn = _dbn((3, 3, 2), seed=9, scale=1.5)
    path = dbn.annealing_path("uniform")
    betas = schedules.linear(4)
    p_h1 = _p_ann(dbn.top, torch.zeros(3), betas)
    H1, V = all_states(3), all_states(3)
    p_v_h = torch.exp(torch.stack([dbn.log_p_v_given_h1(V, H1[j].expand(8, -1)) for j in range(8)], 1))
    p_v = p_v_h @ p_h1
    rows = [1, 2, 4, 7]
    log_w, sweeps = raise_log_weights(path, V[rows].float(), betas, 40000, torch.Generator().manual_seed(1))
    assert sweeps == 4
    w = torch.exp(log_w)
    mean, se = w.mean(1), w.std(1) / math.sqrt(w.shape[1])
    assert torch.all(torch.abs(mean - p_v[rows]) < 4 * se), (mean, p_v[rows], se)
    assert torch.all(se < 0.05 * p_v[rows])


@pytest.mark.parametrize("family", ["dbm", "dbn"])
def test_raise_agrees_with_exact_and_is_conservative(family):
    model = _dbm(seed=10) if family == "dbm" else _dbn(seed=10)
    X = _samples(model, 40, seed=2)
    exact_ll = float((model.exact_log_f(X) - model.exact_log_z()).mean())
    res = estimate(model, "raise", data=X, steps=500, chains=20, seed=4, is_samples=200)
    assert abs(res.mean_log_likelihood - exact_ll) < 4 * res.mean_log_likelihood_stderr + 0.02
    # few intermediate distributions: RAISE errs low on average (a stochastic lower bound of p_ann)
    low = [
        estimate(model, "raise", data=X, steps=5, chains=5, seed=s, is_samples=50).mean_log_likelihood for s in range(3)
    ]
    assert np.mean(low) <= exact_ll + 0.05


def test_raise_control_variate_with_estimated_log_f():
    """Subsampled RAISE with the importance-sampling log f(v) as control variate covers the full-set mean."""
    dbm = _dbm(seed=11)
    X = _samples(dbm, 300, seed=3)
    exact_ll = float((dbm.exact_log_f(X) - dbm.exact_log_z()).mean())
    res = estimate(dbm, "raise", data=X, steps=300, chains=10, n_examples=40, seed=5, is_samples=200)
    assert res.settings["n_examples"] == 40
    assert abs(res.extra["control_variate_alpha"] - 1.0) < 0.2  # log f tracks log p closely
    assert abs(res.mean_log_likelihood - exact_ll) < 4 * res.mean_log_likelihood_stderr + 0.02


def test_base_rate_is_not_defined_for_dbns():
    with pytest.raises(ValueError, match="not defined for DBNs"):
        estimate(_dbn(), "ais", steps=10, chains=2, init="base-rate", train_data=all_states(8))


def test_csl_refuses_deep_models():
    with pytest.raises(ValueError, match="binary RBMs only"):
        estimate(_dbm(), "csl", data=all_states(8))


# --------------------------------------------------------------------------- files
@pytest.mark.parametrize("family", ["dbm", "dbn"])
def test_model_file_round_trip_and_cli(family, tmp_path, capsys):
    from logzbench.cli import main

    model = _dbm(seed=12) if family == "dbm" else _dbn(seed=12, tied=False)
    path = tmp_path / f"{family}.npz"
    save_model(model, path)
    back = load_model(path)
    assert type(back) is type(model)
    for k, a in model.to_arrays().items():
        np.testing.assert_array_equal(back.to_arrays()[k], a)
    data = tmp_path / "x.npy"
    np.save(data, all_states(8)[::9].numpy().astype(np.uint8))
    assert main(["estimate", str(path), "--estimator", "exact", "--data", str(data)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["log_z"] == pytest.approx(model.exact_log_z())
    assert (
        main(
            [
                "estimate",
                str(path),
                "--estimator",
                "raise",
                "--data",
                str(data),
                "-K",
                "20",
                "--chains",
                "3",
                "--is-samples",
                "20",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["n_sweeps"] == (40 if family == "dbm" else 20)


@pytest.mark.parametrize("family", ["dbm", "dbn"])
def test_from_arrays_of_the_registry_class(family):
    model = _dbm(seed=3) if family == "dbm" else _dbn(seed=3, tied=False)
    back = registry.family(family).model_class.from_arrays({**model.to_arrays(), "model_type": np.array(family)})
    assert type(back) is type(model)
    for k, a in model.to_arrays().items():
        np.testing.assert_array_equal(back.to_arrays()[k], a)
    with pytest.raises(ModelFileError, match=r"^mem: unexpected array\(s\) \['extra'\]"):
        type(model).from_arrays({**model.to_arrays(), "extra": np.zeros(1)}, source="mem")


def _write(path, **arrays):
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize(
    "family, mutate, message",
    [
        ("dbm", lambda a: a.pop("bias_2"), "missing array"),
        ("dbm", lambda a: a.pop("W_1"), "W_1, ..., W_L"),
        ("dbm", lambda a: a.__setitem__("W_2", a["W_2"][:, :3]), "bias_2"),
        ("dbm", lambda a: a["W_2"].__setitem__((0, 0), np.nan), "NaN"),
        ("dbm", lambda a: a["W_1"].__setitem__((0, 0), 1e31), "overflow"),
        ("dbm", lambda a: a.__setitem__("W_3", np.zeros((4, 2))), "bias"),
        ("dbn", lambda a: a.pop("recognition_bias"), "missing array"),
        ("dbn", lambda a: a.__setitem__("W_2", np.zeros((5, 4))), "h_1|bias_1|match"),
        ("dbn", lambda a: a["recognition_W"].__setitem__((1, 1), np.inf), "inf"),
    ],
)
def test_malformed_deep_model_files_are_refused(family, mutate, message, tmp_path):
    model = _dbm() if family == "dbm" else _dbn(tied=False)
    arrays = {**model.to_arrays(), "model_type": np.array(family)}
    mutate(arrays)
    path = _write(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ModelFileError, match=message) as exc:
        load_model(path)
    assert str(path) in str(exc.value)
