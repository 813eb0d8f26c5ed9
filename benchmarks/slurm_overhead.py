"""Cluster overhead benchmark (not a test): a config's wall time on SLURM against the same config run locally.

Runs the workflow twice in fresh directories, one after the other on the same machine: locally
(``--cores N``) and with ``--workflow-profile workflow/profiles/slurm --cores N`` (the config's
``cluster_group`` decides how many SLURM jobs; ``--group none|model|workflow`` overrides it), then prints
both wall times, their ratio, the number of SLURM jobs and whether every MLflow run of the config is in each
store once.  Issue 27's target: ``config/test.yaml`` on the single-node SLURM of ``.ci/slurm.sh`` in at
most twice its local time.

Usage::

    bash .ci/slurm.sh start      # as root, once
    python benchmarks/slurm_overhead.py [--configfile config/test.yaml] [--cores 2] [--group workflow]
        [--repeat 1] [--keep] [-- extra snakemake arguments for both runs]

Figures depend on the machine, the SLURM and on what else runs: quote them with the date, machine and cores
it prints, and compare only the two runs of one invocation.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _machine import machine

REPO = Path(__file__).resolve().parents[1]


def run(workdir: Path, args: list[str]) -> tuple[float, str]:
    """``snakemake`` in ``workdir`` with ``args``; its wall time and output (raises on failure)."""
    env = dict(os.environ)
    env.pop("MLFLOW_TRACKING_URI", None)
    env.setdefault("LOGZBENCH_DATA_MIRROR", str(REPO.parent / "shared" / "data"))
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd + args, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"snakemake failed ({proc.returncode}) in {workdir}:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return wall, proc.stdout + proc.stderr


def runs_once(workdir: Path, configfile: Path) -> bool:
    """Whether the store has every estimate and training run of the config, each once."""
    sys.path.insert(0, str(REPO / "tests"))
    from test_slurm import _config, expected_runs  # the tests' expectations, one definition

    from logzbench import tracking

    config = _config(configfile)
    uri = "sqlite:///" + str(workdir / "mlflow.db")
    exp = expected_runs(config)
    for kind in ("estimate", "train"):
        runs = tracking.find_runs(uri=uri, experiment_name=config["tracking"]["experiment"], kind=kind)
        if Counter(r.data.tags[tracking.KEY_TAG] for r in runs) != exp[kind]:
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configfile", type=Path, default=REPO / "config" / "test.yaml")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--group", choices=["none", "model", "workflow"], default=None)
    ap.add_argument("--repeat", type=int, default=1, help="pairs of runs (local, then SLURM)")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    ap.add_argument("extra", nargs="*", help="after --: more snakemake arguments for both runs")
    a = ap.parse_args(argv)
    if shutil.which("sbatch") is None:
        print("slurm_overhead: no sbatch here; start the local SLURM with: bash .ci/slurm.sh start", file=sys.stderr)
        return 2
    configfile = a.configfile.resolve()
    base = ["--configfile", str(configfile), "--cores", str(a.cores), *a.extra]
    if a.group:
        base += ["--config", f"cluster_group={a.group}"]
    print(f"# {time.strftime('%Y-%m-%d')}, {machine()}, --cores {a.cores}, {configfile.name}")
    print("pair  local_s  slurm_s  ratio  slurm_jobs  runs_once")
    ratios = []
    for i in range(a.repeat):
        dirs = [Path(tempfile.mkdtemp(prefix=f"slurm-overhead-{kind}-")) for kind in ("local", "slurm")]
        try:
            local, _ = run(dirs[0], base)
            slurm, out = run(dirs[1], [*base, "--workflow-profile", str(REPO / "workflow" / "profiles" / "slurm")])
            jobs = len(re.findall(r"has been submitted with SLURM jobid", out))
            once = runs_once(dirs[0], configfile) and runs_once(dirs[1], configfile)
            ratios.append(slurm / local)
            print(f"{i:4d}  {local:7.1f}  {slurm:7.1f}  {slurm / local:5.2f}  {jobs:10d}  {once}")
        finally:
            if not a.keep:
                for d in dirs:
                    shutil.rmtree(d, ignore_errors=True)
            else:
                print(f"kept: {dirs[0]} {dirs[1]}")
    print(f"ratio SLURM / local: {min(ratios):.2f} (best of {len(ratios)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
