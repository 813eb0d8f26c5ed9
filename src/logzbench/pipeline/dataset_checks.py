"""Checks of a workflow config's datasets (importable without torch): sizes a data set does not have
(:mod:`logzbench.data.sizes`), keys of another source, and a ``test_subset`` its test rows cannot give.

:func:`logzbench.pipeline.config.check_config` runs them, so that :mod:`logzbench.data` does not meet them only
when it prepares the data set.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..data.sizes import (
    DIGITS_AVIL_ROWS,
    FREY_FACES,
    N_LABELS,
    SOURCE_ROWS,
    VANHATEREN_DEFAULTS,
    VANHATEREN_IMAGE_SIDE,
    VANHATEREN_N_IMAGES,
)
from ..errors import ConfigError

__all__ = ["CLUSTERED_KEYS", "check_dataset_sizes", "check_per_class"]


#: the ``clustered`` source's own settings (:func:`logzbench.data.clustered.check_settings`), after ``n_visible``
CLUSTERED_KEYS = ("prototypes", "weights", "flip")


def _too_many(dataset: str, key: str, value: int, most: int, what: str) -> ConfigError:
    return ConfigError(
        f"dataset {dataset}: {key}={value} is more than {what}; set datasets.{dataset}.{key} to at "
        f"most {most} (or leave it out)"
    )


def _check_dataset_keys(name: str, d: Mapping[str, Any]) -> None:
    """Refuse keys of one source on a dataset of another: ``shift_augment`` (digits-avil), the clustered
    source's own settings (:data:`CLUSTERED_KEYS`)."""
    source = d["source"]
    if d.get("shift_augment") is not None and source != "digits-avil":
        raise ConfigError(f"dataset {name}: shift_augment applies to digits-avil only, not to {source}; remove it")
    own = [k for k in CLUSTERED_KEYS if d.get(k) is not None]
    if own and source != "clustered":
        raise ConfigError(
            f"dataset {name}: {', '.join(own)} appl{'y' if len(own) > 1 else 'ies'} to clustered only, "
            f"not to {source}; remove {'them' if len(own) > 1 else 'it'}"
        )


def _check_clustered(name: str, d: Mapping[str, Any]) -> None:
    """The clustered source's settings (:func:`logzbench.data.clustered.check_settings`)."""
    from ..data.clustered import check_settings

    try:
        check_settings(d.get("n_visible"), *(d.get(k) for k in CLUSTERED_KEYS))
    except ValueError as exc:
        raise ConfigError(f"dataset {name}: {exc} (datasets.{name})") from None


def _check_vanhateren(name: str, d: Mapping[str, Any]) -> None:
    """The van Hateren settings (:data:`VANHATEREN_DEFAULTS` where not given): images the registry has, a
    training image left, patches within an image, PCA components within a patch's pixels and below its
    training patches."""
    v = {**VANHATEREN_DEFAULTS, **{k: d[k] for k in VANHATEREN_DEFAULTS if d.get(k) is not None}}
    if v["n_images"] > VANHATEREN_N_IMAGES:
        raise _too_many(
            name,
            "n_images",
            v["n_images"],
            VANHATEREN_N_IMAGES,
            f"the {VANHATEREN_N_IMAGES} registered van Hateren images",
        )
    if v["n_test_images"] >= v["n_images"]:
        raise ConfigError(
            f"dataset {name}: n_test_images={v['n_test_images']} leaves no training image of "
            f"n_images={v['n_images']}; set datasets.{name}.n_test_images to at most "
            f"{v['n_images'] - 1}"
        )
    if v["patch_size"] > VANHATEREN_IMAGE_SIDE:
        raise _too_many(
            name,
            "patch_size",
            v["patch_size"],
            VANHATEREN_IMAGE_SIDE,
            f"the images' side ({VANHATEREN_IMAGE_SIDE} pixels)",
        )
    pixels = v["patch_size"] ** 2 - int(bool(v["remove_dc"]))
    if v["n_components"] > pixels:
        raise _too_many(
            name,
            "n_components",
            v["n_components"],
            pixels,
            f"the {pixels} pixels of a {v['patch_size']}x{v['patch_size']} patch"
            + (" less its mean (remove_dc)" if v["remove_dc"] else ""),
        )
    if v["n_train"] <= v["n_components"]:
        raise ConfigError(
            f"dataset {name}: n_train={v['n_train']} training patches cannot fit "
            f"n_components={v['n_components']} PCA components; set datasets.{name}.n_train above "
            f"{v['n_components']}"
        )


def _check_frey(name: str, d: Mapping[str, Any]) -> None:
    """Frey faces: two left to train on after ``n_test``, ``n_train`` within those left."""
    n_train, n_test = d.get("n_train"), int(d.get("n_test") or 0)
    if n_test > FREY_FACES - 2:
        raise _too_many(name, "n_test", n_test, FREY_FACES - 2, f"the {FREY_FACES} Frey faces less two to train on")
    if n_train is not None and int(n_train) > FREY_FACES - n_test:
        raise _too_many(
            name,
            "n_train",
            n_train,
            FREY_FACES - n_test,
            f"the {FREY_FACES - n_test} Frey faces left after n_test={n_test}",
        )


def _check_rows(name: str, d: Mapping[str, Any], rows: Mapping[str, int]) -> None:
    """A binary source's splits of ``rows`` (``train``, and ``test`` / ``valid`` where fixed): ``n_valid`` of a
    source without a fixed validation split, below its training rows; ``n_train`` and ``n_test`` within them."""
    source = d["source"]
    n_train, n_test, n_valid = d.get("n_train"), d.get("n_test"), int(d.get("n_valid") or 0)
    if "valid" in rows and n_valid:
        raise ConfigError(
            f"dataset {name}: {source} has a fixed validation split ({rows['valid']} rows); "
            f"n_valid must be 0, got {n_valid}"
        )
    if n_valid >= rows["train"]:
        raise _too_many(
            name, "n_valid", n_valid, rows["train"] - 1, f"the {rows['train']} training rows of {source} less one"
        )
    if n_train is not None and int(n_train) > rows["train"] - n_valid:
        less = f" less n_valid={n_valid}" if n_valid else ""
        raise _too_many(
            name, "n_train", n_train, rows["train"] - n_valid, f"the {rows['train']} training rows of {source}{less}"
        )
    if n_test is not None and "test" in rows and int(n_test) > rows["test"]:
        raise _too_many(name, "n_test", n_test, rows["test"], f"the {rows['test']} test rows of {source}")


def check_dataset_sizes(name: str, d: Mapping[str, Any]) -> None:
    """Refuse sizes the data set does not have (:data:`SOURCE_ROWS`, :data:`DIGITS_AVIL_ROWS`,
    :data:`FREY_FACES`, the van Hateren settings), which :mod:`logzbench.data` would refuse only when it
    prepares the data set."""
    source = d["source"]
    _check_dataset_keys(name, d)
    if source in _SOURCE_CHECKS:
        _SOURCE_CHECKS[source](name, d)
        return
    if source == "digits-avil":
        if d.get("n_test") is not None:
            raise ConfigError(
                f"dataset {name}: digits-avil has no n_test (its test split is its validation split); "
                f"remove datasets.{name}.n_test"
            )
        _check_rows(name, d, DIGITS_AVIL_ROWS[d.get("shift_augment") or "train"])
    elif source in SOURCE_ROWS:
        _check_rows(name, d, SOURCE_ROWS[source])


#: the sources whose sizes are checked their own way
_SOURCE_CHECKS = {"clustered": _check_clustered, "vanhateren": _check_vanhateren, "frey": _check_frey}


def _test_rows(d: Mapping[str, Any]) -> int | None:
    """Test rows of a prepared binary dataset (``n_test``, else the source's; digits-avil: its validation
    split), ``None`` where unknown."""
    if d["source"] == "digits-avil":
        return DIGITS_AVIL_ROWS[d.get("shift_augment") or "train"]["valid"]
    if d.get("n_test") is not None:
        return int(d["n_test"])
    return SOURCE_ROWS.get(d["source"], {}).get("test")


def check_per_class(config: Mapping, name: str, model: str, dataset: str, per_class: int) -> None:
    """Refuse a ``test_subset`` ``per_class`` that no label of the model's test rows can have (the job's
    :func:`logzbench.data.class_subset` would refuse it after the data are prepared): more than the test
    rows divided by the number of labels (the smallest label has at most that many)."""
    d = config["datasets"][dataset]
    rows = _test_rows(d)
    if rows is None:
        return
    labels = N_LABELS.get(d["source"], 1)
    most = rows // labels
    if per_class > most:
        held = f"{rows} test rows of {labels} labels" if labels > 1 else f"{rows} test rows"
        raise ConfigError(
            f"estimator {name}: test_subset per_class={per_class} is more than model {model}'s dataset "
            f"{dataset} ({d['source']}) can give: its {held} leave at most {most} rows to its smallest "
            f"label; set estimators.{name}.test_subset.per_class to at most {most}"
        )
