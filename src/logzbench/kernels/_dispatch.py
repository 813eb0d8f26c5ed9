"""The public sampling functions: which implementation serves a tensor, and the calls into it.

* CPU, float32 / float64: the compiled kernel (:mod:`._native`; straight through :mod:`ctypes` on
  the tensors' memory, threaded by the kernel at torch's intra-op thread count), else its NumPy
  twin (:mod:`._numpy`), under a 64-bit Philox key drawn from the run's generator per call;
* CUDA: the Triton kernels (:mod:`._triton`), under a key the device generator draws on the device
  (no host synchronisation), unless Triton is missing or ``LOGZBENCH_NO_TRITON=1``;
* elsewhere, and for other dtypes: torch operations (:mod:`._torch`); half precision is decided in
  float32.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from ._constants import _NUMPY_DTYPES, _device_table, _table, _table_address
from ._native import _kernel
from ._numpy import _bernoulli_np, _softplus_diff_np
from ._torch import _bernoulli_torch, _softplus_diff_float64, _softplus_diff_series

#: Environment variable: ``1`` keeps CUDA draws on torch operations instead of the Triton kernels.
ENV_NO_TRITON = "LOGZBENCH_NO_TRITON"


def _key(generator: torch.Generator) -> tuple[int, int]:
    """A fresh 64-bit Philox key from the run's generator."""
    k = torch.randint(0, 2**32, (2,), generator=generator, dtype=torch.int64, device=generator.device).tolist()
    return int(k[0]), int(k[1])


def _bernoulli_cpu(
    x: np.ndarray,
    scale,
    logits: bool,
    key: tuple[int, int],
    out: np.ndarray,
    lib="auto",
    given: np.ndarray | None = None,
) -> None:
    """Draws for the flat contiguous float32 / float64 array ``x`` into ``out`` (may be ``x``), with
    a chosen implementation (the tests' entry point; :func:`_bernoulli` calls the kernel directly).

    ``lib``: the kernel, ``None`` for the NumPy twin, ``"auto"`` for :func:`._native._kernel`; ``given``:
    random bytes to use instead of Philox's."""
    lib = _kernel() if lib == "auto" else lib
    if lib is None:
        _bernoulli_np(x, scale, logits, key, out, given)
        return
    dt = x.dtype.type
    fn = lib.lz_bernoulli_f32 if dt is np.float32 else lib.lz_bernoulli_f64
    table = _table(dt) if logits else None
    fn(
        x.ctypes.data,
        scale,
        int(logits),
        None if table is None else table.ctypes.data,
        key[0],
        key[1],
        None if given is None else given.ctypes.data,
        out.ctypes.data,
        x.shape[0],
        max(1, torch.get_num_threads()),
    )


def _device_kernels(device: torch.device):
    """:mod:`._triton` when it serves ``device`` (CUDA, Triton importable, not switched off by
    ``LOGZBENCH_NO_TRITON=1``), else None."""
    if device.type != "cuda" or os.environ.get(ENV_NO_TRITON, "").strip() == "1":
        return None
    from . import _triton

    return _triton if _triton.available(device) else None


def _device_key(generator: torch.Generator) -> torch.Tensor:
    """A fresh Philox key from the run's device generator, left on the device (no host sync)."""
    return torch.randint(0, 2**62, (1,), generator=generator, device=generator.device, dtype=torch.int64)


def _bernoulli(
    x: torch.Tensor, scale: float, logits: bool, generator: torch.Generator, out: torch.Tensor | None
) -> torch.Tensor:
    x = x.detach()
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    if x.dtype not in _NUMPY_DTYPES:  # half precision etc.: decide in float32
        return out.copy_(_bernoulli(x.float(), scale, logits, generator, None))
    if x.device.type != "cpu":
        direct = out.is_contiguous() and out.dtype == x.dtype
        target = out if direct else torch.empty_like(x, memory_format=torch.contiguous_format)
        kernels = _device_kernels(x.device)
        if kernels is not None:
            kernels.bernoulli_(
                x.contiguous(), scale, logits, _device_key(generator), _device_table(x.dtype, x.device), target
            )
        else:
            _bernoulli_torch(x, scale, logits, generator, target)
        return out if direct else out.copy_(target)
    key = _key(generator)
    xc = x.contiguous()
    target = out if (out.is_contiguous() and out.dtype == x.dtype) else torch.empty(x.shape, dtype=x.dtype)
    lib = _kernel()
    if lib is not None:  # the hot path: straight to the kernel
        f32 = x.dtype == torch.float32
        table = _table_address(np.float32 if f32 else np.float64) if logits else None
        (lib.lz_bernoulli_f32 if f32 else lib.lz_bernoulli_f64)(
            xc.data_ptr(),
            scale,
            int(logits),
            table,
            key[0],
            key[1],
            None,
            target.data_ptr(),
            xc.numel(),
            max(1, torch.get_num_threads()),
        )
    else:
        _bernoulli_np(xc.view(-1).numpy(), scale, logits, key, target.view(-1).numpy())
    if target is not out:
        out.copy_(target)
    return out


def bernoulli(p: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Bernoulli(``p``) samples with ``P(1) = p`` exactly (see :mod:`logzbench.kernels`).

    Parameters
    ----------
    p : torch.Tensor, any shape
        Probabilities (below 0 never fires, above 1 always; NaN gives NaN).
    generator : torch.Generator
        The run's generator, on ``p``'s device.

    Returns
    -------
    torch.Tensor
        0./1. of ``p``'s shape and dtype (contiguous).
    """
    return _bernoulli(p, 256.0, False, generator, None)


def bernoulli_from_logits(
    z: torch.Tensor, generator: torch.Generator, scale: float = 1.0, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Bernoulli(``sigmoid(scale * z)``) samples, ``scale * z`` rounded to ``z``'s dtype.

    ``P(1) = sigmoid(fl(scale * z))`` to float64 precision; no sigmoid is materialised (the
    annealing kernels pass ``beta`` as ``scale`` and the hidden pre-activations as ``z``).

    Parameters
    ----------
    z : torch.Tensor, any shape
        Logits (float32 or float64; other dtypes are decided in float32).
    generator : torch.Generator
    scale : float
        Multiplies ``z`` (in ``z``'s dtype) before the draw.
    out : torch.Tensor, optional
        Where the 0./1. samples go (may be ``z`` itself); default a new tensor.

    Returns
    -------
    torch.Tensor
        ``out``: 0./1. of ``z``'s shape.
    """
    return _bernoulli(z, float(scale), True, generator, out)


def bernoulli_from_logits_(z: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Bernoulli(``sigmoid(z)``) samples, overwriting ``z`` (saves one allocation per sweep)."""
    return _bernoulli(z, 1.0, True, generator, z)


def softplus_diff_rows(
    x: torch.Tensor, beta_from: float, beta_to: float, v: torch.Tensor | None = None, dv: torch.Tensor | None = None
) -> torch.Tensor | None:
    """``sum_j softplus(beta_to x_ij) - softplus(beta_from x_ij)`` per row, float64, as a small number,
    plus ``(beta_to - beta_from) (v_i . dv)`` when ``v`` and ``dv`` are given.

    Each term is ``-log1p(sigmoid(beta_to x) expm1(-d x))`` with ``d = beta_to - beta_from``,
    which keeps the full relative precision of the (small) increment in float32; the sums are
    accumulated in float64.  On CPU this is one fused pass of the compiled kernel (or its
    bit-identical NumPy twin), with series truncated by the row's largest ``|d x|`` at a quarter
    ulp; on other devices, torch operations.

    Parameters
    ----------
    x : torch.Tensor, shape (n_rows, n_cols)
        Pre-activations (float32; other dtypes are computed by torch in their own precision).
    beta_from, beta_to : float
    v : torch.Tensor, shape (n_rows, n_v), optional
        With ``dv``: the rows of the linear term (an RBM path's visible states).
    dv : torch.Tensor, shape (n_v,), optional
        Its coefficients (``a - a0``).

    Returns
    -------
    torch.Tensor of shape (n_rows,), float64, or None
        ``None`` when some ``|d x| > 1`` (a coarse step) or is NaN: the caller then subtracts
        float64 softplus values instead.  On CUDA (and other non-CPU devices) the terms are float64
        softplus differences, for every step size, and the result is never ``None``.
    """
    d = float(beta_to) - float(beta_from)
    if x.dim() != 2:
        raise ValueError(f"expected a 2-D tensor, got shape {tuple(x.shape)}")
    x = x.detach()
    linear = v is not None and dv is not None
    if linear and (v.dim() != 2 or v.shape[0] != x.shape[0] or dv.shape != (v.shape[1],)):
        raise ValueError(f"v {tuple(v.shape)} and dv {tuple(dv.shape)} do not match x {tuple(x.shape)}")
    if x.device.type != "cpu":  # float64 softplus differences: no coarse-step test, no host sync
        return _softplus_diff_float64(x, beta_from, beta_to, d, v if linear else None, dv if linear else None)
    if x.dtype != torch.float32 or (linear and (v.dtype != torch.float32 or dv.dtype != torch.float32)):
        return _softplus_diff_series(x, beta_to, d, v if linear else None, dv if linear else None)
    xc = x.contiguous()
    rows, cols = xc.shape
    vc = v.detach().contiguous() if linear else None
    dc = dv.detach().contiguous() if linear else None
    lib = _kernel()
    if lib is None:
        res = _softplus_diff_np(
            xc.numpy(), beta_to, -d, None if vc is None else vc.numpy(), None if dc is None else dc.numpy(), d
        )
        return None if res is None else torch.from_numpy(res)
    out = torch.empty(rows, dtype=torch.float64)
    coarse = lib.lz_softplus_diff_f32(
        *_softplus_diff_args(xc, beta_to, d, vc, dc, out), max(1, torch.get_num_threads())
    )
    return None if coarse else out


def _softplus_diff_args(xc: torch.Tensor, beta_to: float, d: float, vc, dc, out: torch.Tensor) -> tuple:
    """The arguments ``lz_softplus_diff_f32`` and ``lz_hidden_step_f32`` begin with: the contiguous float32
    pre-activations ``xc``, ``beta_to`` and ``-d``, the linear term's rows ``vc`` and coefficients ``dc``
    (``None``: none), ``d`` and the float64 output."""
    rows, cols = xc.shape
    linear = vc is not None
    return (
        xc.data_ptr(),
        rows,
        cols,
        beta_to,
        -d,
        vc.data_ptr() if linear else None,
        vc.shape[1] if linear else 0,
        dc.data_ptr() if linear else None,
        d,
        out.data_ptr(),
    )


def reweight_and_draw(
    x: torch.Tensor,
    beta_from: float,
    beta_to: float,
    generator: torch.Generator,
    v: torch.Tensor | None = None,
    dv: torch.Tensor | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """:func:`softplus_diff_rows` and then :func:`bernoulli_from_logits` ``(x, generator, scale=beta_to)``,
    with the same results (and the same draws from ``generator``), in one pass over ``x`` on CPU.

    The hidden half of a sweep of an RBM path's AIS step: the log-weight increment from
    ``beta_from`` to ``beta_to`` and the hidden units drawn at ``beta_to``.

    Parameters
    ----------
    x : torch.Tensor, shape (n_rows, n_cols)
        Hidden pre-activations.
    beta_from, beta_to : float
    generator : torch.Generator
    v, dv : torch.Tensor, shapes (n_rows, n_v) and (n_v,), optional
        The linear term, as in :func:`softplus_diff_rows`.

    Returns
    -------
    (torch.Tensor of shape (n_rows,) or None, torch.Tensor of shape (n_rows, n_cols))
        The increments (``None`` on a coarse step, as :func:`softplus_diff_rows`) and the 0./1. draws.
    """
    linear = v is not None and dv is not None
    kernels = _device_kernels(x.device)
    if (
        kernels is not None
        and x.dim() == 2
        and x.dtype == torch.float32
        and (
            not linear
            or (
                v.dtype == torch.float32
                and dv.dtype == torch.float32
                and v.dim() == 2
                and v.shape[0] == x.shape[0]
                and dv.shape == (v.shape[1],)
            )
        )
    ):
        return kernels.hidden_step(
            x.detach().contiguous(),
            float(beta_from),
            float(beta_to),
            v.detach().contiguous() if linear else None,
            dv.detach().contiguous() if linear else None,
            _device_key(generator),
            _device_table(torch.float32, x.device),
        )
    lib = _kernel() if x.device.type == "cpu" else None
    if (
        lib is None
        or x.dim() != 2
        or x.dtype != torch.float32
        or (
            linear
            and (
                v.dtype != torch.float32
                or dv.dtype != torch.float32
                or v.dim() != 2
                or v.shape[0] != x.shape[0]
                or dv.shape != (v.shape[1],)
            )
        )
    ):
        inc = softplus_diff_rows(x, beta_from, beta_to, v=v, dv=dv)
        return inc, bernoulli_from_logits(x, generator, scale=beta_to)
    d = float(beta_to) - float(beta_from)
    xc = x.detach().contiguous()
    rows, cols = xc.shape
    vc = v.detach().contiguous() if linear else None
    dc = dv.detach().contiguous() if linear else None
    key = _key(generator)
    out = torch.empty(rows, dtype=torch.float64)
    h = torch.empty((rows, cols), dtype=torch.float32)
    if h.numel():
        coarse = lib.lz_hidden_step_f32(
            *_softplus_diff_args(xc, beta_to, d, vc, dc, out),
            _table_address(np.float32),
            key[0],
            key[1],
            h.data_ptr(),
            max(1, torch.get_num_threads()),
        )
    else:
        coarse = 0
        out.zero_()
        if linear:
            out += d * (vc.double() @ dc.double())
    return (None if coarse else out), h
