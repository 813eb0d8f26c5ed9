"""How big each data source is: rows per split, row width, kind of rows, labels.

One declaration of every size a data set has before any file is read, kept free of numpy and
torch so that the workflow can check a config (``logzbench.pipeline``) without loading the
loaders, and read by the loaders themselves (:mod:`logzbench.data.mnist`, ``omniglot``,
``uci``, ``frey``, ``vanhateren``) for their expected shapes and defaults.  A size a loaded
source does not have is a :class:`~logzbench.errors.DatasetError` of its loader.
"""

from __future__ import annotations

__all__ = [
    "CONTINUOUS_DATASETS",
    "DATASETS",
    "DEFAULT_N_COMPONENTS",
    "DIGITS_AVIL_ROWS",
    "FREY_FACES",
    "FREY_IMAGE_SHAPE",
    "LABELLED_SOURCES",
    "MNIST_ROWS",
    "N_FEATURES",
    "N_LABELS",
    "OMNIGLOT_ROWS",
    "SOURCE_DATA_KINDS",
    "SOURCE_ROWS",
    "UCI_ROWS",
    "UCI_WIDTHS",
    "VANHATEREN_DEFAULTS",
    "VANHATEREN_IMAGE_SHAPE",
    "VANHATEREN_IMAGE_SIDE",
    "VANHATEREN_N_IMAGES",
]

#: MNIST's fixed splits (LeCun et al.)
MNIST_ROWS = {"train": 60000, "test": 10000}
#: Omniglot's default split of its 32,460 drawings (Burda et al.'s sizes; :mod:`logzbench.data.omniglot`)
OMNIGLOT_ROWS = {"train": 24345, "test": 8070}
#: scikit-learn's digits by :mod:`logzbench.data.digits`' stratified 80/20 split
DIGITS_ROWS = {"train": 1437, "test": 360}
#: the binarized UCI sets of Larochelle & Murray (AVIL Table 1): row width and rows per fixed split
UCI_WIDTHS = {
    "adult": 123,
    "connect4": 126,
    "dna": 180,
    "mushrooms": 112,
    "nips-0-12": 500,
    "ocr_letters": 128,
    "rcv1": 150,
    "web": 300,
}
UCI_ROWS = {
    "adult": {"train": 5000, "valid": 1414, "test": 26147},
    "connect4": {"train": 16000, "valid": 4000, "test": 47557},
    "dna": {"train": 1400, "valid": 600, "test": 1186},
    "mushrooms": {"train": 2000, "valid": 500, "test": 5624},
    "nips-0-12": {"train": 400, "valid": 100, "test": 1240},
    "ocr_letters": {"train": 32152, "valid": 10000, "test": 10000},
    "rcv1": {"train": 40000, "valid": 10000, "test": 150000},
    "web": {"train": 14000, "valid": 3188, "test": 32561},
}
#: rows of each binary source's fixed splits before ``n_valid`` / ``n_train`` / ``n_test``; ``valid`` only
#: where the source has its own (the UCI sets; ``digits-avil`` by ``shift_augment``: :data:`DIGITS_AVIL_ROWS`)
SOURCE_ROWS = {"mnist": MNIST_ROWS, "omniglot": OMNIGLOT_ROWS, "digits": DIGITS_ROWS, **UCI_ROWS}
#: ``digits-avil``'s training and validation (= test) rows by ``shift_augment`` (default ``train``)
DIGITS_AVIL_ROWS = {
    "train": {"train": 7190, "valid": 359},
    "all": {"train": 7188, "valid": 1797},
    "none": {"train": 1438, "valid": 359},
}
#: Frey faces: frames, and each frame's rows x columns
FREY_FACES = 1965
FREY_IMAGE_SHAPE = (28, 20)
#: van Hateren: registered images and each image's rows x columns (the patch side's bound is the shorter)
VANHATEREN_N_IMAGES = 20
VANHATEREN_IMAGE_SHAPE = (1024, 1536)
VANHATEREN_IMAGE_SIDE = min(VANHATEREN_IMAGE_SHAPE)
#: the defaults of :func:`logzbench.data.vanhateren.prepare_vanhateren`'s sizes (its signature reads them)
VANHATEREN_DEFAULTS = {
    "n_images": 20,
    "n_test_images": 4,
    "patch_size": 16,
    "n_train": 10_000,
    "n_test": 100,
    "n_components": 36,
    "remove_dc": False,
}
#: PCA components of a ``vanhateren`` dataset without ``n_components``
DEFAULT_N_COMPONENTS = VANHATEREN_DEFAULTS["n_components"]

#: binary sources (0/1 rows; :func:`logzbench.data.prepare_dataset`)
DATASETS = ("mnist", "digits", "omniglot", "digits-avil", *UCI_WIDTHS, "clustered")
#: continuous sources (real-valued rows; :func:`logzbench.data.prepare_patches`)
CONTINUOUS_DATASETS = ("vanhateren", "frey")
#: row width of the sources whose width does not depend on settings (``vanhateren``: its ``n_components``;
#: any other source needs ``datasets.<name>.n_visible`` in a workflow config)
N_FEATURES = {
    "mnist": 784,
    "digits": 64,
    "omniglot": 784,
    "digits-avil": 64,
    "frey": FREY_IMAGE_SHAPE[0] * FREY_IMAGE_SHAPE[1],
    **UCI_WIDTHS,
}
#: rows of each data source: ``binary`` (0/1) or ``real`` (whitened PCA coefficients of image patches,
#: standardized Frey faces)
SOURCE_DATA_KINDS = {**dict.fromkeys(DATASETS, "binary"), **dict.fromkeys(CONTINUOUS_DATASETS, "real")}
#: data sources whose prepared files hold ``test_labels`` (what an estimator's ``test_subset`` needs)
LABELLED_SOURCES = ("mnist", "digits", "omniglot", "digits-avil", "clustered")
#: labels of the labelled sources whose number is fixed (digits: 0-9); omniglot's characters are not counted
N_LABELS = {"mnist": 10, "digits": 10, "digits-avil": 10}
