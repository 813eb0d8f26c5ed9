"""Declaring hyperparameters once: a frozen keyword-only dataclass per trainer or learner whose fields carry
their bound and one-line doc, and what is made from it -- a function's signature (:func:`takes`), a
trainer's scikit-learn constructor (:class:`Hyperparameters`), the bounds (:func:`rules`).

Torch-free: a config or a command line is checked from the declarations
(:mod:`logzbench.training.hyperparams`) before any trainer is imported.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import re
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, Callable, Mapping, Sequence

__all__ = [
    "REQUIRED",
    "Hyperparameters",
    "Rule",
    "check",
    "declare",
    "defaults",
    "hp",
    "rules",
    "signature_of",
    "takes",
]

#: the default of a parameter that has none
REQUIRED = ...


@dataclass(frozen=True)
class Rule:
    """What one hyperparameter may be.

    ``kind``: ``int`` (an integer in ``[low, high]``), ``real`` (a finite number between ``low`` and
    ``high``, each end open when ``low_open`` / ``high_open``), ``pair`` (two such numbers),
    ``choice`` (one of ``choices``) or ``bool``; ``none``: ``None`` is allowed too (the default);
    ``why``: said when the value is above ``high``."""

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    none: bool = False
    why: str = ""


def _interval(r: Rule) -> str:
    hi = "inf" if r.high == math.inf else f"{r.high}"
    return f"{'(' if r.low_open else '['}{r.low}, {hi}{')' if r.high_open else ']'}"


def _real_ok(r: Rule, x: Any) -> bool:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x):
        return False
    return (x > r.low if r.low_open else x >= r.low) and (x < r.high if r.high_open else x <= r.high)


def check(name: str, value: Any, r: Rule) -> None:
    """Raise ValueError naming ``name``, the value and what it may be, unless the bound ``r`` allows it."""
    if value is None and r.none:
        return
    if r.kind == "int":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        if r.low is not None and value < r.low:
            raise ValueError(f"{name} must be >= {r.low}, got {value}")
        if r.high is not None and value > r.high:
            raise ValueError(f"{name} must be <= {r.high}, got {value}" + (f" ({r.why})" if r.why else ""))
    elif r.kind == "real":
        if not _real_ok(r, value):
            raise ValueError(f"{name} must be a finite number in {_interval(r)}, got {value!r}")
    elif r.kind == "pair":
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
            raise ValueError(f"{name} must be a pair ({name}[0], {name}[1]), got {value!r}")
        for i, x in enumerate(value):
            if not _real_ok(r, x):
                raise ValueError(f"{name}[{i}] must be a finite number in {_interval(r)}, got {x!r}")
    elif r.kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")
    elif r.kind == "choice":
        if not isinstance(value, str) or value not in r.choices:
            raise ValueError(
                f"unknown {name} {value!r}; choose one of {list(r.choices)}" + (" (or none)" if r.none else "")
            )
    else:  # pragma: no cover - a rule of an unknown kind
        raise AssertionError(f"rule of unknown kind {r.kind!r}")


def hp(default: Any = REQUIRED, *, rule: Rule | None = None, doc: str | None = None) -> Any:
    """A declared hyperparameter whose bound or doc is not ``about``'s (the field's metadata)."""
    meta = {k: v for k, v in (("rule", rule), ("doc", doc)) if v is not None}
    return field(metadata=meta) if default is REQUIRED else field(default=default, metadata=meta)


def declare(cls: type, about: Mapping[str, tuple[Rule | None, str]], bounded: str | None = None) -> type:
    """``cls`` as a frozen keyword-only dataclass whose fields carry their bound (``rule``) and one-line
    ``doc`` in their metadata: the field's own (:func:`hp`), else ``about``'s.  With ``bounded`` (names,
    space-separated) only those fields have a bound: the ones the trainer checks."""
    for name in cls.__dict__.get("__annotations__", {}):
        value = cls.__dict__.get(name, REQUIRED)
        own = value.metadata if isinstance(value, Field) else {}
        rule, doc = about.get(name, (None, ""))
        rule = own.get("rule", rule) if bounded is None or name in bounded.split() else None
        meta = {"rule": rule, "doc": own.get("doc", doc)}
        if isinstance(value, Field):
            value = REQUIRED if value.default is MISSING else value.default
        setattr(cls, name, field(metadata=meta) if value is REQUIRED else field(default=value, metadata=meta))
    return dataclass(frozen=True, kw_only=True)(cls)


def defaults(declaration: type) -> dict[str, Any]:
    """``name -> default`` of a declaration's fields, in order (:data:`REQUIRED` where there is none)."""
    return {f.name: REQUIRED if f.default is MISSING else f.default for f in fields(declaration)}


def rules(*declarations: type) -> dict[str, Rule]:
    """``name -> bound`` of the fields of these declarations that have one."""
    return {f.name: f.metadata["rule"] for d in declarations for f in fields(d) if f.metadata["rule"] is not None}


def signature_of(
    declaration: type,
    data: Sequence[tuple[str, Any]] = (),
    tail: Sequence[tuple[str, Any]] = (),
    more: str | None = None,
) -> inspect.Signature:
    """The signature ``(data..., *, declared keywords..., tail..., **more)``: the data arguments (``name,
    default``; :data:`REQUIRED`: none) positional, the declared ones and ``tail`` keyword-only, and with
    ``more`` the keywords the function passes on."""
    P = inspect.Parameter

    def param(name, default, kind):
        return P(name, kind, **({} if default is REQUIRED else {"default": default}))

    return inspect.Signature(
        [param(n, d, P.POSITIONAL_OR_KEYWORD) for n, d in data]
        + [param(n, d, P.KEYWORD_ONLY) for n, d in (*defaults(declaration).items(), *tail)]
        + ([P(more, P.VAR_KEYWORD)] if more else [])
    )


def takes(
    declaration: type, *data: tuple[str, Any], tail: Sequence[tuple[str, Any]] = (), more: str | None = None
) -> Callable[[Callable], Callable]:
    """Decorate ``f(*data, hp, **tail_and_more)`` into a function of the signature :func:`signature_of`
    (each declared hyperparameter a keyword with its default), which calls ``f`` with the declared
    keywords gathered into one frozen ``hp = declaration(...)``; an unknown keyword is the TypeError
    Python gives."""
    sig = signature_of(declaration, data, tail, more)
    names = {f.name for f in fields(declaration)}

    def wrap(f):
        @functools.wraps(f)
        def call(*args, **kwargs):
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{f.__name__}() {exc}") from None
            bound.apply_defaults()
            given = bound.arguments
            hp = declaration(**{n: v for n, v in given.items() if n in names})
            rest = {n: given[n] for n, _ in tail} | (given[more] if more else {})
            return f(*(given[n] for n, _ in data), hp, **rest)

        call.__signature__ = sig
        return call

    return wrap


class Hyperparameters:
    """scikit-learn style: a trainer's constructor takes its declared hyperparameters (a subclass names
    its declaration: ``class RBMTrainer(Hyperparameters, declaration=RBMTrainerParams)``) and stores each
    unchanged as an attribute; ``get_params`` / ``set_params`` / ``repr`` read them, and ``fit`` checks
    them.  :meth:`params` gathers them into the declaration's frozen object."""

    _declaration: type

    def __init_subclass__(cls, declaration: type | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if declaration is None:
            return
        cls._declaration = declaration
        sig = signature_of(declaration)
        self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        sig = sig.replace(
            parameters=[self_param]
            + [p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in sig.parameters.values()]
        )

        def __init__(self, *args, **kwargs):
            try:
                bound = sig.bind(self, *args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{cls.__name__}.__init__() {exc}") from None
            bound.apply_defaults()
            for name, value in list(bound.arguments.items())[1:]:
                setattr(self, name, value)

        __init__.__signature__ = sig
        __init__.__qualname__ = f"{cls.__qualname__}.__init__"
        cls.__init__ = __init__

    @classmethod
    def _param_names(cls) -> list[str]:
        return [f.name for f in fields(cls._declaration)]

    def params(self):
        """The hyperparameters as one frozen object of the declaration."""
        return self._declaration(**self.get_params())

    def get_params(self, deep: bool = True) -> dict:
        """The constructor arguments as a dict (``deep`` is accepted for scikit-learn and unused)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set hyperparameters by name; returns ``self``."""
        unknown = sorted(set(params) - set(self._param_names()))
        if unknown:
            raise ValueError(f"unknown hyperparameter(s) {unknown}; valid: {sorted(self._param_names())}")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        default = defaults(self._declaration)
        changed = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if v != default[k])
        return f"{type(self).__name__}({changed})"


def describe(rule: Rule | None) -> str:
    """A bound in words, for the documentation's table: ``integer >= 1``, ``number in (0.0, inf]``, ..."""
    if rule is None:
        return ""
    if rule.kind == "int":
        if rule.low is None:
            text = "integer"
        elif rule.high is None:
            text = f"integer >= {rule.low}"
        else:
            text = f"integer in [{rule.low}, {rule.high}]"
    elif rule.kind == "real":
        text = f"number in {_interval(rule)}"
    elif rule.kind == "pair":
        text = f"two numbers in {_interval(rule)}"
    elif rule.kind == "bool":
        text = "true or false"
    else:
        text = "one of " + ", ".join(f"`{c}`" for c in rule.choices)
    return text + (", or none" if rule.none else "")


def markdown(declarations: Mapping[str, type], intro: str) -> str:
    """The documentation's page of these declarations (``"module:object"`` -> declaration): ``intro``, then
    per target a table of its hyperparameters -- name, type, default, bound and doc."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    parts = [intro.strip() + "\n"]
    for target, declaration in declarations.items():
        module, _, name = target.partition(":")
        summary = re.sub(r":\w+:`~?([^`]+)`", lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", declaration.__doc__ or "")
        summary = " ".join(summary.replace("``", "`").split()).removeprefix(f"`{name}`").strip(" :")
        if summary.startswith("(") and summary.endswith(")"):
            summary = summary[1:-1]
        parts.append(f"\n## `{name}`\n\n`{module}.{name}`" + (f": {summary}" if summary else "") + "\n")
        parts.append("\n| name | type | default | bound | meaning |\n|---|---|---|---|---|\n")
        for f in fields(declaration):
            default = "required" if f.default is MISSING else f"`{f.default!r}`"
            row = (f"`{f.name}`", f"`{f.type}`", default, describe(f.metadata["rule"]), f.metadata["doc"])
            parts.append("| " + " | ".join(cell(c) for c in row) + " |\n")
    return "".join(parts)
