"""logzbench: side-by-side estimators of partition functions and test log-likelihoods
for energy-based models (RBMs first; DBMs, DBNs and continuous models plug into the
same interfaces)."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _pkg_version

try:  # pragma: no cover - trivial
    __version__ = _pkg_version("logzbench")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
