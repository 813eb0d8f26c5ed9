"""A user's energy on the GPU (issue 39, item 5): every transition of a discrete ``EnergyModel`` runs with all
chains batched on ``--device cuda`` and agrees with exact enumeration (skipped without a GPU).

``LOGZBENCH_ENERGY_TEST_DEVICE=cpu`` runs the same checks on the CPU (a check of the tests themselves on a
machine without a GPU).
"""

import os

import pytest
import torch

from logzbench.api import estimate
from logzbench.models import EnergyModel

DEVICE = os.environ.get("LOGZBENCH_ENERGY_TEST_DEVICE", "cuda")

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(), reason="no CUDA device on this machine"),
]


class Cubic(torch.nn.Module):
    """A 10-site binary energy with fields, pairwise and three-body terms (a module: it moves with the model)."""

    def __init__(self, dim: int = 10, seed: int = 3):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("b", 0.5 * torch.randn(dim, generator=g, dtype=torch.float64))
        self.register_buffer("J", 0.4 * torch.randn(dim, dim, generator=g, dtype=torch.float64).triu(1))
        self.register_buffer("T", 0.3 * torch.randn(dim - 2, generator=g, dtype=torch.float64))

    def forward(self, x):
        x = x.double()
        return x @ self.b + ((x @ self.J) * x).sum(1) + (x[:, :-2] * x[:, 1:-1] * x[:, 2:]) @ self.T


class Ordinal(torch.nn.Module):
    """A 5-site categorical energy (q = 4): a field per site and state, and couplings of equal neighbours,
    written with an ``x``-polynomial one-hot (exact on the integers, differentiable: the gradient moves need
    it)."""

    def __init__(self, dim: int = 5, q: int = 4, seed: int = 4):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("h", 0.6 * torch.randn(dim, q, generator=g, dtype=torch.float64))
        self.register_buffer("c", 0.4 * torch.randn(dim - 1, generator=g, dtype=torch.float64))
        self.q = q

    def one_hot(self, x):
        x = x.double().unsqueeze(-1)
        cols = []
        for a in range(self.q):
            col = torch.ones_like(x)
            for b in range(self.q):
                if b != a:
                    col = col * (x - b) / (a - b)
            cols.append(col)
        return torch.cat(cols, dim=-1)  # (n, dim, q)

    def forward(self, x):
        e = self.one_hot(x)
        field = (e * self.h).sum((1, 2))
        same = (e[:, 1:] * e[:, :-1]).sum(-1)
        return field + same @ self.c


@pytest.mark.parametrize("transition", ["gibbs", "gwg", "dmala", "auto"])
@pytest.mark.parametrize(
    "make",
    [lambda: EnergyModel(Cubic(), 10, "binary"), lambda: EnergyModel(Ordinal(), 5, ("categorical", 4))],
    ids=["binary", "categorical"],
)
def test_transitions_on_the_device_agree_with_exact(make, transition):
    model = make()
    truth = estimate(model, "exact").log_z
    res = estimate(model, "ais", K=300, chains=400, seed=0, transition=transition, device=DEVICE)
    assert res.settings["device"].startswith(DEVICE)
    assert abs(res.log_z - truth) < 4 * res.log_z_stderr + 1e-3
    again = estimate(
        model, "ais", K=300, chains=400, seed=0, transition=res.settings.get("transition", transition), device=DEVICE
    )
    if transition != "auto":  # auto's pick depends on timings; the picked one, given, repeats exactly
        assert again.log_z == res.log_z


@pytest.mark.parametrize("transition", ["gibbs", "gwg", "dmala"])
def test_raise_on_the_device_agrees_with_exact(transition):
    model = EnergyModel(Cubic(), 10, "binary")
    truth = estimate(model, "exact").log_z
    g = torch.Generator().manual_seed(1)
    X = torch.bernoulli(torch.full((12, 10), 0.5), generator=g)
    exact_ll = float((model.log_f(X) - truth).mean())
    r = estimate(model, "raise", data=X, K=300, chains=20, seed=0, transition=transition, device=DEVICE)
    assert abs(r.mean_log_likelihood - exact_ll) < 4 * r.mean_log_likelihood_stderr + 1e-2
