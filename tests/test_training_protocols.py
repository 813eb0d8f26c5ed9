"""Training-protocol switches of issue 26: per-layer DBM pretraining epochs (Liu et al. 2015), NVIL's
mixture-of-Bernoullis proposal (Kuleshov & Ermon 2017, as Li et al. 2019 describe it), and the learner
table's start-distribution rule (fixed in advance, never the largest estimate)."""

from __future__ import annotations

import collections
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from logzbench import report
from logzbench.cli import main
from logzbench.models.enumeration import state_bits
from logzbench.models.rbm import BinaryRBM
from logzbench.report import learners
from logzbench.training import train_nvil
from logzbench.training.dbm import DBMTrainer
from logzbench.training.hyperparams import per_layer_epochs
from logzbench.training.learner_options import check_hyperparams
from logzbench.training.nvil import BernoulliMixture, exact_log_chi2_bound, log_chi2_bound, q_loss
from logzbench.training.variational import EnergyModel

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest's: one torch thread, restored after


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------- DBM pretraining epochs
DBM_TINY = dict(
    hidden_sizes=[6, 4],
    pretrain_learning_rate=0.1,
    batch_size=50,
    n_epochs=1,
    n_persistent_chains=20,
    exact_ll_max_units=0,
    eval_subsample=50,
    seed=3,
)


@pytest.fixture(scope="module")
def rows(clustered_data):
    return clustered_data[0][:300]


def test_pretrain_epochs_list_runs_each_layers_own_epochs(rows):
    trainer = DBMTrainer(pretrain_epochs=[2, 5], **DBM_TINY).fit(rows)
    per_layer = collections.Counter(r["layer"] for r in trainer.history_ if r["phase"] == "pretrain")
    assert per_layer == {1: 2, 2: 5}
    epochs = {l: [r["epoch"] for r in trainer.history_ if r["phase"] == "pretrain" and r["layer"] == l] for l in (1, 2)}
    assert epochs == {1: [1, 2], 2: [1, 2, 3, 4, 5]}


def test_pretrain_epochs_int_equals_the_repeated_list_bit_for_bit(rows):
    a = DBMTrainer(pretrain_epochs=3, **DBM_TINY).fit(rows)
    b = DBMTrainer(pretrain_epochs=[3, 3], **DBM_TINY).fit(rows)
    for x, y in zip((*a.model_.weights, *a.model_.biases), (*b.model_.weights, *b.model_.biases)):
        assert torch.equal(x, y)
    timing = ["seconds", "eval_seconds"]
    pd.testing.assert_frame_equal(
        pd.DataFrame(a.history_).drop(columns=timing), pd.DataFrame(b.history_).drop(columns=timing)
    )
    # all zeros skips pretraining, as the integer 0 does
    c = DBMTrainer(pretrain_epochs=0, **DBM_TINY).fit(rows)
    d = DBMTrainer(pretrain_epochs=[0, 0], **DBM_TINY).fit(rows)
    assert all(torch.equal(x, y) for x, y in zip(c.model_.weights, d.model_.weights))
    assert not any(r["phase"] == "pretrain" for r in d.history_)


@pytest.mark.parametrize(
    "bad, message",
    [
        ([1, 2, 3], "pretrain_epochs has 3 entries but the model has 2 hidden layers"),
        ([4], "pretrain_epochs has 1 entries but the model has 2 hidden layers"),
        ([1, -1], "pretrain_epochs[1] must be >= 0"),
        ([1, 2.5], "pretrain_epochs[1] must be an integer"),
        (-2, "pretrain_epochs must be >= 0"),
        ("100,200", "pretrain_epochs must be an integer or a list"),
        (True, "pretrain_epochs must be an integer or a list"),
    ],
)
def test_bad_pretrain_epochs_are_refused(rows, bad, message):
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        DBMTrainer(pretrain_epochs=bad, **DBM_TINY).fit(rows)
    assert "\n" not in str(err.value)
    assert per_layer_epochs([100, 200], 2) == [100, 200] and per_layer_epochs(7, 3) == [7, 7, 7]


def test_cli_train_refuses_a_bad_pretrain_list_and_writes_nothing(tmp_path, clustered_data, capsys):
    data = tmp_path / "tiny.npz"
    train, test = clustered_data[0][:200].astype(np.uint8), clustered_data[1][:50].astype(np.uint8)
    np.savez(data, train=train, test=test, meta=np.array("{}"))
    out = tmp_path / "model.npz"
    args = ["train", "--data", str(data), "--out", str(out), "--family", "dbm", "--hidden-sizes", "6,4"]
    args += ["--epochs", "1", "--batch-size", "50"]
    rc = main([*args, "--set", "pretrain_epochs=[1,2,3]"])
    err = capsys.readouterr().err
    assert rc == 2 and "pretrain_epochs has 3 entries" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert main([*args, "--set", "pretrain_epochs=[1,2]"]) == 0 and out.is_file()


# ---------------------------------------------------------------------------- NVIL's mixture proposal
def _rbm_energy(model: BinaryRBM) -> EnergyModel:
    a = model.to_arrays()
    params = {"W_1": a["W"], "bias_0": a["visible_bias"], "bias_1": a["hidden_bias"]}
    return EnergyModel("rbm", {k: torch.as_tensor(v, dtype=torch.float64) for k, v in params.items()})


def _mixture(d=6, k=3, seed=5):
    return BernoulliMixture(d, k, torch.zeros(d), _gen(seed))


def test_mixture_log_q_is_normalised():
    q = _mixture(d=7, k=4)
    with torch.no_grad():
        q.mixing_logits.copy_(torch.randn(4, generator=_gen(6)))
        log_q = q.log_prob(state_bits(0, 1 << 7, 7, None, torch.float64))
    assert log_q.dtype == torch.float64
    assert abs(float(torch.logsumexp(log_q, 0).exp()) - 1.0) <= 1e-10


def test_mixture_draws_follow_q_chi_square():
    q = _mixture(d=3, k=2, seed=7)
    n = 40_000
    v = q.draw(n, _gen(8))
    counts = np.bincount((v.long() * torch.tensor([1, 2, 4])).sum(1).numpy(), minlength=8)  # state_bits' order
    expected = n * q.log_prob(state_bits(0, 8, 3, None, torch.float64)).exp().detach().numpy()
    assert stats.chisquare(counts, expected).pvalue > 1e-3


def test_mixture_bound_is_above_z_squared_its_estimate_unbiased_and_q_training_tightens_it():
    model = BinaryRBM.random(6, 4, scale=1.0, bias_scale=0.5, generator=_gen(1))
    energy = _rbm_energy(model)
    two_log_z = 2 * model.exact_log_z()
    q = _mixture()
    exact = exact_log_chi2_bound(energy, q)
    assert exact >= two_log_z - 1e-9  # sum_v f^2 / q >= (sum_v f)^2 (Cauchy-Schwarz): guaranteed
    with torch.no_grad():
        log_w = q.log_weights(energy.free_energy, q.draw(200_000, _gen(9)))
    ratio = torch.exp(2 * log_w - exact)  # mean 1 when (1/N) sum w^2 is unbiased for U
    assert abs(float(ratio.mean()) - 1.0) <= 4 * float(ratio.std() / math.sqrt(ratio.numel()))
    assert float(log_chi2_bound(log_w)) == pytest.approx(float(torch.log(ratio.mean())) + exact, abs=1e-9)
    # q updates (model fixed) lower the exact bound towards 2 log Z, never below it
    opt = torch.optim.Adam(q.parameters(), lr=3e-2, betas=(0.5, 0.999))
    gen, trace = _gen(10), []
    for i in range(200):
        with torch.no_grad():
            v = q.draw(200, gen)
        opt.zero_grad()
        q_loss(q, energy.free_energy, v).backward()
        opt.step()
        if i % 50 == 49:
            trace.append(exact_log_chi2_bound(energy, q))
    assert exact - two_log_z > 0.5  # room to improve
    assert all(u >= two_log_z - 1e-9 for u in trace)
    assert trace[-1] < two_log_z + 0.5 * (exact - two_log_z)


def _prototypes(n=60, seed=0):
    rng = np.random.default_rng(seed)
    protos = np.array([[0, 0, 0, 1, 1, 1], [1, 1, 0, 0, 0, 1]], dtype=bool)
    return (protos[rng.integers(0, 2, n)] ^ (rng.random((n, 6)) < 0.05)).astype(np.float32)


def test_nvil_mixture_trains_an_rbm_and_its_bound_holds():
    x = _prototypes()
    kw = dict(hidden_sizes=(4,), iterations=100, K1=5, batch_size=50, lr=2e-2, init_scale=0.3, log_every=50)
    model, h, state = train_nvil(x, nvil_variant="mixture", mixture_components=4, return_state=True, **kw)
    assert isinstance(state["proposal"], BernoulliMixture) and state["proposal"].logits.shape == (4, 6)
    assert h["exact_log_likelihood"][-1] > h["exact_log_likelihood"][0] + 0.5  # seeds 0-2 gain 1.4-1.6
    # the exact bound of the final q on the final model: (1/2) log U >= log Z, guaranteed
    energy = _rbm_energy(model)
    assert 0.5 * exact_log_chi2_bound(energy, state["proposal"]) >= model.exact_log_z() - 1e-9
    # the logged estimate (1/2) log U_hat tracks log Z (a Monte Carlo estimate: it may fall below)
    assert abs(h["log_z_upper_bound"][-1] - h["exact_log_z"][-1]) < 0.5
    # same seed, same run; the default variant is unchanged by the new keys
    _, h2 = train_nvil(x, nvil_variant="mixture", mixture_components=4, **kw)
    assert h2["log_z_upper_bound"] == h["log_z_upper_bound"]
    short = {**kw, "iterations": 4, "log_every": 2}
    _, a = train_nvil(x, aux_size=3, **short)
    _, b = train_nvil(x, aux_size=3, nvil_variant="auxiliary", mixture_components=99, **short)
    assert a["log_z_upper_bound"] == b["log_z_upper_bound"]


@pytest.mark.parametrize(
    "hp, message",
    [
        ({"nvil_variant": "mixtur"}, "unknown nvil_variant 'mixtur'; choose one of ['auxiliary', 'mixture']"),
        ({"mixture_components": 0}, "mixture_components must be >= 1"),
        ({"mixture_components": 2.5}, "mixture_components must be an integer"),
    ],
)
def test_bad_nvil_variant_or_components_are_refused(hp, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_hyperparams("nvil", "rbm", hp)
    with pytest.raises(ValueError, match=re.escape(message)):
        train_nvil(_prototypes(), hidden_sizes=(4,), iterations=1, **hp)


def test_mixture_needs_binary_visible_units():
    x = np.random.default_rng(0).normal(size=(40, 5)).astype(np.float32)
    with pytest.raises(ValueError, match="nvil_variant='mixture' is a mixture of Bernoullis"):
        train_nvil(x, family="grbm", hidden_sizes=(3,), iterations=1, nvil_variant="mixture")


# ---------------------------------------------------------------------------- the learner table's start
def _est(init, seed, ll, log_z, K=1000, ll_se=0.05, estimator="ais"):
    return {
        "model": "m",
        "dataset": "mushrooms",
        "estimator": estimator,
        "method": "ais",
        "K": K,
        "init": init,
        "seed": seed,
        "schedule": "linear",
        "chains": 100,
        "result": {
            "estimator": "ais",
            "log_z": log_z,
            "log_z_stderr": 0.01,
            "ess": 90.0,
            "n_chains": 100,
            "mean_log_likelihood": ll,
            "mean_log_likelihood_stderr": ll_se,
            "seconds": 1.0,
            "settings": {},
            "extra": {},
        },
    }


def _table(records):
    summary = report.summarize(report.load_results(records))
    model = {"model": "m", "dataset": "mushrooms", "family": "rbm", "hidden_sizes": [50]}
    model["hyperparams"] = {"family": "rbm", "learner": "avil", "aux_size": 15}
    t = learners.make_table_learners(summary, learners.learner_models([model]), z=2.0)
    return summary, t


def test_noisy_higher_uniform_estimate_does_not_displace_base_rate():
    # uniform's AIS log Z is noisier and, this time, higher: the maximum of the estimates would pick it
    records = []
    for seed, (u, b) in enumerate([(30.9, 30.0), (29.5, 30.02)]):
        records.append(_est("uniform", seed, 13.0 - u, u, ll_se=0.8))
        records.append(_est("base-rate", seed, 13.0 - b, b, ll_se=0.05))
    summary, t = _table(records)
    rows = summary[(summary["model"] == "m") & (summary["method"] == "ais")]
    uni, base = (rows[rows["init"] == i].iloc[0] for i in ("uniform", "base-rate"))
    assert uni["log_z"] > base["log_z"]  # the largest-log-Z rule would report uniform
    row = t.iloc[0]
    assert row["init"] == "base-rate"
    assert row["ais"] == pytest.approx(base["mean_test_ll"]) and row["ais_se"] == pytest.approx(base["mean_test_ll_se"])
    # every start is reported, the chosen one included
    assert row["ais_uniform"] == pytest.approx(uni["mean_test_ll"])
    assert row["ais_uniform_se"] == pytest.approx(uni["mean_test_ll_se"])
    assert row["ais_base_rate"] == row["ais"] and row["ais_base_rate_se"] == row["ais_se"]
    assert row["diff"] == pytest.approx(row["ais"] - row["paper"])
    paper = learners.make_table_learners_paper(t)
    ours = paper[(paper["value"] == "ours") & (paper["learner"] == "AVIL")].iloc[0]
    assert ours["mushrooms"] == pytest.approx(row["ais"])  # the paper layout uses the same start
    # the rule is fixed: reversing which start looks better leaves the choice alone
    _, t2 = _table([{**r, "init": {"uniform": "base-rate", "base-rate": "uniform"}[r["init"]]} for r in records])
    assert t2.iloc[0]["init"] == "base-rate" and t2.iloc[0]["ais"] == pytest.approx(uni["mean_test_ll"])


def test_start_rule_falls_back_in_its_documented_order():
    assert learners.reported_start(["uniform", "base-rate"]) == "base-rate"
    assert learners.reported_start(["uniform"]) == "uniform"
    assert learners.reported_start(["zeta", "alpha"]) == "alpha"
    assert learners.reported_start([]) is None
    _, t = _table([_est("uniform", s, -17.0 - s, 13.0 + s) for s in (0, 1)])
    row = t.iloc[0]
    assert row["init"] == "uniform" and row["ais"] == row["ais_uniform"]
    assert math.isnan(row["ais_base_rate"]) and math.isnan(row["ais_base_rate_se"])
    # the largest K only: a higher base-rate value at a smaller K is not used
    _, t = _table([_est("uniform", 0, -17.0, 13.0), _est("base-rate", 0, -10.0, 6.0, K=100)])
    assert (t.iloc[0]["K"], t.iloc[0]["init"]) == (1000, "uniform")


def test_config_load_refuses_a_pretrain_list_of_the_wrong_length():
    """A DBM's per-layer list is checked against its hidden layers when the workflow config loads (one
    line naming the model), not only when its training job starts."""
    from pathlib import Path

    import yaml
    from snakemake.utils import validate

    from logzbench.errors import ConfigError
    from logzbench.pipeline.config import check_config

    root = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((root / "config" / "test.yaml").read_text())
    config["models"]["digits-dbm8-4"]["hyperparams"]["pretrain_epochs"] = [1, 2]
    validate(config, str(root / "workflow" / "schemas" / "config.schema.yaml"))
    check_config(config)  # one entry per layer: accepted
    config["models"]["digits-dbm8-4"]["hyperparams"]["pretrain_epochs"] = [1, 2, 3]
    with pytest.raises(ConfigError, match=r"^model digits-dbm8-4: hyperparams\.pretrain_epochs has 3 entries"):
        check_config(config)
