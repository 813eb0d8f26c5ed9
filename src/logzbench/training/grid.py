"""The ``grid-mrf`` family's "trainer": a grid MRF is generated from a seed, not fitted to data.

The workflow builds every model of a model entry through its family's trainer (rule ``train_model``,
:func:`logzbench.training.train_model`); a grid MRF entry's ``hyperparams`` are the arguments of
:func:`generate_grid_mrf`, which draws an Edwards-Anderson spin glass
(:meth:`logzbench.models.grid.GridMRF.spin_glass`).  The entry's dataset only gives the rows the
estimators evaluate (``H W`` values per row, the grid row-major; ``log p`` of any row is exact).
"""

from __future__ import annotations

from .hyperparams import GRID_MRF

__all__ = ["generate_grid_mrf"]


def generate_grid_mrf(
    train=None,
    test=None,
    *,
    height: int,
    width: int,
    couplings: str = GRID_MRF["couplings"],
    beta: float = GRID_MRF["beta"],
    field: float = GRID_MRF["field"],
    seed: int = GRID_MRF["seed"],
    device: str = GRID_MRF["device"],
    progress: bool = GRID_MRF["progress"],
):
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

    for name, rows in (("training", train), ("test", test)):
        cols = getattr(rows, "shape", (0, None))[-1] if rows is not None else None
        if cols is not None and int(cols) != int(height) * int(width):
            raise ValueError(
                f"the {name} rows have {int(cols)} columns; a {height}x{width} grid MRF takes rows of "
                f"{int(height) * int(width)} (the grid row-major)"
            )
    model = GridMRF.spin_glass(height, width, beta=beta, couplings=couplings, field=field, seed=seed, device=device)
    return model, []
