"""Black-box variational learners (AVIL, NVIL, VCD) and their bounds, against enumeration on tiny models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from logzbench.models.dbm import DBM
from logzbench.models.enumeration import state_bits
from logzbench.models.rbm import BinaryRBM
from logzbench.training import train_avil, train_nvil, train_vcd, train_with_learner
from logzbench.training.nvil import NVILProposal, exact_log_chi2_bound, log_chi2_bound, q_loss
from logzbench.training.variational import (
    Decoder,
    Encoder,
    EnergyModel,
    Relaxation,
    binary_concrete,
    decoder_bounds,
    exact_decoder_entropy,
    free_energy_bound,
    grbm_free_energy,
)


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _layered_energy(model) -> EnergyModel:
    """An :class:`EnergyModel` (float64) with the parameters of a BinaryRBM or DBM."""
    arrays = model.to_arrays()
    if "W" in arrays:
        arrays = {"W_1": arrays["W"], "bias_0": arrays["visible_bias"], "bias_1": arrays["hidden_bias"]}
    family = "rbm" if "W_2" not in arrays else "dbm"
    return EnergyModel(
        family, {k: torch.as_tensor(v, dtype=torch.float64) for k, v in arrays.items() if k != "data_mean"}
    )


def _rbm():
    return BinaryRBM.random(6, 4, scale=1.0, bias_scale=0.5, generator=_gen(1))


def _dbm():
    return DBM.random((6, 4, 3), scale=1.0, bias_scale=0.5, generator=_gen(2))


@torch.no_grad()
def _brute_decoder(decoder: Decoder, energy):
    """Every ``(z, h, v)`` of a discrete-z, binary-v decoder (bit order: z lowest, then h_1..h_L, v
    highest) with ``log q(z, h, v)``, the Eq. 13 integrand ``log r(z | h_L) - log q(z, h, v)`` (its
    ``q``-expectation is the entropy bound) and ``-E(v, h)`` (float64)."""
    dec = decoder.double()
    k, sizes, nv = dec.aux_size, dec.hidden_sizes, dec.n_visible
    n = k + sum(sizes) + nv
    s = state_bits(0, 1 << n, n, None, torch.float64)
    z, rest = s[:, :k], s[:, k:]
    parts = list(torch.split(rest, [*sizes, nv], dim=1))
    hs, v = parts[:-1], parts[-1]
    log_joint = dec.log_joint(z, hs, v)
    log_r = dec.log_r(z, hs[-1])
    bound_integrand = -log_joint + log_r
    neg_energy = -energy(v, hs) if energy is not None else None
    return log_joint, bound_integrand, neg_energy, (z, hs, v)


# ---------------------------------------------------------------------------- (a) decoder bound
@pytest.mark.parametrize("make, hidden", [(_rbm, (4,)), (_dbm, (4, 3))])
def test_decoder_log_z_bound_is_below_log_z_and_its_estimate_is_unbiased(make, hidden):
    model = make()
    energy = _layered_energy(model)
    log_z = model.exact_log_z()
    decoder = Decoder(6, hidden, 3, "discrete", mlp_hidden=3, generator=_gen(3)).double()
    log_joint, integrand, neg_e, _ = _brute_decoder(decoder, energy)
    q = torch.exp(log_joint)
    assert float(q.sum()) == pytest.approx(1.0, abs=1e-10)
    exact_bound = float((q * (neg_e + integrand)).sum())  # E_q[-E] + Eq. 13 bound, enumerated
    assert exact_bound <= log_z
    est = decoder_bounds(energy, decoder, 40_000, _gen(4))
    se = float(est.log_z.stderr)
    assert abs(float(est.log_z.value) - exact_bound) <= 4 * se
    assert float(est.log_z.value) <= log_z + 4 * se


def test_continuous_z_decoder_bound_is_below_log_z():
    model = _rbm()
    energy = _layered_energy(model)
    decoder = Decoder(6, (4,), 3, "continuous", mlp_hidden=3, generator=_gen(5)).double()
    est = decoder_bounds(energy, decoder, 40_000, _gen(6))
    assert float(est.log_z.value) <= model.exact_log_z() + 4 * float(est.log_z.stderr)


# ---------------------------------------------------------------------------- (b) encoder bound
@pytest.mark.parametrize("make, hidden", [(_rbm, (4,)), (_dbm, (4, 3))])
def test_encoder_bound_is_above_the_free_energy_for_each_v(make, hidden):
    model = make()
    energy = _layered_energy(model)
    v = state_bits(0, 64, 6, None, torch.float64)
    exact_f = -model.exact_log_f(v)
    encoder = Encoder(6, hidden, 3, _gen(7)).double()
    est = free_energy_bound(energy, encoder, v, _gen(8), n_samples=400)
    assert est.value.shape == (64,)
    assert bool((est.value >= exact_f - 4 * est.stderr - 1e-9).all())
    assert float((est.value - exact_f).mean()) > 0


def test_encoder_bound_is_exact_at_the_true_posterior():
    """For an RBM, an encoder whose logits are ``c + vW`` is ``P(h | v)`` and the bound is ``F(v)``."""
    model = _rbm()
    energy = _layered_energy(model)
    encoder = Encoder(6, (4,), 0, _gen(0)).double()
    with torch.no_grad():
        encoder.nets[0].net[0].weight.copy_(model.W.double().T)
        encoder.nets[0].net[0].bias.copy_(model.hidden_bias.double())
    v = state_bits(0, 64, 6, None, torch.float64)
    est = free_energy_bound(energy, encoder, v, _gen(1), n_samples=200)
    assert torch.allclose(est.value, -model.exact_log_f(v), atol=6 * float(est.stderr.max()) + 1e-9)


# ---------------------------------------------------------------------------- (c) entropy bound
@pytest.mark.parametrize("hidden", [(4,), (3, 2)])
def test_entropy_bound_is_below_the_exact_decoder_entropy(hidden):
    decoder = Decoder(5, hidden, 3, "discrete", mlp_hidden=3, generator=_gen(9)).double()
    log_joint, integrand, _, (z, hs, v) = _brute_decoder(decoder, None)
    # exact H(q(v, h)) by enumerating z, h, v: log q(v, h) = logsumexp_z log q(z, h, v)
    k = decoder.aux_size
    n_rest = sum(hidden) + 5
    lj = log_joint.reshape(1 << n_rest, 1 << k)  # row index = z + 2^k * (h, v)
    log_q_vh = torch.logsumexp(lj, dim=1)
    exact_h = float(-(torch.exp(log_q_vh) * log_q_vh).sum())
    assert exact_decoder_entropy(decoder) == pytest.approx(exact_h, abs=1e-9)
    exact_bound = float((torch.exp(log_joint) * integrand).sum())
    assert exact_bound <= exact_h + 1e-12
    est = decoder_bounds(lambda v, hs: torch.zeros(v.shape[0], dtype=v.dtype), decoder, 40_000, _gen(10))
    assert abs(float(est.entropy.value) - exact_bound) <= 4 * float(est.entropy.stderr)
    assert float(est.entropy.value) <= exact_h + 4 * float(est.entropy.stderr)


# ---------------------------------------------------------------------------- (d) NVIL's bound
def test_nvil_estimator_is_unbiased_for_its_bound_and_the_bound_is_above_z_squared():
    model = _rbm()
    energy = _layered_energy(model)
    proposal = NVILProposal(
        Decoder(6, (4,), 3, "discrete", mlp_hidden=3, generator=_gen(11)), Encoder(6, (4,), 3, _gen(12))
    ).double()
    exact = exact_log_chi2_bound(energy, proposal)
    log_z = model.exact_log_z()
    assert exact >= 2 * log_z
    # ... and above the marginal chi-square bound sum_v f(v)^2 / q(v) (Cauchy-Schwarz)
    dec = proposal.decoder
    log_joint, _, _, (z, hs, v) = _brute_decoder(dec, None)
    log_q_v = torch.logsumexp(log_joint.reshape(-1, 1 << 7), dim=1)  # v is the highest 6 bits
    vs = state_bits(0, 64, 6, None, torch.float64)
    marginal = float(torch.logsumexp(2 * model.exact_log_f(vs) - log_q_v, 0))
    assert marginal >= 2 * log_z - 1e-9
    assert exact >= marginal - 1e-9
    with torch.no_grad():
        d = dec.sample(200_000, _gen(13))
        log_w = proposal.log_weights(energy.free_energy, d)
    ratio = torch.exp(2 * log_w - exact)  # w^2 / U: mean 1 when (1/N) sum w^2 is unbiased for U
    assert abs(float(ratio.mean()) - 1.0) <= 4 * float(ratio.std() / math.sqrt(ratio.numel()))
    assert float(log_chi2_bound(log_w)) == pytest.approx(float(torch.log(ratio.mean())) + exact, abs=1e-9)


def test_nvil_q_updates_lower_the_exact_chi_square_bound_towards_z_squared():
    """Training NVIL's q (model fixed) must lower the exact bound U, not only its Monte Carlo estimate
    (a pathwise binary-concrete gradient lowered the estimate while the exact log U rose by 30 nats)."""
    model = _rbm()
    energy = _layered_energy(model).float()
    proposal = NVILProposal(
        Decoder(6, (4,), 3, "discrete", mlp_hidden=3, generator=_gen(11)), Encoder(6, (4,), 3, _gen(12))
    )
    two_log_z = 2 * model.exact_log_z()
    start = exact_log_chi2_bound(energy, proposal)
    opt = torch.optim.Adam(proposal.parameters(), lr=1e-2, betas=(0.5, 0.999))
    gen = _gen(14)
    trace = []
    for i in range(300):
        with torch.no_grad():
            d = proposal.decoder.sample(100, gen)
        opt.zero_grad()
        q_loss(proposal, energy.free_energy, d).backward()
        opt.step()
        if i % 50 == 49:
            trace.append(exact_log_chi2_bound(energy, proposal))
    assert start - two_log_z > 1.0  # room to improve
    assert all(u >= two_log_z - 1e-9 for u in trace)  # a bound: never below 2 log Z
    assert trace[-1] < two_log_z + 0.25 * (start - two_log_z)  # most of the gap closed
    assert max(trace[2:]) < start  # and it stays closed


# ---------------------------------------------------------------------------- (e) relaxed gradients
def test_binary_concrete_limits_and_straight_through():
    logits = torch.tensor([[-2.0, 0.3, 4.0]], requires_grad=True)
    noise = torch.tensor([[1.0, -1.0, -3.0]])
    hard = (logits + noise > 0).float()
    assert torch.allclose(binary_concrete(logits, noise, 1e-4), hard)
    st = binary_concrete(logits, noise, 0.5, straight_through=True)
    assert torch.equal(st.detach(), hard)
    st.sum().backward()
    soft = torch.sigmoid((logits + noise) / 0.5)
    assert torch.allclose(logits.grad, (soft * (1 - soft) / 0.5).detach())


@pytest.mark.parametrize("z", ["continuous", "discrete"])
def test_relaxed_objective_gradients_match_finite_differences(z):
    energy = _layered_energy(_dbm())
    decoder = Decoder(6, (4, 3), 3, z, mlp_hidden=3, generator=_gen(14)).double()
    encoder = Encoder(6, (4, 3), 3, _gen(15)).double()
    v = state_bits(0, 64, 6, None, torch.float64)[::7]
    relax = Relaxation(0.5, False)

    def dec_objective():  # fixed noise: the same seed each evaluation
        d = decoder.sample(8, _gen(16), relax)
        return (energy(d.v, d.hs) - d.entropy_bound()).mean()

    def enc_objective():
        e = encoder.sample(v, _gen(17), relax)
        return (energy(v, e.hs) - e.entropy).mean()

    for module, objective in ((decoder, dec_objective), (encoder, enc_objective)):
        params = [p for p in module.parameters()]
        grads = torch.autograd.grad(objective(), params)
        for p, g in zip(params, grads):
            flat, gflat = p.data.view(-1), g.view(-1)
            for i in range(0, flat.numel(), max(1, flat.numel() // 3)):
                old = float(flat[i])
                with torch.no_grad():
                    flat[i] = old + 1e-6
                    up = float(objective())
                    flat[i] = old - 1e-6
                    down = float(objective())
                    flat[i] = old
                assert (up - down) / 2e-6 == pytest.approx(float(gflat[i]), rel=1e-4, abs=1e-6)


# ---------------------------------------------------------------------------- (f) learners
def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    protos = np.array([[0, 0, 0, 1, 1, 1], [1, 1, 0, 0, 0, 1]], dtype=bool)
    x = protos[rng.integers(0, 2, n)] ^ (rng.random((n, 6)) < 0.05)
    return x.astype(np.float32)


def _same(h1, h2):
    assert h1.keys() == h2.keys()
    for k in h1:
        if k != "seconds":
            np.testing.assert_array_equal(np.asarray(h1[k]), np.asarray(h2[k]), err_msg=k)


def test_avil_raises_the_likelihood_of_a_tiny_rbm_and_keeps_its_bound_below_log_z():
    x = _data()
    model, h = train_avil(
        x,
        x[:20],
        hidden_sizes=(4,),
        aux_size=3,
        z="discrete",
        iterations=100,
        K1=10,
        batch_size=50,
        lr=2e-2,
        init_scale=0.3,
        log_every=40,
        monitor_samples=4000,
        seed=0,
    )
    assert isinstance(model, BinaryRBM) and model.data_mean is not None
    lengths = {len(v) for v in h.values()}
    assert lengths == {4} and h["iteration"] == [0, 40, 80, 100]
    ll = h["exact_log_likelihood"]
    assert ll[-1] > ll[0] + 0.05  # seeds 0-4 gain 0.09-0.46
    assert ll[-1] == pytest.approx(float(model.exact_log_f(x).mean()) - model.exact_log_z(), abs=1e-9)
    for lzb, se, lz in zip(h["log_z_bound"], h["log_z_bound_stderr"], h["exact_log_z"]):
        assert lzb <= lz + 4 * se
    for eb, ee in zip(h["entropy_bound"], h["exact_entropy"]):
        assert np.isfinite(ee) and eb <= ee + 0.1
    assert all(np.isfinite(h["valid_exact_log_likelihood"]))


def test_same_seed_same_history_and_model():
    x = _data()
    kw = dict(hidden_sizes=(4,), aux_size=3, iterations=6, K1=2, batch_size=20, lr=1e-2, log_every=3)
    m1, h1 = train_avil(x, seed=3, **kw)
    m2, h2 = train_avil(x, seed=3, **kw)
    _same(h1, h2)
    assert torch.equal(m1.W, m2.W)
    _, h3 = train_avil(x, seed=4, **kw)
    assert h3["log_z_bound"] != h1["log_z_bound"]
    _same(train_nvil(x, seed=3, **kw)[1], train_nvil(x, seed=3, **kw)[1])
    kw_vcd = {k: v for k, v in kw.items() if k not in ("aux_size", "K1")} | {"hidden_sizes": (4, 3)}
    _same(train_vcd(x, seed=3, **kw_vcd)[1], train_vcd(x, seed=3, **kw_vcd)[1])


@pytest.mark.parametrize("ablation", ["no_encoder_entropy", "no_decoder_entropy"])
def test_ablations_run(ablation):
    _, h = train_avil(
        _data(), hidden_sizes=(4,), aux_size=3, iterations=4, K1=2, batch_size=20, log_every=2, ablation=ablation
    )
    assert len(h["iteration"]) == 3


def test_avil_trains_a_dbm_and_nvil_tracks_log_z():
    x = _data()
    dbm, h = train_avil(
        x, family="dbm", hidden_sizes=(4, 3), aux_size=3, iterations=20, K1=3, batch_size=30, lr=1e-2, log_every=10
    )
    assert isinstance(dbm, DBM) and dbm.layer_sizes == (6, 4, 3)
    assert all(np.isfinite(h["exact_log_z"]))
    rbm, h = train_nvil(
        x, hidden_sizes=(4,), aux_size=3, iterations=100, K1=5, batch_size=50, lr=2e-2, init_scale=0.3, log_every=50
    )
    assert isinstance(rbm, BinaryRBM)
    assert h["exact_log_likelihood"][-1] > h["exact_log_likelihood"][0] + 0.3  # seeds 0-4 gain 1.02-1.18
    assert abs(h["log_z_upper_bound"][-1] - h["exact_log_z"][-1]) < 1.0  # an estimate: may fall below log Z


def test_vcd_raises_the_likelihood_of_a_tiny_dbm():
    x = _data()
    model, h = train_vcd(x, hidden_sizes=(4, 3), iterations=100, batch_size=50, lr=3e-2, init_scale=0.5, log_every=50)
    assert isinstance(model, DBM) and model.data_mean is not None
    assert h["exact_log_likelihood"][-1] > h["exact_log_likelihood"][0] + 0.3
    assert all(g >= f - 0.5 for g, f in zip(h["free_energy_bound"], h["exact_free_energy"]))


def test_grbm_energy_exact_log_z_and_a_short_avil_run():
    gen = _gen(18)
    params = {
        "W": torch.randn(2, 2, generator=gen, dtype=torch.float64) * 0.5,
        "b": torch.randn(2, generator=gen, dtype=torch.float64),
        "c": torch.randn(2, generator=gen, dtype=torch.float64),
    }
    energy = EnergyModel("grbm", params, {"sigma": torch.tensor(0.8, dtype=torch.float64)})
    log_z, log_f = energy.exact(20)
    energy.requires_grad_(False)
    grid = torch.linspace(-12, 12, 801, dtype=torch.float64)
    vv = torch.cartesian_prod(grid, grid)
    hs = state_bits(0, 4, 2, None, torch.float64)
    e = torch.stack([energy(vv, [h.expand(vv.shape[0], 2)]) for h in hs], 1)  # (grid, 4)
    f_v = -torch.logsumexp(-e, 1)
    assert torch.allclose(f_v, grbm_free_energy(energy.tensors(), vv), atol=1e-10)
    cell = float(grid[1] - grid[0]) ** 2
    assert float(torch.logsumexp(-f_v, 0)) + math.log(cell) == pytest.approx(log_z, abs=1e-6)
    x = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
    model, h = train_avil(
        x,
        family="grbm",
        hidden_sizes=(2,),
        aux_size=2,
        iterations=10,
        K1=2,
        batch_size=20,
        log_every=5,
        sigma=0.9,
        monitor_samples=2000,
    )
    arrays = model if isinstance(model, dict) else model.to_arrays()  # GaussianBernoulliRBM where models.grbm is
    assert set(arrays) == {"W", "b", "c", "sigma"} and arrays["W"].shape == (3, 2)
    assert float(arrays["sigma"]) == pytest.approx(0.9)
    assert h["exact_log_z"][-1] == pytest.approx(_grbm_log_z(arrays), abs=1e-4)
    for lzb, se, lz in zip(h["log_z_bound"], h["log_z_bound_stderr"], h["exact_log_z"]):
        assert lzb <= lz + 4 * se


def _grbm_log_z(a) -> float:
    """``log Z`` of a GRBM's arrays by the Gaussian integral over ``v`` for each ``h`` (independent check)."""
    W, b, c, s = (np.asarray(a[k], dtype=np.float64) for k in ("W", "b", "c", "sigma"))
    hs = state_bits(0, 1 << W.shape[1], W.shape[1], None, torch.float64).numpy()
    mean = b + s * hs @ W.T  # v | h ~ N(b + s W h, s^2 I)
    g = hs @ c + ((mean**2).sum(1) - (b**2).sum()) / (2 * s * s)
    return float(np.logaddexp.reduce(g) + 0.5 * W.shape[0] * math.log(2 * math.pi * s * s))


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda x: train_avil(x + 0.5, hidden_sizes=(4,), iterations=1), "not binary"),
        (lambda x: train_avil(x, hidden_sizes=(4,), iterations=1, K1=0), "K1 must be >= 1"),
        (lambda x: train_avil(x, x[:, :5], hidden_sizes=(4,), iterations=1), "5 columns"),
        (lambda x: train_avil(x[0], hidden_sizes=(4,), iterations=1), "shape"),
        (lambda x: train_avil(x, hidden_sizes=(4, 3), iterations=1), "hidden layer"),
        (lambda x: train_avil(x, hidden_sizes=(4,), iterations=1, z="gaussian"), "unknown z"),
        (lambda x: train_avil(x, hidden_sizes=(4,), iterations=1, ablation="no_prior"), "unknown ablation"),
        (lambda x: train_avil(x, family="crbm", iterations=1), "unknown family"),
        (lambda x: train_nvil(x, family="dbm", hidden_sizes=(4, 3), iterations=1), "tractable free energy"),
        (lambda x: train_vcd(x, hidden_sizes=(4, 3), iterations=1, K2=0), "K2 must be >= 1"),
        (lambda x: train_avil(np.where(x > 0, np.nan, 0.0), family="grbm", hidden_sizes=(2,), iterations=1), "NaN"),
    ],
)
def test_bad_input_is_refused_naming_the_problem(call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(_data(10))


def test_ais_monitor_agrees_with_exact_and_best_valid_keeps_the_best_logged_model():
    x, valid = _data(), _data(30, seed=5)
    model, rows, state = train_with_learner(
        x,
        valid,
        family="rbm",
        learner="avil",
        hidden_sizes=(4,),
        aux_size=3,
        iterations=60,
        K1=3,
        batch_size=30,
        lr=3e-2,
        init_scale=0.3,
        log_every=10,
        ais_every=20,
        ais_K=300,
        ais_chains=200,
        select="best-valid",
        seed=1,
    )
    due = [r for r in rows if r["iteration"] in (0, 20, 40, 60)]
    assert all(math.isnan(r["ais_log_z"]) for r in rows if r not in due)
    for r in due:  # AIS during training agrees with the exact log Z within its reported uncertainty
        assert abs(r["ais_log_z"] - r["exact_log_z"]) <= 4 * r["ais_log_z_stderr"] + 1e-3
        assert r["valid_ais_log_likelihood"] == pytest.approx(
            r["valid_exact_log_likelihood"] + r["exact_log_z"] - r["ais_log_z"], abs=1e-6
        )
    best = max(rows, key=lambda r: r["valid_exact_log_likelihood"])
    assert state["selected_iteration"] == best["iteration"]
    ll = float(model.exact_log_f(torch.as_tensor(valid, dtype=torch.float64)).mean()) - model.exact_log_z()
    assert ll == pytest.approx(best["valid_exact_log_likelihood"], abs=1e-6)
    _, rows_last, state_last = train_with_learner(
        x,
        valid,
        family="rbm",
        learner="avil",
        hidden_sizes=(4,),
        aux_size=3,
        iterations=60,
        K1=3,
        batch_size=30,
        lr=3e-2,
        init_scale=0.3,
        log_every=10,
        seed=1,
    )
    assert state_last["selected_iteration"] == 60


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"select": "best-valid", "valid": None}, "needs validation rows"),
        ({"select": "best-valid", "exact_max_units": 0}, "set ais_every"),
        ({"select": "best"}, "unknown select"),
        ({"ais_every": 15, "log_every": 10}, "multiple of log_every"),
        ({"ais_chains": 0, "ais_every": 10, "log_every": 10}, "ais_chains"),
    ],
)
def test_monitoring_options_refused_naming_the_problem(kw, message):
    kw = {"valid": _data(10, seed=6), **kw}
    with pytest.raises(ValueError, match=message):
        train_avil(_data(), kw.pop("valid"), hidden_sizes=(4,), aux_size=3, iterations=2, K1=1, batch_size=10, **kw)
