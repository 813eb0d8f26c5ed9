"""A strongly coupled binary RBM with a few well-separated modes and an exact log Z (tests only).

40 visible and 14 hidden units in three groups (9, 3, 2) tied to three random visible prototypes
by weights of size ``a``; the hidden biases are tuned (by enumerating the 2^14 hidden states) so that
each group's mode holds a third of the mass.  The big group's mode gains its mass late in the
annealing, so base-rate AIS often freezes with no chain in it: such runs are about 0.4 nats low with
a small standard error and a high ESS (no per-run flag fires).  Exact samples come from the
enumerated hidden marginal.
"""

from __future__ import annotations

import numpy as np
import torch

from logzbench.models.rbm import BinaryRBM

SIZES = (9, 3, 2)


def _hidden_states(nh: int) -> np.ndarray:
    return ((np.arange(2**nh)[:, None] >> np.arange(nh)) & 1).astype(np.float64)


def build(
    a: float = 3.0, sizes=SIZES, masses=(1 / 3, 1 / 3, 1 / 3), n_visible: int = 40, margin: float = 4.0, seed: int = 0
) -> tuple[BinaryRBM, np.ndarray]:
    """``(rbm, mode masses)``: the model and the exact mass of each group's mode."""
    rng = np.random.default_rng(seed)
    proto = rng.integers(0, 2, size=(len(sizes), n_visible))
    gid = np.repeat(np.arange(len(sizes)), sizes)
    W = a * (2 * proto[gid].T - 1).astype(np.float64)
    c = (-a * proto[gid].sum(1) + a * margin).astype(np.float64)
    b = np.zeros(n_visible)
    H = _hidden_states(len(gid))
    onehot = np.eye(len(sizes))[gid]
    size = np.asarray(sizes, dtype=np.float64)
    for _ in range(60):
        rbm = BinaryRBM(
            torch.tensor(W, dtype=torch.float32),
            torch.tensor(b, dtype=torch.float32),
            torch.tensor(c, dtype=torch.float32),
        )
        m = mode_masses(rbm, sizes, H, onehot)
        c = c + 0.8 * ((np.log(masses) - np.log(m + 1e-300)) / size)[gid]
    return rbm, mode_masses(rbm, sizes, H, onehot)


def mode_masses(rbm: BinaryRBM, sizes=SIZES, H=None, onehot=None) -> np.ndarray:
    nh = rbm.n_hidden
    H = _hidden_states(nh) if H is None else H
    gid = np.repeat(np.arange(len(sizes)), sizes)
    onehot = np.eye(len(sizes))[gid] if onehot is None else onehot
    p = hidden_marginal(rbm, H)
    frac = H @ onehot / np.asarray(sizes, dtype=np.float64)
    mode = np.where(frac.max(1) > 0.5, frac.argmax(1), -1)
    return np.array([p[mode == k].sum() for k in range(len(sizes))])


def hidden_marginal(rbm: BinaryRBM, H=None) -> np.ndarray:
    H = _hidden_states(rbm.n_hidden) if H is None else H
    lp = rbm.log_unnormalized_hidden_marginal(torch.tensor(H, dtype=torch.float32)).double().numpy()
    p = np.exp(lp - lp.max())
    return p / p.sum()


def exact_samples(rbm: BinaryRBM, n: int, seed: int = 0) -> np.ndarray:
    """``n`` exact samples of the visible units (hidden states drawn from their enumerated marginal)."""
    H = _hidden_states(rbm.n_hidden)
    p = hidden_marginal(rbm, H)
    rng = np.random.default_rng(seed)
    h = H[rng.choice(len(p), size=n, p=p)]
    pv = torch.sigmoid(torch.tensor(h, dtype=torch.float32) @ rbm.W.T + rbm.visible_bias).numpy()
    return (rng.random(pv.shape) < pv).astype(np.float32)
