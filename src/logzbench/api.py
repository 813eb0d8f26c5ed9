"""One entry point for every estimator: :func:`estimate`.

>>> from logzbench.api import estimate
>>> res = estimate("model.npz", "ais", data=X_test, steps=1000, chains=100, init="base-rate",
...                train_data=X_train, seed=0)                                # doctest: +SKIP
>>> res.log_z, res.log_z_stderr, res.mean_log_likelihood                      # doctest: +SKIP

The command line (``logzbench estimate``) and the Snakemake workflow call this function.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from .estimators.ads import ads, ads_multinomial
from .estimators.ais import ais, attach_log_likelihood
from .estimators.csl import csl
from .estimators.exact import exact
from .estimators.is_family import ESTIMATORS as IS_FAMILY
from .estimators.is_family import is_family
from .estimators.raise_ import raise_estimate
from .estimators.reverse_ais import reverse_ais
from .estimators.result import EstimateResult
from .models._importance import LogFEstimate
from .models.dbm import DBM
from .models.io import Model, load_model
from .models.rbm import BinaryRBM
from .schedules import make_schedule
from .utils import make_generator, resolve_device

#: estimators of continuous models (Sohl-Dickstein & Culpepper 2012)
CONTINUOUS_ESTIMATORS = ("hais", "ais-hmc", "ais-mh")
ESTIMATORS = ("exact", "ais", "raise", "csl", "ads", "ads-multinomial", "reverse-ais") + IS_FAMILY + CONTINUOUS_ESTIMATORS
INITS = ("uniform", "base-rate")


def _as_rows(x, rbm: Model, what: str) -> torch.Tensor | None:
    if x is None:
        return None
    from .data import check_binary_rows, load_binary_rows

    if isinstance(x, (str, os.PathLike)):
        x = load_binary_rows(x)
    arr = check_binary_rows(x, what, rbm.n_visible)
    return torch.as_tensor(arr, dtype=torch.float32, device=rbm.device)


def _as_real_rows(x, model, what: str) -> torch.Tensor | None:
    """Real-valued rows ``(n, model.n_dims)`` (float64) for a continuous model; a path is read as a
    prepared patches file (its ``test`` split) or an ``.npy``."""
    if x is None:
        return None
    if isinstance(x, (str, os.PathLike)):
        from .data.vanhateren import load_real_rows

        x = load_real_rows(x, "test")
    arr = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != model.n_dims or arr.shape[0] == 0:
        raise ValueError(f"{what} has shape {arr.shape}; expected rows of {model.n_dims} real values")
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} contains NaN or inf ({int((~np.isfinite(arr)).sum())} entries)")
    return torch.as_tensor(arr, dtype=torch.float64, device=model.device)


def _estimate_continuous(model, estimator: str, X, *, steps, schedule, chains, seed, dev, step_size, gamma,
                         mh_sigma, proposal_scale, n_bootstrap, progress) -> EstimateResult:
    """Closed forms (``exact``) and HAIS / its baselines on a continuous model."""
    from .estimators.hais import hais, per_example_sd

    common: dict[str, Any] = {"seed": int(seed), "device": str(dev), "estimator": estimator,
                              "model_family": model.family, "model_kind": model.kind}
    if estimator == "exact":
        import time

        t0 = time.perf_counter()
        if model.kind == "analysis":
            log_z = model.exact_log_z()
            if log_z is None:
                raise ValueError(f"a {model.family} model of this size has no closed-form log Z "
                                 f"(closed forms: complete PoE, L = M); use hais")
            res = EstimateResult(estimator="exact", log_z=float(log_z), log_z_stderr=0.0,
                                 log_z_ci=(float(log_z), float(log_z)), settings=common)
            if X is not None:
                attach_log_likelihood(res, -model.energy(X).double())
                res.extra["per_example_ll_sd"] = per_example_sd(res.per_example_log_likelihood)
        else:
            if X is None:
                raise ValueError("the exact log-likelihood of a generative model needs test data")
            ll = model.exact_log_likelihood(X)
            if ll is None:
                raise ValueError(f"a {model.family} model has no closed-form likelihood "
                                 f"(closed forms: Gaussian prior, or Phi = 0); use hais")
            ll = ll.double().cpu().numpy()
            res = EstimateResult(estimator="exact", mean_log_likelihood=float(ll.mean()),
                                 mean_log_likelihood_stderr=0.0,
                                 mean_log_likelihood_ci=(float(ll.mean()), float(ll.mean())),
                                 per_example_log_likelihood=ll, settings=common,
                                 extra={"per_example_ll_sd": per_example_sd(ll)})
        res.seconds = time.perf_counter() - t0
        return res
    if estimator not in CONTINUOUS_ESTIMATORS:
        raise ValueError(f"{estimator!r} is not available for a continuous ({model.family}) model; choose one of "
                         f"{('exact',) + CONTINUOUS_ESTIMATORS}")
    gen = make_generator(seed, dev)
    return hais(model, estimator, make_schedule(schedule, steps), chains, gen, data=X, step_size=step_size,
                gamma=gamma, mh_sigma=mh_sigma, proposal_scale=proposal_scale, n_bootstrap=n_bootstrap,
                progress=progress, settings={**common, "schedule": schedule})


def log_f_estimate(model: Model, X: torch.Tensor, generator: torch.Generator,
                   n_samples: int = 500) -> tuple[LogFEstimate | None, float | None]:
    """Importance-sampling ``log f(v)`` of each row for a DBM or DBN (RAISE Sec. 5.2 / 5.3), and
    for a DBM the mean of its mean-field lower bound (sharing one mean-field solve);
    ``(None, None)`` for an RBM, whose ``log f(v)`` is exact (the hidden layer is summed out)."""
    if isinstance(model, BinaryRBM):
        return None, None
    if isinstance(model, DBM):
        mu = model.mean_field(X)
        return (model.importance_log_f(X, n_samples, generator, mu=mu),
                float(model.mean_field_bound(X, mu=mu).mean()))
    return model.importance_log_f(X, n_samples, generator), None


def _deep_extras(est: LogFEstimate, mean_field: float | None, n_samples: int) -> dict:
    """Summary of the ``log f(v)`` estimates of a deep model (and the DBM mean-field bound)."""
    out = {"is_samples": int(n_samples), "mean_log_f_is": float(est.log_f.mean()),
           "mean_log_f_is_stderr": float(torch.sqrt((est.stderr**2).sum()) / len(est.log_f)),
           # log f-hat is a stochastic lower bound; to second order it errs low by Var/2 = se^2/2
           # (an underestimate when the weights are heavy-tailed: watch the ESS)
           "mean_log_f_is_jensen_gap": float((est.stderr**2).mean() / 2),
           "is_ess_mean": float(est.ess.mean()), "is_ess_min": float(est.ess.min())}
    if mean_field is not None:
        out["mean_log_f_mean_field"] = mean_field
    return out


def estimate(model: Model | str | os.PathLike, estimator: str, *, data=None, train_data=None,
             steps: int | None = None, schedule: str = "linear", chains: int = 100, init: str = "uniform",
             seed: int = 0, device: str | None = "cpu", n_examples: int | None = None,
             csl_mode: str = "unbiased", burn_in: int = 100, thin: int = 1, samples_per_chain: int = 10,
             is_samples: int = 500, n_bootstrap: int = 1000, progress: bool = False, step_size: float = 0.2,
             gamma: float | None = None, mh_sigma: float = 0.1, proposal_scale: float = 1.0) -> EstimateResult:
    """Run one estimator on one model.

    Parameters
    ----------
    model : BinaryRBM, DBM, DBN or path to a model ``.npz``
    estimator : {"exact", "ais", "raise", "csl", "ads", "ads-multinomial", "reverse-ais", "is", "ris", "is-avg", \
"is-weighted", "is-select", "ds"}
        ``ads``: sequential binary annealed discriminance sampling on an AIS run
        (``ads-multinomial``: Alg. 2, for ``(K+1)^2 * chains <= 2^24``); ``reverse-ais``:
        ``log Z`` from a forward-then-reverse chain with harmonic aggregation (Liu et al. 2015).
        The IS family (:mod:`logzbench.estimators.is_family`) uses the path's endpoints only:
        ``chains`` exact samples of ``p_0`` (``init``) and ``chains`` model samples after
        ``burn_in`` Gibbs sweeps; ``is``, reverse IS ``ris``, the combinations ``is-avg``,
        ``is-weighted``, ``is-select`` and discriminance sampling ``ds``.
    data : array-like (N, n_visible) or path, optional
        Binary test rows.  Required by RAISE and CSL; gives ``mean_log_likelihood`` otherwise.
    train_data : array-like or path, optional
        Training rows: the data base rate (``init="base-rate"`` when the model file has no
        ``data_mean``) and the chain starts of biased CSL.
    steps : int
        Number of intermediate distributions ``K`` (AIS, RAISE, ADS, reverse AIS).
    schedule : str
        ``linear``, ``sigmoid``, ``sm14500`` or a file of betas (AIS, RAISE).
    chains : int
        AIS chains; RAISE chains per example; CSL parallel Gibbs chains; IS family: samples per side.
    init : {"uniform", "base-rate"}
        Initial distribution of the annealing path (AIS, RAISE).
    seed : int
        Seeds the run's single :class:`torch.Generator`; the same seed gives the same estimate.
    device : str
        ``cpu``, ``cuda`` or ``auto``.
    n_examples : int, optional
        RAISE: random subsample of the test set (control variates correct the mean).
    csl_mode, burn_in, thin, samples_per_chain :
        CSL settings (see :func:`logzbench.estimators.csl.csl`); ``burn_in`` is also the number
        of Gibbs sweeps per target sample of the IS family.
    is_samples : int
        DBM / DBN: importance samples per example for ``log f(v)`` (AIS test log-likelihood,
        RAISE control variate).
    step_size, gamma, mh_sigma, proposal_scale :
        Continuous models (``hais``, ``ais-hmc``, ``ais-mh``; see
        :func:`logzbench.estimators.hais.hais`): leapfrog step (0.2), momentum refresh fraction
        (default: half the momentum power per unit time), random-walk scale (0.1), standard
        deviation of the Gaussian proposal of analysis models.  ``exact`` uses the closed forms.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {ESTIMATORS}")
    dev = resolve_device(device)
    rbm = load_model(model, device=dev) if isinstance(model, (str, os.PathLike)) else model.to(dev)
    if getattr(rbm, "kind", None) in ("analysis", "generative"):
        if int(chains) < 1:
            raise ValueError(f"number of chains must be >= 1, got {chains}")
        return _estimate_continuous(rbm, estimator, _as_real_rows(data, rbm, "test data"), steps=steps,
                                    schedule=schedule, chains=chains, seed=seed, dev=dev, step_size=step_size,
                                    gamma=gamma, mh_sigma=mh_sigma, proposal_scale=proposal_scale,
                                    n_bootstrap=n_bootstrap, progress=progress)
    if estimator in CONTINUOUS_ESTIMATORS:
        raise ValueError(f"{estimator} is for continuous models (PoE, mcRBM, linear / bilinear generative); "
                         f"this is a binary {rbm.family.upper()}: use ais")
    X = _as_rows(data, rbm, "test data")
    X_train = _as_rows(train_data, rbm, "training data")
    if int(chains) < 1:
        raise ValueError(f"number of chains must be >= 1, got {chains}")
    gen = make_generator(seed, dev)
    common: dict[str, Any] = {"seed": int(seed), "device": str(dev), "estimator": estimator}

    if estimator == "exact":
        res = exact(rbm, X, progress=progress)
        res.settings.update(common)
        return res

    if estimator == "csl":
        if not isinstance(rbm, BinaryRBM):
            raise ValueError(f"CSL is implemented for binary RBMs only, not for a {rbm.family.upper()}")
        if X is None:
            raise ValueError("CSL estimates test log-likelihoods: give test data")
        return csl(rbm, X, gen, n_chains=chains, samples_per_chain=samples_per_chain, burn_in=burn_in,
                   thin=thin, mode=csl_mode, train_data=X_train, progress=progress, settings=common)

    if estimator == "raise" and X is None:
        raise ValueError("RAISE estimates test log-likelihoods: give test data")
    if init not in INITS:
        raise ValueError(f"unknown initial distribution {init!r}; choose one of {INITS}")
    betas = None if estimator in IS_FAMILY else make_schedule(schedule, steps)
    path = rbm.annealing_path(init, data=X_train)
    settings = {**common, "init": init, "schedule": schedule, "model_family": rbm.family}
    if not isinstance(rbm, BinaryRBM):
        settings["is_samples"] = int(is_samples)
    log_f = log_f_se = est = None
    if X is not None:
        est, mean_field = log_f_estimate(rbm, X, gen, is_samples)
        log_f, log_f_se = (rbm.log_unnormalized_marginal(X), None) if est is None else (est.log_f, est.stderr)
    if estimator in IS_FAMILY:  # the path's endpoints only (Liu et al. 2015, Sec. 3-4)
        res = is_family(path, estimator, chains, gen, burn_in=burn_in, n_bootstrap=n_bootstrap,
                        settings=settings)
        if log_f is not None:
            attach_log_likelihood(res, log_f, log_f_se)
    elif estimator == "ais":
        res = ais(path, betas, chains, gen, log_f_data=log_f, log_f_stderr=log_f_se, n_bootstrap=n_bootstrap,
                  progress=progress, settings=settings)
    elif estimator in ("ads", "ads-multinomial", "reverse-ais"):  # log Z from one annealing run (Liu et al. 2015)
        run = {"ads": ads, "ads-multinomial": ads_multinomial, "reverse-ais": reverse_ais}[estimator]
        res = run(path, betas, chains, gen, n_bootstrap=n_bootstrap, progress=progress, settings=settings)
        if log_f is not None:
            attach_log_likelihood(res, log_f, log_f_se)
    else:
        res = raise_estimate(path, X, betas, chains, gen, log_f_all=log_f, n_examples=n_examples,
                             subsample_seed=seed, progress=progress, settings=settings)
    if est is not None:
        res.extra.update(_deep_extras(est, mean_field, is_samples))
    return res
