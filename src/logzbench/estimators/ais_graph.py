"""AIS on a binary RBM path with runs of sweeps captured in a CUDA graph (opt-in).

At a few hundred chains a GPU sweep of :func:`logzbench.estimators.ais.run` is bound by launch cost:
each sweep issues about ten launches from Python (two products, two Triton kernels, two key draws,
small additions), and the betas travel as Python floats, so no captured sweep could serve another
step.  Here a sweep is four launches that read everything step-dependent from device memory:

1. ``hidden``: one Triton kernel, the log-weight increment from ``beta`` to ``beta'`` (the float64
   softplus differences of :func:`logzbench.kernels._triton.hidden_step` plus the linear term),
   added to ``log_w`` in place, and the hidden draws at ``beta'``;
2. ``h W^T`` (cuBLAS, into a fixed buffer);
3. ``visible``: one Triton kernel, ``z = a0 + beta' (a - a0) + beta' (h W^T)`` in float32 and the
   exact Bernoulli(``sigmoid(z)``) draws of the visible units (the decision rule of
   :mod:`logzbench.kernels`), into the state;
4. ``v W + b`` (cuBLAS ``addmm``), the cached hidden pre-activations.

The kernels take ``(beta, beta')`` and their Philox keys from two device tensors, indexed by the
sweep's position in a chunk, so one graph of ``graph_sweeps`` consecutive sweeps serves every chunk:
before each replay the chunk's betas and keys are copied into the graph's input buffers (two
launches per chunk).  A chunk shorter than ``graph_sweeps`` (the last) runs the same launches without
the graph.  Extra sweeps at one beta (``sweeps_per_beta > 1``) are steps from ``beta'`` to ``beta'``,
whose increment is exactly zero.  The final reweighting (no move) is the path's own ``log_f_ratio``.

**Random stream.**  Seeded and reproducible, exact, but *not* the draws of
:func:`logzbench.estimators.ais.run` for the same seed: the initial state is the same
(:func:`logzbench.estimators.ais.init`), then the keys of all sweeps are drawn at once, one
``torch.randint(0, 2**62, (2 T,))`` from the run's generator (``T`` sweeps; key ``2 t`` for the
hidden draws of sweep ``t``, ``2 t + 1`` for its visible draws).  The stream does not depend on
``graph_sweeps`` or on whether the graph is used (``capture=False`` runs the same kernels launch by
launch, giving the same numbers), and the draws given the pre-activations are those of the library's
exact sampler.  The visible pre-activation is rounded differently from the uncaptured path (an
elementwise float32 ``a0 + beta' da + beta' (hW^T)`` instead of cuBLAS's scaled epilogue), a
float32-rounding-level difference like any change of summation order.

Requirements: a :class:`logzbench.models.rbm.RBMAnnealingPath` (or a subclass that keeps its AIS
step, as the DBM's even/odd-view path does), float32 parameters, Triton, and a CUDA device for the
capture (``capture=False`` also runs in Triton's interpreter on the CPU, for tests).
:func:`supported` says whether a path qualifies.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import torch

from ..kernels import _triton
from ..kernels._constants import _device_table
from ..models.rbm import RBMAnnealingPath, RBMState
from ..schedules import from_array
from . import ais as _ais
from ._common import synchronize, timer
from .result import EstimateResult, check_finite

__all__ = ["ais_graph", "run_graph", "supported"]

#: Default sweeps per captured graph.
DEFAULT_GRAPH_SWEEPS = 64

tl = None  # triton.language, bound by _build()
_unit_bytes = _draw = _row_step = None  # logzbench.kernels._triton's jitted helpers, bound by _build()
_lock = threading.Lock()
_kernels: dict = {}


# ============================================================================ device code
# Wrapped by triton.jit in _build(); they call the jitted helpers of logzbench.kernels._triton
# (_unit_bytes, _draw, _row_step: the hidden step shared with _triton._hidden_kernel), bound into this
# module's globals there.


def _graph_hidden_kernel(
    x_ptr,
    h_ptr,
    logw_ptr,
    v_ptr,
    dv_ptr,
    keys_ptr,
    betas_ptr,
    table_ptr,
    step,
    cols,
    nv,
    LINEAR: tl.constexpr,
    GROUPS: tl.constexpr,
    VBLOCK: tl.constexpr,
):
    """Row ``program_id``: log_w += increment from betas[2 step] to betas[2 step + 1]; h = draws."""
    row = tl.program_id(0)
    bf64 = tl.load(betas_ptr + 2 * step)
    bt64 = tl.load(betas_ptr + 2 * step + 1)
    key = tl.load(keys_ptr + 2 * step)
    inc = _row_step(
        x_ptr,
        h_ptr,
        v_ptr,
        dv_ptr,
        table_ptr,
        key,
        row,
        cols,
        nv,
        bt64.to(tl.float32),
        bt64,
        bf64,
        bt64 - bf64,
        LINEAR,
        GROUPS,
        VBLOCK,
    )
    tl.store(logw_ptr + row, tl.load(logw_ptr + row) + inc)


def _graph_visible_kernel(
    hw_ptr,
    out_ptr,
    a0_ptr,
    da_ptr,
    keys_ptr,
    betas_ptr,
    table_ptr,
    step,
    n,
    nv,
    GROUPS: tl.constexpr,
):
    """out = exact Bernoulli(sigmoid(a0 + bt da + bt hw)) draws, bt = float32(betas[2 step + 1])."""
    pid = tl.program_id(0)
    g = pid * GROUPS + tl.arange(0, GROUPS)
    j = tl.arange(0, 16)
    offs = g[:, None] * 16 + j[None, :]
    mask = offs < n
    col = offs % nv
    hw = tl.load(hw_ptr + offs, mask=mask, other=0.0)
    a0 = tl.load(a0_ptr + col, mask=mask, other=0.0)
    da = tl.load(da_ptr + col, mask=mask, other=0.0)
    bt = tl.load(betas_ptr + 2 * step + 1).to(tl.float32)
    zb = (a0 + bt * da) + bt * hw
    key = tl.load(keys_ptr + 2 * step + 1)
    r = _unit_bytes(key, g, j)
    res = _draw(zb, r, g, j, mask, key, table_ptr, True)
    tl.store(out_ptr + offs, res, mask=mask)


_HELPERS = ("_unit_bytes", "_draw", "_row_step")


def _build() -> dict:
    """The jitted kernels (once per process; in the interpreter if TRITON_INTERPRET=1 then)."""
    if not _kernels:
        triton = _triton._triton()
        if triton is None:
            raise RuntimeError("triton is not installed: the CUDA-graph AIS needs the Triton kernels")
        _triton._build()  # jits the helpers in logzbench.kernels._triton
        with _lock:
            if not _kernels:
                g = globals()
                g["tl"] = triton.language
                for name in _HELPERS:
                    g[name] = getattr(_triton, name)
                _kernels["hidden"] = triton.jit(_graph_hidden_kernel, do_not_specialize=["step"])
                _kernels["visible"] = triton.jit(_graph_visible_kernel, do_not_specialize=["step"])
    return _kernels


# ============================================================================ host side


def supported(path) -> str | None:
    """``None`` when :func:`run_graph` can run ``path``, else the reason it cannot."""
    if not isinstance(path, RBMAnnealingPath):
        return f"the CUDA-graph AIS runs binary RBM paths only, not {type(path).__name__}"
    # subclasses qualify when they keep the RBM path's AIS (the DBM's even/odd view does)
    for name in (
        "log_f_ratio",
        "transition",
        "reweight_and_move",
        "_visible_move",
        "sample_initial",
        "_state",
        "log_z0",
    ):
        if getattr(type(path), name) is not getattr(RBMAnnealingPath, name) or name in vars(path):
            return f"the path replaces the RBM path's {name}"
    rbm = path.rbm
    if any(t.dtype != torch.float32 for t in (rbm.W, rbm.visible_bias, rbm.hidden_bias, path.a0)):
        return "the CUDA-graph AIS needs float32 parameters"
    if not _triton.available(rbm.device):
        return f"the Triton kernels are not available for {rbm.device}"
    return None


def _pairs(betas: np.ndarray, sweeps_per_beta: int, final_move: bool) -> np.ndarray:
    """``(beta, beta')`` of every sweep in order, float64, shape ``(T, 2)``: step ``k`` moves after
    reweighting (all but the last unless ``final_move``), then ``sweeps_per_beta - 1`` more sweeps at
    ``beta'`` (pairs ``(beta', beta')``, zero increment)."""
    k_total = len(betas) - 1
    moving = k_total if final_move else k_total - 1
    out = np.empty((max(moving, 0), int(sweeps_per_beta), 2), dtype=np.float64)
    if moving > 0:
        out[:, :, 1] = betas[1 : moving + 1, None]
        out[:, 0, 0] = betas[:moving]
        out[:, 1:, 0] = betas[1 : moving + 1, None]
    return out.reshape(-1, 2)


class _Sweeps:
    """The static buffers of one run and the launches of one sweep into them."""

    def __init__(self, path: RBMAnnealingPath, state, log_w: torch.Tensor, chunk: int):
        rbm = path.rbm
        dev = rbm.device
        m, nv, nh = state.v.shape[0], rbm.n_visible, rbm.n_hidden
        self.path, self.m, self.nv, self.nh = path, m, nv, nh
        self.v = state.v.detach().to(torch.float32).contiguous().clone()
        self.pre_h = state.pre_h.detach().to(torch.float32).contiguous().clone()
        self.log_w = log_w.detach().to(torch.float64).contiguous().clone()
        self.h = torch.empty((m, nh), dtype=torch.float32, device=dev)
        self.hw = torch.empty((m, nv), dtype=torch.float32, device=dev)
        self.keys = torch.zeros(2 * chunk, dtype=torch.int64, device=dev)
        self.betas = torch.zeros(2 * chunk, dtype=torch.float64, device=dev)
        self.W, self.WT, self.b = rbm.W, rbm.W.T, rbm.hidden_bias
        self.a0 = path.a0.contiguous()
        self.da = path._da32.contiguous()
        self.table = _device_table(torch.float32, dev)
        k = _build()
        self.k_hidden, self.k_visible = k["hidden"], k["visible"]
        self.block = min(_triton.ROW_BLOCK, max(16, _triton._next_pow2(nh)))
        self.vblock = min(1024, max(16, _triton._next_pow2(nv)))
        self.hwarps = min(_triton.ROW_WARPS, _triton._warps(self.block))
        self.vgroups = _triton.BLOCKS[torch.float32][0] // 16
        self.vwarps = _triton.BLOCKS[torch.float32][1]
        self.n = m * nv
        if m * max(nh, nv) > _triton.MAX_NUMEL:
            raise ValueError(f"{m} x {max(nh, nv)} elements: the Triton kernels address at most {_triton.MAX_NUMEL}")

    def clone_for_warmup(self) -> "_Sweeps":
        """The same launches into scratch copies of the state (compiles the kernels before a capture)."""
        other = object.__new__(_Sweeps)
        other.__dict__.update(self.__dict__)
        for name in ("v", "pre_h", "log_w", "h", "hw"):
            setattr(other, name, getattr(self, name).clone())
        return other

    def sweep(self, i: int) -> None:
        """Sweep ``i`` of the chunk in the buffers (reweighting, hidden and visible draws, new pre_h)."""
        m = self.m
        self.k_hidden[(m,)](
            self.pre_h,
            self.h,
            self.log_w,
            self.v,
            self.da,
            self.keys,
            self.betas,
            self.table,
            i,
            self.nh,
            self.nv,
            LINEAR=True,
            GROUPS=self.block // 16,
            VBLOCK=self.vblock,
            num_warps=self.hwarps,
        )
        torch.mm(self.h, self.WT, out=self.hw)
        self.k_visible[(-(-self.n // (self.vgroups * 16)),)](
            self.hw,
            self.v,
            self.a0,
            self.da,
            self.keys,
            self.betas,
            self.table,
            i,
            self.n,
            self.nv,
            GROUPS=self.vgroups,
            num_warps=self.vwarps,
        )
        torch.addmm(self.b, self.v, self.W, out=self.pre_h)


def _capture(sw: _Sweeps, n: int):
    """A CUDA graph of sweeps ``0 .. n - 1`` into ``sw``'s buffers, after a warm-up on scratch copies."""
    scratch = sw.clone_for_warmup()
    side = torch.cuda.Stream(device=sw.v.device)
    side.wait_stream(torch.cuda.current_stream(sw.v.device))
    with torch.cuda.stream(side):
        for i in range(n):
            scratch.sweep(i)
    torch.cuda.current_stream(sw.v.device).wait_stream(side)
    synchronize(sw.v.device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(n):
            sw.sweep(i)
    return graph


def run_graph(
    path: RBMAnnealingPath,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    graph_sweeps: int = DEFAULT_GRAPH_SWEEPS,
    sweeps_per_beta: int = 1,
    final_move: bool = False,
    capture: bool | None = None,
    chunk_times: list | None = None,
) -> tuple[_ais.AISState, int]:
    """:func:`logzbench.estimators.ais.run` for an RBM path with chunks of ``graph_sweeps`` sweeps
    replayed from one CUDA graph; returns the final state and the transitions per chain.

    The same estimator (same initial distribution, transitions and reweighting), a different
    random stream from the uncaptured run (see the module docstring): reproducible for a seed, and
    the same for every ``graph_sweeps`` and ``capture``.

    Parameters
    ----------
    path : RBMAnnealingPath
        See :func:`supported`.
    betas : array-like, shape (K + 1,)
    n_chains : int
    generator : torch.Generator
        On the path's device.
    graph_sweeps : int
        Sweeps per captured graph (each chunk of this many sweeps is one replay).
    sweeps_per_beta, final_move
        As :func:`logzbench.estimators.ais.run`.
    capture : bool, optional
        Use a CUDA graph (default: on CUDA devices).  ``False`` issues the same launches one by one.
    chunk_times : list, optional
        Timing hook (benchmarks): when given, each chunk's seconds (synchronised before and after)
        and its number of sweeps are appended as ``(seconds, sweeps, replayed)``.
    """
    why = supported(path)
    if why is not None:
        raise ValueError(why)
    if int(graph_sweeps) < 1 or int(sweeps_per_beta) < 1:
        raise ValueError("graph_sweeps and sweeps_per_beta must be at least 1")
    dev = path.rbm.device
    if generator.device.type != dev.type:
        raise ValueError(f"the generator is on {generator.device}, the path on {dev}")
    if capture is None:
        capture = dev.type == "cuda"
    if capture and dev.type != "cuda":
        raise ValueError("CUDA-graph capture needs a CUDA device")
    betas = from_array(betas)
    b = np.asarray(betas, dtype=np.float64)
    k_total = len(b) - 1
    state = _ais.init(path, n_chains, generator)
    pairs = _pairs(b, int(sweeps_per_beta), final_move)
    t_total = pairs.shape[0]
    n_sweeps = _ais.transitions_per_chain(k_total, sweeps_per_beta, final_move)
    log_w = state.log_w
    if t_total:
        chunk = min(int(graph_sweeps), t_total)
        keys_all = torch.randint(0, 2**62, (2 * t_total,), generator=generator, device=dev, dtype=torch.int64)
        betas_all = torch.as_tensor(pairs.reshape(-1), device=dev)
        sw = _Sweeps(path, state.x, log_w, chunk)
        graph = _capture(sw, chunk) if capture and t_total >= chunk else None
        for c0 in range(0, t_total, chunk):
            cnt = min(chunk, t_total - c0)
            if chunk_times is not None:
                synchronize(dev)
                t0 = time.perf_counter()
            sw.keys[: 2 * cnt].copy_(keys_all[2 * c0 : 2 * (c0 + cnt)])
            sw.betas[: 2 * cnt].copy_(betas_all[2 * c0 : 2 * (c0 + cnt)])
            if graph is not None and cnt == chunk:
                graph.replay()
            else:
                for i in range(cnt):
                    sw.sweep(i)
            if chunk_times is not None:
                synchronize(dev)
                chunk_times.append((time.perf_counter() - t0, cnt, graph is not None and cnt == chunk))
        state = _ais.AISState(RBMState(sw.v, sw.pre_h), sw.log_w)
        log_w = sw.log_w
        del graph
    if not final_move and k_total >= 1:
        log_w = log_w + path.log_f_ratio(state.x, float(b[-2]), float(b[-1]))
    state = _ais.AISState(state.x, log_w)
    check_finite(state.log_w, "AIS log-weights")
    return state, n_sweeps


def ais_graph(
    path: RBMAnnealingPath,
    betas,
    n_chains: int,
    generator: torch.Generator,
    *,
    graph_sweeps: int = DEFAULT_GRAPH_SWEEPS,
    log_f_data: torch.Tensor | None = None,
    log_f_stderr: torch.Tensor | None = None,
    n_bootstrap: int = 1000,
    settings: dict | None = None,
    sweeps_per_beta: int = 1,
    capture: bool | None = None,
) -> EstimateResult:
    """:func:`logzbench.estimators.ais.ais` with :func:`run_graph`: an AIS estimate of ``log Z`` as a
    result record, ``settings["cuda_graph"]`` the sweeps per graph (0 when not captured)."""
    betas = from_array(betas)
    device = generator.device
    if capture is None:
        capture = device.type == "cuda"
    with timer(device) as t:
        state, n_sweeps = run_graph(
            path,
            betas,
            n_chains,
            generator,
            graph_sweeps=graph_sweeps,
            sweeps_per_beta=sweeps_per_beta,
            capture=capture,
        )
    return _ais.result(
        state.log_w,
        generator,
        K=len(betas) - 1,
        n_sweeps=n_sweeps,
        seconds=t[0],
        n_bootstrap=n_bootstrap,
        settings={"cuda_graph": int(graph_sweeps) if capture else 0, **(settings or {})},
        log_f_data=log_f_data,
        log_f_stderr=log_f_stderr,
    )
