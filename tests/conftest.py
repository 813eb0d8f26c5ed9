import itertools
from pathlib import Path

import pytest
import torch

from logzbench.models import BinaryRBM

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def all_states(n: int) -> torch.Tensor:
    """Every binary vector of length n, shape (2^n, n), float64."""
    return torch.tensor(list(itertools.product([0.0, 1.0], repeat=n)), dtype=torch.float64)


def random_rbm(nv: int, nh: int, seed: int, scale: float = 1.0, bias_scale: float = 0.5) -> BinaryRBM:
    g = torch.Generator().manual_seed(seed)
    return BinaryRBM.random(nv, nh, scale=scale, bias_scale=bias_scale, generator=g)


def model_samples(rbm: BinaryRBM, n: int, seed: int, sweeps: int = 300) -> torch.Tensor:
    """Approximate model samples by long Gibbs chains (test data for small models)."""
    g = torch.Generator().manual_seed(seed)
    v0 = torch.bernoulli(torch.full((n, rbm.n_visible), 0.5), generator=g)
    return rbm.gibbs(v0, g, n_sweeps=sweeps)


@pytest.fixture
def small_rbm() -> BinaryRBM:
    return random_rbm(12, 8, seed=0)


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"offline data mirror not found at {SHARED_DATA}")
    return SHARED_DATA


def brute_log_z(rbm: BinaryRBM) -> float:
    v = all_states(rbm.n_visible)
    h = all_states(rbm.n_hidden)
    W = rbm.W.double()
    E = (v @ rbm.visible_bias.double())[:, None] + (h @ rbm.hidden_bias.double())[None, :] + v @ W @ h.T
    return float(torch.logsumexp(E.reshape(-1), 0))


