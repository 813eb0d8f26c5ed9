"""CUDA: the same estimators on the GPU agree with exact values (skipped without a GPU)."""

import pytest
import torch
from conftest import model_samples, random_rbm

from logzbench.api import estimate
from logzbench.estimators.exact import exact_log_z

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine"),
]


@pytest.mark.parametrize("init", ["uniform", "base-rate"])
def test_ais_and_raise_on_cuda_agree_with_exact(init):
    rbm = random_rbm(20, 12, seed=1, scale=0.8)
    X = model_samples(rbm, 40, seed=2)
    truth = exact_log_z(rbm)
    a = estimate(rbm, "ais", data=X, train_data=X, steps=500, chains=500, init=init, seed=0, device="cuda")
    assert a.settings["device"].startswith("cuda")
    assert abs(a.log_z - truth) < 4 * a.log_z_stderr + 1e-4
    exact_ll = float((rbm.log_unnormalized_marginal(X) - truth).mean())
    r = estimate(rbm, "raise", data=X, train_data=X, steps=500, chains=20, init=init, seed=0, device="cuda")
    assert abs(r.mean_log_likelihood - exact_ll) < 4 * r.mean_log_likelihood_stderr + 1e-3


def test_cuda_same_seed_same_estimate():
    rbm = random_rbm(20, 12, seed=1, scale=0.8)
    a = estimate(rbm, "ais", steps=100, chains=100, seed=5, device="cuda")
    b = estimate(rbm, "ais", steps=100, chains=100, seed=5, device="cuda")
    assert a.log_z == b.log_z


def test_exact_on_cuda_matches_cpu():
    rbm = random_rbm(30, 14, seed=3, scale=0.5)
    assert exact_log_z(rbm.to("cuda")) == pytest.approx(exact_log_z(rbm), abs=1e-8)


@pytest.mark.parametrize("family, init", [("dbm", "uniform"), ("dbm", "base-rate"), ("dbn", "uniform")])
def test_deep_models_on_cuda_agree_with_exact(family, init):
    from logzbench.models import DBM, DBN

    cls = DBM if family == "dbm" else DBN
    model = cls.random((10, 8, 6), scale=0.8, bias_scale=0.5, generator=torch.Generator().manual_seed(4))
    X = torch.bernoulli(torch.full((30, 10), 0.5), generator=torch.Generator().manual_seed(1))
    truth = model.exact_log_z()
    exact_ll = float((model.exact_log_f(X) - truth).mean())
    a = estimate(model, "ais", data=X, train_data=X, steps=500, chains=500, init=init, seed=0, device="cuda")
    assert abs(a.log_z - truth) < 4 * a.log_z_stderr + 1e-3
    assert abs(a.mean_log_likelihood - exact_ll) < 4 * a.mean_log_likelihood_stderr + 1e-2
    r = estimate(model, "raise", data=X, train_data=X, steps=500, chains=20, init=init, seed=0, device="cuda")
    assert abs(r.mean_log_likelihood - exact_ll) < 4 * r.mean_log_likelihood_stderr + 2e-2
    assert model.to("cuda").exact_log_z() == pytest.approx(truth, abs=1e-8)


# --------------------------------------------------------------------------- the exact sampler on CUDA


@pytest.fixture(params=["triton", "torch"])
def cuda_impl(request, monkeypatch):
    """The public sampling functions on CUDA with the Triton kernels, then with torch operations."""
    from logzbench.kernels import _dispatch as S

    if request.param == "triton":
        if S._device_kernels(torch.device("cuda")) is None:
            pytest.skip("Triton kernels unavailable on this machine")
    else:
        monkeypatch.setenv(S.ENV_NO_TRITON, "1")
    return request.param


def _hits(sampler, value: float, n_total: int, chunk: int = 1 << 26) -> int:
    g = torch.Generator(device="cuda").manual_seed(20261123)
    x = torch.full((chunk,), value, device="cuda")
    return sum(int(sampler(x.clone(), g).sum()) for _ in range(n_total // chunk))


def test_cuda_tiny_probability_hit_count(cuda_impl):
    """p = 2^-30 over 2^29 draws, from probabilities and from float32 logits: Poisson(0.5) hits (more
    than 8 with probability 3e-9; a float32-uniform rule gives about 32), as on CPU."""
    import math

    import numpy as np

    from logzbench import kernels as S

    p = 2.0**-30
    assert _hits(S.bernoulli, p, 1 << 29) <= 8
    z = float(np.float32(math.log(p) - math.log1p(-p)))
    assert _hits(S.bernoulli_from_logits_, z, 1 << 29) <= 8


def test_cuda_means_edges_and_seeds(cuda_impl):
    import math

    from logzbench import kernels as S

    g = torch.Generator(device="cuda").manual_seed(3)
    n = 1 << 20
    for dtype in (torch.float32, torch.float64):
        for p in [1e-3, 0.1, 0.37, 0.5, 0.9, 0.999, 255.5 / 256]:
            x = S.bernoulli(torch.full((n,), p, dtype=dtype, device="cuda"), g)
            assert x.dtype == dtype and x.device.type == "cuda"
            assert abs(float(x.mean()) - p) < 5 * math.sqrt(p * (1 - p) / n), (dtype, p)
            z = torch.full((n,), math.log(p) - math.log1p(-p), dtype=dtype, device="cuda")
            y = S.bernoulli_from_logits(z, g, scale=0.5)
            q = 1 / (1 + math.exp(-0.5 * float(z[0])))
            assert abs(float(y.mean()) - q) < 5 * math.sqrt(q * (1 - q) / n), (dtype, p)
    p = torch.tensor([0.0, 1.0, -0.5, 1.5, float("nan")], device="cuda").repeat(10_000)
    x = S.bernoulli(p, g).reshape(10_000, 5)
    assert (x[:, 0] == 0).all() and (x[:, 1] == 1).all() and (x[:, 2] == 0).all() and (x[:, 3] == 1).all()
    assert torch.isnan(x[:, 4]).all()
    z = torch.tensor([-math.inf, math.inf, float("nan"), -1e30, 1e30, -100.0], device="cuda").repeat(10_000)
    y = S.bernoulli_from_logits(z, g).reshape(10_000, 6)
    assert (y[:, 0] == 0).all() and (y[:, 1] == 1).all() and torch.isnan(y[:, 2]).all()
    assert (y[:, 3] == 0).all() and (y[:, 4] == 1).all() and (y[:, 5] == 0).all()
    zt = torch.randn(40, 30, device="cuda").t()  # in place on a non-contiguous tensor
    assert S.bernoulli_from_logits_(zt, g) is zt and set(torch.unique(zt).tolist()) <= {0.0, 1.0}

    def draw(seed):
        gg = torch.Generator(device="cuda").manual_seed(seed)
        return S.bernoulli_from_logits(torch.linspace(-5, 5, 300 * 700, device="cuda"), gg, scale=0.7)

    assert torch.equal(draw(5), draw(5)) and not torch.equal(draw(5), draw(6))


def test_cuda_gibbs_transition_matrix_is_exact(cuda_impl):
    """One AIS sweep's kernel on CUDA: from each visible state, the next state's frequencies match
    T(v, v') = sum_h p_beta(h | v) p_beta(v' | h) (chi-square), through the fused AIS step."""
    import numpy as np
    from conftest import all_states
    from scipy import stats

    rbm = random_rbm(3, 2, seed=12, scale=2.0, bias_scale=1.5)
    path = rbm.to("cuda").annealing_path("base-rate", visible_bias_0=torch.tensor([0.3, -2.0, 1.0], device="cuda"))
    beta0, beta = 0.39, 0.4
    vs, hs = all_states(3), all_states(2)
    W, a, b = rbm.W.double(), rbm.visible_bias.double(), rbm.hidden_bias.double()
    a_beta = (1 - beta) * path.a0.double().cpu() + beta * a
    ph = torch.sigmoid(beta * (vs @ W + b))
    p_h = torch.prod(torch.where(hs[None] == 1, ph[:, None], 1 - ph[:, None]), -1)
    pv = torch.sigmoid(beta * (hs @ W.T) + a_beta)
    p_v = torch.prod(torch.where(vs[None] == 1, pv[:, None], 1 - pv[:, None]), -1)
    T = (p_h @ p_v).numpy()
    n = 50_000
    g = torch.Generator(device="cuda").manual_seed(13)
    start = path.state_from_data(vs.float().repeat_interleave(n, 0).cuda())
    inc, nxt = path.reweight_and_move(start, beta0, beta, g)
    # the increment from the state's float32 pre-activations, in float64 (log_f would recompute
    # them in float64: a difference of order 1e-10 here, from the float32 rounding of v W + b)
    x64, sp = start.pre_h.double(), torch.nn.functional.softplus
    ref = (sp(beta * x64, threshold=40.0) - sp(beta0 * x64, threshold=40.0)).sum(1) + (beta - beta0) * (
        start.v.double() @ path._da32.double()
    )
    torch.testing.assert_close(inc, ref, rtol=0, atol=1e-12)
    assert float((inc - (path.log_f(start, beta) - path.log_f(start, beta0))).abs().max()) < 1e-8
    codes = (nxt.v.long().cpu() * torch.tensor([4, 2, 1])).sum(1).reshape(8, n)
    for i in range(8):
        counts = np.bincount(codes[i].numpy(), minlength=8)
        keep = T[i] > 0
        assert counts[~keep].sum() == 0
        assert stats.chisquare(counts[keep], T[i][keep] * n / T[i][keep].sum()).pvalue > 1e-5


def test_cuda_increments_match_float64(cuda_impl):
    """The log-weight increment on CUDA (fused with the hidden draws, and alone) equals the float64
    softplus difference plus the linear term, for fine and coarse steps alike."""
    from logzbench import kernels as S

    g = torch.Generator(device="cuda").manual_seed(8)
    x = torch.randn(500, 777, device="cuda", generator=g) * 6
    v = (torch.rand(500, 100, device="cuda", generator=g) < 0.4).float()
    dv = torch.randn(100, device="cuda", generator=g)
    for b0, b1 in [(0.0, 1e-5), (0.3, 0.302), (0.1, 0.2), (0.0, 1.0)]:
        x64 = x.double()
        ref = (
            torch.nn.functional.softplus(b1 * x64, threshold=40.0)
            - torch.nn.functional.softplus(b0 * x64, threshold=40.0)
        ).sum(1) + (b1 - b0) * (v.double() @ dv.double())
        scale = float((x64.abs() * abs(b1 - b0)).sum(1).max()) + 1.0
        alone = S.softplus_diff_rows(x, b0, b1, v=v, dv=dv)
        inc, h = S.reweight_and_draw(x, b0, b1, g, v=v, dv=dv)
        for got in (alone, inc):
            assert got is not None and got.dtype == torch.float64
            assert float((got - ref).abs().max()) < 1e-13 * scale, (b0, b1)
        p = torch.sigmoid(b1 * x64)
        assert abs(float((h.double() - p).sum() / (p * (1 - p)).sum().sqrt())) < 5
