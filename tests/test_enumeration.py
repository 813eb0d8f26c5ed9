"""Exact enumeration (models/enumeration.py): float64 against brute force, the mixed-precision
mode within its a-priori error bound, the float64 kernels, the step layouts and the CUDA path."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import brute_log_z, random_rbm

from logzbench.estimators.exact import exact
from logzbench.models import DBM, DBN, BinaryRBM
from logzbench.models import enumeration as E
from logzbench.models.enumeration import ExactLogZ, exact_log_z, exact_log_z_bound

#: Brute force's own float64 error is far below this.
BRUTE_TOL = 1e-10

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


# --------------------------------------------------------------------------- float64
@pytest.mark.parametrize("nv, nh, scale", [(5, 3, 1.0), (9, 7, 0.5), (6, 10, 2.0), (12, 8, 5.0), (10, 6, 40.0)])
@pytest.mark.parametrize("kernel", ["auto", "softplus"])
@pytest.mark.parametrize("chunk_size", [None, 1, 4, 16])
def test_float64_equals_brute_force_of_the_joint(nv, nh, scale, kernel, chunk_size):
    rbm = random_rbm(nv, nh, seed=nv * 100 + nh, scale=scale)
    truth = brute_log_z(rbm)
    value, bound = exact_log_z(rbm, chunk_size=chunk_size, kernel=kernel, return_bound=True)
    assert abs(value - truth) <= bound + BRUTE_TOL
    assert bound < 1e-9
    assert exact_log_z(rbm, chunk_size=chunk_size, kernel=kernel) == value


def test_product_kernel_equals_softplus_kernel_and_is_the_default_where_safe():
    rbm = random_rbm(60, 11, seed=4, scale=1.0)
    n, M, _, c = E._layers(rbm, "cpu")
    hi, _ = E._hi_and_abs(M, c)
    assert E._product_group(M, c, 5, hi) is not None
    prod = exact_log_z(rbm, kernel="product", return_bound=True)
    soft = exact_log_z(rbm, kernel="softplus", return_bound=True)
    assert abs(prod.log_z - soft.log_z) <= prod.bound + soft.bound
    assert exact_log_z(rbm) == prod.log_z


def test_product_kernel_shrinks_its_groups_and_falls_back_for_huge_weights():
    # large pre-activations: groups must shrink so that no product overflows
    rbm = random_rbm(14, 6, seed=2, scale=40.0)
    n, M, _, c = E._layers(rbm, "cpu")
    hi, _ = E._hi_and_abs(M, c)
    G = E._product_group(M, c, 3, hi)
    assert G is not None and G < 14
    assert exact_log_z(rbm, kernel="product") == pytest.approx(brute_log_z(rbm), abs=1e-9)
    # |pre-activations| above 600: the product kernel is refused, auto falls back to softplus
    W = torch.full((12, 6), 150.0)
    big = BinaryRBM(W, torch.zeros(12), torch.zeros(6))
    with pytest.raises(ValueError, match="overflow"):
        exact_log_z(big, kernel="product")
    assert exact_log_z(big) == exact_log_z(big, kernel="softplus")
    assert exact_log_z(big) == pytest.approx(brute_log_z(big), rel=1e-14)


def test_multi_row_steps_give_the_same_value(monkeypatch):
    """The CUDA layout (H > 1 high patterns per step) on the CPU: a table capped at 2^3 rows."""
    rbm = random_rbm(8, 11, seed=5, scale=1.0)
    truth = brute_log_z(rbm)
    monkeypatch.setattr(E, "_TABLE_MAX_VALUES", 64)  # m = 11 -> table_bits = 2
    monkeypatch.setattr(E, "_BLOCK_ROWS", 4)
    assert E._step_shape(8, 11, 8, torch.device("cpu"), 64) == (2, 16)
    for precision in ("float64", "mixed"):
        value, bound = exact_log_z(rbm, chunk_size=64, precision=precision, return_bound=True)
        assert abs(value - truth) <= bound + BRUTE_TOL


def test_cuda_steps_are_sized_from_free_memory(monkeypatch):
    """The CUDA layout, with the free memory faked (no device needed)."""
    free = 8 << 30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 80 << 30))
    dev = torch.device("cuda")
    for n, m, itemsize in [(25, 784, 8), (25, 784, 4), (30, 500, 8), (10, 784, 8)]:
        k, H = E._step_shape(n, m, itemsize, dev, None)
        states = H << k
        assert states & (states - 1) == 0 and k <= n and states <= 1 << n
        assert states * m * (itemsize + 16) <= E._CUDA_MEMORY_SHARE * free
        assert (1 << k) * m <= E._TABLE_MAX_VALUES
        if n >= 20:
            assert states >= 1 << 16  # large steps: few launches per state
    assert E._step_shape(10, 784, 8, dev, None) == (10, 1)
    assert E._step_shape(25, 784, 8, dev, 1 << 12) == (12, 1)  # an explicit chunk_size wins


def test_zero_weights_analytic():
    rbm = BinaryRBM(torch.zeros(7, 5), torch.full((7,), 0.3), torch.full((5,), -0.2))
    a, b = float(rbm.visible_bias[0]), float(rbm.hidden_bias[0])  # float32 parameters, exactly
    analytic = 7 * math.log1p(math.exp(a)) + 5 * math.log1p(math.exp(b))
    for precision in ("float64", "mixed"):
        value, bound = exact_log_z(rbm, precision=precision, return_bound=True)
        assert abs(value - analytic) <= bound + 1e-12


# --------------------------------------------------------------------------- mixed precision
@pytest.mark.parametrize(
    "nv, nh, scale, bias_scale",
    [
        (784, 12, 0.05, 0.5),
        (784, 12, 0.3, 0.5),
        (784, 10, 1.0, 1.0),
        (784, 8, 3.0, 2.0),
        (30, 16, 10.0, 0.5),
        (40, 12, 60.0, 5.0),
        (16, 200, 0.5, 0.5),
        (200, 14, 0.01, 0.0),
    ],
)
def test_mixed_is_within_its_bound_of_float64(nv, nh, scale, bias_scale):
    rbm = BinaryRBM.random(nv, nh, scale=scale, bias_scale=bias_scale, generator=torch.Generator().manual_seed(nv + nh))
    ref = exact_log_z(rbm, return_bound=True)
    mixed = exact_log_z(rbm, precision="mixed", return_bound=True)
    assert isinstance(mixed, ExactLogZ)
    assert abs(mixed.log_z - ref.log_z) <= mixed.bound + ref.bound
    assert mixed.log_z != ref.log_z  # it really ran in float32
    assert ref.bound < 1e-6 * mixed.bound


@pytest.mark.parametrize("scale", [0.05, 0.3, 1.0])
def test_mixed_bound_is_not_vacuous_on_a_784_x_20_rbm(scale):
    rbm = BinaryRBM.random(784, 20, scale=scale, bias_scale=0.5, generator=torch.Generator().manual_seed(7))
    assert exact_log_z_bound(rbm, "mixed") < 1e-2
    assert exact_log_z_bound(rbm, "float64") < 1e-8


@pytest.mark.parametrize("n", [18, pytest.param(20, marks=pytest.mark.slow)])
def test_mixed_within_its_bound_on_a_784_x_n_rbm(n):
    rbm = BinaryRBM.random(784, n, scale=1.0, bias_scale=0.5, generator=torch.Generator().manual_seed(7))
    ref = exact_log_z(rbm, return_bound=True)
    mixed = exact_log_z(rbm, precision="mixed", return_bound=True)
    assert abs(mixed.log_z - ref.log_z) <= mixed.bound + ref.bound
    assert mixed.bound == exact_log_z_bound(rbm, "mixed") < 1e-2


def test_mixed_matches_brute_force_on_a_tiny_rbm():
    rbm = random_rbm(10, 8, seed=3, scale=2.0)
    value, bound = exact_log_z(rbm, precision="mixed", return_bound=True)
    assert abs(value - brute_log_z(rbm)) <= bound + BRUTE_TOL


def _softplus_error_ok(device):
    """The bound's model of PyTorch's float32 softplus: |error| <= rho (1 + softplus) + exp(-20)."""
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.linspace(-110.0, 30.0, 2_000_001), torch.rand(1_000_000, generator=g) * 140 - 110])
    x = x.to(device)
    y = E._softplus_(x.clone(), E._THRESHOLD[torch.float32]).double()
    ref = F.softplus(x.double(), threshold=60.0)
    rho = 2 * E._ULPS * E._U32
    return bool(((y - ref).abs() <= rho * (1 + ref) + math.exp(-20.0)).all())


def test_float32_softplus_meets_the_assumed_accuracy():
    assert _softplus_error_ok("cpu")


# --------------------------------------------------------------------------- interfaces
def test_deep_models_pass_precision_and_bound_through():
    g = torch.Generator().manual_seed(4)
    for model in (
        DBM.random((12, 8, 6), scale=0.8, bias_scale=0.5, generator=g),
        DBN.random((10, 8, 6), scale=0.8, bias_scale=0.5, generator=g),
    ):
        ref = model.exact_log_z(return_bound=True)
        mixed = model.exact_log_z(precision="mixed", return_bound=True)
        assert abs(mixed.log_z - ref.log_z) <= mixed.bound + ref.bound
        assert model.exact_log_z() == ref.log_z


def test_exact_estimator_records_precision_and_bound():
    rbm = random_rbm(12, 9, seed=1, scale=1.0)
    X = torch.bernoulli(torch.full((5, 12), 0.5), generator=torch.Generator().manual_seed(0))
    r64 = exact(rbm, X)
    rmx = exact(rbm, X, precision="mixed")
    assert r64.settings["precision"] == "float64" and rmx.settings["precision"] == "mixed"
    assert 0 < r64.extra["log_z_error_bound"] < 1e-9
    assert abs(rmx.log_z - r64.log_z) <= rmx.extra["log_z_error_bound"] + r64.extra["log_z_error_bound"]
    assert rmx.mean_log_likelihood == pytest.approx(r64.mean_log_likelihood, abs=rmx.extra["log_z_error_bound"] * 1.01)


def test_progress_bar_runs():
    rbm = random_rbm(9, 7, seed=1)
    assert exact_log_z(rbm, chunk_size=8, progress=True) == exact_log_z(rbm, chunk_size=8)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"precision": "float32"}, "unknown precision"),
        ({"precision": "half"}, "unknown precision"),
        ({"kernel": "gray"}, "unknown kernel"),
        ({"kernel": "product", "precision": "mixed"}, "float64 only"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"chunk_size": 2.5}, "chunk_size"),
    ],
)
def test_bad_arguments_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        exact_log_z(random_rbm(4, 3, seed=0), **kw)


def test_refuses_more_than_max_bits():
    rbm = BinaryRBM(torch.zeros(40, 33), torch.zeros(40), torch.zeros(33))
    with pytest.raises(ValueError, match="refusing above"):
        exact_log_z(rbm, precision="mixed")


# --------------------------------------------------------------------------- CUDA
@cuda
@pytest.mark.parametrize("precision", ["float64", "mixed"])
@pytest.mark.parametrize("nv, nh, scale", [(784, 16, 0.3), (30, 14, 5.0), (12, 200, 0.5)])
def test_cuda_matches_cpu_float64_within_the_bound(precision, nv, nh, scale):
    rbm = BinaryRBM.random(nv, nh, scale=scale, bias_scale=0.5, generator=torch.Generator().manual_seed(nv + nh))
    ref = exact_log_z(rbm, return_bound=True)
    gpu = exact_log_z(rbm.to("cuda"), precision=precision, return_bound=True)  # chunks from mem_get_info
    assert abs(gpu.log_z - ref.log_z) <= gpu.bound + ref.bound
    also = exact_log_z(rbm, precision=precision, device="cuda", chunk_size=1 << 12, return_bound=True)
    assert abs(also.log_z - ref.log_z) <= also.bound + ref.bound


@cuda
def test_cuda_float32_softplus_meets_the_assumed_accuracy():
    assert _softplus_error_ok("cuda")
