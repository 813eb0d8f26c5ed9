"""Compare two finished workflow runs of the same config (not a test): prints what differs.

Proves that a change which moves code leaves what users see unchanged.  Given two working
directories of ``snakemake --directory DIR`` (say, one from the code before a change and one
after), it compares:

* every estimate record ``results/estimates/**.json``: the settings and every value of the
  result (log Z, test log-likelihood, standard errors, intervals, ESS, sweeps, extras);
* every per-chain array file ``results/estimates/**.npz``;
* every MLflow run of the experiment, matched by its ``logzbench.key`` tag: params, metric
  names and values, tag names and values;
* every report table ``results/report/**.csv`` and ``report.json``, and the trial tables.

Timings (``seconds``, ``sweeps_per_second``, wall-time metrics), ``code_version``, MLflow run
ids and absolute paths differ between any two runs and are left out.  Floating-point values
must be equal exactly: the same seeds must give the same numbers.

Usage::

    python benchmarks/compare_runs.py BEFORE_DIR AFTER_DIR [--experiment logzbench-test]

Exit status 0 when nothing differs, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: keys whose values legitimately differ between two runs (timing, provenance, run ids, paths)
VOLATILE = {
    "seconds",
    "sweeps_per_second",
    "code_version",
    "mlflow_run_id",
    "arrays",
    "source",
    "mean_seconds",
    "run_id",
    "mlflow_runs_tagged",
    "files",
    "plots",
    "trial_plots",
    "total_seconds",
    "wall_seconds",
    "log_f_seconds",
    "pilot_seconds",
    "started_at",
    "finished_at",
    "logzbench.logged",
}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def diff_values(a: Any, b: Any, where: str, out: list[str]) -> None:
    """Append to ``out`` every difference between two JSON-like values (volatile keys skipped)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in VOLATILE:
                continue
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'after' if k not in a else 'before'}")
            else:
                diff_values(a[k], b[k], f"{where}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff_values(x, y, f"{where}[{i}]", out)
    elif not _same(a, b):
        out.append(f"{where}: {a!r} != {b!r}")


def compare_records(before: Path, after: Path, out: list[str]) -> int:
    root_a, root_b = before / "results" / "estimates", after / "results" / "estimates"
    files_a = {p.relative_to(root_a) for p in root_a.rglob("*.json")}
    files_b = {p.relative_to(root_b) for p in root_b.rglob("*.json")}
    for p in sorted(files_a ^ files_b):
        out.append(f"estimates/{p}: only {'before' if p in files_a else 'after'}")
    for p in sorted(files_a & files_b):
        diff_values(json.loads((root_a / p).read_text()), json.loads((root_b / p).read_text()), f"estimates/{p}", out)
        za, zb = root_a / p.with_suffix(".npz"), root_b / p.with_suffix(".npz")
        if za.exists() or zb.exists():
            with np.load(za) as x, np.load(zb) as y:
                if sorted(x.files) != sorted(y.files):
                    out.append(f"estimates/{p.with_suffix('.npz')}: arrays {x.files} != {y.files}")
                for k in set(x.files) & set(y.files):
                    if not np.array_equal(x[k], y[k], equal_nan=True):
                        out.append(f"estimates/{p.with_suffix('.npz')}[{k}] differs")
    return len(files_a & files_b)


def _runs(workdir: Path, experiment: str) -> dict[str, Any]:
    from logzbench import tracking

    runs = tracking.find_runs(uri="sqlite:///" + str(workdir / "mlflow.db"), experiment_name=experiment)
    return {r.data.tags.get(tracking.KEY_TAG, r.info.run_id): r for r in runs}


def compare_mlflow(before: Path, after: Path, experiment: str, out: list[str]) -> int:
    ra, rb = _runs(before, experiment), _runs(after, experiment)
    for k in sorted(set(ra) ^ set(rb)):
        out.append(f"mlflow {k}: only {'before' if k in ra else 'after'}")
    for k in sorted(set(ra) & set(rb)):
        a, b = ra[k].data, rb[k].data
        diff_values(dict(a.params), dict(b.params), f"mlflow {k} params", out)
        metrics_a = {m: v for m, v in a.metrics.items() if "second" not in m}
        metrics_b = {m: v for m, v in b.metrics.items() if "second" not in m}
        diff_values(metrics_a, metrics_b, f"mlflow {k} metrics", out)
        tags_a = {t: v for t, v in a.tags.items() if not t.startswith("mlflow.")}
        tags_b = {t: v for t, v in b.tags.items() if not t.startswith("mlflow.")}
        diff_values(tags_a, tags_b, f"mlflow {k} tags", out)
    return len(set(ra) & set(rb))


def compare_report(before: Path, after: Path, out: list[str]) -> int:
    root_a, root_b = before / "results" / "report", after / "results" / "report"
    files_a = {p.relative_to(root_a) for p in root_a.rglob("*") if p.suffix in (".csv", ".json", ".png")}
    files_b = {p.relative_to(root_b) for p in root_b.rglob("*") if p.suffix in (".csv", ".json", ".png")}
    for p in sorted(files_a ^ files_b):
        out.append(f"report/{p}: only {'before' if p in files_a else 'after'}")
    n = 0
    for p in sorted(files_a & files_b):
        if p.suffix == ".json":
            diff_values(json.loads((root_a / p).read_text()), json.loads((root_b / p).read_text()), f"report/{p}", out)
        elif p.suffix == ".csv":
            a, b = pd.read_csv(root_a / p), pd.read_csv(root_b / p)
            if list(a.columns) != list(b.columns):
                out.append(f"report/{p}: columns {list(a.columns)} != {list(b.columns)}")
                continue
            keep = [c for c in a.columns if c not in VOLATILE and "second" not in c]
            if len(a) != len(b):
                out.append(f"report/{p}: {len(a)} rows != {len(b)} rows")
            elif not a[keep].equals(b[keep]):
                bad = [c for c in keep if not a[c].equals(b[c])]
                out.append(f"report/{p}: columns {bad} differ")
        n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--experiment", default="logzbench", help="MLflow experiment name (config tracking.experiment)")
    args = ap.parse_args(argv)
    out: list[str] = []
    n_rec = compare_records(args.before, args.after, out)
    n_runs = compare_mlflow(args.before, args.after, args.experiment, out)
    n_rep = compare_report(args.before, args.after, out)
    print(f"compared {n_rec} estimate records (+ arrays), {n_runs} MLflow runs, {n_rep} report files")
    for line in out:
        print("DIFF", line)
    print("identical" if not out else f"{len(out)} differences")
    return 0 if not out else 1


if __name__ == "__main__":
    sys.exit(main())
