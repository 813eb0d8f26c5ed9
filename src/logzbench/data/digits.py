"""scikit-learn's 8x8 handwritten digits (1,797 images; ships with scikit-learn, no download).

The data set has no official train/test split.  :func:`load_digits_dataset` makes one with
``sklearn.model_selection.train_test_split``, stratified by digit label, with
``test_fraction=0.2`` and ``split_seed=0`` by default: 1,437 training and 360 test images.
The split is independent of any binarization seed.
"""

from __future__ import annotations

import numpy as np

from ..errors import DatasetError

IMAGE_SHAPE = (8, 8)
DEFAULT_TEST_FRACTION = 0.2
DEFAULT_SPLIT_SEED = 0


def load_digits_dataset(test_fraction: float = DEFAULT_TEST_FRACTION, split_seed: int = DEFAULT_SPLIT_SEED) -> dict:
    """Load the 8x8 digits, scaled to [0, 1], with a fixed stratified train/test split.

    Parameters
    ----------
    test_fraction : float, default 0.2
        Fraction of the 1,797 images put in the test set (strictly between 0 and 1).
    split_seed : int, default 0
        ``random_state`` of the stratified split; the same value gives the same split.

    Returns
    -------
    dict
        ``train_images``/``test_images``: ``float64`` (N, 64), pixel values 0..16
        divided by 16; ``train_labels``/``test_labels``: ``int64`` (N,).

    Raises
    ------
    DatasetError
        If ``test_fraction`` is not in (0, 1).
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if not 0.0 < test_fraction < 1.0:
        raise DatasetError(f"digits test_fraction must be in (0, 1), got {test_fraction}")
    bunch = load_digits()
    x = np.asarray(bunch.data, dtype=np.float64) / 16.0
    y = np.asarray(bunch.target, dtype=np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_fraction, random_state=split_seed, shuffle=True, stratify=y
    )
    return {"train_images": x_tr, "train_labels": y_tr, "test_images": x_te, "test_labels": y_te}
