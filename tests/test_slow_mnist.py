"""Paper-style check on a real MNIST RBM (slow: run with ``pytest -m slow``)."""

import pytest

from logzbench.api import estimate
from logzbench.data import load_prepared, prepare_dataset
from logzbench.estimators.exact import exact_log_z
from logzbench.training import train_rbm

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mnist_rbm20(tmp_path_factory):
    from conftest import SHARED_DATA

    if not SHARED_DATA.is_dir():
        pytest.skip("offline data mirror not found")
    out = tmp_path_factory.mktemp("data") / "mnist.npz"
    prepare_dataset("mnist", out, mirror=SHARED_DATA, n_train=10000, n_test=500)
    train, test = load_prepared(out, "train"), load_prepared(out, "test")
    rbm, _ = train_rbm(train, None, n_hidden=20, method="cd", k=1, learning_rate=0.05, n_epochs=3, seed=0)
    return rbm, train, test, exact_log_z(rbm)


@pytest.mark.parametrize("init", ["uniform", "base-rate"])
def test_ais_and_raise_bracket_exact_on_mnist_rbm20(mnist_rbm20, init):
    rbm, train, test, log_z = mnist_rbm20
    exact_ll = float((rbm.log_unnormalized_marginal(test) - log_z).mean())
    a = estimate(rbm, "ais", data=test, train_data=train, steps=10000, chains=100, init=init, seed=0)
    assert abs(a.log_z - log_z) < 4 * a.log_z_stderr + 0.05
    r = estimate(rbm, "raise", data=test, train_data=train, steps=1000, chains=10, n_examples=100, init=init, seed=0)
    if init == "uniform":
        assert r.mean_log_likelihood <= exact_ll + 3 * r.mean_log_likelihood_stderr + 0.05
    # With the data base rate, the annealing model of a poorly trained CD-1 RBM can be a
    # *better* model than the RBM, so RAISE may exceed the exact value (RAISE paper, Sec. 5.1,
    # mnistCD1-20: -164.11 vs exact -164.50); it stays within a nat.
    assert abs(r.mean_log_likelihood - exact_ll) < 1.0


def test_csl_under_estimates_on_mnist_rbm20(mnist_rbm20):
    rbm, train, test, log_z = mnist_rbm20
    exact_ll = float((rbm.log_unnormalized_marginal(test) - log_z).mean())
    c = estimate(rbm, "csl", data=test, chains=100, samples_per_chain=10, burn_in=100, thin=10)
    assert c.mean_log_likelihood < exact_ll


@pytest.fixture(scope="module")
def mnist_deep(tmp_path_factory):
    """A DBM 784-20-10 and a DBN 784-16-10 trained briefly on 10,000 MNIST rows (as in the default config)."""
    from conftest import SHARED_DATA

    from logzbench.training import train_model

    if not SHARED_DATA.is_dir():
        pytest.skip("offline data mirror not found")
    out = tmp_path_factory.mktemp("data") / "mnist.npz"
    prepare_dataset("mnist", out, mirror=SHARED_DATA, n_train=10000, n_test=300)
    train, test = load_prepared(out, "train"), load_prepared(out, "test")
    dbm, _ = train_model(
        train, None, family="dbm", hidden_sizes=[20, 10], pretrain_epochs=5, n_epochs=20, exact_ll_max_units=0, seed=0
    )
    dbn, _ = train_model(
        train, None, family="dbn", hidden_sizes=[16, 10], n_epochs=10, top_n_epochs=20, exact_ll_max_units=0, seed=0
    )
    return {"dbm": dbm, "dbn": dbn}, train, test


@pytest.mark.parametrize("family, init", [("dbm", "uniform"), ("dbm", "base-rate"), ("dbn", "uniform")])
def test_deep_models_on_mnist_bracket_exact(mnist_deep, family, init):
    """RAISE (Alg. 3 / unrolled DBN) errs low; AIS's log Z matches exact enumeration."""
    models, train, test = mnist_deep
    model = models[family]
    log_z = model.exact_log_z()
    exact_ll = float((model.exact_log_f(test) - log_z).mean())
    a = estimate(model, "ais", data=test, train_data=train, steps=3000, chains=200, init=init, seed=0)
    assert abs(a.log_z - log_z) < 4 * a.log_z_stderr + 0.05
    r = estimate(model, "raise", data=test, train_data=train, steps=1000, chains=10, n_examples=50, init=init, seed=0)
    assert r.mean_log_likelihood <= exact_ll + 3 * r.mean_log_likelihood_stderr + 0.1
    assert exact_ll - r.mean_log_likelihood < 5.0  # and is informative
    if family == "dbm":  # the IS log f(v) of a DBM (h_1 summed out, 10 units sampled) is accurate
        assert abs(a.mean_log_likelihood - exact_ll) < 4 * a.mean_log_likelihood_stderr + 0.1
