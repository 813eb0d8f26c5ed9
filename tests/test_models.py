"""Model definition, annealing path and model-file handling."""

import numpy as np
import pytest
import torch
from conftest import all_states, brute_log_z, random_rbm
from scipy import stats

from logzbench.errors import ModelFileError
from logzbench.models import BinaryRBM, load_model, save_model


def test_marginal_matches_sum_over_hidden(small_rbm):
    v = all_states(small_rbm.n_visible)[::97]
    h = all_states(small_rbm.n_hidden)
    joint = torch.stack([small_rbm.log_unnormalized_joint(v, h[j].expand(len(v), -1)) for j in range(len(h))], 1)
    torch.testing.assert_close(small_rbm.log_unnormalized_marginal(v), torch.logsumexp(joint, 1))
    hm = small_rbm.log_unnormalized_hidden_marginal(h)
    vv = all_states(small_rbm.n_visible)
    joint_h = torch.stack([small_rbm.log_unnormalized_joint(vv, h[j].expand(len(vv), -1)) for j in range(len(h))], 0)
    torch.testing.assert_close(hm, torch.logsumexp(joint_h, 1))


def test_conditional_log_prob_normalised(small_rbm):
    v = all_states(small_rbm.n_visible)
    h = all_states(small_rbm.n_hidden)[:5]
    lp = small_rbm.log_prob_v_given_h(v, h)  # (2^nv, 5)
    torch.testing.assert_close(torch.logsumexp(lp, 0), torch.zeros(5, dtype=torch.float64), atol=1e-9, rtol=0)


@pytest.mark.parametrize("init", ["uniform", "base-rate"])
def test_path_endpoints_and_ratio(small_rbm, init):
    data = torch.bernoulli(torch.full((50, small_rbm.n_visible), 0.3), generator=torch.Generator().manual_seed(1))
    path = small_rbm.annealing_path(init, data=data)
    v = all_states(small_rbm.n_visible).float()
    s = path.state_from_data(v)
    # beta = 0 is normalised by log Z_0
    assert float(torch.logsumexp(path.log_f(s, 0.0), 0)) == pytest.approx(path.log_z0(), abs=1e-9)
    # beta = 1 is the model
    torch.testing.assert_close(path.log_f(s, 1.0), small_rbm.log_unnormalized_marginal(v), atol=2e-5, rtol=0)
    torch.testing.assert_close(
        path.log_f_ratio(s, 0.3, 0.8), path.log_f(s, 0.8) - path.log_f(s, 0.3), atol=2e-6, rtol=1e-6
    )
    # small increments (as in a 10^5-step schedule) keep their relative precision
    ref = path.log_f(s, 0.30001) - path.log_f(s, 0.3)  # float64 difference
    torch.testing.assert_close(path.log_f_ratio(s, 0.3, 0.30001), ref, atol=1e-10, rtol=1e-5)
    # a coarse step with large |d x| takes the float64 route
    big = path.state_from_data(v * 0 + 1)
    big = big._replace(pre_h=big.pre_h * 100)
    torch.testing.assert_close(
        path.log_f_ratio(big, 0.0, 1.0), path.log_f(big, 1.0) - path.log_f(big, 0.0), atol=1e-9, rtol=1e-9
    )


@pytest.mark.parametrize("beta", [0.0, 0.6, 1.0])
def test_gibbs_transition_leaves_p_beta_invariant(beta):
    rbm = random_rbm(4, 3, seed=5, scale=1.5)
    path = rbm.annealing_path("base-rate", visible_bias_0=torch.tensor([0.5, -1.0, 0.0, 2.0]))
    states = all_states(4).float()
    logp = path.log_f(path.state_from_data(states), beta)
    p = torch.softmax(logp, 0).numpy()
    g = torch.Generator().manual_seed(11)
    n = 40000
    idx = torch.multinomial(torch.as_tensor(p), n, replacement=True, generator=g)
    s = path.state_from_data(states[idx])
    for _ in range(2):
        s = path.transition(s, beta, g)
    codes = (s.v.long() * (2 ** torch.arange(3, -1, -1))).sum(1)
    counts = np.bincount(codes.numpy(), minlength=16)
    chi2 = stats.chisquare(counts, p * n)
    assert chi2.pvalue > 1e-4, chi2


def test_base_rate_needs_data(small_rbm):
    with pytest.raises(ValueError, match="data-base-rate"):
        small_rbm.annealing_path("base-rate")
    with pytest.raises(ValueError, match="unknown initial distribution"):
        small_rbm.annealing_path("gaussian")


def test_model_file_round_trip(tmp_path, small_rbm):
    path = tmp_path / "m.npz"
    save_model(small_rbm, path)
    back = load_model(path)
    for a, b in zip(small_rbm.to_arrays().values(), back.to_arrays().values()):
        np.testing.assert_array_equal(a, b)
    assert brute_log_z(back) == pytest.approx(brute_log_z(small_rbm))


def test_foreign_model_file_without_optional_arrays(tmp_path):
    path = tmp_path / "other_toolkit.npz"
    np.savez(path, W=np.zeros((6, 3), dtype=np.float64), visible_bias=np.zeros(6), hidden_bias=np.ones(3))
    m = load_model(path)
    assert (m.n_visible, m.n_hidden) == (6, 3)


def _write(tmp_path, **arrays):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    return path


GOOD = dict(W=np.zeros((6, 3)), visible_bias=np.zeros(6), hidden_bias=np.zeros(3))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"W": None}, "missing array"),
        ({"hidden_bias": np.zeros(4)}, "'hidden_bias' has shape"),
        ({"visible_bias": np.zeros((6, 1))}, "'visible_bias' has shape"),
        ({"W": np.zeros(6)}, "must be 2-D"),
        ({"W": np.full((6, 3), np.nan)}, "NaN"),
        ({"visible_bias": np.array([0, 0, np.inf, 0, 0, 0.0])}, "inf"),
        ({"W": np.full((6, 3), 1e300)}, "overflow"),
        ({"extra": np.zeros(2)}, "unexpected array"),
        ({"model_type": np.array("dbm9")}, "unknown model_type"),
        ({"W": np.array([["a", "b", "c"]] * 6)}, "dtype"),
    ],
)
def test_malformed_model_files_refused(tmp_path, change, message):
    arrays = dict(GOOD)
    for k, v in change.items():
        if v is None:
            arrays.pop(k)
        else:
            arrays[k] = v
    with pytest.raises(ModelFileError, match=message):
        load_model(_write(tmp_path, **arrays))


def test_not_an_npz_and_missing_file(tmp_path):
    p = tmp_path / "junk.npz"
    p.write_bytes(b"this is not a zip archive")
    with pytest.raises(ModelFileError, match="not a readable"):
        load_model(p)
    with pytest.raises(ModelFileError, match="not found"):
        load_model(tmp_path / "nope.npz")
    obj = tmp_path / "pickled.npz"
    np.savez(obj, W=np.array([{"a": 1}], dtype=object), visible_bias=np.zeros(1), hidden_bias=np.zeros(1))
    with pytest.raises(ModelFileError):
        load_model(obj)


def test_from_arrays_names_the_source_and_checks_model_type(small_rbm):
    back = BinaryRBM.from_arrays({**small_rbm.to_arrays(), "model_type": np.array("rbm")}, source="mem")
    for k, a in small_rbm.to_arrays().items():
        np.testing.assert_array_equal(back.to_arrays()[k], a)
    with pytest.raises(ModelFileError, match=r"^mem: array 'model_type' is 'dbm', not 'rbm'$"):
        BinaryRBM.from_arrays({**small_rbm.to_arrays(), "model_type": np.array("dbm")}, source="mem")
    with pytest.raises(ModelFileError, match=r"^mem: RBM: 'W' contains NaN \(18 entries\)$"):
        BinaryRBM.from_arrays({**GOOD, "W": np.full((6, 3), np.nan)}, source="mem")


def test_in_memory_nan_refused():
    with pytest.raises(ModelFileError, match="NaN"):
        BinaryRBM(np.full((3, 2), np.nan), np.zeros(3), np.zeros(2))
