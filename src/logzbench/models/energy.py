"""Bring your own model: :class:`EnergyModel`, any log-density written in PyTorch.

A user's unnormalised model is a callable ``log_f`` mapping a batch of states ``(n, dim)`` to their
log unnormalised densities ``(n,)``, on one of three domains:

``"binary"``
    ``{0, 1}^dim``: states are float tensors of 0./1.
``("categorical", q)``
    ``{0, .., q-1}^dim``: states are float tensors holding the integer states (a one-hot encoding,
    where the energy wants one, is the user's business inside ``log_f``); data rows are integers.
``"continuous"``
    ``R^dim``.

The model joins every estimator whose registry entry accepts its kind (families ``energy-binary``,
``energy-categorical``: AIS, RAISE, reverse AIS, the sandwich bracket, ADS, the IS family, exact
enumeration of small domains; ``energy-continuous``, an *analysis* model ``E(x) = -log_f(x)``: HAIS
and its baselines, RAISE with Hamiltonian transitions, the sandwich).

The annealing path is the geometric one, ``f_beta(x) = r(x)^(1 - beta) f(x)^beta``, from a tractable
reference ``r`` (exact samples, normalised ``log_prob``):

* discrete domains: a factorised distribution: the data base rate (``init="base-rate"``, from the
  training rows or the ``data`` given here) or uniform (``init="uniform"``); or the user's own
  ``reference``.  The transition (:class:`DiscreteEnergyPath`) is one Metropolis-within-Gibbs sweep:
  every site once, in a random order drawn per sweep for each chain.  A binary site proposes the flip
  and accepts it with probability ``min(1, f_beta(x') / f_beta(x))``; a categorical site is drawn from
  its exact conditional under ``p_beta`` (heat bath: its other ``q - 1`` states scored together in one
  call of ``log_f`` on ``(n * (q - 1), dim)`` states).  Each site update is reversible with respect to
  ``p_beta``, and the random order makes the sweep reversible too (the average over orders of the
  composed updates is self-adjoint because the reversed order is as likely), so RAISE's reverse chains
  are valid; orders drawn per chain keep the chains independent.  A sweep costs ``dim`` calls of
  ``log_f`` on all chains: far slower than a family's own Gibbs sampler (the benchmark page says by how
  much), but exact for any energy.
* with an exact ``conditional`` and its ``colouring`` (:mod:`logzbench.models.energy_blocks`), the
  transition is instead block Gibbs over the colour classes, each chain scanning them forward or in
  reverse (1/2 each, so reversible): ``2C - 1`` calls of the conditional and one of ``log_f`` per sweep
  for ``C`` classes (two for a hand-written RBM), on any factorised reference; a user ``reference``
  keeps the Metropolis-within-Gibbs sweep.
* ``transition="gwg"`` or ``"dmala"`` (:mod:`logzbench.models.energy_moves`) replaces the sweep by a
  gradient-informed Metropolis-Hastings move (Gibbs-with-Gradients; discrete Langevin) at one forward and
  backward pass of ``log_f`` per move, as exact and as reversible, for a ``log_f`` differentiable in its input.
* the continuous domain: a diagonal Gaussian fitted to ``data`` (else standard normal), scaled by the
  estimators' ``proposal_scale``; or the user's ``reference``.  The transitions are the Hamiltonian
  kernels of :mod:`logzbench.models.hamiltonian`, gradients by autograd.

A user ``reference`` is any object with ``log_prob(x) -> (n,)`` (normalised) and
``sample(n, generator) -> (n, dim)``; it replaces the ``init`` choice.

Log-densities are accumulated in float64; ``log_f`` returns float32 or float64 (a half-precision result,
float16 or bfloat16, keeps only 2-3 significant digits of ``log f`` and is refused, as are integers and
complex numbers) and is called on tensors of ``dtype`` (default: the dtype of its parameters when it is a
:class:`torch.nn.Module`, else float32).  :meth:`EnergyModel.check` calls ``log_f`` on a few states and
refuses, with one line, a result that is not a tensor, has the wrong shape or dtype, or holds NaN or
``+inf``, and a conditional that disagrees with ``log f`` (checked also before a model built in code drives
its first path).  An exception raised by ``log_f`` or a user ``reference`` (``sys.exit()`` included) becomes one
ValueError line naming the function and the exception.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np
import torch

from ..errors import ModelFileError
from ..sources import ENERGY_FAMILIES
from .energy_blocks import block_gibbs_sweep, check_conditional, conditional_logits, parse_colouring
from .energy_moves import check_gradient, check_transition
from .energy_path import (
    DiscreteEnergyPath,
    FactorizedReference,
    GaussianReference,
    _checked,
    _reference_call,
    first_line,
)
from .enumeration import MAX_ENUMERATION_BITS
from .potts import states_range

__all__ = [
    "DOMAINS",
    "EnergyModel",
    "exact_seconds",
    "time_call",
    "not_trained",
    "refuse_enumeration",
]

#: the domains of :class:`EnergyModel` (``"categorical"`` as ``("categorical", q)``)
DOMAINS = ("binary", "categorical", "continuous")
#: states per log_f call when enumerating a discrete domain
ENUMERATION_CHUNK = 1 << 14
#: states (rows x dim) of the batch :meth:`EnergyModel.sweep_seconds` times ``log_f`` on: a larger batch of
#: chains is timed on a sub-batch of its rows and scaled by the rows (at this size a call's fixed overhead
#: is small next to its work, so the time grows with the rows)
TIMING_ELEMENTS = 1 << 20
#: seconds of timed calls after which :func:`time_call` stops repeating them
TIMING_SECONDS = 0.2


# --------------------------------------------------------------------------- the model
def _parse_domain(domain) -> tuple[str, int | None]:
    if isinstance(domain, str) and domain in ("binary", "continuous"):
        return domain, (2 if domain == "binary" else None)
    if (
        isinstance(domain, (tuple, list))
        and len(domain) == 2
        and domain[0] == "categorical"
        and isinstance(domain[1], (int, np.integer))
        and not isinstance(domain[1], bool)
    ):
        if int(domain[1]) < 2:
            raise ValueError(f"a categorical domain needs q >= 2 states, got {domain[1]}")
        return "categorical", int(domain[1])
    raise ValueError(f"domain must be 'binary', ('categorical', q) or 'continuous', got {domain!r}")


class EnergyModel:
    """A model given by its log unnormalised density.

    Parameters
    ----------
    log_f : callable
        ``(n, dim)`` tensor of ``dtype`` -> ``(n,)`` tensor of log unnormalised densities (float32 or
        float64; ``-inf`` allowed for states of zero probability on discrete domains, never NaN or
        ``+inf``).  A :class:`torch.nn.Module` is moved with the model (:meth:`to`).
    dim : int
        Sites (binary, categorical) or coordinates (continuous).
    domain : {"binary", ("categorical", q), "continuous"}
    reference : object, optional
        The annealing path's start: ``log_prob(x) -> (n,)`` (normalised) and
        ``sample(n, generator) -> (n, dim)``.  Default: the data base rate / uniform (discrete; the
        estimators' ``init``), a diagonal Gaussian fitted to ``data`` / standard normal (continuous).
    conditional : callable, optional
        Discrete domains: ``fn(x, c) -> logits``, the exact conditional of colour class ``c``'s sites given
        the rest, for all chains at once (binary ``(n, len(class))`` log-odds of 1; categorical
        ``(n, len(class), q)`` logits); with it the path's ``gibbs`` transition is block Gibbs over the
        classes (:mod:`logzbench.models.energy_blocks` says exactly what ``fn`` returns).  A
        :class:`torch.nn.Module` is moved with the model (a method of a module ``log_f`` moves with it).
    colouring : sequence of sequences of int, optional
        With ``conditional`` (and only with it): the colour classes, each a sequence of site indices,
        every site in exactly one class, no two sites of one class interacting.
    data : array-like, shape (n, dim), optional
        Training rows for the default reference (discrete: they stand in for the estimators'
        ``train_data``, which takes precedence).
    dtype : torch.dtype, optional
        What ``log_f`` is called on (default: its parameters' dtype, else float32).
    name : str, optional
        For messages and records (default: ``log_f``'s name).
    device : str or torch.device, optional
        Where the chains live and ``log_f`` is called (a module ``log_f`` is moved there); default: where
        a module's parameters are, else the CPU.

    Attributes
    ----------
    family : str
        ``energy-binary``, ``energy-categorical`` or ``energy-continuous`` (the registry's entry).
    kind : str
        ``binary``, ``categorical`` or ``analysis`` (the registry's kind of the family).
    n_states : int or None
        ``q`` (2 for binary; ``None`` for continuous).
    """

    def __init__(
        self,
        log_f: Callable[[torch.Tensor], torch.Tensor],
        dim: int,
        domain,
        reference: Any = None,
        *,
        data=None,
        dtype: torch.dtype | None = None,
        name: str | None = None,
        device=None,
        conditional: Callable[[torch.Tensor, int], torch.Tensor] | None = None,
        colouring=None,
    ):
        if not callable(log_f):
            raise ValueError(f"log_f must be callable, got {type(log_f).__name__}")
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or int(dim) < 1:
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        has = [callable(getattr(reference, m, None)) for m in ("log_prob", "sample")]
        if reference is not None and not all(has):
            raise ValueError("reference must have log_prob(x) and sample(n, generator) methods")
        if device is not None and isinstance(log_f, torch.nn.Module):
            log_f = log_f.to(device)  # the module's parameters where its inputs will be
        if (conditional is None) != (colouring is None):
            raise ValueError("conditional and colouring go together: give both (fn's logits are per class) or neither")
        if conditional is not None and not callable(conditional):
            raise ValueError(f"conditional must be callable (x, c) -> logits, got {type(conditional).__name__}")
        if device is not None and isinstance(conditional, torch.nn.Module):
            conditional = conditional.to(device)
        self.log_f_fn = log_f
        self.dim = int(dim)
        self.domain_name, self.n_states = _parse_domain(domain)
        self.domain = domain if self.domain_name != "categorical" else ("categorical", self.n_states)
        self.reference = reference
        self._device = torch.device(device) if device is not None else _module_device(log_f)
        if dtype is None:
            dtype = _module_dtype(log_f) or torch.float32
        self.dtype = dtype
        self.name = name or getattr(log_f, "__name__", None) or type(log_f).__name__
        self.data = None if data is None else self._rows(data, "data")
        self.source: str | None = None  # where it was loaded from (load_model)
        self.conditional, self.colouring = conditional, None
        if conditional is not None:
            if not self.discrete:
                raise ValueError("a conditional (block Gibbs) is for discrete domains; a continuous energy has none")
            self.colouring = tuple(c.to(self._device) for c in parse_colouring(colouring, self.dim))
        self._conditional_checked = False

    # ------------------------------------------------------------------ identity
    @property
    def family(self) -> str:
        return ENERGY_FAMILIES[self.domain_name]

    @property
    def kind(self) -> str:
        return "analysis" if self.domain_name == "continuous" else self.domain_name

    @property
    def discrete(self) -> bool:
        return self.domain_name != "continuous"

    @property
    def n_visible(self) -> int:
        return self.dim

    @property
    def n_dims(self) -> int:
        return self.dim

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def data_mean(self):
        return None

    def __repr__(self) -> str:
        return f"EnergyModel({self.name}, dim={self.dim}, domain={self.domain!r})"

    def to(self, device) -> "EnergyModel":
        """The model on ``device`` (a module ``log_f`` and the reference are moved; a plain function is
        called with tensors on ``device``)."""
        device = torch.device(device)
        if device == self._device:
            return self
        f = self.log_f_fn.to(device) if isinstance(self.log_f_fn, torch.nn.Module) else self.log_f_fn
        ref = _reference_call(self.reference, "to", device) if hasattr(self.reference, "to") else self.reference
        m = EnergyModel(
            f,
            self.dim,
            self.domain,
            ref,
            dtype=self.dtype,
            name=self.name,
            device=device,
            conditional=self.conditional,  # a module is moved there (the colouring too)
            colouring=self.colouring,
        )
        m.data, m.source = (None if self.data is None else self.data.to(device)), self.source
        m._conditional_checked = self._conditional_checked
        return m

    def _rows(self, x, what: str) -> torch.Tensor:
        from ..data.rows import check_binary_rows, check_categorical_rows, check_real_rows

        if self.domain_name == "continuous":
            return torch.as_tensor(check_real_rows(x, what, self.dim), dtype=torch.float64, device=self._device)
        if self.domain_name == "binary":
            arr = check_binary_rows(x, what, self.dim)
        else:
            arr = check_categorical_rows(x, what, self.dim, self.n_states)
        return torch.as_tensor(arr, dtype=torch.int64, device=self._device)

    # ------------------------------------------------------------------ densities
    def log_f(self, x: torch.Tensor) -> torch.Tensor:
        """``log f(x)``, float64 ``(n,)``, with the shape and values checked (a ValueError otherwise);
        differentiable in ``x`` where ``x`` requires a gradient."""
        if x.requires_grad:
            return _checked(self._call(x), int(x.shape[0]), self.name)
        with torch.no_grad():  # values only: no graph through a module's parameters
            return _checked(self._call(x), int(x.shape[0]), self.name)

    def _call(self, x: torch.Tensor):
        """``log_f_fn(x)`` on the model's dtype and device; the user's exception becomes one ValueError line."""
        try:
            return self.log_f_fn(x.to(dtype=self.dtype, device=self._device))
        except (Exception, SystemExit) as exc:  # sys.exit() in log_f too: an error, not a silent exit
            raise ValueError(
                f"log_f ({self.name}) raised {first_line(exc)} on a batch of shape {tuple(x.shape)}"
            ) from exc

    def log_unnormalized_marginal(self, v) -> torch.Tensor:
        """``log f(v)`` of data rows (exact: the user's function)."""
        return self.log_f(torch.as_tensor(v, device=self._device))

    exact_log_f = log_unnormalized_marginal

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """``E(x) = -log f(x)`` (continuous: the analysis-model interface of the Hamiltonian kernels);
        differentiable in ``x``."""
        return -self.log_f(x)

    def check(self, n: int = 4, seed: int = 0) -> "EnergyModel":
        """Call ``log_f`` on ``n`` uniform states and refuse (ValueError, one line) a non-tensor, a wrong
        shape, NaN or ``+inf``; with a ``conditional``, refuse a colouring that couples two sites of a class
        or logits that disagree with ``log f`` (:func:`~logzbench.models.energy_blocks.check_conditional`);
        returns the model."""
        g = torch.Generator(device=self._device).manual_seed(int(seed))
        if self.discrete:  # uniform states (drawn directly: a wide domain's reference would hold n x dim x q)
            x = torch.randint(0, int(self.n_states), (n, self.dim), generator=g, device=self._device).to(self.dtype)
        else:
            x = torch.randn(n, self.dim, generator=g, dtype=torch.float64, device=self._device)
        with torch.no_grad():
            self.log_f(x)
        if self.reference is not None:
            s = _reference_call(self.reference, "sample", n, g)
            if not isinstance(s, torch.Tensor) or tuple(s.shape) != (n, self.dim):
                raise ValueError(f"reference.sample({n}, generator) must return a ({n}, {self.dim}) tensor")
            _checked(_reference_call(self.reference, "log_prob", s), n, "reference.log_prob")
        if self.conditional is not None:
            check_conditional(self, n, seed)
            self._conditional_checked = True
        return self

    def block_gibbs(self, x: torch.Tensor, beta: float, generator: torch.Generator, log_r: torch.Tensor):
        """One reversible block-Gibbs sweep of the states ``x`` over the colour classes
        (:func:`~logzbench.models.energy_blocks.block_gibbs_sweep`; ``log_r``: the factorised reference's
        per-site log-probabilities); the path's ``gibbs`` transition when the model has a ``conditional``."""
        return block_gibbs_sweep(self, x, beta, generator, log_r)

    def uses_blocks(self, reference) -> bool:
        """Whether the ``gibbs`` transition from ``reference`` is block Gibbs: a conditional, and a factorised
        reference (per-site terms; a user's whole-state reference keeps Metropolis-within-Gibbs)."""
        return self.conditional is not None and (reference is None or isinstance(reference, FactorizedReference))

    def sweep_seconds(self, rows: int, transition: str = "gibbs") -> tuple[float, str]:
        """``(seconds, what)``: the estimated time of one sweep of ``rows`` chains, counting the calls of
        the user's functions only (the sampler's own bookkeeping adds to it).  On a discrete domain with the
        ``gibbs`` transition, ``dim`` calls of ``log_f`` (one per site, :meth:`DiscreteEnergyPath.transition`):
        on the ``(rows, dim)`` batch (binary: a flip's Metropolis step), on ``(rows * (q - 1), dim)``
        (categorical: the site's other states, scored together); with a ``conditional`` (and no user
        reference), ``2C - 1`` calls of it for ``C`` classes and one of ``log_f``
        (:mod:`~logzbench.models.energy_blocks`).  With ``transition`` ``gwg`` or ``dmala``, one gradient per
        move (one forward and backward pass at the proposed state; the current state's is cached); ``"auto"``,
        whose pick is not known before its pilot, is estimated as a gradient move, the cheapest of its
        candidates per transition (its pilot picks the most effective samples per second, and a gibbs sweep
        is picked only where it wins that), or as a gibbs sweep where ``log_f`` has no usable gradient (then
        the only candidate).  One gradient (a leapfrog step; ``ais-mh`` needs only the value)
        on the continuous domain.

        Measured on states drawn from a generator of its own (the run's is not touched), on the model's
        device; a batch of more than :data:`TIMING_ELEMENTS` states is timed on a sub-batch of its rows (4 at
        least) and scaled by the rows.  ``what`` names the calls and the time of one."""
        rows = max(1, int(rows))
        auto = transition == "auto"
        if auto:  # a gradient move where log_f has a usable gradient; else auto can only pick gibbs
            transition = "gwg" if self.discrete and _has_gradient(self) else "gibbs"
        gradient_move = check_transition(transition, self) != "gibbs"
        if self.discrete and not gradient_move and self.uses_blocks(self.reference):
            return self._block_sweep_seconds(rows)
        heat_bath = self.discrete and self.n_states > 2 and not gradient_move
        batch = rows * (int(self.n_states) - 1 if heat_bath else 1)
        sub = max(min(batch, 4), min(batch, TIMING_ELEMENTS // self.dim))  # 4 rows at least, as :meth:`check`
        g = torch.Generator(device=self._device).manual_seed(0)
        if self.discrete and not gradient_move:
            x = torch.randint(0, int(self.n_states), (sub, self.dim), generator=g, device=self._device)
            x = x.to(self.dtype)

            def call():
                with torch.no_grad():
                    self._call(x)

            calls, unit = self.dim, "calls of log_f per sweep"
            if batch != rows:
                unit += f" (each on the {int(self.n_states) - 1} other states of a site)"
        else:
            if self.discrete:  # a gradient move: states of the domain, as the move differentiates them
                x = torch.randint(0, int(self.n_states), (sub, self.dim), generator=g, device=self._device)
                x = x.to(self.dtype).requires_grad_(True)
            else:
                x = torch.randn(sub, self.dim, generator=g, dtype=torch.float64, device=self._device)
                x = x.requires_grad_(True)

            def call():
                y = self._call(x)
                if isinstance(y, torch.Tensor) and y.requires_grad:  # a log_f without a graph fails in the run
                    torch.autograd.grad(y.sum(), x)

            calls, unit = 1, "gradient of log_f per " + ("move" if gradient_move else "transition")
            unit += " (auto: its cheapest candidate per transition)" if auto else ""
        per_call = time_call(call, self._device) * batch / sub
        return calls * per_call, f"{calls} {unit}, about {_short_duration(per_call)} each on {rows} chains"

    def _block_sweep_seconds(self, rows: int) -> tuple[float, str]:
        """:meth:`sweep_seconds` of block Gibbs: each class's ``fn`` call timed (twice per sweep but the
        last class's), and one ``log_f`` call."""
        sub = max(min(rows, 4), min(rows, TIMING_ELEMENTS // self.dim))
        g = torch.Generator(device=self._device).manual_seed(0)
        x = torch.randint(0, int(self.n_states), (sub, self.dim), generator=g, device=self._device).to(self.dtype)
        scale = rows / sub
        with torch.no_grad():
            per_class = [
                time_call(lambda c=c: conditional_logits(self, x, c), self._device) * scale
                for c in range(len(self.colouring))
            ]
            per_f = time_call(lambda: self._call(x), self._device) * scale
        total = 2 * sum(per_class) - per_class[-1] + per_f
        calls = 2 * len(per_class) - 1
        return total, (
            f"{calls} calls of the conditional per sweep (block Gibbs over {len(per_class)} classes, "
            f"about {_short_duration(sum(per_class) / len(per_class))} each) and 1 of log_f "
            f"(about {_short_duration(per_f)}), on {rows} chains"
        )

    # ------------------------------------------------------------------ references
    def default_reference(self, init: str = "uniform", data=None):
        """The reference ``init`` names: the user's when given; else ``uniform`` or ``base-rate`` (from
        ``data``, else the model's own ``data``; refused without either) on a discrete domain, the fitted
        or standard Gaussian on the continuous one."""
        if self.reference is not None:
            return self.reference
        rows = data if data is not None else self.data
        if self.domain_name == "continuous":
            if rows is None:
                return GaussianReference(
                    torch.zeros(self.dim, dtype=torch.float64, device=self._device),
                    torch.ones(self.dim, dtype=torch.float64, device=self._device),
                )
            return GaussianReference.fit(torch.as_tensor(rows, device=self._device))
        if init == "uniform":
            return FactorizedReference.uniform(self.dim, self.n_states, self._device)
        if init == "base-rate":
            if rows is None:
                raise ValueError(
                    "the data-base-rate initial distribution needs training rows: pass training data (CLI: "
                    "--train-data X.npy), give the EnergyModel data=, or use init uniform"
                )
            return FactorizedReference.base_rate(torch.as_tensor(rows, device=self._device), self.n_states)
        raise ValueError(f"unknown initial distribution {init!r}; choose 'uniform' or 'base-rate'")

    def reference_label(self, init: str = "uniform") -> str:
        """What :meth:`default_reference` takes for ``init`` (recorded with every estimate): ``user``,
        ``uniform``, ``base-rate`` (discrete), ``fitted-gaussian`` or ``standard-normal`` (continuous)."""
        if init == "mixture" and self.discrete:
            return "mixture"
        if self.reference is not None:
            return "user"
        if self.domain_name == "continuous":
            return "fitted-gaussian" if self.data is not None else "standard-normal"
        return "base-rate" if init == "base-rate" else "uniform"

    def annealing_path(
        self, init: str = "uniform", data=None, reference=None, transition: str = "gibbs"
    ) -> "DiscreteEnergyPath":
        """The geometric path from the reference ``init`` names (:meth:`default_reference`) to the model,
        with ``transition``'s moves (discrete domains): ``gibbs`` (Metropolis-within-Gibbs), ``gwg`` or
        ``dmala`` (:mod:`~logzbench.models.energy_moves`; refused in one line on a continuous domain, as is an
        unknown name).  ``"mixture"``: the augmented path from ``reference`` (a
        :class:`~logzbench.models.mixture.ProductMixture`, else one fitted to ``data`` or the model's own rows;
        :class:`~logzbench.models.energy_path.MixtureEnergyPath`), even when the energy has a reference of its
        own."""
        check_transition(transition, self)
        if not self.discrete:
            raise ValueError("a continuous energy anneals with Hamiltonian transitions (hais), not a Gibbs path")
        if init == "mixture":
            from .energy_path import MixtureEnergyPath
            from .mixture import mixture_reference

            rows = data if data is not None else self.data
            mix = mixture_reference(reference, rows, lambda d: self._rows(d, "training data"))
            if mix.n_sites != self.dim or mix.n_states != int(self.n_states):
                raise ValueError(
                    f"the mixture reference has {mix.n_sites} sites of {mix.n_states} states; this energy has "
                    f"{self.dim} sites of {int(self.n_states)} states"
                )
            self._check_conditional_once()
            return MixtureEnergyPath(self, mix, transition)
        self._check_conditional_once()
        return DiscreteEnergyPath(self, self.default_reference(init, data), transition)

    def _check_conditional_once(self) -> None:
        """A model built in code (not loaded, so never :meth:`check`-ed): its conditional is checked before
        its first path, so a wrong one is refused before it drives a run."""
        if self.conditional is not None and not self._conditional_checked:
            check_conditional(self)
            self._conditional_checked = True

    def proposal(self, scale: float = 1.0):
        """``(energy, sampler, log Z, grad)`` of the continuous path's start (the estimators'
        ``proposal_scale`` widens the default Gaussian; a user reference is taken as it is)."""
        if self.reference is not None:
            ref = self.reference

            def energy(x):
                return -_reference_call(ref, "log_prob", x).double()

            def sample(n, generator):
                return _reference_call(ref, "sample", n, generator)

            return energy, sample, 0.0, None
        ref = self.default_reference().scaled(scale)
        return ref.energy, ref.sample, ref.log_z(), ref.grad

    # ------------------------------------------------------------------ exact
    def n_enumerated(self) -> int:
        """States of the discrete domain, ``q^dim``."""
        return int(self.n_states) ** self.dim

    def enumerate_states(self, start: int, stop: int) -> torch.Tensor:
        """States ``start .. stop-1`` of the domain (:func:`~logzbench.models.potts.states_range`: site 0
        the fastest digit), as ``(stop - start, dim)`` tensors of ``dtype``."""
        return states_range(start, stop, self.dim, int(self.n_states), self._device).to(self.dtype)

    def exact_log_z(
        self,
        chunk_size: int | None = None,
        precision: str = "float64",
        progress: bool = False,
        return_bound: bool = False,
    ):
        """``log Z`` by enumerating the ``q^dim`` states of a discrete domain (float64 log-sum-exp of
        ``log_f`` in chunks); with ``return_bound``, also a bound on its floating-point error: the
        rounding of ``log_f``'s own output dtype at the largest ``|log f|`` seen, plus the summation's."""
        if not self.discrete:
            raise ValueError(
                f"an {self.family} model has no exact log Z (no closed form, no enumeration); use hais or the sandwich"
            )
        refuse_enumeration(self)
        n = self.n_enumerated()
        chunk = int(chunk_size or ENUMERATION_CHUNK)
        total = torch.tensor(-math.inf, dtype=torch.float64)
        worst, eps = 0.0, 2.0**-52
        with torch.no_grad():
            for start in range(0, n, chunk):
                raw = self._call(self.enumerate_states(start, min(n, start + chunk)))
                lf = _checked(raw, min(n, start + chunk) - start, self.name)
                eps = max(eps, float(torch.finfo(raw.dtype).eps))
                finite = lf[torch.isfinite(lf)]
                if finite.numel():
                    worst = max(worst, float(finite.abs().max()))
                total = torch.logaddexp(total, torch.logsumexp(lf, dim=0).cpu())
        log_z = float(total)
        if return_bound:
            return log_z, worst * eps + math.log2(max(n, 2)) * 2.0**-52
        return log_z

    def to_arrays(self):
        raise ModelFileError(
            "an energy model is code, not arrays: keep it in FILE.py (load it as FILE.py:NAME) or save a "
            "torch.nn.Module log_f with logzbench.models.energy.save_torchscript"
        )

    @classmethod
    def from_arrays(cls, arrays, source: str = "model", device=None):
        raise ModelFileError(
            f"{source}: an energy model is not an .npz file; give FILE.py:NAME or a TorchScript .pt file"
        )


def _has_gradient(model: EnergyModel) -> bool:
    """Whether the gradient moves can run on ``model`` (:func:`~logzbench.models.energy_moves.check_gradient`)."""
    try:
        check_gradient(model)
    except ValueError:
        return False
    return True


def _module_device(f) -> torch.device:
    if isinstance(f, torch.nn.Module):
        for p in list(f.parameters()) + list(f.buffers()):
            return p.device
    return torch.device("cpu")


def _module_dtype(f) -> torch.dtype | None:
    if isinstance(f, torch.nn.Module):
        for p in list(f.parameters()) + list(f.buffers()):
            if p.is_floating_point():
                return p.dtype
    return None


def time_call(call: Callable[[], Any], device=None, budget: float = TIMING_SECONDS, repeats: int = 3) -> float:
    """Seconds of one ``call()``: the fastest of up to ``repeats`` timed calls after a first one (allocations,
    lazy initialisation), fewer once ``budget`` seconds are spent; a first call of ``budget`` seconds or
    more is the answer itself (another would cost as much).  CUDA work is waited for."""
    cuda = device is not None and torch.device(device).type == "cuda"

    def timed() -> float:
        t0 = time.perf_counter()
        call()
        if cuda:
            torch.cuda.synchronize(device)
        return time.perf_counter() - t0

    first = timed()
    if first >= budget:
        return first
    best, spent = math.inf, 0.0
    for _ in range(int(repeats)):
        dt = timed()
        best, spent = min(best, dt), spent + dt
        if spent >= budget:
            break
    return best


def _short_duration(seconds: float) -> str:
    """A short time: microseconds, milliseconds or seconds."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.0f} ms"
    return f"{seconds:.1f} s"


def not_trained(*args, **kwargs):
    """The energy families' trainer entry: logzbench does not train a user's energy."""
    raise ValueError(
        "an energy model is not trained by logzbench: give the workflow entry a `source:` (FILE.py:NAME or a "
        "TorchScript .pt) instead of hyperparams"
    )


def refuse_enumeration(model: EnergyModel) -> None:
    """Refuse a domain of more than ``2^MAX_ENUMERATION_BITS`` states (a ValueError saying what to use)."""
    bits = model.dim * math.log2(model.n_states)
    if bits > MAX_ENUMERATION_BITS + 1e-9:
        raise ValueError(
            f"exact enumeration of this {model.family} model needs {model.n_states}^{model.dim} = 2^{bits:.1f} "
            f"states; refusing above 2^{MAX_ENUMERATION_BITS}. Use an estimator (ais, raise, sandwich) instead."
        )


def exact_seconds(model: EnergyModel, n_rows: int, precision: str, device) -> tuple[float, str]:
    """The exact estimator's time hook: one-thread seconds of enumerating the ``q^dim`` states, from the
    time of one call of ``log_f`` on a chunk of states (measured here, on ``device``)."""
    if not model.discrete:
        raise ValueError(f"a {model.family} model has no exact log Z; use hais or the sandwich")
    refuse_enumeration(model)
    n = model.n_enumerated()
    m = min(n, 1024)
    x = model.enumerate_states(0, m)
    with torch.no_grad():
        per_state = time_call(lambda: model._call(x), model.device) / m
    what = f"{model.n_states}^{model.dim} states"
    return per_state * n * max(1, torch.get_num_threads()), what
