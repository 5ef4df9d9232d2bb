"""Coverage of the displayed intervals for the statement the page makes, by simulation.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_coverage.py                  # ~4 min on 2 shared cores
    .venv/bin/python benchmarks/bench_coverage.py --replicates 300 --variants   # ~8 min
    .venv/bin/python benchmarks/bench_coverage.py --replicates 3000 --seed 7 --scenario sessions
    nice -n 10 .venv/bin/python benchmarks/bench_coverage.py --replicates 200 --scenario sessions  # issue 44's figures

Prints figures only; it is not a test (``test_ranking_coverage.py`` and ``test_ranking_clustered.py``
are the fast checks that run in CI).

The statement. A board pins its reference model at ``anchor_rating`` (1000) and the README says a
rating ``R`` means odds of ``10 ** ((R - 1000) / 400)`` against the reference: the displayed rating of
model ``i`` estimates ``1000 + 400 / ln(10) * (theta_i - theta_ref)``. An interval is counted as
covering when it contains that true value. The reference itself is left out (its displayed rating
is 1000 by definition, there is nothing to cover). ``--statement centred`` fits centred boards (no
reference pinned, as a board without any reference model) and scores their intervals against
``1000 + 400 / ln(10) * (theta_i - mean(theta))``, the meaning of a centred board.

The tournaments. ``--models`` models (default 40) with log-strengths ``N(0, 0.7)`` (a ~500-point
spread); a skewed schedule: each model has a popularity drawn log-uniform over 100x and a pair meets in
proportion to the product of its models' popularities, scaled so that the least-played model has about
``--min-battles`` (150) battles: models have from 100s to 10,000s of battles (about 55,000 battles in
all). Every replicate draws a new tournament (strengths, schedule, outcomes), so the coverage is an
average over tournaments, not that of one schedule. The
reference is the model whose battle count is closest to ``--reference-battles`` (3,000; the
packaged reference, llama-3.3-70b-instruct, has 4,905 on the real overall board and fewer on most
others). Ties as LMArena counts them: a vote with win probability ``p = sigmoid(theta_a - theta_b)``
is a tie (tie or both_bad, half each) with probability ``tau = 0.35 * 4 p (1 - p)`` (35% between
equals), else a win for a with probability ``p - tau / 2``: a tie scores half a win each way, so the
expected score of a is exactly ``p`` and the true strengths are the estimand of the half-tie fit.

Three scenarios, each fitted with the project's code (``core.ranking.board.fit_bt_board``) under the
default settings, the sessions of the votes passed as ``compute_rankings`` passes them
(``core.ranking.sessions.session_clusters``):

``independent``
    every vote independent and its session unknown (a null ``evaluation_session_id``, as in the 33k
    and 55k dumps): no clustered interval, the primary one is the vote-level ``sandwich``; also the
    ``bootstrap`` (percentile, ``--rounds`` rounds).
``singletons``
    every vote independent and in a session of its own, known: the primary interval is the
    clustered one (CR3 over one-vote sessions), which must not lose what the vote-level one had.
``sessions``
    the re-vote session design: votes come in evaluation sessions that re-vote one pair:
    Geometric(0.4) votes (1 or more, mean 2.5), each repeating the session's previous vote with
    probability 0.6, else drawn afresh (so every vote is still exactly the law above; only
    independence fails), the session ids known: the vote-level intervals and the clustered
    ``cluster_sandwich`` (the default primary, issue 36) and ``cluster_bootstrap``.

In every scenario ``primary`` is what the default settings put in ``ci_lower``/``ci_upper`` (its
``ci_method`` in brackets) and ``primary bootstrap`` what ``primary_interval: bootstrap`` would.

Each table row gives the coverage (%) in a battle-count band (a model's battles on that replicate),
the number of (model, replicate) indicators, and the Monte-Carlo standard error: indicators of one
replicate are correlated (all ratings share the reference's error), so the s.e. treats the
replicate as the unit (the ratio estimator's s.e. over replicates). Also the mean width in points.

``bt_style`` (unless ``--no-style``): every board is also fitted by ``core.ranking.style_board.fit_style_board``
under the default settings, with four style differences per vote drawn uniform on [-1, 1] and unrelated
to the outcome, so its ratings estimate the same strengths: its vote-level ``sandwich``, its
session-clustered ``cluster_sandwich`` and its primary interval, scored like ``bt``'s.

The rank sets and the pairwise claims (issue 44), for ``bt`` and ``bt_style``: the true rank of a model
is 1 + the models truly stronger (all models are shown: ``display_min_battles`` 0). For ``[rank_ub,
rank_lb]`` (for this model) and ``[rank_ub_simultaneous, rank_lb_simultaneous]`` (for every model at
once), the share of (model, board) pairs whose true rank is in the set ("per model", s.e. over
boards), the share of boards on which every model's is ("all at once", binomial s.e.) and the mean
width ``lb - ub``. For ``significant`` and ``significant_simultaneous`` of the pairwise rows, the share
of boards with at least one false claim (a pair called significant the wrong way round: with no two
strengths equal, every claim has a true direction), the false claims and the claims per board.

``--variants`` adds the percentile bootstrap (vote level in ``independent``, whole sessions in
``sessions``), re-anchored in every replicate, at other round counts (``--variant-rounds``) and with
two quantile rules: NumPy's default (linear) and the ``(B + 1) alpha``-th order statistic of Davison
and Hinkley (1997, section 5.2; NumPy's ``weibull``), each with its CPU time per board; and, in
``sessions``, the uncorrected CR0 cluster sandwich beside the CR3 one the boards use.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import math
import time
from dataclasses import dataclass

import numpy as np

from arena_pipeline.core.ranking.board import Board, fit_bt_board, primary_order
from arena_pipeline.core.ranking.bradley_terry import (
    BOOTSTRAP_RIDGE,
    aggregate_pairs,
    battle_cells,
    bootstrap_counts,
    bt_cluster_sandwich_covariance,
    cluster_bootstrap_counts,
    fit_bt,
)
from arena_pipeline.core.ranking.config import RankingConfig
from arena_pipeline.core.ranking.scale import anchor_matrix, points_per_logit, to_ratings, z_value
from arena_pipeline.core.ranking.sessions import session_clusters
from arena_pipeline.core.ranking.style_board import fit_style_board

#: Battle-count bands of the table: [low, high).
BANDS: tuple[tuple[int, float], ...] = ((0, 1000), (1000, 5000), (5000, math.inf))
#: Ties (tie + both_bad) between equals; LMArena's text votes have about a third.
TIE_SHARE = 0.35


@dataclass(frozen=True)
class Tournament:
    """Known strengths and a fixed schedule: side a, side b (and session) of every vote."""

    theta: np.ndarray
    a: np.ndarray
    b: np.ndarray
    session: np.ndarray
    reference: int


def skewed_tournament(rng: np.random.Generator, models: int, min_battles: float, reference_battles: float,
                      mean_session: float = 1.0) -> Tournament:
    """Strengths ``N(0, 0.7)`` and a schedule where model popularity spans 100x.

    Parameters
    ----------
    rng
        Generator.
    models
        Number of models.
    min_battles
        Expected battles of the least popular model.
    reference_battles
        The reference is the model whose expected battle count is closest to this.
    mean_session
        Mean votes per session (1: every vote its own session; else Geometric, 1 or more, with this mean).

    Returns
    -------
    Tournament
    """
    theta = rng.normal(0.0, 0.7, models)
    popularity = np.exp(rng.uniform(0.0, math.log(100.0), models))
    lo, hi = np.triu_indices(models, k=1)
    weight = popularity[lo] * popularity[hi]
    share = weight / weight.sum()
    per_model = np.bincount(lo, share, models) + np.bincount(hi, share, models)
    total = min_battles / per_model.min()  # expected votes
    expected = total * per_model
    reference = int(np.argmin(np.abs(np.log(expected / reference_battles))))
    if mean_session == 1.0:
        per_pair = rng.poisson(total * share)
        a, b = np.repeat(lo, per_pair), np.repeat(hi, per_pair)
        return Tournament(theta, a, b, np.arange(a.size), reference)
    n_sessions = rng.poisson(total * share / mean_session)
    pair = np.repeat(np.arange(lo.size), n_sessions)
    size = rng.geometric(1.0 / mean_session, pair.size)
    session = np.repeat(np.arange(pair.size), size)
    return Tournament(theta, lo[pair][session], hi[pair][session], session, reference)


def draw_outcomes(rng: np.random.Generator, t: Tournament, repeat: float) -> np.ndarray:
    """Outcome codes (0 a won, 1 b won, 2 tie, 3 both_bad), expected score of a = sigmoid(theta_a - theta_b).

    Within a session each vote after the first copies the session's latest fresh vote with
    probability ``repeat``.
    """
    p = 1.0 / (1.0 + np.exp(-(t.theta[t.a] - t.theta[t.b])))
    tau = TIE_SHARE * 4.0 * p * (1.0 - p)
    u = rng.random(t.a.size)
    fresh = np.where(u < p - tau / 2.0, 0, np.where(u < p + tau / 2.0, 2 + (rng.random(t.a.size) < 0.5), 1))
    if repeat == 0.0:
        return fresh
    first = np.r_[True, t.session[1:] != t.session[:-1]]
    copies = rng.random(t.a.size) < repeat
    source = np.maximum.accumulate(np.where(first | ~copies, np.arange(t.a.size), 0))
    return fresh[source]


def truth(t: Tournament, config: RankingConfig, statement: str) -> np.ndarray:
    """The true value of every model's displayed rating under the statement scored."""
    anchor = t.reference if statement == "reference" else None
    return to_ratings(t.theta, anchor, config.anchor_rating, config.scale, config.base)


class RankTally:
    """Rank sets and pairwise claims, per replicate: per-model and whole-board coverage of the true ranks,
    the sets' widths, and the boards with a false claim (a pair called significant the wrong way round)."""

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple[int, int, int, float]]] = {}
        self.claims: dict[str, list[tuple[int, int]]] = {}

    def add(self, method: str, frame, significance, theta: np.ndarray, names: list[str]) -> None:
        frame = frame.sort("model")
        order = np.array([names.index(x) for x in frame.get_column("model")])
        truth_rank = 1 + (theta[order][None, :] > theta[order][:, None]).sum(axis=1)
        for label, ub, lb in (("per model", "rank_ub", "rank_lb"),
                              ("simultaneous", "rank_ub_simultaneous", "rank_lb_simultaneous")):
            upper, lower = (frame.get_column(c).to_numpy() for c in (ub, lb))
            covered = (upper <= truth_rank) & (truth_rank <= lower)
            self.rows.setdefault(f"{method} [{ub}, {lb}] ({label})", []).append(
                (int(covered.sum()), covered.size, int(covered.all()), float((lower - upper).mean())))
        index = {name: names.index(name) for name in names}
        one = np.array([index[x] for x in significance.get_column("model_1")], dtype=int)
        two = np.array([index[x] for x in significance.get_column("model_2")], dtype=int)
        wrong = np.sign(significance.get_column("difference").to_numpy()) != np.sign(theta[one] - theta[two])
        for column in ("significant", "significant_simultaneous"):
            called = significance.get_column(column).to_numpy()
            self.claims.setdefault(f"{method} {column}", []).append((int((called & wrong).sum()), int(called.sum())))

    def table(self) -> str:
        lines = [f"  {'rank set':<66}{'per model %':>12}{'s.e.':>6}{'all at once %':>15}{'s.e.':>6}{'width':>7}"]
        for name, rows in self.rows.items():
            hits, n, joint, width = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
            cov = hits.sum() / n.sum()
            r = len(n)
            se = math.sqrt(((hits - cov * n) ** 2).sum() * r / max(r - 1, 1)) / n.sum()
            lines.append(f"  {name:<66}{100 * cov:>12.1f}{100 * se:>6.1f}{100 * joint.mean():>15.1f}"
                         f"{100 * joint.std(ddof=1) / math.sqrt(r):>6.1f}{width.mean():>7.2f}")
        lines.append(f"  {'pairwise claims':<66}{'boards with a false claim %':>28}{'s.e.':>6}"
                     f"{'false / board':>15}{'claims / board':>16}")
        for name, rows in self.claims.items():
            false, called = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
            any_false = false > 0
            lines.append(f"  {name:<66}{100 * any_false.mean():>28.1f}"
                         f"{100 * any_false.std(ddof=1) / math.sqrt(len(false)):>6.1f}{false.mean():>15.2f}"
                         f"{called.mean():>16.1f}")
        return "\n".join(lines)


class Tally:
    """Coverage indicators and widths per (interval, band), kept per replicate."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, int], list[tuple[int, int, float]]] = {}

    def add(self, name: str, lower: np.ndarray, upper: np.ndarray, target: np.ndarray, battles: np.ndarray,
            keep: np.ndarray) -> None:
        covered = (lower <= target) & (target <= upper)
        for band, (low, high) in enumerate((*BANDS, (0, math.inf))):
            sel = keep & (battles >= low) & (battles < high)
            row = (int(covered[sel].sum()), int(sel.sum()), float((upper - lower)[sel].sum()))
            self.rows.setdefault((name, band), []).append(row)

    def table(self, title: str) -> str:
        names = list(dict.fromkeys(name for name, _ in self.rows))
        labels = [f"{lo:,}-{hi - 1:,}" if math.isfinite(hi) else f"{lo:,}+" for lo, hi in BANDS] + ["all"]
        lines = [title, f"  {'interval':<40}{'battles':>14}{'n':>9}{'coverage %':>12}{'s.e.':>7}{'width':>8}"]
        for name in names:
            for band, label in enumerate(labels):
                hits, n, width = (np.array(c, dtype=float) for c in zip(*self.rows[name, band], strict=True))
                if n.sum() == 0:
                    continue
                cov = hits.sum() / n.sum()
                # ratio estimator over replicates (the replicate is the independent unit)
                r = len(n)
                se = math.sqrt(((hits - cov * n) ** 2).sum() * r / max(r - 1, 1)) / n.sum()
                lines.append(f"  {name:<40}{label:>14}{int(n.sum()):>9}{100 * cov:>12.1f}{100 * se:>7.1f}"
                             f"{width.sum() / n.sum():>8.1f}")
        return "\n".join(lines)


def battles_of(frame) -> np.ndarray:
    """Each model's battles on a board frame (nulls as 0)."""
    return frame.get_column("n_battles").fill_null(0).to_numpy()


def percentile(samples: np.ndarray, level: float, method: str) -> tuple[np.ndarray, np.ndarray]:
    tail = (1.0 - level) / 2.0
    lower, upper = np.quantile(samples, [tail, 1.0 - tail], axis=0, method=method)
    return lower, upper


def cluster_cr0(pairs, theta, t: Tournament, o: np.ndarray, anchor: int | None, config: RankingConfig):
    """The uncorrected (CR0) cluster sandwich interval of the displayed rating (this code's API only)."""
    if "correction" not in inspect.signature(bt_cluster_sandwich_covariance).parameters:
        return None
    cov = bt_cluster_sandwich_covariance(pairs, theta, t.a, t.b, o, t.session, correction="CR0").cov
    contrast = anchor_matrix(len(theta), anchor)
    var = np.einsum("ij,jk,ik->i", contrast, cov, contrast)
    half = z_value(config.confidence) * points_per_logit(config.scale, config.base) * np.sqrt(np.clip(var, 0, None))
    rating = to_ratings(theta, anchor, config.anchor_rating, config.scale, config.base)
    return rating - half, rating + half


#: The scenarios and their random streams (independent and sessions keep the streams they had before
#: singletons was added, so their figures are those of the earlier runs).
SCENARIOS = {"independent": 0, "sessions": 1, "singletons": 2}


def run(scenario: str, args: argparse.Namespace) -> str:
    rng = np.random.default_rng([args.seed, SCENARIOS[scenario]])
    sessions = scenario == "sessions"
    config = RankingConfig(methods=("bt",), bootstrap_rounds=args.rounds, display_min_battles=0)
    boot_order = primary_order(dataclasses.replace(config, primary_interval="bootstrap"))
    names = [f"m{i:02d}" for i in range(args.models)]
    tally, rank_tally = Tally(), RankTally()
    style_config = dataclasses.replace(config, methods=("bt_style",))
    clustered = scenario != "independent"
    intervals = ("sandwich", "bootstrap") + (("cluster_sandwich", "cluster_bootstrap") if clustered else ())
    variants = [(b, m) for b in args.variant_rounds for m in ("linear", "weibull")] if args.variants else []
    spent = dict.fromkeys(["board", *variants], 0.0)
    votes, ref_battles, low, high = [], [], math.inf, 0
    for rep in range(args.replicates):
        t = skewed_tournament(rng, args.models, args.min_battles, args.reference_battles,
                              mean_session=2.5 if sessions else 1.0)
        anchor = t.reference if args.statement == "reference" else None
        target = truth(t, config, args.statement)
        keep = np.arange(args.models) != anchor
        o = draw_outcomes(rng, t, 0.6 if sessions else 0.0)
        # the session ids as compute_rankings sees them: unknown (null, -1) in the independent design
        known = t.session if clustered else np.full(t.a.size, -1)
        board = Board("sim", config, names, t.a, t.b, o, None, anchor, session_clusters(known).cluster)
        started = time.process_time()
        fitted = fit_bt_board(board)
        frame = fitted.frame
        spent["board"] += time.process_time() - started
        battles = battles_of(frame)
        votes.append(t.a.size)
        ref_battles.append(battles[t.reference])
        low, high = min(low, battles.min()), max(high, battles.max())
        ci_method = frame.get_column("ci_method")[0]
        boot = next(k for k in boot_order if frame.get_column(f"{k}_upper").drop_nulls().len())
        for name, column in (*((k, k) for k in intervals), (f"primary ({ci_method})", "ci"),
                             (f"primary bootstrap ({boot})", boot)):
            lower, upper = (frame.get_column(f"{column}_{s}").to_numpy() for s in ("lower", "upper"))
            tally.add(name, lower, upper, target, battles, keep)
        rank_tally.add("bt", frame, fitted.significance, t.theta, names)
        if args.style:
            # style differences of every vote, unrelated to the outcome: the style fit's ratings estimate theta
            # (a stream of their own: the other figures keep the draws of the earlier runs)
            style_rng = np.random.default_rng([args.seed, 3, SCENARIOS[scenario], rep])
            styled = dataclasses.replace(board, config=style_config, raw_style=style_rng.uniform(-1.0, 1.0, (t.a.size, 4)))
            started = time.process_time()
            style_frame, _, _, style_tests = fit_style_board(styled, fitted.theta)
            spent["style board"] = spent.get("style board", 0.0) + time.process_time() - started
            style_ci = style_frame.get_column("ci_method")[0]
            for name, column in (("bt_style sandwich", "sandwich"), ("bt_style cluster_sandwich", "cluster_sandwich"),
                                 (f"bt_style primary ({style_ci})", "ci")):
                lower, upper = (style_frame.get_column(f"{column}_{s}").to_numpy() for s in ("lower", "upper"))
                if not np.isnan(upper[keep]).all():
                    tally.add(name, lower, upper, target, battles_of(style_frame), keep)
            rank_tally.add("bt_style", style_frame, style_tests, t.theta, names)
        if not variants:
            continue
        pairs = aggregate_pairs(t.a, t.b, o, args.models)
        theta = fit_bt(pairs).x[0]
        if sessions and (cr0 := cluster_cr0(pairs, theta, t, o, anchor, config)) is not None:
            tally.add("cluster_sandwich CR0", *cr0, target, battles, keep)
        vrng = np.random.default_rng([args.seed, 2, rep])
        cache: dict[int, np.ndarray] = {}
        for rounds, method in variants:
            started = time.process_time()
            if rounds not in cache:
                if sessions:
                    cells = battle_cells(t.a, t.b, o, args.models)
                    counts = cluster_bootstrap_counts(pairs, cells, t.session, rounds, vrng)
                else:
                    counts = bootstrap_counts(pairs, rounds, vrng)
                refit = fit_bt(pairs, counts, BOOTSTRAP_RIDGE, theta).x
                # each replicate re-anchored (or centred): the displayed statement's interval
                cache[rounds] = to_ratings(refit, anchor, config.anchor_rating)
            lower, upper = percentile(cache[rounds], config.confidence, method)
            spent[rounds, method] += time.process_time() - started
            kind = "cluster boot" if sessions else "boot"
            tally.add(f"{kind} {rounds} {method}", lower, upper, target, battles, keep)
    head = (f"[{scenario}] {args.replicates} replicates (a new tournament each), {args.models} models, "
            f"{np.mean(votes):,.0f} votes on average" + (" in sessions of 2.5" if sessions else "")
            + f"; battles per model {low:,}-{high:,}; reference: {np.median(ref_battles):,.0f} battles (median)"
            f"; statement: {args.statement}")
    cost = "  CPU per board: " + ", ".join(
        f"{k if isinstance(k, str) else f'{kind} {k[0]} {k[1]}'} {1000 * v / args.replicates:.0f} ms"
        for k, v in spent.items())
    return tally.table(head) + "\n" + cost + "\n" + rank_tally.table()


def add_tournament_arguments(parser: argparse.ArgumentParser, replicates: int, seed: int, rounds_help: str) -> None:
    """The simulated tournaments' options (:func:`skewed_tournament`), shared with bench_changes_null.py."""
    parser.add_argument("--replicates", type=int, default=replicates)
    parser.add_argument("--models", type=int, default=40)
    parser.add_argument("--min-battles", type=float, default=150.0)
    parser.add_argument("--reference-battles", type=float, default=3000.0)
    parser.add_argument("--rounds", type=int, default=100, help=rounds_help)
    parser.add_argument("--seed", type=int, default=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tournament_arguments(parser, replicates=1000, seed=20251201, rounds_help="bootstrap rounds of the boards")
    parser.add_argument("--scenario", choices=(*SCENARIOS, "all"), default="all")
    parser.add_argument("--statement", choices=("reference", "centred"), default="reference",
                        help="reference: anchored boards scored against the rating relative to the reference "
                        "(what the page shows); centred: centred boards (no reference) against the rating "
                        "relative to the mean")
    parser.add_argument("--no-style", dest="style", action="store_false",
                        help="leave out bt_style (fitted on every board by default, style unrelated to outcomes)")
    parser.add_argument("--variants", action="store_true", help="percentile bootstrap variants (independent)")
    parser.add_argument("--variant-rounds", type=lambda s: [int(x) for x in s.split(",")], default=[100, 1000])
    args = parser.parse_args()
    started = time.perf_counter()
    for scenario in SCENARIOS if args.scenario == "all" else (args.scenario,):
        print(run(scenario, args), flush=True)
        print()
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
