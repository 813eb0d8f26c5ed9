"""Exact ``log Z`` of a binary RBM by enumerating its smaller layer.

Summing the larger layer out analytically, ``Z = sum_h exp(b.h) prod_i (1 + exp(a_i + (W h)_i))``
(or the same with the layers swapped), so a model with ``min(n_visible, n_hidden) = n``
needs ``2^n`` terms of ``m = max(n_visible, n_hidden)`` softplus values each.

How :func:`exact_log_z` enumerates
----------------------------------
Write the enumerated state as ``s = (low, high)``: its ``k`` low bits and ``n - k`` high bits.
The pre-activations of the other layer split the same way,

    pre(s) = c + s M = L(low) + O(high),    L(low) = low M_low,    O(high) = c + high M_high,

so a table ``L`` of all ``2^k`` low patterns (shape ``(2^k, m)``) is computed once, and a *step*
takes ``H`` consecutive high patterns, computes their ``O`` (shape ``(H, m)``, a tiny product)
and evaluates the ``H 2^k`` states ``L[None] + O[:, None]`` without any large matrix product.
Each step's log-sum-exp is written to a preallocated vector on the device and the vector is
reduced once at the end: there is no host synchronisation per step, so the CUDA path runs
asynchronously.  On the CPU a step is ``H = 1`` and a table of about ``2^20 / m`` states (8 MB
of float64 values: small enough for the cache, large enough to amortise the per-step calls);
on CUDA a step is sized from the device's free memory (``torch.cuda.mem_get_info``).

Kernels (per state, the sum over the ``m`` other units):

* ``"product"`` (float64 only; the default for ``precision="float64"`` when it is safe)::

      sum_j softplus(pre_j) = sum_g log prod_{j in g} (1 + exp(L_j) exp(O_j))

  over groups ``g`` of at most 64 units: ``exp(L)`` is tabulated once and ``exp(O)`` once per
  high pattern, so a state costs one fused multiply-add and one multiply per unit and one log
  per group, instead of an ``exp`` and a ``log1p`` per unit (several times faster on a CPU; the
  documentation's Benchmarks page has the figures).  It is
  used when every ``|L_j|, |O_j| <= 600`` and every group's ``sum_j softplus(max pre_j) <= 600``
  (so nothing overflows or becomes subnormal in float64); otherwise ``"softplus"`` is used.
* ``"softplus"``: ``softplus(L + O)`` evaluated elementwise, in float64
  (``precision="float64"``) or float32 (``precision="mixed"``), summed over units in float64.

Error bound (``return_bound=True``)
-----------------------------------
Let ``t(s) = b.s + sum_j softplus(pre_j(s))`` so that ``log Z = logsumexp_s t(s)``.  For every
other-layer unit ``j`` define, independently of the state,

    A_j  = |c_j| + sum_i |M_ij|              (bounds |L_j| + |O_j| and |pre_j|),
    hi_j = c_j + sum_i max(M_ij, 0)          (the largest pre_j over all states).

With ``u`` the unit roundoff of the working precision (``2^-24`` for float32, ``2^-53`` for
float64), ``gamma_k = k u_64 / (1 - k u_64)``, and ``rho = 4 u`` the relative error of the
library ``exp`` / ``log1p`` (2 ulp; Sleef's ``u10`` functions used by PyTorch's CPU kernels
and CUDA's ``expf``/``log1pf``/``exp``/``log1p`` are documented at 1-2 ulp, and the float32
claim is checked on a dense grid in ``tests/test_enumeration.py``), each unit's contribution
to ``t(s)`` is computed with an absolute error at most

    E_j = (1 + kappa_sp) (kappa_A A_j + kappa_0) + kappa_sp softplus(hi_j),

where (the pre-activation error passes through softplus unchanged since softplus' = sigmoid <= 1):

* ``precision="mixed"`` (float32 softplus): ``L`` and ``O`` are formed in float64 (error
  ``gamma_{n+1} A_j``), rounded to float32 and added in float32 (``u |L| + u |O| + u |L + O|``),
  so ``kappa_A = 2 u (1 + u) + gamma_{n+1}``; the float32 ``log1p(exp(x))`` has error
  ``rho`` from ``exp`` (``d log1p(e) = de / (1 + e)``) plus ``rho softplus`` from ``log1p``,
  so ``kappa_sp = rho``, ``kappa_0 = rho + exp(-20) + 2^-100`` (PyTorch returns ``x`` for
  ``x > 20``, off by ``log1p(exp(-x)) <= exp(-20)``; the last term covers underflow);
* ``precision="float64"``, ``"softplus"`` kernel (threshold 40): ``kappa_A = gamma_{n+2}``,
  ``kappa_sp = rho_64``, ``kappa_0 = rho_64 + exp(-40) + 2^-1000``;
* ``precision="float64"``, ``"product"`` kernel: ``exp(L) exp(O)`` has relative error
  ``exp(gamma_{n+1} A_j) (1 + rho_64)^2 (1 + u_64) - 1``, and ``1 + a``, the product of a group
  and the group's log add ``u_64``, ``u_64`` per unit and ``rho_64 log(prod)``, so
  ``kappa_A = 1.01 gamma_{n+1}``, ``kappa_0 = 1.01 (2 rho_64 + 3 u_64) + 2^-1000``,
  ``kappa_sp = rho_64``.

The per-state error is then ``|t_hat(s) - t(s)| <= sum_j E_j + gamma_{m+2} T + gamma_n sum_i |b_i|``
(the float64 sum over units and the bias terms) with ``T = sum_i |b_i| + sum_j (softplus(hi_j) + E_j)
>= max_s |t(s)|``.  A log-sum-exp of perturbed terms moves by at most the largest perturbation
(``min_s d(s) <= LSE(t + d) - LSE(t) <= max_s d(s)``), so this bounds the error before the
reduction; each of the two float64 log-sum-exp stages (``N`` terms: the states of a step,
then the steps) adds at most ``1.01 (3 T' u_64 + rho_64 + gamma_N + (rho_64 + u_64) ln N)``
with ``T' = T + n ln 2``.  The returned bound is the sum, times ``1 + 1e-6``::

    |log Z_hat - log Z| <= sum_j E_j + gamma_{m+2} T + gamma_n sum_i |b_i| + stage(N_1) + stage(N_2).

It is a worst case over all states and all rounding; the observed error is typically 100-1000
times smaller.  For a 784 x 20 RBM with N(0, s^2) weights the mixed bound is about ``5e-4``
nats at ``s = 0.05``, ``6e-4`` at ``s = 0.1`` and ``3e-3`` at ``s = 1``; the float64 bounds are
about ``1e-10``.  :func:`exact_log_z_bound` returns the bound without enumerating.

The DBM and the DBN enumerate with the same pieces (:func:`state_bits`; :func:`exact_log_z` of
the DBM's even/odd view and of the DBN's top RBM); the ``exact`` estimator
(:mod:`logzbench.estimators.exact`) and training's exact monitoring (float64) call
:func:`exact_log_z`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

__all__ = [
    "MAX_ENUMERATION_BITS",
    "PRECISIONS",
    "KERNELS",
    "ExactLogZ",
    "exact_log_z",
    "exact_log_z_bound",
    "state_bits",
]

#: Refuse to enumerate more than 2^MAX_ENUMERATION_BITS states (it would take hours).
MAX_ENUMERATION_BITS = 32

#: ``precision`` values of :func:`exact_log_z`.
PRECISIONS = ("float64", "mixed")

#: ``kernel`` values of :func:`exact_log_z`.
KERNELS = ("auto", "product", "softplus")

_U32 = 2.0**-24
_U64 = 2.0**-53
#: Assumed relative accuracy of the library exp / log1p: 2 ulp = 4 u.
_ULPS = 2
#: Largest |exponent| and largest log of a group's product admitted by the float64 product kernel.
_EXP_ARG_MAX = 600.0
#: Largest group of units multiplied together by the product kernel.
_GROUP_MAX = 64
#: Softplus thresholds (PyTorch returns x above them) of the float32 / float64 kernels.
_THRESHOLD = {torch.float32: 20.0, torch.float64: 40.0}
#: Values (states x units) per step on the CPU (8 MB float64 steps: cache-sized, the fastest step size
#: in the documentation's benchmarks).
_CPU_STEP_VALUES = 1 << 20
#: Most values in the table of low patterns (``2^k x m``).
_TABLE_MAX_VALUES = 1 << 24
#: Share of the free CUDA memory a step may use, and the most states per CUDA step.
_CUDA_MEMORY_SHARE = 0.25
_CUDA_MAX_STEP_STATES = 1 << 24
#: High patterns whose ``O`` is formed together (amortises the small per-pattern operations).
_BLOCK_ROWS = 256


class ExactLogZ(NamedTuple):
    """``log Z`` with an a-priori bound on its floating-point error (``return_bound=True``).

    Attributes
    ----------
    log_z : float
    bound : float
        ``|log_z - log Z| <= bound`` (nats), see the module docstring.
    """

    log_z: float
    bound: float


class Float64Exact:
    """``exact_log_z`` (the ``exact`` estimator's keywords) of a model that computes it in float64 only.

    The model gives ``_EXACT_WHAT`` (its method, in the refusal of another precision; or its own
    ``_check_precision``), ``_exact_plan(chunk_size)`` (refuses a model too large for it or a chunk size it
    cannot use; returns what the sum and the bound need), ``_exact_sum(plan, progress)`` (``log Z``, run on
    the model copied to the device) and ``_exact_bound(plan)``.  Every refusal comes before any work.
    """

    def exact_log_z(
        self,
        chunk_size: int | None = None,
        precision: str = "float64",
        progress: bool = False,
        *,
        return_bound: bool = False,
        device=None,
    ) -> float | ExactLogZ:
        """``log Z`` in float64 (the model's ``_exact_sum`` says how).

        Parameters
        ----------
        chunk_size : int, optional
            States per step (default: the model's; a grid MRF's transfer matrix does not use it).
        precision : {"float64"}
            Only float64 (``"mixed"`` is refused).
        progress : bool
            Progress bar, one tick per step.
        return_bound : bool
            Return :class:`ExactLogZ` ``(log_z, bound)``: an a-priori bound on the float64 rounding error
            (nats).
        device : optional
            Where to compute (default the model's device).

        Raises
        ------
        ValueError
            Another precision, a model too large for the method, or a ``chunk_size`` that is not a positive
            integer.
        """
        self._check_precision(precision)
        plan = self._exact_plan(chunk_size)
        model = self if device is None or torch.device(device) == self.device else self.to(device)
        log_z = model._exact_sum(plan, progress)
        return ExactLogZ(log_z, self._exact_bound(plan)) if return_bound else log_z

    def _check_precision(self, precision: str) -> None:
        if precision != "float64":
            raise ValueError(f"{self._EXACT_WHAT} is float64 only, not precision={precision!r}")


def state_bits(start: int, stop: int, n: int, device, dtype) -> torch.Tensor:
    """Binary states ``start, ..., stop - 1`` of ``n`` units, one per row (bit ``i`` of the index is unit ``i``).

    Parameters
    ----------
    start, stop : int
        Range of state indices, ``0 <= start <= stop <= 2^n``.
    n : int
        Number of units.
    device : torch.device
    dtype : torch.dtype

    Returns
    -------
    torch.Tensor, shape (stop - start, n)
    """
    idx = torch.arange(start, stop, device=device, dtype=torch.int64)
    shifts = torch.arange(n, device=device, dtype=torch.int64)
    return ((idx.unsqueeze(1) >> shifts) & 1).to(dtype)


def _gamma(k: int, u: float = _U64) -> float:
    return k * u / (1.0 - k * u)


def _layers(rbm, device):
    """``(n, M, own_bias, other_bias)`` in float64 on ``device``: ``M`` has shape (n, m), n <= m."""
    W = rbm.W.to(device=device, dtype=torch.float64)
    a = rbm.visible_bias.to(device=device, dtype=torch.float64)
    b = rbm.hidden_bias.to(device=device, dtype=torch.float64)
    if rbm.n_hidden <= rbm.n_visible:
        return rbm.n_hidden, W.T.contiguous(), b, a
    return rbm.n_visible, W.contiguous(), a, b


def _step_shape(n: int, m: int, itemsize: int, device: torch.device, chunk_size: int | None) -> tuple[int, int]:
    """``(k, H)``: a table of ``2^k`` low patterns and ``H`` high patterns per step."""
    if chunk_size is not None:
        states = chunk_size
    elif device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        per_state = m * (itemsize + 16) + 64  # the step's buffer, a float64 copy in the reduction, the sums
        states = min(_CUDA_MAX_STEP_STATES, int(_CUDA_MEMORY_SHARE * free) // per_state)
    else:
        states = _CPU_STEP_VALUES // max(m, 1)
    log_states = min(n, max(0, int(states).bit_length() - 1))  # power of two <= states, <= 2^n
    table_bits = max(0, (_TABLE_MAX_VALUES // max(m, 1)).bit_length() - 1)
    k = min(log_states, table_bits)
    return k, 1 << (log_states - k)


def _hi_and_abs(M: torch.Tensor, other_bias: torch.Tensor):
    """Per other-layer unit: ``hi_j`` (largest pre-activation) and ``A_j = |c_j| + sum_i |M_ij|``."""
    hi = other_bias + M.clamp_min(0).sum(0)
    A = other_bias.abs() + M.abs().sum(0)
    return hi, A


def _product_group(M: torch.Tensor, other_bias: torch.Tensor, k: int, hi: torch.Tensor) -> int | None:
    """Group size of the float64 product kernel, or ``None`` when it could overflow."""
    m = M.shape[1]
    low = M[:k].abs().sum(0)
    high = other_bias.abs() + M[k:].abs().sum(0)
    if m == 0 or float(torch.maximum(low, high).max()) > _EXP_ARG_MAX:
        return None
    sp = F.softplus(hi, threshold=40.0)
    g = _GROUP_MAX
    while g >= 1:
        q = -(-m // g)
        G = -(-m // q)
        if float(F.pad(sp, (0, q * G - m)).view(q, G).sum(1).max()) <= _EXP_ARG_MAX:
            return G
        g //= 2
    return None


def _softplus_(x: torch.Tensor, threshold: float) -> torch.Tensor:
    """``softplus`` in place (PyTorch's kernel, ``beta = 1``)."""
    try:
        return torch._C._nn.softplus(x, 1.0, threshold, out=x)
    except (AttributeError, TypeError, RuntimeError):  # pragma: no cover - other PyTorch versions
        return x.copy_(F.softplus(x, threshold=threshold))


def _error_bound(M, own_bias, other_bias, precision: str, kernel: str, n_states_step: int, n_steps: int) -> float:
    """The a-priori bound of the module docstring (computed in float64 on the CPU)."""
    M, own_bias, other_bias = M.cpu(), own_bias.cpu(), other_bias.cpu()
    n, m = M.shape
    hi, A = _hi_and_abs(M, other_bias)
    sp_hi = F.softplus(hi, threshold=40.0)
    rho64 = 2 * _ULPS * _U64
    if precision == "mixed":
        rho = 2 * _ULPS * _U32
        k_A, k_sp = 2 * _U32 * (1 + _U32) + _gamma(n + 1), rho
        k_0 = rho + math.exp(-_THRESHOLD[torch.float32]) + 2.0**-100
    elif kernel == "softplus":
        k_A, k_sp = _gamma(n + 2), rho64
        k_0 = rho64 + math.exp(-_THRESHOLD[torch.float64]) + 2.0**-1000
    else:
        k_A, k_sp = 1.01 * _gamma(n + 1), rho64
        k_0 = 1.01 * (2 * rho64 + 3 * _U64) + 2.0**-1000
    E = (1 + k_sp) * (k_A * A + k_0) + k_sp * sp_hi
    B = float(own_bias.abs().sum())
    T = B + float((sp_hi + E).sum())
    T1 = T + n * math.log(2.0)

    def stage(N: int) -> float:
        lnN = math.log(max(N, 1))
        return 1.01 * (3 * T1 * _U64 + rho64 + _gamma(N) + (rho64 + _U64) * lnN)

    total = float(E.sum()) + _gamma(m + 2) * T + _gamma(max(n, 1)) * B + stage(n_states_step) + stage(n_steps)
    return total * (1 + 1e-6)


class _Plan(NamedTuple):
    """What one enumeration does: layers (float64, on ``device``), table bits ``k``, high patterns
    per step ``H``, product-kernel group ``G`` (``None``: softplus kernel) and working dtype."""

    n: int
    M: torch.Tensor
    own_bias: torch.Tensor
    other_bias: torch.Tensor
    k: int
    H: int
    G: int | None
    work: torch.dtype
    device: torch.device

    @property
    def n_steps(self) -> int:
        return 1 << (self.n - self.k) >> (self.H.bit_length() - 1)

    def bound(self, precision: str) -> float:
        kernel = "softplus" if self.G is None else "product"
        return _error_bound(self.M, self.own_bias, self.other_bias, precision, kernel, self.H << self.k, self.n_steps)


def _plan(rbm, chunk_size, precision: str, kernel: str, device) -> _Plan:
    """Validate the arguments of :func:`exact_log_z` and lay the enumeration out."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}")
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; expected one of {', '.join(KERNELS)}")
    if kernel == "product" and precision != "float64":
        raise ValueError("the product kernel is float64 only; use kernel='softplus' (or 'auto') with precision='mixed'")
    if chunk_size is not None and (isinstance(chunk_size, bool) or int(chunk_size) != chunk_size or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive integer (or None for automatic), got {chunk_size!r}")
    dev = torch.device(device) if device is not None else rbm.device
    n = min(rbm.n_visible, rbm.n_hidden)
    if n > MAX_ENUMERATION_BITS:
        raise ValueError(
            f"exact enumeration needs 2^{n} states (smaller layer has {n} units); "
            f"refusing above 2^{MAX_ENUMERATION_BITS}. Use an estimator (ais, raise, csl) instead."
        )
    n, M, own_bias, other_bias = _layers(rbm, dev)
    work = torch.float32 if precision == "mixed" else torch.float64
    k, H = _step_shape(n, M.shape[1], torch.empty((), dtype=work).element_size(), dev, chunk_size)
    G = None
    if precision == "float64" and kernel != "softplus":
        G = _product_group(M, other_bias, k, _hi_and_abs(M, other_bias)[0])
        if kernel == "product" and G is None:
            raise ValueError(
                "the product kernel could overflow for this model (|pre-activations| above "
                f"{_EXP_ARG_MAX:g}); use kernel='auto' or 'softplus'"
            )
    return _Plan(n, M, own_bias, other_bias, k, H, G, work, dev)


def exact_log_z_bound(
    rbm, precision: str = "mixed", *, chunk_size: int | None = None, device=None, kernel: str = "auto"
) -> float:
    """The a-priori error bound of :func:`exact_log_z` with these arguments, without enumerating.

    Costs ``O(n m)``: use it to decide whether ``precision="mixed"`` is accurate enough before a
    long enumeration.  Same parameters as :func:`exact_log_z`; returns the ``bound`` that
    ``exact_log_z(..., return_bound=True)`` would return (nats).
    """
    return _plan(rbm, chunk_size, precision, kernel, device).bound(precision)


def exact_log_z(
    rbm,
    chunk_size: int | None = None,
    precision: str = "float64",
    progress: bool = False,
    *,
    return_bound: bool = False,
    device=None,
    kernel: str = "auto",
) -> float | ExactLogZ:
    """``log Z`` of ``rbm`` by enumeration of the smaller layer (see the module docstring).

    Parameters
    ----------
    rbm : BinaryRBM
        ``n_visible x n_hidden``; ``2^n`` states are enumerated, ``n = min(n_visible, n_hidden)``
        (at most ``2^MAX_ENUMERATION_BITS``).
    chunk_size : int, optional
        States per step (rounded down to a power of two; memory ~ ``chunk_size * m`` values,
        ``m = max(n_visible, n_hidden)``).  Default: about ``2^20 / m`` on the CPU,
        sized from the free device memory on CUDA.
    precision : {"float64", "mixed"}
        ``"float64"``: every operation in float64.  ``"mixed"``: the pre-activations (shape
        ``(states, m)``) and their softplus in float32, the sum over the ``m`` units of each
        state and the log-sum-exp over states in float64 (see the module docstring for the
        error bound; about 1e-3 nats on MNIST-sized models).
    progress : bool
        Show a progress bar (one tick per step).
    return_bound : bool
        Return :class:`ExactLogZ` ``(log_z, bound)`` with the a-priori error bound instead of
        a float (:func:`exact_log_z_bound` gives the bound alone, without enumerating).
    device : str or torch.device, optional
        Where to enumerate (default: the model's device).
    kernel : {"auto", "product", "softplus"}
        How a state's sum over units is evaluated (module docstring).  ``"auto"``: the float64
        product kernel when its ranges are safe, else softplus; ``"product"`` is float64 only.

    Returns
    -------
    float or ExactLogZ

    Raises
    ------
    ValueError
        Unknown ``precision`` or ``kernel``, ``kernel="product"`` with ``precision="mixed"`` or
        where it could overflow, ``chunk_size < 1``, or more than ``2^MAX_ENUMERATION_BITS`` states.
    """
    plan = _plan(rbm, chunk_size, precision, kernel, device)
    n, M, own_bias, other_bias, k, H, G, work, dev = plan
    m = M.shape[1]
    f64 = torch.float64
    use_product = G is not None

    low = state_bits(0, 1 << k, k, dev, f64)  # (2^k, k)
    table = low @ M[:k]  # (2^k, m): L(low)
    b_low = low @ own_bias[:k]  # (2^k,)
    del low
    n_high, M_high, b_high_w = n - k, M[k:], own_bias[k:]
    total_high = 1 << n_high
    n_steps = plan.n_steps  # H divides total_high: both are powers of two, H <= total_high
    rows = 1 << k
    if use_product:
        q = -(-m // G)
        pad = q * G - m
        table = F.pad(table.exp_(), (0, pad), value=1.0)  # (2^k, q G): exp(L), padding units give 1 + 1 * 0
        buf = torch.empty(H, rows, q * G, dtype=f64, device=dev)
        gbuf = torch.empty(H, rows, q, dtype=f64, device=dev)
        one = torch.ones((), dtype=f64, device=dev)
    else:
        table = table.to(work)
        buf = torch.empty(H, rows, m, dtype=work, device=dev)
        threshold = _THRESHOLD[work]
    sums = torch.empty(H, rows, dtype=f64, device=dev)
    parts = torch.empty(n_steps, dtype=f64, device=dev)

    block = H * max(1, _BLOCK_ROWS // H)  # high patterns whose O is formed at once
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_steps, desc="exact log Z", unit="step")
    i = 0
    for b0 in range(0, total_high, block):
        nb = min(block, total_high - b0)
        high = state_bits(b0, b0 + nb, n_high, dev, f64)  # (nb, n - k)
        O = torch.addmm(other_bias, high, M_high)  # (nb, m): O(high)
        b_high = (high @ b_high_w).unsqueeze(1)  # (nb, 1)
        if use_product:
            O = F.pad(O.exp_(), (0, pad))  # exp(O), 0 on the padding units
        else:
            O = O.to(work)
        for h0 in range(0, nb, H):
            r = min(H, nb - h0)
            s = sums[:r]
            if use_product:
                x = torch.addcmul(one, table, O[h0 : h0 + r].unsqueeze(1), out=buf[:r])  # 1 + exp(L + O)
                g = torch.prod(x.view(r, rows, q, G), dim=-1, out=gbuf[:r])
                torch.sum(g.log_(), dim=-1, out=s)
            else:
                x = torch.add(table, O[h0 : h0 + r].unsqueeze(1), out=buf[:r])  # (r, 2^k, m): L + O
                torch.sum(_softplus_(x, threshold), dim=-1, dtype=f64, out=s)
            s += b_low
            s += b_high[h0 : h0 + r]
            parts[i] = torch.logsumexp(s.reshape(-1), dim=0)
            i += 1
        if bar is not None:
            bar.update(-(-nb // H))
    if bar is not None:
        bar.close()
    log_z = float(torch.logsumexp(parts, dim=0))
    if not return_bound:
        return log_z
    return ExactLogZ(log_z, plan.bound(precision))
