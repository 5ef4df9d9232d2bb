"""Wall time per step and peak RSS of a whole refresh (every asset and check) on a full-size dump.

Run::

    .venv/bin/python benchmarks/bench_pipeline.py                 # 135,634 synthetic votes
    .venv/bin/python benchmarks/bench_pipeline.py --rows 20000    # quick run

The dump is bench_ingest.py's synthetic full-size dump (same cache under ``--workdir``). The
refresh job runs in this process with in-process steps, as ``dagster dev`` runs it; the figures
are each step's wall time from Dagster's step events (the GX checks included: issue target under
10 s for all suites together) and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg

sys.path.insert(0, str(Path(__file__).parent))
from bench_ingest import add_dump_arguments, dump_from_args  # noqa: E402

from arena_pipeline.definitions import defs  # noqa: E402
from arena_pipeline.resources import DumpSource, ReportSettings, Warehouse  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_dump_arguments(parser)
    parser.add_argument("--bootstrap", type=int, default=100, help="bootstrap rounds (default 100)")
    args = parser.parse_args(argv)

    dump, meta = dump_from_args(args)
    scratch = Path(tempfile.mkdtemp(prefix="bench_pipeline_", dir=args.workdir))
    resources = {
        "dump_source": DumpSource(source=str(dump)),
        "warehouse": Warehouse(database=str(scratch / "warehouse.duckdb")),
        "report_settings": ReportSettings(report_path=str(scratch / "report" / "index.html")),
    }
    job = defs.resolve_job_def("refresh_job")
    started = time.perf_counter()
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(
            instance=instance,
            resources=resources,
            run_config={"ops": {"rankings": {"config": {"bootstrap_rounds": args.bootstrap}}}},
            raise_on_error=False,
        )
        total = time.perf_counter() - started
        stats = instance.get_run_step_stats(result.run_id)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"dump      {dump} ({meta['rows']:,} rows, {meta['shards']} shards)")
    print(f"machine   {os.cpu_count()} cores, load avg {os.getloadavg()[0]:.2f}")
    print(f"result    {'success' if result.success else 'FAILED'} in {total:.1f} s wall, peak RSS {peak_mib:,.0f} MiB")
    print(f"{'step':<28}{'status':<10}{'seconds':>9}")
    for step in sorted(stats, key=lambda s: s.start_time or 0):
        seconds = (step.end_time or 0) - (step.start_time or 0)
        print(f"{step.step_key:<28}{step.status.value if step.status else '?':<10}{seconds:>9.1f}")
    checks = [s for s in stats if s.step_key.endswith("_quality")]
    print(f"quality checks together: {sum((s.end_time or 0) - (s.start_time or 0) for s in checks):.1f} s")
    for event in result.all_events:
        if event.is_failure:
            print(event.message)


if __name__ == "__main__":
    main()
