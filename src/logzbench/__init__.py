"""logzbench: side-by-side estimators of partition functions and test log-likelihoods
for energy-based models (RBMs first; DBMs, DBNs and continuous models plug into the
same interfaces)."""

import importlib
import sys
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _pkg_version

try:  # pragma: no cover - trivial
    __version__ = _pkg_version("logzbench")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]


def _lazy_exports(package: str, exports: dict[str, str]):
    """The module ``__getattr__`` and ``__dir__`` of a package whose names come from its modules on
    first use (PEP 562), so that importing the package imports none of them (nor torch).

    ``exports`` maps each name to the module that defines it, relative to ``package`` (``".sizes"``); a
    name is imported once and kept in the package's namespace.  Any other name is an ``AttributeError``.
    """

    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name], package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
