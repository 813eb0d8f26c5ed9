"""The parameters a trainer or learner declares, read from its source without importing it.

The trainers and learners import torch; checking a workflow config (building its DAG) and a
``logzbench train`` command line before any data is read must not.  :func:`declared_parameters`
reads ``"module:object"`` with :mod:`ast`: a function's parameters, a class's ``__init__``'s (less
``self``), or a dataclass's annotated fields, each with its default.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path
from typing import Any

__all__ = ["declared_parameters"]


def _default(node: ast.expr | None) -> Any:
    """A default's value where it is a literal; ``...`` for none (or one that is not a literal)."""
    if node is None:
        return ...
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ...


@functools.lru_cache(maxsize=None)
def declared_parameters(target: str) -> tuple[tuple[str, Any], ...]:
    """``(name, default)`` of each parameter of ``"module:object"`` (a function, a class's ``__init__``
    less ``self``, or a dataclass's fields, ``ClassVar`` ones left out); ``...`` where there is no
    default, or where it is not a literal.  Raises LookupError for a missing module or object."""
    module, _, name = target.partition(":")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise LookupError(f"no source for module {module}")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"), spec.origin)
    node = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name), None)
    if node is None:
        raise LookupError(f"{spec.origin} defines no {name}")
    if isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is None:  # a dataclass: its annotated fields
            return tuple((n.target.id, _default(n.value)) for n in node.body
                         if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                         and "ClassVar" not in ast.unparse(n.annotation))
        node = init
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    pairs = [*zip(positional, defaults), *zip(a.kwonlyargs, a.kw_defaults)]
    return tuple((arg.arg, _default(d)) for arg, d in pairs if arg.arg != "self")
