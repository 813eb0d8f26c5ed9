"""Trainers of the categorical families: the Potts RBM (:func:`train_potts_rbm`, CD / PCD) and the
pairwise Potts model (:func:`train_potts`, pseudo-likelihood maximisation as in plmDCA).

Both take integer rows ``(n, L)`` of states ``0..q-1`` and return ``(model, history)``, with the model's
``data_mean`` set to the site frequencies of the training rows (the base-rate initial distribution of
its annealing path) and ``history`` one dict per epoch (key ``epoch``; epoch 0 is the initial model).
Defaults are declared torch-free in :mod:`logzbench.training.hyperparams` (``POTTS_RBM``, ``POTTS``).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from ..models.potts import PottsModel, base_rate_logits, site_frequencies
from ..models.potts_rbm import PottsRBM, _hidden_is_smaller
from .hyperparams import REQUIRED, PottsParams, PottsRBMParams, takes
from .trainer import TrainingDivergedError

__all__ = ["pseudo_log_likelihood", "train_potts", "train_potts_rbm"]


def _rows(x, n_states: int | None, what: str, L: int | None = None) -> tuple[np.ndarray, int]:
    """Integer rows ``(n, L)`` as an int64 array and ``q`` (``n_states``, default max + 1)."""
    arr = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{what} has shape {arr.shape}; expected a non-empty 2-D array of states (rows x sites)")
    if L is not None and arr.shape[1] != L:
        raise ValueError(f"{what} has {arr.shape[1]} sites; the training rows have {L}")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            raise ValueError(f"{what} must hold integer states 0..q-1")
    arr = arr.astype(np.int64)
    if arr.min() < 0:
        raise ValueError(f"{what} holds a negative state ({int(arr.min())}); states are 0..q-1")
    q = int(arr.max()) + 1 if n_states is None else int(n_states)
    if q < 2:
        raise ValueError(f"a categorical model needs at least 2 states per site; got n_states={q}")
    if arr.max() >= q:
        raise ValueError(f"{what} holds state {int(arr.max())}; n_states={q} allows 0..{q - 1}")
    return arr, q


def _positive_int(name: str, v) -> int:
    if isinstance(v, bool) or int(v) != v or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


def pseudo_log_likelihood(model, x) -> float:
    """Mean over rows of ``sum_i log p(x_i | x_-i)`` under a :class:`PottsModel` or :class:`PottsRBM`
    (exact conditionals), float."""
    x = model.as_rows(x)
    n, L = x.shape[0], model.n_visible
    if isinstance(model, PottsRBM):
        V = model.one_hot(x, torch.float64)
        W = model.W.double()  # (L, q, H)
        pre = V @ model.W_flat.double() + model.hidden_bias.double()  # (n, H)
        a = model.visible_bias.double()
        total = torch.zeros(n, dtype=torch.float64, device=x.device)
        for i in range(L):
            pre_i = pre - W[i, x[:, i]]  # (n, H): site i removed
            logits = a[i] + F.softplus(pre_i.unsqueeze(1) + W[i].unsqueeze(0)).sum(dim=2)  # (n, q)
            total += torch.log_softmax(logits, dim=1).gather(1, x[:, i : i + 1]).squeeze(1)
        return float(total.mean())
    total = torch.zeros(n, dtype=torch.float64, device=x.device)
    for i in range(L):
        logits = model.conditional_logits(x, i)
        total += torch.log_softmax(logits, dim=1).gather(1, x[:, i : i + 1]).squeeze(1)
    return float(total.mean())


def _exact_ll(model, x, max_bits: int) -> float:
    """Mean exact log-likelihood of rows ``x`` when ``log Z`` is enumerable within ``2^max_bits`` states
    (NaN otherwise)."""
    L, q = model.n_visible, model.n_states
    bits = L * math.log2(q)
    if isinstance(model, PottsRBM) and _hidden_is_smaller(L, q, model.n_hidden):
        bits = model.n_hidden
    if bits > max_bits:
        return float("nan")
    return float((model.log_unnormalized_marginal(x) - model.exact_log_z()).mean())


def _evaluate(model, sets: dict, max_bits: int) -> dict:
    out = {}
    for name, x in sets.items():
        out[f"{name}_pseudo_log_likelihood"] = pseudo_log_likelihood(model, x)
        out[f"{name}_log_likelihood"] = _exact_ll(model, x, max_bits)
    return out


@takes(PottsRBMParams, ("train", REQUIRED), ("test", None))
def train_potts_rbm(train, test, hp: PottsRBMParams) -> tuple[PottsRBM, list[dict]]:
    """Train a :class:`~logzbench.models.potts_rbm.PottsRBM` by contrastive divergence (``method="cd"``:
    chains restarted at the batch) or persistent CD (``"pcd"``), ``k`` block-Gibbs sweeps per update, with
    Adam on the log-likelihood gradient (data statistics minus model statistics, hidden units averaged
    out) and an L2 ``weight_decay`` on ``W``.

    Parameters
    ----------
    train : array-like of int, shape (n, L)
        Training rows, states ``0..q-1``.
    test : array-like of int, shape (m, L), optional
        Held-out rows to monitor.
    family : str
        ``"potts-rbm"`` (passed by :func:`logzbench.training.train_model`; anything else is refused).
    n_hidden : int
    n_states : int, optional
        ``q``; default one more than the largest state in ``train``.
    method : {"cd", "pcd"}
    k : int
        Gibbs sweeps per update.
    learning_rate, batch_size, n_epochs, weight_decay, init_scale
        Adam's step, rows per update, passes over the data, L2 on ``W``, and the standard deviation of
        the initial weights (visible biases start at the base rate, hidden biases at 0).
    n_persistent_chains : int, optional
        PCD chains (default ``batch_size``).
    exact_ll_max_units : int
        Log the exact log-likelihood when the smaller layer has at most this many bits.
    eval_subsample : int
        Rows of each set evaluated per epoch.
    seed, device, progress

    Returns
    -------
    model : PottsRBM
        With ``data_mean`` the site frequencies of ``train``.
    history : list of dict
        One per epoch (0: the initial model): ``epoch``, ``seconds``, ``learning_rate``,
        ``train_pseudo_log_likelihood``, ``train_log_likelihood`` (NaN when not enumerable) and the
        same for ``test``.
    """
    if hp.family != "potts-rbm":
        raise ValueError(f"train_potts_rbm trains the potts-rbm family, not {hp.family!r}")
    if hp.method not in ("cd", "pcd"):
        raise ValueError(f"method must be 'cd' or 'pcd', got {hp.method!r}")
    n_hidden, k = _positive_int("n_hidden", hp.n_hidden), _positive_int("k", hp.k)
    batch_size = _positive_int("batch_size", hp.batch_size)
    n_epochs = int(hp.n_epochs)
    if n_epochs < 0:
        raise ValueError(f"n_epochs must be >= 0, got {n_epochs}")
    if not (hp.learning_rate > 0 and math.isfinite(hp.learning_rate)):
        raise ValueError(f"learning_rate must be a positive number, got {hp.learning_rate!r}")
    dev = torch.device(hp.device)
    arr, q = _rows(train, hp.n_states, "training data")
    n, L = arr.shape
    X = torch.as_tensor(arr, device=dev)
    sets = {"train": X[: int(hp.eval_subsample)]}
    if test is not None:
        tarr, _ = _rows(test, q, "test data", L)
        sets["test"] = torch.as_tensor(tarr[: int(hp.eval_subsample)], device=dev)
    g = torch.Generator(device=dev).manual_seed(int(hp.seed))
    freq = site_frequencies(X, q)
    W = torch.randn(L, q, n_hidden, generator=g, device=dev, dtype=torch.float32) * float(hp.init_scale)
    a = base_rate_logits(freq).to(torch.float32)
    a = a - a.mean(dim=1, keepdim=True)
    b = torch.zeros(n_hidden, device=dev)
    params = [W.requires_grad_(), a.requires_grad_(), b.requires_grad_()]
    opt = torch.optim.Adam(params, lr=float(hp.learning_rate))

    def snapshot() -> PottsRBM:
        return PottsRBM(W.detach(), a.detach(), b.detach(), device=dev, data_mean=freq)

    model = snapshot()
    history = [{"epoch": 0, "seconds": 0.0, "learning_rate": 0.0, **_evaluate(model, sets, hp.exact_ll_max_units)}]
    n_chains = (
        batch_size if hp.n_persistent_chains is None else _positive_int("n_persistent_chains", hp.n_persistent_chains)
    )
    chains = X[torch.randint(0, n, (n_chains,), generator=g, device=dev)] if hp.method == "pcd" else None
    epochs = range(1, n_epochs + 1)
    if hp.progress:
        from tqdm.auto import tqdm

        epochs = tqdm(epochs, desc=f"train Potts RBM {L}x{q}x{n_hidden} {hp.method.upper()}-{k}", unit="epoch")
    t0 = time.perf_counter()
    for epoch in epochs:
        perm = torch.randperm(n, generator=g, device=dev)
        for s in range(0, n, batch_size):
            batch = X[perm[s : s + batch_size]]
            path = model.annealing_path("uniform")
            neg = path.state_from_data(chains if hp.method == "pcd" else batch)
            for _ in range(k):
                neg = path.transition(neg, 1.0, g)
            if hp.method == "pcd":
                chains = neg.x
            Vp = model.one_hot(batch)
            ph_pos = torch.sigmoid(Vp @ model.W_flat + model.hidden_bias)
            ph_neg = torch.sigmoid(neg.pre_h)
            gW = (Vp.T @ ph_pos / Vp.shape[0] - neg.v.T @ ph_neg / neg.v.shape[0]).view(L, q, n_hidden)
            ga = (Vp.mean(0) - neg.v.mean(0)).view(L, q)
            gb = ph_pos.mean(0) - ph_neg.mean(0)
            W.grad = -(gW - float(hp.weight_decay) * W.detach())
            a.grad = -ga
            b.grad = -gb
            opt.step()
            if not all(bool(torch.isfinite(p).all()) for p in params):
                raise TrainingDivergedError(
                    f"Potts RBM training diverged in epoch {epoch} (NaN or inf parameters); lower learning_rate"
                )
            model = snapshot()
        history.append(
            {
                "epoch": epoch,
                "seconds": time.perf_counter() - t0,
                "learning_rate": float(hp.learning_rate),
                **_evaluate(model, sets, hp.exact_ll_max_units),
            }
        )
    return model, history


@takes(PottsParams, ("train", REQUIRED), ("test", None))
def train_potts(train, test, hp: PottsParams) -> tuple[PottsModel, list[dict]]:
    """Fit a pairwise :class:`~logzbench.models.potts.PottsModel` by pseudo-likelihood maximisation
    (plmDCA's objective, symmetric couplings optimised jointly): minimise

        - (1/n) sum_rows sum_i log p(x_i | x_-i) + l2 ||J||^2 / 2 + l2_fields ||h||^2 / 2

    over ``h`` and the couplings ``J_ij`` (``i < j``; the model stores both orders) with L-BFGS (strong
    Wolfe line search), one logged iteration per L-BFGS step.  The objective is convex and the start
    ``h = J = 0`` is fixed, so ``seed`` changes nothing (it is kept for the trainers' common interface).

    Parameters
    ----------
    train : array-like of int, shape (n, L)
    test : array-like of int, shape (m, L), optional
    family : str
        ``"potts"`` (passed by :func:`logzbench.training.train_model`; anything else is refused).
    n_states : int, optional
        ``q``; default one more than the largest state in ``train``.
    l2, l2_fields : float
        L2 penalties on the couplings (per pair, both orders counted once) and on the fields.
    n_iter : int
        L-BFGS iterations.
    exact_ll_max_bits : int
        Log the exact log-likelihood when ``L log2 q`` is at most this (it enumerates ``q^L`` states at
        every iteration: the default, 16, keeps that to 65,536).
    seed, device, progress

    Returns
    -------
    model : PottsModel
        With ``data_mean`` the site frequencies of ``train``.
    history : list of dict
        One per iteration (``epoch``; 0: the initial model): ``seconds``, ``objective``,
        ``train_pseudo_log_likelihood``, ``train_log_likelihood`` (NaN when not enumerable) and the
        same for ``test``.
    """
    if hp.family != "potts":
        raise ValueError(f"train_potts trains the potts family, not {hp.family!r}")
    n_iter = int(hp.n_iter)
    if n_iter < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    for name, v in (("l2", hp.l2), ("l2_fields", hp.l2_fields)):
        if not (v >= 0 and math.isfinite(v)):
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    dev = torch.device(hp.device)
    arr, q = _rows(train, hp.n_states, "training data")
    n, L = arr.shape
    X = torch.as_tensor(arr, device=dev)
    sets = {"train": X}
    if test is not None:
        tarr, _ = _rows(test, q, "test data", L)
        sets["test"] = torch.as_tensor(tarr, device=dev)
    freq = site_frequencies(X, q)
    V = F.one_hot(X, q).reshape(n, L * q).double()
    upper = torch.triu(torch.ones(L, L, dtype=torch.float64, device=dev), diagonal=1)[:, :, None, None]
    h = torch.zeros(L, q, dtype=torch.float64, device=dev, requires_grad=True)
    Jp = torch.zeros(L, L, q, q, dtype=torch.float64, device=dev, requires_grad=True)  # i<j part used

    def couplings() -> torch.Tensor:
        Ju = Jp * upper
        return Ju + Ju.permute(1, 0, 3, 2)

    def objective() -> torch.Tensor:
        J = couplings()
        Jm = J.permute(0, 2, 1, 3).reshape(L * q, L * q)
        logits = (V @ Jm).view(n, L, q) + h  # row r, site i: h_i + sum_j J[i, j, :, x_j]
        nll = -torch.log_softmax(logits, dim=2).gather(2, X.unsqueeze(2)).sum() / n
        return nll + 0.5 * hp.l2 * (Jp * upper).pow(2).sum() + 0.5 * hp.l2_fields * h.pow(2).sum()

    opt = torch.optim.LBFGS([h, Jp], lr=1.0, max_iter=1, history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = objective()
        loss.backward()
        return loss

    def snapshot() -> PottsModel:
        return PottsModel(h.detach(), couplings().detach(), device=dev, data_mean=freq)

    with torch.no_grad():
        obj0 = float(objective())
    model = snapshot()
    history = [{"epoch": 0, "seconds": 0.0, "objective": obj0, **_evaluate(model, sets, hp.exact_ll_max_bits)}]
    its = range(1, n_iter + 1)
    if hp.progress:
        from tqdm.auto import tqdm

        its = tqdm(its, desc=f"train Potts {L}x{q} (pseudo-likelihood)", unit="it")
    t0 = time.perf_counter()
    for it in its:
        opt.step(closure)
        with torch.no_grad():
            obj = float(objective())
        if not math.isfinite(obj) or not bool(torch.isfinite(Jp).all()):
            raise TrainingDivergedError(f"Potts pseudo-likelihood training diverged at iteration {it}")
        model = snapshot()
        row = {"epoch": it, "seconds": time.perf_counter() - t0, "objective": obj}
        history.append({**row, **_evaluate(model, sets, hp.exact_ll_max_bits)})
    return model, history
