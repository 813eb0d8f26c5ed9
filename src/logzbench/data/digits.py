"""scikit-learn's 8x8 handwritten digits (1,797 images; ships with scikit-learn, no download).

The data set has no official train/test split.  :func:`load_digits_dataset` makes one with
``sklearn.model_selection.train_test_split``, stratified by digit label, with
``test_fraction=0.2`` and ``split_seed=0`` by default: 1,437 training and 360 test images.
The split is independent of any binarization seed.

The AVIL variant (source ``digits-avil``, :func:`load_digits_avil`; Li et al., "Adversarial variational
inference and learning in Markov random fields", Table 1 "Digits" and Sec. 5.3) follows the protocol
of Kuleshov & Ermon (2017, "Neural variational inference and learning in undirected graphical
models"; their code ``kuleshov/neural-variational-inference``, ``util/data.py``):

- Split: the 1,797 images are split, not stratified, by
  ``train_test_split(test_size=359, random_state=0, shuffle=True)`` into 1,438 training and 359
  validation images (Table 1).  The paper has no test split and reports the best *validation*
  result ("Digits*"), so the prepared file's ``test`` split is a copy of ``valid``.
- Augmentation ("we augment the data of five times by shifting the digits following the protocol
  in (Kuleshov & Ermon, 2017)"): each image, then its copies moved by one pixel up, left, right and
  down with zero fill (Kuleshov & Ermon's ``nudge_dataset``, in its order, :data:`SHIFTS`).  By
  default (``augment="train"``) only the training images are augmented, stored image by image:
  training row ``5 i + k`` is shift ``k`` of training image ``i`` (7,190 rows); validation keeps the
  359 originals, so no shifted copy of a validation digit is trained on.  Kuleshov & Ermon's code
  instead augments all 1,797 images first and then splits the 8,985 rows with
  ``train_test_split(test_size=0.2, random_state=0)`` (7,188 / 1,797 rows: shifted copies of one
  digit fall on both sides); Table 1's 1,438 / 359 equal those sizes divided by five, so that is
  probably what the AVIL authors ran.  ``augment="all"`` reproduces it, ``augment="none"`` gives
  the plain 1,438 / 359 split.
- Scale: pixel values / 16 (as for ``digits``; Kuleshov & Ermon scale each column by its maximum),
  then binarized like every source (:func:`logzbench.data.prepare_dataset`).
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


#: AVIL Table 1 "Digits": training and validation images (no test split).
AVIL_N_TRAIN = 1438
AVIL_N_VALID = 359
#: ``augment`` choices of :func:`load_digits_avil`.
AUGMENT_MODES = ("train", "all", "none")
#: Kuleshov & Ermon's shifts in their order: (name, rows, columns) the image content moves by.
SHIFTS = (("original", 0, 0), ("up", -1, 0), ("left", 0, -1), ("right", 0, 1), ("down", 1, 0))
_TEST_IS_VALID = "; test = a copy of valid (the paper has no test split and reports the best validation result)"
#: The prepared file's ``meta["split"]`` per ``augment`` mode.
AVIL_SPLIT_NOTES = {
    "train": (
        "AVIL Table 1 digits: sklearn train_test_split(test_size=359, random_state=0) of the 1797 images "
        "(1438 train / 359 valid), then training row 5 i + k = shift k of training image i (zero fill)" + _TEST_IS_VALID
    ),
    "all": (
        "Kuleshov & Ermon's code: all 1797 images x 5 shifts (block order), then sklearn "
        "train_test_split(test_size=0.2, random_state=0): 7188 train / 1797 valid rows" + _TEST_IS_VALID
    ),
    "none": (
        "AVIL Table 1 digits: sklearn train_test_split(test_size=359, random_state=0) of the 1797 images "
        "(1438 train / 359 valid), no augmentation" + _TEST_IS_VALID
    ),
}


def shift_images(images: np.ndarray, d_row: int, d_col: int) -> np.ndarray:
    """Move images by whole pixels with zero fill.

    Parameters
    ----------
    images : numpy.ndarray
        (N, 64) row-major 8x8 images (or (N, 8, 8)).
    d_row, d_col : int
        Pixels the content moves down (negative: up) and right (negative: left); pixels moved
        off the image are lost, the uncovered ones are 0.

    Returns
    -------
    numpy.ndarray
        Same shape and dtype as ``images``: ``out[r, c] = in[r - d_row, c - d_col]`` where that
        pixel exists, else 0.
    """
    x = np.asarray(images)
    grid = x.reshape(len(x), *IMAGE_SHAPE)
    out = np.zeros_like(grid)
    h, w = IMAGE_SHAPE
    out[:, max(d_row, 0) : h + min(d_row, 0), max(d_col, 0) : w + min(d_col, 0)] = grid[
        :, max(-d_row, 0) : h + min(-d_row, 0), max(-d_col, 0) : w + min(-d_col, 0)
    ]
    return out.reshape(x.shape)


def augment_shifts(images: np.ndarray, labels: np.ndarray, image_major: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Five rows per image: the image and its one-pixel shifts of :data:`SHIFTS`.

    Parameters
    ----------
    images : numpy.ndarray
        (N, 64) images.
    labels : numpy.ndarray
        (N,) labels.
    image_major : bool, default True
        Row ``5 i + k`` is shift ``k`` of image ``i``; ``False``: row ``k N + i`` (the block order
        of Kuleshov & Ermon's ``nudge_dataset``).

    Returns
    -------
    tuple of numpy.ndarray
        (5 N, 64) images and (5 N,) labels.
    """
    blocks = np.stack([shift_images(images, dr, dc) for _, dr, dc in SHIFTS])  # (5, N, 64)
    if image_major:
        return blocks.transpose(1, 0, 2).reshape(-1, blocks.shape[-1]), np.repeat(labels, len(SHIFTS))
    return blocks.reshape(-1, blocks.shape[-1]), np.tile(labels, len(SHIFTS))


def load_digits_avil(augment: str = "train", split_seed: int = 0) -> dict:
    """The 8x8 digits as in the AVIL paper: 1,438 / 359 split and five-fold shift augmentation.

    Parameters
    ----------
    augment : {"train", "all", "none"}
        ``"train"``: split, then augment the training images only (7,190 / 359 rows);
        ``"all"``: augment all 1,797 images, then split 80/20 (7,188 / 1,797 rows; Kuleshov &
        Ermon's code); ``"none"``: the split alone (1,438 / 359).  See the module docstring.
    split_seed : int, default 0
        ``random_state`` of ``train_test_split``.

    Returns
    -------
    dict
        ``train_images``/``valid_images``: ``float64`` (N, 64) in [0, 1] (pixel values / 16);
        ``train_labels``/``valid_labels``: ``int64`` (N,).

    Raises
    ------
    DatasetError
        For an unknown ``augment``.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if augment not in AUGMENT_MODES:
        raise DatasetError(f"digits-avil augment={augment!r}; choose from {AUGMENT_MODES}")
    bunch = load_digits()
    x = np.asarray(bunch.data, dtype=np.float64) / 16.0
    y = np.asarray(bunch.target, dtype=np.int64)
    if augment == "all":
        x, y = augment_shifts(x, y, image_major=False)
        x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=0.2, random_state=split_seed, shuffle=True)
    else:
        x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=AVIL_N_VALID, random_state=split_seed, shuffle=True)
        if augment == "train":
            x_tr, y_tr = augment_shifts(x_tr, y_tr)
    return {"train_images": x_tr, "train_labels": y_tr, "valid_images": x_va, "valid_labels": y_va}
