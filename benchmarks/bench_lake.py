"""Publishing to a DuckLake on PostgreSQL against the snapshot file alone: publication time, reader latency,
disk per publication, readers through a refresh, and two runs publishing at once.

Run (needs the ``[lake]`` extra and PostgreSQL's server binaries; a throwaway server is started)::

    nice -n 10 .venv/bin/python benchmarks/bench_lake.py --rows 20000
    nice -n 10 .venv/bin/python benchmarks/bench_lake.py               # 1x (135,634 votes)

Two stores on bench_ingest.py's synthetic dump, each run in a fresh interpreter (``refresh_job`` /
``rerank_job``, imports excluded): ``snapshot`` publishes to the readers' snapshot file only, ``lake``
to the snapshot and the DuckLake (``ARENA_DUCKLAKE``). For each: a first refresh (the vote tables
written), then ``--reranks`` re-rank publications (only the small tables written); the publication's
time is its ``publication_gate`` step. Then, on the lake:

- reader latency of one board read (the overall ``bt`` leaderboard, 20 rows), ``--reads`` times: on
  one held connection, and with a new connection (attach included) per read; the same on the file;
- disk: the lake's data path and its PostgreSQL catalog (``pg_database_size``) after each publication;
- readers through a refresh of a new revision: one polling with a new connection every 0.2 s, one
  holding a connection (every read on it); failed reads and mixed ones (a table whose rows are not
  the ones ``arena.publications.rows`` records for the publication read);
- two writers: the lake store copied to a second store, then a re-rank started in both at once: the
  lake commits one whole publication and refuses the other (``LakeConflictError``), or the second
  waits; what the lake then shows is checked whole.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_ingest import add_dump_arguments, dump_from_args  # noqa: E402
from bench_readers import _live_dump, _variant  # noqa: E402

from arena_pipeline.core.store.lake import connect_lake, lake_disk_bytes  # noqa: E402
from arena_pipeline_dev.postgres import start_postgres  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BOARD = ("SELECT model, rating FROM arena.leaderboard WHERE category = 'overall' AND method = 'bt' "
         "ORDER BY rank LIMIT 20")

CHILD = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import dagster as dg
from arena_pipeline.definitions import defs
job_name, out, bootstrap, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with dg.DagsterInstance.ephemeral() as instance:
    started = time.perf_counter()
    result = defs.resolve_job_def(job_name).execute_in_process(instance=instance, raise_on_error=False, run_config={
        "ops": {"rankings": {"config": {"bootstrap_rounds": bootstrap, "seed": seed}}}})
    seconds = time.perf_counter() - started
    steps = {s.step_key: (s.end_time or 0) - (s.start_time or 0) for s in instance.get_run_step_stats(result.run_id)}
    def innermost(error):  # the step's own exception, under Dagster's wrappers
        while error.cause is not None:
            error = error.cause
        return f"{error.cls_name}: {error.message.strip().splitlines()[0]}"
    failures = [innermost(e.step_failure_data.error) for e in result.all_events
                if e.is_step_failure][:3] or [e.message for e in result.all_events if e.is_failure][:3]
json.dump({"success": result.success, "seconds": seconds, "steps": steps, "failures": failures}, open(out, "w"))
"""

READER = r"""
import sys
from arena_pipeline.core.store.lake import connect_lake
from arena_pipeline_dev.readers import poll
attach, stop, out, hold = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "hold"
poll(lambda: connect_lake(attach, read_only=True), stop, out, hold=hold)
"""


def _env(scratch: Path, source: Path, lake: tuple[str, Path] | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARENA_", "DAGSTER_"))}
    env.update(ARENA_SOURCE=str(source), ARENA_WAREHOUSE=str(scratch / "warehouse.duckdb"),
               ARENA_CACHE_DIR=str(scratch / "cache"), ARENA_REPORT=str(scratch / "report" / "index.html"),
               PYTHONPATH=str(REPO))
    if lake is not None:
        env.update(ARENA_DUCKLAKE=lake[0], ARENA_DUCKLAKE_DATA_PATH=str(lake[1]))
    return env


def _start(job: str, env: dict, scratch: Path, bootstrap: int, seed: int, tag: str = "") -> tuple:
    out = scratch / f"{job}{tag}.json"
    out.unlink(missing_ok=True)
    sink = (scratch / f"{job}{tag}.log").open("a")
    proc = subprocess.Popen([sys.executable, "-c", CHILD, job, str(out), str(bootstrap), str(seed)], env=env,
                            stdout=sink, stderr=subprocess.STDOUT, cwd=scratch)
    return proc, out, sink


def _finish(started: tuple) -> dict:
    proc, out, sink = started
    proc.wait()
    sink.close()
    if not out.exists():
        return {"success": False, "seconds": float("nan"), "steps": {}, "failures": ["no result"]}
    return json.loads(out.read_text())


def _run(job: str, env: dict, scratch: Path, bootstrap: int, seed: int) -> dict:
    return _finish(_start(job, env, scratch, bootstrap, seed))


def _latency(connect, reads: int) -> tuple[float, float]:
    """Median seconds of one board read on a held connection, and with a new connection per read."""
    con = connect()
    held = []
    for _ in range(reads):
        started = time.perf_counter()
        con.execute(BOARD).fetchall()
        held.append(time.perf_counter() - started)
    con.close()
    fresh = []
    for _ in range(reads):
        started = time.perf_counter()
        con = connect()
        con.execute(BOARD).fetchall()
        con.close()
        fresh.append(time.perf_counter() - started)
    return statistics.median(held), statistics.median(fresh)


def _store_bytes(scratch: Path) -> int:
    return sum(p.stat().st_size for p in scratch.rglob("*") if p.is_file()
               and not {"dump", "cache", "lake_data"} & set(p.relative_to(scratch).parts))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_dump_arguments(parser)
    parser.add_argument("--bootstrap", type=int, default=100, help="bootstrap rounds (default 100)")
    parser.add_argument("--reranks", type=int, default=3, help="re-rank publications after the first (default 3)")
    parser.add_argument("--reads", type=int, default=20, help="reads per latency figure (default 20)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write all figures to this JSON file")
    args = parser.parse_args(argv)

    import duckdb

    args.workdir.mkdir(parents=True, exist_ok=True)
    dump, _ = dump_from_args(args)
    root = Path(tempfile.mkdtemp(prefix="bench_lake_", dir=args.workdir))
    server = start_postgres()
    figures: dict = {}
    print(f"dump      {args.rows:,} votes in {args.shards} shards ({dump}); bootstrap {args.bootstrap}; "
          f"load avg {os.getloadavg()[0]:.2f}; duckdb {duckdb.__version__}")
    try:
        database = server.create_database("arena_bench").split("dbname=")[1].split()[0]
        attach = f"ducklake:postgres:dbname={database} host=127.0.0.1 port={server.port} user=arena"
        setups = {}
        for name in ("snapshot", "lake"):
            scratch = root / name
            scratch.mkdir()
            shards = _live_dump(dump, scratch / "dump")
            lake = (attach, scratch / "lake_data") if name == "lake" else None
            setups[name] = (scratch, shards, _env(scratch, scratch / "dump", lake))
            figures[name] = {"publications": []}

        def disk(name: str) -> dict:
            scratch = setups[name][0]
            out = {"store_mb": _store_bytes(scratch) / 2**20}
            if name == "lake":
                out["data_path_mb"] = lake_disk_bytes(str(scratch / "lake_data")) / 2**20
                out["catalog_mb"] = server.database_bytes(database) / 2**20
            return out

        jobs = ["refresh_job"] + ["rerank_job"] * args.reranks
        for index, job in enumerate(jobs):
            for name, (scratch, _, env) in setups.items():
                run = _run(job, env, scratch, args.bootstrap, seed=42 + index)
                gate = run["steps"].get("publication_gate", float("nan"))
                run.update(disk(name))
                figures[name]["publications"].append(run)
                where = ", ".join(f"{k} {v:,.1f} MiB" for k, v in run.items() if k.endswith("_mb"))
                print(f"  {name:8} {job:11} {run['seconds']:6.1f} s, publication (gate step) {gate:5.2f} s; "
                      f"{where}  {'ok' if run['success'] else 'FAILED: ' + str(run['failures'])[:200]}", flush=True)

        # reader latency, held connection and a new one per read
        snapshot_file = setups["snapshot"][0] / "warehouse.duckdb"
        figures["latency"] = {
            "lake": _latency(lambda: connect_lake(attach, read_only=True), args.reads),
            "snapshot": _latency(lambda: duckdb.connect(str(snapshot_file), read_only=True), args.reads)}
        for name, (held, fresh) in figures["latency"].items():
            print(f"  {name:8} board read: held connection {held * 1000:.1f} ms, new connection per read "
                  f"{fresh * 1000:.1f} ms (median of {args.reads})", flush=True)

        # readers through a refresh of a new revision, against the lake
        scratch, shards, env = setups["lake"]
        _variant(sorted(dump.rglob("*.parquet"))[0], shards[0], 50)
        readers = {}
        for kind in ("poll", "hold"):
            stop, out = scratch / f"{kind}.stop", scratch / f"{kind}.json"
            proc = subprocess.Popen([sys.executable, "-c", READER, attach, str(stop), str(out), kind],
                                    stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
            assert proc.stdout.readline().strip() == "ready"
            readers[kind] = (proc, stop, out)
        run = _run("refresh_job", env, scratch, args.bootstrap, seed=99)
        time.sleep(1.0)
        for kind, (proc, stop, out) in readers.items():
            stop.touch()
            proc.wait(timeout=120)
            figures[f"reader_{kind}"] = json.loads(out.read_text())
            r = figures[f"reader_{kind}"]
            print(f"  lake reader ({'a new connection every 0.2 s' if kind == 'poll' else 'one held connection'}) "
                  f"through a refresh ({run['seconds']:.1f} s, {'ok' if run['success'] else 'FAILED'}): "
                  f"{r['attempted']} reads, {r['failed']} failed, {r['mixed']} mixed, longest gap "
                  f"{r['longest_gap_s']:.1f} s, publications seen {r['publications_seen']}"
                  + (f"; {r['errors']}" if r["errors"] else ""), flush=True)
        figures["lake"]["refresh_under_readers"] = run

        # two writers: the lake's store copied, a re-rank in both at once
        other = root / "lake-b"
        shutil.copytree(scratch, other, ignore=shutil.ignore_patterns("lake_data", "*.json", "*.log", "*.stop"))
        env_b = {**env, **_env(other, other / "dump", (attach, scratch / "lake_data"))}
        started = time.perf_counter()
        a = _start("rerank_job", env, scratch, args.bootstrap, seed=1001, tag="-a")
        b = _start("rerank_job", env_b, other, args.bootstrap, seed=1002, tag="-b")
        results = {"a": _finish(a), "b": _finish(b)}
        wall = time.perf_counter() - started
        with connect_lake(attach, read_only=True) as lk:
            lk.execute("BEGIN TRANSACTION")
            pid, rows = lk.execute("SELECT publication_id, rows FROM arena.publications "
                                   "ORDER BY publication_id DESC LIMIT 1").fetchone()
            rows = json.loads(rows)
            whole = all(lk.execute(f"SELECT count(*) FROM arena.{t}").fetchone()[0] == rows[t]
                        for t in ("leaderboard", "battles", "pairwise"))
            newest = lk.execute("SELECT publication_id, run_id FROM arena.publications "
                                "ORDER BY publication_id DESC LIMIT 1").fetchone()
            lk.execute("COMMIT")
        shown = {}  # which store's newest publication (its id and run) the lake shows
        for tag, store in (("a", scratch), ("b", other)):
            with duckdb.connect(str(store / "warehouse.duckdb"), read_only=True) as con:
                shown[tag] = con.execute("SELECT publication_id, run_id FROM arena.publications "
                                         "ORDER BY publication_id DESC LIMIT 1").fetchone() == newest
        figures["two_writers"] = {"wall_s": wall, "results": results, "lake_publication": pid, "whole": whole,
                                  "lake_board_is_store": shown}
        for tag, res in results.items():
            print(f"  two writers: run {tag} {res['seconds']:.1f} s, {'ok' if res['success'] else 'FAILED'}"
                  + ("" if res["success"] else f" ({str(res['failures'])[:300]})"), flush=True)
        print(f"  two writers: the lake shows publication {pid}, whole: {whole}; it is store a's newest publication: "
              f"{shown['a']}, store b's: {shown['b']} (wall {wall:.1f} s)", flush=True)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)

    print("\nsummary")
    for name in ("snapshot", "lake"):
        pubs = figures[name]["publications"]
        gates = [p["steps"].get("publication_gate", float("nan")) for p in pubs]
        print(f"  {name:8} publication (gate step): first {gates[0]:.2f} s, re-ranks median "
              f"{statistics.median(gates[1:]) if len(gates) > 1 else float('nan'):.2f} s")
    lake_pubs = figures["lake"]["publications"]
    per = [(b["data_path_mb"] + b["catalog_mb"]) - (a["data_path_mb"] + a["catalog_mb"])
           for a, b in zip(lake_pubs, lake_pubs[1:], strict=False)]
    print(f"  lake disk: after the first publication {lake_pubs[0]['data_path_mb']:,.1f} MiB data path + "
          f"{lake_pubs[0]['catalog_mb']:,.1f} MiB catalog; per re-rank publication "
          f"{statistics.median(per) if per else float('nan'):+,.2f} MiB (median)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))


if __name__ == "__main__":
    main()
