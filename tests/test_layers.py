"""The package's layers point one way: no module imports a higher layer, and no import cycles.

Every module under ``src/logzbench`` is parsed with :mod:`ast`; every import counts, at module
level and inside functions alike (a lazy import is still a dependency).  The layers, lowest
first:

0. ground: ``logzbench`` itself, ``errors``, ``utils``, ``schedules``, ``kernels`` (a package),
   ``registry``, ``options``, ``plotting``, ``stats``, ``sources``;
1. ``data`` (imports only ground);
2. ``models``;
3. ``estimators``;
4. ``api``, ``sampling`` (drawing samples from a model), ``training``, ``trials``, ``tracking`` (a package,
   with the ``tracking_server`` command), and ``pipeline``
   (what only the workflow needs: config -> jobs, its checks, one job end to end, the warm server; it
   imports no report, whose job the warm server runs by its name, a string, and the report reads the
   check of its published rows from it);
5. ``report`` (a module or a package);
6. ``cli``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "logzbench"

#: top-level name under ``logzbench`` -> layer (``""`` is the package's own ``__init__``)
LAYERS = {
    **dict.fromkeys(
        ("", "errors", "utils", "schedules", "kernels", "registry", "options", "plotting", "stats", "sources"), 0
    ),
    "data": 1,
    "models": 2,
    "estimators": 3,
    **dict.fromkeys(("api", "sampling", "training", "trials", "tracking", "tracking_server", "pipeline"), 4),
    "report": 5,
    "cli": 6,
}
LAYER_NAMES = ("ground", "data", "models", "estimators", "application", "report", "entry points")


def module_files() -> dict[str, Path]:
    """``{dotted module name: source file}`` of every module of the package (a package shadows a
    module of the same name, as in Python's import system)."""
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        if (path.with_suffix("") / "__init__.py").is_file():
            continue
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def is_package(name: str, files: dict[str, Path]) -> bool:
    """Whether module ``name`` is a package (its file is an ``__init__.py``)."""
    return files[name].name == "__init__.py"


def resolve_from(node: ast.ImportFrom, importer: str, files: dict[str, Path]) -> str:
    """The absolute module a ``from ... import`` statement in ``importer`` names."""
    if not node.level:
        return node.module or ""
    package = importer if is_package(importer, files) else importer.rpartition(".")[0]
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(importer: str, files: dict[str, Path]) -> set[str]:
    """Modules of the package that ``importer`` imports anywhere in its source.

    ``from X import name`` depends on ``X.name`` when that is a module of the package,
    else on ``X``; imports of other packages are left out.
    """
    tree = ast.parse(files[importer].read_text(encoding="utf-8"), filename=str(files[importer]))
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = resolve_from(node, importer, files)
            targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names)
    return {_known_module(t, files) for t in targets if t == PACKAGE or t.startswith(PACKAGE + ".")}


def _known_module(name: str, files: dict[str, Path]) -> str:
    """``name``, or its nearest enclosing module of the package (``a.b.attr`` -> ``a.b``)."""
    while name not in files:
        name = name.rpartition(".")[0]
    return name


def layer(module: str) -> int:
    """Layer of a module of the package (see the module docstring)."""
    top = module.split(".")[1] if "." in module else ""
    assert top in LAYERS, f"{module} has no layer: add {top!r} to LAYERS in {__file__}"
    return LAYERS[top]


def import_graph() -> dict[str, set[str]]:
    """``{module: modules of the package it imports}`` (a module importing itself is left out)."""
    files = module_files()
    return {m: imported_modules(m, files) - {m} for m in files}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_every_module_has_a_layer():
    for module in module_files():
        layer(module)


def test_no_import_goes_up_a_layer():
    bad = [
        f"{m} ({LAYER_NAMES[layer(m)]}) imports {t} ({LAYER_NAMES[layer(t)]})"
        for m, targets in sorted(import_graph().items())
        for t in sorted(targets)
        if layer(t) > layer(m)
    ]
    assert not bad, "imports from a higher layer:\n" + "\n".join(bad)


def test_no_import_cycles():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize(
    "statement, importer, expected",
    [
        ("from .. import registry", "logzbench.cli.estimate", "logzbench.registry"),
        ("from .. import __version__", "logzbench.data", "logzbench"),
        ("from ..errors import DatasetError", "logzbench.data.digits", "logzbench.errors"),
        ("from .rbm import BinaryRBM", "logzbench.models.dbm", "logzbench.models.rbm"),
        ("from . import enumeration", "logzbench.models.rbm", "logzbench.models.enumeration"),
        ("import logzbench.models.rbm", "logzbench.trials", "logzbench.models.rbm"),
        ("from logzbench.estimators.exact import exact", "logzbench.trials", "logzbench.estimators.exact"),
    ],
)
def test_imports_are_resolved(statement, importer, expected, monkeypatch):
    files = module_files()
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: f"def f():\n    {statement}\n")
    assert imported_modules(importer, files) == {expected}


def test_registry_options_and_cli_do_not_import_torch():
    code = "import sys, logzbench.registry, logzbench.options, logzbench.cli; sys.exit('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, f"importing registry, options and cli imports torch\n{proc.stderr}"
