"""Exact Bernoulli draws and the fused element-wise work of the samplers' hot loops.

**Exact Bernoulli.**  :func:`bernoulli` fires with probability exactly ``p`` for every ``p`` of
the input's dtype: ``0`` never fires, ``1`` always does, and ``p = 1e-30`` fires with
probability ``1e-30`` (a float32 uniform compared with ``p`` rounds every ``p`` up to a
multiple of ``2^-24``).  Each unit gets one random byte ``r`` (uniform on ``0..255``) and
``c = floor(256 p)``: it fires when ``r < c`` and stays off when ``r > c``.  Only on a tie
``r = c`` (probability ``1/256``) is the fraction ``f = 256 p - c`` resolved, by comparing a
uniform real ``U`` with ``f`` 52 bits at a time: with ``k`` uniform on ``0 .. 2^52 - 1`` it
fires when ``k < floor(2^52 f)``, stays off when ``k > floor(2^52 f)``, and on equality
repeats with ``f <- frac(2^52 f)`` (off once ``f = 0``).  So ``P(1) = c/256 + f/256 = p``
exactly: ``256 p`` and every refinement step are exact in floating point.

From logits (:func:`bernoulli_from_logits`), ``c = floor(256 sigmoid(z))`` is found without
rounding by comparing ``z`` with ``T_k``, the smallest float of ``z``'s dtype with
``sigmoid(T_k) >= k/256`` (computed once per process, checked against 60-digit logits:
:mod:`._constants`), and the tie fraction is ``256 sigmoid(z) - c`` in float64, so
``P(1) = sigmoid(z)`` to float64 precision for every ``z``; no sigmoid is stored.  NaN inputs
give NaN samples.  (The compiled kernel first screens each unit with a float32 sigmoid and
consults the table only when ``256 sigmoid(z)`` is within ``1/64`` of ``r`` or ``r + 1``; the
screen's error is below ``0.006``, so the decisions are the table's.)

**Random bits.**  Philox4x32-10 (Salmon et al. 2011, "Parallel random numbers: as easy as
1, 2, 3"), a counter-based generator: unit ``i`` of a draw takes byte ``i mod 16`` of the words of
counter ``(i // 16, 0)``, and round ``s`` of its tie's refinement the words of counter
``(i, s)``, under a 64-bit key that each draw takes from the run's :class:`torch.Generator`.  So
the same seed gives the same samples at every thread count and in every blocking of the work.

**Compiled kernel.**  On CPU, a draw is one pass of a small C kernel (``bernoulli.c``: Philox
bytes, decisions and ties; AVX2 where the CPU has it), and so is the hidden half of an RBM path's
AIS step (:func:`reweight_and_draw`: the log-weight increment of :func:`softplus_diff_rows` and
the hidden draws from the same pre-activations), threaded with OpenMP.  The kernel is compiled
when the package is installed (``setup.py``; flags and CPU checks in :mod:`._build`) and loaded
with :mod:`ctypes` after a self-check against its NumPy twin (:mod:`._native`).  Without a
compiler at installation the installation still succeeds, and, as when the library was built for
another CPU or ``LOGZBENCH_NO_COMPILE=1`` is set, a NumPy implementation of the same arithmetic
(:mod:`._numpy`; every float operation is one IEEE operation in both) gives bit-for-bit the same
samples and increments, only slower.  :func:`kernel_status` says which is in use.

**CUDA** uses the same decision rule in one Triton kernel per draw (:mod:`._triton`: Philox
bytes under a key the run's device generator draws on the device, ties refined inside the
kernel), and one kernel for the hidden half of an AIS step: no host synchronisation, so the GPU
is never left waiting for Python.  The log-weight increment there is a float64 softplus
difference per unit.  Without Triton (or with ``LOGZBENCH_NO_TRITON=1``), and on other devices,
torch operations implement the same rule (:mod:`._torch`).  :mod:`._dispatch` picks the
implementation for each call.

:func:`uniform` (``U[0, 1)`` draws for other samplers) fills large draws in ``N_STREAMS`` fixed
blocks, each from its own NumPy ``PCG64`` generator seeded once from the run's generator, in
parallel threads; the layout does not depend on the number of threads (:mod:`._uniform`).
"""

from ._categorical import categorical_from_logits
from ._constants import CHUNK
from ._dispatch import (
    ENV_NO_TRITON,
    bernoulli,
    bernoulli_from_logits,
    bernoulli_from_logits_,
    reweight_and_draw,
    softplus_diff_rows,
)
from ._native import ENV_NO_COMPILE, kernel_status
from ._uniform import N_STREAMS, uniform

__all__ = [
    "CHUNK",
    "ENV_NO_COMPILE",
    "ENV_NO_TRITON",
    "N_STREAMS",
    "bernoulli",
    "bernoulli_from_logits",
    "bernoulli_from_logits_",
    "categorical_from_logits",
    "kernel_status",
    "reweight_and_draw",
    "softplus_diff_rows",
    "uniform",
]
