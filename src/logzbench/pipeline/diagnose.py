"""Per-model diagnostics of the workflow (rule ``diagnose``): what a log-likelihood alone does not show.

Burda et al. (RAISE, Sec. 5 and Figs. 5-6) explain an estimate that looks wrong by looking at the
model: its samples beside the samples of the annealing model ``p_ann``, and the share of its
probability mass on its most probable hidden configurations ("93% of the mass on one hidden
configuration" for mnistCD1-20).  Sohl-Dickstein & Culpepper (HAIS, Fig. 1) show the learned bases
of the continuous models.  :func:`diagnose_job` writes, per model, ``results/diagnostics/<model>.json``
and ``results/diagnostics/<model>_samples.npz`` (both or neither) with

``samples`` (binary RBMs whose dataset has an image shape)
    ``n_samples`` samples of the model at ``beta = 1`` and of ``p_ann`` (AIS's final states at the
    largest ``K`` of the config's AIS sweep, from the data base rate where the family has it, else
    uniform), by :func:`logzbench.sampling.sample` (exact where the smaller layer has at most
    ``diagnostics.exact_max_units`` units, else Gibbs after ``burn_in`` sweeps); arrays ``samples`` and
    ``annealed_samples``, ``(n_samples, n_visible)``.
``filters`` (continuous families with a weight matrix, :data:`FILTERS`)
    The learned filters or bases, one per row, mapped back to pixels where the dataset is whitened
    PCA patches (:func:`filters_in_pixels`); array ``filters``, ``(n_filters, n_pixels)``.
``hidden_mass`` (binary RBMs)
    The probability under ``p(h)`` of the top-1, top-10 and top-100 hidden configurations
    (:data:`TOP`): exact by enumerating ``2^H`` states (:func:`hidden_mass_exact`) where ``H`` is at most
    the config's ``diagnostics.exact_max_units``, else the frequencies of the most frequent configurations
    among ``hidden_samples`` draws of ``h`` (:func:`hidden_mass_from_samples`) with their binomial
    standard errors; array ``hidden_top_states`` ``(k, H)``, the most probable configurations.
``per_class`` (families with a tractable ``log f(v)`` on data with test labels)
    Per class of the test rows: count, mean test log-likelihood ``mean(log f(v)) - log Z`` and the
    standard error of the mean over rows, with the overall mean; ``log Z`` is exact where an exact
    estimate ran or ``h`` was enumerated, else the workflow's AIS estimate at its largest ``K`` (mean
    over seeds), else a small AIS run here (:func:`log_z_for`), its standard error shared by every
    class.  Deep families (DBM, DBN) record why it is not available.

The functions that decide which models get a job and with which settings (:func:`diagnosed_models`,
:func:`diagnose_settings`, :func:`diagnose_estimators`, :func:`diagnostic_figures`) import no torch: the
workflow's DAG calls them.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from .. import registry

if TYPE_CHECKING:
    from .plan import Plan

__all__ = [
    "FILTERS",
    "SAMPLED_FAMILIES",
    "TOP",
    "diagnose_estimators",
    "diagnose_job",
    "diagnose_settings",
    "diagnosed_models",
    "diagnostic_figures",
    "figure_names",
    "filters_in_pixels",
    "hidden_mass_exact",
    "hidden_mass_from_samples",
    "log_z_for",
    "per_class_log_likelihood",
]

#: the top-k hidden configurations whose probability mass is reported
TOP = (1, 10, 100)
#: families whose samples and hidden-configuration mass are diagnosed (binary RBMs: RAISE Figs. 5-6)
SAMPLED_FAMILIES = ("rbm",)
#: continuous families with learned filters / bases: {family: (model-file array, "rows" | "columns", kind)},
#: the kind telling how a filter maps back to pixels (:func:`filters_in_pixels`)
FILTERS = {
    "poe-laplace": ("Phi", "rows", "analysis"),
    "poe-student-t": ("Phi", "rows", "analysis"),
    "mcrbm": ("C", "rows", "analysis"),
    "linear-gaussian": ("Phi", "columns", "generative"),
    "linear-laplace": ("Phi", "columns", "generative"),
    "bilinear": ("Phi", "columns", "generative"),
    "grbm": ("W", "columns", "generative"),
}
#: deep families: their ``log f(v)`` needs an enumeration or importance sampling per test row
_DEEP_REASON = (
    "log f(v) of a {family} is not available in closed form (it needs an enumeration or importance sampling "
    "per test row)"
)


# --------------------------------------------------------------------------- which jobs (no torch)
def diagnosed_models(plan: Plan) -> list[str]:
    """The models with a diagnose job, in config order: none when ``diagnostics.enabled`` is false; else
    every trained model (not a source model) of a binary RBM, a deep family (its record says what is not
    available) or a continuous family with filters (:data:`FILTERS`)."""
    d = plan.config.get("diagnostics") or {}
    if not d.get("enabled", True):
        return []
    families = {*SAMPLED_FAMILIES, "dbm", "dbn", *FILTERS}
    return [name for name, m in plan.models.items() if not m.is_source and m.family.name in families]


def figure_names(family: str, learner: str | None = None) -> tuple[str, ...]:
    """The report's figures ``plots/<model>_<name>.png`` of a diagnosed model: ``samples`` and
    ``annealed_samples`` of a binary RBM, ``filters`` of a family of :data:`FILTERS`; none for a model a
    black-box learner trained (the learner report draws its samples and filters under the same names)."""
    if learner:
        return ()
    if family in SAMPLED_FAMILIES:
        return ("samples", "annealed_samples")
    return ("filters",) if family in FILTERS else ()


def diagnostic_figures(plan: Plan) -> list[str]:
    """The file stems (``<model>_<name>``) of every diagnostics figure of the config's report, in config
    order (:func:`figure_names` of each of :func:`diagnosed_models`)."""
    return [
        f"{m}_{name}"
        for m in diagnosed_models(plan)
        for name in figure_names(plan.models[m].family.name, plan.models[m].learner)
    ]


def diagnose_estimators(plan: Plan, model: str) -> list[str]:
    """The estimators of the model's sweep whose records :func:`log_z_for` may read: exact and AIS
    (method ``ais``), in config order (their directories are the rule's inputs); none for a deep model,
    whose per-class log-likelihoods are not available."""
    if plan.models[model].family.deep:
        return []
    return [e for m, e in plan.sweep_pairs if m == model and plan.estimators[e].method in ("exact", "ais")]


def _annealed_K(plan: Plan, model: str) -> int:
    """The largest K of the model's AIS sweep (every entry of method ``ais``), else of ``evaluation.K``."""
    ks = [
        int(j.K)
        for e in diagnose_estimators(plan, model)
        if plan.estimators[e].method == "ais"
        for j in plan.models[model].jobs_of(e)
        if j.K is not None
    ]
    return max(ks) if ks else int(max(plan.config["evaluation"]["K"]))


def diagnose_settings(plan: Plan, model: str) -> dict[str, Any]:
    """The settings of one model's diagnose job (the rule's params: changing one reruns the job).

    Returns
    -------
    dict
        ``model``, ``family``, ``dataset``, ``learner`` (the black-box learner that trained it, or
        ``None``: its own figures are the learner report's), ``init`` (``base-rate`` where the family has
        it, else ``uniform``), ``annealed_K``, ``device`` and the config's ``diagnostics`` section
        (``n_samples``, ``burn_in``, ``hidden_samples``, ``hidden_chains``, ``exact_max_units``,
        ``ais_chains``, ``seed``).
    """
    d = dict(plan.config["diagnostics"])
    d.pop("enabled", None)
    m = plan.models[model]
    return {
        "model": model,
        "family": m.family.name,
        "dataset": m.dataset,
        "learner": m.learner,
        "init": "base-rate" if "base-rate" in m.inits else "uniform",
        "annealed_K": _annealed_K(plan, model),
        "device": str(plan.config.get("device", "cpu")),
        **d,
    }


# --------------------------------------------------------------------------- hidden configurations
def hidden_mass_exact(rbm, top: Sequence[int] = TOP, *, chunk: int = 1 << 14) -> dict[str, Any]:
    """Probability under an RBM's marginal ``p(h)`` of its ``k`` most probable hidden configurations, by
    enumerating all ``2^H`` of them.

    ``log p(h) = log f(h) - log Z`` with ``log f(h) = c.h + sum_i softplus(b_i + W_i h)``
    (:meth:`~logzbench.models.BinaryRBM.log_unnormalized_hidden_marginal`, float64) and ``log Z`` the
    log-sum-exp of the same enumeration; the running top ``max(top)`` values are kept chunk by chunk.

    Parameters
    ----------
    rbm : BinaryRBM
        ``H = n_hidden`` at most :data:`logzbench.models.enumeration.MAX_ENUMERATION_BITS`.
    top : sequence of int
        The ``k`` of each reported mass.
    chunk : int
        States per step (memory ~ ``chunk * n_visible`` float64 values).

    Returns
    -------
    dict
        ``method`` = ``"exact"``, ``H``, ``n_states`` (``2^H``), ``log_z``, ``top<k>`` for each ``k`` (its
        mass, capped by ``2^H``), ``top_states`` (``(min(max(top), 2^H), H)`` uint8, most probable first) and
        ``top_log_p`` (their ``log p(h)``).
    """
    import torch
    from scipy.special import logsumexp

    from ..models.enumeration import MAX_ENUMERATION_BITS, state_bits

    H = int(rbm.n_hidden)
    if H > MAX_ENUMERATION_BITS:
        raise ValueError(f"cannot enumerate 2^{H} hidden configurations (at most 2^{MAX_ENUMERATION_BITS})")
    kmax = max(top)
    n_states = 1 << H
    best_v = torch.empty(0, dtype=torch.float64)
    best_i = torch.empty(0, dtype=torch.int64)
    parts = []
    with torch.no_grad():
        for start in range(0, n_states, chunk):
            stop = min(n_states, start + chunk)
            h = state_bits(start, stop, H, rbm.device, torch.float64)
            lf = rbm.log_unnormalized_hidden_marginal(h).cpu()
            parts.append(torch.logsumexp(lf, 0))
            v = torch.cat([best_v, lf])
            i = torch.cat([best_i, torch.arange(start, stop, dtype=torch.int64)])
            k = min(kmax, len(v))
            best_v, idx = torch.topk(v, k)
            best_i = i[idx]
        log_z = float(torch.logsumexp(torch.stack(parts), 0))
    log_p = best_v.numpy() - log_z
    out: dict[str, Any] = {"method": "exact", "H": H, "n_states": n_states, "log_z": log_z}
    for k in top:
        out[f"top{k}"] = float(math.exp(logsumexp(log_p[:k])))
    out["top_states"] = ((best_i.numpy()[:, None] >> np.arange(H)) & 1).astype(np.uint8)
    out["top_log_p"] = log_p
    return out


def hidden_mass_from_samples(h: np.ndarray, top: Sequence[int] = TOP, *, chains: int | None = None) -> dict[str, Any]:
    """The mass of the ``k`` most frequent hidden configurations among draws of ``p(h)``.

    Parameters
    ----------
    h : array-like, shape (N, H)
        Binary hidden states, each a draw of ``p(h)``.
    top : sequence of int
    chains : int, optional
        The draws come from this many Markov chains, row ``i`` from chain ``i % chains`` (the layout of
        :func:`logzbench.sampling.sample`'s MCMC draws).  With at least two chains and ``N`` a multiple of
        ``chains``, the standard error is the spread over chains of each chain's own frequency of the same
        ``k`` configurations (batch means: it includes the autocorrelation within a chain); otherwise the
        draws are taken as independent.

    Returns
    -------
    dict
        ``method`` = ``"samples"``, ``H``, ``n_samples`` (``N``), ``n_distinct``, ``top<k>`` (the summed
        frequency of the ``k`` most frequent configurations), ``top<k>_se`` (the binomial standard error
        ``sqrt(q (1 - q) / N)`` of independent draws with ``q = (count + 1) / (N + 2)``, which is not 0 at a
        frequency of 0 or 1, or the between-chain one above, whichever is larger), ``se_method``,
        ``top_states`` (``(min(max(top), n_distinct), H)`` uint8, most frequent first) and ``top_counts``.
        Choosing the most frequent configurations from the same draws biases ``top<k>`` up by about the
        spread of the counts of configurations of near-equal probability; with one dominant configuration
        the bias is negligible.
    """
    h = np.asarray(h)
    if h.ndim != 2 or len(h) == 0:
        raise ValueError(f"hidden samples must be a non-empty (N, H) array; got shape {h.shape}")
    states, inverse, counts = np.unique(h.astype(np.uint8), axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    order = np.lexsort((np.arange(len(counts)), -counts))  # most frequent first, ties in state order
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    row_rank = rank[inverse]  # each draw's configuration's rank
    n = len(h)
    by_chain = chains is not None and chains >= 2 and n % chains == 0
    out: dict[str, Any] = {
        "method": "samples",
        "H": int(h.shape[1]),
        "n_samples": int(n),
        "n_distinct": len(counts),
        "se_method": "larger of binomial and between-chain" if by_chain else "binomial (independent draws)",
    }
    for k in top:
        hit = row_rank < k
        p = float(hit.mean())
        q = (float(hit.sum()) + 1.0) / (n + 2.0)  # never 0 or 1: a frequency of 0 or 1 is not certain
        se = math.sqrt(q * (1.0 - q) / n)
        if by_chain:
            per_chain = hit.reshape(-1, chains).mean(axis=0)
            se = max(se, float(per_chain.std(ddof=1)) / math.sqrt(chains))
        out[f"top{k}"] = p
        out[f"top{k}_se"] = se
    out["top_states"] = states[order][: max(top)]
    out["top_counts"] = counts[order][: max(top)].astype(np.int64)
    return out


# --------------------------------------------------------------------------- per-class log-likelihood
def per_class_log_likelihood(
    log_f: np.ndarray, labels: np.ndarray, log_z: float, log_z_se: float = 0.0
) -> dict[str, Any]:
    """Mean test log-likelihood per class of the test rows, and overall.

    Parameters
    ----------
    log_f : array-like, shape (N,)
        ``log f(v)`` of each test row (float64).
    labels : array-like, shape (N,)
        Each row's class.
    log_z, log_z_se : float
        ``log Z`` and its standard error (shared by every class: it shifts every mean together).

    Returns
    -------
    dict
        ``classes``: one dict per class, in increasing label order, with ``class``, ``n``,
        ``mean_test_ll`` (``mean(log f) - log Z``) and ``se`` (standard error of the mean over the class's
        rows, ``ddof = 1``; NaN for one row); ``overall``: the same over all rows, its mean the
        count-weighted mean of the class means (equal to the plain mean of all rows up to rounding);
        ``log_z`` and ``log_z_se``.
    """
    log_f = np.asarray(log_f, dtype=np.float64)
    labels = np.asarray(labels)
    if log_f.ndim != 1 or labels.shape != log_f.shape:
        raise ValueError(f"log_f {log_f.shape} and labels {labels.shape} must be two arrays of the same length")
    if not len(log_f):
        raise ValueError("no test rows")

    def summary(x: np.ndarray) -> tuple[float, float]:
        mean = math.fsum(x) / len(x) - log_z
        se = float(np.std(x, ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("nan")
        return mean, se

    classes = []
    for c in np.unique(labels):
        x = log_f[labels == c]
        mean, se = summary(x)
        classes.append({"class": c.item(), "n": len(x), "mean_test_ll": mean, "se": se})
    n = len(log_f)
    _, se_all = summary(log_f)
    overall = math.fsum(r["n"] * r["mean_test_ll"] for r in classes) / n
    return {
        "classes": classes,
        "overall": {"class": "all", "n": n, "mean_test_ll": overall, "se": se_all},
        "log_z": float(log_z),
        "log_z_se": float(log_z_se),
    }


def _records(dirs: Sequence[str | os.PathLike]) -> list[dict[str, Any]]:
    import json

    out = []
    for d in dirs:
        for path in sorted(Path(d).glob("*.json")):
            with open(path) as f:
                out.append(json.load(f))
    return out


def log_z_for(
    records: Sequence[Mapping[str, Any]],
    *,
    enumerated: float | None = None,
    run_ais: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """The ``log Z`` a model's per-class log-likelihoods use, and where it comes from.

    In order: an ``exact`` estimate record (``source`` = ``"exact"``); else ``enumerated`` (``h`` enumerated
    here, ``"exact (enumerated here)"``); else the AIS records (method ``ais``) at their largest ``K``, of
    one estimator and initial distribution (``ais`` before other names, ``base-rate`` before ``uniform``),
    averaged over seeds (``"ais (workflow, K=..., init=..., n seeds)"``; standard error
    ``sqrt(sum se_i^2) / n`` of the records' own); else ``run_ais()``, an
    :class:`~logzbench.estimators.result.EstimateResult` (``"ais (run here, ...)"``).  AIS's ``log Z`` is a
    stochastic lower bound: the log-likelihoods it gives err high.

    Returns
    -------
    dict
        ``source``, ``log_z``, ``log_z_se`` (0 for an exact value).
    """
    exact = [r for r in records if r.get("method") == "exact" and r.get("result", {}).get("log_z") is not None]
    if exact:
        return {"source": "exact", "log_z": float(exact[0]["result"]["log_z"]), "log_z_se": 0.0}
    if enumerated is not None:
        return {"source": "exact (enumerated here)", "log_z": float(enumerated), "log_z_se": 0.0}
    ais = [
        r
        for r in records
        if r.get("method") == "ais" and r.get("K") is not None and _finite(r.get("result", {}).get("log_z"))
    ]
    if ais:
        kmax = max(int(r["K"]) for r in ais)
        at_k = [r for r in ais if int(r["K"]) == kmax]
        init_rank = {"base-rate": 0, "uniform": 1}
        est, init = min(
            {(r["estimator"], r.get("init")) for r in at_k},
            key=lambda p: (p[0] != "ais", init_rank.get(p[1], 2), p[0], str(p[1])),
        )
        chosen = [r for r in at_k if r["estimator"] == est and r.get("init") == init]
        lz = [float(r["result"]["log_z"]) for r in chosen]
        se = [float(r["result"].get("log_z_stderr") or 0.0) for r in chosen]
        n = len(chosen)
        return {
            "source": f"{est} (workflow, K={kmax}, init={init}, {n} seed{'s' * (n != 1)})",
            "log_z": math.fsum(lz) / n,
            "log_z_se": math.sqrt(math.fsum(s * s for s in se)) / n,
        }
    if run_ais is None:
        raise ValueError("no exact or AIS estimate of log Z and no AIS to run")
    res = run_ais()
    s = res.settings
    return {
        "source": f"ais (run here, K={s.get('K')}, init={s.get('init')}, {s.get('chains')} chains)",
        "log_z": float(res.log_z),
        "log_z_se": float(res.log_z_stderr),
    }


def _finite(x) -> bool:
    return x is not None and math.isfinite(float(x))


# --------------------------------------------------------------------------- filters
def filters_in_pixels(model, family: str, whitening: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """The learned filters (analysis models) or bases (generative models) of a continuous model, one per row.

    Parameters
    ----------
    model : a continuous model of :data:`FILTERS`' families
    family : str
    whitening : mapping, optional
        ``pca_components`` (M, P*P) and ``whitening_scale`` (M,) of whitened PCA patches
        (:func:`logzbench.data.vanhateren.load_whitening`).  A filter ``phi`` applied to whitened rows
        ``x = diag(1/s) P (y - mu)`` is the pixel filter ``phi diag(1/s) P``; a basis ``a`` of whitened rows
        is the pixel basis ``(s a) P``.  ``None``: the filters as stored.

    Returns
    -------
    numpy.ndarray, shape (n_filters, n_pixels), float64
    """
    key, layout, kind = FILTERS[family]
    W = np.asarray(model.to_arrays()[key], dtype=np.float64)
    F = W if layout == "rows" else W.T
    if whitening is None:
        return F
    P = np.asarray(whitening["pca_components"], dtype=np.float64)
    s = np.asarray(whitening["whitening_scale"], dtype=np.float64)
    return (F / s if kind == "analysis" else F * s) @ P


def _dataset_view(path: str | os.PathLike, kind: str) -> tuple[tuple[int, int] | None, dict | None]:
    """(image shape of a dataset's rows or of its patches, the PCA whitening of patches or ``None``)."""
    from ..data import load_meta

    with np.load(path, allow_pickle=False) as npz:
        files = set(npz.files)
        shape = tuple(int(s) for s in npz["image_shape"]) if "image_shape" in files else None
    if "pca_components" in files:
        from ..data.vanhateren import load_whitening

        w = load_whitening(path)
        return (w["patch_size"], w["patch_size"]), w
    if shape is None and kind == "binary":
        meta_shape = load_meta(path).get("image_shape")
        shape = tuple(int(s) for s in meta_shape) if meta_shape else None
    return (shape if shape and len(shape) == 2 else None), None


# --------------------------------------------------------------------------- the job
def _sample_info(res) -> dict[str, Any]:
    return {
        "method": res.method,
        "n": int(len(res.x)),
        "burn_in": int(res.burn_in),
        "sweeps": int(res.sweeps),
        "seconds": float(res.seconds),
        "settings": dict(res.settings),
    }


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def diagnose_job(
    settings: Mapping[str, Any],
    *,
    model: str | os.PathLike,
    data: str | os.PathLike,
    estimates: Sequence[str | os.PathLike] = (),
    out_json: str | os.PathLike,
    out_npz: str | os.PathLike,
    hidden_method: str = "auto",
    log: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """One model's diagnostics (rule ``diagnose``; the module docstring lists what, for which families).

    Parameters
    ----------
    settings : mapping
        :func:`diagnose_settings`.
    model, data : path
        The model file and its prepared dataset.
    estimates : sequence of path
        The model's exact and AIS estimate directories (:func:`diagnose_estimators`), read by :func:`log_z_for`.
    out_json, out_npz : path
        The record and the arrays (``samples``, ``annealed_samples``, ``hidden_top_states``, ``filters``,
        ``per_class_log_f``; those that apply), written atomically together.
    hidden_method : {"auto", "exact", "samples"}
        How the hidden mass is found: ``auto`` enumerates where ``H <= exact_max_units``.

    Returns
    -------
    dict
        The record written to ``out_json``.
    """
    from ..utils import output_transaction

    with output_transaction():  # the record and the arrays, or neither
        return _diagnose(settings, model, data, estimates, out_json, out_npz, hidden_method, log)


def _diagnose(settings, model, data, estimates, out_json, out_npz, hidden_method, log) -> dict[str, Any]:
    """:func:`diagnose_job`'s work, inside its output transaction: each diagnostic writes its section of the
    record and its arrays."""
    from ..data import load_rows
    from ..models import load_model
    from ..utils import resolve_device, save_npz_atomic, write_json_atomic

    s = dict(settings)
    t0 = time.perf_counter()
    fam = registry.family(s["family"])
    device = resolve_device(s.get("device", "cpu"))
    s["device"] = str(device)
    m = load_model(model, device=device)
    record: dict[str, Any] = {"model": s["model"], "family": fam.name, "dataset": s.get("dataset"), "settings": s}
    arrays: dict[str, np.ndarray] = {}
    image_shape, whitening = _dataset_view(data, fam.data_kind)
    record["image_shape"] = list(image_shape) if image_shape else None
    test = load_rows(data, fam.data_kind, "test")
    train = load_rows(data, fam.data_kind, "train") if fam.data_kind == "binary" else None
    record["figures"] = list(figure_names(fam.name, s.get("learner")))
    out = (record, arrays, log)
    _samples_of(m, fam, s, train, image_shape, out)
    if fam.name in FILTERS:
        _filters_of(m, fam, whitening, out)
    enumerated = _hidden_mass_of(m, fam, s, train, hidden_method, out)
    _per_class_of(m, fam, s, data, test, train, estimates, enumerated, out)
    record["seconds"] = time.perf_counter() - t0
    record = _jsonable(record)
    save_npz_atomic(out_npz, **(arrays or {"empty": np.zeros(0)}))
    write_json_atomic(out_json, record)
    return record


def _samples_of(m, fam, s: Mapping[str, Any], train, image_shape, out) -> None:
    """Samples of the model and of p_ann (RAISE Figs. 5-6), of a sampled family whose data have an image shape."""
    record, arrays, log = out
    if fam.name not in SAMPLED_FAMILIES:
        return
    if image_shape is None:
        record["samples"] = {"not_available": "the dataset has no image shape"}
        return
    from ..sampling import sample

    init = s.get("init", "uniform")
    n = int(s["n_samples"])
    common = {"init": init, "data": train, "seed": int(s.get("seed", 0)), "device": s.get("device", "cpu")}
    model_res = sample(m, n, burn_in=int(s["burn_in"]), exact=_exact_choice(m, s), **common)
    ann_res = sample(m, n, annealed=int(s["annealed_K"]), **common)
    arrays["samples"] = np.asarray(model_res.x)
    arrays["annealed_samples"] = np.asarray(ann_res.x)
    record["samples"] = _sample_info(model_res)
    record["annealed_samples"] = {**_sample_info(ann_res), "K": int(s["annealed_K"]), "init": init}
    log(f"samples: {model_res.method} ({model_res.seconds:.1f} s), p_ann: {ann_res.method} K={s['annealed_K']}")


def _filters_of(m, fam, whitening, out) -> None:
    """The learned filters / bases (HAIS Fig. 1)."""
    record, arrays, _ = out
    arrays["filters"] = filters_in_pixels(m, fam.name, whitening)
    record["filters"] = {
        "array": FILTERS[fam.name][0],
        "kind": "filters" if FILTERS[fam.name][2] == "analysis" else "bases",
        "n": int(len(arrays["filters"])),
        "space": "in pixels, through the PCA whitening" if whitening is not None else "in data coordinates",
    }


def _hidden_mass_of(m, fam, s: Mapping[str, Any], train, hidden_method: str, out) -> float | None:
    """The mass on the most probable hidden configurations (RAISE Sec. 5.1) of a sampled family; returns log Z
    where the hidden states were enumerated (else ``None``)."""
    record, arrays, log = out
    if fam.name not in SAMPLED_FAMILIES:
        if fam.deep:
            record["hidden_mass"] = {"not_available": "computed for binary RBMs only"}
        return None
    enumerated = None
    seed = int(s.get("seed", 0))
    method = hidden_method
    if method == "auto":
        method = "exact" if int(m.n_hidden) <= int(s["exact_max_units"]) else "samples"
    if method == "exact":
        hm = hidden_mass_exact(m)
        enumerated = hm.pop("log_z")
    else:
        res = _hidden_samples(m, s, train, seed + 1)
        chains = res.settings.get("chains") if res.method == "gibbs" else None
        hm = hidden_mass_from_samples(_hidden_states(m, res, seed + 1), TOP, chains=chains)
        hm.update(sampler=res.method, chains=chains, burn_in=int(res.burn_in), sweeps=int(res.sweeps))
    arrays["hidden_top_states"] = hm.pop("top_states")
    arrays["hidden_top_" + ("log_p" if method == "exact" else "counts")] = hm.pop(
        "top_log_p" if method == "exact" else "top_counts"
    )
    record["hidden_mass"] = hm
    log(f"hidden mass ({method}): " + ", ".join(f"top{k} = {hm[f'top{k}']:.4g}" for k in TOP))
    return enumerated


def _per_class_of(m, fam, s: Mapping[str, Any], data, test, train, estimates, enumerated, out) -> None:
    """The mean test log-likelihood per class, or why it is not available (a deep family, no test labels, no
    closed-form log f(v)); log Z from :func:`log_z_for`."""
    import torch

    from ..data import load_labels

    record, arrays, log = out
    labels = load_labels(data, "test")
    if fam.deep:
        record["per_class"] = {"not_available": _DEEP_REASON.format(family=fam.name.upper())}
        return
    if labels is None:
        record["per_class"] = {"not_available": "the dataset has no test labels"}
        return
    if not hasattr(m, "log_unnormalized_marginal"):
        record["per_class"] = {"not_available": f"{fam.name} has no closed-form log f(v)"}
        return
    with torch.no_grad():
        log_f = m.log_unnormalized_marginal(test).double().cpu().numpy()

    def run_ais():
        from ..api import estimate

        opts = {"K": int(s["annealed_K"]), "chains": int(s["ais_chains"]), "init": s.get("init", "uniform")}
        return estimate(m, "ais", data=test, train_data=train, seed=int(s.get("seed", 0)), **opts)

    lz = log_z_for(_records(estimates), enumerated=enumerated, run_ais=run_ais)
    pc = per_class_log_likelihood(log_f, labels, lz["log_z"], lz["log_z_se"])
    record["per_class"] = {**pc, "log_z_source": lz["source"]}
    arrays["per_class_log_f"] = log_f
    arrays["per_class_labels"] = np.asarray(labels)
    log(f"per-class test LL: log Z from {lz['source']}, overall {pc['overall']['mean_test_ll']:.4f}")


def _hidden_samples(rbm, s: Mapping[str, Any], train, seed: int):
    """:func:`logzbench.sampling.sample` of ``hidden_samples`` states (``hidden_chains`` chains after
    ``burn_in`` sweeps where not exact)."""
    from ..sampling import sample

    return sample(
        rbm,
        int(s["hidden_samples"]),
        burn_in=int(s["burn_in"]),
        chains=int(s["hidden_chains"]),
        init=s.get("init", "uniform"),
        data=train,
        seed=seed,
        device=s.get("device", "cpu"),
        exact=_exact_choice(rbm, s),
    )


def _exact_choice(rbm, s: Mapping[str, Any]) -> str:
    """The sampler's ``exact``: ``auto`` (exact draws) where the RBM's smaller layer has at most
    ``exact_max_units`` units, else ``never`` (Gibbs: the enumeration would cost more than the job should)."""
    return "auto" if min(int(rbm.n_visible), int(rbm.n_hidden)) <= int(s["exact_max_units"]) else "never"


def _hidden_states(rbm, res, seed: int) -> np.ndarray:
    """The draws of ``h`` of a sample result: its ``h`` (drawn from ``p(h | v)`` with ``v``, a joint draw), or,
    where it has none, one draw of ``p(h | v)`` per visible sample."""
    import torch

    from ..utils import make_generator

    if res.h is not None:
        return np.asarray(res.h)
    g = make_generator(seed, rbm.device)
    return rbm.sample_h_given_v(torch.as_tensor(np.asarray(res.x), device=rbm.device), g).cpu().numpy()
