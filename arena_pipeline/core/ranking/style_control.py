"""Style-controlled Bradley-Terry: ratings and four style coefficients fitted jointly per battle."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from arena_pipeline.core.dataset.schema import CONVERSATION_STYLE_COLUMNS
from arena_pipeline.core.ranking.bradley_terry import CUT_LEVERAGE, ClusterCovariance, laplacian, pair_index
from arena_pipeline.core.ranking.logistic import sigmoid
from arena_pipeline.core.ranking.newton import NewtonResult, newton_minimize

#: Style features in output order (keys of ``schema.CONVERSATION_STYLE_COLUMNS``).
STYLE_FEATURES: tuple[str, ...] = tuple(CONVERSATION_STYLE_COLUMNS)


def style_columns() -> list[str]:
    """Battles columns the style features read (both sides), in schema order."""
    return [
        template.format(side=side)
        for side in ("a", "b")
        for templates in CONVERSATION_STYLE_COLUMNS.values()
        for template in templates
    ]


def has_style_counts() -> pl.Expr:
    """True for a battle with style counts: at least one style column (either side) is present.

    A dump whose format has no style counts (the 33k and 55k formats: ``dumps.unavailable_columns``)
    loads every one of them as null, and the quarantine lets no null style count through from a
    dump that has them (``quarantine.REQUIRED_COLUMNS``); so a battle with all of them null was
    never measured, it did not have zero style. :func:`compute_rankings` leaves such battles out
    of the ``bt_style`` fit (and counts them) rather than entering them with a style difference
    of 0, which would pull the coefficients toward zero and leave those votes unadjusted. A
    single null count among present ones (possible only in frames built by hand) still counts
    as 0, as :func:`style_feature_exprs` says.

    Returns
    -------
    pl.Expr
        Boolean, named ``_styled``.
    """
    return pl.any_horizontal([pl.col(c).is_not_null() for c in style_columns()]).alias("_styled")


def style_feature_exprs() -> list[pl.Expr]:
    """Raw style features of a battle, one Float64 expression per :data:`STYLE_FEATURES`.

    Each feature sums its columns per side (nulls as 0) and is ``(a - b) / (a + b)``, or 0
    when both sides are 0; it lies in [-1, 1] and flips sign when the sides are swapped. The
    ranking fits only battles where :func:`has_style_counts` holds: a battle without any style
    count is left out, not given a difference of 0.

    Returns
    -------
    list[pl.Expr]
    """
    exprs = []
    for name, templates in CONVERSATION_STYLE_COLUMNS.items():
        side = {
            # summed in Float64: Int64 counts near 2^63 would wrap if summed as integers
            s: pl.sum_horizontal(
                [pl.col(t.format(side=s)).cast(pl.Float64).fill_null(0.0) for t in templates]
            )
            for s in ("a", "b")
        }
        total = side["a"] + side["b"]
        exprs.append(
            pl.when(total > 0).then((side["a"] - side["b"]) / total).otherwise(0.0).alias(name)
        )
    return exprs


def standardize(features: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Z-score feature columns (population std; a constant column is only centred).

    Parameters
    ----------
    features
        Raw features, shape (n, k).

    Returns
    -------
    tuple[np.ndarray, np.ndarray, np.ndarray]
        Standardised features, the means and the standard deviations used.
    """
    mean = features.mean(axis=0)
    std = features.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return (features - mean) / std, mean, std


def pair_weights(pair: np.ndarray, min_pair_count: int) -> np.ndarray:
    """LMArena's inverse-propensity battle weights: ``1 / max(n_pair, min_pair_count)``, mean 1.

    As arena-rank's ``ContextualPairDataset(reweighted=True)``: a battle of a pair met
    ``n_pair`` times (either side order) weighs ``1 / max(n_pair, min_pair_count)``, and
    the weights are rescaled to mean 1, so heavily sampled pairs do not dominate the fit.

    Parameters
    ----------
    pair
        Unordered pair of each battle, shape (n,).
    min_pair_count
        Floor on the pair count (arena-rank's default: 50).

    Returns
    -------
    np.ndarray
        Weights, shape (n,), mean 1.
    """
    counts = np.bincount(pair).astype(float)
    weights = 1.0 / np.maximum(counts[pair], float(min_pair_count))
    return weights / weights.mean()


@dataclass(frozen=True)
class StyleDesign:
    """The per-battle data of a style-controlled fit.

    Attributes
    ----------
    n_models
        Models are indexed ``0 .. n_models - 1``.
    lo, hi
        Distinct unordered pairs, shape (P,).
    pair, sign
        Pair of each battle and +1 when side a is the pair's ``lo`` (else -1), shape (n,).
    y
        Outcome for side a: 1 win, 0 loss, 0.5 draw; shape (n,).
    features
        Standardised style differences (side a minus side b), shape (n, k).
    """

    n_models: int
    lo: np.ndarray
    hi: np.ndarray
    pair: np.ndarray
    sign: np.ndarray
    y: np.ndarray
    features: np.ndarray

    @classmethod
    def build(
        cls, a: np.ndarray, b: np.ndarray, y: np.ndarray, features: np.ndarray, n_models: int
    ) -> StyleDesign:
        """Index battles by pair.

        Parameters
        ----------
        a, b
            Model indices of sides a and b, shape (n,).
        y
            Outcome for side a (1, 0 or 0.5), shape (n,).
        features
            Standardised features, shape (n, k).
        n_models
            Number of models.

        Returns
        -------
        StyleDesign
        """
        lo, hi, pair, sign = pair_index(a, b, n_models)
        return cls(n_models, lo, hi, pair, sign, np.asarray(y, float), np.asarray(features, float))

    def take(self, rows: np.ndarray) -> StyleDesign:
        """The design restricted to ``rows`` (pairs unchanged)."""
        return StyleDesign(
            self.n_models,
            self.lo,
            self.hi,
            self.pair[rows],
            self.sign[rows],
            self.y[rows],
            self.features[rows],
        )


def _incidence(design: StyleDesign) -> np.ndarray:
    """Signed pair-model incidence: +1 at (pair, lo), -1 at (pair, hi); shape (P, n_models)."""
    rows = np.arange(len(design.lo))
    out = np.zeros((len(design.lo), design.n_models))
    out[rows, design.lo] = 1.0
    out[rows, design.hi] = -1.0
    return out


def _second_moments(
    design: StyleDesign,
    feats_t: np.ndarray,
    incidence: np.ndarray,
    v: np.ndarray,
    work: np.ndarray | None = None,
) -> np.ndarray:
    """``sum_i v_i x_i x_i^T`` for the per-battle design rows ``x_i = [e_a - e_b, f_i]``.

    ``work`` is an optional scratch array of shape (2, k, n) (avoids reallocating
    feature-sized temporaries in every Newton step).
    """
    m, k = design.n_models, feats_t.shape[0]
    n_pairs = len(design.lo)
    if work is None:
        work = np.empty((2, *feats_t.shape))
    out = np.empty((m + k, m + k))
    out[:m, :m] = laplacian(design.lo, design.hi, np.bincount(design.pair, v, n_pairs), m)
    vf = np.multiply(feats_t, v, out=work[0])
    signed_vf = np.multiply(vf, design.sign, out=work[1])
    cross = np.stack([np.bincount(design.pair, row, n_pairs) for row in signed_vf], axis=1)
    out[:m, m:] = incidence.T @ cross
    out[m:, :m] = out[:m, m:].T
    out[m:, m:] = vf @ feats_t.T
    return out


def _style_objective(design: StyleDesign, weights: np.ndarray, l2: float, ridge: float):
    """Penalised negative log-likelihood of a weighted per-battle design, for Newton.

    Works in preallocated buffers: the objective is evaluated a few times per fit on
    arrays of the size of the data, where fresh allocations cost as much as arithmetic.
    """
    m, k = design.n_models, design.features.shape[1]
    n, n_pairs = len(design.y), len(design.lo)
    pair, sign, y = design.pair, design.sign, design.y
    feats_t = np.ascontiguousarray(design.features.T)
    incidence = _incidence(design)
    shift = max(float(weights.sum()) / m**2, 1.0)
    penalty = np.concatenate([np.full(m, ridge), np.full(k, l2)])
    eta, tmp, tmp2, p, h = np.empty((5, n))
    work = np.empty((2, k, n))

    def fun(x: np.ndarray, with_derivatives: bool):
        theta, beta = x[0, :m], x[0, m:]
        np.take(theta[design.lo] - theta[design.hi], pair, out=eta)
        np.multiply(eta, sign, out=eta)
        np.add(eta, beta @ feats_t, out=eta)
        # logistic loss softplus(eta) - y * eta, softplus = max(eta, 0) + log1p(exp(-|eta|))
        np.abs(eta, out=tmp)
        np.negative(tmp, out=tmp)
        np.exp(tmp, out=tmp)
        np.log1p(tmp, out=tmp)
        np.add(tmp, np.maximum(eta, 0.0, out=tmp2), out=tmp)
        np.subtract(tmp, np.multiply(y, eta, out=tmp2), out=tmp)
        # einsum, not a BLAS dot: threaded ddot is slow on small busy machines
        f = np.array([np.einsum("n,n->", weights, tmp) + 0.5 * (penalty * x[0] ** 2).sum()])
        if not with_derivatives:
            return f, None, None
        with np.errstate(over="ignore"):
            np.exp(np.negative(eta, out=p), out=p)  # p = sigmoid(eta)
        np.reciprocal(np.add(p, 1.0, out=p), out=p)
        np.subtract(1.0, p, out=h)
        np.multiply(h, p, out=h)
        np.multiply(h, weights, out=h)  # Fisher weights
        np.subtract(y, p, out=tmp)
        np.multiply(tmp, weights, out=tmp)  # residuals
        grad = np.empty(m + k)
        grad[m:] = -(feats_t @ tmp)
        np.multiply(tmp, sign, out=tmp)
        grad[:m] = -(np.bincount(pair, tmp, n_pairs) @ incidence)
        grad += penalty * x[0]
        hess = _second_moments(design, feats_t, incidence, h, work)
        hess[:m, :m] += shift
        hess[np.arange(m + k), np.arange(m + k)] += penalty
        return f, grad[None], hess[None]

    return fun


def fit_bt_style(
    design: StyleDesign,
    l2: float,
    weights: np.ndarray | None = None,
    ridge: float = 0.0,
    x0: np.ndarray | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
) -> NewtonResult:
    """Fit ratings and style coefficients jointly by Newton's method.

    Maximises ``sum_i w_i [y_i log p_i + (1 - y_i) log(1 - p_i)] - l2/2 |beta|^2
    - ridge/2 |theta|^2`` with ``logit p_i = theta_a - theta_b + f_i . beta``. The
    Hessian is dense (n_models + k)^2 but built from per-pair and per-feature sums, never
    from a dense design matrix. Log-strengths are identified by ``sum(theta) = 0``.

    Parameters
    ----------
    design
        Battles, pairs and standardised features.
    l2
        Ridge penalty on the style coefficients (natural log-odds per standard deviation
        of a feature; summed, not averaged, log-likelihood), i.e. a N(0, 1/l2) prior.
    weights
        Per-battle weights (bootstrap multiplicities), default 1.
    ridge
        Ridge penalty on log-strengths (0 for the point estimate).
    x0
        Start ``[theta, beta]``, shape (n_models + k,); default zeros.
    tol, max_iter
        Newton stopping rule (Euclidean gradient norm) and step limit.

    Returns
    -------
    NewtonResult
        ``x[0]`` is ``[theta, beta]`` (natural log-odds units).
    """
    m, k = design.n_models, design.features.shape[1]
    w = np.ones(len(design.y)) if weights is None else np.asarray(weights, dtype=float)
    start = np.zeros((1, m + k)) if x0 is None else np.array(x0, dtype=float).reshape(1, -1)
    start[0, :m] -= start[0, :m].mean()
    return newton_minimize(_style_objective(design, w, l2, ridge), start, tol, max_iter)


def bt_style_sandwich_covariance(
    design: StyleDesign, x: np.ndarray, l2: float, weights: np.ndarray | None = None
) -> np.ndarray:
    """Robust (sandwich) covariance of ``[theta, beta]`` for the penalised, weighted fit.

    ``H^- G H^-`` with ``H`` the penalised Hessian ``sum_i w_i p_i (1 - p_i) x_i x_i^T``
    (plus ``11^T`` on the rating block, a generalised inverse valid for rating contrasts)
    and ``G`` the centred sum of outer products of per-battle scores
    ``s_i = w_i (y_i - p_i) x_i``: ``sum_i s_i s_i^T - n sbar sbar^T`` (at a penalised
    optimum ``sum_i s_i = l2 beta``). The weights are treated as fixed, as arena-rank does.

    Parameters
    ----------
    design
        The fitted battles.
    x
        Fitted ``[theta, beta]``.
    l2
        Penalty used in the fit.
    weights
        Battle weights of the fit (default 1).

    Returns
    -------
    np.ndarray
        Shape (n_models + k, n_models + k), natural log-odds units squared.
    """
    m, k = design.n_models, design.features.shape[1]
    x = np.asarray(x, dtype=float)
    theta, beta = x[:m], x[m:]
    feats_t = np.ascontiguousarray(design.features.T)
    incidence = _incidence(design)
    eta = design.sign * (theta[design.lo] - theta[design.hi])[design.pair] + beta @ feats_t
    p = sigmoid(eta)
    w = np.ones(len(design.y)) if weights is None else np.asarray(weights, dtype=float)
    resid = w * (design.y - p)
    info = _second_moments(design, feats_t, incidence, w * p * (1.0 - p))
    info[np.arange(m, m + k), np.arange(m, m + k)] += l2
    info[:m, :m] += max(np.trace(info[:m, :m]) / m**2, 1e-12)
    score_sum = np.concatenate([np.zeros(m), feats_t @ resid])
    meat = _second_moments(design, feats_t, incidence, resid**2)
    meat -= np.outer(score_sum, score_sum) / len(resid)
    bread = np.linalg.inv(info)
    return bread @ meat @ bread


def bootstrap_bt_style(
    design: StyleDesign,
    l2: float,
    x_hat: np.ndarray,
    rounds: int,
    rng: np.random.Generator,
    ridge: float,
    tol: float = 1e-8,
    max_iter: int = 100,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, int, float]:
    """Bootstrap the style-controlled fit by resampling battles with replacement.

    Each replicate draws ``n`` battle indices uniformly with replacement (so every battle
    gets a multinomial multiplicity), keeps battles drawn at least once with their
    multiplicity (times the battle's weight) as weight, and refits from ``x_hat`` (warm
    start). Features keep the standardisation of the full data and battles keep their
    weights, as in arena-rank's bootstrap.

    Parameters
    ----------
    design
        The fitted battles.
    l2
        Style penalty.
    x_hat
        Point estimate ``[theta, beta]``.
    rounds
        Number of replicates.
    rng
        Random generator.
    ridge
        Ridge on log-strengths for the replicates (see ``BOOTSTRAP_RIDGE``).
    tol, max_iter
        Newton stopping rule.
    weights
        Battle weights of the point fit (default 1).

    Returns
    -------
    tuple[np.ndarray, int, float]
        Replicates of ``[theta, beta]`` (rounds, n_models + k), the most Newton steps
        any replicate took, the largest final gradient norm.
    """
    n = len(design.y)
    base = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    out = np.empty((rounds, len(x_hat)))
    most_steps, worst_grad = 0, 0.0
    for r in range(rounds):
        multiplicity = np.bincount(rng.integers(0, n, size=n), minlength=n)
        rows = np.flatnonzero(multiplicity)
        res = fit_bt_style(
            design.take(rows),
            l2,
            multiplicity[rows] * base[rows],
            ridge,
            x_hat,
            tol=tol,
            max_iter=max_iter,
        )
        out[r] = res.x[0]
        most_steps = max(most_steps, res.iterations)
        worst_grad = max(worst_grad, float(res.grad_norm.max()))
    return out, most_steps, worst_grad


def bt_style_cluster_sandwich_covariance(
    design: StyleDesign,
    x: np.ndarray,
    l2: float,
    cluster: np.ndarray,
    weights: np.ndarray | None = None,
) -> ClusterCovariance:
    """Cluster-robust (CR3) sandwich covariance of ``[theta, beta]`` for the penalised, weighted fit.

    The style-controlled form of :func:`bradley_terry.bt_cluster_sandwich_covariance`: the bread
    ``B`` of :func:`bt_style_sandwich_covariance`, and the meat summed over clusters (evaluation
    sessions) of ``u_c = (I - G_c B)^{-1} S_c``, where ``S_c = sum_{i in c} w_i (y_i - p_i) x_i`` is
    the cluster's score and ``G_c = sum_{i in c} w_i p_i (1 - p_i) x_i x_i^T`` its information, the
    design row ``x_i = [e_a - e_b, f_i]`` carrying the battle's own style differences: Bell and
    McCaffrey's CR3, the one-step delete-a-session jackknife, as ``bt``'s clustered interval. It is
    computed per cluster through the leverages of ``D^(1/2) X_c B X_c^T D^(1/2)`` (batched by the
    cluster's number of votes), never with a square matrix of the parameters per cluster; the meat
    is that of the penalised estimating equation: each cluster's score less its share (its votes / all
    votes) of the penalty's gradient ``l2 beta``, to which the scores sum at the optimum (the
    vote-level form centres them the same way; with no style difference it is ``bt``'s). A cluster of
    leverage 1 (:data:`bradley_terry.CUT_LEVERAGE`) leaves the models it alone links unbounded.

    Parameters
    ----------
    design
        The fitted battles.
    x
        Fitted ``[theta, beta]``.
    l2
        Penalty used in the fit.
    cluster
        Cluster index ``0 .. K - 1`` of every battle of ``design``.
    weights
        Battle weights of the fit (default 1), taken as fixed.

    Returns
    -------
    ClusterCovariance
        ``cov`` of shape (n_models + k, n_models + k) and the unbounded models (n_models,).
    """
    from scipy.sparse import csr_matrix  # only the fits load scipy (see board's docstring)

    m, k = design.n_models, design.features.shape[1]
    x = np.asarray(x, dtype=float)
    theta, beta = x[:m], x[m:]
    feats_t = np.ascontiguousarray(design.features.T)
    incidence = _incidence(design)
    lo, hi = design.lo[design.pair], design.hi[design.pair]
    sign = design.sign.astype(float)
    p = sigmoid(sign * (theta[lo] - theta[hi]) + beta @ feats_t)
    w = np.ones(len(design.y)) if weights is None else np.asarray(weights, dtype=float)
    resid, h = w * (design.y - p), w * p * (1.0 - p)
    info = _second_moments(design, feats_t, incidence, h)
    info[np.arange(m, m + k), np.arange(m, m + k)] += l2
    info[:m, :m] += max(np.trace(info[:m, :m]) / m**2, 1e-12)
    bread = np.linalg.inv(info)
    cluster = np.asarray(cluster, dtype=np.int64)
    n_clusters = int(cluster.max()) + 1 if len(cluster) else 0
    order = np.argsort(cluster, kind="stable")
    size = np.bincount(cluster, minlength=n_clusters)
    start = np.r_[0, np.cumsum(size)[:-1]]
    adjusted = np.empty_like(resid)
    unbounded = np.zeros(m, dtype=bool)
    b_tt, b_tf, b_ff = bread[:m, :m], bread[:m, m:], bread[m:, m:]
    for q in np.unique(size[size > 0]):
        idx = order[start[size == q][:, None] + np.arange(q)]  # (n, q) battles of the clusters of q votes
        a_, b_, s_, f_ = lo[idx], hi[idx], sign[idx], design.features[idx]  # f_: (n, q, k)
        # P = X_c B X_c^T of each cluster, shape (n, q, q), from B's blocks
        tt = (b_tt[a_[:, :, None], a_[:, None, :]] - b_tt[a_[:, :, None], b_[:, None, :]]
              - b_tt[b_[:, :, None], a_[:, None, :]] + b_tt[b_[:, :, None], b_[:, None, :]])
        tf = s_[:, :, None] * (b_tf[a_] - b_tf[b_])  # (n, q, k): (e_a - e_b)^T B_tf, signed
        proj = (s_[:, :, None] * s_[:, None, :] * tt + np.einsum("nuk,nvk->nuv", tf, f_)
                + np.einsum("nvk,nuk->nuv", tf, f_) + np.einsum("nuk,kl,nvl->nuv", f_, b_ff, f_))
        root = np.sqrt(h[idx])
        lev, vec = np.linalg.eigh(root[:, :, None] * proj * root[:, None, :])
        cut = lev >= CUT_LEVERAGE
        scale = np.where(cut, 0.0, 1.0 / np.where(cut, 1.0, 1.0 - lev))
        inner = np.einsum("nji,nj->ni", vec, resid[idx] / np.where(root > 0, root, 1.0)) * scale
        adjusted[idx] = root * np.einsum("nij,nj->ni", vec, inner)
        for n_, j in zip(*np.nonzero(cut), strict=True):
            g = root[n_] * vec[n_, :, j] * s_[n_]
            direction = b_tt[:, a_[n_]] @ g - b_tt[:, b_[n_]] @ g + b_tf @ (f_[n_].T @ (root[n_] * vec[n_, :, j]))
            spread = np.abs(direction - np.median(direction))
            unbounded |= spread > 1e-6 * spread.max()
    rows = np.concatenate([cluster, cluster, np.repeat(cluster, k)])
    cols = np.concatenate([lo, hi, np.tile(m + np.arange(k), len(cluster))])
    vals = np.concatenate([sign * adjusted, -sign * adjusted, (design.features * adjusted[:, None]).reshape(-1)])
    scores = csr_matrix((vals, (rows, cols)), shape=(n_clusters, m + k))
    # the penalised estimating equation: each cluster's score less its share of the penalty's gradient
    share = size / max(len(cluster), 1)
    penalty = np.r_[np.zeros(m), l2 * beta]
    along = scores.T @ share
    meat = ((scores.T @ scores).toarray() - np.outer(along, penalty) - np.outer(penalty, along)
            + (share @ share) * np.outer(penalty, penalty))
    return ClusterCovariance(bread @ meat @ bread, unbounded)
