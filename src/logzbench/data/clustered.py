"""The ``clustered`` data source: synthetic binary rows around a few prototypes (no download).

Rows of ``n_visible`` bits drawn from ``prototypes`` random prototypes, each bit a fair coin, with
masses ``weights`` (default equal) and each bit of a row flipped with its prototype's rate ``flip``:

    z ~ Categorical(weights),    v_i = prototype_z,i XOR Bernoulli(flip_z).

RBMs trained by PCD on such data (unequal masses, 1-10 % flips) have heavy, well-separated modes that
temperature annealing from a product distribution does not find (issue 38): the default benchmark's
clustered test bed.  Everything is a function of ``seed``: the prototypes come from the stream
``numpy.random.default_rng([seed, 3])``, the training (and validation) rows from ``[seed, 0]``, the
test rows from ``[seed, 1]`` (the streams of :func:`logzbench.data.prepare_dataset`), ``D + 1`` uniforms
per row, so a row does not depend on how many are drawn (nor a test row on ``n_train``).  Each row's
label is its prototype's index (``train_labels``, ``test_labels``).  :func:`check_settings` (pure Python,
no NumPy) is the one check of the settings: the workflow's config check calls it before any job runs,
the generator before it draws.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

__all__ = ["DEFAULTS", "PROTOTYPE_STREAM", "check_settings", "make_clustered"]

#: the settings' defaults (``n_visible`` has none)
DEFAULTS = {"prototypes": 4, "weights": None, "flip": 0.05, "n_train": 2000, "n_test": 500}
#: the random stream of the prototypes (``default_rng([seed, PROTOTYPE_STREAM])``)
PROTOTYPE_STREAM = 3


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_settings(
    n_visible: Any, prototypes: Any = None, weights: Any = None, flip: Any = None
) -> tuple[int, int, list[float], list[float]]:
    """``(n_visible, prototypes, weights normalised to sum 1, flip rate per prototype)`` of the settings
    (``None``: the default of :data:`DEFAULTS`); ValueError naming the setting otherwise: ``n_visible`` and
    ``prototypes`` positive integers, ``weights`` ``prototypes`` positive finite numbers, ``flip`` one
    number or ``prototypes`` numbers in ``[0, 0.5]``."""
    if not (isinstance(n_visible, int) and not isinstance(n_visible, bool) and n_visible >= 1):
        raise ValueError(f"clustered: n_visible must be a positive integer (the row width), got {n_visible!r}")
    p = DEFAULTS["prototypes"] if prototypes is None else prototypes
    if not (isinstance(p, int) and not isinstance(p, bool) and p >= 1):
        raise ValueError(f"clustered: prototypes must be a positive integer, got {prototypes!r}")
    if weights is None:
        w = [1.0] * p
    elif isinstance(weights, (list, tuple)) and len(weights) == p and all(_number(x) and x > 0 for x in weights):
        w = [float(x) for x in weights]
    else:
        raise ValueError(
            f"clustered: weights must be {p} positive numbers (one mass per prototype; prototypes = {p}), "
            f"got {weights!r}"
        )
    f = DEFAULTS["flip"] if flip is None else flip
    rates = [f] * p if _number(f) else list(f) if isinstance(f, (list, tuple)) and len(f) == p else None
    if rates is None or not all(_number(r) and 0.0 <= r <= 0.5 for r in rates):
        raise ValueError(
            f"clustered: flip must be a bit-flip rate in [0, 0.5] or {p} of them (one per prototype), got {flip!r}"
        )
    total = sum(w)
    return int(n_visible), int(p), [x / total for x in w], [float(r) for r in rates]


def make_clustered(
    n_visible: int,
    prototypes: int | None = None,
    weights: Sequence[float] | None = None,
    flip: float | Sequence[float] | None = None,
    n_train: int | None = None,
    n_test: int | None = None,
    n_valid: int = 0,
    seed: int = 0,
) -> dict[str, Any]:
    """The rows: ``{"train": (n_train + n_valid, D) uint8, "test": (n_test, D) uint8, "train_labels",
    "test_labels": int64 prototype indices, "prototypes": (P, D) uint8, "weights", "flip": lists}``
    (module docstring; ``n_valid`` extra training rows, which :func:`logzbench.data.prepare_dataset`
    moves to ``valid``)."""
    import numpy as np

    D, P, w, rates = check_settings(n_visible, prototypes, weights, flip)
    n_train = DEFAULTS["n_train"] if n_train is None else int(n_train)
    n_test = DEFAULTS["n_test"] if n_test is None else int(n_test)
    protos = (np.random.default_rng([int(seed), PROTOTYPE_STREAM]).random((P, D)) < 0.5).astype(np.uint8)
    out: dict[str, Any] = {"prototypes": protos, "weights": w, "flip": rates}
    for split, stream, n in (("train", 0, n_train + int(n_valid)), ("test", 1, n_test)):
        # one row of D + 1 uniforms per row (its prototype by inverse CDF, then its flips): row i is the same
        # whatever the number of rows drawn
        u = np.random.default_rng([int(seed), stream]).random((n, D + 1))
        labels = np.minimum(np.searchsorted(np.cumsum(w), u[:, 0], side="right"), P - 1)
        flips = (u[:, 1:] < np.asarray(rates)[labels][:, None]).astype(np.uint8)
        out[split] = protos[labels] ^ flips
        out[f"{split}_labels"] = labels.astype(np.int64)
    return out
