"""VCD: variational contrastive divergence for DBMs (the AVIL paper's Sec. 5.5 baseline).

``P(h_1, h_2 | v)`` of a DBM is intractable, so CD is replaced by its variational form
(Welling & Hinton 2002; Welling & Sutton 2005): the free energy ``F(v)`` is approximated by the
encoder bound of Eq. 8,

    G(v) = E_{Q(h|v)}[E(v, h) + log Q(h | v)] >= F(v),

with the same encoder ``Q(h_1, h_2 | v)`` (``v -> h_1 -> h_2``) as AVIL, trained to minimise it,
and the model follows Eq. 5,

    grad L = E_data[grad G(v)] - E_{P_CD}[grad G(v)],   grad_theta G(v) = E_Q[grad_theta E(v, h)],

where the negative samples come from one step (``cd_k = 1``: VCD-1)
``v_data -> h ~ Q(h | v) -> v ~ P(v | h_1)``.  ``P(v | h)`` is obtained from the energy alone:
for energies affine in each visible unit without visible-visible terms (RBM, DBM),
``P(v_i = 1 | h) = sigmoid(-dE/dv_i)`` (autograd at ``v = 0``).

Each iteration makes ``K2`` encoder updates (relaxed draws, as in AVIL) and one model update.
"""

from __future__ import annotations

import math

import torch

from .hyperparams import REQUIRED, VCDParams, takes
from .variational import (
    AISMonitor,
    Encoder,
    ExactMonitor,
    adam,
    free_energy_bound,
    sample_bernoulli,
    setup,
    step,
)

__all__ = ["train_vcd", "visible_logits"]

HISTORY_KEYS = (
    "iteration",
    "free_energy_bound",
    "negative_free_energy_bound",
    "model_loss",
    "valid_free_energy_bound",
    *ExactMonitor.KEYS,
    *AISMonitor.KEYS,
)


def visible_logits(energy, hs) -> torch.Tensor:
    """Logits of ``P(v | h)``: ``-dE(v, h)/dv`` at ``v = 0``, shape ``(n, n_visible)``.

    Exact for energies affine in each visible unit with no visible-visible couplings (binary
    RBM, DBM), found from ``E`` alone.
    """
    n_visible = energy.params["bias_0"].shape[0] if "bias_0" in energy.params else None
    if n_visible is None:
        raise ValueError("VCD needs binary visible units (a 'rbm' or 'dbm' energy)")
    with torch.enable_grad():
        v0 = torch.zeros(hs[0].shape[0], n_visible, device=hs[0].device, dtype=hs[0].dtype, requires_grad=True)
        (grad,) = torch.autograd.grad(energy(v0, [h.detach() for h in hs]).sum(), v0)
    return -grad.detach()


@takes(VCDParams, ("train", REQUIRED), ("valid", None), tail=(("return_state", False),))
def train_vcd(train, valid, hp: VCDParams, return_state: bool = False):
    """Train a DBM (or RBM) by variational CD (VCD-``cd_k``).

    Parameters
    ----------
    train : array-like, shape (n_train, n_visible)
        Binary training rows.
    valid : array-like, shape (n_valid, n_visible), optional
    family : {"dbm", "rbm"}
    hidden_sizes : sequence of int
        ``(50, 50)`` in the paper's Table 3 (``(200, 200)``, ``(100, 100)`` for NIPS, Web).
    iterations : int
        Model updates.
    K2 : int
        Encoder updates per model update.
    cd_k : int
        Steps ``v -> h ~ Q(h | v) -> v ~ P(v | h_1)`` from the data to the negative samples.
    lr, betas, batch_size, seed, device, log_every, temperature, straight_through, mlp_hidden, \
init_scale, exact_max_units, ais_every, ais_K, ais_chains, \
ais_init, ais_is_samples, select, return_state
        As :func:`~logzbench.training.avil.train_avil`.

    Returns
    -------
    model : DBM or BinaryRBM
    history : dict of str to list
        ``iteration``, ``seconds``, ``free_energy_bound`` (mean ``G`` on the monitoring batch),
        ``negative_free_energy_bound`` (mean ``G`` on its VCD samples), ``model_loss`` (the
        difference of the two mean energies, Eq. 5's objective), ``valid_free_energy_bound``, and
        ``exact_log_z``, ``exact_free_energy``, ``exact_log_likelihood``,
        ``valid_exact_log_likelihood`` (NaN when not enumerable).

    Raises
    ------
    ValueError
        Bad data or hyperparameters, or a family with real-valued ``v``.
    TrainingDivergedError
    """
    s = setup(train, valid, hp)
    if s.family.visible != "binary":
        raise ValueError(f"VCD needs binary visible units; family {s.family.name!r} has real ones")
    energy, relax, gen = s.energy, s.relax, s.gen
    encoder = Encoder(s.train.shape[1], s.hidden_sizes, s.mlp_hidden, s.init_gen).to(s.device)
    opt_theta = adam(energy.parameters(), hp.lr, hp.betas)
    opt_enc = adam(encoder.parameters(), hp.lr, hp.betas)
    monitor_batch = s.monitor

    def negatives(v: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        with torch.no_grad():
            for _ in range(int(hp.cd_k)):
                v = sample_bernoulli(visible_logits(energy, encoder.sample(v, g).hs), g)
        return v

    def record(it: int) -> dict:
        neg = negatives(monitor_batch, s.eval_gen)
        pos_g = free_energy_bound(energy, encoder, monitor_batch, s.eval_gen).value.mean()
        neg_g = free_energy_bound(energy, encoder, neg, s.eval_gen).value.mean()
        pos_e = free_energy_bound(energy, encoder, monitor_batch, s.eval_gen, entropy=False).value.mean()
        neg_e = free_energy_bound(energy, encoder, neg, s.eval_gen, entropy=False).value.mean()
        return {
            "iteration": it,
            "free_energy_bound": float(pos_g),
            "negative_free_energy_bound": float(neg_g),
            "model_loss": float(pos_e - neg_e),
            "valid_free_energy_bound": math.nan
            if s.valid is None
            else float(free_energy_bound(energy, encoder, s.valid, s.eval_gen).value.mean()),
        }

    def update() -> None:
        energy.requires_grad_(False)
        for _ in range(int(hp.K2)):  # encoder: minimise G(v) = E_Q[E] - H(Q)
            v = s.batches.next()
            e = encoder.sample(v, gen, relax)
            step(opt_enc, (energy(v, e.hs) - e.entropy).mean())
        energy.requires_grad_(True)
        v = s.batches.next()
        with torch.no_grad():
            v_neg = negatives(v, gen)
            h_pos, h_neg = encoder.sample(v, gen).hs, encoder.sample(v_neg, gen).hs
        step(opt_theta, energy(v, h_pos).mean() - energy(v_neg, h_neg).mean())

    history = s.iterate("VCD", hp, update, record)
    return s.finish(history, {"energy": energy, "encoder": encoder}, return_state)
