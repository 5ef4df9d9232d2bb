"""Benchmark the ranking step on the 135,634 real votes, and compare with LMArena's arena-rank.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_ranking.py   # section [5] needs the bench extra (arena-rank)

Prints figures only; it is not a test. Options: ``--repeats N`` timing repeats (default 3),
``--arena-rank-rounds N`` bootstrap rounds of section [5], for arena-rank and ours (default 100).

Section [5] compares with arena-rank: ratings against arena-rank run to convergence (its default
tolerances stop L-BFGS early, reported as information), and the speed of the same work (fit +
bootstrap + sandwich on the overall board), ours and arena-rank's timed one after the other in
that section, so the ratio divides two times of one section of one run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import resource
import time
from functools import partial

import numpy as np
import polars as pl
from real_votes import REAL_VOTES, load_real_votes  # noqa: E402  (benchmarks/ is on sys.path)

from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.tags import tag_rows

SYNTHETIC_SEED = 20250101
TOP10_CATEGORIES = ("overall", "creative_writing", "math", "instruction_following", "hard_prompt")


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def synthesize_missing_columns(votes: pl.DataFrame, seed: int = SYNTHETIC_SEED) -> pl.DataFrame:
    """Add SYNTHETIC style columns, is_code, language, sum_user_tokens and turns to the real votes.

    The real vote table lacks conv_metadata and is_code. For timing only: each model gets a
    verbosity (log mean tokens ~ N(6.3, 0.5)) and a formatting propensity; answer tokens
    are log-normal around the model's verbosity, headers / lists / bold are Poisson with
    rates proportional to tokens x propensity; is_code ~ Bernoulli(0.25); language drawn
    from 10 codes (en 50%, zh 10%, ...); sum_user_tokens
    log-normal (about 8% above 500); turns = 1 + Geometric, about 15% multi-turn.
    """
    rng = np.random.default_rng(seed)
    n = votes.height
    models = sorted(set(votes.get_column("model_a")) | set(votes.get_column("model_b")))
    verbosity = dict(zip(models, rng.normal(6.3, 0.5, len(models)), strict=True))
    formatting = dict(zip(models, rng.uniform(0.2, 2.0, len(models)), strict=True))
    cols: dict[str, np.ndarray] = {}
    for side in ("a", "b"):
        names = votes.get_column(f"model_{side}").to_list()
        level = np.array([verbosity[m] for m in names])
        style = np.array([formatting[m] for m in names])
        tokens = np.exp(rng.normal(level, 0.8))
        cols[f"sum_assistant_{side}_tokens"] = tokens.astype(np.int32)
        for i in range(1, 7):
            cols[f"header_count_{side}_h{i}"] = rng.poisson(style * tokens / (700.0 * i))
        cols[f"list_count_{side}_ordered"] = rng.poisson(style * tokens / 400.0)
        cols[f"list_count_{side}_unordered"] = rng.poisson(style * tokens / 200.0)
        cols[f"bold_count_{side}_asterisk"] = rng.poisson(style * tokens / 150.0)
        cols[f"bold_count_{side}_underscore"] = rng.poisson(0.02, n)
    cols["is_code"] = rng.random(n) < 0.25
    # language codes in roughly the dump's proportions (English half), for the language boards
    codes = np.array(["en", "zh", "ru", "de", "fr", "es", "ja", "ko", "pt", "und"])
    share = np.array([0.5, 0.1, 0.07, 0.05, 0.05, 0.05, 0.04, 0.03, 0.06, 0.05])
    cols["language"] = codes[rng.choice(codes.size, n, p=share)]
    cols["sum_user_tokens"] = np.exp(rng.normal(4.5, 1.2, n)).astype(np.int32)
    cols["turns"] = rng.geometric(0.85, n).astype(np.int32)
    return votes.with_columns(**{k: pl.Series(v) for k, v in cols.items()})


SAMPLE = REAL_VOTES.parent / "arena_human_preference_sample_100.csv"


def sample_session_sizes() -> tuple[np.ndarray, np.ndarray]:
    """Session sizes implied by the real sample's ``evaluation_order`` (votes drawn uniformly).

    With votes sampled uniformly, the number of sampled votes of order k is proportional to the
    number of sessions of at least k votes, so sessions of exactly k votes are
    ``count(order = k) - count(order = k + 1)`` (clipped at 0).
    """
    order = pl.read_csv(SAMPLE, columns=["evaluation_order"]).get_column("evaluation_order")
    counts = np.bincount(order.to_numpy(), minlength=order.max() + 2)[1:].astype(float)
    exactly = np.clip(counts[:-1] - counts[1:], 0.0, None)
    sizes = np.arange(1, exactly.size + 1)
    return sizes, exactly / exactly.sum()


def with_sample_like_sessions(votes: pl.DataFrame, seed: int = SYNTHETIC_SEED) -> pl.DataFrame:
    """SYNTHETIC ``evaluation_session_id``: votes of one model pair grouped into sessions whose
    sizes follow :func:`sample_session_sizes` (a session keeps one pair, as on the arena)."""
    rng = np.random.default_rng(seed)
    sizes, prob = sample_session_sizes()
    draws = sizes[rng.choice(sizes.size, votes.height, p=prob)]
    ends = np.cumsum(draws)
    shuffled = votes.with_columns(
        _pair=pl.min_horizontal("model_a", "model_b") + "|" + pl.max_horizontal("model_a", "model_b"),
        _r=pl.Series(rng.random(votes.height)),
    ).sort("_pair", "_r")
    session = np.searchsorted(ends, np.arange(votes.height), side="right")
    return shuffled.with_columns(
        evaluation_session_id=pl.col("_pair") + "#" + pl.Series(session).cast(pl.String)
    ).drop("_pair", "_r")


def timed(fn, repeats: int):
    """Run ``fn`` ``repeats`` times; return the last result, wall seconds and CPU seconds."""
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return result, walls, cpus


def fmt_times(walls: list[float], cpus: list[float]) -> str:
    runs = ", ".join(f"{w:.2f}" for w in walls)
    return (
        f"wall min {min(walls):.2f} s, median {np.median(walls):.2f} s (runs: {runs}); "
        f"CPU min {min(cpus):.2f} s"
    )


def print_top10(leaderboard: pl.DataFrame, categories: tuple[str, ...]) -> None:
    for category in categories:
        board = leaderboard.filter(pl.col("category") == category, pl.col("method") == "bt")
        if board.height == 0:
            print(f"\n{category}: unavailable")
            continue
        print(f"\nTop 10, {category} (bt, 95% sandwich CI, {board.height} models):")
        print(f"rank  ub  {'model':<42} {'rating':>8} {'ci_lower':>8} {'ci_upper':>8}  battles")
        for row in board.head(10).iter_rows(named=True):
            print(
                f"{row['rank']:>4} {row['rank_ub']:>3}  {row['model']:<42} {row['rating']:8.1f} "
                f"{row['ci_lower']:8.1f} {row['ci_upper']:8.1f} {row['n_battles']:8d}"
            )


#: arena-rank run to convergence for the agreement check: ftol=0 turns off its stop on a small
#: relative change of the mean loss (its default 1e-9 ends the overall fit after ~20 L-BFGS
#: steps, ratings still up to ~16 points off); gtol bounds the inf-norm of the mean loss's
#: gradient (x 135,624 battles: about 1e-7 on the summed log-likelihood).
ARENA_RANK_TIGHT = {"gtol": 1e-12, "ftol": 0.0, "max_iter": 10_000}


def fit_arena_rank(bradley_terry, dataset, **options):
    """One arena-rank BradleyTerry fit, as ``RatingSystem.fit`` runs it (same loss, same
    ``lbfgs_minimize``), keeping the L-BFGS state ``fit`` drops: returns the fitted model, the
    rating vector (log-odds), the iteration count, the inf-norm of the mean loss's gradient (what
    its gtol bounds) and the wall seconds (JIT compile included: each call compiles anew)."""
    from arena_rank.utils.math_utils import lbfgs_minimize
    from optax.tree_utils import tree_get

    model = bradley_terry(n_competitors=len(dataset.competitors), **options)
    t0 = time.perf_counter()
    params, state = lbfgs_minimize(
        function=partial(model.loss_function, data=dataset.as_dict()),
        initial_params=model.params,
        max_iter=model.max_iter,
        gtol=model.gtol,
        ftol=model.ftol,
    )
    theta = np.asarray(params["ratings"])  # blocks until JAX is done
    seconds = time.perf_counter() - t0
    model.params, model.fitted = params, True
    iterations = int(tree_get(state, "count", 0))
    grad_inf = float(np.abs(np.asarray(tree_get(state, "grad", None)["ratings"])).max())
    return model, theta, iterations, grad_inf, seconds


def arena_rank_comparison(
    votes: pl.DataFrame, overall_only: pl.DataFrame, rounds: int, repeats: int
) -> None:
    """[5] arena-rank's BradleyTerry on the overall board's battles: agreement and speed.

    Agreement: our ratings against arena-rank run to convergence (ARENA_RANK_TIGHT); arena-rank
    with its default tolerances is reported beside it, as information on its early stop. Speed:
    the same work (point fit + ``rounds``-round bootstrap + sandwich on the same battles), ours
    and arena-rank's timed one after the other in this section.
    """
    try:
        from arena_rank.models.bradley_terry import BradleyTerry
        from arena_rank.utils.data_utils import PairDataset
    except ImportError:
        print(
            "\narena-rank is not installed: comparison skipped. Install the bench extra "
            "(.venv/bin/pip install -e '.[dev,bench]') and run this script again."
        )
        return
    from importlib.metadata import version

    # ours, timed here (not reused from [3]) so the speed ratio divides two times of this section
    config = RankingConfig(methods=("bt",), bootstrap_rounds=rounds)
    load_ours = os.getloadavg()[0]
    out, walls, cpus = timed(
        lambda: compute_rankings(votes, tag_rows(votes.get_column("id"), [overall_only]), config), repeats)
    ours = out.leaderboard.filter(pl.col("method") == "bt")
    our_grad = out.metadata["categories"]["overall"]["bt"]["grad_norm"]

    kept = ours.get_column("model").to_list()
    battles = votes.filter(
        pl.col("model_a") != pl.col("model_b"),
        pl.col("model_a").is_in(kept),
        pl.col("model_b").is_in(kept),
    ).select("model_a", "model_b", "winner")
    dataset = PairDataset.from_pandas(battles.to_pandas())
    size = len(dataset.competitors)
    default = BradleyTerry(n_competitors=size)
    print(
        f"\n[5] arena-rank {version('arena-rank')}: BradleyTerry(scale=400, base=10, "
        f"init_rating=1000), L-BFGS, ties and both_bad = 0.5; same {battles.height} overall "
        f"battles and {len(kept)} models as ours. Its defaults stop L-BFGS at max_iter="
        f"{default.max_iter}, or when the mean loss's gradient inf-norm < gtol={default.gtol:g} "
        f"or its relative change < ftol={default.ftol:g}; 'converged' below is gtol="
        f"{ARENA_RANK_TIGHT['gtol']:g}, ftol={ARENA_RANK_TIGHT['ftol']:g}, max_iter="
        f"{ARENA_RANK_TIGHT['max_iter']}"
    )

    left, right = np.asarray(dataset.pairs).T
    counts, outcomes = np.asarray(dataset.counts), np.asarray(dataset.outcomes)

    def summed_grad_norm(theta: np.ndarray) -> float:
        """|gradient| of the summed log-likelihood (the measure of our grad_norm)."""
        resid = counts * (outcomes - 1.0 / (1.0 + np.exp(-(theta[left] - theta[right]))))
        return float(np.linalg.norm(np.bincount(left, resid, size) - np.bincount(right, resid, size)))

    def centred(theta: np.ndarray) -> np.ndarray:
        points = theta * default.alpha
        return 1000.0 + points - points.mean()  # mean 1000 over the same models, as ours

    mine = dict(zip(ours.get_column("model"), ours.get_column("rating"), strict=True))
    mine_vec = np.array([mine[c] for c in dataset.competitors])
    mine_vec = 1000.0 + mine_vec - mine_vec.mean()
    fits = {}
    for name, options in (("default", {}), ("converged", ARENA_RANK_TIGHT)):
        _, theta, iterations, grad_inf, seconds = fit_arena_rank(BradleyTerry, dataset, **options)
        fits[name] = centred(theta)
        stop = (
            "max_iter"
            if iterations >= (options.get("max_iter") or default.max_iter)
            else "gtol"
            if grad_inf < options.get("gtol", default.gtol)
            else "ftol"
        )
        print(
            f"    arena-rank {name:<9} fit: {iterations:>4} L-BFGS steps (stopped by {stop}), "
            f"{seconds:.2f} s incl. JIT compile; mean-loss |grad|_inf {grad_inf:.1e}; summed "
            f"log-likelihood |grad| {summed_grad_norm(theta):.1e} (ours {our_grad:.1e})"
        )
    diff = np.abs(mine_vec - fits["converged"])
    print(
        f"    overall bt ratings, ours vs arena-rank converged: max |diff| = {diff.max():.1e} "
        f"points (mean {diff.mean():.1e}); target < 0.1: {'met' if diff.max() < 0.1 else 'NOT met'}"
    )
    early = np.abs(fits["default"] - fits["converged"])
    worst = dataset.competitors[int(early.argmax())]
    off = np.abs(mine_vec - fits["default"])
    print(
        f"    information, arena-rank's early stop: default vs converged max |diff| = "
        f"{early.max():.4f} points ({worst}; mean {early.mean():.4f}); ours vs arena-rank "
        f"default max {off.max():.4f} (mean {off.mean():.4f})"
    )

    # the same work as ours, as arena-rank runs it (default tolerances): fit + bootstrap + sandwich
    # JAX is multithreaded: forking after it started can deadlock the pool, so spawn workers
    multiprocessing.set_start_method("spawn", force=True)
    load_theirs = os.getloadavg()[0]
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0, c0 = time.perf_counter(), time.process_time()
    model = BradleyTerry(n_competitors=size)
    result = model.compute_ratings_and_cis(
        dataset, ci_method="bootstrap", num_bootstrap=rounds, seed=42
    )  # fits first (not fitted yet), then the bootstrap
    model.compute_ratings_and_cis(dataset, ci_method="sandwich")
    their_wall = time.perf_counter() - w0
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    their_own_cpu = time.process_time() - c0
    workers_cpu = children1.ru_utime + children1.ru_stime - children0.ru_utime - children0.ru_stime
    their_cpu = their_own_cpu + workers_cpu
    lower = np.asarray(result["rating_lower"])
    upper = np.asarray(result["rating_upper"])
    ours_w = dict(
        zip(
            ours.get_column("model"),
            ours.get_column("bootstrap_upper") - ours.get_column("bootstrap_lower"),
            strict=True,
        )
    )
    width_gap = np.abs(np.array([ours_w[c] for c in dataset.competitors]) - (upper - lower))
    print(
        f"    95% bootstrap CI widths ({rounds} rounds each): mean |ours - arena-rank default| = "
        f"{width_gap.mean():.2f} points (independent resamples)"
    )
    our_wall, our_cpu = float(np.median(walls)), float(np.median(cpus))
    print(
        f"    speed, same work (point fit + {rounds}-round bootstrap + sandwich, overall board), "
        f"both timed in this section [5], ours first:\n"
        f"      ours: {fmt_times(walls, cpus)}, CPU median {our_cpu:.2f} s "
        f"(load average {load_ours:.2f})\n"
        f"      arena-rank default tolerances, {os.cpu_count()} workers (mp.Pool, spawn), "
        f"1 run: wall {their_wall:.1f} s, CPU {their_cpu:.1f} s (this process "
        f"{their_own_cpu:.1f} s + workers {workers_cpu:.1f} s; load average {load_theirs:.2f})\n"
        f"      ratio arena-rank / ours (ours' medians): wall {their_wall / our_wall:.0f}x, "
        f"CPU {their_cpu / our_cpu:.0f}x; target >= 50x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--arena-rank-rounds", type=int, default=100)
    args = parser.parse_args()

    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, "
        f"load average at start {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    votes = load_real_votes()
    tagged, tag_meta = tag_categories(votes)
    available = [c for c, m in tag_meta.items() if m["available"]]
    print(
        f"real votes: {votes.height} battles, "
        f"{pl.concat([votes['model_a'], votes['model_b']]).n_unique()} models; "
        f"categories available: {', '.join(available)}; unavailable (no source column): "
        f"{', '.join(c for c in tag_meta if c not in available)}"
    )

    # 1. bt + sandwich + 100-round bootstrap + spectral on every category the real votes allow
    config = RankingConfig(methods=("bt", "spectral"), bootstrap_rounds=100)
    out, walls, cpus = timed(
        lambda: compute_rankings(votes, tag_rows(votes.get_column("id"), [tagged]), config), args.repeats)
    rss_1 = peak_rss_mb()
    print(
        f"\n[1] bt + spectral, 100-round bootstrap + sandwich, {len(available)} categories on the "
        f"real votes: {fmt_times(walls, cpus)}; target < 3 s"
    )
    print(f"    peak RSS so far: {rss_1:.0f} MB (target < 1024 MB)")
    for category, info in out.metadata["categories"].items():
        bt = info["bt"]
        print(
            f"    {category:<22} {info['battles_fitted']:>7} battles {info['models']:>3} models  "
            f"bt: {bt['iterations']} Newton steps, |grad| {bt['grad_norm']:.1e}; bootstrap max "
            f"|grad| {bt['bootstrap_max_grad_norm']:.1e}; tau(spectral, bt) "
            f"{out.metadata['kendall_tau'][category]:.3f}; {info['timings_s']['total']:.2f} s"
        )

    # 2. every board (LMArena's set) with bt + spectral + bt_style, on synthetic columns
    print(
        f"\n[2] SYNTHETIC style columns, is_code, language, sum_user_tokens and turns added to "
        f"the real votes (seed {SYNTHETIC_SEED}; see synthesize_missing_columns) to time every "
        "board and style control"
    )
    synthetic = synthesize_missing_columns(votes)
    tagged_all, meta_all = tag_categories(synthetic)
    unavailable = [c for c, m in meta_all.items() if not m["available"]]
    full = RankingConfig(bootstrap_rounds=100)  # the defaults: style boards sandwich only
    out_style, walls, cpus = timed(
        lambda: compute_rankings(synthetic, tag_rows(synthetic.get_column("id"), [tagged_all]), full), args.repeats
    )
    rss_2 = peak_rss_mb()
    print(
        f"    bt (sandwich + 100-round bootstrap) + spectral (bootstrap) + bt_style (sandwich), "
        f"{len(out_style.metadata['categories'])} boards (unavailable: "
        f"{', '.join(unavailable) or 'none'}): {fmt_times(walls, cpus)}; target < 10 s"
    )
    print(f"    peak RSS so far: {rss_2:.0f} MB")
    for category, info in out_style.metadata["categories"].items():
        st = info["bt_style"]
        t = info["timings_s"]
        print(
            f"    {category:<22} {info['battles_fitted']:>7} battles  bt {t['bt']:.2f} s, "
            f"spectral {t['spectral']:.2f} s, bt_style {t['bt_style']:.2f} s "
            f"({st['iterations']} Newton steps, |grad| {st['grad_norm']:.1e})"
        )

    # 3. the overall board alone (what arena-rank's bootstrap is compared with)
    overall_only = tagged.filter(pl.col("category") == "overall")
    overall_config = RankingConfig(methods=("bt",), bootstrap_rounds=100)
    _, walls, cpus = timed(
        lambda: compute_rankings(votes, tag_rows(votes.get_column("id"), [overall_only]), overall_config), args.repeats
    )
    print(
        f"\n[3] overall board only, bt + 100-round bootstrap + sandwich: {fmt_times(walls, cpus)}"
    )

    # 4. intervals clustered by session, on sessions shaped like the real sample's
    sizes, prob = sample_session_sizes()
    mean_n = float((sizes * prob).sum())
    ratio_n2 = float((sizes**2 * prob).sum()) / mean_n  # E[n^2] / E[n]
    sessioned = with_sample_like_sessions(votes)
    sessions = sessioned.get_column("evaluation_session_id").n_unique()
    clustered_config = RankingConfig(methods=("bt",), bootstrap_rounds=100)
    out_c, walls, cpus = timed(
        lambda: compute_rankings(sessioned, tag_rows(sessioned.get_column("id"), [overall_only]), clustered_config),
        args.repeats
    )
    bt_c = out_c.leaderboard
    width = {
        k: (bt_c.get_column(f"{k}_upper") - bt_c.get_column(f"{k}_lower")).to_numpy()
        for k in ("sandwich", "bootstrap", "cluster_sandwich", "cluster_bootstrap")
    }
    print(
        f"\n[4] SYNTHETIC sessions shaped like the real sample's evaluation_order (sizes "
        f"{dict(zip(sizes.tolist(), np.round(prob, 3).tolist(), strict=True))}, mean {mean_n:.2f} votes): "
        f"{sessions} sessions over the overall board's votes (real outcomes, so no session "
        f"effect in them). bt + sandwich + bootstrap + both clustered intervals: "
        f"{fmt_times(walls, cpus)}"
    )
    print(
        "    width ratio, clustered / vote-level (median over models): sandwich "
        f"{np.median(width['cluster_sandwich'] / width['sandwich']):.3f}, bootstrap "
        f"{np.median(width['cluster_bootstrap'] / width['bootstrap']):.3f}"
    )
    for rho in (0.3, 0.6, 1.0):
        inflation = 1.0 + (ratio_n2 - 1.0) * rho
        print(
            f"    with within-session outcome correlation {rho}: variance x{inflation:.3f}, "
            f"intervals x{np.sqrt(inflation):.3f} wider (design effect 1 + (E[n^2]/E[n] - 1) rho)"
        )

    print_top10(out.leaderboard, TOP10_CATEGORIES)

    arena_rank_comparison(votes, overall_only, args.arena_rank_rounds, args.repeats)
    print(f"\npeak RSS at exit (includes arena-rank/JAX if it ran): {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
