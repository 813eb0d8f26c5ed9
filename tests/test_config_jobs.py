"""The job counts the documentation quotes equal the configs' dry runs (benchmarks/config_jobs.py).

``python benchmarks/config_jobs.py --write`` refreshes them when a change of the DAG or a new config
makes this fail.  The default config's count (README.md and config/README.md) is checked in the
default suite; every config's row in config/README.md is checked against that config's dry run in
tests/test_workflow.py::test_dry_run_every_config, which makes one of each config anyway.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("snakemake", reason="snakemake is not installed; the dry runs need it")

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "config").glob("*.yaml"))
HOW = "refresh the counts with: python benchmarks/config_jobs.py --write"


@pytest.fixture(scope="module")
def tool(config_jobs_tool):
    return config_jobs_tool


@pytest.fixture(scope="module")
def written(tool):
    return tool.table_counts((REPO / "config" / "README.md").read_text())


def test_default_config_count_quoted_once_and_right(tool, written):
    n = tool.dry_run_count(REPO / "config" / "config.yaml")
    said = written.get("config.yaml")
    assert said == n, f"config/README.md says {said}, the dry run {n}; {HOW}"
    quotes = tool.quoted_counts((REPO / "README.md").read_text())
    assert [q for q in quotes if q[0] == "config.yaml"] == [("config.yaml", n)], f"README.md quotes {quotes}; {HOW}"


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_every_config_has_a_row(written, config):
    """Every config has its row; that the row's count is its dry run's is checked on the dry run
    tests/test_workflow.py::test_dry_run_every_config makes of each config anyway (one run serves both)."""
    assert config.name in written, f"config/README.md's table has no row for {config.name}"


def test_parse_and_rewrite(tool):
    """The parsers read what the rewriters write, and a stale count is replaced, nothing else."""
    out = "Job stats:\njob      count\n-------  -----\nreport       1\nall          1\ntotal        2\n\nReasons: x\n"
    assert tool.parse_total(out) == 2
    with pytest.raises(ValueError, match="Job stats"):
        tool.parse_total("Building DAG of jobs...\n")
    table = (
        "| file | what | size |\n|---|---|---|\n"
        "| `a.yaml` | the A study, 3 jobs of it | 12 jobs, CPU hours |\n"
        "| `b.yaml` | B | GPU hours |\n"
        "| `c.yaml` | C | 1,406 jobs |\n"
    )
    assert tool.table_counts(table) == {"a.yaml": 12, "b.yaml": None, "c.yaml": 1406}
    new = tool.rewrite_table(table, {"a.yaml": 7, "b.yaml": 1234})
    assert tool.table_counts(new) == {"a.yaml": 7, "b.yaml": 1234, "c.yaml": 1406}
    assert "| the A study, 3 jobs of it | 7 jobs, CPU hours |" in new and "| 1,234 jobs, GPU hours |" in new
    text = "the default config (`config/config.yaml`: 89 jobs) and `config/x.yaml`: 3 jobs"
    assert tool.quoted_counts(text) == [("config.yaml", 89), ("x.yaml", 3)]
    assert tool.rewrite_quotes(text, {"config.yaml": 106}) == text.replace("89", "106")
