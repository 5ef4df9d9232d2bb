"""The load (``fill_dump``) with 1, 2, 4 worker processes: wall and CPU seconds, and peak RSS of its processes.

Run::

    nice -n 10 .venv/bin/python benchmarks/bench_load_workers.py --rows 135634 --workers 1,2,4
    nice -n 10 .venv/bin/python benchmarks/bench_load_workers.py --rows 135634 --phases --workers 1,2

The dump is bench_ingest.py's synthetic dump (cached under ``--workdir``). Each load runs in a fresh
subprocess; a sampler (psutil, every 50 ms) adds up the RSS and CPU time of the subprocess and every process
under it (the forkserver and its workers), their proportional set size (PSS: pages shared with the
forkserver, the imported libraries, counted once), and the largest single worker's RSS; CPU time is
also given per kind of process (the main one, the forkserver, the workers together, any other), with its
system part (page faults, mostly: the allocators giving pages back, ``parallel.WORKER_JEMALLOC``). A load's
memory is bounded by a batch per process: the per-worker peak must not grow with the dump nor with the
workers, and the total peak by at most a worker's peak per added worker.

``--phases`` first prints the CPU seconds of each phase of the load of the first shard, in one process
(:func:`phases`): where a worker's time goes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))
from bench_ingest import add_dump_arguments, dump_from_args  # noqa: E402

MB = 1024 * 1024


def child(dump: Path, out: Path, workers: int) -> None:
    """One load of ``dump`` into ``out`` with ``workers`` processes; print its figures as JSON."""
    from arena_pipeline.core.ingest import load
    from arena_pipeline.core.ingest.local_dump import local_manifest
    from arena_pipeline.core.ingest.sources import parse_source

    manifest = local_manifest(parse_source(str(dump / "data")))
    started = time.perf_counter()
    report = load.fill_dump(manifest, {name: out / name for name in load.load_tables()}, workers=workers)
    print(json.dumps({"seconds": time.perf_counter() - started, "rows": report.rows}))


def _least_cpu(run, repeat: int) -> float:
    """The least CPU seconds (every thread of this process) of ``repeat`` calls of ``run``."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best


def phases(dump: Path, repeat: int = 3) -> dict[str, float]:
    """CPU seconds of each phase of one worker's load of the dump's first shard, in this process: the least of
    ``repeat`` runs of each. Polars' reader decodes in threads of its own while the batches are used, so the
    reading phases are measured as runs of the read alone, of the read and screening, and of both and the
    battles' flattening (each phase the difference); the tables and their Parquet writing (in memory, the
    load's codec) are timed on the batches once read."""
    import io

    import polars as pl
    import pyarrow.parquet as pq

    from arena_pipeline.core.dataset.adapters import ARENA_140K
    from arena_pipeline.core.ingest import load
    from arena_pipeline.core.ingest.local_dump import local_manifest
    from arena_pipeline.core.ingest.sources import parse_source
    from arena_pipeline.core.ingest.tables import LOAD_TABLES, Batch
    from arena_pipeline.core.store.versions import PARQUET_COMPRESSION, ROW_GROUP_ROWS

    shard = local_manifest(parse_source(str(dump / "data"))).files[0]
    path = Path(shard.path)
    parquet = pq.ParquetFile(path, pre_buffer=False)
    columns = ARENA_140K.read_columns(parquet.schema_arrow)

    def drain(batches) -> None:
        for _ in batches:
            pass

    read = _least_cpu(lambda: drain(load._parquet_batches(path, parquet, columns, ARENA_140K)), repeat)
    screened = _least_cpu(lambda: drain(load._iter_parquet(path)), repeat)
    flat = _least_cpu(lambda: drain(load._read_file(shard, None, None, "bench", ARENA_140K)), repeat)
    batches = [Batch(pl.from_arrow(table), battles, "bench", "r") for table, battles, _ in
               load._read_file(shard, None, None, "bench", ARENA_140K)]
    figures = {"read (Polars' streaming reader)": read, "screening and conversion": screened - read,
               "battles and conversation defects": flat - screened}
    made: dict[str, list[pl.DataFrame]] = {}
    for table in (t for t in LOAD_TABLES if t.keyed_by_battle):
        figures[table.name] = _least_cpu(lambda table=table: [table.batch(b) for b in batches], repeat)
        made[table.name] = [table.batch(b) for b in batches]

    def write(frames: list[pl.DataFrame]) -> None:
        for frame in frames:
            frame.write_parquet(io.BytesIO(), row_group_size=ROW_GROUP_ROWS, **PARQUET_COMPRESSION)

    for name, frames in made.items():
        figures[f"writing {name}"] = _least_cpu(lambda frames=frames: write(frames), repeat)
    return {"shard": shard.name, "votes": sum(b.battles.height for b in batches), "cpu": figures}


def measure(dump: Path, workdir: Path, workers: int) -> dict:
    """Run :func:`child` in a subprocess, sampling its process tree."""
    out = Path(tempfile.mkdtemp(prefix="load_workers_", dir=workdir))
    process = psutil.Popen([sys.executable, __file__, "--child", str(dump), str(out), str(workers)],
                           stdout=subprocess.PIPE, text=True)
    peak_total = peak_worker = peak_pss = 0
    cpu: dict[int, float] = {}
    system: dict[int, float] = {}
    roles: dict[int, str] = {process.pid: "main"}
    while process.poll() is None:
        try:
            tree = [process, *process.children(recursive=True)]
            for p in tree:
                if p.pid not in roles:  # the workers are forked by the forkserver (a child of the main process)
                    roles[p.pid] = ("worker" if p.ppid() != process.pid else
                                    "forkserver" if "forkserver" in " ".join(p.cmdline()) else "other")
            rss = {p.pid: p.memory_info().rss for p in tree}
            # proportional set size: the pages the workers share with the forkserver counted once in all
            pss = sum(p.memory_full_info().pss for p in tree)
            for p in tree:
                times = p.cpu_times()
                cpu[p.pid], system[p.pid] = times.user + times.system, times.system
        except psutil.Error:
            continue
        peak_total, peak_pss = max(peak_total, sum(rss.values())), max(peak_pss, pss)
        peak_worker = max([peak_worker, *(v for pid, v in rss.items() if pid != process.pid)])
        time.sleep(0.05)
    figures = json.loads(process.stdout.read().strip().splitlines()[-1])
    shutil.rmtree(out)
    by_role: dict[str, float] = {}
    system_by_role: dict[str, float] = {}
    for pid, seconds in cpu.items():
        role = roles.get(pid, "worker")
        by_role[role] = by_role.get(role, 0.0) + seconds
        system_by_role[role] = system_by_role.get(role, 0.0) + system[pid]
    return {"workers": workers, **figures, "cpu_seconds": sum(cpu.values()), "cpu_by_role": by_role,
            "system_by_role": system_by_role, "peak_total_mb": peak_total / MB, "peak_pss_mb": peak_pss / MB,
            "peak_worker_mb": peak_worker / MB}


def main(argv: list[str] | None = None) -> None:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_dump_arguments(parser)
    parser.add_argument("--workers", default="1,2,4", help="worker counts to run (default 1,2,4; empty: none)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each count, alternating")
    parser.add_argument("--phases", action="store_true",
                        help="first, the CPU seconds of each phase of the load on the first shard (one process)")
    args = parser.parse_args(argv)
    dump, meta = dump_from_args(args)
    print(f"dump {dump} ({meta['rows']:,} rows); load average {psutil.getloadavg()[0]:.2f}")
    if args.phases:
        found = phases(dump)
        total = sum(found["cpu"].values())
        print(f"  phases of the load of {found['shard']} ({found['votes']:,} votes kept), CPU s, least of 3 runs:")
        for name, seconds in found["cpu"].items():
            print(f"    {name:34s} {seconds:6.2f} s  {seconds / total:4.0%}")
        print(f"    {'in all':34s} {total:6.2f} s", flush=True)
    for _ in range(args.repeat):
        for workers in (int(w) for w in args.workers.split(",") if w):
            r = measure(dump, args.workdir, workers)
            print(f"  workers {workers}: {r['seconds']:6.1f} s wall, {r['cpu_seconds']:6.1f} s CPU (every process), "
                  f"peak RSS {r['peak_total_mb']:6,.0f} MiB in all (PSS {r['peak_pss_mb']:6,.0f} MiB), largest worker {r['peak_worker_mb']:5,.0f} MiB; "
                  f"battles {r['rows']['battles']:,}", flush=True)
            print("    CPU s by process (of which system): " + ", ".join(
                f"{role} {seconds:.1f} ({r['system_by_role'][role]:.1f})" for role, seconds in
                sorted(r["cpu_by_role"].items())), flush=True)


if __name__ == "__main__":
    main()
