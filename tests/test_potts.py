"""The categorical families (pairwise Potts model, Potts RBM): exact log Z against brute force, their
annealing paths (invariance of the Gibbs kernel, increments, p_0), AIS and RAISE through the API
against enumeration, the plain-text parameter files, model files and the trainers."""

import itertools

import numpy as np
import pytest
import torch
from scipy import stats

from logzbench.api import estimate
from logzbench.errors import ModelFileError
from logzbench.models.enumeration import MAX_ENUMERATION_BITS
from logzbench.models.io import load_model
from logzbench.models.potts import PottsModel, categorical_from_logits, exact_seconds
from logzbench.models.potts_rbm import PottsRBM
from logzbench.models.potts_rbm import exact_seconds as rbm_exact_seconds
from logzbench.models.potts_text import read_potts_text, write_potts_text
from logzbench.training.potts import pseudo_log_likelihood, train_potts, train_potts_rbm


def all_rows(L: int, q: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product(range(q), repeat=L)), dtype=torch.int64)


def brute_log_f(model: PottsModel, x: torch.Tensor) -> torch.Tensor:
    """``log f`` by the definition, one loop per term."""
    L = model.n_visible
    out = []
    for row in x.tolist():
        s = sum(float(model.h[i, row[i]]) for i in range(L))
        s += sum(float(model.J[i, j, row[i], row[j]]) for i in range(L) for j in range(i + 1, L))
        out.append(s)
    return torch.tensor(out, dtype=torch.float64)


def exact_samples(model, n: int, seed: int) -> torch.Tensor:
    """``n`` exact draws from the model by enumerating ``p`` (a fixed generator)."""
    X = all_rows(model.n_visible, model.n_states)
    logp = model.log_unnormalized_marginal(X)
    idx = torch.multinomial(torch.softmax(logp, 0), n, replacement=True, generator=torch.Generator().manual_seed(seed))
    return X[idx]


# --------------------------------------------------------------------------- exact log Z
def test_potts_log_f_and_exact_log_z_match_brute_force():
    m = PottsModel.random(4, 3, scale=0.6, field_scale=0.5, seed=1)
    X = all_rows(4, 3)
    bf = brute_log_f(m, X)
    assert torch.allclose(m.log_unnormalized_marginal(X), bf, atol=1e-12)
    log_z, bound = m.exact_log_z(return_bound=True)
    assert abs(log_z - float(torch.logsumexp(bf, 0))) < 1e-12
    assert 0 < bound < 1e-10
    assert m.exact_log_z(chunk_size=5) == pytest.approx(log_z, abs=1e-12)


def test_potts_rbm_exact_log_z_matches_brute_force_over_both_layers():
    for L, q, H in ((3, 3, 4), (2, 3, 6)):  # hidden layer enumerated, then the visible one
        m = PottsRBM.random(L, q, H, scale=0.7, bias_scale=0.5, seed=L)
        W, a, b = m.W.double(), m.visible_bias.double(), m.hidden_bias.double()
        terms = []
        for v in itertools.product(range(q), repeat=L):
            for h in itertools.product((0.0, 1.0), repeat=H):
                h = torch.tensor(h, dtype=torch.float64)
                terms.append(sum(a[i, v[i]] + W[i, v[i]] @ h for i in range(L)) + b @ h)
        bf = float(torch.logsumexp(torch.stack(terms), 0))
        log_z, bound = m.exact_log_z(return_bound=True)
        assert log_z == pytest.approx(bf, abs=1e-10)
        assert m.exact_log_z(chunk_size=3) == pytest.approx(bf, abs=1e-10)
        assert 0 < bound < 1e-9
        # log f(v) with h summed out, by brute force
        X = all_rows(L, q)
        assert float(torch.logsumexp(m.log_unnormalized_marginal(X), 0)) == pytest.approx(bf, abs=1e-10)


def test_enumeration_is_refused_above_the_cap():
    m = PottsModel.random(17, 4, seed=0)  # 4^17 = 2^34 states
    with pytest.raises(ValueError, match=r"4\^17 = 2\^34\.0 states; refusing above 2\^32"):
        m.exact_log_z()
    with pytest.raises(ValueError, match="refusing above"):
        exact_seconds(m, 0, "float64", "cpu")
    seconds, what = exact_seconds(PottsModel.random(6, 4, seed=0), 10, "float64", "cpu")
    assert what == "4^6 states" and 0 < seconds < 1
    r = PottsRBM.random(40, 21, MAX_ENUMERATION_BITS + 1, seed=0)
    with pytest.raises(ValueError, match=r"2\^33 hidden states"):
        r.exact_log_z()
    with pytest.raises(ValueError, match=r"2\^33 hidden states"):
        rbm_exact_seconds(r, 0, "float64", "cpu")
    seconds, what = rbm_exact_seconds(PottsRBM.random(6, 4, 5, seed=0), 10, "float64", "cpu")
    assert what == "2^5 hidden states" and seconds > 0
    with pytest.raises(ValueError, match="float64 only"):
        PottsModel.random(3, 3).exact_log_z(precision="mixed")


# --------------------------------------------------------------------------- the annealing paths
def test_categorical_draws_follow_their_probabilities():
    logits = torch.tensor([0.3, -1.0, 2.0, 0.0, -30.0], dtype=torch.float64)
    x = categorical_from_logits(logits.expand(40000, -1), torch.Generator().manual_seed(0))
    counts = torch.bincount(x, minlength=5).double()
    p = torch.softmax(logits, 0)
    assert counts[4] == 0
    assert stats.chisquare(counts[:4].numpy(), (p[:4] / p[:4].sum() * counts.sum()).numpy()).pvalue > 1e-3
    again = categorical_from_logits(logits.expand(40000, -1), torch.Generator().manual_seed(0))
    assert torch.equal(x, again)


def _paths():
    pm = PottsModel.random(3, 3, scale=0.9, field_scale=0.6, seed=4)
    rbm = PottsRBM.random(3, 3, 4, scale=0.9, bias_scale=0.5, seed=4)
    train = torch.randint(0, 3, (30, 3), generator=torch.Generator().manual_seed(1))
    return [pm.annealing_path("base-rate", data=train), rbm.annealing_path("base-rate", data=train)]


@pytest.mark.parametrize("which", [0, 1], ids=["potts", "potts-rbm"])
def test_gibbs_transition_leaves_p_beta_invariant(which):
    """Exact draws from p_beta (enumerated), three transitions, chi-square of the visible histogram."""
    path = _paths()[which]
    beta = 0.6
    X = all_rows(3, 3)
    logp = path.log_f(path.state_from_data(X), beta)
    p = torch.softmax(logp, 0)
    n = 30000
    g = torch.Generator().manual_seed(1)
    idx = torch.multinomial(p, n, replacement=True, generator=g)
    state = path.state_from_data(X[idx])
    for _ in range(3):
        state = path.transition(state, beta, g)
    rows = state if isinstance(state, torch.Tensor) else state.x
    code = (rows * torch.tensor([1, 3, 9])).sum(1)
    counts = torch.bincount(code, minlength=27).double()
    code_all = (X * torch.tensor([1, 3, 9])).sum(1)
    expected = torch.zeros(27, dtype=torch.float64)
    expected[code_all] = p * n
    assert stats.chisquare(counts.numpy(), expected.numpy()).pvalue > 1e-3


@pytest.mark.parametrize("which", [0, 1], ids=["potts", "potts-rbm"])
def test_path_endpoints_and_increments(which):
    path = _paths()[which]
    X = all_rows(3, 3)
    s = path.state_from_data(X)
    # log Z_0 is the normaliser of f_0 (over v, the hidden units summed out)
    assert float(torch.logsumexp(path.log_f(s, 0.0), 0)) == pytest.approx(path.log_z0(), abs=1e-6)
    model = path.model
    assert torch.allclose(path.log_f(s, 1.0), model.log_unnormalized_marginal(X), atol=1e-5)
    for b0, b1 in ((0.2, 0.2001), (0.0, 1.0), (0.7, 0.3)):
        want = path.log_f(s, b1) - path.log_f(s, b0)
        assert torch.allclose(path.log_f_ratio(s, b0, b1), want, atol=1e-5)
    # p_0 draws are exact: site frequencies match softmax(a0)
    draws = path.sample_initial(20000, torch.Generator().manual_seed(3))
    rows = draws if isinstance(draws, torch.Tensor) else draws.x
    freq = torch.nn.functional.one_hot(rows, 3).double().mean(0)
    assert torch.allclose(freq, torch.softmax(path.a0, 1), atol=0.02)


def test_reweight_and_move_matches_separate_calls():
    path = _paths()[1]
    s = path.sample_initial(50, torch.Generator().manual_seed(0))
    inc, new = path.reweight_and_move(s, 0.3, 0.31, torch.Generator().manual_seed(5))
    want_inc = path.log_f_ratio(s, 0.3, 0.31)
    want = path.transition(s, 0.31, torch.Generator().manual_seed(5))
    assert torch.allclose(inc, want_inc, atol=1e-9)
    assert torch.equal(new.x, want.x)


def test_base_rate_needs_data_or_data_mean():
    m = PottsModel.random(3, 3)
    with pytest.raises(ValueError, match="site frequencies"):
        m.annealing_path("base-rate")
    with pytest.raises(ValueError, match="unknown initial distribution"):
        m.annealing_path("nope")
    with pytest.raises(ValueError, match="states per site"):
        m.log_unnormalized_marginal(torch.tensor([[0, 1, 3]]))


# --------------------------------------------------------------------------- estimators vs exact
def test_ais_agrees_with_exact_and_is_reproducible():
    m = PottsModel.random(6, 4, scale=0.4, field_scale=0.5, seed=1)
    ex = estimate(m, "exact").log_z
    assert ex == pytest.approx(m.exact_log_z(), abs=1e-12)
    res = estimate(m, "ais", K=300, chains=200, init="uniform", seed=0)
    assert abs(res.log_z - ex) < 4 * res.log_z_stderr + 0.02, (res.log_z, res.log_z_stderr, ex)
    again = estimate(m, "ais", K=300, chains=200, init="uniform", seed=0)
    assert again.log_z == res.log_z
    r = PottsRBM.random(6, 4, 5, scale=0.5, bias_scale=0.3, seed=1)
    train = torch.randint(0, 4, (40, 6), generator=torch.Generator().manual_seed(2))
    res = estimate(r, "ais", train_data=train, K=300, chains=200, init="base-rate", seed=0)
    assert abs(res.log_z - r.exact_log_z()) < 4 * res.log_z_stderr + 0.02


def test_raise_on_exact_samples_is_not_above_the_exact_log_likelihood():
    m = PottsModel.random(6, 4, scale=0.4, field_scale=0.5, seed=1)
    data = exact_samples(m, 30, seed=11)
    ex = estimate(m, "exact", data=data).mean_log_likelihood
    res = estimate(m, "raise", data=data, K=100, chains=20, init="uniform", seed=0)
    assert res.mean_log_likelihood <= ex + 3 * res.mean_log_likelihood_stderr + 0.01
    assert res.mean_log_likelihood > ex - 0.5  # and not far below


# --------------------------------------------------------------------------- files
def test_text_file_round_trip(tmp_path):
    m = PottsModel.random(4, 3, scale=0.5, field_scale=0.5, seed=3)
    path = tmp_path / "params.dat"
    write_potts_text(m, path)
    assert torch.equal(load_model(path).J, read_potts_text(path).J)  # any name but .npz: read as text
    back = read_potts_text(path)
    assert (back.n_visible, back.n_states) == (4, 3)
    x = torch.randint(0, 3, (50, 4), generator=torch.Generator().manual_seed(0))
    assert torch.allclose(back.log_unnormalized_marginal(x), m.log_unnormalized_marginal(x), atol=1e-14, rtol=0)
    lines = path.read_text().splitlines()
    assert lines[0].startswith("J 0 1 0 0 ") and lines[-1].startswith("h 3 2 ")
    assert not any(ln.startswith("J 1 0 ") for ln in lines)  # i < j only


def test_text_file_letters_mirrored_entries_and_comments(tmp_path):
    path = tmp_path / "letters.txt"
    path.write_text("# adabmDCA style\n\nJ 0 1 - A 0.5\nJ 1 0 C - 0.25\nJ 0 1 - A 0.5\nh 0 - 1.0\nh 1 C -2\n")
    with pytest.raises(ModelFileError, match=r"line 5: duplicate coupling"):
        read_potts_text(path)
    path.write_text("# adabmDCA style\n\nJ 0 1 - A 0.5\nJ 1 0 C - 0.25\nJ 1 0 A - 0.5\nh 0 - 1.0\nh 1 C -2\n")
    m = read_potts_text(path, alphabet="-AC")
    assert (m.n_visible, m.n_states) == (2, 3)
    assert float(m.J[0, 1, 0, 1]) == 0.5 and float(m.J[1, 0, 1, 0]) == 0.5
    assert float(m.J[0, 1, 0, 2]) == 0.25 and float(m.J[1, 0, 2, 0]) == 0.25
    assert float(m.h[1, 2]) == -2.0
    assert m.log_unnormalized_marginal(torch.tensor([[0, 2]])).item() == pytest.approx(1.0 + 0.25 - 2.0)


@pytest.mark.parametrize(
    "line, message",
    [
        ("K 0 1 0 0 1.0", r"line 3: unknown parameter 'K'"),
        ("J 0 1 0 1.0", r"line 3: a 'J' line has 6 fields"),
        ("h 0 1 2 1.0", r"line 3: an 'h' line has 4 fields"),
        ("J 0 x 0 0 1.0", r"line 3: site index 'x' is not an integer"),
        ("J 0 1 0 0.5 1.0", r"line 3: state '0.5' is neither an integer"),
        ("h -1 0 1.0", r"line 3: site index -1 is negative"),
        ("J 0 1 0 0 nan", r"line 3: value 'nan' is not finite"),
        ("h 0 0 inf", r"line 3: value 'inf' is not finite"),
        ("h 0 0 abc", r"line 3: value 'abc' is not a number"),
        ("J 0 1 0 0 -1e31", r"line 3: value '-1e31' is beyond \+-1e\+30"),
        ("J 1 1 0 0 1.0", r"line 3: coupling of site 1 with itself"),
        ("J 0 1 0 0 2.0", r"line 3: duplicate coupling"),
        ("h 0 0 2.0", r"line 3: duplicate field"),
    ],
)
def test_text_file_refuses_malformed_lines(tmp_path, line, message):
    path = tmp_path / "bad.txt"
    path.write_text("J 0 1 0 0 1.0\nh 0 0 1.0\n" + line + "\nh 1 1 0.5\n")
    with pytest.raises(ModelFileError, match=message) as exc:
        read_potts_text(path)
    assert str(path) in str(exc.value)


def test_text_file_sniffing_and_unreadable_files(tmp_path):
    """load_model reads a file not named .npz as a Potts text file unless it begins as a NumPy file or a zip
    archive, so a text file's own errors are reported as such (not as an unreadable .npz)."""
    p = tmp_path / "x.bin"
    np.savez(p, model_type="potts", **PottsModel.random(2, 2, seed=0).to_arrays())
    (tmp_path / "x.bin.npz").rename(p)  # an .npz under another name
    assert load_model(p).n_states == 2
    q = tmp_path / "c.txt"
    q.write_text("# comment\n\nh 0 1 0.5\n")
    assert load_model(q).n_states == 2
    (tmp_path / "x.txt").write_text("# comment\nX 0 1 0.1\n")
    with pytest.raises(ModelFileError, match=r"x.txt, line 2: unknown parameter 'X'"):
        load_model(tmp_path / "x.txt")
    e = tmp_path / "empty.txt"
    e.write_text("# nothing\n")
    with pytest.raises(ModelFileError, match="no parameters: no 'J' or 'h' lines"):
        read_potts_text(e)
    b = tmp_path / "binary.txt"
    b.write_bytes(b"h 0 1 0.5\n# comment\nh 1 0 \xc3\x28\n")
    with pytest.raises(ModelFileError, match=r"binary.txt, line 3: not a text file \(byte 0xc3 is not UTF-8\)"):
        read_potts_text(b)


def test_text_file_size_is_checked_before_allocating(tmp_path, monkeypatch):
    """L and q come from the largest indices: the dense model they imply (dense_bytes) is refused, naming
    the lines that set them, when it would not fit in the memory available; the same file fits where
    there is enough."""
    from logzbench.models.potts import dense_bytes

    path = tmp_path / "wide.txt"
    path.write_text("J 0 1 0 1 0.5\nh 40 1 0.25\nh 2 3 0.1\n")  # L = 41, q = 4
    need = dense_bytes(41, 4)
    monkeypatch.setattr("logzbench.utils.devices.available_memory", lambda device="cpu": int(need / 0.8) - 1)
    with pytest.raises(ModelFileError, match=r"site index 40 \(line 2\) and state index 3 \(line 3\)"):
        read_potts_text(path)
    monkeypatch.setattr("logzbench.utils.devices.available_memory", lambda device="cpu": int(need / 0.8) + 1)
    m = read_potts_text(path)
    assert (m.n_visible, m.n_states) == (41, 4) and float(m.h[40, 1]) == 0.25
    # arrays already in memory (an .npz): the model's own copies are checked before they are made
    arrays = {"h": m.h.numpy(), "J": m.J.numpy()}
    extra = need - m.J.numpy().nbytes - m.h.numpy().nbytes
    monkeypatch.setattr("logzbench.utils.devices.available_memory", lambda device="cpu": int(extra / 0.8) - 1)
    with pytest.raises(ModelFileError, match=r"m.npz: a dense Potts model of L = 41 sites and q = 4 states needs"):
        PottsModel.from_arrays(arrays, source="m.npz")
    monkeypatch.setattr("logzbench.utils.devices.available_memory", lambda device="cpu": int(extra / 0.8) + 1)
    assert torch.equal(PottsModel.from_arrays(arrays, source="m.npz").J, m.J)


def test_npz_arrays_round_trip_and_refusals():
    m = PottsModel.random(3, 4, scale=0.5, field_scale=0.2, seed=2)
    m.data_mean = torch.full((3, 4), 0.25, dtype=torch.float64)
    back = PottsModel.from_arrays({**m.to_arrays(), "model_type": np.array("potts")}, source="m.npz")
    assert torch.equal(back.J, m.J) and torch.equal(back.data_mean, m.data_mean)
    J = m.to_arrays()["J"].copy()
    J[0, 1, 0, 0] += 1.0
    with pytest.raises(ModelFileError, match=r"m.npz: 'J' is not symmetric"):
        PottsModel.from_arrays({"h": m.to_arrays()["h"], "J": J}, source="m.npz")
    J = m.to_arrays()["J"].copy()
    J[1, 1, 0, 0] = 1.0
    with pytest.raises(ModelFileError, match="diagonal blocks"):
        PottsModel.from_arrays({"h": m.to_arrays()["h"], "J": J}, source="m.npz")
    r = PottsRBM.random(3, 4, 2, seed=0)
    rb = PottsRBM.from_arrays({**r.to_arrays(), "model_type": np.array("potts-rbm")}, source="r.npz")
    assert torch.equal(rb.W, r.W)
    with pytest.raises(ModelFileError, match=r"r.npz: 'visible_bias' has shape"):
        PottsRBM.from_arrays({**r.to_arrays(), "visible_bias": np.zeros((3, 3))}, source="r.npz")


# --------------------------------------------------------------------------- trainers
def _toy_alignment(n: int = 600):
    true = PottsModel.random(5, 3, scale=0.8, field_scale=0.8, seed=2)
    return exact_samples(true, n, seed=5)


def test_train_potts_improves_pseudo_likelihood():
    x = _toy_alignment()
    model, hist = train_potts(x[:500], x[500:], n_iter=5)
    assert [h["epoch"] for h in hist] == list(range(6))
    assert hist[-1]["train_pseudo_log_likelihood"] > hist[0]["train_pseudo_log_likelihood"] + 0.5
    assert hist[-1]["test_log_likelihood"] > hist[0]["test_log_likelihood"] + 0.5
    assert model.data_mean is not None and model.data_mean.shape == (5, 3)
    assert pseudo_log_likelihood(model, x[:500]) == pytest.approx(hist[-1]["train_pseudo_log_likelihood"])
    with pytest.raises(ValueError, match="n_states=2 allows 0..1"):
        train_potts(x, n_states=2, n_iter=1)


def test_train_potts_rbm_improves_log_likelihood():
    x = _toy_alignment()
    model, hist = train_potts_rbm(x[:500], x[500:], n_hidden=6, n_epochs=6, learning_rate=0.03, batch_size=50, seed=1)
    assert len(hist) == 7 and hist[0]["epoch"] == 0
    assert hist[-1]["train_log_likelihood"] > hist[0]["train_log_likelihood"] + 0.1
    assert model.data_mean is not None and model.n_states == 3
    again, _ = train_potts_rbm(x[:500], n_hidden=6, n_epochs=1, learning_rate=0.03, batch_size=50, seed=1)
    once, _ = train_potts_rbm(x[:500], n_hidden=6, n_epochs=1, learning_rate=0.03, batch_size=50, seed=1)
    assert torch.equal(again.W, once.W)
    with pytest.raises(ValueError, match="method must be"):
        train_potts_rbm(x, method="pt")
