"""The bootstrap of a weight summary draws its resamples in chunks of bounded memory, with the very draws of
one unchunked draw, and the estimators' memory estimate counts the chunk."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import random_rbm

from logzbench.estimators import result
from logzbench.estimators.context import EstimateContext, chain_bytes, estimated_bytes
from logzbench.options import EstimateOptions
from logzbench.registry import estimator, family


def _unchunked(log_w: torch.Tensor, n_bootstrap: int, seed: int) -> tuple[float, float]:
    """The bootstrap interval drawn at once: an ``(n_bootstrap, M)`` index tensor."""
    m = log_w.numel()
    idx = torch.randint(0, m, (n_bootstrap, m), generator=torch.Generator().manual_seed(seed))
    boot = torch.logsumexp(log_w[idx], dim=1) - math.log(m)
    lo, hi = torch.quantile(boot, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return lo, hi


@pytest.mark.parametrize("m, n_bootstrap, rows", [(500, 300, 7), (2000, 100, 1), (64, 1000, 1000)])
def test_the_chunked_bootstrap_equals_the_unchunked_one(monkeypatch, m, n_bootstrap, rows):
    log_w = 2.0 * torch.randn(m, dtype=torch.float64, generator=torch.Generator().manual_seed(m))
    monkeypatch.setattr(result, "BOOTSTRAP_CHUNK_BYTES", rows * m * 16)
    assert result.bootstrap_chunk(m, n_bootstrap) == min(rows, n_bootstrap)
    s = result.summarize_log_weights(log_w, n_bootstrap=n_bootstrap, seed=5)
    assert (s.ci_low, s.ci_high) == _unchunked(log_w, n_bootstrap, 5)  # the same draws: equal, not close


def test_the_bootstrap_chunk_is_bounded_and_counted_in_peak_bytes():
    # a million chains: one resample at a time (16 MB), not the 16 GB of all 1000 at once
    assert result.bootstrap_chunk(10**6, 1000) == max(1, result.BOOTSTRAP_CHUNK_BYTES // (16 * 10**6))
    assert result.bootstrap_bytes(10**6, 1000) <= max(result.BOOTSTRAP_CHUNK_BYTES, 16 * 10**6) + 8 * 1000
    assert result.bootstrap_bytes(10**6, 0) == result.bootstrap_bytes(1, 1000) == 0
    rbm = random_rbm(6, 3, seed=0)

    def ctx(name, **kw):
        return EstimateContext(
            spec=estimator(name),
            family=family("rbm"),
            model=rbm,
            data=None,
            train_data=None,
            options=EstimateOptions(**kw),
            generator=torch.Generator(),
            device=torch.device("cpu"),
        )

    c = ctx("ais", chains=10**6, n_bootstrap=1000, K=10)
    need, what = estimated_bytes(c)
    assert need == chain_bytes(c)[0] + result.bootstrap_bytes(10**6, 1000) and what == "chains = 1000000"
    c = ctx("ais", chains=10**6, n_bootstrap=0, K=10)
    assert estimated_bytes(c)[0] == chain_bytes(c)[0]
