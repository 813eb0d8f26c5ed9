"""One entry point for every estimator: :func:`estimate`.

>>> from logzbench.api import estimate
>>> res = estimate("model.npz", "ais", data=X_test, K=1000, chains=100, init="base-rate",
...                train_data=X_train, seed=0)                                # doctest: +SKIP
>>> res.log_z, res.log_z_stderr, res.mean_log_likelihood                      # doctest: +SKIP

The command line (``logzbench estimate``) and the Snakemake workflow call this function.  Which
estimators exist, and which models each applies to, is the registry's (:mod:`logzbench.registry`);
each estimator's module provides the ``estimate(ctx)`` this function dispatches to.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from . import registry
from .estimators.context import EstimateContext
from .estimators.result import EstimateResult
from .models.io import Model, load_model
from .options import EstimateOptions
from .utils import make_generator, resolve_device, using_threads

#: every estimator's name (:data:`logzbench.registry.ESTIMATORS`)
ESTIMATORS = registry.estimator_names()
#: estimators of continuous models (Sohl-Dickstein & Culpepper 2012)
CONTINUOUS_ESTIMATORS = tuple(n for n in registry.methods_where(kinds=("analysis", "generative")) if n != "exact")
INITS = registry.INITS

__all__ = ["CONTINUOUS_ESTIMATORS", "ESTIMATORS", "INITS", "as_rows", "estimate"]


def estimate(
    model: Model | str | os.PathLike,
    estimator: str,
    *,
    data=None,
    train_data=None,
    threads: int | None = None,
    **options: Any,
) -> EstimateResult:
    """Run one estimator on one model.

    Parameters
    ----------
    model : model object, or what :func:`logzbench.models.load_model` reads
        An RBM, DBM, DBN, Potts, continuous or energy model (:class:`logzbench.models.EnergyModel`), or
        a model file: an ``.npz``, a Potts text file, ``"FILE.py:NAME"`` or a TorchScript ``.pt`` (see
        "Model files" in the documentation, docs/models.md).
    estimator : str
        A name of :data:`logzbench.registry.ESTIMATORS` (``logzbench.registry.estimator_names()``; the
        estimator table of the documentation says what each estimates and in which direction it errs).
    data : array-like (N, n_visible) or path, optional
        Test rows (binary 0/1 for binary models, real for continuous ones).  Required by RAISE and
        CSL (and by ``exact`` on a generative model); gives ``mean_log_likelihood`` otherwise.
    train_data : array-like or path, optional
        Binary training rows: the data base rate (``init="base-rate"`` when the model file has no
        ``data_mean``) and the chain starts of biased CSL.
    **options
        Estimator options (:func:`logzbench.options.declared`: each one's default, values and meaning),
        validated by :class:`logzbench.options.EstimateOptions` before any work; ``steps`` is accepted
        for ``K``, whose default is :func:`logzbench.schedules.default_K`'s (the command line's too: 1000
        for a schedule without a length of its own, unless the estimator starts from its own K).
        Then, still before any work (:meth:`~logzbench.estimators.context.EstimateContext.check`): a
        fixed schedule (``sm14500``, a file) with another explicit ``K`` is refused, so is a run whose
        chains need more than 80 % of the memory available on the device, an ``exact``
        enumeration estimated to take longer than ``exact_max_seconds`` (default 600), and a sampling
        run on a user's energy whose calls of ``log_f`` are estimated to take longer than ``max_seconds``
        (default a day; :meth:`~logzbench.estimators.context.EstimateContext.check_time`).  An estimator reads
        those its registry entry lists (``registry.estimator(name).options``) and ignores the rest.
        The same seed gives the same estimate (to rounding across thread counts: give ``threads``
        for bit-identical reruns).
    threads : int, optional
        Torch threads for this call (torch's previous count is restored afterwards; the count used
        is recorded as ``settings["threads"]``).  Default: :func:`logzbench.utils.choose_threads`:
        ``$LOGZBENCH_THREADS``, else the CPUs this process may use minus those other processes
        keep busy right now, at least 1 and at most torch's current count.

    Returns
    -------
    EstimateResult
    """
    spec = registry.estimator(estimator)
    for key, value in spec.defaults:  # the estimator's own defaults (the sandwich's adaptive schedule)
        if options.get(key) is None:
            options[key] = value
    if "schedule" in options and options["schedule"] is None:  # not given: EstimateOptions' default
        del options["schedule"]
    opts = EstimateOptions.from_kwargs(own_start_K=spec.reads_unswept("K"), **options)
    with using_threads(threads) as n_threads:
        dev = resolve_device(opts.device)
        m = load_model(model, device=dev) if isinstance(model, (str, os.PathLike)) else model.to(dev)
        fam = registry.family(m.family)
        _check_applies(spec, fam)
        ctx = EstimateContext(
            spec=spec,
            family=fam,
            model=m,
            data=as_rows(data, m, fam, "test data"),
            train_data=as_rows(train_data, m, fam, "training data"),
            options=opts,
            generator=make_generator(opts.seed, dev),
            device=dev,
        )
        ctx.check()  # schedule, memory, exact's time budget: refused here, before any work
        res = ctx.record_transition(spec.function(ctx))
    res.settings["threads"] = n_threads
    return res


def _check_applies(spec: registry.EstimatorSpec, fam: registry.FamilySpec) -> None:
    if spec.applies_to(fam.name):
        return
    if fam.kind in spec.kinds:  # restricted to some families of this kind (CSL: RBMs)
        raise ValueError(
            f"{spec.name.upper()} is implemented for {fam.kind} "
            f"{', '.join(f.upper() + 's' for f in spec.families or ())} only, not for a {fam.name.upper()}"
        )
    if fam.kind in ("binary", "categorical"):
        raise ValueError(
            f"{spec.name} is for continuous models (PoE, mcRBM, linear / bilinear generative, a continuous "
            f"energy); this is a {fam.kind} {fam.name.upper()}: use one of {registry.estimators_for(fam.name)}"
        )
    raise ValueError(
        f"{spec.name!r} is not available for a continuous ({fam.name}) model; choose one of "
        f"{registry.estimators_for(fam.name)}"
    )


def as_rows(x, model, fam: registry.FamilySpec, what: str) -> torch.Tensor | None:
    """Data rows checked against ``model``, as a tensor on its device: binary 0/1 rows (float32) for
    a binary model, states ``0 .. q-1`` (int64) for a categorical one, finite real rows (float64) for a
    continuous one.  A path is read with
    :func:`logzbench.data.load_rows` (a prepared dataset's ``test`` split, or an ``.npy``)."""
    if x is None:
        return None
    from .data import check_binary_rows, check_categorical_rows, check_real_rows, load_rows

    if isinstance(x, (str, os.PathLike)):
        x = load_rows(x, fam.data_kind, "test")
    if fam.data_kind == "binary":
        arr = check_binary_rows(x, what, model.n_visible)
        return torch.as_tensor(arr, dtype=torch.float32, device=model.device)
    if fam.data_kind == "categorical":
        arr = check_categorical_rows(x, what, model.n_visible, model.n_states)
        return torch.as_tensor(arr, dtype=torch.int64, device=model.device)
    arr = check_real_rows(x, what, model.n_dims)
    return torch.as_tensor(arr, dtype=torch.float64, device=model.device)
