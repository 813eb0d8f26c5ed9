"""AVIL: adversarial variational inference and learning (Li et al. 2019, Algorithm 1).

The negative log-likelihood ``L(theta) = E_data F(v) + log Z`` is estimated by two variational
bounds in opposite directions (Eqs. 8-10; :mod:`logzbench.training.variational`)::

    L2(theta, phi, psi) = E_{P_D(v) Q(h|v)}[E(v, h) + log Q(h | v)]      (positive phase, >= E_data F)
                        - E_{q(v, h)}[E(v, h) + log q(v, h)]            (negative phase, <= log Z)

with ``-E_q log q(v, h)`` replaced by its Eq. 13 lower bound (auxiliary posterior ``r(z | h)``),
and solved as ``min_theta min_phi max_psi L2`` (Eq. 11) by alternating Adam steps.  One
*iteration* (one update of ``theta``) is

1. ``K1`` updates of the decoder ``q`` and ``r`` (``psi``) maximising
   ``E_q[-E(v, h)] + H_bound(q)`` (the negative phase of Eq. 10 with Eq. 13) on ``batch_size``
   relaxed draws (binary concrete at ``temperature``);
2. ``K2`` updates of the encoder ``Q`` (``phi``) minimising ``E_Q[E(v, h)] - H(Q(h | v))`` on a
   training minibatch (relaxed ``h``);
3. one update of ``theta`` by the gradient of Eq. 10 / Eq. 12,
   ``d/dtheta [mean E(v_data, h_Q) - mean E(v_q, h_q)]``, with exact draws ``h ~ Q(h | v_data)``
   on a new minibatch and ``(v, h) ~ q`` (``batch_size`` of them).

The learner is black-box in the model: it calls only ``E(v, h)``.  Ablations (Fig. 4):
``"no_encoder_entropy"`` drops ``H(Q)`` from the encoder's objective, ``"no_decoder_entropy"``
drops the entropy bound from the decoder's.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from .hyperparams import REQUIRED, AVILParams, takes
from .variational import (
    AISMonitor,
    Decoder,
    Encoder,
    ExactMonitor,
    adam,
    check_ablation,
    decoder_bounds,
    exact_decoder_entropy,
    free_energy_bound,
    mean_stderr,
    setup,
    step,
)

__all__ = ["train_avil"]

#: The history's keys (besides ``seconds``), one list each.
HISTORY_KEYS = (
    "iteration",
    "free_energy_bound",
    "free_energy_bound_stderr",
    "log_z_bound",
    "log_z_bound_stderr",
    "entropy_bound",
    "positive_phase",
    "negative_phase",
    "model_loss",
    "nll_estimate",
    "valid_free_energy_bound",
    "exact_entropy",
    *ExactMonitor.KEYS,
    *AISMonitor.KEYS,
)


@takes(AVILParams, ("train", REQUIRED), ("valid", None), tail=(("return_state", False),))
def train_avil(train, valid, hp: AVILParams, return_state: bool = False):
    """Train an energy-based model by AVIL (Algorithm 1).

    Parameters
    ----------
    train : array-like, shape (n_train, n_visible)
        Training rows: 0/1 for ``"rbm"`` / ``"dbm"``, real for ``"grbm"``.
    valid : array-like, shape (n_valid, n_visible), optional
        Validation rows (monitored: encoder bound, exact log-likelihood when enumerable).
    family : {"rbm", "dbm", "grbm"}
        The energy (:data:`logzbench.training.variational.ENERGIES`).
    hidden_sizes : sequence of int
        The MRF's hidden layers: ``(50,)`` for the paper's RBMs, ``(50, 50)`` for its DBMs.
    aux_size : int
        Dimension of the decoder's auxiliary ``z`` (15, 50 or 25 in the paper).
    z : {"continuous", "discrete"}
        ``z ~ N(0, I)`` (the paper's default) or uniform Bernoulli (the digits study: exact
        decoder entropy when ``aux_size`` and the hidden layers are small).
    iterations : int
        Updates of ``theta``.
    K1, K2 : int
        Decoder and encoder updates per update of ``theta`` (>= 1).
    lr, betas : float, pair of float
        Adam for all three parameter sets.
    batch_size : int
        Training rows per minibatch and decoder draws per update.
    seed : int
        Same seed, data and arguments give the same model and history (but ``seconds``).
    device : str or torch.device
    log_every : int
        Iterations between history rows (plus iteration 0 and the last).
    ablation : {None, "no_encoder_entropy", "no_decoder_entropy"}
        Drop ``H(Q)`` or ``H(q)`` from the variational objectives (Fig. 4).
    temperature, straight_through : float, bool
        Binary-concrete relaxation of the draws in the encoder's and decoder's objectives.
    mlp_hidden : int, optional
        Width of the networks' sigmoid hidden layer; default half the first hidden size.
    init_scale : float
        Initial weights ``N(0, init_scale^2)``; visible biases start at the data's base rate
        (binary) or mean (GRBM), hidden biases at 0.
    sigma : float
        The GRBM's fixed standard deviation.
    visible_std : float, optional
        GRBM decoder: fixed std of ``q(v | h)`` (None: learned).
    exact_max_units : int
        Exact monitoring when ``log Z`` and ``F(v)`` enumerate at most this many units per layer
        (0: never); the exact decoder entropy when ``z`` is discrete with ``aux_size <= 12``.
    monitor_samples : int, optional
        Decoder draws for the monitored bounds (default ``batch_size``).
    ais_every : int
        Run AIS on the model every that many iterations (a multiple of ``log_every``) and at the last
        (:class:`~logzbench.training.variational.AISMonitor`: ``ais_K`` distributions, ``ais_chains``
        chains, from ``ais_init``, a DBM's ``log f(v)`` with ``ais_is_samples`` importance samples); 0: never.
    ais_K, ais_chains, ais_init, ais_is_samples : int, int, str, int
        The monitoring AIS's settings.
    select : {"last", "best-valid"}
        The model returned: the last, or the logged one with the best validation log-likelihood
        (exact where enumerable, else by the AIS monitor) -- the paper's protocol for Tables 2-3.
    return_state : bool
        Also return ``{"energy", "encoder", "decoder", "selected_iteration"}`` (the trained modules
        and the iteration of the returned model).

    Returns
    -------
    model : BinaryRBM, DBM or dict
        The trained model (a GRBM as its arrays ``{W, b, c, sigma}``), ``data_mean`` set.
    history : dict of str to list
        Equal-length lists, one entry per logging step: ``iteration``, ``seconds``,
        ``free_energy_bound`` (Eq. 8 on the monitoring batch, mean over rows) and its
        ``_stderr``, ``log_z_bound`` (Eq. 9 with Eq. 13) and its ``_stderr``, ``entropy_bound``
        (Eq. 13), ``positive_phase`` / ``negative_phase`` (mean energies) and ``model_loss``
        (their difference: Eq. 12's objective), ``nll_estimate`` (``free_energy_bound +
        log_z_bound``: Eq. 10), ``valid_free_energy_bound``, and the exact values (NaN when not
        enumerable): ``exact_log_z``, ``exact_free_energy``, ``exact_entropy`` (decoder),
        ``exact_log_likelihood``, ``valid_exact_log_likelihood`` -- the paper's Fig. 3 curves -- and the
        AIS monitor's ``ais_log_z``, ``ais_log_z_stderr``, ``valid_ais_log_likelihood`` (NaN where it did
        not run; Fig. 5).

    Raises
    ------
    ValueError
        Non-binary rows for a binary family, rows of the wrong width, invalid hyperparameters
        (``K1 < 1``, an RBM with two hidden layers, ...).
    TrainingDivergedError
        When a parameter becomes NaN / inf.
    """
    hp = dataclasses.replace(hp, ablation=check_ablation(hp.ablation))
    s = setup(train, valid, hp, family_options={"sigma": hp.sigma})
    energy, encoder, decoder = s.energy, *_networks(s, hp)
    opt_theta, opt_enc, opt_dec = (adam(m.parameters(), hp.lr, hp.betas) for m in (energy, encoder, decoder))
    use_hq, use_hQ = hp.ablation != "no_decoder_entropy", hp.ablation != "no_encoder_entropy"
    n_draws, gen, relax = int(hp.batch_size), s.gen, s.relax

    def update() -> None:
        energy.requires_grad_(False)
        for _ in range(int(hp.K1)):  # decoder q and r: maximise E_q[-E] + H_bound(q)
            d = decoder.sample(n_draws, gen, relax)
            loss = energy(d.v, d.hs).mean()
            if use_hq:
                loss = loss - d.entropy_bound().mean()
            step(opt_dec, loss)
        for _ in range(int(hp.K2)):  # encoder Q: minimise E_Q[E] - H(Q)
            v = s.batches.next()
            e = encoder.sample(v, gen, relax)
            loss = energy(v, e.hs).mean()
            if use_hQ:
                loss = loss - e.entropy.mean()
            step(opt_enc, loss)
        energy.requires_grad_(True)
        v = s.batches.next()
        with torch.no_grad():  # exact draws for the model's gradient (Eq. 12)
            h_pos = encoder.sample(v, gen).hs
            d = decoder.sample(n_draws, gen)
        step(opt_theta, energy(v, h_pos).mean() - energy(d.v, d.hs).mean())

    history = s.iterate("AVIL", hp, update, lambda it: _row(s, hp, encoder, decoder, it))
    return s.finish(history, {"energy": energy, "encoder": encoder, "decoder": decoder}, return_state)


def _networks(s, hp: AVILParams) -> tuple[Encoder, Decoder]:
    """AVIL's encoder ``Q(h | v)`` and decoder ``q(v, h)`` with its auxiliary ``z``, on the run's device."""
    n_visible = s.train.shape[1]
    encoder = Encoder(n_visible, s.hidden_sizes, s.mlp_hidden, s.init_gen).to(s.device)
    decoder = Decoder(
        n_visible, s.hidden_sizes, hp.aux_size, hp.z, s.family.visible, s.mlp_hidden, s.init_gen, hp.visible_std
    ).to(s.device)
    return encoder, decoder


def _row(s, hp: AVILParams, encoder: Encoder, decoder: Decoder, it: int) -> dict:
    """The logged row of iteration ``it``: both bounds on the monitoring batch and the decoder's draws
    (:data:`HISTORY_KEYS`; the exact decoder entropy where ``z`` is discrete and small)."""
    energy, monitor_batch = s.energy, s.monitor
    fe = free_energy_bound(energy, encoder, monitor_batch, s.eval_gen)
    pos = free_energy_bound(energy, encoder, monitor_batch, s.eval_gen, entropy=False)
    db = decoder_bounds(energy, decoder, hp.monitor_samples or int(hp.batch_size), s.eval_gen)
    f = mean_stderr(fe.value)  # over the monitoring batch's rows
    f_mean = float(f.value)
    entropy_exact = (
        hp.z == "discrete"
        and hp.aux_size <= 12
        and 0 < hp.exact_max_units
        and sum(s.hidden_sizes) <= hp.exact_max_units
    )
    return {
        "iteration": it,
        "free_energy_bound": f_mean,
        "free_energy_bound_stderr": float(f.stderr),
        "log_z_bound": float(db.log_z.value),
        "log_z_bound_stderr": float(db.log_z.stderr),
        "entropy_bound": float(db.entropy.value),
        "positive_phase": float(pos.value.mean()),
        "negative_phase": float(db.energy.value),
        "model_loss": float(pos.value.mean()) - float(db.energy.value),
        "nll_estimate": f_mean + float(db.log_z.value),
        "valid_free_energy_bound": math.nan
        if s.valid is None
        else float(free_energy_bound(energy, encoder, s.valid, s.eval_gen).value.mean()),
        "exact_entropy": exact_decoder_entropy(decoder) if entropy_exact else math.nan,
    }
