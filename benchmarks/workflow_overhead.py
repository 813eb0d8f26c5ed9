"""Workflow overhead benchmark (not a test): wall time against the compute its jobs report.

Runs the workflow on a config in a fresh directory (or reads a finished run), then prints

* the wall time of the ``snakemake`` command;
* the compute seconds the run's own records report: estimation (``result.seconds`` of every
  estimate record under ``results/estimates``: the estimator's run) and the evaluation of the test
  rows' ``log f(v)`` the test log-likelihood needs (``result.extra.log_f_seconds``: exact for an
  RBM, importance-sampled for a DBM or DBN, where it often costs more than the estimator), training
  (``seconds`` of every
  ``results/models/*.json``) and repeated trials (the ``seconds`` column of every per-trial table
  under ``results/trials``);
* the ratio ``wall / (compute / cores)``: 1 would be every core computing all the time (the
  target of issue 11 is at most 1.5 for the default config on 2 cores);
* the job wall time per rule from Snakemake's ``benchmark:`` files (``results/benchmarks``).

Usage::

    python benchmarks/workflow_overhead.py [--configfile config/config.yaml] [--cores 2]
        [--directory DIR] [--keep] [--json out.json] [-- extra snakemake arguments]
    python benchmarks/workflow_overhead.py --results DIR --wall SECONDS --cores 2   # a finished run

The run uses the repository's Snakefile, ``--workflow-profile workflow/profiles/default`` and the
data mirror of ``$LOGZBENCH_DATA_MIRROR`` (default ``../shared/data``).  Figures depend on the
machine and on what else runs on it: quote them with the date, machine and cores it prints.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import machine

REPO = Path(__file__).resolve().parents[1]


def compute_seconds(workdir: Path) -> dict[str, float]:
    """Compute seconds reported by the run's records: ``estimate``, ``train``, ``trials``."""
    res = workdir / "results"
    est = log_f = 0.0
    for f in glob.glob(str(res / "estimates" / "**" / "*.json"), recursive=True):
        with open(f) as fh:
            r = json.load(fh).get("result") or {}
        est += float(r.get("seconds") or 0.0)
        log_f += float((r.get("extra") or {}).get("log_f_seconds") or 0.0)
    train = 0.0
    for f in glob.glob(str(res / "models" / "*.json")):
        with open(f) as fh:
            train += float(json.load(fh).get("seconds") or 0.0)
    trials = 0.0
    for f in glob.glob(str(res / "trials" / "**" / "*.csv"), recursive=True):
        with open(f, newline="") as fh:
            trials += sum(float(r.get("seconds") or 0.0) for r in csv.DictReader(fh))
    return {"estimate": est, "log_f": log_f, "train": train, "trials": trials}


def job_seconds(workdir: Path, suffix: str = ".tsv", column: str = "s") -> dict[str, tuple[int, float]]:
    """``{rule: (jobs, summed job wall seconds)}`` from the ``benchmark:`` files (each rule's own process);
    ``suffix=".job.tsv"``: from the usage of each job's own process (logzbench.pipeline.usage: a process
    forked from the warm server), and ``column="cpu_time"`` its CPU seconds."""
    out: dict[str, tuple[int, float]] = {}
    bench = workdir / "results" / "benchmarks"
    for f in sorted(glob.glob(str(bench / "**" / f"*{suffix}"), recursive=True)):
        if suffix == ".tsv" and f.endswith(".job.tsv"):
            continue
        rel = Path(f).relative_to(bench).parts
        rule = rel[0] if len(rel) > 1 else rel[0][: -len(suffix)]
        with open(f, newline="") as fh:
            row = next(csv.DictReader(fh, delimiter="\t"))
        n, s = out.get(rule, (0, 0.0))
        out[rule] = (n + 1, s + float(row[column]))
    return out


def run_workflow(configfile: str, cores: int, directory: Path, extra: list[str]) -> float:
    env = dict(os.environ)
    env.setdefault("LOGZBENCH_DATA_MIRROR", str((REPO.parent / "shared" / "data").resolve()))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(directory),
        "--cores",
        str(cores),
        "--workflow-profile",
        str(REPO / "workflow" / "profiles" / "default"),
        "--configfile",
        str(Path(configfile).resolve()),
        "--quiet",
        "progress",
        *extra,
    ]
    print("$", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=directory)
    return time.perf_counter() - t0


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configfile", default=str(REPO / "config" / "config.yaml"))
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--directory", help="run in this (new or empty) directory; default: a temporary one")
    p.add_argument("--keep", action="store_true", help="keep the temporary run directory")
    p.add_argument("--results", help="read this finished run's directory instead of running the workflow")
    p.add_argument("--wall", type=float, help="with --results: the run's wall time in seconds")
    p.add_argument("--json", help="also write the figures here")
    p.add_argument("extra", nargs="*", help="extra snakemake arguments (after --)")
    args = p.parse_args(argv)

    tmp = None
    if args.results:
        if args.wall is None:
            p.error("--results needs --wall")
        workdir, wall = Path(args.results), args.wall
    else:
        workdir = (
            Path(args.directory) if args.directory else Path(tmp := tempfile.mkdtemp(prefix="logzbench-overhead-"))
        )
        workdir.mkdir(parents=True, exist_ok=True)
        wall = run_workflow(args.configfile, args.cores, workdir, args.extra)
    comp = compute_seconds(workdir)
    jobs = job_seconds(workdir)
    total = sum(comp.values())
    ratio = wall / (total / args.cores) if total > 0 else float("inf")
    out = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "cores": args.cores,
        "config": args.configfile if not args.results else None,
        "wall_seconds": wall,
        "compute_seconds": comp,
        "compute_total": total,
        "ratio": ratio,
        "jobs": {k: {"n": n, "seconds": s} for k, (n, s) in jobs.items()},
        "job_seconds_total": sum(s for _, s in jobs.values()),
        "job_cpu_seconds": {k: s for k, (_, s) in job_seconds(workdir, ".job.tsv", "cpu_time").items()},
    }
    print(f"date {out['date']}; {out['machine']}; --cores {args.cores}")
    print(f"wall time {wall:.1f} s")
    print(
        "compute reported by the records: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in comp.items())
        + f"; total {total:.1f} s"
    )
    print(f"jobs: {sum(n for n, _ in jobs.values())}, summed job wall time {out['job_seconds_total']:.1f} s")
    for k, (n, s) in sorted(jobs.items(), key=lambda kv: -kv[1][1]):
        print(f"  {k:<18} {n:>5} jobs {s:>9.1f} s")
    print(f"ratio wall / (compute / cores) = {wall:.1f} / ({total:.1f} / {args.cores}) = {ratio:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    if tmp and not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    main()
