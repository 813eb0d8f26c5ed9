"""Flags: readable reasons to distrust a summary row, from a list of small rules.

A rule is a callable taking a :class:`FlagInput` and yielding ``(summary row indices, reason)``;
:func:`apply_flags` runs :data:`RULES` in order and joins each row's reasons with ``"; "``.
The rules:

* a run its estimator refused (:func:`refused`: no estimate, e.g. discriminance sampling whose samples
  do not overlap);
* low effective sample size of any seed's run (:func:`low_ess`);
* heavy-tailed log-weights of any seed's run: Pareto k-hat above ``khat`` (0.7; :func:`heavy_tails`),
  where the standard error understates the uncertainty;
* standard errors that understate the spread between seeds (:func:`understated_spread`): with at
  least 3 seeds, Cochran's Q (``(n - 1) sd^2 / mean(se^2)`` for equal errors) above the 0.99
  quantile of chi-square(n - 1);
* AIS and RAISE of one setting disagree by more than ``gap_threshold`` nats, or RAISE exceeds
  AIS by more than ``z`` combined standard errors;
* a Z-unbiased log Z estimator above its upper-bound partner of the same setting (AIS over
  reverse AIS, IS over reverse IS): the bounds do not sandwich log Z;
* the importance-sampled log f(v) of a deep model has few effective proposals, or heavy-tailed
  weights (the median k-hat over its test rows above ``khat``);
* an estimate on the wrong side of the exact value (closed form) by more than ``z`` standard
  errors, the side following from the estimator's registry bound (:func:`beyond_exact`): the
  log-likelihood of a Z-unbiased log Z estimator below it (AIS, IS, HAIS on an analysis model) or
  above it (HAIS on a generative model, whose estimate is per test point), a lower bound of the
  log-likelihood above it (RAISE, CSL);
* a bracket (sandwich, BDMC; :func:`bracket_problems`) not reached, whose raw ends cross, or that
  excludes the exact value;
* any estimate of any estimator and family, on either side, more than ``z`` standard errors *and*
  more than ``exact_tolerance`` nats (0.05) from the exact value (:data:`OFF_EXACT`): a wrong answer
  whose standard error does not cover it, on the side a bound allows too (log Z-hat of AIS or HAIS
  low by many standard errors: chains that miss a mode).  Rows the wrong-side rules above already
  flag are not flagged twice.

Bounds are checked only where they are guaranteed: the upper bounds of log Z (reverse AIS,
reverse IS) hold for exact model samples, which neither has (it runs Markov chains), so they
are compared with their Z-unbiased partner (the sandwich rule) but not with the exact value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import pandas as pd

from ..registry import ESTIMATORS, GIBBS_KINDS
from ..tracking.records import one_reason, refused_reason
from .methods import BRACKET_METHODS, DEEP_FAMILIES, family_kind, label, spec, weight_unit
from .records import group_key, seed_spread

Flag = tuple[tuple[int, ...], str]


#: nats an estimate may lie from the exact value without a flag however small its standard error
#: (:data:`OFF_EXACT`): below it an error matters to nobody (the issue's audit used 0.05 nat)
EXACT_TOLERANCE = 0.05


class ReportThresholds(dict):
    """Flag thresholds: ``gap_threshold`` (nats), ``ess_fraction``, ``z`` (standard errors), ``khat``
    (Pareto k-hat), ``exact_tolerance`` (nats)."""

    def __init__(
        self,
        gap_threshold: float = 1.0,
        ess_fraction: float = 0.1,
        z: float = 2.0,
        khat: float = 0.7,
        exact_tolerance: float = EXACT_TOLERANCE,
    ):
        super().__init__(
            gap_threshold=float(gap_threshold),
            ess_fraction=float(ess_fraction),
            z=float(z),
            khat=float(khat),
            exact_tolerance=float(exact_tolerance),
        )


@dataclass(frozen=True)
class FlagInput:
    """What the rules look at: the summary (flagged by row index), its runs, the thresholds and the
    brackets (``table_bracket.csv``'s rows, :func:`.bracket.make_table_bracket`; none: no bracket flags)."""

    summary: pd.DataFrame
    per_run: pd.DataFrame
    thresholds: ReportThresholds
    brackets: pd.DataFrame | None = None


def _fmt_k(k) -> str:
    return "-" if k is None or pd.isna(k) else str(int(k))


def _where(s: pd.Series) -> str:
    """``"<init>, K=<K>"``: the setting a reason shared by two rows names (the tables look for it)."""
    return f"{s['init']}, K={_fmt_k(s['K'])}"


def _combined_se(a: float, b: float) -> float:
    return math.sqrt(np.nansum([a**2, b**2]))


# --------------------------------------------------------------------------- refused settings
def run_refused_flag(run: pd.Series) -> str | None:
    """The reason of a run its estimator refused (no estimate: :func:`logzbench.pipeline.jobs.run_estimate`)."""
    return refused_reason(run.get("refused"))


def refused(inp: FlagInput) -> Iterator[Flag]:
    """A summary row is flagged when any of its seeds' runs was refused by its estimator (its values, if
    any, are those of the other seeds)."""
    why: dict[tuple, str] = {}
    for _, r in inp.per_run.iterrows():
        if run_refused_flag(r):
            why.setdefault(group_key(r), one_reason(r["refused"]))
    for i, s, seeds in _flagged_seeds(inp, run_refused_flag):
        yield (i,), f"refused (seed {seeds}): {why[group_key(s)]}"


# --------------------------------------------------------------------------- effective sample size
def run_ess_flag(run: pd.Series, ess_fraction: float) -> str | None:
    """The ESS reason of one run: fewer effective samples than ``ess_fraction`` of its weights."""
    ess, n_weights = float(run["ess"]), run["n_weights"]
    if not (math.isfinite(ess) and n_weights is not None and not pd.isna(n_weights) and int(n_weights) > 0):
        return None
    n = int(n_weights)
    if ess < ess_fraction * n:
        return (
            f"low ESS: {ess:.3g} of {n} {weight_unit(run['method'])} ({100 * ess / n:.2g}% < {100 * ess_fraction:g}%)"
        )
    return None


def _flagged_seeds(inp: FlagInput, run_flag: Callable[[pd.Series], str | None]) -> Iterator[tuple[int, pd.Series, str]]:
    """``(index, summary row, its seeds joined by commas)`` of each summary row with runs that ``run_flag``
    flags."""
    bad: dict[tuple, list[str]] = {}
    for _, r in inp.per_run.iterrows():
        if run_flag(r):
            bad.setdefault(group_key(r), []).append(_fmt_k(r["seed"]))
    for i, s in inp.summary.iterrows():
        if group_key(s) in bad:
            yield i, s, ",".join(bad[group_key(s)])


def low_ess(inp: FlagInput) -> Iterator[Flag]:
    """A summary row is flagged when any of its seeds' runs has too low an ESS."""
    frac = inp.thresholds["ess_fraction"]
    for i, s, seeds in _flagged_seeds(inp, lambda r: run_ess_flag(r, frac)):
        yield (
            (i,),
            (
                f"low ESS (seed {seeds}): min {s['ess_min']:.3g} of {_fmt_k(s['n_weights'])} "
                f"{weight_unit(s['method'])} (< {100 * frac:g}%)"
            ),
        )


# --------------------------------------------------------------------------- tails and spread
def run_khat_flag(run: pd.Series, khat: float) -> str | None:
    """The k-hat reason of one run: a Pareto k-hat of its log-weights above ``khat``."""
    k = float(run.get("khat", float("nan")))
    if math.isfinite(k) and k > khat:
        return (
            f"heavy-tailed log-weights: Pareto k-hat {k:.2f} > {khat:g}, the standard error understates the uncertainty"
        )
    return None


def heavy_tails(inp: FlagInput) -> Iterator[Flag]:
    """A summary row is flagged when any of its seeds' runs has heavy-tailed log-weights (k-hat > ``khat``)."""
    th = inp.thresholds["khat"]
    for i, s, seeds in _flagged_seeds(inp, lambda r: run_khat_flag(r, th)):
        yield (
            (i,),
            (
                f"heavy-tailed log-weights (seed {seeds}): Pareto k-hat {s['khat_max']:.2f} > "
                f"{th:g}, the standard error understates the uncertainty"
            ),
        )


#: quantile of chi-square(n - 1) above which the spread between seeds is too wide for the standard errors
SPREAD_QUANTILE = 0.99
#: fewest seeds (with finite standard errors) the spread check needs
SPREAD_MIN_SEEDS = 3


def understated_spread(inp: FlagInput) -> Iterator[Flag]:
    """A summary row is flagged when its seeds scatter more than their standard errors allow.

    Over the ``n >= 3`` runs with a finite estimate ``x_i`` and a finite positive standard error
    ``se_i``, Cochran's ``Q = sum (x_i - x_w)^2 / se_i^2`` (``x_w`` the inverse-variance weighted
    mean) is chi-square with ``n - 1`` degrees of freedom when the standard errors are right and the
    errors normal; with equal errors it is ``(n - 1) sd^2 / mean(se^2)``, and it stays calibrated
    when they differ between seeds (which the plain ratio does not: it fires too often).  Above the
    :data:`SPREAD_QUANTILE` quantile the standard errors understate the error; the reason quotes sd
    and ``sqrt(mean(se^2))`` (the summary's ``se_spread_ratio``).  The mean test log-likelihood is
    checked, log Z where there is none (for AIS the two spread alike).
    """
    from scipy.stats import chi2  # lazy: only a report needs it

    runs: dict[tuple, list[int]] = {}
    for j, r in inp.per_run.iterrows():
        runs.setdefault(group_key(r), []).append(j)
    for i, s in inp.summary.iterrows():
        g = inp.per_run.loc[runs.get(group_key(s), [])]
        for what, col, se_col in (
            ("mean test LL", "mean_test_ll", "mean_test_ll_stderr"),
            ("log Z", "log_z", "log_z_stderr"),
        ):
            n, sd, rms = seed_spread(g[col], g[se_col])
            if n < SPREAD_MIN_SEEDS:
                continue
            x, se = g[col].to_numpy(dtype=float), g[se_col].to_numpy(dtype=float)
            ok = np.isfinite(x) & np.isfinite(se)
            x, se = x[ok], se[ok]
            if not np.all(se > 0):
                break  # a zero standard error (an exact value): nothing to test
            w = 1.0 / se**2
            q, crit = float(np.sum(w * (x - np.sum(w * x) / np.sum(w)) ** 2)), float(chi2.ppf(SPREAD_QUANTILE, n - 1))
            if q > crit:
                yield (
                    (i,),
                    (
                        f"standard errors understate the spread between seeds ({what}): sd {sd:.2g} vs "
                        f"mean s.e. {rms:.2g} (root mean square) over {n} seeds (Cochran's Q {q:.3g} > "
                        f"{crit:.3g}, the {SPREAD_QUANTILE:g} quantile of chi-square({n - 1}))"
                    ),
                )
            break


# --------------------------------------------------------------------------- rules on one row
@dataclass(frozen=True)
class RowRule:
    """Flags single summary rows: those ``applies`` selects and ``message`` (the condition) returns
    a reason for."""

    name: str
    applies: Callable[[pd.Series], bool]
    message: Callable[[pd.Series, ReportThresholds], str | None]

    def __call__(self, inp: FlagInput) -> Iterator[Flag]:
        for i, s in inp.summary.iterrows():
            if self.applies(s):
                text = self.message(s, inp.thresholds)
                if text:
                    yield (i,), text


def _poor_log_f_sampling(s: pd.Series, th: ReportThresholds) -> str | None:
    ess_is, n_is, frac = float(s["log_f_is_ess_mean"]), float(s["is_samples"]), th["ess_fraction"]
    if math.isfinite(ess_is) and math.isfinite(n_is) and ess_is < frac * n_is:
        return (
            f"log f(v) importance sampling: mean ESS {ess_is:.3g} of {n_is:.0f} proposals "
            f"(< {100 * frac:g}%); log f-hat may err low by more than its s.e. shows"
        )
    return None


def _heavy_log_f_tails(s: pd.Series, th: ReportThresholds) -> str | None:
    k = float(s.get("log_f_is_khat", float("nan")))
    if math.isfinite(k) and k > th["khat"]:
        return (
            f"log f(v) importance sampling: Pareto k-hat {k:.2f} > {th['khat']:g} (median over the test rows), "
            "heavy-tailed weights (log f-hat and its s.e. mislead)"
        )
    return None


def beyond_exact(side: str, subject: Callable[[pd.Series], str], note: Callable[[pd.Series], str]):
    """The message function of an "estimate vs exact value" rule.

    Parameters
    ----------
    side : {"below", "above"}
        The side of the exact mean test log-likelihood (closed form for continuous models) the
        estimate must not be on by more than ``z`` of its standard errors (an unknown one counts as 0).
    subject : callable
        Row -> who the reason names (``"AIS"``, ``"RAISE lower bound"``).
    note : callable
        Row -> text appended to the reason (why the side is wrong, or why it may be).
    """

    def message(s: pd.Series, th: ReportThresholds) -> str | None:
        ex, v = float(s["exact_test_ll"]), float(s["mean_test_ll"])
        if not (math.isfinite(ex) and math.isfinite(v)):
            return None
        se = float(s["mean_test_ll_se"]) if math.isfinite(float(s["mean_test_ll_se"])) else 0.0
        d, z = (ex - v if side == "below" else v - ex), th["z"]
        if d > 0 and d > z * se:
            what = "exact" if family_kind(s["family"], s["method"]) in GIBBS_KINDS else "the closed form"
            verb = "falls below" if side == "below" else "exceeds"
            return f"{subject(s)} {verb} {what} by {d:.2f} nats (> {z:g} x s.e. {se:.2g}){note(s)}"
        return None

    return message


def _bound_is(s: pd.Series, yields: str, bound: str, kinds: tuple[str, ...] | None = None) -> bool:
    """Whether the row's estimator yields ``yields`` with registry bound ``bound`` (on a model of ``kinds``)."""
    e = spec(s["method"])
    return (
        e is not None
        and e.yields == yields
        and e.bound == bound
        and (kinds is None or family_kind(s["family"], s["method"]) in kinds)
    )


def _method(s: pd.Series) -> str:
    return s["method"].upper()


def _errs_high_note(s: pd.Series) -> str:
    if s["family"] in DEEP_FAMILIES:
        return "; the importance-sampled log f(v) errs low"
    if family_kind(s["family"], s["method"]) == "analysis":
        return "; an analysis model's estimate should err high"
    return ""


#: Z-unbiased log Z (log Z-hat errs low): the log-likelihood errs high on binary, Gaussian-binary and
#: analysis models, low on generative ones (log p-hat(x) per test point errs low)
Z_UNBIASED_BELOW_EXACT = RowRule(
    "Z-unbiased estimate below exact",
    lambda s: _bound_is(s, "log_z", "unbiased-in-z", (*GIBBS_KINDS, "analysis")),
    beyond_exact("below", _method, _errs_high_note),
)
Z_UNBIASED_ABOVE_CLOSED_FORM = RowRule(
    "Z-unbiased estimate of a generative model above its closed form",
    lambda s: _bound_is(s, "log_z", "unbiased-in-z", ("generative",)),
    beyond_exact("above", _method, lambda s: "; a generative model's estimate should err low"),
)
LOWER_BOUND_ABOVE_EXACT = RowRule(
    "lower bound of the log-likelihood above exact",
    lambda s: _bound_is(s, "log_likelihood", "lower"),
    beyond_exact("above", lambda s: f"{_method(s)} lower bound", lambda s: ""),
)
POOR_LOG_F_SAMPLING = RowRule(
    "importance-sampled log f(v) with few effective proposals", lambda s: True, _poor_log_f_sampling
)
HEAVY_LOG_F_TAILS = RowRule("importance-sampled log f(v) with heavy-tailed weights", lambda s: True, _heavy_log_f_tails)

#: the rules that flag an estimate on the side of the exact value its bound forbids (without a tolerance)
WRONG_SIDE_RULES = (Z_UNBIASED_BELOW_EXACT, Z_UNBIASED_ABOVE_CLOSED_FORM, LOWER_BOUND_ABOVE_EXACT)


def exact_comparison(s: pd.Series) -> tuple[str, float, float, float] | None:
    """``(what, estimate, its standard error, exact value)`` of a summary row: the mean test log-likelihood
    where both it and its exact value (of the same rows) are known, else log Z; ``None`` without either."""
    for what, col, se_col, ex_col in (
        ("mean test log-likelihood", "mean_test_ll", "mean_test_ll_se", "exact_test_ll"),
        ("log Z", "log_z", "log_z_se", "exact_log_z"),
    ):
        v, ex = float(s[col]), float(s[ex_col])
        if math.isfinite(v) and math.isfinite(ex):
            return what, v, float(s[se_col]), ex
    return None


def _off_exact(s: pd.Series, th: ReportThresholds) -> str | None:
    """The reason of an estimate more than ``z`` standard errors and more than ``exact_tolerance`` nats from
    the exact value, on either side (an unknown or zero standard error: the tolerance alone)."""
    c = exact_comparison(s)
    if c is None:
        return None
    what, v, se, ex = c
    d, z, tol = v - ex, th["z"], th["exact_tolerance"]
    has_se = math.isfinite(se) and se > 0
    if not (abs(d) > tol and (not has_se or abs(d) > z * se)):
        return None
    if any(rule.applies(s) and rule.message(s, th) for rule in WRONG_SIDE_RULES):
        return None  # said already, more strongly: a bound on the wrong side
    exact = "the exact value" if family_kind(s["family"], s["method"]) in GIBBS_KINDS else "the closed form"
    side = "below" if d < 0 else "above"
    # a bracket's point estimate is its midpoint, whose standard error is the ends' noise, not the width
    note = ", the bracket's midpoint" if s["method"] in BRACKET_METHODS else ""
    if has_se:
        return (
            f"{label(s['method'])} {what} {abs(d) / se:.1f} s.e. and {abs(d):.2f} nats {side} {exact} "
            f"(beyond {z:g} s.e. {se:.2g} and {tol:g} nat{note}): its standard error does not cover its error"
        )
    return f"{label(s['method'])} {what} {abs(d):.2f} nats {side} {exact} (beyond {tol:g} nat, no standard error{note})"


#: any estimator, any family: an estimate off the exact value (closed form) by more than ``z`` standard
#: errors and ``exact_tolerance`` nats, either side (not the exact estimator itself; a mean over points
#: simulated from the model, BDMC's, has no exact value of the test rows: its bracket is checked against
#: its own, :func:`brackets_wrong`)
OFF_EXACT = RowRule("estimate off the exact value", lambda s: s["method"] != "exact", _off_exact)


# --------------------------------------------------------------------------- rules on pairs of rows
def same_setting(summary: pd.DataFrame, row: pd.Series, method: str) -> pd.DataFrame:
    """Summary rows of ``method`` with ``row``'s model, test rows, schedule, K and init."""
    m = (
        (summary["model"] == row["model"])
        & (summary["method"] == method)
        & (summary["schedule"] == row["schedule"])
        & (summary["init"] == row["init"])
        & (summary["test_set"] == row["test_set"])
    )
    k = summary["K"]
    m &= (k == row["K"]).fillna(False) if not pd.isna(row["K"]) else k.isna()
    return summary[m]


def pairs(summary: pd.DataFrame, first: str, second: str) -> Iterator[tuple[int, pd.Series, int, pd.Series]]:
    """``(i, a, j, b)`` for each row ``a`` of method ``first`` and each row ``b`` of ``second`` in its setting."""
    for i, a in summary[summary["method"] == first].iterrows():
        for j, b in same_setting(summary, a, second).iterrows():
            yield i, a, j, b


@dataclass(frozen=True)
class PairRule:
    """Flags both rows of each pair of methods ``first`` and ``second`` in one setting, once for each
    of ``checks`` (condition and message) that returns a reason for the pair."""

    name: str
    first: str
    second: str
    checks: tuple[Callable[[pd.Series, pd.Series, ReportThresholds], str | None], ...]

    def __call__(self, inp: FlagInput) -> Iterator[Flag]:
        for i, a, j, b in pairs(inp.summary, self.first, self.second):
            for check in self.checks:
                text = check(a, b, inp.thresholds)
                if text:
                    yield (i, j), text


def _ll_gap(a: pd.Series, b: pd.Series) -> float:
    """``a - b`` of the mean test log-likelihoods (NaN unless both are finite)."""
    x, y = float(a["mean_test_ll"]), float(b["mean_test_ll"])
    return x - y if math.isfinite(x) and math.isfinite(y) else float("nan")


def _gap_too_large(ais: pd.Series, raise_: pd.Series, th: ReportThresholds) -> str | None:
    gap = _ll_gap(ais, raise_)
    if abs(gap) > th["gap_threshold"]:
        return f"AIS-RAISE gap {gap:+.2f} nats exceeds {th['gap_threshold']:g} nat ({_where(ais)})"
    return None


def _raise_above_ais(ais: pd.Series, raise_: pd.Series, th: ReportThresholds) -> str | None:
    gap, z = _ll_gap(ais, raise_), th["z"]
    se = _combined_se(float(ais["mean_test_ll_se"]), float(raise_["mean_test_ll_se"]))
    if -gap > 0 and -gap > z * se:
        return f"RAISE exceeds AIS by {-gap:.2f} nats (> {z:g} x combined s.e. {se:.2g}, {_where(ais)})"
    return None


def _not_sandwiched(low: pd.Series, high: pd.Series, th: ReportThresholds) -> str | None:
    a, b, z = float(low["log_z"]), float(high["log_z"]), th["z"]
    se = _combined_se(float(low["log_z_se"]), float(high["log_z_se"]))
    if math.isfinite(a) and math.isfinite(b) and a - b > z * se:
        return (
            f"{label(low['method'])} log Z exceeds {label(high['method'])} by {a - b:.2f} nats "
            f"(> {z:g} x combined s.e. {se:.2g}, {_where(low)}): the bounds do not sandwich log Z"
        )
    return None


def _sandwich_pairs() -> tuple[tuple[str, str], ...]:
    """(Z-unbiased, upper-bound) log Z estimators with the same sweep axes: AIS and reverse AIS, IS and
    reverse IS (the upper bound holds for exact model samples)."""
    return tuple(
        (lo.name, hi.name)
        for lo in ESTIMATORS.values()
        for hi in ESTIMATORS.values()
        if lo.yields == hi.yields == "log_z"
        and lo.bound == "unbiased-in-z"
        and hi.bound == "upper"
        and lo.axes == hi.axes
    )


#: AIS (errs high on the log-likelihood) against RAISE (errs low), same model / schedule / K / init
AIS_VS_RAISE = PairRule("AIS vs RAISE", "ais", "raise", (_gap_too_large, _raise_above_ais))
SANDWICH_RULES = tuple(PairRule(f"{lo} vs {hi}", lo, hi, (_not_sandwiched,)) for lo, hi in _sandwich_pairs())


# --------------------------------------------------------------------------- brackets (sandwich, BDMC)
_QUANTITY_WORDS = {"log_z": "log Z", "mean_log_likelihood": "mean log-likelihood"}


def _bracket_rows(brackets: pd.DataFrame, s: pd.Series) -> pd.DataFrame:
    """The rows of ``brackets`` (:func:`.bracket.make_table_bracket`) of summary row ``s``: its model,
    estimator and seeds (and K, where the row has one: BDMC; the sandwich's K is the one it reached)."""
    seeds = {int(x) for x in str(s.get("seeds") or "").split()}
    m = (brackets["model"] == s["model"]) & (brackets["estimator"] == s["estimator"])
    m &= brackets["method"] == s["method"]
    m &= brackets["seed"].isin(seeds).fillna(False) if seeds else brackets["seed"].isna()
    if not pd.isna(s["K"]):
        m &= brackets["K"].eq(s["K"]).fillna(False)
    return brackets[m]


def _seeds(rows: pd.DataFrame) -> str:
    return ",".join(_fmt_k(x) for x in rows["seed"])


def _nums(values) -> str:
    return ", ".join(f"{float(v):.3g}" for v in values)


def _is(col: pd.Series, value: bool) -> pd.Series:
    """Rows whose nullable boolean ``col`` is ``value`` (unknown: neither)."""
    return col.astype("boolean").eq(value).fillna(False)


def bracket_problems(b: pd.DataFrame) -> list[str]:
    """The reasons of one summary row's brackets ``b`` (its rows of ``table_bracket.csv``): the width not
    reached (``width_reached`` false: the sandwich stopped at ``max_sweeps`` or its time budget, or its
    rounds never met the stopping rule), raw ends that cross (an end is wrong), a bracket that excludes the
    exact value.  Each names the seeds and the quantity."""
    out: list[str] = []
    who = label(b["method"].iloc[0]) if len(b) else ""
    crossed = b[_is(b["crossed"], True)]
    # one row per record: the quantity its stopping rule watched (the mean log-likelihood where it has one)
    per_record = b.sort_values("quantity", key=lambda q: q != "mean_log_likelihood", kind="stable")
    per_record = per_record.drop_duplicates(subset=["seed", "K"])
    parts = []
    for _, r in per_record[_is(per_record["width_reached"], False)].iterrows():
        w, t = float(r["width"]), float(r["target_width"])
        if not w <= t:
            why = f"width {w:.3g} nats > target {t:g}"
        else:
            mine = crossed[crossed["quantity"] == r["quantity"]]
            cross = (mine["seed"].eq(r["seed"]).fillna(False) if pd.notna(r["seed"]) else mine["seed"].isna()).any()
            why = f"width {w:.3g} nats <= target {t:g} but " + (
                "the raw ends cross" if cross else "the groups of chains disagree or an approximate end still moves"
            )
        stopped = r.get("stopped_by")
        stopped = "" if stopped is None or pd.isna(stopped) else str(stopped)
        parts.append(
            f"seed {_fmt_k(r['seed'])} at K = {_fmt_k(r['K'])}: {why}" + (f", stopped by {stopped}" if stopped else "")
        )
    if parts:
        out.append(f"{who} bracket not reached ({', '.join(parts)})")
    if len(crossed):
        by = ", ".join(
            f"{_QUANTITY_WORDS.get(q, q)} by {_nums(g['crossed_by'])} nats (seed {_seeds(g)})"
            for q, g in crossed.groupby("quantity", sort=False)
        )
        out.append(f"{who} bracket's raw ends cross ({by}): an end is wrong, the bracket is the span of both")
    for q, g in b[_is(b["contains_exact"], False)].groupby("quantity", sort=False):
        ends = ", ".join(f"[{lo:.4g}, {hi:.4g}]" for lo, hi in zip(g["lower"], g["upper"]))
        where = " of the simulated points" if (g["data"] == "simulated").any() else ""
        out.append(
            f"{who} {_QUANTITY_WORDS.get(q, q)} bracket excludes the exact value{where} "
            f"{float(g['exact'].iloc[0]):.4g} (seed {_seeds(g)}: {ends})"
        )
    return out


def brackets_wrong(inp: FlagInput) -> Iterator[Flag]:
    """A summary row of a bracket estimator (sandwich, BDMC) is flagged when a seed's bracket is not reached,
    its raw ends cross, or it excludes the exact value (:func:`bracket_problems`); nothing without
    ``inp.brackets``."""
    if inp.brackets is None or inp.brackets.empty:
        return
    for i, s in inp.summary.iterrows():
        if s["method"] not in BRACKET_METHODS:
            continue
        for text in bracket_problems(_bracket_rows(inp.brackets, s)):
            yield (i,), text


#: Every flag rule, in the order their reasons appear.
RULES: tuple[Callable[[FlagInput], Iterator[Flag]], ...] = (
    refused,
    low_ess,
    heavy_tails,
    understated_spread,
    AIS_VS_RAISE,
    *SANDWICH_RULES,
    POOR_LOG_F_SAMPLING,
    HEAVY_LOG_F_TAILS,
    Z_UNBIASED_BELOW_EXACT,
    Z_UNBIASED_ABOVE_CLOSED_FORM,
    LOWER_BOUND_ABOVE_EXACT,
    brackets_wrong,
    OFF_EXACT,
)


# --------------------------------------------------------------------------- applying them
def ais_raise_gaps(summary: pd.DataFrame) -> pd.Series:
    """AIS - RAISE mean test log-likelihood of each AIS and RAISE row (its first pair with both
    values known; NaN without one)."""
    gaps = pd.Series(float("nan"), index=summary.index)
    for i, a, j, b in pairs(summary, "ais", "raise"):
        gap = _ll_gap(a, b)
        if math.isfinite(gap):
            for k in (i, j):
                if math.isnan(gaps[k]):
                    gaps[k] = gap
    return gaps


def apply_flags(
    per_run: pd.DataFrame,
    summary: pd.DataFrame,
    *,
    gap_threshold: float = 1.0,
    ess_fraction: float = 0.1,
    z: float = 2.0,
    khat: float = 0.7,
    exact_tolerance: float = EXACT_TOLERANCE,
    brackets: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fill the ``flags`` columns (and ``gap_ais_minus_raise``) of both tables; returns copies.

    A summary row carries the reasons of every rule of :data:`RULES`; a run carries its own ESS
    and k-hat reasons and its summary row's other reasons (for the MLflow tags).  ``brackets``
    (``table_bracket.csv``'s rows, :func:`.bracket.make_table_bracket`) feed the bracket rule
    (:func:`brackets_wrong`); without them bracket estimates are flagged only by the other rules.
    """
    per_run, summary = per_run.copy(), summary.copy()
    inp = FlagInput(summary, per_run, ReportThresholds(gap_threshold, ess_fraction, z, khat, exact_tolerance), brackets)
    reasons: dict[int, list[str]] = {i: [] for i in summary.index}
    for rule in RULES:
        for rows, text in rule(inp):
            for i in rows:
                if text not in reasons[i]:
                    reasons[i].append(text)
    summary["gap_ais_minus_raise"] = ais_raise_gaps(summary)
    summary["flags"] = ["; ".join(reasons[i]) for i in summary.index]
    row_of: dict[tuple, int] = {}
    for i, s in summary.iterrows():
        row_of.setdefault(group_key(s), i)
    per_run["flags"] = [
        _run_flags(r, reasons.get(row_of.get(group_key(r)), []), ess_fraction, khat) for _, r in per_run.iterrows()
    ]
    return per_run, summary


def split_reasons(flags) -> list[str]:
    """The reasons of one row's ``flags`` (:func:`apply_flags` joins them with ``"; "``; missing: none)."""
    if flags is None or (not isinstance(flags, str) and pd.isna(flags)):
        return []
    return [f for f in str(flags).split("; ") if f]


def _run_flags(run: pd.Series, group_reasons: list[str], ess_fraction: float, khat: float = 0.7) -> str:
    own = [f for f in (run_refused_flag(run), run_ess_flag(run, ess_fraction), run_khat_flag(run, khat)) if f]
    shared = [f for f in group_reasons if not f.startswith(("refused", "low ESS", "heavy-tailed"))]
    return "; ".join(dict.fromkeys(own + shared))
