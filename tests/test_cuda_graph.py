"""CUDA: AIS with runs of sweeps captured in a CUDA graph (logzbench.estimators.ais_graph; skipped
without a GPU)."""

import numpy as np
import pytest
import torch
from conftest import random_rbm

from logzbench.estimators import ais_graph
from logzbench.estimators.exact import exact_log_z
from logzbench.utils import make_generator

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine"),
]


@pytest.fixture(autouse=True)
def _triton_kernels():
    from logzbench.kernels import _dispatch as S

    if S._device_kernels(torch.device("cuda")) is None:
        pytest.skip("Triton kernels unavailable on this machine")


def _path(init="uniform", seed=1, nv=20, nh=12):
    rbm = random_rbm(nv, nh, seed=seed, scale=0.8)
    X = torch.bernoulli(torch.full((30, nv), 0.5), generator=torch.Generator().manual_seed(1))
    return rbm, rbm.to("cuda").annealing_path(init, data=X.to("cuda"))


@pytest.mark.parametrize("init", ["uniform", "base-rate"])
def test_graph_ais_agrees_with_exact(init):
    rbm, path = _path(init)
    truth = exact_log_z(rbm)
    res = ais_graph.ais_graph(path, np.linspace(0, 1, 501), 500, make_generator(0, "cuda"), graph_sweeps=64)
    assert res.settings["cuda_graph"] == 64 and res.n_sweeps == 499
    assert abs(res.log_z - truth) < 4 * res.log_z_stderr + 1e-4


def test_graph_ais_sweeps_per_beta_agrees_with_exact():
    rbm, path = _path("base-rate", seed=2)
    truth = exact_log_z(rbm)
    res = ais_graph.ais_graph(
        path, np.linspace(0, 1, 201), 500, make_generator(3, "cuda"), graph_sweeps=50, sweeps_per_beta=3
    )
    assert res.n_sweeps == 199 * 3
    assert abs(res.log_z - truth) < 4 * res.log_z_stderr + 1e-4


def test_graph_same_seed_same_estimate_for_every_chunking():
    """The stream depends on the seed only: the same log-weights with or without the graph, and for
    every chunk length (a shorter last chunk runs uncaptured)."""
    _, path = _path("base-rate")
    betas = np.linspace(0, 1, 101)
    runs = [
        ais_graph.run_graph(path, betas, 100, make_generator(5, "cuda"), graph_sweeps=n, capture=c)[0].log_w
        for n, c in [(64, True), (64, True), (7, True), (99, True), (1000, True), (16, False)]
    ]
    for w in runs[1:]:
        assert torch.equal(w, runs[0])
    other = ais_graph.run_graph(path, betas, 100, make_generator(6, "cuda"), graph_sweeps=64)[0].log_w
    assert not torch.equal(other, runs[0])


def test_graph_final_move_and_short_schedules():
    rbm, path = _path()
    g = make_generator(0, "cuda")
    state, n = ais_graph.run_graph(path, [0.0, 1.0], 50, g)  # no sweep at all: one reweighting
    assert n == 0 and torch.isfinite(state.log_w).all()
    w = ais_graph.run_graph(path, [0.0, 0.5, 1.0], 50, make_generator(1, "cuda"), final_move=True)
    w2 = ais_graph.run_graph(path, [0.0, 0.5, 1.0], 50, make_generator(1, "cuda"), final_move=False)
    assert w[1] == 2 and w2[1] == 1
    assert torch.isfinite(w[0].log_w).all() and torch.isfinite(w2[0].log_w).all()
    # the state is consistent: pre_h = v W + b
    x = w[0].x
    assert torch.allclose(x.pre_h, torch.addmm(path.rbm.hidden_bias, x.v, path.rbm.W), atol=1e-5)


def test_graph_kernels_match_library_kernels():
    """The graph's hidden kernel gives hidden_step's increments and draws bit for bit for the same key
    and betas; its visible kernel bernoulli_'s draws of beta' (h W^T) when a0 = a - a0 = 0."""
    from logzbench.kernels import _triton
    from logzbench.kernels._constants import _device_table

    _, path = _path("base-rate", nv=300, nh=200)
    g = make_generator(9, "cuda")
    state = path.sample_initial(64, g)
    sw = ais_graph._Sweeps(path, state, torch.zeros(64, dtype=torch.float64, device="cuda"), 2)
    sw.keys.copy_(torch.tensor([123456789012345, 987654321, 42, 2**61 + 5], device="cuda"))
    sw.betas.copy_(torch.tensor([0.25, 0.2575, 0.5, 0.5075], device="cuda", dtype=torch.float64))
    table = _device_table(torch.float32, torch.device("cuda"))
    inc, h = _triton.hidden_step(state.pre_h, 0.5, 0.5075, state.v, path._da32, sw.keys[2:3], table)
    sw.sweep(1)
    torch.cuda.synchronize()
    assert torch.equal(sw.h, h)
    assert torch.equal(sw.log_w, inc)  # 0 + inc
    # visible kernel alone: with a0 = da = 0 its pre-activation is fl32(beta') * hw
    hw = torch.randn(64, 300, device="cuda", generator=make_generator(1, "cuda")) * 3
    out = torch.empty_like(hw)
    zeros = torch.zeros(300, device="cuda")
    kv = ais_graph._build()["visible"]
    kv[(-(-hw.numel() // 512),)](hw, out, zeros, zeros, sw.keys, sw.betas, table, 1, hw.numel(), 300, GROUPS=32)
    ref = _triton.bernoulli_(hw, 0.5075, True, sw.keys[3:4], table, torch.empty_like(hw))
    assert torch.equal(out, ref)


def test_graph_dbm_agrees_with_exact():
    """The DBM's even/odd-view path keeps the RBM path's AIS step, so it runs captured too."""
    from logzbench.models import DBM

    model = DBM.random((10, 8, 6), scale=0.8, bias_scale=0.5, generator=torch.Generator().manual_seed(4))
    path = model.to("cuda").annealing_path("uniform")
    assert ais_graph.supported(path) is None
    truth = model.exact_log_z()
    res = ais_graph.ais_graph(path, np.linspace(0, 1, 501), 500, make_generator(0, "cuda"), graph_sweeps=64)
    assert abs(res.log_z - truth) < 4 * res.log_z_stderr + 1e-3


def test_unsupported_paths_are_refused():
    _, path = _path()
    assert ais_graph.supported(path) is None
    path.transition = lambda state, beta, generator: state  # an instance that replaces the step
    assert ais_graph.supported(path) is not None
    with pytest.raises(ValueError):
        ais_graph.run_graph(path, [0.0, 0.5, 1.0], 10, make_generator(0, "cuda"))
    _, rpath = _path()
    with pytest.raises(ValueError):
        ais_graph.run_graph(rpath.rbm.to("cpu").annealing_path(), [0.0, 1.0], 10, make_generator(0, "cpu"))
