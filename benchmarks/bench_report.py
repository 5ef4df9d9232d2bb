"""Report rendering (the publish step's ``leaderboard_report``) on the 135,634 real votes.

Ranks the real votes once (every category; style columns SYNTHETIC, as in bench_ranking.py), stores
the published tables as ``arena.*`` in a DuckDB file, then times what the publish step does after a
publication: read the published views (``presentation.read.read_published``) and render the page
(``presentation.report.render_report``). Prints the best and median of ``--repeat`` runs, the page
size and the number of model panels.

``python benchmarks/bench_report.py [--workdir DIR] [--repeat N] [--bootstrap R]``; the warehouse
is kept in the workdir (``--keep``) so another version of the code can render from the same tables.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from arena_pipeline.core.categories import tag_categories
from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.presentation.read import read_published
from arena_pipeline.presentation.report import render_report
from bench_ranking import synthesize_missing_columns  # noqa: E402  (benchmarks/ is on sys.path)
from real_votes import load_real_votes  # noqa: E402


def build_warehouse(path: Path, bootstrap: int) -> None:
    battles = synthesize_missing_columns(load_real_votes())
    battles = battles.with_columns(model_a_canonical=pl.col("model_a"), model_b_canonical=pl.col("model_b"))
    tags, _ = tag_categories(battles)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bootstrap", type=int, default=100)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_report_"))
    workdir.mkdir(parents=True, exist_ok=True)
    warehouse = workdir / "warehouse.duckdb"
    if not warehouse.exists():
        t0 = time.perf_counter()
        build_warehouse(warehouse, args.bootstrap)
        print(f"warehouse {warehouse} built in {time.perf_counter() - t0:.1f} s")
    reads, renders = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        with duckdb.connect(str(warehouse), read_only=True) as con:
            pub = read_published(con)
        t1 = time.perf_counter()
        page = render_report(pub, workdir / "index.html")
        reads.append(t1 - t0)
        renders.append(time.perf_counter() - t1)
    total = np.add(reads, renders)
    print(f"{pub.leaderboard.height:,} leaderboard rows, {pub.pairwise.height:,} pairs, "
          f"{len(pub.categories())} categories, {len(pub.models())} model panels; "
          f"page {page.stat().st_size / 1e6:.2f} MB")
    print(f"read  : best {min(reads):.3f} s, median {np.median(reads):.3f} s")
    print(f"render: best {min(renders):.3f} s, median {np.median(renders):.3f} s")
    print(f"total : best {total.min():.3f} s, median {np.median(total):.3f} s ({args.repeat} runs)")


if __name__ == "__main__":
    main()
