"""Regenerate leaderboard_dataset/: a small CONSTRUCTED copy of the layout of LMArena's ratings history.

Run from the repository root: ``python arena_pipeline_tests/data/external/make_leaderboard_dataset.py``.

The layout follows the dataset card of ``lmarena-ai/leaderboard-dataset`` (CC-BY-4.0): one parquet file per subset
and split, ``<subset>/full-00000-of-00001.parquet``, with the columns model_name, organization, license (string),
rating, rating_lower, rating_upper, variance (double), vote_count, rank (int64), category and
leaderboard_publish_date (string, ISO date). The numbers are made up: the 8 models of
``../benchmarks/board.csv`` (models of the 140k dump) on three publication dates, each 10 points above the one
before, so a test reads from the ratings which publication was chosen; ``text_style_control`` is 5 points above
``text``; one publication has an extra model only on it and a category the map does not know.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

HERE = Path(__file__).parent
DATES = ("2025-06-02", "2025-08-14", "2025-11-05")
CATEGORIES = ("full", "creative_writing", "hard_6")
SCHEMA = {"model_name": pl.String, "organization": pl.String, "license": pl.String, "rating": pl.Float64,
          "rating_lower": pl.Float64, "rating_upper": pl.Float64, "variance": pl.Float64, "vote_count": pl.Int64,
          "rank": pl.Int64, "category": pl.String, "leaderboard_publish_date": pl.String}


def subset_rows(style_offset: float) -> pl.DataFrame:
    board = pl.read_csv(HERE.parent / "benchmarks" / "board.csv")
    rows = []
    for i, date in enumerate(DATES):
        for category in CATEGORIES + (("expert",) if i == 2 else ()):
            for rank, (model, rating) in enumerate(board.select("model", "rating").iter_rows(), start=1):
                value = rating + 10 * i + style_offset
                rows.append((model, "an organization", "Proprietary", value, value - 8.0, value + 8.0, 16.0,
                             5000 + 100 * rank, rank, category, date))
            if i == 1:  # a model on one publication only
                rows.append(("a-model-of-one-publication", None, None, 1100.0, 1090.0, 1110.0, 25.0, 700, 9,
                             category, date))
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


def main() -> None:
    for subset, offset in (("text", 0.0), ("text_style_control", 5.0)):
        out = HERE / "leaderboard_dataset" / subset / "full-00000-of-00001.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        subset_rows(offset).write_parquet(out)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
