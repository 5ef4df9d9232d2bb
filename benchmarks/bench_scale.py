"""Time, peak memory, bytes written and store size of the whole refresh per dump size, against DuckDB's load floor.

Run (issue 42 item 7, everything in one run; the 10x dump needs ~16 GB of parquet in ``--workdir``)::

    nice -n 10 .venv/bin/python benchmarks/bench_scale.py --sizes 1,4,10 --repeat 3 --rerun --rerank \
        --revisions 4 --json scale.json
    .venv/bin/python benchmarks/bench_scale.py --rows 5000 --sizes 1,2 --rerun --rerank --revisions 2   # quick

The dumps are bench_ingest.py's synthetic ones (same generator, same cache under ``--workdir``):
size ``k`` has ``k * --rows`` votes in ``k * --shards`` shards, so a shard keeps the same size
(8 shards for 1x, as bench_ingest). Each phase runs in its own subprocess, so each peak RSS
(``ru_maxrss`` from ``os.wait4``) is that phase's own. At ``--full-at`` (1x) every phase runs; at any
other size one refresh alone (its time, peak, bytes written and store size: no floor, whose DuckDB file
is ~2.3x the parquet, 34 GB at 10x):

- ``floor``: bench_ingest's ``floor_sql`` phase, DuckDB's ``CREATE TABLE raw AS SELECT * FROM
  read_parquet([...shards...])`` into a fresh DuckDB file with DuckDB's default settings: wall
  seconds (imports excluded, closing included), CPU seconds (user + system, the whole subprocess).
- ``refresh``: ``refresh_job`` (every asset and asset check, the report included) run in process as
  bench_pipeline.py runs it, into a fresh warehouse, with a Dagster instance kept in the size's
  scratch folder. A sampler thread reads the RSS and CPU time (psutil) of the process and of all its
  descendants (the load's worker processes and their forkserver: each one's PSS, ``RssSampler``),
  summed, every 50 ms; each
  step's wall time comes from Dagster's step stats and its peak RSS is the largest sample inside
  the step's [start, end] (``start`` is the RSS when it began, ``+MiB`` the rise over it; a step
  shorter than the sampling interval shows the RSS at its end, marked ``~``). The whole refresh's
  peak is the larger of the sampled peak and the subprocess's ``ru_maxrss`` (imports included; the
  largest single process, never a sum); bytes written are ``write_bytes`` of ``/proc/<pid>/io``
  during the job, over the process and its descendants; the store is the snapshot file and the store folder after it.
- ``rerun`` (``--rerun``, after each refresh): the same job again on the same warehouse, dump and
  Dagster instance (an unchanged dump: the gate says "unchanged", nothing is published), with its
  ratio to the floor run just before its refresh.
- ``rerank`` (``--rerank``): ``rerank_job`` on the last refresh's warehouse with another seed
  (``RERANK_SEED``), so that every board is fitted again and published.
- ``revisions`` (``--revisions N``): N successive new revisions of the dump (each the dump plus a
  shard of 100 new votes) refreshed into the last refresh's warehouse with the default retention: the
  store's size and the revisions it keeps after each; the store per kept revision is the last size over
  the revisions kept.

After a refresh the warehouse is opened read-only for a checksum of what was published, to compare
two code versions on the same dump: the row count of every ``arena.*`` view and table, and a
sha256 of ``arena.leaderboard``'s ``category, method, model, rating, ci_lower, ci_upper, rank``
(floats rounded to 6 decimals), ordered.

The floor and the refresh alternate (floor, refresh, floor, refresh, ...), so each refresh has a
floor measured just before it, under the same conditions: a *pair*. Besides the best-to-best ratio
(the fastest refresh over the fastest floor, which may come from different moments) the summary
gives each pair's ratio and their median; the 1x target is judged on that median, which one
unusually fast or slow run does not move. With ``--repeat N`` the pairs run N times: the fastest wall
time, the lowest CPU time and the highest peak RSS are reported (the step table is the fastest
run's). Wall times vary with other work on the machine; the load average is printed for that reason,
and CPU seconds next to them.

The final ``targets`` block gives each target of issue 42 item 7 with its figure and met / not met
(GB = 10^9 bytes): the 1x refresh at most 1.5x DuckDB's load of the same parquet (median of the
pairs); the store per kept revision at most 0.75x the dump's parquet; peak RSS at most 2.5 GB at 1x
and 3 GB at 4x and 10x; the 10x refresh at most 10x the 1x refresh's time; the unchanged re-run at
most 0.3x DuckDB's load (median over the pairs; its ratio to its refresh is printed beside it).

Disk: the cached dumps are about 1.5 GB of parquet per 1x (22 GB for sizes 1, 4 and 10); a size's
scratch folder (warehouse, Dagster instance, logs) is deleted after it unless ``--keep``.
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_ingest import FULL_ROWS, add_dump_arguments, dump_from_args, run_phase  # noqa: E402

MB = 1024 * 1024
GB = 1e9
SAMPLE_SECONDS = 0.05
LEADERBOARD_COLUMNS = ("category", "method", "model", "rating", "ci_lower", "ci_upper", "rank")
#: Issue 42 item 7's targets (GB = 10^9 bytes)
TARGETS = {"floor_ratio_1x": 1.5, "store_per_revision": 0.75, "rss_1x_gb": 2.5, "rss_big_gb": 3.0,
           "time_ratio_10x": 10.0, "rerun_ratio": 0.3}
#: The seed of the re-rank (``--rerank``): not the refresh's (42), so that every board is fitted again
RERANK_SEED = 43


# ---------------------------------------------------------------------------
# Children (each run in its own subprocess by main)
# ---------------------------------------------------------------------------

class RssSampler(threading.Thread):
    """Samples (unix time, memory bytes, CPU seconds) of this process *and all its descendants* every
    ``interval`` seconds: the load's worker processes (``core/ingest/parallel.py``, started by a
    forkserver, itself a child) count with the refresh.

    Memory is this process's RSS plus each descendant's PSS (``/proc/<pid>/smaps_rollup``: its own pages,
    and its share of the pages it shares with the forkserver and the other workers, so nothing is counted
    twice; its RSS where that file is unreadable). CPU is user + system time of each live process plus
    that of the children it has reaped (a worker that has ended counts through its forkserver), so the
    sum does not drop when a worker ends.
    """

    def __init__(self, interval: float = SAMPLE_SECONDS):
        super().__init__(daemon=True)
        import psutil

        self.process = psutil.Process()
        self.interval = interval
        self.samples: list[tuple[float, int, float]] = []
        self._stop_event = threading.Event()

    @staticmethod
    def _pss(process) -> int:
        """A descendant's proportional set size (its RSS when smaps_rollup cannot be read)."""
        try:
            for line in Path(f"/proc/{process.pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return process.memory_info().rss

    def tree(self) -> tuple[int, float]:
        """(memory bytes, CPU seconds) of this process and its descendants now."""
        import psutil

        cpu = self.process.cpu_times()
        memory, seconds = self.process.memory_info().rss, cpu.user + cpu.system + cpu.children_user + cpu.children_system
        for child in self.process.children(recursive=True):
            try:
                times = child.cpu_times()
                memory += self._pss(child)
                seconds += times.user + times.system + times.children_user + times.children_system
            except psutil.Error:  # ended between the listing and the reading
                continue
        return memory, seconds

    def sample(self) -> None:
        self.samples.append((time.time(), *self.tree()))

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.interval)

    def stop(self) -> list[tuple[float, int, float]]:
        self._stop_event.set()
        self.join()
        self.sample()
        return self.samples


def step_figures(stats: list, samples: list[tuple[float, int, float]]) -> list[dict]:
    """Each step's wall time, RSS at its start, peak RSS inside [start, end] and CPU time (sampled)."""
    times = [s[0] for s in samples]
    rows = []
    for step in sorted(stats, key=lambda s: s.start_time or 0):
        start, end = step.start_time, step.end_time
        row = {"step": step.step_key, "status": step.status.value if step.status else "?",
               "seconds": None, "start_rss_mb": None, "peak_rss_mb": None, "rise_mb": None,
               "cpu_seconds": None, "samples": 0}
        if start is not None and end is not None and samples:
            i, j = bisect.bisect_right(times, start), bisect.bisect_right(times, end)
            before = samples[max(i - 1, 0)]  # the last sample before the step began
            last = samples[max(j - 1, 0)]  # the last sample before it ended
            inside = samples[i:j]
            # at least the RSS the step started with (the last sample before it, <= 50 ms earlier)
            peak = max([before[1]] + [s[1] for s in inside]) if inside else max(before[1], last[1])
            row.update(seconds=end - start, start_rss_mb=before[1] / MB, peak_rss_mb=peak / MB,
                       rise_mb=(peak - before[1]) / MB, cpu_seconds=last[2] - before[2],
                       samples=len(inside))
        rows.append(row)
    return rows


def child_refresh(dump: Path, scratch: Path, bootstrap: int, job_name: str = "refresh_job",
                  seed: int | None = None) -> dict:
    """``job_name`` (``refresh_job``, or ``rerank_job``) in process on ``dump`` into ``scratch``'s warehouse,
    sampled for RSS; ``seed``: the rankings' seed (a re-rank with another seed fits every board again)."""
    import dagster as dg

    from arena_pipeline.definitions import defs
    from arena_pipeline.resources import DumpSource, ReportSettings, Warehouse

    resources = {
        "dump_source": DumpSource(source=str(dump)),
        "warehouse": Warehouse(database=str(scratch / "warehouse.duckdb")),
        "report_settings": ReportSettings(report_path=str(scratch / "report" / "index.html")),
    }
    job = defs.resolve_job_def(job_name)
    ranking = {"bootstrap_rounds": bootstrap, **({"seed": seed} if seed is not None else {})}
    home = scratch / "dagster_home"  # kept, so a re-run sees the first run as the instance knows it
    home.mkdir(parents=True, exist_ok=True)
    sampler = RssSampler()
    sampler.start()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        rss_before = sampler.tree()[0]
        written_before = bytes_written()
        started = time.perf_counter()
        result = job.execute_in_process(
            instance=instance,
            resources=resources,
            run_config={"ops": {"rankings": {"config": ranking}}},
            raise_on_error=False,
        )
        seconds = time.perf_counter() - started
        stats = instance.get_run_step_stats(result.run_id)
        failures = [event.message for event in result.all_events if event.is_failure]
        gate = [e.materialization.metadata for e in result.get_asset_materialization_events()
                if e.asset_key == dg.AssetKey("publication_gate")]
        outcome = ("unchanged" if gate and "live_publication_id" in gate[-1] else
                   f"publication {gate[-1]['publication_id'].value}" if gate and "publication_id" in gate[-1]
                   else "nothing published")
    samples = sampler.stop()
    gaps = [b[0] - a[0] for a, b in zip(samples, samples[1:], strict=False)]
    return {
        "success": result.success, "failures": failures, "seconds": seconds, "outcome": outcome,
        "steps": step_figures(stats, samples),
        "rss_before_job_mb": rss_before / MB, "written_mb": (bytes_written() - written_before) / MB,
        "sampled_peak_rss_mb": max(s[1] for s in samples) / MB,
        "samples": len(samples), "largest_sample_gap_s": max(gaps, default=0.0),
    }


def child_dump(args: argparse.Namespace) -> dict:
    """bench_ingest's synthetic dump for these options (generated here, so the parent stays small)."""
    root, meta = dump_from_args(args)
    return {"root": str(root), "meta": meta}


# ---------------------------------------------------------------------------
# Parent
# ---------------------------------------------------------------------------

def run_child(args: list[str], log: Path) -> tuple[dict | None, dict]:
    """Run this script as a child with ``args`` (+ ``--out``); returns (its JSON, wait4 figures)."""
    out = log.with_suffix(".json")
    out.unlink(missing_ok=True)
    with log.open("w") as sink:
        proc = subprocess.Popen([sys.executable, __file__, *args, "--out", str(out)],
                                stdout=sink, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    usage_figures = {"exit_code": code, "peak_rss_mb": usage.ru_maxrss / 1024,  # KiB on Linux
                     "cpu_seconds": usage.ru_utime + usage.ru_stime}
    if code != 0 or not out.exists():
        tail = log.read_text(errors="replace").splitlines()[-40:]
        print(f"    child {args[:2]} failed with exit code {code}; last lines of its output:")
        for line in tail:
            print(f"      {line}")
        return None, usage_figures
    result = json.loads(out.read_text())
    if "sampled_peak_rss_mb" in result:
        # ru_maxrss is the largest single process (the refresh's, or one reaped descendant's), never their
        # sum: the peak is the larger of it and the sampled peak of the process tree (the load's workers)
        usage_figures["ru_maxrss_mb"] = usage_figures["peak_rss_mb"]
        usage_figures["peak_rss_mb"] = max(usage_figures["peak_rss_mb"], result["sampled_peak_rss_mb"])
    return result, usage_figures


def file_bytes(path: Path) -> int:
    """The warehouse's size on disk: the readers' snapshot with its write-ahead log, and the pipeline's
    store folder beside it (the work file and the vote tables' Parquet files)."""
    from arena_pipeline.core.store.snapshot import store_folder

    files = [p for p in (path, Path(str(path) + ".wal")) if p.exists()]
    store = store_folder(path)
    files += [p for p in store.rglob("*") if p.is_file()] if store.is_dir() else []
    return sum(p.stat().st_size for p in files)


def bytes_written() -> int:
    """Bytes this process and its descendants (the load's workers, through their forkserver: a process's
    count includes its reaped children's) have caused to be written to storage so far (Linux
    ``/proc/<pid>/io``; 0 elsewhere)."""
    import psutil

    total = 0
    for pid in [os.getpid(), *(child.pid for child in psutil.Process().children(recursive=True))]:
        try:
            fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
        except OSError:
            continue
        total += int(fields.get("write_bytes", 0))
    return total


def boards_checksum(db: Path) -> dict:
    """Row counts of every ``arena.*`` view and table, and a hash of ``arena.leaderboard``."""
    import duckdb

    from arena_pipeline.core.store.warehouse import connect as connect_warehouse

    figures: dict = {"counts": {}, "errors": {}, "leaderboard_rows": None, "leaderboard_sha256": None,
                     "leaderboard_missing_columns": []}
    if not db.exists():
        figures["errors"]["warehouse"] = "no warehouse file"
        return figures
    try:
        con = connect_warehouse(str(db), read_only=True)
    except duckdb.Error as exc:
        figures["errors"]["warehouse"] = str(exc).splitlines()[0]
        return figures
    try:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'arena' "
            "ORDER BY table_name").fetchall()]
        for name in names:
            try:
                figures["counts"][name] = con.execute(f'SELECT count(*) FROM arena."{name}"').fetchone()[0]
            except duckdb.Error as exc:
                figures["errors"][name] = str(exc).splitlines()[0]
        if "leaderboard" not in names:
            return figures
        types = dict(con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'arena' AND table_name = 'leaderboard'").fetchall())
        present = [c for c in LEADERBOARD_COLUMNS if c in types]
        figures["leaderboard_missing_columns"] = [c for c in LEADERBOARD_COLUMNS if c not in types]
        if not present:
            return figures
        select = ", ".join(f'round("{c}", 6)' if types[c] in ("DOUBLE", "FLOAT", "REAL") or
                           types[c].startswith("DECIMAL") else f'"{c}"' for c in present)
        order = ", ".join(f'"{c}"' for c in present)
        digest = hashlib.sha256()
        rows = 0
        cursor = con.execute(f"SELECT {select} FROM arena.leaderboard ORDER BY {order}")
        while batch := cursor.fetchmany(10_000):
            for row in batch:
                # + 0.0 turns -0.0 (a tiny negative rounded) into 0.0
                cells = (repr(v + 0.0) if isinstance(v, float) else repr(v) for v in row)
                digest.update(("\t".join(cells) + "\n").encode())
                rows += 1
        figures.update(leaderboard_rows=rows, leaderboard_sha256=digest.hexdigest(),
                       leaderboard_columns=present)
    finally:
        con.close()
    return figures


def keep_best(best: dict | None, run: dict) -> dict:
    """The fastest run's figures, with the lowest CPU time and the highest peak RSS of all runs."""
    if best is None:
        return dict(run)
    merged = dict(run) if run["seconds"] < best["seconds"] else dict(best)
    for key in ("cpu_seconds",):
        merged[key] = min(best[key], run[key])
    for key in ("peak_rss_mb", "sampled_peak_rss_mb"):
        if key in best and key in run:
            merged[key] = max(best[key], run[key])
    merged["runs"] = best.get("runs", 1) + 1
    return merged


def machine_facts() -> dict:
    import psutil

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "-"

    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=30).stdout.strip()
        code = f"{head}{' + uncommitted changes' if dirty else ''}" if head else "-"
    except (OSError, subprocess.SubprocessError):
        code = "-"
    memory = psutil.virtual_memory()
    return {
        "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
        "memory_gb": memory.total / GB, "available_gb": memory.available / GB,
        "platform": platform.platform(), "python": sys.version.split()[0],
        "versions": {p: version(p) for p in ("duckdb", "polars", "pyarrow", "dagster", "numpy", "psutil")},
        "code": code,
        "arena_env": sorted(k for k in os.environ if k.startswith("ARENA_")),
    }


def fmt(value, spec: str, width: int) -> str:
    """``value`` right-aligned in ``width`` with ``spec`` (a leading ``+`` signs it), or ``-``."""
    if value is None:
        return f"{'-':>{width}}"
    sign, spec = ("+", spec[1:]) if spec.startswith("+") else ("", spec)
    return f"{value:>{sign}{width}{spec}}"


def size_label(size: float) -> str:
    return f"{size:g}x"


def run_size(args: argparse.Namespace, size: float) -> dict:
    """Every phase of one dump size, ``args.repeat`` times."""
    label = size_label(size)
    rows, shards = round(args.rows * size), max(1, round(args.shards * size))
    args.workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"bench_scale_{label}_", dir=args.workdir))
    dump_args = ["--child", "dump", "--rows", str(rows), "--shards", str(shards),
                 "--templates", str(args.templates), "--seed", str(args.seed),
                 "--workdir", str(args.workdir)]
    made, _ = run_child(dump_args, scratch / "dump.log")
    if made is None:
        raise SystemExit(f"could not build the {label} dump")
    dump, meta = Path(made["root"]), made["meta"]
    files = sorted((dump / "data").glob("train-*.parquet"))
    entry: dict = {"size": size, "rows": meta["rows"], "shards": len(files), "dump": str(dump),
                   "parquet_bytes": sum(p.stat().st_size for p in files),
                   "generated_seconds": None if meta["cached"] else meta["generate_seconds"],
                   "floor": None, "refresh": None, "rerun": None, "rerank": None, "checksum": None,
                   "rerun_checksum": None, "rerank_checksum": None, "leaderboard_hashes": [], "pairs": []}
    print(f"\n== {label}: {entry['rows']:,} votes in {len(files)} shards, parquet "
          f"{entry['parquet_bytes'] / MB:,.0f} MiB"
          + (" (cached)" if meta["cached"] else f" (generated in {meta['generate_seconds']} s)")
          + f"; {shutil.disk_usage(args.workdir).free / GB:,.1f} GB free in the workdir")

    def report(name: str, r: dict) -> None:
        extra = f"  warehouse {r['warehouse_mb']:,.0f} MiB" if "warehouse_mb" in r else ""
        extra += f"  written {r['written_mb']:,.0f} MiB" if "written_mb" in r else ""
        extra += f"  [{r['outcome']}]" if r.get("outcome") else ""
        print(f"  run {name:<8} {r['seconds']:8.1f} s wall {r['cpu_seconds']:8.1f} s CPU  "
              f"peak RSS {r['peak_rss_mb']:7,.0f} MiB{extra}  (load avg {os.getloadavg()[0]:.2f})")

    # at --full-at (1x) every phase; at another size one refresh alone: no floor (its DuckDB file is ~2.3x the
    # parquet, 34 GB at 10x), no re-run, re-rank or revisions
    full = size == args.full_at
    warehouse = scratch / "run" / "warehouse.duckdb"
    child = ["--child", "refresh", "--dump", str(dump), "--scratch", str(scratch / "run"),
             "--bootstrap", str(args.bootstrap)]
    for _ in range(args.repeat if full else 1):
        floor = run_phase("floor_sql", dump, scratch) if full else None  # bench_ingest's floor, in its own subprocess
        if floor is not None:
            report("floor", floor)
            entry["floor"] = keep_best(entry["floor"], floor)
        shutil.rmtree(scratch / "run", ignore_errors=True)
        (scratch / "run").mkdir()
        if not run_job(entry, "refresh", child, scratch, warehouse, report):
            break
        if floor is None:
            continue
        pair = {"floor_seconds": floor["seconds"], "refresh_seconds": entry["last_refresh_seconds"],
                "ratio": entry["last_refresh_seconds"] / floor["seconds"]}
        entry["pairs"].append(pair)
        if args.rerun and run_job(entry, "rerun", child, scratch, warehouse, report):
            pair.update(rerun_seconds=entry["last_rerun_seconds"],
                        rerun_ratio=entry["last_rerun_seconds"] / floor["seconds"])

    if full and args.rerank and entry["refresh"]:  # rerank_job with another seed: every board fitted again
        run_job(entry, "rerank", [*child, "--job", "rerank_job", "--seed-of-ranks", str(RERANK_SEED)], scratch, warehouse,
                report)
    if full and args.revisions and entry["refresh"]:
        entry["revisions"] = run_revisions(args.revisions, dump, scratch, warehouse, entry, report, child)

    if args.keep:
        print(f"  kept    {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    print_size(entry)
    return entry


def revision_dump(dump: Path, folder: Path, k: int) -> Path:
    """A new revision of ``dump`` in ``folder``: its shards (symbolic links) and one small shard of 100
    votes of its own (the first 100 of the first shard under new ids), so that each ``k`` is a revision."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    data = folder / "data"
    data.mkdir(parents=True)
    shards = sorted((dump / "data").glob("train-*.parquet"))
    for shard in shards:
        (data / shard.name).symlink_to(shard.resolve())
    extra = pq.ParquetFile(shards[0]).read_row_group(0).slice(0, 100)
    ids = pc.binary_join_element_wise(extra.column("id"), pa.scalar(f"-rev{k}"), "")
    pq.write_table(extra.set_column(extra.schema.get_field_index("id"), "id", ids), data / f"train-rev{k}.parquet")  # a shard name the local dump reads
    return folder


def run_revisions(count: int, dump: Path, scratch: Path, warehouse: Path, entry: dict, report,
                  child: list[str]) -> list[dict]:
    """``count`` successive new revisions of the dump refreshed into the last refresh's warehouse, with
    the default retention: the store's size after each (what a store keeps per revision)."""
    sizes = []
    for k in range(1, count + 1):
        folder = revision_dump(dump, scratch / f"rev{k}", k)
        args = [*child]
        args[args.index("--dump") + 1] = str(folder)
        result, usage = run_child(args, scratch / f"rev{k}.log")
        if result is None:
            sizes.append({"revision": k, "error": f"exit code {usage['exit_code']}"})
            break
        run = {**result, **usage, "warehouse_mb": file_bytes(warehouse) / MB}
        report(f"rev {k}", run)
        sizes.append({"revision": k, "success": run["success"], "seconds": run["seconds"],
                      "peak_rss_mb": run["peak_rss_mb"], "written_mb": run.get("written_mb"),
                      "store_mb": run["warehouse_mb"], "kept_revisions": kept_revisions(warehouse)})
    parquet_mb = entry["parquet_bytes"] / MB
    print("  store after each new revision (default retention): "
          + ", ".join(f"{r['store_mb']:,.0f} MiB ({r['kept_revisions']} revisions kept)" for r in sizes
                      if "store_mb" in r)
          + f"; the dump's parquet {parquet_mb:,.0f} MiB")
    return sizes


def kept_revisions(warehouse: Path) -> int:
    """How many dump revisions the store keeps vote tables of: the revision keys of the Parquet folders in its
    files folder (``<table>__<revision key>__<build key>.<attempt>``)."""
    from arena_pipeline.resources import Warehouse

    files = Warehouse(database=str(warehouse)).files_path()
    return len({p.name.split("__")[1] for p in files.iterdir() if p.is_dir() and p.name.count("__") >= 2}
               ) if files.is_dir() else 0


def per_kept_revision(entry: dict) -> float | None:
    """MiB of store per kept revision after the last new revision (``--revisions``), or None."""
    last = next((r for r in reversed(entry.get("revisions") or []) if r.get("kept_revisions")), None)
    return last["store_mb"] / last["kept_revisions"] if last else None


def run_job(entry: dict, name: str, child: list[str], scratch: Path, warehouse: Path, report) -> bool:
    """Run the refresh child once as ``name`` ("refresh", or "rerun" on the same warehouse) and keep
    its figures, the warehouse's size before and after, and the checksum of what it published in
    ``entry``; False when the child itself died."""
    before = file_bytes(warehouse) if warehouse.exists() else None
    result, usage = run_child(child, scratch / f"{name}.log")
    if result is None:
        entry[f"{name}_error"] = f"exit code {usage['exit_code']}"
        return False
    run = {**result, **usage, "warehouse_mb": file_bytes(warehouse) / MB}
    if before is not None:
        run["warehouse_before_mb"] = before / MB
    report(name, run)
    entry[f"last_{name}_seconds"] = run["seconds"]
    if not run["success"]:
        print(f"    {name} FAILED:")
        for message in run["failures"]:
            print(f"      {message}")
    entry[name] = keep_best(entry[name], run)
    checksum = "checksum" if name == "refresh" else f"{name}_checksum"
    entry[checksum] = boards_checksum(warehouse)
    if name != "rerank":  # a re-rank fits with another seed: another board
        entry["leaderboard_hashes"].append(entry[checksum]["leaderboard_sha256"])
    return True


def print_size(entry: dict) -> None:
    """The step table of one size, the re-run, and the checksum of the published boards."""
    refresh = entry["refresh"]
    if refresh:
        print(f"\n  refresh {size_label(entry['size'])}: {'success' if refresh['success'] else 'FAILED'}, "
              f"{refresh['seconds']:.1f} s; RSS {refresh['rss_before_job_mb']:,.0f} MiB before the job "
              f"(imports), sampled peak {refresh['sampled_peak_rss_mb']:,.0f} MiB (with the load's workers), "
              f"ru_maxrss {refresh.get('ru_maxrss_mb', refresh['peak_rss_mb']):,.0f} MiB; {refresh['samples']} samples, largest gap "
              f"{refresh['largest_sample_gap_s']:.2f} s")
        print(f"  {'step':<34}{'status':<9}{'seconds':>8}{'CPU s':>8}{'start MiB':>10}"
              f"{'peak MiB':>10}{'+MiB':>8}")
        for s in refresh["steps"]:
            mark = "~" if s["samples"] == 0 and s["peak_rss_mb"] is not None else " "
            print(f"  {s['step']:<34}{s['status']:<9}{fmt(s['seconds'], '.1f', 8)}"
                  f"{fmt(s['cpu_seconds'], '.1f', 8)}{fmt(s['start_rss_mb'], ',.0f', 10)}"
                  f"{fmt(s['peak_rss_mb'], ',.0f', 9)}{mark}{fmt(s['rise_mb'], ',.0f', 8)}")
        in_steps = sum(s["seconds"] or 0 for s in refresh["steps"])
        print(f"  {'(steps together; the rest is Dagster between steps)':<51}{in_steps:>8.1f}")
        load, floor = next((s for s in refresh["steps"] if s["step"] == "flat_tables"), None), entry["floor"]
        if load and floor and load["seconds"] is not None:  # the load against DuckDB's own load of the parquet
            print(f"  the load (flat_tables): {load['seconds']:.1f} s = {load['seconds'] / floor['seconds']:.2f}x "
                  f"the floor's {floor['seconds']:.1f} s (CPU {fmt(load['cpu_seconds'], '.1f', 0)} s)")
    pairs = entry["pairs"]
    if pairs:
        print("\n  floor and refresh, run by run (each refresh right after its floor): "
              + ", ".join(f"{p['floor_seconds']:.1f} s / {p['refresh_seconds']:.1f} s = {p['ratio']:.2f}x"
                          for p in pairs)
              + f"; median ratio {pair_ratio(entry):.2f}x")
    for name, what in (("rerun", "unchanged dump"), ("rerank", f"rerank_job, seed {RERANK_SEED}")):
        run = entry[name]
        if not run:
            continue
        print(f"\n  {name} {size_label(entry['size'])} ({what}): "
              f"{'success' if run['success'] else 'FAILED'} ({run.get('outcome', '?')}), {run['seconds']:.1f} s, "
              f"{run['cpu_seconds']:.1f} s CPU, peak RSS {run['peak_rss_mb']:,.0f} MiB, written "
              f"{run.get('written_mb', 0):,.0f} MiB, warehouse {run['warehouse_before_mb']:,.0f} -> "
              f"{run['warehouse_mb']:,.0f} MiB")
        slow = sorted(run["steps"], key=lambda s: -(s["seconds"] or 0))[:6]
        print("    slowest steps: " + ", ".join(f"{s['step']} {s['seconds']:.1f} s" for s in slow
                                                  if s["seconds"] is not None))
    c = entry["checksum"]
    if c:
        hashes = entry["leaderboard_hashes"]
        print(f"\n  published: {len(c['counts'])} arena.* views/tables, leaderboard "
              f"{c['leaderboard_rows'] if c['leaderboard_rows'] is not None else '-'} rows, sha256 "
              f"{(c['leaderboard_sha256'] or '-')[:16]}"
              + (f" (missing columns: {', '.join(c['leaderboard_missing_columns'])})"
                 if c["leaderboard_missing_columns"] else "")
              + (f"; the same after all {len(hashes)} runs: {'yes' if len(set(hashes)) == 1 else 'NO'}"
                 if len(hashes) > 1 else ""))
        print_counts(c["counts"])
        for name, error in c["errors"].items():
            print(f"    {name}: ERROR {error}")
        after = entry["rerun_checksum"]
        if after:
            changed = {name: f"{c['counts'].get(name, '-')} -> {after['counts'].get(name, '-')}"
                       for name in sorted(set(c["counts"]) | set(after["counts"]))
                       if c["counts"].get(name) != after["counts"].get(name)}
            print("  after the rerun, changed row counts: "
                  + (", ".join(f"{k} {v}" for k, v in changed.items()) or "none"))


def pair_ratio(entry: dict) -> float | None:
    """The median of the refresh / floor ratios of the runs of one size (each refresh over the floor
    run just before it); None without a pair."""
    ratios = [p["ratio"] for p in entry.get("pairs") or []]
    return statistics.median(ratios) if ratios else None


def print_counts(counts: dict[str, int]) -> None:
    """``name=count`` cells, wrapped."""
    line = "   "
    for name, count in counts.items():
        cell = f"{name}={count:,}"
        if len(line) + len(cell) > 110:
            print(line)
            line = "   "
        line += " " + cell
    if counts:
        print(line)


def targets(entries: list[dict]) -> list[dict]:
    """Issue 42 item 7's targets, each with the figure and whether it is met (None: not measured)."""
    by_size = {e["size"]: e for e in entries}
    one = by_size.get(1.0)
    out = []

    def add(text: str, ok: bool | None, figure: str) -> None:
        out.append({"target": text, "met": ok, "figure": figure})

    def ran(entry: dict | None, what: str = "refresh") -> bool:
        return bool(entry and entry.get(what))

    text = f"1x refresh <= {TARGETS['floor_ratio_1x']:g}x DuckDB's load (median)"
    if ran(one) and one["floor"]:
        wall = one["refresh"]["seconds"] / one["floor"]["seconds"]
        cpu = one["refresh"]["cpu_seconds"] / one["floor"]["cpu_seconds"]
        median = pair_ratio(one)
        judged = median if median is not None else wall
        add(text, judged <= TARGETS["floor_ratio_1x"],
            f"median of {len(one['pairs'])} floor/refresh pairs {judged:.2f}x; best to best {wall:.2f}x wall, "
            f"{cpu:.2f}x CPU (imports included)")
    else:
        add(text, None, "not run at 1x")
    text = f"store per kept revision <= {TARGETS['store_per_revision']:g}x the dump's parquet"
    per = per_kept_revision(one) if one else None
    if per is not None:
        ratio = per * MB / one["parquet_bytes"]
        add(text, ratio <= TARGETS["store_per_revision"], f"{per:,.0f} MiB = {ratio:.2f}x")
    else:
        add(text, None, "--revisions not run at 1x")
    for size, limit in ((1.0, TARGETS["rss_1x_gb"]), (4.0, TARGETS["rss_big_gb"]), (10.0, TARGETS["rss_big_gb"])):
        entry = by_size.get(size)
        text = f"{size_label(size)} refresh peak RSS <= {limit:g} GB"
        if ran(entry):
            gb = entry["refresh"]["peak_rss_mb"] * MB / GB
            add(text, gb <= limit and entry["refresh"]["success"], f"{gb:.2f} GB"
                + ("" if entry["refresh"]["success"] else ", the refresh FAILED"))
        else:
            add(text, None, f"{size_label(size)} not run" if not entry else "refresh died")
    ten = by_size.get(10.0)
    text = f"10x refresh <= {TARGETS['time_ratio_10x']:g}x the 1x refresh's time"
    if ran(one) and ran(ten):
        ratio = ten["refresh"]["seconds"] / one["refresh"]["seconds"]
        add(text, ratio <= TARGETS["time_ratio_10x"] and ten["refresh"]["success"],
            f"{ratio:.2f}x ({ten['refresh']['seconds']:,.0f} s / {one['refresh']['seconds']:,.0f} s)")
    else:
        add(text, None, "1x and 10x not both run")
    text = f"unchanged re-run <= {TARGETS['rerun_ratio']:g}x DuckDB's load"
    reruns = [p["rerun_ratio"] for p in (one or {}).get("pairs", []) if "rerun_ratio" in p]
    if reruns:
        median = statistics.median(reruns)
        vs_refresh = statistics.median(p["rerun_seconds"] / p["refresh_seconds"] for p in one["pairs"]
                                       if "rerun_seconds" in p)
        add(text, median <= TARGETS["rerun_ratio"],
            f"median of {len(reruns)}: {median:.2f}x the floor just before ({vs_refresh:.2f}x its refresh); "
            f"outcome {one['rerun'].get('outcome', '?')}")
    else:
        add(text, None, "--rerun not run at 1x")
    for entry in entries:
        if entry["refresh"] and not entry["refresh"]["success"]:
            out.append({"target": f"{size_label(entry['size'])} refresh succeeded", "met": False,
                        "figure": "; ".join(entry["refresh"]["failures"])[:200]})
    return out


def print_summary(entries: list[dict], base_rows: int) -> list[dict]:
    one = next((e for e in entries if e["size"] == 1.0 and e["refresh"]), None)
    print(f"\n{'size':>5} {'votes':>9} {'parquet MiB':>11} {'floor s':>8} {'floor RSS':>9} "
          f"{'refresh s':>9} {'CPU s':>7} {'x floor':>7} {'median x':>8} {'peak RSS':>8} {'written':>8} {'x 1x':>6} "
          f"{'store':>7} {'rerun s':>8} {'x floor':>7} {'rerank s':>8} {'per rev':>7}")
    for e in entries:
        f, r, rr, rk = e["floor"] or {}, e["refresh"] or {}, e["rerun"] or {}, e.get("rerank") or {}
        ratio = r["seconds"] / f["seconds"] if r and f else None
        vs_one = r["seconds"] / one["refresh"]["seconds"] if r and one else None
        reruns = [p["rerun_ratio"] for p in e["pairs"] if "rerun_ratio" in p]
        print(f"{size_label(e['size']):>5} {e['rows']:>9,} {e['parquet_bytes'] / MB:>11,.0f} "
              f"{fmt(f.get('seconds'), '.1f', 8)} {fmt(f.get('peak_rss_mb'), ',.0f', 9)} "
              f"{fmt(r.get('seconds'), '.1f', 9)} {fmt(r.get('cpu_seconds'), '.1f', 7)} {fmt(ratio, '.2f', 7)} "
              f"{fmt(pair_ratio(e), '.2f', 8)} {fmt(r.get('peak_rss_mb'), ',.0f', 8)} "
              f"{fmt(r.get('written_mb'), ',.0f', 8)} {fmt(vs_one, '.2f', 6)} {fmt(r.get('warehouse_mb'), ',.0f', 7)} "
              f"{fmt(rr.get('seconds'), '.1f', 8)} {fmt(statistics.median(reruns) if reruns else None, '.2f', 7)} "
              f"{fmt(rk.get('seconds'), '.1f', 8)} {fmt(per_kept_revision(e), ',.0f', 7)}")
    print("(x floor: the fastest refresh over the fastest floor; median x: the median of each refresh over the "
          "floor run just before it; rerun x floor: the same for the unchanged re-run, median)")
    print("(seconds: wall, imports excluded; RSS: the larger of the subprocess's ru_maxrss and the sampled sum over "
          "it and its descendants; MiB: parquet, bytes written by the "
          "refresh, the store after it (snapshot + store folder); per rev: the store per kept revision after "
          "--revisions)")
    found = targets(entries)
    note = "" if base_rows == FULL_ROWS else (f" -- this run's base is {base_rows:,} votes, not "
                                               f"{FULL_ROWS:,}: not the issue's figures")
    print(f"\ntargets (issue 42 item 7){note}")
    for t in found:
        verdict = "n/a" if t["met"] is None else ("met" if t["met"] else "NOT MET")
        print(f"  {t['target']:<58} {verdict:<8} {t['figure']}")
    return found


def parse_sizes(text: str) -> list[float]:
    sizes = [float(s) for s in text.split(",") if s.strip()]
    if not sizes or any(s <= 0 for s in sizes):
        raise argparse.ArgumentTypeError("--sizes takes positive multiples, e.g. 1,2,4")
    return sizes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_dump_arguments(parser)
    for action in parser._actions:  # the shared options mean the 1x dump here
        if action.dest == "rows":
            action.help = f"votes of the 1x dump (default {FULL_ROWS:,})"
        elif action.dest == "shards":
            action.help = "parquet shards of the 1x dump, scaled with the size (default 8)"
    parser.add_argument("--sizes", type=parse_sizes, default=[1.0, 2.0, 4.0],
                        help="dump sizes, multiples of --rows (default 1,2,4)")
    parser.add_argument("--bootstrap", type=int, default=100,
                        help="bootstrap rounds of the rankings (default 100, the pipeline's default)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of the floor and the refresh, alternating (the best of each and the median of the "
                        "pairs' ratios are reported)")
    parser.add_argument("--rerun", action="store_true",
                        help="after each refresh, run the job again on the unchanged dump and warehouse")
    parser.add_argument("--keep", action="store_true", help="keep each size's warehouse and logs")
    parser.add_argument("--full-at", type=float, default=1.0,
                        help="the size at which the floor, the re-run, the re-rank and the revisions run (default 1); "
                        "at any other size one refresh alone")
    parser.add_argument("--rerank", action="store_true",
                        help="after the refreshes, rerank_job on the last refresh's warehouse with another seed")
    parser.add_argument("--revisions", type=int, default=0,
                        help="after the refreshes, refresh this many successive new revisions of the dump into the "
                        "same warehouse and print the store's size after each (default 0)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write all figures to this JSON file")
    parser.add_argument("--with-json", type=Path, metavar="EARLIER", action="append", default=[],
                        help="add the sizes of an earlier run's --json to the summary and the targets (a size "
                        "measured here replaces the earlier one): the 10x run apart from the 1x one")
    parser.add_argument("--child", choices=["dump", "refresh"], help=argparse.SUPPRESS)
    parser.add_argument("--job", default="refresh_job", help=argparse.SUPPRESS)
    parser.add_argument("--seed-of-ranks", dest="rank_seed", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--dump", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat takes 1 or more")

    if args.child == "dump":
        args.out.write_text(json.dumps(child_dump(args)))
        return
    if args.child == "refresh":
        args.out.write_text(json.dumps(child_refresh(args.dump, args.scratch, args.bootstrap, args.job, args.rank_seed)))
        return

    facts = machine_facts()
    facts["load_avg_start"] = os.getloadavg()
    print(f"machine   {facts['cores']} cores ({facts['usable_cores']} usable), "
          f"{facts['memory_gb']:.1f} GB RAM ({facts['available_gb']:.1f} GB available), {facts['platform']}")
    print(f"versions  python {facts['python']}, "
          + ", ".join(f"{k} {v}" for k, v in facts["versions"].items()) + f"; code {facts['code']}")
    if facts["arena_env"]:
        print(f"env       set (they change the pipeline's settings): {', '.join(facts['arena_env'])}")
    print("load avg  {:.2f} {:.2f} {:.2f} at start".format(*facts["load_avg_start"]))
    print(f"workdir   {args.workdir}; base {args.rows:,} votes in {args.shards} shards; sizes "
          + ", ".join(size_label(s) for s in args.sizes) + f"; bootstrap {args.bootstrap}; "
          f"repeat {args.repeat} at {size_label(args.full_at)}{'; rerun' if args.rerun else ''}"
          f"{'; rerank' if args.rerank else ''}{f'; {args.revisions} revisions' if args.revisions else ''}")

    entries = [run_size(args, size) for size in args.sizes]
    for earlier in args.with_json:  # sizes measured by an earlier run (its own load average, code and options)
        loaded = json.loads(earlier.read_text())
        print(f"earlier   {earlier}: sizes " + ", ".join(size_label(e["size"]) for e in loaded["sizes"])
              + f", code {loaded['machine'].get('code')}, load avg at start "
              + " ".join(f"{v:.2f}" for v in loaded["machine"].get("load_avg_start", [])))
        measured = {e["size"] for e in entries}
        entries += [e for e in loaded["sizes"] if e["size"] not in measured]
    entries.sort(key=lambda e: e["size"])
    found = print_summary(entries, args.rows)
    facts["load_avg_end"] = os.getloadavg()
    print("load avg  {:.2f} {:.2f} {:.2f} at end".format(*facts["load_avg_end"]))
    if args.json:
        options = {k: (str(v) if isinstance(v, Path) else [str(p) for p in v] if k == "with_json" else v)
                   for k, v in vars(args).items()
                   if k not in ("child", "dump", "scratch", "out", "job", "rank_seed")}
        args.json.write_text(json.dumps({"machine": facts, "options": options, "sizes": entries,
                                         "targets": found}, indent=2))
        print(f"json      {args.json}")


if __name__ == "__main__":
    main()
