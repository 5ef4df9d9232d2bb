"""Figures of the dump family (issue 14): per-dump boards' added ranking time, the discovery tick.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_family.py [--ticks N] [--rounds R] [--skip-ranking]

[1] The rankings step on the 135,634 real votes (``shared/data/real/``, with bench_ranking.py's
    synthetic style columns), bt + bt_style + spectral with a R-round bootstrap (default 100) over
    every category: the combined board alone, then
    ``core.ranking.per_dump_leaderboards`` with the votes as one dump (nothing is refitted) and split
    into two and four pseudo-dumps by row order (every dump refitted: the added time).
[2] The new-dump sensor against the fake Hub on 127.0.0.1 with the four fixture dumps
    (``arena_pipeline_dev/dump_fixtures.py``): ``ARENA_DATASETS=lmsys/chatbot_arena_conversations``
    plus ``ARENA_DISCOVER=lmarena-ai/arena-human-preference-*``; wall time of a first tick, of N
    unchanged ticks (median) and of the tick after a fifth dataset appears.

Prints figures only; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.ranking import RankingConfig, compute_rankings, per_dump_leaderboards
from arena_pipeline.core.ranking.tags import tag_rows


def ranking_figures(rounds: int) -> None:
    from bench_ranking import synthesize_missing_columns  # benchmarks/ is on sys.path as a script
    from real_votes import load_real_votes

    # bench_ranking's SYNTHETIC style columns, is_code, language, tokens and turns: bt_style is fitted
    votes = synthesize_missing_columns(load_real_votes())
    tags = tag_rows(votes.get_column("id"), [tag_categories(votes)[0]])
    config = RankingConfig(methods=("bt", "bt_style", "spectral"), bootstrap_rounds=rounds)
    started = time.perf_counter()
    combined = compute_rankings(votes, tags, config).leaderboard
    base = time.perf_counter() - started
    print(f"[1] real votes: {votes.height} battles; combined board (bt + bt_style + spectral, {rounds}-round "
          f"bootstrap, every category): {base:.2f} s")
    for parts in (1, 2, 4):
        dumped = votes.with_columns(
            dump=pl.format("dump-{}", (pl.int_range(pl.len()) * parts // pl.len()).cast(pl.String)),
            also_in_dumps=pl.lit(None, pl.String))
        started = time.perf_counter()
        boards, seconds = per_dump_leaderboards(dumped, tags, config, combined)
        added = time.perf_counter() - started
        print(f"    per-dump boards, {parts} dump(s): +{added:.2f} s ({boards.height} rows; per dump "
              f"{', '.join(f'{s:.2f}' for s in seconds.values())} s)")


def discovery_figures(ticks: int) -> None:
    import dagster as dg

    from arena_pipeline.resources import DumpSource
    from arena_pipeline.sensors import new_dump_sensor
    from arena_pipeline_dev import dump_fixtures as fx
    from arena_pipeline_dev.hub_server import fake_hub_server

    with tempfile.TemporaryDirectory() as tmp, fake_hub_server(Path(tmp) / "hub") as hub:
        for dataset, files in fx.family_files().items():
            hub.publish(dataset, "main", files)
        source = DumpSource(datasets=fx.DUMP_33K, discover="lmarena-ai/arena-human-preference-*",
                            cache_dir=str(Path(tmp) / "cache"), hf_endpoint=hub.url)
        with dg.instance_for_test() as instance:
            def tick(cursor):
                context = dg.build_sensor_context(cursor=cursor, instance=instance,
                                                  resources={"dump_source": source})
                started = time.perf_counter()
                result = new_dump_sensor.evaluate_tick(context)
                return result, time.perf_counter() - started

            first, first_s = tick(None)
            cursor = first.cursor
            before = len(hub.requests())
            times = [tick(cursor)[1] for _ in range(ticks)]
            requests = (len(hub.requests()) - before) / ticks
            hub.publish("lmarena-ai/arena-human-preference-200k", "main", fx.family_files()[fx.DUMP_140K])
            new, new_s = tick(cursor)
        print(f"[2] discovery tick (fake Hub on loopback, {os.cpu_count()} CPUs): first {first_s * 1000:.0f} ms "
              f"({len(first.run_requests)} run request); unchanged: median {statistics.median(times) * 1000:.0f} ms "
              f"over {ticks} ticks, {requests:.0f} Hub requests each (1 listing + 1 revision), no download; "
              f"a fifth dataset appears: {new_s * 1000:.0f} ms, run requested for "
              f"{len(new.run_requests[0].run_config['ops']['raw_dump']['config']['revisions'])} dumps")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--skip-ranking", action="store_true")
    args = parser.parse_args()
    print(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not args.skip_ranking:
        ranking_figures(args.rounds)
    discovery_figures(args.ticks)


if __name__ == "__main__":
    main()
