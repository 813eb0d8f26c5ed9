"""DBM and DBN training: likelihood gains (exact, by enumeration), mean-field bounds, greedy DBN
properties, reproducibility, divergence, validation, the ``train_model`` entry point, presets, CLI."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch
from conftest import CLUSTERED_N_VISIBLE

from logzbench import registry
from logzbench.cli import main
from logzbench.models import load_model
from logzbench.models.dbm import DBM
from logzbench.models.dbn import DBN
from logzbench.models.rbm import BinaryRBM
from logzbench.training import (
    MODEL_PRESETS,
    TRAIN_PRESETS,
    DBMTrainer,
    DBNTrainer,
    RBMTrainer,
    TrainingDivergedError,
    train_dbm,
    train_dbn,
    train_model,
)
from logzbench.training.dbn import _DBNEvaluator

N_VISIBLE = CLUSTERED_N_VISIBLE
DBM_FAST = dict(
    hidden_sizes=[8, 6],
    pretrain_epochs=10,
    pretrain_learning_rate=0.1,
    batch_size=20,
    n_epochs=10,
    learning_rate=0.01,
    final_momentum=0.5,
    eval_every=5,
    seed=0,
)
DBN_FAST = dict(
    hidden_sizes=[8, 8], n_epochs=30, learning_rate=0.1, batch_size=20, top_lr_schedule="linear", eval_every=10, seed=0
)


@pytest.fixture(scope="module")
def data(clustered_data):
    return clustered_data


@pytest.fixture(scope="module")
def base_rate_ll(data):
    train, test = data
    p = train.mean(0).clip(1e-3, 1 - 1e-3)
    return float((test * np.log(p) + (1 - test) * np.log1p(-p)).sum(1).mean())


@pytest.fixture(scope="module")
def dbm_fit(data):
    return DBMTrainer(**DBM_FAST).fit(*data)


@pytest.fixture(scope="module")
def dbn_fit(data):
    return DBNTrainer(**DBN_FAST).fit(*data)


def _exact_ll(model, x) -> float:
    return float(model.exact_log_f(torch.as_tensor(x)).mean()) - model.exact_log_z()


def _dbm_params(model: DBM) -> list[np.ndarray]:
    return [t.numpy() for t in (*model.weights, *model.biases)]


def _dbn_params(model: DBN) -> list[np.ndarray]:
    return [
        t.numpy()
        for t in (
            model.W_1,
            model.bias_0,
            model.top.W,
            model.top.visible_bias,
            model.top.hidden_bias,
            model.recognition_W,
            model.recognition_bias,
        )
    ]


def _joint(history):
    return [row for row in history if row["phase"] == "joint"]


# --------------------------------------------------------------------------- DBM learning
def test_dbm_pretraining_and_joint_training_raise_exact_likelihood(dbm_fit, data, base_rate_ll):
    joint = _joint(dbm_fit.history_)
    pretrained, final = joint[0]["test_log_likelihood"], joint[-1]["test_log_likelihood"]
    # Pretraining alone gives a good model; joint training improves it further towards the
    # data entropy (3.77 nats); the factorial base-rate model is far behind.
    assert pretrained > base_rate_ll + 1.5
    assert final > pretrained + 0.1
    assert final > base_rate_ll + 2.5
    assert final == pytest.approx(_exact_ll(dbm_fit.model_, data[1]), abs=1e-6)
    assert pretrained == pytest.approx(_exact_ll(dbm_fit.pretrained_model_, data[1]), abs=1e-6)


def test_dbm_from_random_initialisation_improves(data, base_rate_ll):
    hyper = dict(
        hidden_sizes=[8, 6],
        pretrain_epochs=0,
        n_epochs=12,
        learning_rate=0.05,
        batch_size=20,
        final_momentum=0.5,
        eval_every=100,
        seed=1,
    )
    trainer = DBMTrainer(**hyper).fit(*data)
    joint = _joint(trainer.history_)
    assert [row["epoch"] for row in trainer.history_] == list(range(13))  # no pretraining records
    # N(0, 0.01^2) weights and base-rate visible biases: the initial model is ~the base-rate model.
    assert joint[0]["test_log_likelihood"] == pytest.approx(base_rate_ll, abs=0.05)
    assert joint[-1]["test_log_likelihood"] > joint[0]["test_log_likelihood"] + 2.0


@pytest.mark.parametrize("hidden_sizes", [[8], [6, 5, 4]], ids=["L1", "L3"])
def test_dbm_any_depth(data, hidden_sizes, base_rate_ll):
    hyper = {**DBM_FAST, "hidden_sizes": hidden_sizes, "pretrain_epochs": 5, "n_epochs": 4, "eval_every": 4}
    model, history = train_dbm(*data, **hyper)
    assert isinstance(model, DBM) and model.layer_sizes == (N_VISIBLE, *hidden_sizes)
    assert sum(row["phase"] == "pretrain" for row in history) == 5 * len(hidden_sizes)
    assert history[-1]["test_log_likelihood"] > base_rate_ll + 1.5


def test_dbm_history_and_model(dbm_fit, data):
    history, L = dbm_fit.history_, 2
    keys = list(history[0])
    assert all(list(row) == keys for row in history)
    assert {
        "phase",
        "layer",
        "epoch",
        "learning_rate",
        "momentum",
        "seconds",
        "eval_seconds",
        "layer_reconstruction_error",
        "train_reconstruction_error",
        "test_reconstruction_error",
        "train_mean_field_bound",
        "test_mean_field_bound",
        "log_z",
        "train_log_likelihood",
        "test_log_likelihood",
    } == set(keys)
    pre = [row for row in history if row["phase"] == "pretrain"]
    assert [(row["layer"], row["epoch"]) for row in pre] == [(l, e) for l in range(1, L + 1) for e in range(1, 11)]
    for layer in (1, 2):  # each pretrained RBM learns to reconstruct its input
        errs = [row["layer_reconstruction_error"] for row in pre if row["layer"] == layer]
        assert errs[-1] < 0.7 * errs[0]
    joint = _joint(history)
    assert [row["epoch"] for row in joint] == list(range(11))
    np.testing.assert_allclose([row["learning_rate"] for row in joint[1:]], 0.01 * (1 - np.arange(10) / 10))
    evaluated = [row["epoch"] for row in joint if math.isfinite(row["test_log_likelihood"])]
    assert evaluated == [0, 5, 10]
    # the mean-field bound on log f(v), minus log Z, never exceeds the exact log-likelihood
    for row in joint:
        if math.isfinite(row["log_z"]):
            assert row["test_mean_field_bound"] - row["log_z"] <= row["test_log_likelihood"] + 1e-6
    model = dbm_fit.model_
    np.testing.assert_allclose(model.data_mean.numpy(), data[0].mean(0), atol=1e-6)
    assert dbm_fit.n_features_in_ == N_VISIBLE


def test_dbm_mean_field_positive_phase_is_a_lower_bound():
    """The trainer's positive phase: a valid bound below exact log f(v), raised by the fixed-point sweeps."""
    model = DBM.random([10, 6, 5, 4], scale=1.0, bias_scale=0.5, generator=torch.Generator().manual_seed(4))
    v = torch.bernoulli(torch.full((64, 10), 0.5), generator=torch.Generator().manual_seed(5))
    exact = model.exact_log_f(v)

    def bound(n_iter):
        mu = DBMTrainer(n_mean_field_iter=n_iter)._mean_field(v, model.weights, model.biases)
        assert len(mu) == 4 and torch.equal(mu[0], v)
        return model.mean_field_bound(v, [m.double() for m in mu[1:]])

    initial, converged = bound(0), bound(10)
    assert (converged <= exact + 1e-6).all() and (initial <= exact + 1e-6).all()
    assert (converged >= initial - 1e-6).all()  # block coordinate ascent never lowers the bound
    assert float((converged - initial).mean()) > 0.01  # ... and here it raises it
    # 10 sweeps from the bottom-up initialisation reach the model's own (100-sweep) fixed point
    assert float((model.mean_field_bound(v) - converged).abs().max()) < 1e-3


def test_dbm_pretraining_activities(data):
    hyper = {**DBM_FAST, "pretrain_epochs": 2, "n_epochs": 0, "eval_every": 1}
    mean = DBMTrainer(**hyper).fit(data[0]).model_
    sample = DBMTrainer(**hyper, pretrain_activities="sample").fit(data[0]).model_
    np.testing.assert_array_equal(mean.weights[0].numpy(), sample.weights[0].numpy())  # layer 1 sees the data
    assert not np.array_equal(mean.weights[1].numpy(), sample.weights[1].numpy())


# --------------------------------------------------------------------------- DBN learning
def test_dbn_recognition_weights_are_tied(dbn_fit):
    model, (rbm1, rbm2) = dbn_fit.model_, dbn_fit.rbms_
    assert isinstance(model, DBN) and model.layer_sizes == (N_VISIBLE, 8, 8)
    np.testing.assert_array_equal(model.recognition_W.numpy(), model.W_1.numpy())
    np.testing.assert_array_equal(model.W_1.numpy(), rbm1.W.numpy())
    np.testing.assert_array_equal(model.bias_0.numpy(), rbm1.visible_bias.numpy())
    np.testing.assert_array_equal(model.recognition_bias.numpy(), rbm1.hidden_bias.numpy())
    np.testing.assert_array_equal(model.top.W.numpy(), rbm2.W.numpy())
    np.testing.assert_array_equal(model.top.visible_bias.numpy(), rbm2.visible_bias.numpy())
    np.testing.assert_array_equal(model.top.hidden_bias.numpy(), rbm2.hidden_bias.numpy())


def test_dbn_greedy_top_layer_raises_bound_and_likelihood(dbn_fit, data, base_rate_ll):
    top = [row for row in dbn_fit.history_ if row["phase"] == "layer2"]
    first, last = top[0], top[-1]
    # Greedy training raises the variational bound (its objective) and so the likelihood above the
    # initial bound (Hinton et al. 2006); that the likelihood also beats its own starting value is not
    # guaranteed (the initial bound is not tight) and depends on the seed, so it is not asserted.
    assert last["test_variational_bound"] > first["test_variational_bound"] + 0.5
    assert last["test_log_likelihood"] > first["test_variational_bound"] + 0.5
    assert last["test_log_likelihood"] > base_rate_ll + 2.0
    for row in (first, last):  # the bound is below the exact log-likelihood (up to Monte-Carlo noise)
        assert row["test_variational_bound"] <= row["test_log_likelihood"] + 0.05
    assert last["test_log_likelihood"] == pytest.approx(_exact_ll(dbn_fit.model_, data[1]), abs=1e-6)


def test_dbn_from_rbm_with_transposed_top_is_the_rbm(dbn_fit, data):
    """The greedy construction's starting point: top = first RBM transposed reproduces the RBM
    exactly, and the recognition bound is tight (q is then the exact posterior)."""
    rbm = dbn_fit.rbms_[0]
    dbn = DBN(rbm.W, rbm.visible_bias, rbm.W.T, rbm.hidden_bias, rbm.visible_bias, rbm.hidden_bias)
    x = torch.as_tensor(data[1][:100])
    rbm_ll = float(rbm.log_unnormalized_marginal(x).mean()) - rbm.exact_log_z()
    metrics = _DBNEvaluator(None, x, 100, 20, torch.Generator().manual_seed(0), 0)(dbn)
    assert metrics["test_log_likelihood"] == pytest.approx(rbm_ll, abs=1e-4)
    assert metrics["test_variational_bound"] == pytest.approx(rbm_ll, abs=1e-3)


def test_dbn_history(dbn_fit):
    history = dbn_fit.history_
    keys = list(history[0])
    assert all(list(row) == keys for row in history)
    assert [(row["layer"], row["epoch"]) for row in history] == [(l, e) for l in (1, 2) for e in range(31)]
    for key in (
        "rbm_test_log_likelihood",
        "rbm_train_reconstruction_error",
        "log_z",
        "test_log_likelihood",
        "train_variational_bound",
        "test_variational_bound",
    ):
        assert key in keys
    assert all(math.isnan(row["test_log_likelihood"]) for row in history if row["layer"] == 1)
    evaluated = [row["epoch"] for row in history if row["layer"] == 2 and math.isfinite(row["test_log_likelihood"])]
    assert evaluated == [0, 10, 20, 30]
    rates = [row["learning_rate"] for row in history if row["layer"] == 2][1:]
    np.testing.assert_allclose(rates, 0.1 * (1 - np.arange(30) / 30))


# --------------------------------------------------------------------------- reproducibility
@pytest.mark.parametrize("family", ["dbm", "dbn"])
def test_same_seed_same_model(data, family):
    train, test = data
    if family == "dbm":
        hyper, params = {**DBM_FAST, "pretrain_epochs": 2, "n_epochs": 2}, _dbm_params
    else:
        hyper, params = {**DBN_FAST, "n_epochs": 2, "top_samples_per_row": 2}, _dbn_params
    a, _ = train_model(train, family=family, **hyper)
    b, _ = train_model(train, test, family=family, **{**hyper, "eval_every": 2, "eval_subsample": 50})
    c, _ = train_model(train, family=family, **{**hyper, "seed": 7})
    for x, y in zip(params(a), params(b)):  # monitoring (test set, eval settings) never changes training
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(params(a)[0], params(c)[0])


# --------------------------------------------------------------------------- divergence and validation
@pytest.mark.parametrize(
    "family, bad, where",
    [
        ("dbm", dict(pretrain_learning_rate=1e38), "pretraining"),
        ("dbm", dict(pretrain_epochs=0, learning_rate=1e38), "joint"),
        ("dbn", dict(learning_rate=1e38), "layer 1"),
        ("dbn", dict(top_learning_rate=1e38), "layer 2"),
    ],
)
def test_divergence_is_reported(data, family, bad, where):
    hyper = {**(DBM_FAST if family == "dbm" else DBN_FAST), "pretrain_epochs": 2, "n_epochs": 3, **bad}
    if family == "dbn":
        hyper.pop("pretrain_epochs")
    with pytest.raises(TrainingDivergedError, match="diverged") as info:
        train_model(data[0][:200], family=family, **hyper)
    assert where in str(info.value)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(hidden_sizes=[]), "hidden_sizes must be a non-empty list"),
        (dict(hidden_sizes=[8, -3]), "positive integers; entry 1 is -3"),
        (dict(hidden_sizes=[8, 2.5]), "positive integers"),
        (dict(hidden_sizes="8,4"), "hidden_sizes must be a non-empty list"),
        (dict(hidden_sizes=8), "hidden_sizes must be a non-empty list"),
        (dict(n_epochs=-1), "n_epochs must be >= 0"),
        (dict(k=0), "k must be >= 1"),
        (dict(batch_size=0), "batch_size must be >= 1"),
        (dict(n_persistent_chains=0), "n_persistent_chains"),
        (dict(learning_rate=-0.1), "learning_rate"),
        (dict(lr_schedule="cosine"), "lr_schedule"),
        (dict(pretrain_activities="binary"), "pretrain_activities"),
        (dict(final_momentum=1.0), "final_momentum"),
        (dict(exact_ll_max_units=40), "exact_ll_max_units"),
    ],
)
def test_dbm_invalid_hyperparameters(data, bad, match):
    with pytest.raises(ValueError, match=match):
        DBMTrainer(**{**DBM_FAST, **bad}).fit(data[0][:50])


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(hidden_sizes=[8]), "exactly 2 entries"),
        (dict(hidden_sizes=[8, 0]), "positive integers"),
        (dict(hidden_sizes=[]), "non-empty"),
        (dict(method="foo"), "method"),
        (dict(top_method="foo"), "top RBM"),
        (dict(top_k=0), "top RBM.*k must be >= 1"),
        (dict(top_samples_per_row=0), "top_samples_per_row"),
        (dict(exact_ll_max_units=30), "exact_ll_max_units"),
    ],
)
def test_dbn_invalid_hyperparameters(data, bad, match):
    with pytest.raises(ValueError, match=match):
        DBNTrainer(**{**DBN_FAST, **bad}).fit(data[0][:50])


@pytest.mark.parametrize("family", ["dbm", "dbn"])
def test_invalid_data(data, family):
    train = data[0].copy()
    hyper = DBM_FAST if family == "dbm" else DBN_FAST
    halves = train.copy()
    halves[3, 2] = 0.5
    with pytest.raises(ValueError, match="binary"):
        train_model(halves, family=family, **hyper)
    with pytest.raises(ValueError, match="columns"):
        train_model(train, train[:, :-1], family=family, **hyper)
    with pytest.raises(ValueError, match="2-D"):
        train_model(train[0], family=family, **hyper)


# --------------------------------------------------------------------------- train_model and presets
def test_train_model_dispatch(data):
    train, test = data
    rbm, history = train_model(train[:300], test, family="rbm", hidden_sizes=[5], n_epochs=1, seed=3)
    same, _ = train_model(train[:300], test, n_hidden=5, n_epochs=1, seed=3)  # family defaults to "rbm"
    assert isinstance(rbm, BinaryRBM) and rbm.n_hidden == 5
    np.testing.assert_array_equal(rbm.W.numpy(), same.W.numpy())
    dbn, _ = train_dbn(train[:300], **{**DBN_FAST, "n_epochs": 1})
    assert isinstance(dbn, DBN)
    with pytest.raises(ValueError, match="unknown model family 'vae'"):
        train_model(train, family="vae")
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) \['method'\] for family 'dbm'"):
        train_model(train, family="dbm", hidden_sizes=[4], method="cd")
    with pytest.raises(ValueError, match="one entry"):
        train_model(train, family="rbm", hidden_sizes=[4, 3])


def test_rbm_presets_unchanged_and_listed():
    for name, params in TRAIN_PRESETS.items():
        assert "family" not in params  # still plain RBMTrainer arguments
        assert MODEL_PRESETS[name] == {"family": "rbm", **params}


@pytest.mark.parametrize("name", sorted(MODEL_PRESETS))
def test_every_preset_is_accepted_by_its_trainer(name):
    params = dict(MODEL_PRESETS[name])
    # the trainer class whose keywords the family's registry entry names as its hyperparameters
    cls = registry.load(registry.family(params.pop("family")).hyperparams[0])
    assert set(params) <= set(inspect.signature(cls).parameters)
    trainer = cls(**params)
    trainer._check_params()  # validates every hyperparameter without training
    assert trainer.get_params() == {**cls().get_params(), **params}


def test_deep_presets_match_the_paper_architectures():
    expected = {
        "mnist-dbm-500-1000": ("dbm", [500, 1000]),
        "omniglot-dbm-1000-1000": ("dbm", [1000, 1000]),
        "mnist-dbn-500-2000": ("dbn", [500, 2000]),
        "omniglot-dbn-1000-1000": ("dbn", [1000, 1000]),
    }
    for name, (family, sizes) in expected.items():
        assert (MODEL_PRESETS[name]["family"], MODEL_PRESETS[name]["hidden_sizes"]) == (family, sizes)
    assert MODEL_PRESETS["mnist-dbm-500-1000"]["n_persistent_chains"] == 100


def test_sklearn_style_params():
    trainer = DBMTrainer(hidden_sizes=[4, 3], k=2)
    assert trainer.get_params()["k"] == 2 and repr(trainer) == "DBMTrainer(hidden_sizes=[4, 3], k=2)"
    assert trainer.set_params(k=3).k == 3
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        trainer.set_params(method="cd")
    assert isinstance(RBMTrainer(), RBMTrainer)


# --------------------------------------------------------------------------- CLI
@pytest.fixture
def prepared(tmp_path, data):
    path = tmp_path / "tiny.npz"
    np.savez(path, train=data[0][:400].astype(np.uint8), test=data[1][:100].astype(np.uint8), meta=np.array("{}"))
    return path


@pytest.mark.parametrize(
    "family, sizes, extra, expected",
    [
        ("dbm", "6,4", ["--set", "pretrain_epochs=2", "--k", "2"], (N_VISIBLE, 6, 4)),
        ("dbn", "6,4", ["--method", "pcd"], (N_VISIBLE, 6, 4)),
    ],
)
def test_cli_train_deep(tmp_path, prepared, capsys, family, sizes, extra, expected):
    out, hist = tmp_path / "model.npz", tmp_path / "history.csv"
    rc = main(
        [
            "train",
            "--data",
            str(prepared),
            "--out",
            str(out),
            "--family",
            family,
            "--hidden-sizes",
            sizes,
            "--epochs",
            "2",
            "--batch-size",
            "20",
            "--seed",
            "1",
            "--history",
            str(hist),
            *extra,
        ]
    )
    assert rc == 0, capsys.readouterr().err
    model = load_model(out)
    assert model.family == family and tuple(model.layer_sizes) == expected
    assert model.data_mean is not None
    assert hist.read_text().startswith("phase,layer,epoch")


def test_cli_train_preset_with_overrides(tmp_path, prepared, capsys):
    out = tmp_path / "model.npz"
    rc = main(
        [
            "train",
            "--data",
            str(prepared),
            "--out",
            str(out),
            "--preset",
            "mnist-dbm-500-1000",
            "--hidden-sizes",
            "5,3",
            "--epochs",
            "1",
            "--set",
            "pretrain_epochs=1",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    model = load_model(out)
    assert isinstance(model, DBM) and model.layer_sizes == (N_VISIBLE, 5, 3)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--family", "dbm"], "needs --hidden-sizes"),
        (["--family", "dbm", "--hidden-sizes", "4,x"], "comma-separated integers"),
        (["--family", "dbm", "--hidden-sizes", "4,3", "--method", "cd"], "unknown hyperparameter"),
        (["--preset", "no-such-preset"], "unknown preset"),
    ],
)
def test_cli_train_errors(tmp_path, prepared, capsys, args, message):
    rc = main(["train", "--data", str(prepared), "--out", str(tmp_path / "m.npz"), *args])
    assert rc == 2 and message in capsys.readouterr().err
