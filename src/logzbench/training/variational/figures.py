"""Samples of a trained model and of its variational decoder, for the learners' figures."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import torch
from torch import nn


def figure_samples(
    model, state: Mapping[str, nn.Module], n: int = 64, sweeps: int = 1000, seed: int = 0
) -> dict[str, np.ndarray]:
    """Visible means of the trained model and of its variational decoder, for figures (the paper's
    Figs. 4 and 6 show "the mean of v").

    Parameters
    ----------
    model : BinaryRBM, DBM or GaussianBernoulliRBM
        The trained model.
    state : mapping
        The learner's trained networks (``return_state=True``); its ``"decoder"``, when present, is
        sampled ancestrally.
    n : int
        Samples of each.
    sweeps : int
        Gibbs sweeps of the model's chains at ``beta = 1``, started from its annealing path's initial
        distribution (the paper: 100,000 burn-in sweeps).
    seed : int
        Seed of the draws.

    Returns
    -------
    dict
        ``model_mean_v`` (n, D) float64: ``E[v | h]`` of a final hidden draw (RBM, GRBM), or the chains'
        visible units (DBM); ``decoder_mean_v`` (n, D) float64, when there is a decoder: the mean of
        ``q(v | h_1)`` of ancestral draws ``z -> h -> ...``.
    """
    gen = torch.Generator(device=model.device).manual_seed(int(seed))
    out: dict[str, np.ndarray] = {}
    with torch.no_grad():
        decoder = state.get("decoder") if state else None
        if decoder is not None:
            draw = decoder.sample(int(n), gen, device=model.device)
            mean = decoder.vis(draw.hs[0])
            out["decoder_mean_v"] = (
                (torch.sigmoid(mean) if decoder.visible == "binary" else mean).double().cpu().numpy()
            )
        path = model.annealing_path("uniform")
        chains = path.sample_initial(int(n), gen)
        for _ in range(int(sweeps)):
            chains = path.transition(chains, 1.0, gen)
        v = chains.v[:, : model.n_visible]
        if hasattr(model, "mean_v_given_h"):  # GRBM
            mean = model.mean_v_given_h(model.sample_h_given_v(v, gen))
        elif hasattr(model, "layer_sizes"):  # DBM: the chains' visible units
            mean = v
        else:
            mean = model.prob_v_given_h(model.sample_h_given_v(v, gen))
        out["model_mean_v"] = mean.double().cpu().numpy()
    return out
