"""Bradley-Terry maximum likelihood on per-pair counts: Newton fit, sandwich and bootstrap.

scipy is imported inside the functions that compute with it, not at the top: ``core.ranking``'s
labels, schemas and settings are read by the CLI and the report, which must start without loading
scipy (~0.5 s); the fits pay for it once, on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from arena_pipeline.core.ranking.logistic import sigmoid, softplus
from arena_pipeline.core.ranking.newton import NewtonResult, newton_minimize

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

#: Integer codes of the ``winner`` column.
OUTCOME_CODES: dict[str, int] = {"model_a": 0, "model_b": 1, "tie": 2, "both_bad": 3}

#: Ridge (on natural-log strengths, summed negative log-likelihood) used only in bootstrap
#: replicates, where resampling can leave a model without a win or a loss and its MLE at
#: infinity. It is a N(0, 1000^2) prior: it moves a well-determined rating by < 1e-4 points
#: and keeps a degenerate one finite (very low or high), which is what its interval shows.
BOOTSTRAP_RIDGE = 1e-6


@dataclass(frozen=True)
class PairCounts:
    """Battle outcomes aggregated per unordered pair of models.

    Attributes
    ----------
    n_models
        Models are indexed ``0 .. n_models - 1``.
    lo, hi
        Model indices of each pair, ``lo < hi``, shape (P,).
    counts
        Battles per pair and outcome, shape (P, 3): ``lo`` won, ``hi`` won, draw
        (``tie`` or ``both_bad``, each half a win for both sides).
    """

    n_models: int
    lo: np.ndarray
    hi: np.ndarray
    counts: np.ndarray

    @property
    def battles(self) -> np.ndarray:
        """Battles per pair, shape (P,)."""
        return self.counts.sum(axis=1)

    @property
    def score_lo(self) -> np.ndarray:
        """Wins of ``lo`` plus half the draws, shape (P,)."""
        return self.counts[:, 0] + 0.5 * self.counts[:, 2]

    @property
    def score_hi(self) -> np.ndarray:
        """Wins of ``hi`` plus half the draws, shape (P,)."""
        return self.counts[:, 1] + 0.5 * self.counts[:, 2]


def pair_index(a: np.ndarray, b: np.ndarray, n_models: int) -> tuple[np.ndarray, ...]:
    """Unordered pair of every battle.

    Parameters
    ----------
    a, b
        Model indices of side a and side b, shape (n,); ``a != b``.
    n_models
        Number of models.

    Returns
    -------
    tuple of np.ndarray
        ``lo`` and ``hi`` of each distinct pair (shape (P,)), the pair of every battle
        (shape (n,)) and ``sign`` (+1 where side a is ``lo``, else -1; shape (n,)).
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    lo = np.minimum(a, b)
    hi = np.maximum(a, b)
    keys, pair = np.unique(lo * n_models + hi, return_inverse=True)
    sign = np.where(a == lo, 1.0, -1.0)
    return keys // n_models, keys % n_models, pair.reshape(-1), sign


def aggregate_pairs(a: np.ndarray, b: np.ndarray, outcome: np.ndarray, n_models: int) -> PairCounts:
    """Aggregate battles into :class:`PairCounts`.

    Parameters
    ----------
    a, b
        Model indices of side a and side b, shape (n,); self-battles must be removed.
    outcome
        ``OUTCOME_CODES`` of each battle, shape (n,). Drop ties beforehand for
        ``ties="drop"``; codes 2 and 3 are both counted as draws.
    n_models
        Number of models.

    Returns
    -------
    PairCounts
    """
    lo, hi, pair, sign = pair_index(a, b, n_models)
    outcome = np.asarray(outcome)
    a_won = outcome == 0
    b_won = outcome == 1
    # outcome relative to the pair's lo model: 0 lo won, 1 hi won, 2 draw
    rel = np.where(a_won | b_won, np.where(a_won == (sign > 0), 0, 1), 2)
    counts = np.bincount(pair * 3 + rel, minlength=3 * len(lo)).reshape(-1, 3).astype(float)
    return PairCounts(n_models=n_models, lo=lo, hi=hi, counts=counts)


def incidence(lo: np.ndarray, hi: np.ndarray, n_models: int, signed: bool = True) -> csr_matrix:
    """Sparse pair-model incidence, shape (P, n_models): +1 at ``lo``, -1 (or +1) at ``hi``.

    Parameters
    ----------
    lo, hi
        Distinct pairs, shape (P,).
    n_models
        Number of columns.
    signed
        -1 at ``hi`` when True, +1 otherwise.

    Returns
    -------
    scipy.sparse.csr_matrix
    """
    from scipy.sparse import csr_matrix  # only the fits load scipy (see the module's docstring)

    rows = np.repeat(np.arange(len(lo)), 2)
    cols = np.column_stack([lo, hi]).ravel()
    vals = np.tile([1.0, -1.0 if signed else 1.0], len(lo))
    return csr_matrix((vals, (rows, cols)), shape=(len(lo), n_models))


def laplacian(lo: np.ndarray, hi: np.ndarray, weights: np.ndarray, n_models: int) -> np.ndarray:
    """Weighted graph Laplacian ``sum_k w_k (e_lo - e_hi)(e_lo - e_hi)^T``.

    Parameters
    ----------
    lo, hi
        Distinct pairs, shape (P,).
    weights
        Pair weights, shape (B, P) or (P,).
    n_models
        Matrix size.

    Returns
    -------
    np.ndarray
        Shape (B, n_models, n_models), or (n_models, n_models) for 1-d weights.
    """
    w = np.atleast_2d(weights)
    flat = np.zeros((w.shape[0], n_models * n_models))
    flat[:, lo * n_models + hi] = -w
    flat[:, hi * n_models + lo] = -w
    flat[:, :: n_models + 1] = (incidence(lo, hi, n_models, signed=False).T @ w.T).T
    out = flat.reshape(-1, n_models, n_models)
    return out if np.ndim(weights) == 2 else out[0]


def mle_support(pairs: PairCounts, present: np.ndarray | None = None) -> np.ndarray:
    """Models whose Bradley-Terry MLE is finite: the largest strongly connected component.

    Draw an edge ``i -> j`` when ``i`` scored against ``j`` (a win or a draw). The MLE
    exists (Zermelo 1929; Ford 1957) exactly when this graph is strongly connected; a
    model that only loses, or a group that never beats the rest, or a part of the
    comparison graph that is disconnected, falls outside the largest component.

    Parameters
    ----------
    pairs
        Aggregated battles.
    present
        Boolean mask of models to consider (default: models with at least one battle).

    Returns
    -------
    np.ndarray
        Boolean mask over models. The largest component has the most models; ties are
        broken by the most battles, then by the lowest model index.
    """
    from scipy.sparse import csr_matrix  # only the fits load scipy (see the module's docstring)
    from scipy.sparse.csgraph import connected_components

    m = pairs.n_models
    if present is None:
        present = np.zeros(m, dtype=bool)
        present[pairs.lo[pairs.battles > 0]] = True
        present[pairs.hi[pairs.battles > 0]] = True
    keep = present[pairs.lo] & present[pairs.hi]
    lo, hi = pairs.lo[keep], pairs.hi[keep]
    score_lo, score_hi = pairs.score_lo[keep], pairs.score_hi[keep]
    src = np.concatenate([lo[score_lo > 0], hi[score_hi > 0]])
    dst = np.concatenate([hi[score_lo > 0], lo[score_hi > 0]])
    graph = csr_matrix((np.ones(len(src)), (src, dst)), shape=(m, m))
    _, labels = connected_components(graph, directed=True, connection="strong")
    labels = np.where(present, labels, -1)
    candidates = np.unique(labels[labels >= 0])
    if len(candidates) == 0:
        return np.zeros(m, dtype=bool)
    per_model = np.zeros(m)
    np.add.at(per_model, lo, pairs.battles[keep])
    np.add.at(per_model, hi, pairs.battles[keep])
    sizes = np.array([(labels == c).sum() for c in candidates])
    volume = np.array([per_model[labels == c].sum() for c in candidates])
    best = candidates[np.lexsort((candidates, -volume, -sizes))[0]]
    return labels == best


def _bt_objective(pairs: PairCounts, counts: np.ndarray, ridge: float):
    """Negative log-likelihood (plus ridge) of batched counts (B, P, 3), for Newton."""
    m = pairs.n_models
    lo, hi = pairs.lo, pairs.hi
    n = counts.sum(axis=2)
    s = counts[:, :, 0] + 0.5 * counts[:, :, 2]
    signed_t = incidence(lo, hi, m).T.tocsr()
    # c * 11^T added to the Hessian: iterates keep sum(theta) = 0 and the step is unique
    shift = max(float(n.sum(axis=1).max()) / m**2, 1.0)

    def fun(theta: np.ndarray, with_derivatives: bool):
        d = theta[:, lo] - theta[:, hi]
        # -[s log p + (n - s) log(1 - p)] = n softplus(d) - s d
        nll = (n * softplus(d) - s * d).sum(axis=1)
        f = nll + 0.5 * ridge * (theta**2).sum(axis=1)
        if not with_derivatives:
            return f, None, None
        p = sigmoid(d)
        grad = -(signed_t @ (s - n * p).T).T + ridge * theta
        hess = laplacian(lo, hi, n * p * (1.0 - p), m) + shift
        hess[:, np.arange(m), np.arange(m)] += ridge
        return f, grad, hess

    return fun


def fit_bt(
    pairs: PairCounts,
    counts: np.ndarray | None = None,
    ridge: float = 0.0,
    theta0: np.ndarray | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
) -> NewtonResult:
    """Fit Bradley-Terry log-strengths by Newton's method on per-pair counts.

    Maximises ``sum_k s_k log p_k + (n_k - s_k) log(1 - p_k) - ridge/2 |theta|^2`` with
    ``p_k = sigmoid(theta_lo - theta_hi)``, ``n_k`` the battles and ``s_k`` the score of
    ``lo`` (wins + draws / 2) of pair ``k``. This is exactly the per-battle logistic
    likelihood with a draw counted as half a win each way. With ``ridge=0`` the result is
    the exact MLE, identified by ``sum(theta) = 0``; the data must then be restricted to
    :func:`mle_support`.

    Parameters
    ----------
    pairs
        Pairs and observed counts.
    counts
        Optional batch of alternative counts for the same pairs, shape (B, P, 3)
        (bootstrap replicates); default ``pairs.counts``.
    ridge
        L2 penalty on ``theta``.
    theta0
        Starting log-strengths, shape (n_models,) or (B, n_models); recentred to mean 0.
    tol
        Convergence threshold on the Euclidean norm of the gradient of the summed
        negative log-likelihood.
    max_iter
        Maximum Newton steps.

    Returns
    -------
    NewtonResult
        ``x`` holds log-strengths (natural log-odds units), shape (B, n_models) with
        ``B = 1`` when ``counts`` is None.
    """
    batch = pairs.counts[None] if counts is None else np.asarray(counts, dtype=float)
    start = np.zeros((batch.shape[0], pairs.n_models))
    if theta0 is not None:
        start = start + np.asarray(theta0, dtype=float)
        start -= start.mean(axis=1, keepdims=True)
    return newton_minimize(_bt_objective(pairs, batch, ridge), start, tol, max_iter)


def bt_sandwich_covariance(pairs: PairCounts, theta: np.ndarray) -> np.ndarray:
    """Robust (sandwich, HC0) covariance of Bradley-Terry log-strengths.

    ``H^- G H^-`` where ``H`` is the Fisher information (a Laplacian with weights
    ``n_k p_k (1 - p_k)``) and ``G = sum_i s_i s_i^T`` sums the outer products of the
    per-battle score vectors ``s_i = (y_i - p_i)(e_a - e_b)`` with ``y_i`` in {1, 0, 0.5}.
    Both are singular along ``1``; the generalised inverse ``(H + 11^T)^{-1}`` is used,
    which is exact for any contrast (apply :func:`scale.anchor_matrix` before reading
    variances).

    Parameters
    ----------
    pairs
        Pairs and counts the fit used.
    theta
        Fitted log-strengths, shape (n_models,).

    Returns
    -------
    np.ndarray
        Shape (n_models, n_models), natural log-odds units squared.
    """
    m = pairs.n_models
    p = sigmoid(theta[pairs.lo] - theta[pairs.hi])
    c = pairs.counts
    info = laplacian(pairs.lo, pairs.hi, pairs.battles * p * (1.0 - p), m)
    meat = laplacian(
        pairs.lo, pairs.hi, c[:, 0] * (1 - p) ** 2 + c[:, 1] * p**2 + c[:, 2] * (0.5 - p) ** 2, m
    )
    bread = np.linalg.inv(info + max(np.trace(info) / m**2, 1e-12))
    return bread @ meat @ bread


def bootstrap_counts(pairs: PairCounts, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """Resample battles with replacement and aggregate each replicate.

    Each battle is represented by its (pair, outcome) cell; a replicate draws as many
    battles as observed, uniformly with replacement, and counts them per cell. This is
    row resampling exactly (the counts are multinomial with the observed proportions),
    done on cell labels; for boards of 10^5 battles it is faster than NumPy's
    multinomial over the ~4000 cells.

    Parameters
    ----------
    pairs
        Observed counts (integers).
    rounds
        Number of replicates.
    rng
        Random generator (seed it for reproducible output).

    Returns
    -------
    np.ndarray
        Shape (rounds, P, 3).
    """
    flat = pairs.counts.ravel().astype(np.int64)
    labels = np.repeat(np.arange(flat.size, dtype=np.int32), flat)
    n = labels.size
    out = np.empty((rounds, flat.size))
    for r in range(rounds):
        drawn = labels[rng.integers(0, n, n, dtype=np.int32 if n < 2**31 else np.int64)]
        out[r] = np.bincount(drawn, minlength=flat.size)
    return out.reshape(rounds, *pairs.counts.shape)


def battle_cells(a: np.ndarray, b: np.ndarray, outcome: np.ndarray, n_models: int) -> np.ndarray:
    """The (pair, outcome) cell of every battle: an index into ``PairCounts.counts.ravel()``.

    Parameters
    ----------
    a, b, outcome, n_models
        As for :func:`aggregate_pairs`.

    Returns
    -------
    np.ndarray
        ``3 * pair + relative outcome`` per battle (0: ``lo`` won, 1: ``hi`` won, 2: draw).
    """
    _, _, pair, sign = pair_index(a, b, n_models)
    outcome = np.asarray(outcome)
    a_won = outcome == 0
    rel = np.where(a_won | (outcome == 1), np.where(a_won == (sign > 0), 0, 1), 2)
    return pair * 3 + rel


#: Leverage at which deleting a cluster leaves part of the board without a finite estimate
#: (eigenvalue 1 of ``H_gg``, up to rounding): the model(s) it cuts off get no bounded clustered
#: interval (:class:`ClusterCovariance`).
CUT_LEVERAGE = 1.0 - 1e-8


@dataclass(frozen=True)
class ClusterCovariance:
    """Cluster-robust covariance of the log-strengths.

    Attributes
    ----------
    cov
        Shape (n_models, n_models), natural log-odds units squared; finite.
    unbounded
        Boolean mask over models whose strength the clusters cannot bound: every battle
        linking them to the rest of the board lies in one cluster (typically a model all of
        whose battles come from one session), so deleting that cluster leaves them without an
        estimate. Any interval involving them is unbounded; ``cov`` leaves out the
        contribution of that cluster in that direction.
    """

    cov: np.ndarray
    unbounded: np.ndarray


def bt_cluster_sandwich_covariance(
    pairs: PairCounts,
    theta: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    outcome: np.ndarray,
    cluster: np.ndarray,
    correction: str = "CR3",
) -> ClusterCovariance:
    """Cluster-robust sandwich covariance of Bradley-Terry log-strengths, CR3 by default.

    ``B M B`` with the bread ``B`` of :func:`bt_sandwich_covariance` and the meat ``M = sum_c
    u_c u_c^T`` summed over clusters (evaluation sessions): votes of one cluster may be
    dependent, clusters are independent (Liang and Zeger 1986).

    ``correction="CR0"``: ``u_c = S_c = sum_{i in c} (y_i - p_i)(e_a - e_b)``, the cluster's
    score. With one battle per cluster it is the HC0 sandwich. It is biased down when a cluster
    carries a large share of a model's information (a model with 150 battles in 60 sessions),
    because the residuals of a cluster are fitted partly to that cluster (for models with
    under 1,000 battles in sessions of 2.5 votes, 94.8% coverage against CR3's 95.2%,
    ``benchmarks/bench_coverage.py --variants``); and a model all of whose battles are in one
    session gets an interval from its opponents' sessions only (its own residuals sum to 0).

    ``correction="CR3"`` (default): ``u_c = (I - G_c B)^{-1} S_c`` with ``G_c = sum_{i in c}
    p_i (1 - p_i)(e_a - e_b)(e_a - e_b)^T`` the cluster's information: ``-B u_c`` is the
    one-step (Newton from the full fit) change of the estimate when cluster ``c`` is deleted,
    so this is the one-step delete-a-cluster jackknife without centring, Bell and McCaffrey's
    (2002) CR3, which MacKinnon, Nielsen and Webb (2023) recommend over CR0/CR1 with few or
    unbalanced clusters. It is computed without an ``n_models`` square matrix per cluster:
    ``(I - G_c B)^{-1} X_c^T = X_c^T (I - D_c P_c)^{-1}`` with ``X_c`` the cluster's distinct
    pairs (rows ``e_lo - e_hi``), ``D_c`` their summed weights ``p (1 - p)`` and ``P_c = X_c B
    X_c^T``: one eigen-decomposition of the symmetric ``D^(1/2) P D^(1/2)`` (its eigenvalues,
    the cluster's leverages, are in [0, 1]) per cluster, batched by the number of distinct pairs
    (one for a session that re-votes the same pair). A leverage of 1 (:data:`CUT_LEVERAGE`)
    means that deleting the cluster leaves some models without an estimate: their strengths
    are marked ``unbounded`` and that direction's undefined term is left out. The small-sample
    factor ``G / (G - 1)`` of CR1 is not applied: with thousands of sessions it changes
    nothing.

    Parameters
    ----------
    pairs
        The aggregated battles the fit used.
    theta
        Fitted log-strengths, shape (n_models,).
    a, b, outcome
        The same battles, one per row.
    cluster
        Cluster index of every battle, ``0 .. K - 1``.
    correction
        ``"CR3"`` or ``"CR0"``.

    Returns
    -------
    ClusterCovariance
    """
    from scipy.sparse import csr_matrix  # only the fits load scipy (see the module's docstring)

    if correction not in ("CR0", "CR3"):
        raise ValueError(f"correction must be 'CR0' or 'CR3', got {correction!r}")
    m = pairs.n_models
    outcome = np.asarray(outcome)
    cluster = np.asarray(cluster, dtype=np.int64)
    k = int(cluster.max()) + 1 if len(cluster) else 0
    p = sigmoid(theta[pairs.lo] - theta[pairs.hi])
    info = laplacian(pairs.lo, pairs.hi, pairs.battles * p * (1.0 - p), m)
    bread = np.linalg.inv(info + max(np.trace(info) / m**2, 1e-12))
    # one cell per (cluster, pair): the residual sum of the pair's lo side and the summed weight
    lo, hi, pair, sign = pair_index(a, b, m)
    y = np.where(outcome == 0, 1.0, np.where(outcome == 1, 0.0, 0.5))
    resid = sign * (y - sigmoid(theta[a] - theta[b]))  # y_lo - p_lo
    cells, cell = np.unique(cluster * len(lo) + pair, return_inverse=True)
    cell = cell.reshape(-1)
    cell_cluster, cell_lo, cell_hi = cells // len(lo), lo[cells % len(lo)], hi[cells % len(lo)]
    r = np.bincount(cell, resid, len(cells))
    p_cell = sigmoid(theta[cell_lo] - theta[cell_hi])
    w = p_cell * (1.0 - p_cell) * np.bincount(cell, minlength=len(cells))
    unbounded = np.zeros(m, dtype=bool)
    if correction == "CR0":
        adjusted = r
    else:
        adjusted = np.empty_like(r)
        width = np.bincount(cell_cluster, minlength=k)  # distinct pairs per cluster
        start = np.r_[0, np.cumsum(width)[:-1]]  # cells are sorted by cluster
        for q in np.unique(width[width > 0]):
            idx = start[width == q][:, None] + np.arange(q)  # (n, q) cells of these clusters
            lo_q, hi_q = cell_lo[idx], cell_hi[idx]
            # P = X B X^T of each cluster's pairs, shape (n, q, q)
            proj = (bread[lo_q[:, :, None], lo_q[:, None, :]] - bread[lo_q[:, :, None], hi_q[:, None, :]]
                    - bread[hi_q[:, :, None], lo_q[:, None, :]] + bread[hi_q[:, :, None], hi_q[:, None, :]])
            root = np.sqrt(w[idx])
            lev, vec = np.linalg.eigh(root[:, :, None] * proj * root[:, None, :])
            cut = lev >= CUT_LEVERAGE
            scale = np.where(cut, 0.0, 1.0 / np.where(cut, 1.0, 1.0 - lev))
            # (I - D P)^{-1} r = D^(1/2) V diag(1 / (1 - lev)) V^T D^(-1/2) r
            inner = np.einsum("nji,nj->ni", vec, r[idx] / root) * scale
            adjusted[idx] = root * np.einsum("nij,nj->ni", vec, inner)
            for n_, j in zip(*np.nonzero(cut), strict=True):
                unbounded |= _cut_models(bread, lo_q[n_], hi_q[n_], root[n_] * vec[n_, :, j])
    rows = np.concatenate([cell_cluster, cell_cluster])
    scores = csr_matrix(
        (np.concatenate([adjusted, -adjusted]), (rows, np.concatenate([cell_lo, cell_hi]))), shape=(k, m)
    )
    meat = (scores.T @ scores).toarray()
    return ClusterCovariance(bread @ meat @ bread, unbounded)


def _cut_models(bread: np.ndarray, lo: np.ndarray, hi: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Models a cluster of leverage 1 cuts off: where its direction ``B X^T D^(1/2) v`` departs
    from the value it takes on most models (it is constant on the part of the board that stays
    connected without the cluster)."""
    direction = bread[:, lo] @ weights - bread[:, hi] @ weights
    spread = np.abs(direction - np.median(direction))
    return spread > 1e-6 * spread.max()


def cluster_bootstrap_counts(
    pairs: PairCounts, cells: np.ndarray, cluster: np.ndarray, rounds: int, rng: np.random.Generator
) -> np.ndarray:
    """Resample whole clusters with replacement and aggregate each replicate per cell.

    Parameters
    ----------
    pairs
        Observed counts (defines the cells).
    cells
        Cell of every battle (:func:`battle_cells`).
    cluster
        Cluster index of every battle, ``0 .. K - 1``.
    rounds
        Number of replicates.
    rng
        Random generator.

    Returns
    -------
    np.ndarray
        Shape (rounds, P, 3): counts of the battles of ``K`` clusters drawn uniformly with
        replacement (each drawn cluster brings all its battles).
    """
    from scipy.sparse import csr_matrix  # only the fits load scipy (see the module's docstring)

    n_cells = pairs.counts.size
    k = int(cluster.max()) + 1 if len(cluster) else 0
    per_cluster = csr_matrix((np.ones(len(cells)), (cluster, cells)), shape=(k, n_cells))
    out = np.empty((rounds, n_cells))
    for r in range(rounds):
        multiplicity = np.bincount(rng.integers(0, k, k), minlength=k).astype(float)
        out[r] = per_cluster.T @ multiplicity
    return out.reshape(rounds, *pairs.counts.shape)
