"""Job counts of every workflow config, by dry run, and the documentation's copies of them.

Each ``config/*.yaml`` is dry-run (``snakemake -n`` in a fresh temporary working directory, with
the repository's Snakefile and the data mirror of ``$LOGZBENCH_DATA_MIRROR``, default
``../shared/data``) and its job count read from Snakemake's "Job stats" table (the ``total``
line, which counts the final ``all`` job too).  The counts the documentation quotes are

* the ``size`` cell of each config's row in ``config/README.md``'s table, which starts with
  ``NN jobs`` (:data:`ROW`);
* any ``\\`config/NAME.yaml\\`: NN jobs`` in ``README.md`` and ``docs/*.md`` (:data:`QUOTE`), e.g. the
  README's one sentence on the default config.

Without ``--write`` the tool prints each config's count, the count written, and exits 1 when one
differs or a config has no row (``tests/test_config_jobs.py`` checks the same); with ``--write`` it
rewrites the stale counts (each file atomically) and still exits 1 for a config without a row (its
description is for a person to write) or one whose dry run fails.

Usage::

    python benchmarks/config_jobs.py [--write] [--workers 2] [config/X.yaml ...]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Mapping

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "config"
TABLE = CONFIG_DIR / "README.md"
#: a row of config/README.md's table: | `NAME.yaml` | what | size |, the size starting with "NN jobs"
ROW = re.compile(r"^\|\s*`(?P<name>[^`]+\.yaml)`\s*\|(?P<what>.*)\|(?P<size>[^|]*)\|\s*$")
COUNT = re.compile(r"^\s*(?P<n>\d[\d,]*) jobs\b")
#: a count quoted in prose: `config/NAME.yaml`: NN jobs
QUOTE = re.compile(r"`config/(?P<name>[^`]+\.yaml)`: (?P<n>\d[\d,]*) jobs\b")
#: the files whose prose quotes are checked and rewritten
QUOTING_FILES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MLFLOW_TRACKING_URI", None)  # nothing is tracked by a dry run, but keep the store local
    env.setdefault("LOGZBENCH_DATA_MIRROR", str(REPO.parent / "shared" / "data"))
    return env


def parse_total(output: str) -> int:
    """The ``total`` of the "Job stats" table in a Snakemake (dry) run's output; ``ValueError``
    when the output has no such table (0 when Snakemake says there is nothing to be done)."""
    if "Job stats:" not in output:
        if "Nothing to be done" in output:
            return 0
        raise ValueError("no 'Job stats' table in snakemake's output")
    for line in output.split("Job stats:", 1)[1].splitlines():
        m = re.match(r"^total\s+(\d+)\s*$", line)
        if m:
            return int(m.group(1))
    raise ValueError("snakemake's 'Job stats' table has no 'total' line")


def dry_run_count(config: str | os.PathLike, timeout: float = 600.0) -> int:
    """The number of jobs of ``config`` in a fresh working directory (``snakemake -n``).

    Raises ``RuntimeError`` with the end of snakemake's output when the dry run fails."""
    with tempfile.TemporaryDirectory(prefix="config-jobs-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "--quiet",
            "rules",
            "reason",
            "host",
            "--snakefile",
            str(REPO / "Snakefile"),
            "--directory",
            tmp,
            "--cores",
            "1",
            "--configfile",
            str(Path(config).resolve()),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=tmp, timeout=timeout)
        out = proc.stdout + proc.stderr
        if proc.returncode != 0:
            tail = "\n".join(out.strip().splitlines()[-15:])
            raise RuntimeError(f"{Path(config).name}: snakemake -n failed ({proc.returncode}):\n{tail}")
        return parse_total(out)


def dry_run_counts(configs: Iterable[str | os.PathLike], workers: int = 2) -> dict[str, int | str]:
    """``{file name: job count}`` of ``configs``, ``workers`` dry runs at a time; a failed dry run's
    value is its error message."""

    def one(path):
        try:
            return Path(path).name, dry_run_count(path)
        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
            return Path(path).name, str(exc)

    with ThreadPoolExecutor(max_workers=max(1, int(workers))) as pool:
        return dict(pool.map(one, list(configs)))


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def table_counts(text: str) -> dict[str, int | None]:
    """``{config file name: count}`` from config/README.md's table (``None``: the row's size cell does
    not start with ``NN jobs``)."""
    out: dict[str, int | None] = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            c = COUNT.match(m.group("size"))
            out[m.group("name")] = _int(c.group("n")) if c else None
    return out


def quoted_counts(text: str) -> list[tuple[str, int]]:
    """Every ``(config file name, count)`` quoted as `` `config/NAME.yaml`: NN jobs `` in ``text``."""
    return [(m.group("name"), _int(m.group("n"))) for m in QUOTE.finditer(text)]


def _fmt(n: int) -> str:
    return f"{n:,}"


def rewrite_table(text: str, counts: Mapping[str, int]) -> str:
    """config/README.md with each row's size cell starting ``NN jobs`` per ``counts`` (a cell without a
    count gets one in front; rows of configs not in ``counts`` are kept)."""
    lines = []
    for line in text.splitlines(keepends=True):
        m = ROW.match(line.rstrip("\n"))
        n = counts.get(m.group("name")) if m else None
        if m and isinstance(n, int):
            size = m.group("size")
            c = COUNT.match(size)
            if c:
                new = f" {_fmt(n)} jobs{size[c.end() :]}"
            else:
                rest = size.strip()
                new = f" {_fmt(n)} jobs" + (f", {rest} " if rest else " ")
            end = "\n" if line.endswith("\n") else ""
            line = line.rstrip("\n")[: m.start("size")] + new + "|" + end
        lines.append(line)
    return "".join(lines)


def rewrite_quotes(text: str, counts: Mapping[str, int]) -> str:
    """``text`` with every `` `config/NAME.yaml`: NN jobs `` set to ``counts[NAME]`` (others kept)."""

    def sub(m):
        n = counts.get(m.group("name"))
        return f"`config/{m.group('name')}`: {_fmt(n)} jobs" if isinstance(n, int) else m.group(0)

    return QUOTE.sub(sub, text)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("configs", nargs="*", help="configs to dry-run (default: every config/*.yaml)")
    p.add_argument("--write", action="store_true", help="rewrite the stale counts in the documentation")
    p.add_argument("--workers", type=int, default=2, help="dry runs at a time (default 2)")
    args = p.parse_args(argv)
    configs = [Path(c) for c in args.configs] or sorted(CONFIG_DIR.glob("*.yaml"))
    missing = [str(c) for c in configs if not c.is_file()]
    if missing:
        print(f"config_jobs: no such config: {', '.join(missing)}", file=sys.stderr)
        return 2
    counts = dry_run_counts(configs, args.workers)
    good = {k: v for k, v in counts.items() if isinstance(v, int)}
    table_text = TABLE.read_text()
    written = table_counts(table_text)
    status = 0
    for name, n in sorted(counts.items()):
        if not isinstance(n, int):
            print(f"{name}: dry run failed\n{n}", file=sys.stderr)
            status = 1
            continue
        w = written.get(name, "no row") if name in written else "no row"
        mark = "" if w == n else ("  <- stale" if name in written else "  <- no row in config/README.md")
        print(f"{name:28s} {n:6d} jobs   written: {w}{mark}")
        if name not in written or (w != n and not args.write):
            status = 1
    quoting = [f for f in QUOTING_FILES if f.is_file()]
    for f in quoting:
        for name, q in quoted_counts(f.read_text()):
            n = good.get(name)
            if n is not None and q != n:
                print(f"{f.relative_to(REPO)}: quotes {name} at {q} jobs, the dry run has {n}")
                status = status or (0 if args.write else 1)
    if args.write:
        new = rewrite_table(table_text, good)
        if new != table_text:
            _write_atomic(TABLE, new)
            print(f"rewrote {TABLE.relative_to(REPO)}")
        for f in quoting:
            text = f.read_text()
            new = rewrite_quotes(text, good)
            if new != text:
                _write_atomic(f, new)
                print(f"rewrote {f.relative_to(REPO)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
