"""Values the reproduced papers published: ``report/published.csv``, loaded, checked and looked up.

The file has one value per line, under the header ``paper, table, row, column, quantity, units,
value, uncertainty, uncertainty_kind, estimator, init, K, note``:

``paper``
    A short key of the paper (:data:`PAPERS` gives each key's full citation): ``burda_raise``
    (Burda, Grosse & Salakhutdinov, AISTATS 2015), ``sohl_dickstein_hais`` (Sohl-Dickstein &
    Culpepper, 2012), ``upadhya_sastry`` (Upadhya & Sastry, ICONIP 2017), ``li_avil`` (Li et al.,
    "Adversarial Variational Inference and Learning in Markov Random Fields").
``table``
    The paper's table (or figure) as printed (``2``; compared as text).
``row``, ``column``
    Where the value stands in it: the paper's row as printed (``mnistPCD-20``, ``MNIST DBM``) or in
    this benchmark's names (``rbm/avil``: family / learner; ``rbm20``: an RBM with 20 hidden units),
    and the paper's column (``exact``, ``uniform AIS``, ``baserate K=10000``) or the dataset's source
    name (``mushrooms``).
``quantity``, ``units``
    What the value is (``mean_test_ll``: the mean test log-likelihood; ``mean_test_ll_ais``: the same
    by AIS; ``log_z``: the log partition function; ``gap_ais_minus_raise``: AIS minus RAISE) and its
    units (``nats``).
``value``
    A number, written as printed (its decimals are the paper's).
``uncertainty``, ``uncertainty_kind``
    Optional: the paper's own uncertainty of the value as printed, a number >= 0, and then (required)
    what it is: ``sd`` (a standard deviation over the paper's repeated runs), ``var`` (a variance over
    repeated runs) or ``pm`` (a "±" the paper prints without saying what it is).
``estimator``, ``init``, ``K``
    Optional: how the value matches our results -- our estimator's name (``ais``, ``raise``,
    ``csl``, ``exact``, ``hais``, ``ais-sm14500``, ``csl-unbiased-M250``, ...), our initial
    distribution (``uniform`` or ``base-rate``) and K, a positive integer (the number of intermediate
    distributions; for CSL the number of Gibbs sweeps per chain).  Empty where it does not apply.
``note``
    Optional text (how the paper obtained the value; how a garbled table was read).

A key ``(paper, table, row, column, quantity)`` appears once.  :func:`load_published` refuses a
file that breaks any of this, naming the line; :func:`lookup` and :func:`published_value` find one
value, :func:`paper_values` a paper's values for one row.  The file ships with the package
(``[tool.setuptools.package-data]``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from ..errors import LogzbenchError

__all__ = [
    "COLUMNS",
    "INITS",
    "KEY",
    "PAPERS",
    "PUBLISHED_CSV",
    "PublishedError",
    "UNCERTAINTY_KINDS",
    "load_published",
    "lookup",
    "paper_values",
    "published_value",
    "within_uncertainty",
]

#: the file's header, in order
COLUMNS = (
    "paper",
    "table",
    "row",
    "column",
    "quantity",
    "units",
    "value",
    "uncertainty",
    "uncertainty_kind",
    "estimator",
    "init",
    "K",
    "note",
)
#: the columns that identify a value
KEY = ("paper", "table", "row", "column", "quantity")
#: what an ``uncertainty`` is: a standard deviation or a variance over the paper's repeated runs, or
#: a "±" the paper prints without saying what it is
UNCERTAINTY_KINDS = ("sd", "var", "pm")
#: our initial distributions an ``init`` may name
INITS = ("uniform", "base-rate")
#: the package's own file
PUBLISHED_CSV = Path(__file__).with_name("published.csv")

#: each paper key of the file, with its full citation (authors, title, venue, year)
PAPERS = {
    "burda_raise": (
        'Y. Burda, R. B. Grosse and R. Salakhutdinov, "Accurate and Conservative Estimates of MRF '
        'Log-likelihood using Reverse Annealing", Proceedings of the 18th International Conference '
        "on Artificial Intelligence and Statistics (AISTATS), 2015"
    ),
    "sohl_dickstein_hais": (
        'J. Sohl-Dickstein and B. J. Culpepper, "Hamiltonian Annealed Importance Sampling for '
        'partition function estimation", Redwood Center for Theoretical Neuroscience technical '
        "report, 2012"
    ),
    "upadhya_sastry": (
        'V. Upadhya and P. S. Sastry, "Empirical Analysis of Sampling Based Estimators for '
        'Evaluating RBMs", Neural Information Processing (ICONIP), Lecture Notes in Computer '
        "Science, Springer, 2017"
    ),
    "li_avil": (
        'C. Li, C. Du, K. Xu, M. Welling, J. Zhu and B. Zhang, "Adversarial Variational Inference and '
        'Learning in Markov Random Fields", arXiv preprint, 2019'
    ),
}


class PublishedError(LogzbenchError, ValueError):
    """A file of published values that does not follow the format of :mod:`.published`."""


def _number(text: str) -> float:
    """``text`` as a float; NaN when it is not a number."""
    try:
        return float(text)
    except ValueError:
        return float("nan")


def _check_line(path: Path, line: int, row: Mapping[str, str]) -> tuple[float, float, int | None]:
    """The value, uncertainty (NaN when empty) and K (``None`` when empty) of one line, checked."""
    where = f"{path}, line {line}"
    empty = [c for c in KEY if not row[c]]
    if empty:
        raise PublishedError(f"{where}: empty {', '.join(empty)}")
    value = _number(row["value"])
    if not math.isfinite(value):
        raise PublishedError(f"{where}: value {row['value']!r} is not a finite number")
    uncertainty, kind = float("nan"), row["uncertainty_kind"]
    if row["uncertainty"]:
        uncertainty = _number(row["uncertainty"])
        if not (math.isfinite(uncertainty) and uncertainty >= 0):
            raise PublishedError(f"{where}: uncertainty {row['uncertainty']!r} is not a finite number >= 0")
        if not kind:
            raise PublishedError(
                f"{where}: uncertainty {row['uncertainty']!r} without an uncertainty_kind "
                f"(one of {', '.join(UNCERTAINTY_KINDS)})"
            )
        if kind not in UNCERTAINTY_KINDS:
            raise PublishedError(f"{where}: uncertainty_kind {kind!r} is not one of {', '.join(UNCERTAINTY_KINDS)}")
    elif kind:
        raise PublishedError(f"{where}: uncertainty_kind {kind!r} without an uncertainty")
    if row["init"] and row["init"] not in INITS:
        raise PublishedError(f"{where}: init {row['init']!r} is not one of {', '.join(INITS)}")
    K = None
    if row["K"]:
        text = row["K"]
        if not (text.isascii() and text.isdigit() and int(text) > 0):
            raise PublishedError(f"{where}: K {text!r} is not a positive integer")
        K = int(text)
    return value, uncertainty, K


def load_published(path: str | os.PathLike | None = None) -> pd.DataFrame:
    """The published values of ``path`` (default: the package's ``published.csv``), checked.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COLUMNS`: text everywhere (the optional fields may be empty) but ``value``
        (float), ``uncertainty`` (float, NaN when empty) and ``K`` (nullable integer, ``Int64``).

    Raises
    ------
    PublishedError
        The header is not :data:`COLUMNS`, a key field is empty, a value is not a finite number, an
        uncertainty is not a finite number >= 0 or comes without (or is missing under) an
        ``uncertainty_kind`` of :data:`UNCERTAINTY_KINDS`, an ``init`` is not one of :data:`INITS`,
        a ``K`` is not a positive integer, or a key appears twice; the message names the file and
        line.
    """
    path = Path(path) if path is not None else PUBLISHED_CSV
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise PublishedError(f"{path}: cannot read published values: {exc}") from exc
    header = [str(c).strip() for c in df.columns]
    if header != list(COLUMNS):
        missing = [c for c in COLUMNS if c not in header]
        extra = [c for c in header if c not in COLUMNS]
        raise PublishedError(
            f"{path}: header must be {','.join(COLUMNS)}; got {','.join(header)}"
            + (f" (missing: {', '.join(missing)})" if missing else "")
            + (f" (unknown: {', '.join(extra)})" if extra else "")
        )
    df.columns = header
    df = df.apply(lambda col: col.str.strip())
    checked = [_check_line(path, i + 2, row) for i, row in df.iterrows()]  # the header is line 1
    df["value"] = pd.Series([c[0] for c in checked], index=df.index, dtype=float)
    df["uncertainty"] = pd.Series([c[1] for c in checked], index=df.index, dtype=float)
    df["K"] = pd.Series(pd.array([c[2] for c in checked], dtype="Int64"), index=df.index)
    dup = df.duplicated(list(KEY), keep=False)
    if dup.any():
        lines = ", ".join(str(i + 2) for i in df.index[dup])
        raise PublishedError(f"{path}, lines {lines}: the same {'/'.join(KEY)} appears more than once")
    return df.reset_index(drop=True)


def lookup(
    published: pd.DataFrame, paper: str, table: Any, row: str, column: str, quantity: str
) -> Mapping[str, Any] | None:
    """The line of ``published`` (from :func:`load_published`) with this key, as a dict; ``None``
    when the paper has no such value.  ``table`` is compared as text (``2`` matches ``"2"``)."""
    want = dict(zip(KEY, (paper, table, row, column, quantity)))
    hit = published
    for col, val in want.items():
        hit = hit[hit[col] == str(val)]
    return hit.iloc[0].to_dict() if len(hit) else None


def published_value(published: pd.DataFrame, paper: str, table: Any, row: str, column: str, quantity: str) -> float:
    """The published value with this key (see :func:`lookup`); NaN when there is none."""
    hit = lookup(published, paper, table, row, column, quantity)
    return float(hit["value"]) if hit is not None else float("nan")


def paper_values(published: pd.DataFrame, paper: str, row: str) -> pd.DataFrame:
    """The lines of ``published`` (from :func:`load_published`) of ``paper`` whose row is ``row``, from
    all its tables, in the file's order (empty when there are none)."""
    return published[(published["paper"] == paper) & (published["row"] == str(row))].reset_index(drop=True)


def within_uncertainty(ours: float, se: float, paper: float, z: float, rounding: float = 0.0) -> str:
    """Whether ``ours - paper`` lies within ``z`` standard errors ``se`` of ours (plus ``rounding``, e.g.
    half a unit of the paper's last printed digit): ``"yes"`` when ``|ours - paper| <= z * se +
    rounding``, else ``"no"``; ``"no uncertainty"`` when ``se`` is missing, ``"no paper value"`` /
    ``"no AIS estimate"`` when ``paper`` / ``ours`` is."""
    if not math.isfinite(paper):
        return "no paper value"
    if not math.isfinite(ours):
        return "no AIS estimate"
    if not math.isfinite(se):
        return "no uncertainty"
    return "yes" if abs(ours - paper) <= z * se + rounding else "no"
