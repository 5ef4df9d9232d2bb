"""Our Bradley-Terry boards on the real 140k votes against a published (or reference) board.

Run::

    .venv/bin/python benchmarks/compare_external.py [--board PATH] [--publish-date YYYY-MM-DD] [--votes PATH]
        [--aliases PATH] [--category-map PATH] [--bootstrap-rounds N]
        [--elo-k 4] [--elo-rounds 20] [--save-board PATH] [--seed 20250529]

Ours: the real vote table (``../shared/data/real/arena_hp140k_votes_with_category_tag.parquet`` from the repository root,
135,634 votes, 53 models) mapped to battles columns (``category_tag.<tag>.<field>`` ->
``creative_writing``, ``criteria_<c>``, ``instruction_following``, ``math``, ...), model names
canonicalized, categories tagged with ``categories.tag_categories`` (overall, creative writing,
math, instruction following and hard prompt: the file lacks ``is_code``, ``sum_user_tokens``
and ``turns``), then ``compute_rankings`` with ``methods=("bt",)``.

Theirs: ``--board PATH`` (LMArena JSON or CSV, see ``arena_pipeline.core.validation.external``; or a local copy of
LMArena's ratings history, ``lmarena-ai/leaderboard-dataset``: its folder or a parquet file, read with
``core.validation.leaderboard_dataset`` at ``--publish-date``, else the publication nearest the votes' last one, else
the last). No
published board can be downloaded here, so without ``--board`` a reference board is built from
the same votes by an independent method: LMArena's pre-2024 online Elo (K=4, scale 400, base
10, every model starting at 1000, ties and both-bad = half a win, self-battles skipped) over
the votes in the file's order, with ``rating_q025``/``rating_q975`` the 2.5/97.5 percentiles of
``--elo-rounds`` runs over resampled-with-replacement, shuffled votes (LMArena's bootstrap of
that era). It is written in LMArena's JSON shape (to ``--save-board`` or a temporary file)
and read back with ``read_published_board``, so the comparison goes through the same path as a
real published file. Its names are the raw names of the votes; the comparison matches them
through the normalization and alias table.

Prints timings, the merged-names report, the per-category agreement (``compare_boards``), how far
the scales agree (slope, intercept and residual RMS of theirs on ours, the median shift and the RMS
after the best shift), the shift ``alignment_shifts`` would apply to each board, the top of the
overall boards side by side and the largest centred differences.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
from real_votes import REAL_VOTES, load_real_votes  # noqa: E402  (benchmarks/ is on sys.path)

from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.dataset.models import add_canonical_columns, load_aliases, merged_names
from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.tags import tag_rows
from arena_pipeline.core.validation import leaderboard_dataset
from arena_pipeline.core.validation.external import (
    alignment_shifts,
    compare_boards,
    load_category_map,
    read_published_board,
    to_lmarena_json,
)

SEED = 20250529
#: ``--display-names``: how other publications spell some of the votes' names (all resolved
#: by the packaged alias table / normalization; LMArena's own key for Nova Pro is the first).
DISPLAY_NAMES = {
    "amazon.nova-pro-v1:0": "amazon-nova-pro-v1.0",
    "claude-opus-4-20250514": "Claude Opus 4 (20250514)",
    "claude-opus-4-20250514-thinking-16k": "Claude Opus 4 (thinking-16k)",
    "claude-3-5-sonnet-20241022": "Claude 3.5 Sonnet (20241022)",
    "claude-3-7-sonnet-20250219-thinking-32k": "Claude 3.7 Sonnet (thinking-32k)",
    "o3-2025-04-16": "o3",
    "llama-3.3-70b-instruct": "meta-llama/Llama-3.3-70B-Instruct",
    "mistral-medium-2505": "Mistral Medium 3",
    "gemma-3-27b-it": "Gemma_3_27B_IT",
}
SCORE_A = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5, "both_bad": 0.5, "tie (bothbad)": 0.5}


def online_elo(
    a: np.ndarray, b: np.ndarray, score_a: np.ndarray, n_models: int, k: float
) -> np.ndarray:
    """Sequential Elo (scale 400, base 10, start 1000): one update per vote, in order.

    Inherently sequential, so a plain loop over Python floats (fast enough: ~0.1 s per
    100k votes).
    """
    rating = [1000.0] * n_models
    for i, j, s in zip(a.tolist(), b.tolist(), score_a.tolist(), strict=True):
        expected = 1.0 / (1.0 + 10.0 ** ((rating[j] - rating[i]) / 400.0))
        delta = k * (s - expected)
        rating[i] += delta
        rating[j] -= delta
    return np.asarray(rating)


def reference_board(
    battles: pl.DataFrame,
    battle_categories: pl.DataFrame,
    k: float,
    rounds: int,
    seed: int,
    shuffle_seed: int | None = None,
) -> pl.DataFrame:
    """Online-Elo board per category (file order, or shuffled) with bootstrap bounds."""
    frame = battles.filter(pl.col("model_a") != pl.col("model_b"))
    if shuffle_seed is not None:
        frame = frame.sample(fraction=1.0, shuffle=True, seed=shuffle_seed)
    frame = frame.with_row_index("_order")
    names = sorted(set(frame.get_column("model_a")) | set(frame.get_column("model_b")))
    index = pl.Enum(names)
    frame = frame.select(
        "_order",
        pl.col("id").alias("battle_id"),
        pl.col("model_a").cast(index).to_physical().cast(pl.Int64).alias("a"),
        pl.col("model_b").cast(index).to_physical().cast(pl.Int64).alias("b"),
        pl.col("winner").replace_strict(SCORE_A, return_dtype=pl.Float64).alias("s"),
    )
    rng = np.random.default_rng(seed)
    parts = []
    tagged = battle_categories.join(frame, on="battle_id").sort("category", "_order")
    for (category,), part in tagged.partition_by("category", as_dict=True).items():
        a = part.get_column("a").to_numpy()
        b = part.get_column("b").to_numpy()
        s = part.get_column("s").to_numpy()
        present = np.zeros(len(names), dtype=bool)
        present[a] = True
        present[b] = True
        rating = online_elo(a, b, s, len(names), k)
        boot = np.empty((rounds, len(names)))
        for r in range(rounds):
            pick = rng.integers(0, len(a), len(a))  # resampled and in random order
            boot[r] = online_elo(a[pick], b[pick], s[pick], len(names), k)
        lower, upper = (
            np.percentile(boot, [2.5, 97.5], axis=0) if rounds else (rating * np.nan,) * 2
        )
        keep = np.flatnonzero(present)
        parts.append(
            pl.DataFrame(
                {
                    "category": category,
                    "method": "bt",  # stands for LMArena's plain (not style-controlled) keys
                    "model": [names[i] for i in keep],
                    "rating": rating[keep],
                    "ci_lower": lower[keep],
                    "ci_upper": upper[keep],
                },
                nan_to_null=True,
            )
        )
    return pl.concat(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=Path, default=REAL_VOTES)
    parser.add_argument("--board", type=Path, help="published board (LMArena JSON or CSV, or a local copy of "
                        "lmarena-ai/leaderboard-dataset)")
    parser.add_argument("--publish-date", help="with a ratings history: the publication to read (YYYY-MM-DD)")
    parser.add_argument("--aliases", type=Path, help="user alias CSV merged over the packaged one")
    parser.add_argument("--category-map", type=Path, help="user category map CSV")
    parser.add_argument("--bootstrap-rounds", type=int, default=0, help="for our bt board")
    parser.add_argument("--elo-k", type=float, default=4.0)
    parser.add_argument("--elo-rounds", type=int, default=20, help="reference bootstrap runs")
    parser.add_argument("--save-board", type=Path, help="where to write the reference JSON")
    parser.add_argument(
        "--shuffle-seed", type=int, help="run the reference Elo over shuffled votes, not file order"
    )
    parser.add_argument(
        "--display-names",
        action="store_true",
        help="write some reference names as other publications spell them (tests matching)",
    )
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    pl.Config.set_tbl_rows(100)
    pl.Config.set_tbl_cols(20)
    pl.Config.set_tbl_width_chars(200)
    pl.Config.set_fmt_str_lengths(60)
    pl.Config.set_fmt_table_cell_list_len(8)
    pl.Config.set_float_precision(3)

    t0 = time.perf_counter()
    battles = load_real_votes(args.votes)
    aliases = load_aliases(args.aliases)
    category_map = load_category_map(args.category_map)
    print(f"votes: {battles.height} rows, read in {time.perf_counter() - t0:.2f} s")

    t0 = time.perf_counter()
    battles = add_canonical_columns(battles, aliases)
    t_canon = time.perf_counter() - t0
    merged = merged_names(battles, include_renamed=True)
    raw = pl.concat([battles.get_column("model_a"), battles.get_column("model_b")]).n_unique()
    canon = pl.concat(
        [battles.get_column("model_a_canonical"), battles.get_column("model_b_canonical")]
    ).n_unique()
    print(
        f"canonical names: {t_canon * 1000:.0f} ms; {raw} raw names -> {canon} canonical; "
        f"merged or renamed: {merged.height}"
    )
    if merged.height:
        print(merged)

    t0 = time.perf_counter()
    battle_categories, tag_meta = tag_categories(battles)
    print(
        f"categories tagged in {time.perf_counter() - t0:.2f} s: "
        + ", ".join(f"{c} {m['battles']}" for c, m in tag_meta.items() if m["available"])
        + "; unavailable: "
        + ", ".join(c for c, m in tag_meta.items() if not m["available"])
    )

    t0 = time.perf_counter()
    ranking_input = battles.with_columns(
        model_a=pl.col("model_a_canonical"), model_b=pl.col("model_b_canonical")
    )
    config = RankingConfig(methods=("bt",), bootstrap_rounds=args.bootstrap_rounds)
    output = compute_rankings(ranking_input, tag_rows(ranking_input.get_column("id"), [battle_categories]), config)
    ours = output.leaderboard
    print(
        f"our bt boards: {time.perf_counter() - t0:.2f} s "
        f"(bootstrap_rounds={args.bootstrap_rounds}, min_battles={config.min_battles}); "
        + ", ".join(
            f"{c}: {v['models']} models" for c, v in output.metadata["categories"].items()
        )
    )
    excluded = {
        c: [(e["model"], e["n_battles"]) for e in v]
        for c, v in output.metadata["excluded_models"].items()
        if v
    }
    if excluded:
        print(f"excluded from our boards: {excluded}")

    if args.board is None:
        t0 = time.perf_counter()
        elo = reference_board(
            battles, battle_categories, args.elo_k, args.elo_rounds, args.seed, args.shuffle_seed
        )
        if args.display_names:
            elo = elo.with_columns(pl.col("model").replace(DISPLAY_NAMES))
        board_json = to_lmarena_json(elo, category_map)
        tmp = None
        path = args.save_board
        if path is None:
            tmp = tempfile.TemporaryDirectory()
            path = Path(tmp.name) / "reference_elo.json"
        path.write_text(json.dumps(board_json, indent=1), encoding="utf-8")
        order = "file order"
        if args.shuffle_seed is not None:
            order = f"shuffled order (seed {args.shuffle_seed})"
        print(
            f"reference board: online Elo K={args.elo_k:g} in {order}"
            f"{', display names' if args.display_names else ''}, "
            f"{args.elo_rounds} bootstrap runs, keys {sorted(board_json)}: "
            f"{time.perf_counter() - t0:.2f} s -> {path if args.save_board else 'temporary file'}"
        )
    else:
        path, tmp = args.board, None

    t0 = time.perf_counter()
    if leaderboard_dataset.is_history_location(path):
        last = battles.get_column("timestamp").max() if "timestamp" in battles.columns else None
        history = leaderboard_dataset.read_history(leaderboard_dataset.local_files(path), publish_date=args.publish_date,
                                                   near=last, aliases=aliases, category_map=category_map)
        print(f"ratings history: {history.subsets}")
        theirs = history.board
    else:
        theirs = read_published_board(path, aliases, category_map)
    result = compare_boards(ours, theirs, aliases)
    print(f"read + compare: {(time.perf_counter() - t0) * 1000:.0f} ms")
    if tmp is not None:
        tmp.cleanup()

    unknown = theirs.filter(~pl.col("category_known")).get_column("source_category").unique()
    print(f"their unknown category keys (kept): {sorted(unknown)}")
    if result.skipped.height:
        print("their rows of another method (not compared):")
        print(result.skipped)
    print("\nper-category agreement (ratings centred on the matched models' mean):")
    print(
        result.summary.select(
            "category",
            "n_ours",
            "n_theirs",
            "n_matched",
            "spearman",
            "kendall",
            "mean_abs_diff",
            "max_abs_diff",
        )
    )
    print("\nhow far the scales agree (theirs ~ intercept + slope * ours; RMS of the residuals; the median "
          "shift; RMS after the best shift):")
    print(
        result.summary.select(
            "category", "n_matched", "slope", "intercept", "rms_residual", "median_shift", "rms_after_shift"
        )
    )
    print("\nalignment (ARENA_ALIGN_TO_PUBLISHED_BOARD): shift per board over the matched shown models:")
    print(alignment_shifts(ours, theirs, aliases))
    print(
        result.summary.select("category", "unmatched_ours", "unmatched_theirs", "ambiguous")
        .filter(
            (pl.col("unmatched_ours").list.len() > 0)
            | (pl.col("unmatched_theirs").list.len() > 0)
            | (pl.col("ambiguous").list.len() > 0)
        )
        .to_dicts()
    )
    matched = result.models.filter(pl.col("status") == "matched")
    overall = matched.filter(pl.col("category") == "overall")
    print(f"\noverall, top {args.top} of ours:")
    print(
        overall.sort("our_rank")
        .head(args.top)
        .select("model", "our_rank", "their_rank", "our_rating", "their_rating", "diff")
    )
    print("\nlargest |diff| per category:")
    print(
        matched.sort(pl.col("diff").abs(), descending=True)
        .group_by("category", maintain_order=True)
        .head(2)
        .select(
            "category", "model", "our_rank", "their_rank", "our_centred", "their_centred", "diff"
        )
    )
    rank_moves = overall.select((pl.col("our_rank") - pl.col("their_rank")).abs().alias("d"))
    print(
        f"\noverall rank displacement |our_rank - their_rank|: mean "
        f"{rank_moves.get_column('d').mean():.2f}, max {rank_moves.get_column('d').max()}, "
        f"models within 2 places: {(rank_moves.get_column('d') <= 2).sum()}/{overall.height}"
    )


if __name__ == "__main__":
    main()
