"""RBM training: CD/PCD learn clustered data, reproducibility, history, metrics, validation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import CLUSTERED_N_VISIBLE
from sklearn.base import clone

from logzbench.estimators.exact import exact_log_z
from logzbench.models.rbm import BinaryRBM
from logzbench.training import (
    TRAIN_PRESETS,
    RBMTrainer,
    TrainingDivergedError,
    exact_log_likelihood,
    history_to_csv,
    pseudo_log_likelihood,
    reconstruction_error,
    train_rbm,
)

N_VISIBLE = CLUSTERED_N_VISIBLE
FAST = dict(n_hidden=8, k=1, learning_rate=0.05, n_epochs=20, batch_size=100, seed=1)


@pytest.fixture(scope="module")
def data(clustered_data):
    return clustered_data


@pytest.fixture(scope="module")
def cd_fit(data):
    return RBMTrainer(**FAST).fit(*data)


def _params(rbm: BinaryRBM) -> list[np.ndarray]:
    return [rbm.W.numpy(), rbm.visible_bias.numpy(), rbm.hidden_bias.numpy()]


def _base_rate_log_likelihood(train: np.ndarray, test: np.ndarray) -> float:
    """Mean test log-likelihood of independent Bernoulli units with the training means."""
    p = train.mean(0).clip(1e-3, 1 - 1e-3)
    return float((test * np.log(p) + (1 - test) * np.log1p(-p)).sum(1).mean())


# --------------------------------------------------------------------------- learning
@pytest.mark.parametrize(
    "hyper",
    [dict(method="cd"), dict(method="pcd", lr_schedule="linear", final_momentum=0.5, learning_rate=0.1)],
    ids=["cd1", "pcd1"],
)
def test_training_beats_initial_and_base_rate_models(data, hyper):
    train, test = data
    model, history = train_rbm(train, test, **{**FAST, **hyper})
    initial, final = history[0]["test_log_likelihood"], history[-1]["test_log_likelihood"]
    base_rate = _base_rate_log_likelihood(train, test)
    # Four clusters with 5 % bit noise: the data entropy is ~3.8 nats/row, so a model that
    # captures the clusters beats the factorial base-rate model (~6.8 nats) by far.
    assert final > initial + 1.5
    assert final > base_rate + 1.5
    # The history value is the exact log-likelihood of the returned model.
    assert final == pytest.approx(exact_log_likelihood(model, test), abs=1e-6)


def test_exact_log_likelihood_normalises():
    rbm = BinaryRBM.random(6, 4, scale=1.0, bias_scale=0.5, generator=torch.Generator().manual_seed(3))
    all_states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=6)))
    per_state = rbm.log_unnormalized_marginal(all_states) - exact_log_z(rbm)
    assert float(torch.logsumexp(per_state, 0)) == pytest.approx(0.0, abs=1e-9)
    rows = all_states[[0, 5, 63]]
    assert exact_log_likelihood(rbm, rows) == pytest.approx(float(per_state[[0, 5, 63]].mean()), abs=1e-9)


def test_reconstruction_error_decreases(cd_fit):
    errors = [row["train_reconstruction_error"] for row in cd_fit.history_]
    assert errors[-1] < 0.6 * errors[0]
    assert cd_fit.history_[-1]["test_reconstruction_error"] < 0.6 * cd_fit.history_[0]["test_reconstruction_error"]


def test_reconstruction_error_definition():
    rbm = BinaryRBM.random(5, 3, scale=0.7, generator=torch.Generator().manual_seed(0))
    v = torch.tensor([[1.0, 0, 1, 1, 0], [0, 0, 1, 0, 1]])
    recon = torch.sigmoid(torch.sigmoid(v @ rbm.W + rbm.hidden_bias) @ rbm.W.T + rbm.visible_bias)
    assert reconstruction_error(rbm, v) == pytest.approx(float(((recon - v) ** 2).mean()), rel=1e-6)


def test_pseudo_log_likelihood_is_unbiased():
    n = 6
    rbm = BinaryRBM.random(n, 4, scale=1.0, bias_scale=0.5, generator=torch.Generator().manual_seed(5))
    rows = torch.tensor([[1.0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 0]])
    # Analytic per-bit conditionals log p(v_i | v_-i) = log sigmoid(log f(v) - log f(v with bit i flipped)).
    log_f = rbm.log_unnormalized_marginal(rows)
    per_bit = torch.stack(
        [
            torch.nn.functional.logsigmoid(
                log_f - rbm.log_unnormalized_marginal(torch.where(torch.arange(n) == i, 1 - rows, rows))
            )
            for i in range(n)
        ],
        dim=1,
    )
    exact_pl = float(per_bit.sum(1).mean())
    repeats = 20000
    estimate = pseudo_log_likelihood(rbm, rows.repeat(repeats, 1), torch.Generator().manual_seed(0))
    # One-bit estimator n * log p(v_I | v_-I), I uniform: variance n^2 Var_I per row.
    stderr = math.sqrt(float((n**2 * per_bit.var(1, unbiased=False)).mean()) / (3 * repeats))
    assert abs(estimate - exact_pl) < 5 * stderr
    assert stderr < 0.05 * abs(exact_pl)  # the check is not vacuous


# --------------------------------------------------------------------------- reproducibility
def test_same_seed_same_model_different_seed_differs(data):
    train, _ = data
    hyper = {**FAST, "n_epochs": 3}
    a = RBMTrainer(**hyper).fit(train).model_
    b = RBMTrainer(**hyper).fit(train).model_
    c = RBMTrainer(**{**hyper, "seed": 2}).fit(train).model_
    for x, y in zip(_params(a), _params(b)):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.W.numpy(), c.W.numpy())


@pytest.mark.parametrize("method", ["cd", "pcd"])
def test_monitoring_does_not_change_training(data, method):
    train, test = data
    hyper = {**FAST, "n_epochs": 3, "method": method}
    plain = RBMTrainer(**hyper, eval_every=1).fit(train).model_
    monitored = RBMTrainer(**hyper, eval_every=2, eval_subsample=50).fit(train, test).model_
    for x, y in zip(_params(plain), _params(monitored)):
        np.testing.assert_array_equal(x, y)


def test_model_carries_training_means(cd_fit, data):
    model = cd_fit.model_
    assert isinstance(model, BinaryRBM) and model.n_visible == N_VISIBLE and model.n_hidden == FAST["n_hidden"]
    np.testing.assert_allclose(model.data_mean.numpy(), data[0].mean(0), atol=1e-6)
    assert cd_fit.n_features_in_ == N_VISIBLE


def test_sklearn_params_and_clone():
    trainer = RBMTrainer(n_hidden=7, method="pcd", k=3)
    assert trainer.get_params()["k"] == 3
    copy = clone(trainer).set_params(k=5)
    assert copy.k == 5 and copy.method == "pcd" and trainer.k == 3
    assert repr(copy) == "RBMTrainer(n_hidden=7, method='pcd', k=5)"
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        trainer.set_params(momentum=0.3)


# --------------------------------------------------------------------------- history
def test_history_keys_and_values(cd_fit):
    history = cd_fit.history_
    assert [row["epoch"] for row in history] == list(range(FAST["n_epochs"] + 1))
    expected = {
        "epoch",
        "learning_rate",
        "momentum",
        "seconds",
        "eval_seconds",
        "log_z",
        "train_reconstruction_error",
        "test_reconstruction_error",
        "train_pseudo_log_likelihood",
        "test_pseudo_log_likelihood",
        "train_log_likelihood",
        "test_log_likelihood",
    }
    for row in history:
        assert set(row) == expected
        assert all(math.isfinite(value) for value in row.values())
    # momentum 0.5 for epochs 1..5, 0.9 afterwards; constant learning rate
    assert [row["momentum"] for row in history[1:7]] == [0.5] * 5 + [0.9]
    assert {row["learning_rate"] for row in history[1:]} == {FAST["learning_rate"]}


def test_history_without_test_set_or_exact(data):
    train, _ = data
    history = RBMTrainer(**{**FAST, "n_epochs": 4}, exact_ll_max_units=4, eval_every=3).fit(train).history_
    metrics = {"train_reconstruction_error", "train_pseudo_log_likelihood"}
    assert all(
        set(row) == {"epoch", "learning_rate", "momentum", "seconds", "eval_seconds"} | metrics for row in history
    )
    evaluated = [row["epoch"] for row in history if math.isfinite(row["train_reconstruction_error"])]
    assert evaluated == [0, 3, 4]  # epoch 0, every 3rd, and the last


@pytest.mark.parametrize("schedule, decay", [("linear", None), ("exponential", 0.5)])
def test_learning_rate_schedules(data, schedule, decay):
    extra = {} if decay is None else {"lr_decay": decay}
    history = RBMTrainer(**{**FAST, "n_epochs": 4}, lr_schedule=schedule, **extra).fit(data[0][:200]).history_
    rates = np.array([row["learning_rate"] for row in history[1:]])
    lr = FAST["learning_rate"]
    if schedule == "linear":
        np.testing.assert_allclose(rates, lr * np.array([1.0, 0.75, 0.5, 0.25]))
    else:
        np.testing.assert_allclose(rates, lr * decay ** np.arange(4))


def test_history_to_csv_roundtrip(cd_fit, tmp_path):
    path = tmp_path / "sub" / "history.csv"
    history_to_csv(cd_fit.history_, path)
    frame = pd.read_csv(path)
    assert list(frame.columns) == list(cd_fit.history_[0])
    np.testing.assert_allclose(frame["test_log_likelihood"], [r["test_log_likelihood"] for r in cd_fit.history_])


def test_callback_sees_every_record(data):
    seen = []
    trainer = RBMTrainer(**{**FAST, "n_epochs": 2}).fit(
        data[0][:200], callback=lambda row, m: seen.append(row["epoch"])
    )
    assert seen == [0, 1, 2] and len(trainer.history_) == 3


# --------------------------------------------------------------------------- presets
@pytest.mark.parametrize("name", sorted(TRAIN_PRESETS))
def test_presets_train(name, data):
    hyper = {**TRAIN_PRESETS[name], "n_epochs": 1, "exact_ll_max_units": 0, "eval_subsample": 100}
    model, history = train_rbm(data[0][:200], **hyper)
    assert model.n_hidden == TRAIN_PRESETS[name]["n_hidden"] and len(history) == 2


def test_upadhya_sastry_presets_follow_the_paper():
    for name, n_hidden in (("us-rbm20", 20), ("us-rbm200", 200), ("us-rbm500", 500)):
        p = TRAIN_PRESETS[name]
        assert (
            p["n_hidden"],
            p["method"],
            p["k"],
            p["learning_rate"],
            p["batch_size"],
            p["weight_decay"],
            p["initial_momentum"],
            p["final_momentum"],
            p["momentum_switch_epoch"],
            p["init"],
        ) == (n_hidden, "cd", 20, 0.1, 100, 0.001, 0.5, 0.9, 5, "uniform_sqrt")


def test_uniform_sqrt_initialisation(data):
    model = RBMTrainer(n_hidden=9, n_epochs=0, init="uniform_sqrt").fit(data[0]).model_
    bound = 1 / math.sqrt(9)
    assert model.W.abs().max() <= bound and model.W.abs().max() > 0.8 * bound
    p = data[0].mean(0).clip(1e-3, 1 - 1e-3)
    np.testing.assert_allclose(model.visible_bias.numpy(), np.log(p / (1 - p)), rtol=1e-5)


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(method="foo"), "method"),
        (dict(k=0), "k must be >= 1"),
        (dict(batch_size=0), "batch_size must be >= 1"),
        (dict(n_hidden=2.5), "n_hidden must be an integer"),
        (dict(learning_rate=-0.1), "learning_rate"),
        (dict(final_momentum=1.0), "final_momentum"),
        (dict(lr_schedule="cosine"), "lr_schedule"),
        (dict(lr_decay=0.0), "lr_decay"),
        (dict(init="xavier"), "init"),
        (dict(weight_decay=float("nan")), "weight_decay"),
        (dict(n_persistent_chains=0), "n_persistent_chains"),
        (dict(exact_ll_max_units=40), "exact_ll_max_units"),
    ],
)
def test_invalid_hyperparameters(bad, match, data):
    with pytest.raises(ValueError, match=match):
        RBMTrainer(**{**FAST, **bad}).fit(data[0][:50])


def test_invalid_data(data):
    train, _ = data
    trainer = RBMTrainer(**FAST)
    halves = train.copy()
    halves[3, 2] = 0.5
    with pytest.raises(ValueError, match="binary"):
        trainer.fit(halves)
    with_nan = train.copy()
    with_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        trainer.fit(with_nan)
    with pytest.raises(ValueError, match="columns"):
        trainer.fit(train, train[:, :-1])
    with pytest.raises(ValueError, match="2-D"):
        trainer.fit(train[0])
    with pytest.raises(ValueError, match="2-D"):
        trainer.fit(train[:0])


def test_divergence_is_reported(data):
    with pytest.raises(TrainingDivergedError, match="diverged"):
        RBMTrainer(**{**FAST, "n_epochs": 3, "learning_rate": 1e38}).fit(data[0][:200])
