"""Values the reproduced papers published: ``report/published.csv``, loaded, checked and looked up.

The file has one value per line, under the header ``paper, table, row, column, quantity, units,
value, note``:

``paper``
    A short key of the paper (``li_avil``: Li et al., "Adversarial Variational Inference and
    Learning in Markov Random Fields").
``table``
    The paper's table (or figure) as printed (``2``; compared as text).
``row``, ``column``
    Where the value stands in it, in this benchmark's names: e.g. ``rbm/avil`` (family / learner)
    and the dataset's source name (``mushrooms``).
``quantity``, ``units``
    What the value is (``mean_test_ll_ais``: the mean test log-likelihood by AIS) and its units.
``value``
    A number.
``note``
    Optional text (how the paper obtained it).

A key ``(paper, table, row, column, quantity)`` appears once.  :func:`load_published` refuses a
file that breaks any of this, naming the line; :func:`lookup` and :func:`published_value` find one
value.  The file ships with the package (``[tool.setuptools.package-data]``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from ..errors import LogzbenchError

__all__ = ["COLUMNS", "KEY", "PUBLISHED_CSV", "PublishedError", "load_published", "lookup", "published_value"]

#: the file's header, in order
COLUMNS = ("paper", "table", "row", "column", "quantity", "units", "value", "note")
#: the columns that identify a value
KEY = ("paper", "table", "row", "column", "quantity")
#: the package's own file
PUBLISHED_CSV = Path(__file__).with_name("published.csv")


class PublishedError(LogzbenchError, ValueError):
    """A file of published values that does not follow the format of :mod:`.published`."""


def load_published(path: str | os.PathLike | None = None) -> pd.DataFrame:
    """The published values of ``path`` (default: the package's ``published.csv``), checked.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COLUMNS`: text everywhere (``note`` and ``units`` may be empty) but ``value``
        (float).

    Raises
    ------
    PublishedError
        The header is not :data:`COLUMNS`, a key field is empty, a value is not a finite number, or
        a key appears twice; the message names the file and line.
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
        raise PublishedError(f"{path}: header must be {','.join(COLUMNS)}; got {','.join(header)}"
                             + (f" (missing: {', '.join(missing)})" if missing else "")
                             + (f" (unknown: {', '.join(extra)})" if extra else ""))
    df.columns = header
    df = df.apply(lambda col: col.str.strip())
    values = []
    for i, row in df.iterrows():
        line = i + 2  # the header is line 1
        empty = [c for c in KEY if not row[c]]
        if empty:
            raise PublishedError(f"{path}, line {line}: empty {', '.join(empty)}")
        try:
            value = float(row["value"])
        except ValueError:
            value = float("nan")
        if not math.isfinite(value):
            raise PublishedError(f"{path}, line {line}: value {row['value']!r} is not a finite number")
        values.append(value)
    df["value"] = pd.Series(values, index=df.index, dtype=float)
    dup = df.duplicated(list(KEY), keep=False)
    if dup.any():
        lines = ", ".join(str(i + 2) for i in df.index[dup])
        raise PublishedError(f"{path}, lines {lines}: the same {'/'.join(KEY)} appears more than once")
    return df.reset_index(drop=True)


def lookup(published: pd.DataFrame, paper: str, table: Any, row: str, column: str,
           quantity: str) -> Mapping[str, Any] | None:
    """The line of ``published`` (from :func:`load_published`) with this key, as a dict; ``None``
    when the paper has no such value.  ``table`` is compared as text (``2`` matches ``"2"``)."""
    want = dict(zip(KEY, (paper, table, row, column, quantity)))
    hit = published
    for col, val in want.items():
        hit = hit[hit[col] == str(val)]
    return hit.iloc[0].to_dict() if len(hit) else None


def published_value(published: pd.DataFrame, paper: str, table: Any, row: str, column: str,
                    quantity: str) -> float:
    """The published value with this key (see :func:`lookup`); NaN when there is none."""
    hit = lookup(published, paper, table, row, column, quantity)
    return float(hit["value"]) if hit is not None else float("nan")
