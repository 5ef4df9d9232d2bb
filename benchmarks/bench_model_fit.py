"""Benchmark the goodness-of-fit tables (core/ranking/model_fit.py) against the ranking step they join.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_model_fit.py [--repeats N]

On the 135,634 real votes (``shared/data/real/``) with bench_ranking.py's SYNTHETIC style columns,
is_code, language, user tokens, turns and sample-like evaluation sessions (so every board LMArena
has, style control and the clustered intervals are computed, as in a real run of the full dump),
each repeat times the ranking step's core work, ``compute_rankings`` with the default settings (bt
with sandwich, 100-round bootstrap, clustered sandwich and bootstrap; bt_style; spectral), then
``compute_model_fit`` on its leaderboard, which is what the ``rankings`` asset adds when
``arena.model_fit`` is selected. Prints wall and CPU seconds (median of the repeats) of both, the
ratio (target: the fit adds at most 20% to the ranking step), and the model-fit table of the real
votes. Prints figures only; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import polars as pl
from bench_ranking import synthesize_missing_columns, with_sample_like_sessions  # noqa: E402
from real_votes import load_real_votes  # noqa: E402  (benchmarks/ is on sys.path)

from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.model_fit import compute_model_fit
from arena_pipeline.core.ranking.tags import tag_rows

TARGET = 0.20


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = clock()
    return wall - start[0], cpu - start[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average at start {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    votes = with_sample_like_sessions(synthesize_missing_columns(load_real_votes()))
    tags = tag_rows(votes.get_column("id"), [tag_categories(votes)[0]])
    config = RankingConfig()  # the asset's defaults
    print(f"real votes: {votes.height} battles (SYNTHETIC style columns and sessions: "
          f"{votes.get_column('evaluation_session_id').n_unique()} sessions), {tags.height} (category, battle) rows, "
          f"{tags.get_column('category').n_unique()} categories")
    head = votes.head(2000)
    head_tags = tag_rows(head.get_column("id"), [tag_categories(head)[0]])
    compute_model_fit(head, head_tags, compute_rankings(
        head, head_tags, RankingConfig(bootstrap_rounds=0)).leaderboard)  # warm-up: imports
    ranking, fit = [], []
    for _ in range(args.repeats):
        start = clock()
        output = compute_rankings(votes, tags, config)
        ranking.append(since(start))
        start = clock()
        result = compute_model_fit(votes, tags, output.leaderboard, config)
        fit.append(since(start))
    (rank_wall, rank_cpu), (fit_wall, fit_cpu) = (np.median(np.array(t), axis=0) for t in (ranking, fit))
    print(f"\nranking step core work (compute_rankings, defaults), {args.repeats} runs: wall median "
          f"{rank_wall:.2f} s (runs: {', '.join(f'{w:.2f}' for w, _ in ranking)}), CPU median {rank_cpu:.2f} s")
    print(f"model fit (compute_model_fit, {result.metadata['folds']} folds), same runs: wall median {fit_wall:.2f} s "
          f"(runs: {', '.join(f'{w:.2f}' for w, _ in fit)}), CPU median {fit_cpu:.2f} s")
    print(f"added to the ranking step: wall +{fit_wall / rank_wall:.1%}, CPU +{fit_cpu / rank_cpu:.1%} "
          f"(target at most +{TARGET:.0%}: {'met' if max(fit_wall / rank_wall, fit_cpu / rank_cpu) <= TARGET else 'NOT met'})")
    print(f"load average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    steps = {c: d["newton_steps"] for c, d in result.metadata["categories"].items()}
    print(f"Newton steps per fold fit (max per board): {min(steps.values())}-{max(steps.values())}")
    with pl.Config(tbl_rows=40, tbl_cols=20, tbl_width_chars=200, float_precision=4):
        print("\narena.model_fit on these votes:")
        print(result.summary.select("category", "battles", "scored", "draw_share", "log_loss", "log_loss_baseline",
                                    "log_loss_expected", "log_loss_gain", "log_loss_gain_lower", "brier",
                                    "brier_baseline", "calibration_error", "calibration_error_baseline"))
        print("\narena.model_fit_calibration, overall:")
        print(result.calibration.filter(pl.col("category") == "overall").drop("category", "method"))


if __name__ == "__main__":
    main()
