"""A user's model from code: ``FILE.py:NAME`` and TorchScript ``.pt`` files (:func:`load_source`).

``FILE.py:NAME`` imports ``FILE.py`` as a module -- which runs its code, as any Python import does --
and calls ``NAME()`` with no arguments; it must return an :class:`~logzbench.models.energy.EnergyModel`
(or a model object of a registered family).  While it is imported and ``NAME()`` runs, the file's own
directory is first on ``sys.path``, as under ``python FILE.py``, so it may import its sibling modules
(``import params`` beside it); :func:`_sibling_imports` restores ``sys.path`` afterwards and takes the
siblings out of ``sys.modules`` (the loaded module keeps them), so a second file with a sibling of the same
name, in another directory, imports its own.  Every way a model file is loaded goes through here: the
command line, the API, the workflow's ``source:`` entries and the warm server's jobs
(:func:`~logzbench.models.io.load_model`).  A ``.pt`` file holds a TorchScript module whose ``forward``
is ``log_f``, with the model's ``dim``, ``domain`` and default-reference data in its extra file
``logzbench.json`` (:func:`save_torchscript` writes both; a module with ``dim`` and ``domain`` attributes
also loads).  Either way the model's ``log_f`` is called once on a few states (:meth:`EnergyModel.check`)
before it is handed on, so a wrong shape, NaN or a non-tensor is refused at load time with one line.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import site
import sys
import sysconfig
import zipfile
from pathlib import Path

import numpy as np
import torch

from .. import registry
from ..errors import ModelFileError
from ..sources import META_FILE, parse_source
from .energy import EnergyModel
from .energy_path import first_line

__all__ = ["is_source", "load_source", "save_torchscript"]


def is_source(spec: str | os.PathLike) -> bool:
    """Whether ``spec`` names a model in code (:func:`logzbench.sources.parse_source`): ``FILE.py:NAME``,
    a ``.py`` file (refused by :func:`load_source`: it names no function), or a TorchScript file."""
    try:
        return parse_source(os.fspath(spec)).kind in ("python", "torchscript")
    except ValueError:  # FILE.py without :NAME (or nothing at all): load_source says what is wrong
        return True


def load_source(spec: str | os.PathLike, device=None):
    """The model ``spec`` names (module docstring); a :class:`ModelFileError`, one line, otherwise."""
    try:
        parsed = parse_source(os.fspath(spec))
    except ValueError as exc:
        raise ModelFileError(str(exc)) from None
    path, name = Path(parsed.path), parsed.name
    if not path.exists():
        raise ModelFileError(f"model file not found: {path}")
    if path.is_dir():
        raise ModelFileError(f"{path}: a directory, not a model file")
    if parsed.kind == "torchscript":
        model = _load_torchscript(path)
    else:
        model = _call(path, name)
    if not isinstance(model, EnergyModel):
        fam = registry.FAMILIES.get(str(getattr(model, "family", "")))
        if fam is None or not isinstance(model, fam.model_class):
            raise ModelFileError(
                f"{spec}: returned a {type(model).__module__}.{type(model).__name__}, not a "
                "logzbench.models.EnergyModel (or a model of a registered family)"
            )
        return model if device is None else model.to(device)
    if device is not None:
        model = model.to(device)
    try:
        model.check()
    except ValueError as exc:
        raise ModelFileError(f"{spec}: {exc}") from None
    model.source = os.fspath(spec)
    return model


def _call(path: Path, name: str):
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    module_name = f"logzbench_user_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ModelFileError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    with _sibling_imports(path.resolve().parent, keep=module_name):
        sys.modules[module_name] = module  # dataclasses and pickling look the module up
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # the user's code: any failure is reported, not raised through
            sys.modules.pop(module_name, None)
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise ModelFileError(f"{path}: raised on import ({first_line(exc)})") from None
        fn = getattr(module, name, None)
        if fn is None:
            raise ModelFileError(f"{path}: has no {name!r} (define `def {name}():` returning an EnergyModel)")
        if not callable(fn):
            raise ModelFileError(f"{path}:{name} is a {type(fn).__name__}, not a function returning an EnergyModel")
        try:
            return fn()
        except (Exception, SystemExit) as exc:  # sys.exit() in NAME(): an error, not a silent exit 0
            raise ModelFileError(f"{path}:{name}() raised {first_line(exc)}") from None


@contextlib.contextmanager
def _sibling_imports(folder: Path, keep: str):
    """``folder`` first on ``sys.path`` inside the block (as ``python FILE.py`` puts the script's own); after
    it, ``sys.path`` as it was, and the modules imported from ``folder`` in the block (the file's siblings:
    a name ``folder`` holds, loaded from under it) out of ``sys.modules`` again, except ``keep`` (the model
    file's own module): whoever imported them holds them, and the next model file, in another directory,
    finds its own siblings of the same names.  An imported module that ``folder`` would shadow (its
    ``NAME.py`` or package ``NAME/__init__.py``) but that came from elsewhere (the caller's own ``params``) is
    set aside for the block and put back after it; never an installed one (the standard library, an
    installed package, logzbench itself: code running in the block may need them, and a file beside the
    model named ``json.py`` should not take their place)."""
    saved_path = list(sys.path)
    regular, _ = _local_names(folder)
    shadowed = {
        m: sys.modules.pop(m)
        for m in list(sys.modules)
        if m.split(".")[0] in regular
        and m != keep
        and not _inside(sys.modules[m], folder)
        and not _installed(m, sys.modules[m])
    }
    before = set(sys.modules)
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path[:] = saved_path
        _, names = _local_names(folder)
        for m in set(sys.modules) - before:
            if m != keep and m.split(".")[0] in names and _inside(sys.modules.get(m), folder):
                sys.modules.pop(m, None)
        for m, mod in shadowed.items():
            sys.modules.setdefault(m, mod)


def _local_names(folder: Path) -> tuple[set[str], set[str]]:
    """The top-level module names ``folder`` holds: those that shadow an import (``NAME.py``, packages with
    an ``__init__.py``), and all (directories too: namespace packages)."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return set(), set()
    files = {p.stem for p in entries if p.suffix == ".py"}
    dirs = {p.name for p in entries if p.is_dir()}
    return files | {d for d in dirs if (folder / d / "__init__.py").is_file()}, files | dirs


def _installed(name: str, module) -> bool:
    """Whether the imported ``module`` is of the standard library, an installed package or logzbench."""
    top = name.split(".")[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names or top == __name__.split(".")[0]:
        return True
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots.add(site.getusersitepackages())
    return any(_inside(module, Path(r).resolve()) for r in roots)


def _inside(module, folder: Path) -> bool:
    """Whether ``module`` was loaded from a file (or, a package, a directory) under ``folder``."""
    where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or []), None)
    if not where:
        return False
    try:
        return Path(where).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


# --------------------------------------------------------------------------- TorchScript
def save_torchscript(model: EnergyModel, path: str | os.PathLike) -> None:
    """Write ``model`` as a TorchScript file: its ``log_f`` (a :class:`torch.nn.Module`, scripted, else
    traced on a few states) and, in the extra file ``logzbench.json``, its dim, domain, dtype and the
    rows of its default reference.  A user ``reference`` object is not saved (pass it again)."""
    from ..utils import atomic_path

    if not isinstance(model.log_f_fn, torch.nn.Module):
        raise ValueError("save_torchscript needs a torch.nn.Module log_f (a plain function cannot be scripted)")
    module = model.log_f_fn
    try:
        scripted = torch.jit.script(module)
    except Exception:  # not scriptable: trace on states of the domain
        g = torch.Generator().manual_seed(0)
        if model.discrete:
            x = torch.randint(0, model.n_states, (4, model.dim), generator=g).to(model.dtype)
        else:
            x = torch.randn(4, model.dim, generator=g).to(model.dtype)
        scripted = torch.jit.trace(module, x.to(model.device))
    meta = {
        "dim": model.dim,
        "domain": list(model.domain) if isinstance(model.domain, tuple) else model.domain,
        "dtype": str(model.dtype).replace("torch.", ""),
        "name": model.name,
        "data": None if model.data is None else model.data.cpu().tolist(),
    }
    with atomic_path(path) as tmp:
        torch.jit.save(scripted, str(tmp), _extra_files={META_FILE: json.dumps(meta)})


#: the most a TorchScript archive's entries may unpack to, as a multiple of its size: torch.jit.save
#: stores the tensors uncompressed (deflating only the small code files), so a larger ratio is a zip bomb
_PT_MAX_RATIO = 20
#: peak memory of torch.jit.load per byte of the archive's entries (the entries read, then the tensors; a
#: 1 GiB archive peaked at 2.35 GB, issue 37)
_PT_PEAK_FACTOR = 2.5


def _load_torchscript(path: Path) -> EnergyModel:
    from ..utils.io import archive_refusal

    try:
        too_big = archive_refusal(path, _PT_PEAK_FACTOR, _PT_MAX_RATIO)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ModelFileError(f"{path}: not a readable TorchScript file ({first_line(exc)})") from None
    if too_big is not None:
        raise ModelFileError(f"{path}: not loaded: {too_big}")
    extra = {META_FILE: ""}
    try:
        module = torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
    except Exception as exc:
        raise ModelFileError(f"{path}: not a readable TorchScript file ({first_line(exc)})") from None
    if extra[META_FILE]:
        try:
            meta = json.loads(extra[META_FILE])
            dim, domain = meta["dim"], meta["domain"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelFileError(f"{path}: its {META_FILE} is not valid ({first_line(exc)})") from None
    else:
        dim, domain = getattr(module, "dim", None), getattr(module, "domain", None)
        if dim is None or domain is None:
            raise ModelFileError(
                f"{path}: a TorchScript file must say its dim and domain: save it with "
                "logzbench.models.save_torchscript, or give the module attributes dim and domain"
            )
        meta = {}
    if isinstance(domain, list):
        domain = tuple(domain)
    dtype = getattr(torch, str(meta.get("dtype", "")), None) if meta.get("dtype") else None
    data = meta.get("data")
    try:
        return EnergyModel(
            module,
            dim,
            domain,
            data=None if data is None else np.asarray(data),
            dtype=dtype if isinstance(dtype, torch.dtype) else None,
            name=meta.get("name") or path.stem,
        )
    except ValueError as exc:
        raise ModelFileError(f"{path}: {exc}") from None
