"""Cost of the publication gate on a full-size dump: a full refresh, a re-rank-only publication, a full re-run.

Run::

    .venv/bin/python benchmarks/bench_publication.py                 # 135,634 synthetic votes
    .venv/bin/python benchmarks/bench_publication.py --rows 20000    # quick run

Prints, for each of the three runs (refresh_job, rerank_job with other ranking settings, refresh_job
again on the same revision): every step's wall time, the publication step's time, the warehouse
file's size after the run (so the extra disk per publication), and which tables the publication
rebuilt and which it took from the live publication. The re-rank must copy none of the large tables
(battles, messages, context_messages, preference_pairs) and its ranking step is compared with the
full refresh's ranking step measured in the same process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg

sys.path.insert(0, str(Path(__file__).parent))
from bench_ingest import add_dump_arguments, dump_from_args  # noqa: E402

from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.definitions import defs  # noqa: E402
from arena_pipeline.resources import DumpSource, ReportSettings, Warehouse  # noqa: E402

LARGE = ("battles", "messages", "context_messages", "preference_pairs")


def _run(instance, job_name: str, resources: dict, rank: dict) -> tuple[dict, float, bool]:
    job = defs.resolve_job_def(job_name)
    started = time.perf_counter()
    result = job.execute_in_process(instance=instance, resources=resources, raise_on_error=False,
                                    run_config={"ops": {"rankings": {"config": rank}}})
    total = time.perf_counter() - started
    steps = {s.step_key: (s.end_time or 0) - (s.start_time or 0) for s in instance.get_run_step_stats(result.run_id)}
    for event in result.all_events:
        if event.is_step_failure:
            print(event.step_failure_data.error.to_string()[:2000])
    return steps, total, result.success


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_dump_arguments(parser)
    args = parser.parse_args(argv)

    dump, meta = dump_from_args(args)
    scratch = Path(tempfile.mkdtemp(prefix="bench_publication_", dir=args.workdir))
    database = scratch / "warehouse.duckdb"
    resources = {
        "dump_source": DumpSource(source=str(dump), cache_dir=str(scratch / "cache")),
        "warehouse": Warehouse(database=str(database)),
        "report_settings": ReportSettings(report_path=str(scratch / "report" / "index.html")),
    }
    print(f"dump      {dump} ({meta['rows']:,} rows, {meta['shards']} shards)")
    print(f"machine   {os.cpu_count()} cores, load avg {os.getloadavg()[0]:.2f}")
    runs = [
        ("full refresh", "refresh_job", {"bootstrap_rounds": 100}),
        ("re-rank only (ties=drop)", "rerank_job", {"bootstrap_rounds": 100, "ties": "drop"}),
        ("full re-run, same revision", "refresh_job", {"bootstrap_rounds": 100}),
    ]
    ranking_seconds = {}
    with dg.instance_for_test() as instance:
        for label, job_name, rank in runs:
            steps, total, ok = _run(instance, job_name, resources, rank)
            size = database.stat().st_size
            with connect_warehouse(str(database), read_only=True) as con:
                pid, rebuilt, tables = con.execute(
                    "SELECT publication_id, rebuilt, tables FROM arena.publications ORDER BY 1 DESC LIMIT 1"
                ).fetchone()
                versions = con.execute("SELECT count(*) FROM duckdb_tables() "
                                       "WHERE schema_name = 'arena_versions'").fetchone()[0]
            ranking_seconds[label] = steps.get("rankings", float("nan"))
            print(f"\n== {label}: {'success' if ok else 'FAILED'} in {total:.1f} s wall; publication {pid}")
            for step, seconds in sorted(steps.items(), key=lambda kv: -kv[1])[:8]:
                print(f"   {step:<28}{seconds:>8.2f} s")
            print(f"   publication step (publication_gate, report included): {steps.get('publication_gate', 0):.2f} s")
            print(f"   warehouse file {size / 2**20:,.1f} MiB, {versions} tables in arena_versions")
            print(f"   rebuilt: {', '.join(sorted(rebuilt))}")
            kept = sorted(t for t in LARGE if t not in rebuilt)
            print(f"   large tables taken from the live publication (not copied): {', '.join(kept) or 'none'}")
            print(f"   tables: {json.dumps(json.loads(tables))[:300]}...")
    full, rerank = ranking_seconds["full refresh"], ranking_seconds["re-rank only (ties=drop)"]
    print(f"\nranking step: full refresh {full:.2f} s, re-rank {rerank:.2f} s "
          f"(difference {rerank - full:+.2f} s, ratio {rerank / full:.2f})")


if __name__ == "__main__":
    main()
