"""A ``FILE.py:NAME`` model file imports its sibling modules (issue 39, item 4): its own directory is first
on ``sys.path`` while it loads, as under ``python FILE.py``, from any working directory; ``sys.path`` is
restored afterwards, and a sibling of one file never stands in for another file's sibling of the same name.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import types

import pytest

from logzbench.errors import ModelFileError
from logzbench.models import load_model
from logzbench.pipeline.jobs import _load_source_model

#: ``energy.py``: independent binary sites, ``log f = SCALE * sum x`` on ``DIM`` sites, from its siblings
ENERGY = """
import params
from model import make

def model():
    return make(params.DIM, params.SCALE)
"""
MODEL = """
from logzbench.models import EnergyModel

def make(dim, scale):
    return EnergyModel(lambda x: scale * x.double().sum(1), dim, "binary")
"""


def _project(folder, dim: int, scale: float):
    """``folder/energy.py`` with its siblings ``params.py`` and ``model.py``; the exact log Z of its model."""
    folder.mkdir(parents=True)
    (folder / "energy.py").write_text(ENERGY)
    (folder / "model.py").write_text(MODEL)
    (folder / "params.py").write_text(f"DIM = {dim}\nSCALE = {scale}\n")
    return dim * math.log1p(math.exp(scale))


def _log_z(model) -> float:
    from logzbench.api import estimate

    return estimate(model, "exact").log_z


def test_two_files_with_same_named_siblings_load_their_own(tmp_path, monkeypatch):
    exact_a = _project(tmp_path / "a", 3, 0.5)
    exact_b = _project(tmp_path / "b", 4, -1.0)
    monkeypatch.chdir(tmp_path)  # neither project's directory
    path_before, had = list(sys.path), set(sys.modules)
    a = load_model(f"{tmp_path / 'a' / 'energy.py'}:model")
    b = load_model(f"{tmp_path / 'b' / 'energy.py'}:model")
    assert (a.dim, b.dim) == (3, 4)
    assert _log_z(a) == pytest.approx(exact_a, abs=1e-9) and _log_z(b) == pytest.approx(exact_b, abs=1e-9)
    assert sys.path == path_before
    assert "params" not in sys.modules and "model" not in sys.modules and not had - set(sys.modules)


def test_a_callers_own_module_of_a_siblings_name_is_set_aside_and_kept(tmp_path, monkeypatch):
    _project(tmp_path / "a", 2, 1.0)
    mine = types.ModuleType("params")  # the caller's own params (no file: not from the project)
    mine.DIM = 99
    monkeypatch.setitem(sys.modules, "params", mine)
    m = load_model(f"{tmp_path / 'a' / 'energy.py'}:model")
    assert m.dim == 2 and sys.modules["params"] is mine


def test_a_failing_sibling_import_restores_the_path(tmp_path):
    (tmp_path / "energy.py").write_text("import missing_sibling\n")
    path_before = list(sys.path)
    with pytest.raises(ModelFileError, match="No module named 'missing_sibling'"):
        load_model(f"{tmp_path / 'energy.py'}:model")
    assert sys.path == path_before


def test_the_workflows_source_entry_imports_siblings(tmp_path, monkeypatch):
    """A ``source:`` entry (the job a workflow rule or the warm server runs) loads through the same loader."""
    exact = _project(tmp_path / "proj", 3, 0.25)
    monkeypatch.chdir(tmp_path)
    source = str(tmp_path / "proj" / "energy.py") + ":model"
    m, sha = _load_source_model({"model": "mine", "family": "energy-binary", "n_visible": 3}, source)
    assert m.dim == 3 and len(sha) == 64
    assert _log_z(m) == pytest.approx(exact, abs=1e-9)


def test_the_command_line_imports_siblings_from_another_directory(tmp_path):
    exact = _project(tmp_path / "proj", 3, 0.75)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # this checkout's logzbench
    proc = subprocess.run(
        [sys.executable, "-m", "logzbench.cli", "estimate", "../proj/energy.py:model", "--estimator", "exact"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["log_z"] == pytest.approx(exact, abs=1e-9)


def test_a_sibling_named_like_an_installed_module_does_not_replace_it(tmp_path):
    """``json.py`` beside the model (it would fail if imported): the standard library's ``json``, already
    imported, stays what ``import json`` gives, in the block and after it."""
    _project(tmp_path / "a", 2, 0.5)
    (tmp_path / "a" / "json.py").write_text("raise RuntimeError('the sibling json.py was imported')\n")
    (tmp_path / "a" / "energy.py").write_text("import json\nassert json.dumps([1]) == '[1]'\n" + ENERGY)
    before = sys.modules["json"]
    assert load_model(f"{tmp_path / 'a' / 'energy.py'}:model").dim == 2
    assert sys.modules["json"] is before
