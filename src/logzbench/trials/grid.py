"""Liu et al. (2015) Fig. 2: repeated trials of the IS family on random binary grid MRFs.

Each trial draws a :class:`~logzbench.models.grid.GridMRF`, its exact ``log Z`` (transfer matrix), a
reference ``p_0`` (uniform, mean field or a TRW mixture of trees), exact reference samples and
checkerboard-Gibbs target samples; the seeds depend only on ``(seed, trial)`` (:func:`trial_seeds`),
so references and ``sigma_pair`` values share random numbers.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from ..models.grid import GridMRF
from .table import (
    BOUND_METHODS,
    TRIAL_COLUMNS,
    _check_common,
    _check_int,
    _check_positive,
    _check_reference,
    _frame,
    _rows,
    estimate_all,
)


# --------------------------------------------------------------------------- Fig. 2
def grid_reference(mrf: GridMRF, name: str, *, trw_trees: int = 10, seed: int = 0):
    """The reference distribution ``p_0`` called ``name`` for ``mrf``.

    Parameters
    ----------
    mrf : GridMRF
    name : {"uniform", "mean-field", "trw"}
        Uniform over ``{0, 1}^(H W)``; naive mean field
        (:func:`~logzbench.models.grid.mean_field`, ``log_z_bound`` a lower bound); or the
        mixture of spanning trees from tree-reweighted BP
        (:func:`logzbench.models.grid_trw.trw_mixture`, imported only when asked for;
        ``log_z_bound`` an upper bound).
    trw_trees : int
        Random spanning trees of the TRW mixture.
    seed : int
        Seed of the TRW tree selection (unused by the other references).

    Returns
    -------
    object
        With ``.sample(n, generator)`` (exact samples, float64 ``(n, H, W)``), ``.log_prob(x)``
        (normalised), ``.name`` and ``.log_z_bound`` (``None`` for the uniform reference).

    Raises
    ------
    ValueError
        Unknown ``name``.
    ImportError
        ``"trw"`` while :mod:`logzbench.models.grid_trw` is unavailable.
    """
    _check_reference(name)
    if name == "uniform":
        return mrf.uniform_reference()
    if name == "mean-field":
        return mrf.mean_field()
    try:
        from ..models.grid_trw import trw_mixture
    except ImportError as e:
        raise ImportError(f"the 'trw' reference needs logzbench.models.grid_trw ({e})") from e
    return trw_mixture(mrf, n_trees=_check_int(trw_trees, "trw_trees", 1), seed=int(seed))


def trial_seeds(seed: int, trial: int) -> tuple[int, int, int]:
    """``(mrf_seed, sample_seed, trw_seed)`` of grid trial ``trial``: the three 32-bit words of
    ``numpy.random.SeedSequence((seed, trial)).generate_state(3)``.

    They depend on nothing else, so a given ``(seed, trial)`` has the same MRF parameters
    (standard-normal draws, scaled by ``sigma_pair`` / ``sigma_unary``), the same sampling
    stream and the same TRW trees for every reference and every ``sigma_pair``.
    """
    s = np.random.SeedSequence((_check_int(seed, "seed", 0), _check_int(trial, "trial", 0))).generate_state(3)
    return int(s[0]), int(s[1]), int(s[2])


def _bound_method(ref) -> str:
    name = getattr(ref, "name", "reference")
    return BOUND_METHODS.get(name, f"{name}-bound")


def grid_trials(
    height: int,
    width: int,
    sigma_pair: float,
    reference: str,
    *,
    n: int,
    n_trials: int,
    seed: int,
    sigma_unary: float = 0.1,
    burn_in: int = 500,
    trw_trees: int = 10,
    device=None,
) -> pd.DataFrame:
    """Repeated trials of the grid-MRF experiment (Fig. 2) at one ``sigma_pair`` and reference.

    Trial ``t``, with ``(mrf_seed, sample_seed, trw_seed) = trial_seeds(seed, t)``:

    1. ``mrf = GridMRF.random(height, width, sigma_pair, sigma_unary, seed=mrf_seed)`` (drawn on
       the CPU, then moved to ``device``) and ``truth = mrf.exact_log_z()`` (transfer matrix);
    2. the reference ``p_0 = grid_reference(mrf, reference, trw_trees=trw_trees, seed=trw_seed)``;
    3. with ``g = torch.Generator(device).manual_seed(sample_seed)``: ``n`` exact samples
       ``x0 ~ p_0``, then ``n`` more reference samples run through ``burn_in`` checkerboard Gibbs
       sweeps of the MRF as ``x1 ~ p``;
    4. ``l = log f(x) - log p_0(x)`` (float64) at both sets, and every method of
       :func:`estimate_all` (DS on the first halves).

    Since the seeds depend only on ``(seed, t)``, the columns of Fig. 2 (references) and the
    points along ``sigma_pair`` use common random numbers: the same trial index has the same
    standard-normal parameter draws, hence the same truth across references.

    Parameters
    ----------
    height, width : int
        Grid size (the transfer matrix needs ``min(height, width) <= 20``).
    sigma_pair : float >= 0
        Standard deviation of the pairwise tables ``theta_ij(k, l)``.
    reference : {"uniform", "mean-field", "trw"}
    n : int >= 2
        Samples from each of ``p_0`` and ``p``.
    n_trials : int >= 1
    seed : int >= 0
    sigma_unary : float >= 0
        Standard deviation of the unary tables (0.1 in the paper).
    burn_in : int >= 0
        Gibbs sweeps applied to the target chains (500 in the paper).
    trw_trees : int >= 1
        Spanning trees of the TRW mixture (``reference="trw"`` only).
    device : str or torch.device, optional
        Where sampling runs (default CPU).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TRIAL_COLUMNS`, ``experiment == "grid"``; per trial one row per method
        of :data:`METHODS` and, when the reference has a
        ``log_z_bound``, one ``"mf-bound"`` / ``"trw-bound"`` row (``log_z`` = the bound,
        ``log_z_stderr = 0``, ``seconds`` = time to build the reference).

    Raises
    ------
    ValueError
        Unknown reference, ``n < 2``, ``n_trials < 1``, negative ``burn_in``/``seed``,
        negative or non-finite ``sigma_pair``/``sigma_unary``, bad grid size.
    """
    _check_reference(reference)
    n, n_trials, seed = _check_common(n, n_trials, seed)
    height = _check_int(height, "height", 1)
    width = _check_int(width, "width", 1)
    burn_in = _check_int(burn_in, "burn_in", 0)
    trw_trees = _check_int(trw_trees, "trw_trees", 1)
    sigma_pair = _check_positive(sigma_pair, "sigma_pair", allow_zero=True)
    sigma_unary = _check_positive(sigma_unary, "sigma_unary", allow_zero=True)
    dev = torch.device(device) if device is not None else torch.device("cpu")
    settings = {
        "experiment": "grid",
        "height": height,
        "width": width,
        "sigma_pair": sigma_pair,
        "sigma_unary": sigma_unary,
        "reference": reference,
        "burn_in": burn_in,
    }
    rows: list[dict] = []
    for t in range(n_trials):
        mrf_seed, sample_seed, trw_seed = trial_seeds(seed, t)
        mrf = GridMRF.random(height, width, sigma_pair, sigma_unary, seed=mrf_seed, device=dev)
        truth = mrf.exact_log_z()
        t0 = time.perf_counter()
        ref = grid_reference(mrf, reference, trw_trees=trw_trees, seed=trw_seed)
        ref_seconds = time.perf_counter() - t0
        g = torch.Generator(device=dev).manual_seed(sample_seed)
        x0 = ref.sample(n, g)
        x1 = mrf.gibbs(ref.sample(n, g), g, n_sweeps=burn_in)
        l0 = (mrf.log_f(x0) - ref.log_prob(x0)).detach().cpu().numpy().astype(np.float64)
        l1 = (mrf.log_f(x1) - ref.log_prob(x1)).detach().cpu().numpy().astype(np.float64)
        rows += _rows(settings, t, seed, n, truth, estimate_all(l0, l1))
        bound = getattr(ref, "log_z_bound", None)
        if bound is not None:
            b = float(bound)
            row = {c: None for c in TRIAL_COLUMNS}
            row.update(settings)
            row.update(
                trial=t,
                seed=seed,
                method=_bound_method(ref),
                log_z=b,
                log_z_stderr=0.0,
                truth=truth,
                error=b - truth,
                n=n,
                seconds=ref_seconds,
            )
            rows.append(row)
    return _frame(rows)
