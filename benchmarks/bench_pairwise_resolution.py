"""On the real votes: how many pairs of shown models the published pairwise test calls different, against
how many an eye comparing the displayed intervals would (issue 36: 35-37% against 66-68%).

Usage (from the repository root; the real vote table lives in shared/data/real/ beside the checkout)::

    .venv/bin/python benchmarks/bench_pairwise_resolution.py                  # ~1 min
    .venv/bin/python benchmarks/bench_pairwise_resolution.py --votes PATH --categories math creative_writing

Prints figures only; it is not a test. The boards are ``compute_rankings``' with the default settings
(``bt``; the real table has no sessions, so the primary interval is the vote-level sandwich). For each
category, over the pairs of shown (non-provisional) models:

- ``non-overlap``: the two displayed intervals (``ci_lower``/``ci_upper``; the reference model's is its
  pinned rating, 1000, with no width) do not overlap;
- ``significant``: ``arena.pairwise_significance`` says the interval of the difference excludes 0
  (the Wald interval from the full covariance, C_ii + C_jj - 2 C_ij);
- and the pairs each finds that the other does not.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import polars as pl
from bench_ranking import synthesize_missing_columns  # noqa: E402  (benchmarks/ is on sys.path)
from real_votes import REAL_VOTES, load_real_votes  # noqa: E402

from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.tags import tag_rows


def resolution(leaderboard: pl.DataFrame, tests: pl.DataFrame, category: str, method: str) -> dict:
    """Counts of the pairs of shown models different by non-overlap and by the pairwise test."""
    board = leaderboard.filter((pl.col("category") == category) & (pl.col("method") == method)
                               & ~pl.col("provisional"))
    shown = board.select("model", lo=pl.coalesce("ci_lower", "rating"), hi=pl.coalesce("ci_upper", "rating"))
    pairs = tests.filter((pl.col("category") == category) & (pl.col("method") == method)).select(
        "model_1", "model_2", "significant")
    pairs = (pairs.join(shown.rename({"model": "model_1", "lo": "lo_1", "hi": "hi_1"}), on="model_1")
             .join(shown.rename({"model": "model_2", "lo": "lo_2", "hi": "hi_2"}), on="model_2")
             .with_columns(apart=(pl.col("lo_1") > pl.col("hi_2")) | (pl.col("lo_2") > pl.col("hi_1"))))
    n = shown.height
    return {"category": category, "models": n, "pairs": pairs.height, "expected pairs": n * (n - 1) // 2,
            "non-overlap": pairs.get_column("apart").sum(), "significant": pairs.get_column("significant").sum(),
            "only non-overlap": (pairs.get_column("apart") & ~pairs.get_column("significant")).sum(),
            "only significant": (~pairs.get_column("apart") & pairs.get_column("significant")).sum()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=Path, default=REAL_VOTES, help="the real vote table (parquet)")
    parser.add_argument("--categories", nargs="+", default=["overall", "creative_writing", "math",
                                                            "instruction_following", "hard_prompt"])
    parser.add_argument("--method", default="bt")
    args = parser.parse_args()
    started = time.perf_counter()
    # the category flags are the real ones; the synthetic columns only let the other categories be tagged
    votes = synthesize_missing_columns(load_real_votes(args.votes))
    tags = tag_rows(votes.get_column("id"), [tag_categories(votes)[0]])
    output = compute_rankings(votes, tags, RankingConfig(methods=(args.method,)))
    rows = [resolution(output.leaderboard, output.pairwise_significance, c, args.method) for c in args.categories]
    table = pl.DataFrame(rows).with_columns(
        **{f"{k} %": (100 * pl.col(k) / pl.col("pairs")).round(1) for k in ("non-overlap", "significant")})
    with pl.Config(tbl_cols=20, tbl_width_chars=200):
        print(f"{votes.height:,} real votes; method {args.method}, primary interval "
              f"{output.leaderboard.get_column('ci_method')[0]}; pairs of shown models")
        print(table)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
