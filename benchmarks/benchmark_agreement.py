"""Our boards against automated benchmark scores: the arena.benchmark_agreement table, printed.

Run (from the repository root)::

    .venv/bin/python benchmarks/benchmark_agreement.py [--scores PATH] [--fixture]
        [--votes PATH] [--bootstrap-rounds N] [--seed N]

Default: our Bradley-Terry boards on the real 135,634 votes (``../shared/data/real/``, see
``real_votes.py``; overall, creative writing, math, instruction following and hard prompt, the
categories the file supports) against ``benchmarks/data/kimi_k2_instruct_eval.csv`` (public
scores of seven chat models, provenance in ``benchmarks/data/README.md``). ``--scores`` reads any
file ``ARENA_BENCHMARKS`` accepts (long, wide, the Open LLM Leaderboard layout, or a Hub id).

``--fixture``: the test fixture instead (``arena_pipeline_tests/data/benchmarks/``: the constructed
board ``board.csv`` against ``long.csv``, ``wide.csv`` and ``open_llm_leaderboard.csv``), whose
coefficients are known by construction (monotone 1, reversed -1, two swaps: Spearman 0.952,
Kendall 0.857; ``tiny`` has three models, so no coefficient).

Prints the matching (reasons) and, per (category, benchmark), n matched, Spearman and Kendall
with their bootstrap intervals, the note, and the most disagreeing models.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import polars as pl

from arena_pipeline.core.dataset.models import add_canonical_columns, load_aliases
from arena_pipeline.core.validation.benchmarks import (
    BOOTSTRAP_ROUNDS,
    BOOTSTRAP_SEED,
    benchmark_agreement,
    match_scores,
    read_benchmarks,
)

ROOT = Path(__file__).resolve().parents[1]
SCORES = ROOT / "benchmarks" / "data" / "kimi_k2_instruct_eval.csv"
FIXTURE = ROOT / "arena_pipeline_tests" / "data" / "benchmarks"


def _print_table(agreement: pl.DataFrame) -> None:
    shown = agreement.select(
        "category", "benchmark", "n_matched",
        pl.format("{} [{}, {}]", *[pl.col(c).round(3) for c in ("spearman", "spearman_lower", "spearman_upper")])
        .fill_null("-").alias("spearman [95%]"),
        pl.format("{} [{}, {}]", *[pl.col(c).round(3) for c in ("kendall", "kendall_lower", "kendall_upper")])
        .fill_null("-").alias("kendall [95%]"),
        pl.col("note").fill_null(""),
        pl.col("disagreements").list.eval(
            pl.format("{} {}/{}", pl.element().struct.field("model"), pl.element().struct.field("our_rank"),
                      pl.element().struct.field("benchmark_rank"))).list.join("; ")
        .alias("most disagreeing (model ours/theirs)"),
    )
    print(shown)


def _our_boards(votes: Path | None, rounds: int) -> pl.DataFrame:
    from real_votes import REAL_VOTES, load_real_votes  # benchmarks/ is on sys.path

    from arena_pipeline.core.dataset.categories import tag_categories
    from arena_pipeline.core.ranking import RankingConfig, compute_rankings
    from arena_pipeline.core.ranking.tags import tag_rows

    t0 = time.perf_counter()
    battles = add_canonical_columns(load_real_votes(votes or REAL_VOTES), load_aliases())
    battle_categories, _ = tag_categories(battles)
    output = compute_rankings(
        battles.with_columns(model_a=pl.col("model_a_canonical"), model_b=pl.col("model_b_canonical")),
        tag_rows(battles.get_column("id"), [battle_categories]),
        RankingConfig(methods=("bt",), bootstrap_rounds=rounds))
    board = output.leaderboard
    print(f"votes: {battles.height}; bt boards in {time.perf_counter() - t0:.1f} s: "
          + ", ".join(f"{c} {n}" for c, n in board.group_by("category").len().sort("category").iter_rows())
          + " models")
    return board


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scores", default=str(SCORES), help="benchmark scores (a file or a Hub id)")
    parser.add_argument("--fixture", action="store_true", help="the test fixture instead of the real votes")
    parser.add_argument("--votes", type=Path, help="the real vote table (default ../shared/data/real/...)")
    parser.add_argument("--bootstrap-rounds", type=int, default=BOOTSTRAP_ROUNDS)
    parser.add_argument("--seed", type=int, default=BOOTSTRAP_SEED)
    args = parser.parse_args()
    pl.Config.set_tbl_rows(200)
    pl.Config.set_tbl_cols(20)
    pl.Config.set_tbl_width_chars(250)
    pl.Config.set_fmt_str_lengths(120)
    pl.Config.set_tbl_hide_dataframe_shape(True)
    pl.Config.set_tbl_hide_column_data_types(True)

    aliases = load_aliases()
    if args.fixture:
        board = pl.read_csv(FIXTURE / "board.csv").with_columns(category=pl.lit("overall"), method=pl.lit("bt"))
        files = [FIXTURE / "long.csv", FIXTURE / "wide.csv", FIXTURE / "open_llm_leaderboard.csv"]
    else:
        board = _our_boards(args.votes, 0).filter(pl.col("method") == "bt")
        files = [args.scores]
    for location in files:
        print(f"\n== {Path(str(location)).name}")
        scores = match_scores(read_benchmarks(location, aliases), board.get_column("model").unique())
        print(scores.group_by("reason").agg(pl.col("model").unique().sort().alias("models"))
              .sort("reason"))
        t0 = time.perf_counter()
        agreement = benchmark_agreement(board, scores, rounds=args.bootstrap_rounds, seed=args.seed)
        print(f"agreement in {time.perf_counter() - t0:.2f} s "
              f"({args.bootstrap_rounds} bootstrap rounds over models, seed {args.seed}):")
        _print_table(agreement)


if __name__ == "__main__":
    main()
