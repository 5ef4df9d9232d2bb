"""Wall time of the quality suites and the quarantine split on a full-size battles table.

Run::

    .venv/bin/python benchmarks/bench_quality.py [--votes PATH] [--repeat N]

The battles frame has the real dump's 135,634 rows: ``id``, ``model_a``, ``model_b``,
``winner`` and the 12 ``category_tag`` fields come from the real vote table
(``../shared/data/real/arena_hp140k_votes_with_category_tag.parquet`` from the repository root); the columns that file
lacks (session, order, language, is_code, timestamp, every conv_metadata count, the message
counts and provenance) are SYNTHETIC, drawn from a seeded generator with plausible
distributions (90% one-turn votes, 7% two, 3% three: close to the real 100-row sample). Every
row's ``dump`` is the real dump's id (``constants.DATASET_ID``) and ``also_in_dumps`` is null,
as the loader writes a vote of one dump. The messages frame is synthetic too: per battle and
side, one user and one assistant message per turn (~4.5 rows per battle), with its battle's
``dump``.

It prints the time to import GX and create its context (paid once per process), then the
validation wall time of each suite (pandas conversion included) and of ``split_quarantine``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl
from real_votes import REAL_COLUMNS, REAL_VOTES, load_real_votes  # noqa: E402  (benchmarks/ is on sys.path)

from arena_pipeline.constants import DATASET_ID
from arena_pipeline.core.schema import BATTLES_SCHEMA, MESSAGES_SCHEMA

SEED = 20250529


def real_battles(path: Path = REAL_VOTES, seed: int = SEED) -> pl.DataFrame:
    """The real votes mapped to battles columns, padded with synthetic values (see module doc)."""
    frame = load_real_votes(path).select("id", "model_a", "model_b", "winner", *REAL_COLUMNS.values())
    frame = frame.with_columns(model_a_canonical=pl.col("model_a"), model_b_canonical=pl.col("model_b"))
    n = frame.height
    rng = np.random.default_rng(seed)
    turns = rng.choice([1, 2, 3], n, p=[0.9, 0.07, 0.03])
    order = rng.integers(1, 4, n)
    synthetic: dict[str, np.ndarray | list] = {
        "evaluation_session_id": [f"session-{i // 2:06d}" for i in range(n)],
        "evaluation_order": order,
        "language": rng.choice(["en", "pl", "de", "ru", "zh", "und"], n),
        "is_code": rng.random(n) < 0.3,
        "timestamp": np.datetime64("2025-04-17T00:00:00", "us")
        + rng.integers(0, 100 * 86_400, n).astype("timedelta64[s]"),
        "sum_user_tokens": rng.integers(1, 2000, n),
        "turns": turns,
        "n_messages_a": 2 * turns,
        "n_messages_b": 2 * turns,
        "n_user_messages_a": turns,
        "n_user_messages_b": turns,
        "full_conversation_turns": turns + order - 1,
        "source_file": ["data/train-00000-of-00007.parquet"] * n,
        "source_row": np.arange(n),
    }
    for side in ("a", "b"):
        synthetic[f"sum_assistant_{side}_tokens"] = rng.integers(1, 4000, n)
        synthetic[f"context_{side}_tokens"] = rng.integers(0, 500, n)
        for h in range(1, 7):
            synthetic[f"header_count_{side}_h{h}"] = rng.poisson(0.5, n)
        for kind in ("ordered", "unordered"):
            synthetic[f"list_count_{side}_{kind}"] = rng.poisson(3, n)
        synthetic[f"bold_count_{side}_asterisk"] = rng.poisson(6, n)
        synthetic[f"bold_count_{side}_underscore"] = rng.poisson(0.1, n)
    frame = frame.with_columns(pl.DataFrame(synthetic), dump=pl.lit(DATASET_ID),
                               also_in_dumps=pl.lit(None, pl.String))
    return frame.select([pl.col(name).cast(dtype) for name, dtype in BATTLES_SCHEMA.items()])


def synthetic_messages(battles: pl.DataFrame) -> pl.DataFrame:
    """Per battle and side, (user, assistant) x turns messages with short synthetic texts."""
    frame = (
        battles.select(pl.col("id").alias("battle_id"), "turns", "dump", pl.lit(["a", "b"]).alias("side"))
        .explode("side")
        .with_columns(pl.int_ranges(0, 2 * pl.col("turns")).alias("position"))
        .explode("position")
    )
    return frame.select(
        "battle_id",
        "side",
        (pl.col("position") // 2 + 1).alias("turn"),
        "position",
        pl.when(pl.col("position") % 2 == 0).then(pl.lit("user")).otherwise(pl.lit("assistant"))
        .alias("role"),
        pl.lit("text").alias("content_type"),
        pl.format("synthetic message {} of battle {}", "position", "battle_id").alias("text"),
        pl.lit(1).alias("n_parts"),
        pl.lit([], dtype=pl.List(pl.String)).alias("images"),
        pl.when(pl.col("side") == "b").then(pl.col("position") * 7 + 3).alias("num_tokens"),
        "dump",
    ).select([pl.col(name).cast(dtype) for name, dtype in MESSAGES_SCHEMA.items()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=Path, default=REAL_VOTES)
    parser.add_argument("--repeat", type=int, default=3, help="validations per suite")
    args = parser.parse_args()

    t0 = time.perf_counter()
    battles = real_battles(args.votes)
    messages = synthetic_messages(battles)
    print(
        f"frames built in {time.perf_counter() - t0:.2f} s: battles {battles.shape}, "
        f"messages {messages.shape}"
    )

    from arena_pipeline.core import quality, quarantine

    t0 = time.perf_counter()
    quality._context()  # GX import + ephemeral context: once per process
    setup = time.perf_counter() - t0
    print(f"GX import + context: {setup:.2f} s (once per process)")

    t0 = time.perf_counter()
    clean, quarantined = quarantine.split_quarantine(battles)
    print(
        f"split_quarantine: {time.perf_counter() - t0:.2f} s "
        f"({clean.height} clean, {quarantined.height} quarantined: "
        f"{dict(quarantine.count_by_rule(quarantined).iter_rows())})"
    )

    total = 0.0
    for name, frame in (("battles", battles), ("messages", messages)):
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            report = quality.validate_frame(frame, name)
            times.append(time.perf_counter() - t0)
        best, worst = min(times), max(times)
        total += best
        failed = report.failures()
        print(
            f"suite {name:<9} {frame.height:>8} rows x {frame.width} cols, "
            f"{report.results.height:>3} expectations: best {best:.2f} s, worst {worst:.2f} s; "
            f"failed: {failed.select('expectation_id', 'severity', 'unexpected_count').rows()}"
        )
    print(
        f"all suites (best of each): {total:.2f} s; "
        f"with GX import + context: {total + setup:.2f} s"
    )


if __name__ == "__main__":
    main()
