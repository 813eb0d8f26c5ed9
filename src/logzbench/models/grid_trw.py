"""Tree-reweighted belief propagation (TRW-BP) on a grid MRF and the mixture-of-trees reference
built from it (discriminance-sampling paper, Liu, Peng, Ihler & Fisher 2015, Sec. 6, "MRF on
10 x 10 Grid", Fig. 2(c): "a mixture of trees constructed from the reparameterization obtained
from tree reweighted belief propagation (TRBP) (Wainwright et al., 2005).  The edge appearance
probabilities in TRBP are set by assigning uniform weights to a random set of spanning trees").

References
----------
M. J. Wainwright, T. S. Jaakkola and A. S. Willsky (2005), "A new class of upper bounds on the
log partition function", IEEE Trans. Inf. Theory 51(7):2313-2335.

Q. Liu, J. Peng, A. Ihler and J. Fisher III (2015), "Estimating the partition function by
discriminance sampling", UAI.

Conventions
-----------
* Sites of an ``H x W`` grid are numbered row-major, ``s = r * W + c``.
* Edges are numbered: first the ``H (W-1)`` horizontal edges ``(r, c) -- (r, c+1)`` row-major
  (index ``r (W-1) + c``), then the ``(H-1) W`` vertical edges ``(r, c) -- (r+1, c)``
  row-major (index ``H (W-1) + r W + c``).  Every edge ``e`` is stored as ``(src[e], dst[e])``
  with ``src[e] < dst[e]``; pairwise tables are indexed ``[x_src, x_dst]``, which for the grid
  is exactly the ``[x_(r,c), x_(r,c+1)]`` / ``[x_(r,c), x_(r+1,c)]`` layout of
  :class:`~logzbench.models.grid.GridMRF`'s ``theta_h`` / ``theta_v``.
* The MRF enters TRW through its raw tables: ``log f(x) = sum_s theta_s(x_s) + sum_st
  theta_st(x_s, x_t)`` holds exactly (no additive constant), so the TRW upper bound is a
  bound on ``log Z`` of the same ``f`` as :meth:`GridMRF.exact_log_z`.

Contents
--------
* :func:`grid_edges`: the edge list in the order above.
* :func:`random_spanning_trees`: uniform-random-weight minimum spanning trees of the grid
  (``scipy.sparse.csgraph.minimum_spanning_tree``), extended until every edge is covered.
* :func:`edge_appearance_probabilities`: ``rho_e`` under uniform weights on the trees.
* :func:`trw_bp`: damped, synchronous, log-space TRW message passing on any pairwise model
  with ``K`` states per site; returns pseudo-marginals and the TRW upper bound (a
  :class:`TRWResult`).
* :class:`TreeMixtureReference`: ``p0(x) = (1/T) sum_T p_T(x)``, each ``p_T`` a directed tree
  distribution built from the pseudo-marginals; exact sampling and normalised ``log_prob``
  (same interface as :class:`~logzbench.models.grid.FactorialReference`).
* :func:`trw_mixture`: all of the above for a :class:`~logzbench.models.grid.GridMRF`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse.csgraph import breadth_first_order, connected_components, minimum_spanning_tree

from ..kernels import uniform
from .grid import GridMRF
from .grid_reference import _states_like

__all__ = [
    "TRWResult",
    "TreeMixtureReference",
    "edge_appearance_probabilities",
    "grid_edges",
    "random_spanning_trees",
    "trw_bp",
    "trw_mixture",
]


def _check_grid_size(height, width) -> tuple[int, int]:
    if int(height) != height or int(width) != width or height < 1 or width < 1:
        raise ValueError(f"grid size must be positive integers, got {height}x{width}")
    return int(height), int(width)


def grid_edges(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Endpoints of the 4-neighbour edges of an ``H x W`` grid (order: module docstring).

    Returns
    -------
    src, dst : np.ndarray of int64, shape (E,)
        ``E = H (W-1) + (H-1) W``; row-major site indices with ``src < dst``.
    """
    H, W = _check_grid_size(height, width)
    site = np.arange(H * W, dtype=np.int64).reshape(H, W)
    src = np.concatenate([site[:, :-1].reshape(-1), site[:-1, :].reshape(-1)])
    dst = np.concatenate([site[:, 1:].reshape(-1), site[1:, :].reshape(-1)])
    return src, dst


def _as_rng(generator_or_seed) -> np.random.Generator:
    if isinstance(generator_or_seed, np.random.Generator):
        return generator_or_seed
    if isinstance(generator_or_seed, (bool, np.bool_)) or not isinstance(generator_or_seed, (int, np.integer)):
        raise ValueError(f"seed must be an int or a numpy.random.Generator, got {generator_or_seed!r}")
    return np.random.default_rng(int(generator_or_seed))


def _edge_index(src: np.ndarray, dst: np.ndarray, n_sites: int):
    """A function mapping endpoint pairs (either orientation) to edge indices."""
    keys = src * n_sites + dst
    order = np.argsort(keys)
    sorted_keys = keys[order]

    def lookup(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        k = np.minimum(a, b) * n_sites + np.maximum(a, b)
        pos = np.searchsorted(sorted_keys, k)
        if np.any(pos >= len(sorted_keys)) or np.any(sorted_keys[np.minimum(pos, len(sorted_keys) - 1)] != k):
            raise ValueError("pair of sites is not an edge of the graph")
        return order[pos]

    return lookup


def random_spanning_trees(height: int, width: int, n_trees: int, generator_or_seed=0) -> list[np.ndarray]:
    """Random spanning trees of the ``H x W`` grid graph.

    Each tree is the minimum spanning tree (``scipy.sparse.csgraph.minimum_spanning_tree``) of
    the grid with i.i.d. ``U[1, 2)`` edge weights.  After the first ``n_trees`` trees, while
    some edge lies in no tree, another tree is added whose weights are ``U[1, 2)`` on the
    edges not yet covered and ``U[2, 3)`` on the covered ones, so uncovered edges are taken
    first (the lightest uncovered edge always enters the tree, so this terminates).  Hence
    the result may hold more than ``n_trees`` trees and every edge appearance probability is
    positive, as TRW requires.

    Parameters
    ----------
    height, width : int
    n_trees : int >= 1
        Number of random trees drawn before the covering step.
    generator_or_seed : int or numpy.random.Generator
        An int seeds ``numpy.random.default_rng(seed)``; the same seed gives the same trees.

    Returns
    -------
    list of np.ndarray of int64
        One sorted array of ``H W - 1`` edge indices per tree (edge order: :func:`grid_edges`).
    """
    H, W = _check_grid_size(height, width)
    if isinstance(n_trees, (bool, np.bool_)) or int(n_trees) != n_trees or n_trees < 1:
        raise ValueError(f"n_trees must be an integer >= 1, got {n_trees!r}")
    rng = _as_rng(generator_or_seed)
    n = H * W
    src, dst = grid_edges(H, W)
    E = len(src)
    if E == 0:  # one site: the only spanning tree has no edges
        return [np.zeros(0, dtype=np.int64) for _ in range(int(n_trees))]
    lookup = _edge_index(src, dst, n)

    def mst(weights: np.ndarray) -> np.ndarray:
        # Weights are >= 1, so no edge is dropped as an explicit zero of the sparse matrix.
        g = sp.coo_matrix((weights, (src, dst)), shape=(n, n)).tocsr()
        t = minimum_spanning_tree(g).tocoo()
        edges = np.sort(lookup(t.row, t.col))
        if len(edges) != n - 1:  # the grid is connected, so this cannot happen
            raise RuntimeError(f"spanning tree has {len(edges)} edges, expected {n - 1}")
        return edges

    trees = [mst(1.0 + rng.random(E)) for _ in range(int(n_trees))]
    covered = np.zeros(E, dtype=bool)
    for t in trees:
        covered[t] = True
    while not covered.all():
        t = mst(np.where(covered, 2.0, 1.0) + rng.random(E))
        covered[t] = True
        trees.append(t)
    return trees


def edge_appearance_probabilities(trees, n_edges: int) -> np.ndarray:
    """``rho_e = #{trees containing e} / #trees`` (uniform weights over the trees).

    Returns
    -------
    np.ndarray of float64, shape (n_edges,)
        For spanning trees of a graph with ``N`` sites, ``sum_e rho_e = N - 1``.
    """
    trees = list(trees)
    if len(trees) == 0:
        raise ValueError("need at least one tree")
    counts = np.zeros(int(n_edges), dtype=np.float64)
    for t in trees:
        t = np.asarray(t, dtype=np.int64)
        if len(np.unique(t)) != len(t) or (len(t) and (t.min() < 0 or t.max() >= n_edges)):
            raise ValueError("each tree must be a set of distinct edge indices in [0, n_edges)")
        counts[t] += 1.0
    return counts / len(trees)


# ---------------------------------------------------------------------- TRW-BP
def _lse(a: np.ndarray, axis: int) -> np.ndarray:
    m = a.max(axis=axis, keepdims=True)
    return np.squeeze(m, axis=axis) + np.log(np.exp(a - m).sum(axis=axis))


@dataclass
class TRWResult:
    """Output of :func:`trw_bp`.

    Attributes
    ----------
    log_tau_node : np.ndarray, shape (N, K)
        Normalised log pseudo-marginals ``log tau_s(x_s)``.
    log_tau_edge : np.ndarray, shape (E, K, K)
        Normalised log pairwise pseudo-marginals ``log tau_st(x_src, x_dst)``.
    log_messages : np.ndarray, shape (2E, K)
        Final normalised log messages: row ``e`` is ``src[e] -> dst[e]`` (a function of
        ``x_dst``), row ``E + e`` is ``dst[e] -> src[e]``.
    log_z_bound : float
        ``sum_s H(tau_s) - sum_st rho_st I_st(tau_st) + <theta, tau>``; an upper bound on
        ``log Z`` at a fixed point (see :func:`trw_bp`).
    n_iter : int
    converged : bool
    max_delta : float
        Largest change of a log-message in the last iteration.
    """

    log_tau_node: np.ndarray
    log_tau_edge: np.ndarray
    log_messages: np.ndarray
    log_z_bound: float
    n_iter: int
    converged: bool
    max_delta: float


def _check_options(damping, tol, max_iter) -> None:
    if not (isinstance(damping, (int, float, np.floating, np.integer)) and 0.0 < float(damping) <= 1.0):
        raise ValueError(f"damping must be in (0, 1] (1 = undamped), got {damping!r}")
    if not (isinstance(tol, (int, float, np.floating, np.integer)) and math.isfinite(float(tol)) and float(tol) > 0.0):
        raise ValueError(f"tol must be finite and > 0, got {tol!r}")
    if isinstance(max_iter, (bool, np.bool_)) or int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")


def trw_bp(
    theta_node,
    theta_edge,
    src,
    dst,
    rho,
    damping: float = 0.5,
    tol: float = 1e-10,
    max_iter: int = 10_000,
    warn: bool = True,
) -> TRWResult:
    """Tree-reweighted belief propagation (Wainwright, Jaakkola & Willsky 2005) in log space.

    For the model ``log f(x) = sum_s theta_s(x_s) + sum_st theta_st(x_s, x_t)`` and edge
    appearance probabilities ``rho_st > 0`` all messages are updated in parallel,

        m_ts(x_s) ∝ sum_{x_t} exp(theta_st(x_s, x_t) / rho_st + theta_t(x_t))
                     prod_{v in N(t) \\ s} m_vt(x_t)^rho_vt / m_st(x_t)^(1 - rho_st),

    i.e. ``log m_ts(x_s) = LSE_{x_t}[theta_st / rho_st + theta_t + sum_{v in N(t)} rho_vt
    log m_vt - log m_st]``, then damped in log space, ``log m <- (1 - damping) log m + damping
    log m_new``, and normalised (``sum_x m(x) = 1``).  Iteration stops when the largest change
    of a log-message is below ``tol`` or after ``max_iter`` iterations.  Pseudo-marginals:

        tau_s(x_s) ∝ exp(theta_s) prod_{v in N(s)} m_vs^rho_vs,
        tau_st ∝ exp(theta_st / rho_st + theta_s + theta_t)
                 [prod_{v in N(s)} m_vs(x_s)^rho_vs / m_ts(x_s)] [prod_{v in N(t)} m_vt(x_t)^rho_vt / m_st(x_t)].

    The returned ``log_z_bound = sum_s H(tau_s) - sum_st rho_st I_st(tau_st) + <theta, tau>``
    (``I_st`` the mutual information of ``tau_st`` under its own marginals) is the TRW
    variational value.  It is an upper bound on ``log Z`` when ``rho`` is a convex
    combination of spanning-tree indicators and the messages are at a fixed point (where the
    pseudo-marginals are locally consistent and optimal); away from a fixed point it is only
    an approximation.

    Parameters
    ----------
    theta_node : array-like, shape (N, K)
    theta_edge : array-like, shape (E, K, K)
        Indexed ``[x_src, x_dst]``.
    src, dst : array-like of int, shape (E,)
        Edge endpoints, ``src != dst``.
    rho : array-like, shape (E,)
        Edge appearance probabilities in ``(0, 1]``.
    damping : float in (0, 1]
        Weight of the new message (1 = undamped).
    tol : float > 0
    max_iter : int >= 1
    warn : bool
        Issue a ``RuntimeWarning`` if the iteration did not converge.

    Returns
    -------
    TRWResult
    """
    _check_options(damping, tol, max_iter)
    th_n = np.asarray(theta_node, dtype=np.float64)
    th_e = np.asarray(theta_edge, dtype=np.float64)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    rho = np.asarray(rho, dtype=np.float64)
    if th_n.ndim != 2 or th_n.shape[0] < 1 or th_n.shape[1] < 1:
        raise ValueError(f"theta_node must have shape (N, K), got {th_n.shape}")
    N, K = th_n.shape
    E = len(src)
    if th_e.shape != (E, K, K) or dst.shape != (E,) or rho.shape != (E,) or src.ndim != 1:
        raise ValueError(
            f"theta_edge must have shape (E, K, K) = ({E}, {K}, {K}) and src, dst, rho shape "
            f"({E},); got {th_e.shape}, {src.shape}, {dst.shape}, {rho.shape}"
        )
    if not (np.isfinite(th_n).all() and np.isfinite(th_e).all()):
        raise ValueError("TRW parameters must be finite")
    if E and (src.min() < 0 or dst.min() < 0 or src.max() >= N or dst.max() >= N or np.any(src == dst)):
        raise ValueError("edge endpoints must be distinct sites in [0, N)")
    if E and not (np.all(rho > 0.0) and np.all(rho <= 1.0 + 1e-12)):
        raise ValueError("edge appearance probabilities must lie in (0, 1] (every edge in some tree)")

    damping = float(damping)
    # directed edge d: tail t -> head s; d < E is src -> dst, d >= E is dst -> src
    tail = np.concatenate([src, dst])
    head = np.concatenate([dst, src])
    rev = np.concatenate([np.arange(E, 2 * E), np.arange(E)])
    rho_d = np.concatenate([rho, rho])
    # pairwise table of d indexed [x_tail, x_head], divided by rho
    pair_d = np.concatenate([th_e, th_e.transpose(0, 2, 1)]) / rho_d[:, None, None]
    # incoming[s, d] = rho_d if head(d) == s: the rho-weighted sum of incoming log-messages
    incoming = sp.csr_matrix((rho_d, (head, np.arange(2 * E))), shape=(N, 2 * E))

    logm = np.full((2 * E, K), -math.log(K))
    n_iter, delta, converged = 0, 0.0, E == 0
    while not converged and n_iter < int(max_iter):
        n_iter += 1
        B = th_n + incoming @ logm  # (N, K)
        pre = B[tail] - logm[rev]  # (2E, K) over x_tail
        new = _lse(pair_d + pre[:, :, None], axis=1)  # (2E, K) over x_head
        new -= _lse(new, axis=1)[:, None]
        nxt = (1.0 - damping) * logm + damping * new
        nxt -= _lse(nxt, axis=1)[:, None]
        delta = float(np.abs(nxt - logm).max())
        logm = nxt
        converged = delta < tol
    if not converged and warn:
        warnings.warn(
            f"TRW-BP did not converge in {n_iter} iterations (last max change of a log-message "
            f"{delta:.3g} > tol {tol:g}); the TRW value is not guaranteed to bound log Z",
            RuntimeWarning,
            stacklevel=2,
        )

    B = th_n + incoming @ logm
    log_tau_node = B - _lse(B, axis=1)[:, None]
    a = B[src] - logm[E:]  # at src, excluding the message dst -> src   (E, K)
    b = B[dst] - logm[:E]  # at dst, excluding the message src -> dst   (E, K)
    le = th_e / rho[:, None, None] + a[:, :, None] + b[:, None, :]
    if E:
        le = le - _lse(le.reshape(E, -1), axis=1)[:, None, None]
    log_tau_edge = le

    tau_n = np.exp(log_tau_node)
    tau_e = np.exp(log_tau_edge)
    ent_node = -(tau_n * log_tau_node).sum()
    if E:
        lmu = _lse(log_tau_edge, axis=2)  # marginal over x_src
        lmv = _lse(log_tau_edge, axis=1)  # marginal over x_dst
        mi = (tau_e * (log_tau_edge - lmu[:, :, None] - lmv[:, None, :])).sum(axis=(1, 2))
    else:
        mi = np.zeros(0)
    energy = (th_n * tau_n).sum() + (th_e * tau_e).sum()
    bound = float(ent_node - (rho * mi).sum() + energy)
    return TRWResult(log_tau_node, log_tau_edge, logm, bound, n_iter, bool(converged), delta)


# ---------------------------------------------------------------------- mixture of trees
class TreeMixtureReference:
    """``p0(x) = (1/T) sum_T p_T(x)``: a uniform mixture of tree-structured distributions on a grid.

    Each tree is rooted at site 0 and ``p_T`` is the directed tree distribution

        p_T(x) = tau_0(x_0) prod_{(s -> t) in T} tau_st(x_s, x_t) / sum_{x_t'} tau_st(x_s, x_t'),

    so ``p_T`` (and ``p0``) is exactly normalised even where the pseudo-marginals are not
    exactly locally consistent (where they are, ``p_T`` is the tree distribution with
    marginals ``tau_s`` and ``tau_st``).  Sampling is exact: a tree uniformly per sample,
    then ancestral sampling in breadth-first order.

    Parameters
    ----------
    shape : (int, int)
        ``(H, W)``.
    trees : list of array-like of int
        Edge indices (order: :func:`grid_edges`) of each spanning tree.
    log_tau_node : array-like, shape (H W, 2)
        Log pseudo-marginals (row-major sites); only the root's (site 0) enters ``p0``.
    log_tau_edge : array-like, shape (E, 2, 2)
        Log pairwise pseudo-marginals indexed ``[x_src, x_dst]``.
    name : str
    log_z_bound : float, optional
    n_iter : int, optional
    converged : bool, optional
    rho : array-like, shape (E,), optional
        Edge appearance probabilities (default: from ``trees``).
    device : torch device, optional

    Attributes
    ----------
    name, log_z_bound, n_iter, converged
    rho : np.ndarray, shape (E,)
    n_trees : int
    trees : list of np.ndarray
    tau_node : torch.Tensor, shape (H W, 2), float64
    tau_edge : torch.Tensor, shape (E, 2, 2), float64
    edges : np.ndarray, shape (E, 2)
        ``(src, dst)`` of every edge.
    """

    def __init__(
        self,
        shape,
        trees,
        log_tau_node,
        log_tau_edge,
        name: str = "trw",
        log_z_bound: float | None = None,
        n_iter: int | None = None,
        converged: bool | None = None,
        rho=None,
        device=None,
    ):
        H, W = _check_grid_size(*shape)
        N = H * W
        src, dst = grid_edges(H, W)
        E = len(src)
        ln = np.asarray(
            log_tau_node.detach().cpu() if isinstance(log_tau_node, torch.Tensor) else log_tau_node, dtype=np.float64
        )
        le = np.asarray(
            log_tau_edge.detach().cpu() if isinstance(log_tau_edge, torch.Tensor) else log_tau_edge, dtype=np.float64
        )
        if ln.shape != (N, 2) or le.shape != (E, 2, 2):
            raise ValueError(
                f"pseudo-marginals of a {H}x{W} grid must have shapes ({N}, 2) and ({E}, 2, 2), "
                f"got {ln.shape} and {le.shape}"
            )
        if np.isnan(ln).any() or np.isnan(le).any() or np.isposinf(ln).any() or np.isposinf(le).any():
            raise ValueError("log pseudo-marginals must not be NaN or +inf")
        trees = [np.sort(np.asarray(t, dtype=np.int64).reshape(-1)) for t in trees]
        if len(trees) == 0:
            raise ValueError("need at least one tree")
        self.shape = (H, W)
        self.name = name
        self.log_z_bound = log_z_bound
        self.n_iter = n_iter
        self.converged = converged
        self.trees = trees
        self.n_trees = len(trees)
        self.edges = np.stack([src, dst], axis=1)
        self.rho = edge_appearance_probabilities(trees, E) if rho is None else np.asarray(rho, dtype=np.float64).copy()
        self.device = torch.device(device) if device is not None else torch.device("cpu")

        log_node = ln - _lse(ln, axis=1)[:, None]
        # order[T, k]: k-th site in breadth-first order (order[T, 0] = root = 0);
        # parent[T, k]: its parent (k >= 1); log_cond[T, k, x_parent, x_child] for k >= 1.
        order = np.zeros((self.n_trees, N), dtype=np.int64)
        parent = np.zeros((self.n_trees, N), dtype=np.int64)
        log_cond = np.zeros((self.n_trees, N, 2, 2))
        lookup = _edge_index(src, dst, N) if E else None
        for i, t in enumerate(trees):
            if len(t) != N - 1 or len(np.unique(t)) != len(t) or (len(t) and (t.min() < 0 or t.max() >= E)):
                raise ValueError(f"tree {i} is not a set of {N - 1} distinct edge indices in [0, {E})")
            g = sp.coo_matrix((np.ones(len(t)), (src[t], dst[t])), shape=(N, N)).tocsr()
            if connected_components(g, directed=False)[0] != 1:
                raise ValueError(f"tree {i} does not span the grid")
            bfs, pred = breadth_first_order(g, 0, directed=False, return_predecessors=True)
            order[i] = bfs
            if N > 1:
                child = bfs[1:]
                par = pred[child]
                e = lookup(par, child)
                tab = le[e].copy()  # [x_src, x_dst]
                flip = src[e] != par  # parent is dst: transpose to [x_parent, x_child]
                tab[flip] = tab[flip].transpose(0, 2, 1)
                parent[i, 1:] = par
                log_cond[i, 1:] = tab - _lse(tab, axis=2)[:, :, None]
        dev = self.device
        self._log_root = torch.as_tensor(log_node[0], dtype=torch.float64, device=dev)
        self._order = torch.as_tensor(order, device=dev)
        self._parent = torch.as_tensor(parent, device=dev)
        self._log_cond = torch.as_tensor(log_cond, dtype=torch.float64, device=dev)
        self.tau_node = torch.as_tensor(np.exp(log_node), dtype=torch.float64, device=dev)
        self.tau_edge = torch.as_tensor(
            np.exp(le - _lse(le.reshape(E, -1), axis=1)[:, None, None]) if E else np.zeros((0, 2, 2)),
            dtype=torch.float64,
            device=dev,
        )

    @property
    def n_sites(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def marginals(self) -> torch.Tensor:
        """Pseudo-marginals ``tau_s(x_s = 1)``, shape ``(H, W)`` (the mixture's marginals where
        the pseudo-marginals are locally consistent)."""
        return self.tau_node[:, 1].reshape(self.shape)

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` exact independent samples of ``p0``, float64 0./1., shape ``(n, H, W)``.

        Uses ``1 + H W`` uniforms per sample from ``generator`` (via
        :func:`logzbench.kernels.uniform`): one picks the tree, the rest drive ancestral
        sampling.
        """
        if isinstance(n, bool) or int(n) != n or n < 1:
            raise ValueError(f"number of samples must be a positive integer, got {n!r}")
        n = int(n)
        dev = self.device
        u = uniform((n, 1 + self.n_sites), generator, dev, torch.float64)
        tree = torch.clamp((u[:, 0] * self.n_trees).long(), max=self.n_trees - 1)
        x = torch.zeros(n, self.n_sites, dtype=torch.float64, device=dev)
        x[:, 0] = (u[:, 1] < self._log_root[1].exp()).to(torch.float64)
        rows = torch.arange(n, device=dev)
        p1 = self._log_cond[..., 1].exp()  # (T, N, 2): P(child = 1 | parent)
        for k in range(1, self.n_sites):
            child = self._order[tree, k]
            par = self._parent[tree, k]
            xp = x[rows, par].long()
            x[rows, child] = (u[:, 1 + k] < p1[tree, k, xp]).to(torch.float64)
        return x.reshape(n, *self.shape)

    def log_prob_trees(self, x) -> torch.Tensor:
        """``log p_T(x)`` for every tree, float64, shape ``(n, n_trees)``."""
        x = _states_like(x, self.shape, self.device)
        xf = x.reshape(len(x), -1).long()
        out = torch.empty(len(x), self.n_trees, dtype=torch.float64, device=self.device)
        ks = torch.arange(1, self.n_sites, device=self.device)
        for i in range(self.n_trees):
            lp = self._log_root[xf[:, 0]]
            if self.n_sites > 1:
                xc = xf[:, self._order[i, 1:]]
                xp = xf[:, self._parent[i, 1:]]
                lp = lp + self._log_cond[i, ks[None, :], xp, xc].sum(dim=1)
            out[:, i] = lp
        return out

    def log_prob(self, x) -> torch.Tensor:
        """Normalised ``log p0(x) = logsumexp_T log p_T(x) - log T`` per state, float64, shape ``(n,)``.

        Accepts ``(n, H, W)`` or ``(n, H W)`` 0/1 states.
        """
        return torch.logsumexp(self.log_prob_trees(x), dim=1) - math.log(self.n_trees)


def trw_mixture(
    mrf: GridMRF, n_trees: int = 10, seed=0, damping: float = 0.5, tol: float = 1e-10, max_iter: int = 10_000
) -> TreeMixtureReference:
    """TRW-BP on ``mrf`` with ``rho`` from random spanning trees, and the mixture of those trees.

    Parameters
    ----------
    mrf : GridMRF
    n_trees : int >= 1
        Random spanning trees (:func:`random_spanning_trees`; more are added if some edge is
        in none of them).  Uniform weights over the trees give ``rho``.
    seed : int or numpy.random.Generator
        Seeds the spanning trees (same seed, same trees).
    damping, tol, max_iter
        See :func:`trw_bp`; a ``RuntimeWarning`` is issued if TRW-BP does not converge.

    Returns
    -------
    TreeMixtureReference
        ``name = "trw"``, ``log_z_bound`` the TRW upper bound on ``log Z`` (valid at the
        fixed point), ``n_iter``, ``converged``, ``rho``, ``n_trees``, ``shape``; on
        ``mrf.device``.
    """
    if not isinstance(mrf, GridMRF):
        raise ValueError(f"trw_mixture needs a GridMRF, got {type(mrf).__name__}")
    _check_options(damping, tol, max_iter)
    H, W = mrf.shape
    trees = random_spanning_trees(H, W, n_trees, seed)
    src, dst = grid_edges(H, W)
    rho = edge_appearance_probabilities(trees, len(src))
    th_n = mrf.theta_unary.detach().cpu().numpy().reshape(H * W, 2)
    th_e = np.concatenate(
        [mrf.theta_h.detach().cpu().numpy().reshape(-1, 2, 2), mrf.theta_v.detach().cpu().numpy().reshape(-1, 2, 2)]
    )
    res = trw_bp(th_n, th_e, src, dst, rho, damping=damping, tol=tol, max_iter=max_iter, warn=False)
    if not res.converged:
        warnings.warn(
            f"TRW-BP did not converge in {res.n_iter} iterations (last max change of a log-message "
            f"{res.max_delta:.3g} > tol {tol:g}); log_z_bound is not guaranteed to bound log Z",
            RuntimeWarning,
            stacklevel=2,
        )
    return TreeMixtureReference(
        (H, W),
        trees,
        res.log_tau_node,
        res.log_tau_edge,
        name="trw",
        log_z_bound=res.log_z_bound,
        n_iter=res.n_iter,
        converged=res.converged,
        rho=rho,
        device=mrf.device,
    )
