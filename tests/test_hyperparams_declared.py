"""The trainers' and learners' hyperparameters are declared once (logzbench.training.hyperparams): what is
made from a declaration (signatures, constructors, bounds) and what is checked against it (the config
schema, the documentation's table) agree with it."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from logzbench.training import hyperparams
from logzbench.training.declare import REQUIRED, Rule, check

REPO = Path(__file__).resolve().parents[1]


def test_declarations_are_torch_free():
    code = (
        "import sys, logzbench.training.hyperparams, logzbench.training.learner_options; "
        "sys.exit('torch' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("target", sorted(hyperparams.DECLARATIONS))
def test_every_hyperparameter_has_a_type_and_a_doc(target):
    for f in dataclasses.fields(hyperparams.DECLARATIONS[target]):
        assert f.type and f.metadata["doc"], (target, f.name)
        assert f.metadata["rule"] is None or isinstance(f.metadata["rule"], Rule), (target, f.name)
        if f.metadata["rule"] is not None and f.default is not dataclasses.MISSING:
            check(f.name, f.default, f.metadata["rule"])  # every default within its own bound


def test_docs_table_is_generated_from_the_declarations():
    """docs/hyperparameters.md is :func:`hyperparams.markdown`'s (regenerate it with
    ``python -m logzbench.training.hyperparams > docs/hyperparameters.md``)."""
    assert (REPO / "docs" / "hyperparameters.md").read_text() == hyperparams.markdown()
    assert "hyperparameters.md" in (REPO / "mkdocs.yml").read_text()


def _schema_hyperparams() -> dict:
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    return schema["properties"]["models"]["additionalProperties"]["properties"]["hyperparams"]["properties"]


def test_config_schema_never_accepts_what_a_declaration_refuses():
    """Each hyperparameter the config schema lists is declared, and its schema is the declared bound or
    stricter (the workflow may ask more, e.g. ``n_epochs >= 1``): an integer's minimum at least every
    declared lower end, a number's lower end open where a declared one is, a choice the same choices."""
    declared = {f.name for d in hyperparams.DECLARATIONS.values() for f in dataclasses.fields(d)}
    props = _schema_hyperparams()
    assert set(props) - {"learner"} <= declared
    for name, prop in props.items():
        for d in hyperparams.DECLARATIONS.values():
            rule = next((f.metadata["rule"] for f in dataclasses.fields(d) if f.name == name), None)
            if rule is None:
                continue
            types = prop.get("type", [])
            types = [types] if isinstance(types, str) else types
            if rule.kind == "choice":
                assert set(prop["enum"]) == set(rule.choices), (name, d.__name__)
            elif rule.kind == "int" and "array" not in types:
                assert types == ["integer"], (name, d.__name__)
                if rule.low is not None:
                    assert prop.get("minimum", -float("inf")) >= rule.low, (name, d.__name__)
            elif rule.kind == "real":
                assert "number" in types, (name, d.__name__)
                low = prop.get("exclusiveMinimum", prop.get("minimum"))
                assert low is not None and low >= rule.low, (name, d.__name__)
                if rule.low_open and "exclusiveMinimum" not in prop:
                    assert prop["minimum"] > rule.low, (name, d.__name__)


def test_signatures_are_made_from_the_declarations():
    """A function's keywords and a trainer's constructor are the declaration's fields, with its defaults;
    an unknown keyword is Python's TypeError."""
    from logzbench.training.avil import train_avil
    from logzbench.training.em import train_em
    from logzbench.training.trainer import RBMTrainer

    params = inspect.signature(train_avil).parameters
    assert list(params)[:2] == ["train", "valid"] and list(params)[-1] == "return_state"
    assert {n: p.default for n, p in params.items() if p.kind is p.KEYWORD_ONLY and n != "return_state"} == (
        hyperparams.AVIL
    )
    assert inspect.signature(train_em).parameters["n_iter"].default is inspect.Parameter.empty
    assert hyperparams.EM["n_iter"] is REQUIRED
    with pytest.raises(TypeError, match=r"^train_avil\(\) got an unexpected keyword argument 'aux_sise'$"):
        train_avil([[0, 1]], aux_sise=3)
    with pytest.raises(TypeError, match=r"^RBMTrainer.__init__\(\) got an unexpected keyword argument 'n_hiden'$"):
        RBMTrainer(n_hiden=3)
    trainer = RBMTrainer(20, "pcd")  # positional, in the declared order
    assert (trainer.n_hidden, trainer.method) == (20, "pcd")
    assert trainer.params() == hyperparams.RBMTrainerParams(n_hidden=20, method="pcd")
    assert list(trainer.get_params()) == list(hyperparams.RBM_TRAINER)


def test_learner_rules_are_the_declared_bounds():
    from logzbench.training.learner_options import FIGURE_KEYS, RULES

    declared = hyperparams.rules(hyperparams.AVILParams, hyperparams.NVILParams, hyperparams.VCDParams)
    assert {k: v for k, v in RULES.items() if k not in FIGURE_KEYS} == declared


def test_train_set_refuses_an_undeclared_name_before_reading_data(tmp_path, capsys):
    """``logzbench train --set`` names a family trainer's hyperparameter by its declaration, checked
    before the data are read (here there are none)."""
    from logzbench.cli import main

    out = tmp_path / "m.npz"
    rc = main(["train", "--data", str(tmp_path / "missing.npz"), "--out", str(out), "--n-hidden", "3", "--set", "k=2"])
    assert rc == 2 and "unknown hyperparameter" not in capsys.readouterr().err  # a declared name: the data's error
    rc = main(["train", "--data", str(tmp_path / "missing.npz"), "--out", str(out), "--n-hidden", "3", "--set", "kk=2"])
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert "unknown hyperparameter(s) ['kk'] for family 'rbm' (RBMTrainer)" in err
