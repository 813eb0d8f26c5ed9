"""Benchmark report: tables, flags and plots from estimate records.

:func:`build_report` reads every estimate JSON (as written by the workflow's estimate step
or by ``logzbench estimate``), and writes into ``out_dir``:

``per_run.csv``
    One row per estimate (model x estimator x K x init x seed), with its own flags.
``summary.csv``
    One row per model x estimator x schedule x K x init, aggregated over seeds: mean,
    spread (sd, min, max) and standard error of the mean test log-likelihood and of log Z,
    the exact values where known, the AIS - RAISE gap and the flags.
``table1.csv``
    RAISE Table 1 layout (RBMs only), one row per model x schedule x K: exact, CSL, and
    RAISE / AIS / gap (= AIS - RAISE) for each initial distribution (``uniform``, ``base-rate``).
``table2.csv``
    RAISE Table 2 layout (deep models: DBMs and DBNs), one row per model x schedule x K:
    RAISE, AIS and gap = AIS - RAISE with standard errors for each initial distribution
    (DBNs: uniform only), exact where enumeration was affordable, and the importance-sampling
    (and DBM mean-field) estimates of the mean ``log f(v)`` of the test set.
``table_csl.csv``
    Upadhya & Sastry Table 2 layout of the CSL estimates: per (mode and burn-in, N samples, M
    chains) the mean test log-likelihood per model, its variance over seeds and the seed count
    (header only without CSL estimates).
``table_continuous.csv``
    Sohl-Dickstein & Culpepper Table 1 layout (continuous models), one row per model, with the bracket
    on its mean log-likelihood (``bracket_lower``, ``bracket_upper``, ``bracket_width``,
    ``bracket_estimator``) where a sandwich or BDMC ran on it.
``table_bracket.csv``
    One row per bracket estimate (sandwich, BDMC) and bracketed quantity (log Z, mean log-likelihood):
    its ends with their estimators and guarantees, width, confidence, the K and sweeps it took, the
    exact value where known and whether the bracket contains it (:mod:`.bracket`; header only without
    bracket estimates).
``annealed_trials.csv``
    Bias / MSE of log Z over seeds against the ground truth (Liu et al. Figs 3-4).
``flags.csv``
    One row per flag reason of a summary row.
``report.json``
    Counts, thresholds and the flags, machine-readable.
``review.html``
    The page to read first (:mod:`.review`): one self-contained HTML file (figures embedded, no script,
    nothing loaded from elsewhere) that fits a 1366 px wide window without horizontal scrolling.  Per
    model every estimator and start at each K with its seed count, ``log Z`` and mean test log-likelihood
    each with its standard error, the exact value where known and the difference from it, and each flag's
    reason in words; the brackets where a sandwich or BDMC ran; the model's figures.  Then the report's
    tables, rendered.
``plots/<model>.png``, ``plots/<model>_bias_mse.png``, ``plots/model_size.png``
    Mean test log-likelihood vs K per model, bias / MSE of log Z vs K per model, and the
    continuous models' log-likelihood vs size.
``plots/<model>_bracket.png``
    Per model with a bracket estimate: its lower and upper ends against the sweeps spent (log scale),
    shaded between, and the exact value where known.
``table_learners.csv``, ``table_learners_paper.csv``, ``plots/<model>_bounds.png``, ...
    Models trained by a black-box learner (AVIL, NVIL, VCD) against the AVIL paper's Tables 2-3
    (one row per model, and the paper's own layout), whether each learner's running bound of log Z
    held, and their training bounds, samples and filters (see :mod:`.learners` and :mod:`.learner_plots`;
    the first table has only its header, and the second is not written, without such models).
``table_learner_timing.csv``
    Per learner-trained model its training time (wall and CPU seconds, per iteration, threads,
    device) beside its final AIS test log-likelihood, and AVIL's time over VCD's on the DBMs of a
    dataset with both (Li et al. Sec. 5.5; :mod:`.timing`; not written without such models).
``table_hidden_mass.csv``, ``table_per_class.csv``
    The per-model diagnostics (:mod:`.diagnostics`, from ``results/diagnostics/<model>.json``): per RBM the
    probability of its top-1, top-10 and top-100 hidden configurations (RAISE Sec. 5.1; exact or from
    samples with standard errors), and per model and class of labelled test rows the mean test
    log-likelihood with its standard error, the ``log Z`` used, its source and standard error (header
    only without diagnostics).
``plots/<model>_samples.png``, ``plots/<model>_annealed_samples.png``, ``plots/<model>_filters.png``
    An RBM's samples and those of its annealing model ``p_ann`` (RAISE Figs. 5-6), a continuous model's
    learned filters or bases (HAIS Fig. 1) (:mod:`.diagnostics`, drawn by :mod:`.samples`).
``table_papers.csv``
    The reproduced papers' published values (:mod:`.published`) of the rows the models stand for
    (a config's ``models.<name>.paper``, the CLI's ``--paper``), ours beside each with the
    difference and whether it lies within our uncertainty (:mod:`.papers`; header only when no
    model names a paper row).

The flags are the rules of :data:`.flags.RULES` (see :mod:`.flags`).  With a ``tracking_uri``
they are also set as tags (``logzbench.flag``, all reasons; ``logzbench.flag_reason``, the first in at
most 80 characters; ``logzbench.flagged``) on the runs of the affected estimates, and every estimate of
a model with an exact value gets the metrics ``log_z_minus_exact`` and ``mean_test_ll_minus_exact``
(its difference from the exact value, full precision).  Method and family lists come from
:mod:`logzbench.registry` (see :mod:`.methods`), plot styles from :mod:`logzbench.plotting`.

Modules: :mod:`.build` (:func:`build_report`, :func:`report_job`), :mod:`.records` (loading, per-run table,
summary over seeds), :mod:`.flags`,
:mod:`.tables`, :mod:`.plots`, :mod:`.methods`, :mod:`.bracket` (sandwich and BDMC brackets),
:mod:`.learners` (learner-trained models: their tables), :mod:`.learner_plots` (their figures),
:mod:`.published` (the papers' values), :mod:`.papers` (ours beside them), :mod:`.diagnostics` (the per-model
diagnostics' tables and figures), :mod:`.timing`
(the learners' training times), :mod:`.review` (``review.html``).
"""

import importlib

#: where each name this package exports is defined: the package imports a module when one of its names
#: is first asked for, so that a light module (:mod:`.compared`, which the workflow reads while it builds
#: its job graph) is importable without loading the whole report (pandas, Matplotlib, torch)
_EXPORTS = {
    "plot_history": "..plotting",
    **dict.fromkeys(("BRACKET_COLUMNS", "make_table_bracket", "plot_bracket"), ".bracket"),
    **dict.fromkeys(("build_report", "report_job"), ".build"),
    **dict.fromkeys(("RULES", "ReportThresholds", "apply_flags"), ".flags"),
    **dict.fromkeys(("make_table_learners", "make_table_learners_paper"), ".learners"),
    **dict.fromkeys(
        (
            "ANALYSIS_FAMILIES",
            "ANNEALED_METHODS",
            "CONTINUOUS_FAMILIES",
            "CONTINUOUS_METHODS",
            "DEEP_FAMILIES",
            "GENERATIVE_FAMILIES",
            "INIT_ORDER",
            "K_METHODS",
            "LOG_Z_METHODS",
            "LOWER_BOUND_METHODS",
        ),
        ".methods",
    ),
    "make_table_papers": ".papers",
    **dict.fromkeys(("plot_annealed_trials", "plot_model", "plot_model_size"), ".plots"),
    **dict.fromkeys(
        ("GROUP_COLUMNS", "LOG_F_COLUMNS", "PER_RUN_COLUMNS", "load_results", "normalize_record", "summarize"),
        ".records",
    ),
    **dict.fromkeys(
        (
            "ANNEALED_TRIAL_COLUMNS",
            "AVERAGE_METHOD",
            "annealed_trials",
            "flag_rows",
            "ground_truth",
            "make_table1",
            "make_table2",
            "make_table_continuous",
            "make_table_csl",
        ),
        ".tables",
    ),
}


def __getattr__(name: str):
    """An exported name (imported from its module on first use) or a submodule of the package."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    else:
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "ReportThresholds",
    "build_report",
    "report_job",
    "load_results",
    "normalize_record",
    "summarize",
    "apply_flags",
    "make_table1",
    "make_table2",
    "make_table_continuous",
    "make_table_csl",
    "make_table_bracket",
    "plot_bracket",
    "BRACKET_COLUMNS",
    "make_table_learners",
    "make_table_learners_paper",
    "make_table_papers",
    "plot_model_size",
    "ground_truth",
    "annealed_trials",
    "plot_annealed_trials",
    "plot_model",
    "plot_history",
    "flag_rows",
    "RULES",
    "ANALYSIS_FAMILIES",
    "ANNEALED_METHODS",
    "ANNEALED_TRIAL_COLUMNS",
    "AVERAGE_METHOD",
    "CONTINUOUS_FAMILIES",
    "CONTINUOUS_METHODS",
    "DEEP_FAMILIES",
    "GENERATIVE_FAMILIES",
    "GROUP_COLUMNS",
    "INIT_ORDER",
    "K_METHODS",
    "LOG_F_COLUMNS",
    "LOG_Z_METHODS",
    "LOWER_BOUND_METHODS",
    "PER_RUN_COLUMNS",
]
