"""The README and the documentation site agree with what CI runs and with each other (no mkdocs needed).

* The README's test command is the one ``.ci/run`` runs, verbatim, and the main-job command is there.
* Every snippet a docs page includes (``--8<-- "FILE:SECTION"``) exists, markers and all.
* Every page under ``docs/`` is in the site's navigation (``mkdocs.yml``) and every navigation entry exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
DOCS = REPO / "docs"

TEST_COMMAND = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -q torch==2.13.0 && "
    "pip install -q -e '.[test]' && python -m pytest -n 2"
)
MAIN_JOB = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e '.[test]' && "
    "LOGZBENCH_DATA_MIRROR=../shared/data snakemake --cores 2 --workflow-profile workflow/profiles/default"
)


def _fenced_after(text: str, label: str) -> str:
    """The first ```bash block after the bold ``label``."""
    m = re.search(r"\*\*" + re.escape(label) + r"\*\*.*?```bash\n(.*?)\n```", text, re.S)
    assert m, f"no command under **{label}**"
    return m.group(1).strip()


def test_readme_commands_are_what_ci_runs():
    assert _fenced_after(README, "Tests") == TEST_COMMAND
    assert _fenced_after(README, "Main job") == MAIN_JOB
    ci = (REPO / ".ci" / "run").read_text()
    assert TEST_COMMAND in ci.splitlines()


def test_snippets_resolve():
    includes = []
    for page in DOCS.rglob("*.md"):
        includes += re.findall(r'^--8<-- "([^"]+)"\s*$', page.read_text(), re.M)
    assert includes
    for inc in includes:
        path, _, section = inc.partition(":")
        text = (REPO / path).read_text()
        if section:
            assert f"--8<-- [start:{section}]" in text and f"--8<-- [end:{section}]" in text, inc


def _nav_pages(entries) -> list[str]:
    pages = []
    for entry in entries:
        if isinstance(entry, str):
            pages.append(entry)
        else:
            for value in entry.values():
                pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_page_is_in_the_navigation():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    nav = set(_nav_pages(config["nav"]))
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert nav - on_disk == set(), "navigation entries without a page"
    assert on_disk - nav == set(), "pages missing from the navigation"


def test_readme_links_exist():
    links = re.findall(r"\]\(((?:docs/)?[^)#\s]+\.md)\)", README)
    assert links
    for link in links:
        assert (REPO / link).is_file(), link
