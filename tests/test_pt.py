"""The ``pt`` estimator (non-reversible parallel tempering, log Z by stepping stone) and ``sample --method pt``.

* Invariance: from exact draws of the product of the tempered distributions ``p_0 x p_1 x p_2`` of a tiny
  RBM, one swap (each parity) and one whole scan leave the joint distribution of the three chains as it
  was (chi-square against enumeration); a swap that ignores its acceptance fails the same test (the test
  has the power to see a wrong swap).
* Coverage: over 40 seeds the estimate lies within the t interval of its replicas' standard error of the
  enumerated ``log Z`` about as often as it states (95 %), up to the binomial allowance of
  tests/test_sandwich.py (a fraction ``P(Binomial(40, 0.05) > k) <= 1 %``).
* Ladder tuning: on an RBM whose tempered distributions change abruptly (a bimodal model), the tuned
  ladder's rejection rates are spread less than the linear ladder's, and the global barrier Lambda (a
  property of the path, not of the ladder) stays put.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from conftest import assert_refused, random_rbm, write_tiny_inputs
from scipy.stats import binom, chisquare
from scipy.stats import t as student_t

from logzbench.api import estimate
from logzbench.cli import main
from logzbench.estimators import pt
from logzbench.models.rbm import BinaryRBM

# --------------------------------------------------------------------------- invariance on the product space
BETAS = [0.0, 0.45, 1.0]


def _rows(n_sites: int) -> torch.Tensor:
    idx = torch.arange(2**n_sites)
    return ((idx[:, None] >> torch.arange(n_sites)) & 1).float()


def _index(v: torch.Tensor) -> torch.Tensor:
    return (v.long() * (2 ** torch.arange(v.shape[1]))).sum(dim=1)


def _product_draws(path, rows, n: int, parity: int, g) -> tuple[list[torch.Tensor], pt.PTState]:
    """The tempered distributions ``p_beta(v)`` by enumeration, and ``n`` columns of exact draws of their
    product as a :class:`pt.PTState` whose next swap has ``parity``."""
    probs = [torch.softmax(path.log_f(path.state_from_data(rows), b), 0) for b in BETAS]
    x = tuple(path.state_from_data(rows[torch.multinomial(p.float(), n, replacement=True, generator=g)]) for p in probs)
    state = pt.init(path, BETAS, n, g)._replace(x=x, scans=parity)
    return probs, state


def _joint_pvalue(probs, state: pt.PTState) -> float:
    """Chi-square p-value of the three chains' joint states against the product of ``probs`` (cells with
    an expected count below 5 pooled)."""
    s = len(probs[0])
    cell = (_index(state.x[0].v) * s + _index(state.x[1].v)) * s + _index(state.x[2].v)
    n = int(cell.numel())
    expected = (probs[0][:, None, None] * probs[1][None, :, None] * probs[2][None, None, :]).reshape(-1) * n
    observed = torch.bincount(cell, minlength=s**3).double()
    small = expected < 5
    obs = torch.cat([observed[~small], observed[small].sum()[None]]).numpy()
    exp = torch.cat([expected[~small], expected[small].sum()[None]]).numpy()
    return float(chisquare(obs, exp).pvalue)


class _Wrapped:
    """The path behind a wrapper: its own methods, but no batched ``transition_rows`` (one call per
    temperature, :func:`pt.rows_transition`)."""

    def __init__(self, path):
        self.path = path

    def __getattr__(self, name):
        return getattr(self.path, name)


class _AlwaysSwap(_Wrapped):
    """A path whose swaps are always accepted (log-ratios of zero): a wrong swap move."""

    def log_f_ratio(self, state, beta_from, beta_to):
        return torch.zeros(state.v.shape[0], dtype=torch.float64)


@pytest.mark.parametrize("parity", [0, 1])
def test_swap_and_scan_leave_the_product_of_tempered_distributions_invariant(parity):
    rbm = random_rbm(3, 2, seed=5, scale=2.5, bias_scale=1.0)
    path = rbm.annealing_path("uniform")
    rows = _rows(3)
    g = torch.Generator().manual_seed(parity)
    probs, state = _product_draws(path, rows, 20_000, parity, g)
    assert _joint_pvalue(probs, state) > 1e-3  # the draws themselves
    swapped, stats = pt.swap(path, state, BETAS, g)
    assert bool(stats.swapped.any()) and not bool(stats.swapped.all())  # some swaps accepted, some rejected
    assert _joint_pvalue(probs, swapped) > 1e-3
    assert pt.rows_transition(path) is not None and pt.rows_transition(_Wrapped(path)) is None
    for p in (path, _Wrapped(path)):  # every temperature in one batched sweep, and one call per temperature
        scanned, _ = pt.step(p, state, BETAS, g)
        assert _joint_pvalue(probs, scanned) > 1e-3
    wrong, _ = pt.swap(_AlwaysSwap(path), state, BETAS, g)
    assert _joint_pvalue(probs, wrong) < 1e-6  # the test sees a swap that ignores its acceptance


def test_a_swap_moves_the_labels_with_the_states_and_counts_round_trips():
    path = random_rbm(3, 2, seed=5).annealing_path("uniform")
    g = torch.Generator().manual_seed(0)
    state = pt.init(path, [0.0, 1.0], 4, g)
    always = _AlwaysSwap(path)
    s1, _ = pt.swap(always, state, [0.0, 1.0], g)  # 0 <-> 1: state 0 reaches the model
    assert s1.label[:, 0].tolist() == [1, 0] and torch.equal(s1.x[1].v, state.x[0].v)
    s2, _ = pt.swap(always, s1._replace(scans=0), [0.0, 1.0], g)  # and comes back: one round trip per column
    assert s2.round_trips.tolist() == [1, 1, 1, 1]  # (state 1 went from the model to the reference: no trip)
    s3, _ = pt.swap(always, s2._replace(scans=0), [0.0, 1.0], g)
    assert s3.round_trips.tolist() == [2, 2, 2, 2]  # state 1's trip, from the reference and back


# --------------------------------------------------------------------------- log Z
def _allowed(n: int, rate: float, tail: float = 0.01) -> int:
    """The smallest miss count k with P(Binomial(n, rate) > k) <= tail."""
    k = 0
    while binom.sf(k, n, rate) > tail:
        k += 1
    return k


def test_log_z_is_within_its_stated_interval_in_40_seeds():
    rbm = random_rbm(10, 4, seed=3, scale=1.2)
    exact = rbm.exact_log_z()
    half = student_t.ppf(0.975, 8 - 1)
    misses = []
    for seed in range(40):
        r = estimate(rbm, "pt", temperatures=4, rounds=2, K=16, replicas=8, seed=seed, threads=1)
        if abs(r.log_z - exact) > half * r.log_z_stderr:
            misses.append((seed, r.log_z - exact, r.log_z_stderr))
    assert len(misses) <= _allowed(40, 0.05), misses


@pytest.mark.slow
def test_forward_and_backward_stepping_stones_bracket_the_truth_on_average():
    """The forward sum errs low and the backward one high (Jensen, per pair), most clearly with few scans."""
    rbm = random_rbm(12, 6, seed=1, scale=1.5)
    exact = rbm.exact_log_z()
    fwd, bwd = [], []
    for seed in range(20):
        r = estimate(rbm, "pt", temperatures=4, rounds=3, K=8, replicas=16, seed=seed)
        fwd.append(r.extra["log_z_forward"])
        bwd.append(r.extra["log_z_backward"])
    assert np.mean(fwd) < exact < np.mean(bwd)


def _energy_rbm():
    from logzbench.models import EnergyModel

    rbm = random_rbm(6, 3, seed=2)
    W, a, b = rbm.W.double(), rbm.visible_bias.double(), rbm.hidden_bias.double()

    def free_energy(x):
        x = x.double()
        return x @ a + torch.nn.functional.softplus(x @ W + b).sum(1)

    return EnergyModel(free_energy, rbm.n_visible, "binary"), rbm.exact_log_z()


def _model(name):
    if name == "energy-binary":
        return _energy_rbm()
    if name == "potts":
        from logzbench.models.potts import PottsModel

        m = PottsModel.random(4, 3, scale=0.6, field_scale=0.5, seed=1)
    elif name == "dbm":
        from logzbench.models import DBM

        m = DBM.random((6, 4, 3), scale=0.8, bias_scale=0.5, generator=torch.Generator().manual_seed(0))
    elif name == "grbm":
        from logzbench.models.grbm import GaussianBernoulliRBM

        g = torch.Generator().manual_seed(2)
        m = GaussianBernoulliRBM.random(3, 4, scale=0.6, sigma=0.8, bias_scale=0.5, generator=g)
    else:  # a continuous user energy with a closed-form log Z (the Hamiltonian moves)
        import closed_form_energies

        return closed_form_energies.mixture(), closed_form_energies.MIX_LOG_Z
    return m, m.exact_log_z()


@pytest.mark.parametrize("name", ["energy-binary", "potts", "dbm", "grbm", "energy-continuous"])
def test_pt_agrees_with_the_exact_log_z_on_every_kind(name):
    model, exact = _model(name)
    r = estimate(model, "pt", temperatures=5, rounds=4, K=64, seed=0)
    assert abs(r.log_z - exact) < 5 * r.log_z_stderr + 0.02, (r.log_z, exact, r.log_z_stderr)
    assert r.total_sweeps == (2**4 - 1 + 64) * 5 * 8
    assert r.extra["round_trips"] > 0 and len(r.extra["swap_acceptance"]) == 4


def test_the_result_reports_its_diagnostics_and_the_test_log_likelihood():
    rbm = random_rbm(8, 3, seed=0)
    data = torch.bernoulli(torch.full((5, 8), 0.5), generator=torch.Generator().manual_seed(0))
    r = estimate(rbm, "pt", data=data, temperatures=4, rounds=2, K=16, seed=0)
    ladder = r.extra["ladder"]
    assert ladder[0] == 0.0 and ladder[-1] == 1.0 and all(np.diff(ladder) > 0)
    assert np.allclose(r.schedule, ladder)
    assert r.extra["Lambda"] == pytest.approx(sum(r.extra["rejection"]))
    assert [t["scans"] for t in r.extra["tuning"]] == [1, 2]
    assert r.extra["tuning_sweeps"] + r.extra["final_sweeps"] == r.total_sweeps
    assert r.n_chains == 16 * 8 and 0 < r.ess <= r.n_chains  # the stepping-stone terms of a pair
    exact_ll = float((rbm.log_unnormalized_marginal(data) - rbm.exact_log_z()).mean())
    assert abs(r.mean_log_likelihood - exact_ll) < 5 * r.mean_log_likelihood_stderr + 0.02
    assert r.settings["temperatures"] == 4 and r.settings["replicas"] == 8 and r.settings["K"] == 16


def test_same_seed_same_estimate():
    rbm = random_rbm(8, 3, seed=0)
    kw = dict(temperatures=4, rounds=2, K=16)
    a, b, c = (estimate(rbm, "pt", seed=s, **kw) for s in (7, 7, 8))
    assert a.log_z == b.log_z and a.extra["ladder"] == b.extra["ladder"]
    assert a.log_z != c.log_z


# --------------------------------------------------------------------------- the ladder
def _bimodal_rbm(n: int = 30, w: float = 2.0) -> BinaryRBM:
    """One hidden unit tying every visible unit: two modes (the visible units mostly on, or mostly off) of
    equal mass at beta = 1, one broad mode at small beta."""
    return BinaryRBM(torch.full((n, 1), w), torch.full((n,), -w / 2), torch.tensor([-n * w / 2]))


def test_tuning_equalises_the_swap_rejection():
    path = _bimodal_rbm().annealing_path("uniform")
    rates = {}
    for rounds in (0, 5):  # the linear ladder, and the ladder after five rounds of tuning (31 scans)
        _, betas, final, _ = pt.run(path, 8, 16, torch.Generator().manual_seed(0), rounds=rounds, final_scans=128)
        rates[rounds] = final.rates()
    # seeds 0-5 give spread ratios of 0.15-0.40 (the linear ladder's rates differ by a factor of 4 end to end)
    assert rates[5].std() < 0.5 * rates[0].std(), rates
    assert rates[5].sum() == pytest.approx(rates[0].sum(), rel=0.1)  # Lambda: the path's, not the ladder's


def test_respace_inverts_the_cumulative_barrier():
    betas = np.linspace(0, 1, 5)
    new = pt.respace(betas, [0.1, 0.1, 0.4, 0.4])  # the barrier sits in the upper half
    assert new[0] == 0.0 and new[-1] == 1.0 and np.all(np.diff(new) > 0)
    assert np.allclose(new, [0.0, 0.53125, 0.6875, 0.84375, 1.0])  # Lambda = 1: a quarter of it between rungs


# --------------------------------------------------------------------------- the command line
def test_one_temperature_is_refused_by_the_api():
    with pytest.raises(ValueError, match="temperatures must be >= 2"):
        estimate(random_rbm(4, 2, seed=0), "pt", temperatures=1)


def test_sample_method_pt_draws_the_model(tmp_path, capsys):
    write_tiny_inputs(tmp_path)  # model.npz: a 6-3 RBM
    out = tmp_path / "pt.npz"
    argv = ["sample", str(tmp_path / "model.npz"), "--n", "4000", "--method", "pt", "--chains", "400"]
    argv += ["--thin", "2", "--temperatures", "4", "--rounds", "4", "--init", "uniform", "--out", str(out)]
    assert main(argv) == 0
    with np.load(out) as z:
        x, meta = z["x"], json.loads(str(z["meta"]))
    assert x.shape == (4000, 6) and meta["method"] == "pt"
    assert meta["burn_in"] == 2**4 - 1 and len(meta["settings"]["ladder"]) == 4
    from logzbench.models import load_model

    rbm = load_model(tmp_path / "model.npz")
    rows = _rows(6)
    p = torch.softmax(rbm.log_unnormalized_marginal(rows), 0)
    mean = (p[:, None] * rows.double()).sum(0).numpy()
    se = np.sqrt(mean * (1 - mean) / len(x)) * 2  # consecutive draws of a run are correlated: a wider allowance
    assert np.all(np.abs(x.mean(0) - mean) < 4 * se + 1e-3), (x.mean(0), mean)


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--method", "pt", "--temperatures", "1"], ["temperatures", ">= 2"]),
        (["--rounds", "3"], ["rounds", "method='pt' only"]),
        (["--method", "pt", "--beta", "0.5"], ["method='pt'", "beta = 0.5"]),
    ],
)
def test_sample_method_pt_refuses_bad_input(tmp_path, capsys, extra, words):
    write_tiny_inputs(tmp_path)
    argv = ["sample", str(tmp_path / "model.npz"), "--n", "5", "--init", "uniform", "--out", str(tmp_path / "s.npz")]
    assert_refused(main, argv + extra, words, tmp_path, capsys)


def test_planned_sweeps_and_memory_count_every_temperature():
    from logzbench.estimators.context import EstimateContext, estimated_bytes, planned_sweeps
    from logzbench.options import EstimateOptions
    from logzbench.registry import estimator, family

    rbm = random_rbm(4, 2, seed=0)
    c = EstimateContext(
        spec=estimator("pt"),
        family=family("rbm"),
        model=rbm,
        data=None,
        train_data=None,
        options=EstimateOptions(temperatures=6, replicas=3, rounds=2, K=10),
        generator=torch.Generator(),
        device=torch.device("cpu"),
    )
    batches, what = planned_sweeps(c)
    assert batches == [(18, 2**2 - 1 + 10)]
    need, what = estimated_bytes(c)
    assert 0 < need < math.inf and "replicas x temperatures = 3 x 6" in what
