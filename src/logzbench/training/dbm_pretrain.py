"""Greedy layer-wise pretraining of a binary DBM (Salakhutdinov & Hinton 2009, Sec. 3.1).

The first phase of :class:`~logzbench.training.dbm.DBMTrainer` (``pretrain_epochs`` per layer: one
number for all layers or one per layer, all 0 skips it), kept apart from the joint PCD training in
:mod:`logzbench.training.dbm` because it is a self-contained algorithm of its own: a stack of RBMs
trained bottom-up and composed into the DBM's initial parameters. :class:`_DBMPretraining` is a
mixin of the trainer: it reads the trainer's hyperparameters (``init_scale``, ``visible_bias_init``,
``eval_subsample``, ``progress``, ``pretrain_*``, ``batch_size``) and its ``_momentum`` and ``_row``
helpers.

Layer ``l`` is an RBM between layers ``l-1`` and ``l`` (weights ``W_l``, "visible" bias
``a_l``, "hidden" bias ``c_l``) trained by CD-``pretrain_k`` on the activities of layer ``l-1``.
In the DBM every hidden layer but the top one receives input from two neighbours, so the
pretrained RBMs are made to count the input that will later come from the missing neighbour
twice (the *doubled-weights trick*):

* bottom RBM (``l = 1 < L``): ``p(h_1 | v) = sigmoid(2 v W_1 + c_1)``, ``p(v | h_1) = sigmoid(W_1 h_1 + a_1)``;
* top RBM (``l = L > 1``): ``p(h_L | h_{L-1}) = sigmoid(h_{L-1} W_L + c_L)``,
  ``p(h_{L-1} | h_L) = sigmoid(2 W_L h_L + a_L)``;
* middle RBMs (``1 < l < L``): doubled both ways;
* a one-layer DBM (``L = 1``) is a plain RBM, nothing doubled.

As in Salakhutdinov's reference code, one reconstruction serves both copies of the doubled
layer and the gradient is the plain ``<x h>_data - <x h>_recon`` (the factor 2 is absorbed by
the learning rate).  The input of layer ``l > 1`` is, with ``pretrain_activities="mean"``,
the bottom-up probabilities of layer ``l-1`` computed once through the (doubled) recognition
pass of the layers below (real values in ``[0, 1]``), or, with ``"sample"``, a fresh binary
sample drawn each epoch by ancestral sampling through that same bottom-up pass.

**Combining the biases.**  ``b_0 = a_1`` (the bottom RBM's visible bias), ``b_L = c_L`` (the top
RBM's hidden bias) and, for an intermediate layer, ``b_l = (c_l + a_{l+1}) / 2``.  The DBM's
conditional ``p(h_l | h_{l-1}, h_{l+1}) = sigmoid(h_{l-1} W_l + W_{l+1} h_{l+1} + b_l)`` is then
exactly the average of the logits of the two pretrained conditionals
``sigmoid(2 h_{l-1} W_l + c_l)`` and ``sigmoid(2 W_{l+1} h_{l+1} + a_{l+1})`` -- the averaging that
the doubled weights prepare for.  The weights are used as they are (the doubling already
halved them relative to an undoubled RBM).
"""

from __future__ import annotations

import time

import torch

from ..kernels import bernoulli, bernoulli_from_logits_
from .common import _base_rate_logit, _check_params_finite
from .trainer import _elapsed


class _DBMPretraining:
    """Greedy doubled-weights pretraining of :class:`~logzbench.training.dbm.DBMTrainer` (a mixin)."""

    def _pretrain(
        self,
        x_train: torch.Tensor,
        sizes: list[int],
        epochs_per_layer: list[int],
        gen: torch.Generator,
        eval_gen: torch.Generator,
        history: list[dict],
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Greedy doubled-weights pretraining; returns the composed DBM weights and biases.

        ``sizes`` is ``[n_visible, n_1, ..., n_L]`` and ``epochs_per_layer[l - 1]`` the epochs of the RBM of
        layer ``l`` (0 keeps its initial parameters); one history record per epoch is appended to ``history``.
        """
        device = x_train.device
        L = len(sizes) - 1
        rbms: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (W_l, a_l, c_l)
        probs = x_train  # bottom-up probabilities of layer l-1 (the data for l = 1)
        for l in range(1, L + 1):
            up = 2.0 if l < L else 1.0
            down = 2.0 if l > 1 else 1.0
            n_in, n_out = sizes[l - 1], sizes[l]
            W = torch.randn(n_in, n_out, generator=gen, device=device) * self.init_scale
            a = (
                _base_rate_logit(probs.mean(0))
                if self.visible_bias_init == "base_rate"
                else torch.zeros(n_in, device=device)
            )
            c = torch.zeros(n_out, device=device)
            velocity = [torch.zeros_like(p) for p in (W, a, c)]
            rows = torch.randperm(probs.shape[0], generator=eval_gen, device=device)[: self.eval_subsample]
            epochs = range(1, epochs_per_layer[l - 1] + 1)
            if self.progress:
                from tqdm.auto import tqdm

                epochs = tqdm(epochs, desc=f"pretrain DBM layer {l}/{L} ({n_in}x{n_out})", unit="epoch")
            for epoch in epochs:
                momentum = self._momentum(epoch)
                t0 = time.perf_counter()
                if self.pretrain_activities == "sample" and l > 1:
                    inputs = self._sample_up(x_train, rbms, gen)
                else:
                    inputs = probs
                order = torch.randperm(inputs.shape[0], generator=gen, device=device)
                for start in range(0, inputs.shape[0], self.batch_size):
                    self._cd_update(
                        W,
                        a,
                        c,
                        velocity,
                        inputs[order[start : start + self.batch_size]],
                        up,
                        down,
                        self.pretrain_learning_rate,
                        momentum,
                        gen,
                    )
                _check_params_finite(
                    {f"W_{l}": W, f"visible bias of RBM {l}": a, f"hidden bias of RBM {l}": c},
                    f"pretraining of layer {l}, epoch {epoch}",
                )
                seconds = _elapsed(t0, device)
                t1 = time.perf_counter()
                x = probs[rows]
                recon = torch.sigmoid(torch.addmm(a, torch.sigmoid(torch.addmm(c, x, W, alpha=up)), W.T, alpha=down))
                err = float(((recon - x) ** 2).mean())
                history.append(
                    self._row(
                        "pretrain", l, epoch, self.pretrain_learning_rate, momentum, seconds, _elapsed(t1, device), err
                    )
                )
                if self.progress:
                    epochs.set_postfix(recon=f"{err:.4f}")
            rbms.append((W, a, c))
            if l < L:  # bottom-up probabilities of layer l, the next RBM's data
                probs = torch.cat(
                    [
                        torch.sigmoid(torch.addmm(c, probs[i : i + 4096], W, alpha=up))
                        for i in range(0, probs.shape[0], 4096)
                    ]
                )
        weights = [W for W, _, _ in rbms]
        biases = [rbms[0][1]]
        for l in range(1, L):
            biases.append(0.5 * (rbms[l - 1][2] + rbms[l][1]))  # (c_l + a_{l+1}) / 2
        biases.append(rbms[-1][2])
        return weights, biases

    @staticmethod
    def _sample_up(x: torch.Tensor, rbms, gen: torch.Generator) -> torch.Tensor:
        """Binary states of the layer above ``rbms`` by ancestral sampling through the doubled bottom-up pass."""
        for W, _, c in rbms:  # every trained RBM is below the current (not top) one: doubled upward
            x = bernoulli_from_logits_(torch.addmm(c, x, W, alpha=2.0), gen)
        return x

    def _cd_update(
        self, W, a, c, velocity, x0, up: float, down: float, lr: float, momentum: float, gen: torch.Generator
    ) -> None:
        """One CD-``pretrain_k`` step of a (possibly doubled) RBM on inputs ``x0 (B, n_in)``."""
        p0 = torch.sigmoid(torch.addmm(c, x0, W, alpha=up))
        pk = p0
        for _ in range(self.pretrain_k):
            h = bernoulli(pk, gen)
            xk = bernoulli_from_logits_(torch.addmm(a, h, W.T, alpha=down), gen)
            pk = torch.sigmoid(torch.addmm(c, xk, W, alpha=up))
        B = x0.shape[0]
        grad_W = torch.addmm(W, x0.T, p0, beta=-self.pretrain_weight_decay, alpha=1.0 / B)
        grad_W.addmm_(xk.T, pk, alpha=-1.0 / B)
        grads = (grad_W, x0.mean(0) - xk.mean(0), p0.mean(0) - pk.mean(0))
        for param, vel, grad in zip((W, a, c), velocity, grads):
            vel.mul_(momentum).add_(grad, alpha=lr)
            param.add_(vel)
