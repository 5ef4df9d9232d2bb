"""Report rendering (the publish step's ``leaderboard_report``) on the 135,634 real votes.

Ranks the real votes once (every category; style columns SYNTHETIC, as in bench_ranking.py), stores
the published tables as ``arena.*`` in a DuckDB file, then times what the publish step does after a
publication: read the published views (``presentation.read.read_published``) and render the page
(``presentation.report.render_report``). Prints the best and median of ``--repeat`` runs, the page
size and the number of model panels.

``python benchmarks/bench_report.py [--workdir DIR] [--repeat N] [--bootstrap R] [--benchmarks PATH]``;
the warehouse is kept in the workdir so another version of the code can render from the same
tables. ``--benchmarks``: also store the comparison with that benchmark file (any layout
``ARENA_BENCHMARKS`` accepts) as the live publication's ``benchmark_scores`` and
``benchmark_agreement``, so the page carries the benchmark panel.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
from bench_ranking import synthesize_missing_columns  # noqa: E402  (benchmarks/ is on sys.path)
from real_votes import load_real_votes  # noqa: E402

from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.dataset.models import load_aliases
from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.tags import tag_rows
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.core.validation.benchmarks import benchmark_agreement, match_scores, read_benchmarks
from arena_pipeline.presentation.read import read_published
from arena_pipeline.presentation.report import render_report


def build_warehouse(path: Path, bootstrap: int) -> None:
    battles = synthesize_missing_columns(load_real_votes())
    battles = battles.with_columns(model_a_canonical=pl.col("model_a"), model_b_canonical=pl.col("model_b"))
    tags = tag_rows(battles.get_column("id"), [tag_categories(battles)[0]])
    out = compute_rankings(battles, tags, RankingConfig(bootstrap_rounds=bootstrap))
    revision = pl.lit("bench").alias("dump_revision")
    frames = {"leaderboard": out.leaderboard, "pairwise": out.pairwise,
              "style_coefficients": out.style_coefficients, "unrated_models": out.unrated_models,
              "board_status": out.board_status, "battles": battles}
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA arena")
        for name, frame in frames.items():
            con.register("frame", frame.with_columns(revision))
            con.execute(f"CREATE TABLE arena.{name} AS SELECT * FROM frame")
            con.unregister("frame")


def add_benchmarks(path: Path, scores_path: str) -> None:
    """Store the comparison of the stored board with ``scores_path`` as publication 1's tables."""
    with duckdb.connect(str(path)) as con:
        board = con.execute("SELECT * FROM arena.leaderboard").pl()
        scores = match_scores(read_benchmarks(scores_path, load_aliases()), board.get_column("model").unique())
        agreement = benchmark_agreement(board, scores)
        tables = json.dumps({"benchmark_scores": "bench", "benchmark_agreement": "bench"})
        con.execute("CREATE OR REPLACE TABLE arena.publications AS SELECT 1::BIGINT AS publication_id, "
                    f"'bench' AS revision, '{tables}' AS tables, '{{}}' AS settings")
        for name, frame in (("benchmark_scores", scores), ("benchmark_agreement", agreement)):
            con.register("frame", frame)
            con.execute(f"CREATE OR REPLACE TABLE arena.{name} AS SELECT * FROM frame")
            con.unregister("frame")
    matched = scores.filter(pl.col("matched")).get_column("canonical").n_unique()
    print(f"benchmarks {scores_path}: {scores.height} rows, {matched} models matched, "
          f"{agreement.height} agreement rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bootstrap", type=int, default=100)
    parser.add_argument("--benchmarks", default=None, help="a benchmark scores file: render the panel too")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_report_"))
    workdir.mkdir(parents=True, exist_ok=True)
    warehouse = workdir / "warehouse.duckdb"
    if not warehouse.exists():
        t0 = time.perf_counter()
        build_warehouse(warehouse, args.bootstrap)
        print(f"warehouse {warehouse} built in {time.perf_counter() - t0:.1f} s")
    if args.benchmarks:
        add_benchmarks(warehouse, args.benchmarks)
    reads, renders = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        with connect_warehouse(str(warehouse), read_only=True) as con:
            pub = read_published(con)
        t1 = time.perf_counter()
        page = render_report(pub, workdir / "index.html")
        reads.append(t1 - t0)
        renders.append(time.perf_counter() - t1)
    total = np.add(reads, renders)
    print(f"{pub.leaderboard.height:,} leaderboard rows, {pub.pairwise.height:,} pairs, "
          f"{len(pub.categories())} categories, {len(pub.models())} model panels, "
          f"benchmark panel: {f'publication {pub.benchmarks.publication_id}' if pub.benchmarks else 'none'}; "
          f"page {page.stat().st_size / 1e6:.2f} MB")
    print(f"read  : best {min(reads):.3f} s, median {np.median(reads):.3f} s")
    print(f"render: best {min(renders):.3f} s, median {np.median(renders):.3f} s")
    print(f"total : best {total.min():.3f} s, median {np.median(total):.3f} s ({args.repeat} runs)")


if __name__ == "__main__":
    main()
