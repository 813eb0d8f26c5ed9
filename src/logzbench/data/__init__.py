"""Data sets: preparation into one ``.npz`` and validated loading.

Prepared file format of the binary sets (written by :func:`prepare_dataset`, ``np.savez_compressed``,
no pickles):

=================  ==========================================================================
``train``          ``uint8`` (N_train, D), values 0/1
``test``           ``uint8`` (N_test, D), values 0/1
``valid``          ``uint8`` (N_valid, D), when ``n_valid > 0`` or the source has a fixed
                   validation split (UCI sets, ``digits-avil``)
``train_labels``   ``int64`` (N_train,) (and ``test_labels``, ``valid_labels`` likewise); only
                   for sources with labels (not the UCI sets)
``image_shape``    ``int64`` (2,), e.g. ``[28, 28]``; ``D == prod(image_shape)``; only for image
                   sources (not the UCI sets; their ``meta["image_shape"]`` is null)
``meta``           0-d unicode string holding JSON (see :func:`load_meta`)
=================  ==========================================================================

Continuous sets (:func:`prepare_patches`) have their own formats: ``vanhateren``
(:mod:`logzbench.data.vanhateren`) and ``frey`` (:mod:`logzbench.data.frey`); both hold ``float64``
``train`` / ``test`` rows and a ``meta`` naming the data set, and :func:`load_rows` reads either.
"""

from __future__ import annotations

from .. import _lazy_exports

__all__ = [
    "DATASETS",
    "CONTINUOUS_DATASETS",
    "N_FEATURES",
    "check_binary_rows",
    "check_categorical_rows",
    "check_real_rows",
    "class_subset",
    "prepare_dataset",
    "prepare_patches",
    "load_labels",
    "load_prepared",
    "load_binary_rows",
    "load_meta",
    "load_rows",
    "load_split_if_present",
]

#: name -> the module defining it, imported on first use (PEP 562), so that the torch-free
#: declarations (:mod:`logzbench.data.sizes`) are read without importing the loaders
_LAZY = {
    "DATASETS": ".sizes",
    "CONTINUOUS_DATASETS": ".sizes",
    "N_FEATURES": ".sizes",
    "check_binary_rows": ".rows",
    "check_categorical_rows": ".rows",
    "check_real_rows": ".rows",
    "class_subset": ".subset",
    "load_labels": ".subset",
    "prepare_dataset": ".prepare",
    "prepare_patches": ".prepare",
    "load_prepared": ".prepared",
    "load_binary_rows": ".prepared",
    "load_meta": ".prepared",
    "load_rows": ".prepared",
    "load_split_if_present": ".prepared",
}

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY)
