"""NVIL: neural variational inference and learning (Kuleshov & Ermon 2017): a neural ``q`` with
auxiliaries, or a mixture of Bernoullis.

Kuleshov & Ermon propose two variants (AVIL paper, Sec. 5.4): ``nvil_variant="auxiliary"`` (the
default, described first below) and ``nvil_variant="mixture"``, ``q(v) = sum_k pi_k prod_i
Bernoulli(v_i; mu_ki)`` with ``mixture_components`` components (:class:`BernoulliMixture`), whose
``log q(v)`` is exact (a logsumexp over the components), so no auxiliary posterior ``r`` is needed:
``w = f(v) / q(v)`` and the bound is Eq. 6 itself.  Li et al. found the mixture variant fails to scale
past small data (their Table 2 reports the auxiliary one); it needs binary visible units (``rbm``).

**The bound.**  For any ``q(v)`` whose support covers the model's, with ``f(v) = exp(-F(v))``
and ``w = f(v) / q(v)``, ``E_q[w] = Z`` and Jensen (``E[w^2] >= E[w]^2``) give the chi-square
upper bound (AVIL paper Eq. 6)::

    E_{q(v)}[(f(v) / q(v))^2] >= Z^2.

A neural ``q`` with auxiliary variables ``a`` has an intractable marginal ``q(v)``.  With an
auxiliary posterior ``r(a | v)`` (any normalised density) put

    w(v, a) = f(v) r(a | v) / q(v, a);

then ``E_{q(v, a)}[w] = sum_v f(v) sum_a r(a | v) = Z``, so again

    U = E_{q(v, a)}[w^2] >= (E_q[w])^2 = Z^2,

and, since ``E_{q(v,a)}[w^2] = sum_v f(v)^2 / q(v) * sum_a r(a | v)^2 / q(a | v)`` and
``sum_a r^2 / q(a | v) >= (sum_a r)^2 / sum_a q(a | v) = 1`` (Cauchy-Schwarz), ``U`` is never below
the marginal bound of Eq. 6: equality iff ``r(a | v) = q(a | v)``.  Here ``q(v, a)`` is the AVIL
decoder (:class:`~logzbench.training.variational.Decoder`) with ``a = (z, h)``, ``q(z) q(h | z)
q(v | h)``, and ``r(a | v) = r(h | v) r(z | h)``: an encoder ``v -> h`` and the decoder's
``r(z | h)``.

**Estimates.**  ``U_hat = (1/N) sum_i w_i^2`` over ``N`` exact draws ``(v_i, a_i) ~ q`` is unbiased
for ``U``; it is computed in log space, ``log U_hat = logsumexp_i(2 log w_i) - log N`` (float64),
and ``log Z`` is bounded by ``log Z <= (1/2) log U``; the history reports ``(1/2) log U_hat`` (a
Monte Carlo estimate that can fall below ``log Z`` when ``q`` misses modes: the paper's Fig. 5a).

**Training.**  Each iteration makes ``K1`` Adam updates of ``q`` minimising ``log U`` by its
score-function gradient on ``batch_size`` exact draws ``x_i = (v_i, a_i) ~ q``: since ``w`` holds
``1 / q``, ``grad_psi U = -E_q[w^2 grad_psi log q(x)]``, so

    grad_psi log U ~ -sum_i omega_i grad_psi log q(x_i),     omega_i = w_i^2 / sum_j w_j^2,

a maximum-likelihood step of ``q`` on its own draws weighted by their self-normalised squared
weights (:func:`q_loss`).  A pathwise (binary-concrete) gradient of ``log U_hat`` is not used: it
sees the explicit ``-log q`` in ``w`` but, at a low temperature, almost none of the sampling
distribution's dependence on ``psi``, so ``q`` shrinks onto its own draws, ``U_hat`` falls while the
exact ``U`` rises (on an enumerable model, 2 log Z = 29.9: exact ``log U`` 34.5 -> 63 in 600 steps,
against 34.5 -> 29.96 with this gradient).  Each ``q`` update comes with an update of ``r``
maximising ``mean log r(a_i | v_i)`` on the same draws: maximum likelihood fits ``r`` to
``q(a | v)``, the minimiser of ``U`` over ``r`` for the current ``q`` (Cauchy-Schwarz above).
Minimising the Monte Carlo ``U_hat`` over ``r`` directly is degenerate: ``r`` moves its mass away
from the ``N`` draws, which lowers ``U_hat`` while ``U`` explodes (a Gaussian ``r(z | h)`` shrinks
to ``log r ~ -1e21``).  Then one update of the model minimising

    J(theta) = mean_{v in batch} F_theta(v) + (1/2) log U_hat(theta),

where ``U_hat(theta) = (1/N) sum_i w_i(theta)^2`` on ``N = batch_size`` exact draws held fixed
(``log w_i = -F_theta(v_i) + log r(a_i | v_i) - log q(v_i, a_i)``).  Its gradient is

    dJ/dtheta = mean_batch dF(v)/dtheta - sum_i omega_i dF(v_i)/dtheta,
    omega_i = w_i^2 / sum_j w_j^2,

i.e. the log-likelihood gradient with ``log Z`` replaced by half the log of the bound estimate:
the negative phase is the model samples ``v_i ~ q`` weighted by the *squared* importance
weights, self-normalised.  The free energy ``F`` must be tractable (RBM, GRBM): NVIL uses it, as
the paper notes.
"""

from __future__ import annotations

import math

import torch

from ..models.enumeration import state_bits
from .common import _base_rate_logit
from .hyperparams import REQUIRED, NVILParams, takes
from .learner_options import NVIL_VARIANTS
from .variational import (
    AISMonitor,
    Decoder,
    DecoderSample,
    Encoder,
    EnergyModel,
    ExactMonitor,
    adam,
    bernoulli_log_prob,
    bernoulli_log_prob_table,
    float64_copy,
    sample_bernoulli,
    setup,
    step,
)

__all__ = [
    "NVIL_VARIANTS",
    "BernoulliMixture",
    "NVILProposal",
    "exact_log_chi2_bound",
    "log_chi2_bound",
    "q_loss",
    "train_nvil",
]

HISTORY_KEYS = (
    "iteration",
    "log_z_upper_bound",
    "log_chi2_bound",
    "log_z_importance",
    "ess",
    "free_energy",
    "model_loss",
    *ExactMonitor.KEYS,
    *AISMonitor.KEYS,
)


class NVILProposal(torch.nn.Module):
    """``q(v, a) = q(z) q(h | z) q(v | h)`` with auxiliaries ``a = (z, h)``, and ``r(a | v) = r(h | v) r(z | h)``.

    Parameters
    ----------
    decoder : Decoder
        ``q`` and ``r(z | h)``; one hidden layer.
    encoder : Encoder
        ``r(h | v)``.
    """

    def __init__(self, decoder: Decoder, encoder: Encoder):
        super().__init__()
        if len(decoder.hidden_sizes) != 1:
            raise ValueError("NVIL's proposal has one hidden layer of auxiliaries h")
        self.decoder, self.encoder = decoder, encoder

    def log_r(self, d: DecoderSample) -> torch.Tensor:
        """``log r(a | v) = log r(h | v) + log r(z | h)`` at the hard draws of ``d``, shape ``(n,)``.

        For relaxed draws the hard draws ``1[logit + L > 0]`` of the same noise (``relaxed > 1/2``)
        are used, detached: a relaxed value lies outside ``r``'s support.
        """
        hs = [(h > 0.5).to(h.dtype).detach() for h in d.hs]
        v = d.v.detach() if self.decoder.visible == "real" else (d.v > 0.5).to(d.v.dtype).detach()
        return self.encoder.log_prob(v, hs) + self.decoder.log_r(d.z, hs[-1])

    def log_weights(self, free_energy, d: DecoderSample, log_r: torch.Tensor | None = None) -> torch.Tensor:
        """``log w = -F(v) + log r(a | v) - log q(z, h, v)`` of draws ``d``, shape ``(n,)``
        (``log_r``: precomputed :meth:`log_r`)."""
        log_r = self.log_r(d) if log_r is None else log_r
        return -free_energy(d.v) + log_r - self.decoder.log_joint(d.z, d.hs, d.v)

    def draw(self, n: int, generator: torch.Generator) -> DecoderSample:
        """``n`` exact draws ``(z, h, v) ~ q``."""
        return self.decoder.sample(n, generator)

    @staticmethod
    def visible(d: DecoderSample) -> torch.Tensor:
        """The visible part ``v`` of draws ``d``, shape ``(n, n_visible)``."""
        return d.v

    def log_rest(self, d: DecoderSample) -> torch.Tensor:
        """``log r(a | v) - log q(z, h, v)``: ``log w + F(v)``, the part of the log-weight without the model."""
        return self.log_r(d) - self.decoder.log_joint(d.z, d.hs, d.v)

    def loss(self, free_energy, d: DecoderSample) -> torch.Tensor:
        """:func:`q_loss` of this proposal."""
        log_q = self.decoder.log_joint(d.z, d.hs, d.v)
        log_r = self.log_r(d)
        with torch.no_grad():
            omega = torch.softmax(2.0 * (-free_energy(d.v).double() + log_r.double() - log_q.double()), 0)
        return -(omega.to(log_q.dtype) * log_q).sum() - log_r.mean()


class BernoulliMixture(torch.nn.Module):
    """NVIL's mixture proposal: ``q(v) = sum_k pi_k prod_i Bernoulli(v_i; sigmoid(l_ki))``.

    ``pi = softmax(mixing_logits)``; ``log q`` is exact (float64 logsumexp over the components), so the
    log-weight is ``log w = -F(v) - log q(v)`` with no auxiliary posterior.

    Parameters
    ----------
    n_visible : int
        ``D``, the binary visible units.
    n_components : int
        ``K``, the mixture's components.
    base_logits : torch.Tensor, shape (n_visible,)
        Centre of the initial component logits (the data base rate's logits).
    generator : torch.Generator
        CPU generator of the initial logits ``base_logits + N(0, 1)``: distinct components (identical ones
        would receive identical gradients and stay identical).
    """

    def __init__(self, n_visible: int, n_components: int, base_logits: torch.Tensor, generator: torch.Generator):
        super().__init__()
        noise = torch.randn(int(n_components), int(n_visible), generator=generator)
        self.mixing_logits = torch.nn.Parameter(torch.zeros(int(n_components)))
        self.logits = torch.nn.Parameter(base_logits.detach().cpu().float()[None, :] + noise)

    def log_prob(self, v: torch.Tensor) -> torch.Tensor:
        """Exact ``log q(v)`` in float64, shape ``(n,)`` for ``v`` of shape ``(n, n_visible)``."""
        log_pi = torch.log_softmax(self.mixing_logits.double(), 0)
        return torch.logsumexp(log_pi[None, :] + bernoulli_log_prob(v.double()[:, None, :], self.logits.double()), 1)

    def draw(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` exact draws ``v ~ q``: a component ``k ~ pi``, then ``v ~ prod_i Bernoulli(sigmoid(l_ki))``,
        shape ``(n, n_visible)``."""
        probs = torch.softmax(self.mixing_logits.detach(), 0).to(generator.device)
        k = torch.multinomial(probs, int(n), replacement=True, generator=generator)
        return sample_bernoulli(self.logits.detach().to(generator.device)[k], generator)

    @staticmethod
    def visible(v: torch.Tensor) -> torch.Tensor:
        """Draws are the visible states themselves."""
        return v

    def log_rest(self, v: torch.Tensor) -> torch.Tensor:
        """``-log q(v)``: ``log w + F(v)``, the part of the log-weight without the model (float64)."""
        return -self.log_prob(v)

    def log_weights(self, free_energy, v: torch.Tensor) -> torch.Tensor:
        """``log w = -F(v) - log q(v)`` of draws ``v``, shape ``(n,)`` (float64)."""
        return -free_energy(v).double() + self.log_rest(v)

    def loss(self, free_energy, v: torch.Tensor) -> torch.Tensor:
        """:func:`q_loss` of this proposal: ``-sum_i omega_i log q(v_i)``, ``omega = softmax(2 log w)``."""
        log_q = self.log_prob(v)
        with torch.no_grad():
            omega = torch.softmax(2.0 * (-free_energy(v).double() - log_q), 0)
        return -(omega * log_q).sum()


def log_chi2_bound(log_w: torch.Tensor) -> torch.Tensor:
    """``log U_hat = logsumexp_i(2 log w_i) - log N`` (float64 scalar) from log-weights ``(N,)``."""
    return torch.logsumexp(2.0 * log_w.double(), 0) - math.log(log_w.shape[0])


def q_loss(proposal: NVILProposal | BernoulliMixture, free_energy, d) -> torch.Tensor:
    """The loss of one update of ``q`` (and ``r``) on exact draws ``d ~ q`` (held fixed): ``-sum_i omega_i
    log q(x_i)`` with ``omega = softmax(2 log w)`` (its gradient estimates ``grad log U``; see the module
    docstring) minus, for the auxiliary proposal, ``mean log r(a_i | v_i)`` (maximum likelihood of ``r``)."""
    return proposal.loss(free_energy, d)


@torch.no_grad()
def exact_log_chi2_bound(energy: EnergyModel, proposal: NVILProposal | BernoulliMixture, max_bits: int = 22) -> float:
    """Exact ``log U = log E_{q(v, a)}[w^2]`` by enumerating ``v``, ``h`` and a discrete ``z`` (tiny models).

    ``log U = logsumexp_{v,h} [ -2 F(v) + 2 log r(h | v) - log q(v | h) + logsumexp_z (2 log r(z | h)
    - log q(z) - log q(h | z)) ]`` in float64; for a :class:`BernoulliMixture`,
    ``log U = logsumexp_v [ -2 F(v) - log q(v) ]`` (enumerating ``v``).

    Raises
    ------
    ValueError
        Continuous ``z``, real ``v``, or more than ``2^max_bits`` states.
    """
    if isinstance(proposal, BernoulliMixture):
        n_v = proposal.logits.shape[1]
        if n_v > max_bits:
            raise ValueError(f"exact chi-square bound needs 2^{n_v} states; refusing above 2^{max_bits}")
        dev = next(energy.parameters()).device
        vs = state_bits(0, 1 << n_v, n_v, dev, torch.float64)
        return float(torch.logsumexp(-2 * energy.free_energy(vs).double() - proposal.log_prob(vs), 0))
    dec = proposal.decoder
    if dec.z_kind != "discrete" or dec.visible != "binary":
        raise ValueError("the exact chi-square bound needs binary v and discrete z")
    n_v, n_h, k = dec.n_visible, dec.hidden_sizes[0], dec.aux_size
    if n_v + n_h + k > max_bits:
        raise ValueError(f"exact chi-square bound needs 2^{n_v + n_h + k} states; refusing above 2^{max_bits}")
    prop = float64_copy(proposal)
    dev = next(energy.parameters()).device
    dec = prop.decoder
    zs = dec.all_z(dev)
    hs = state_bits(0, 1 << n_h, n_h, dev, torch.float64)
    vs = state_bits(0, 1 << n_v, n_v, dev, torch.float64)
    log_q_h_z = bernoulli_log_prob_table(hs, dec.top(zs))  # (2^n_h, 2^k)
    log_r_z_h = bernoulli_log_prob_table(zs, dec.r(hs))  # (2^k, 2^n_h): r(z | h)
    c = torch.logsumexp(2 * log_r_z_h.T - log_q_h_z - dec.log_prior(zs)[None], dim=1)  # (2^n_h,)
    log_q_v_h = bernoulli_log_prob_table(vs, dec.vis(hs))  # (2^n_v, 2^n_h)
    log_r_h_v = bernoulli_log_prob_table(hs, prop.encoder.nets[0](vs)).T  # (2^n_v, 2^n_h): r(h | v)
    f2 = -2 * energy.free_energy(vs)  # (2^n_v,)
    return float(torch.logsumexp((f2[:, None] + 2 * log_r_h_v - log_q_v_h + c[None]).reshape(-1), 0))


@takes(NVILParams, ("train", REQUIRED), ("valid", None), tail=(("return_state", False),))
def train_nvil(train, valid, hp: NVILParams, return_state: bool = False):
    """Train an RBM (or GRBM) by NVIL with a neural auxiliary-variable ``q`` or a mixture of Bernoullis
    (see the module docstring).

    Parameters
    ----------
    train : array-like, shape (n_train, n_visible)
        Training rows (0/1 for ``"rbm"``, real for ``"grbm"``).
    valid : array-like, shape (n_valid, n_visible), optional
    family : {"rbm", "grbm"}
        A family with a tractable free energy.
    hidden_sizes : sequence of one int
        The model's hidden layer (also the auxiliary ``q``'s ``h``).
    aux_size, z : int, {"continuous", "discrete"}
        The auxiliary ``q``'s top auxiliary ``z`` (unused by the mixture).
    iterations, K1, lr, betas, batch_size, seed, device, log_every
        As :func:`~logzbench.training.avil.train_avil` (``K1`` updates of ``q`` and ``r`` per
        model update, ``batch_size`` draws of ``q`` per update).
    mlp_hidden, init_scale, sigma, visible_std, exact_max_units, \
monitor_samples, ais_every, ais_K, ais_chains, \
ais_init, ais_is_samples, select, return_state
        As :func:`~logzbench.training.avil.train_avil` (``mlp_hidden`` and ``init_scale``'s networks:
        the auxiliary ``q`` only).
    nvil_variant : {"auxiliary", "mixture"}
        Kuleshov & Ermon's two proposals: the neural ``q(z) q(h | z) q(v | h)`` with the auxiliary
        posterior ``r`` (the one Li et al. compare against), or :class:`BernoulliMixture` (binary
        visible units only).
    mixture_components : int
        Components ``K`` of the mixture (default 10; Li et al. do not state theirs); unused by
        ``"auxiliary"``.

    Returns
    -------
    model : BinaryRBM or dict
    history : dict of str to list
        Equal-length lists per logging step: ``iteration``, ``seconds``, ``log_z_upper_bound``
        (``(1/2) log U_hat`` on ``monitor_samples`` fresh draws), ``log_chi2_bound``
        (``log U_hat``), ``log_z_importance`` (``log mean w``, the importance-sampling estimate),
        ``ess`` (of the weights ``w``), ``free_energy`` (mean ``F`` on the monitoring batch),
        ``model_loss`` (``free_energy + log_z_upper_bound``), and ``exact_log_z``,
        ``exact_free_energy``, ``exact_log_likelihood``, ``valid_exact_log_likelihood`` (NaN when
        not enumerable).

    Raises
    ------
    ValueError
        Bad data or hyperparameters; a family without a tractable free energy (DBM).
    TrainingDivergedError
    """
    s = setup(train, valid, hp, family_options={"sigma": hp.sigma})
    if s.family.free_energy is None:
        raise ValueError(f"NVIL needs a tractable free energy; family {s.family.name!r} has none (use AVIL or VCD)")
    energy, gen, proposal = s.energy, s.gen, _proposal(s, hp)
    opt_theta, opt_q = adam(energy.parameters(), hp.lr, hp.betas), adam(proposal.parameters(), hp.lr, hp.betas)
    n_draws = int(hp.batch_size)

    def update() -> None:
        energy.requires_grad_(False)
        for _ in range(int(hp.K1)):  # q: minimise log U (score function); r: maximum likelihood on q's draws
            with torch.no_grad():
                d = proposal.draw(n_draws, gen)
            step(opt_q, q_loss(proposal, energy.free_energy, d))
        energy.requires_grad_(True)
        v = s.batches.next()
        with torch.no_grad():
            d = proposal.draw(n_draws, gen)
            log_rest = proposal.log_rest(d).double()
        log_w = -energy.free_energy(proposal.visible(d)).double() + log_rest  # depends on theta through F only
        step(opt_theta, energy.free_energy(v).mean() + 0.5 * log_chi2_bound(log_w))

    history = s.iterate("NVIL", hp, update, lambda it: _row(s, proposal, hp.monitor_samples or n_draws, it))
    return s.finish(history, {"energy": energy, "proposal": proposal}, return_state)


def _proposal(s, hp: NVILParams) -> "NVILProposal | BernoulliMixture":
    """NVIL's proposal ``q`` (``hp.nvil_variant``): a mixture of Bernoullis from the data's base rate, or the
    neural auxiliary-variable decoder with its encoder ``r``."""
    n_visible = s.train.shape[1]
    if hp.nvil_variant == "mixture":
        if s.family.visible != "binary":
            raise ValueError(
                f"nvil_variant='mixture' is a mixture of Bernoullis: it needs binary visible units, "
                f"family {s.family.name!r} has real ones (use nvil_variant='auxiliary')"
            )
        base = _base_rate_logit(s.train.mean(0).cpu())
        return BernoulliMixture(n_visible, hp.mixture_components, base, s.init_gen).to(s.device)
    decoder = Decoder(
        n_visible, s.hidden_sizes, hp.aux_size, hp.z, s.family.visible, s.mlp_hidden, s.init_gen, hp.visible_std
    ).to(s.device)
    return NVILProposal(decoder, Encoder(n_visible, s.hidden_sizes, s.mlp_hidden, s.init_gen).to(s.device))


def _row(s, proposal, n_draws: int, it: int) -> dict:
    """The logged row of iteration ``it``: the chi^2 bound and importance estimate of ``log Z`` from
    ``n_draws`` of the proposal, their effective sample size, and the monitoring batch's free energy."""
    energy = s.energy
    with torch.no_grad():
        d = proposal.draw(n_draws, s.eval_gen)
        log_w = proposal.log_weights(energy.free_energy, d).double()
        log_u = float(log_chi2_bound(log_w))
        free = float(energy.free_energy(s.monitor.double()).mean())
    lw = log_w - log_w.max()
    ess = float(torch.exp(lw).sum() ** 2 / torch.exp(2 * lw).sum())
    return {
        "iteration": it,
        "log_z_upper_bound": 0.5 * log_u,
        "log_chi2_bound": log_u,
        "log_z_importance": float(torch.logsumexp(log_w, 0) - math.log(log_w.shape[0])),
        "ess": ess,
        "free_energy": free,
        "model_loss": free + 0.5 * log_u,
    }
