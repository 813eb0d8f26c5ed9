"""Importance sampling of ``log f(v)`` with a factorial Bernoulli proposal (RAISE Sec. 5.2, 5.3).

Shared by the DBM (mean-field proposal over the even hidden layers) and the DBN (recognition
proposal over ``h_1``).  Proposal probabilities are kept in ``[clip, 1 - clip]``: a proposal
that is (numerically) certain about a unit never proposes the other value, and when the
posterior does put mass there the estimate is biased low with a standard error that cannot
show it (every sample identical).  Clipping keeps the estimator unbiased for ``f(v)``.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F

from ..kernels import bernoulli
from ..stats import ess_from_log_weights, log_mean_stderr, pareto_khat

#: Default bound on the proposal probabilities, ``[PROPOSAL_CLIP, 1 - PROPOSAL_CLIP]``.
PROPOSAL_CLIP = 0.01


class LogFEstimate(NamedTuple):
    """Per-example importance-sampling estimate of ``log f(v)``; each field float64, shape ``(n,)``."""

    log_f: torch.Tensor  #: ``log mean_s w_s``: unbiased for ``f(v)`` on the linear scale
    stderr: torch.Tensor  #: delta-method standard error of ``log_f``
    ess: torch.Tensor  #: effective sample size of the importance weights
    #: Pareto k-hat of each example's weights (:func:`logzbench.stats.pareto_khat`; NaN with fewer
    #: than 25 samples or where f(v) is exact)
    khat: torch.Tensor


def clip_logits(logits: torch.Tensor, clip: float) -> torch.Tensor:
    """Logits limited so that the probabilities stay in ``[clip, 1 - clip]``."""
    if not 0.0 <= clip < 0.5:
        raise ValueError(f"proposal clip must be in [0, 0.5), got {clip}")
    if clip == 0.0:
        return logits
    lim = math.log((1.0 - clip) / clip)
    return logits.clamp(-lim, lim)


def sample_factorial(logits: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``h ~ prod_j Bernoulli(sigmoid(logits_j))`` (float32) and ``log q(h)`` (float64)."""
    h = bernoulli(torch.sigmoid(logits.float()), generator)
    z = logits.double()
    return h, (h.double() * z - F.softplus(z)).sum(1)


def importance_log_f(
    v: torch.Tensor,
    logits: torch.Tensor,
    n_samples: int,
    generator: torch.Generator,
    log_target: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    chunk: int = 1 << 14,
) -> LogFEstimate:
    """``log f̂(v) = log mean_s f(v, h_s) / q(h_s | v)`` with ``h_s ~ q(. | v)`` factorial.

    Parameters
    ----------
    v : torch.Tensor, shape (n, n_visible)
    logits : torch.Tensor, shape (n, m)
        Proposal logits of each example (already clipped).
    n_samples : int
        Proposals per example ``S``.
    log_target : callable
        ``(v_rows, h_rows) -> log f(v, h)`` in float64, for paired rows.
    chunk : int
        Rows ``n_examples_in_block * S`` evaluated at once.
    """
    S = int(n_samples)
    if S < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    per = max(1, chunk // S)
    parts = []
    for i in range(0, v.shape[0], per):
        vi = v[i : i + per].repeat_interleave(S, 0)
        h, log_q = sample_factorial(logits[i : i + per].repeat_interleave(S, 0), generator)
        log_w = (log_target(vi, h) - log_q).reshape(-1, S)
        parts.append(
            (
                *log_mean_stderr(log_w, dim=1),
                ess_from_log_weights(log_w, dim=1),
                torch.as_tensor(pareto_khat(log_w, dim=1), dtype=torch.float64, device=log_w.device).reshape(-1),
            )
        )
    return LogFEstimate(*(torch.cat(p) for p in zip(*parts)))
