"""The ``grid-mrf`` family's "trainer": a grid MRF is generated from a seed, not fitted to data.

The workflow builds every model of a model entry through its family's trainer (rule ``train_model``,
:func:`logzbench.training.train_model`); a grid MRF entry's ``hyperparams`` are the arguments of
:func:`generate_grid_mrf`, which draws an Edwards-Anderson spin glass
(:meth:`logzbench.models.grid.GridMRF.spin_glass`).  The entry's dataset only gives the rows the
estimators evaluate (``H W`` values per row, the grid row-major; ``log p`` of any row is exact).
"""

from __future__ import annotations

from .hyperparams import GRID_MRF, GridMRFParams, rules, takes

__all__ = ["check_grid_hyperparams", "generate_grid_mrf"]

#: ``couplings`` of :meth:`logzbench.models.grid.GridMRF.spin_glass` (its declared bound, without torch)
COUPLINGS = rules(GridMRFParams)["couplings"].choices


def check_grid_hyperparams(hp, n_visible: int | None = None) -> str | None:
    """Why a grid MRF's generator arguments ``hp`` cannot build a model whose rows are ``n_visible`` wide
    (``None``: they can), without torch: the workflow's config check (one line before any job), the same
    rules :meth:`~logzbench.models.grid.GridMRF.spin_glass` applies."""
    import math

    for key in ("height", "width"):
        v = hp.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            return f"hyperparams.{key} must be a positive integer (the grid's side), got {v!r}"
    for key in ("beta", "field"):
        v = hp.get(key, GRID_MRF[key])
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            return f"hyperparams.{key} must be a finite number >= 0, got {v!r}"
    if hp.get("couplings", GRID_MRF["couplings"]) not in COUPLINGS:
        return f"hyperparams.couplings must be one of {list(COUPLINGS)}, got {hp.get('couplings')!r}"
    if n_visible is not None and hp["height"] * hp["width"] != int(n_visible):
        return (
            f"a {hp['height']}x{hp['width']} grid takes rows of {hp['height'] * hp['width']} values, but its "
            f"dataset's rows have {int(n_visible)} (n_visible)"
        )
    return None


@takes(GridMRFParams, ("train", None), ("test", None))
def generate_grid_mrf(train, test, hp: GridMRFParams):
    """An ``height x width`` spin glass at inverse temperature ``beta``; returns ``(model, history)``.

    Parameters
    ----------
    train, test : array-like (n, height * width), optional
        The entry's rows: not used to build the model, only checked to be rows of this grid (so that
        the estimates that take them do not fail later).
    height, width : int
        The grid's sides.
    couplings : {"gaussian", "pm1"}
        ``J_ij ~ N(0, 1)`` or ``+-1``.
    beta : float
        Inverse temperature (``>= 0``).
    field : float
        Standard deviation of the random fields (``0``: none).
    seed : int
        Seeds the draw of the couplings and fields (the same seed, the same model).
    device : str
        Where the model lives.
    progress : bool
        Unused (nothing to show; accepted as every binary trainer's keyword).

    Returns
    -------
    model : GridMRF
    history : list
        Empty: there are no training epochs.
    """
    from ..models.grid import GridMRF

    why = check_grid_hyperparams(
        {"height": hp.height, "width": hp.width, "couplings": hp.couplings, "beta": hp.beta, "field": hp.field}
    )
    if why is not None:
        raise ValueError(why)
    for name, rows in (("training", train), ("test", test)):
        cols = getattr(rows, "shape", (0, None))[-1] if rows is not None else None
        if cols is not None and int(cols) != int(hp.height) * int(hp.width):
            raise ValueError(
                f"the {name} rows have {int(cols)} columns; a {hp.height}x{hp.width} grid MRF takes rows of "
                f"{int(hp.height) * int(hp.width)} (the grid row-major)"
            )
    model = GridMRF.spin_glass(
        hp.height, hp.width, beta=hp.beta, couplings=hp.couplings, field=hp.field, seed=hp.seed, device=hp.device
    )
    return model, []
