"""Readers during refreshes: failed and mixed reads, the longest gap, and what a held reader costs a refresh.

Run::

    .venv/bin/python benchmarks/bench_readers.py                     # 1x (135,634 votes), against 49b278d
    .venv/bin/python benchmarks/bench_readers.py --rows 20000        # quick
    .venv/bin/python benchmarks/bench_readers.py --baseline ''       # this checkout only

One warehouse per code version (this checkout, and with ``--baseline REF`` the code of that git
commit, run from a temporary worktree with the same venv), refreshed four times on bench_ingest.py's
synthetic dump, each time a new revision (one shard rewritten without its last rows: the others are
unchanged, as in a new dump of the Hub), the two code versions alternating step by step:

1. ``first``: the first refresh of an empty warehouse, no reader;
2. ``polled``: a refresh while a reader process opens ``ARENA_WAREHOUSE`` read-only every 0.2 s, reads
   the live publication's id and row counts, and checks them against ``arena.publications.rows`` of
   that publication (a *mixed* read: a table's rows that are not the publication's); counts reads
   attempted, failed (any error) and mixed, and the longest time between two good reads;
3. ``held``: a refresh while a reader process holds one read-only connection for the whole run
   (querying the leaderboard every second on it); the refresh must succeed;
4. ``plain``: a refresh of the next revision with no reader (the same conditions as ``held``);

then a re-rank publication (``rerank_job`` with another seed): its whole time and the gate step's.
Each refresh runs ``refresh_job`` in a fresh interpreter (imports excluded from its time).
The summary gives held / plain (target: at most 1.10x) and this checkout's refresh over the
baseline's, step by step (target: at most 1.2x), the polled reader's figures (target: 0 failed,
0 mixed) and the re-rank publication's time (target: within 5 s at 1x).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from bench_ingest import add_dump_arguments, dump_from_args  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
STEPS = ("first", "polled", "held", "plain")

POLLER = r"""
import sys
from arena_pipeline.core.store.warehouse import connect  # the snapshot's files resolved against its folder
from arena_pipeline_dev.readers import poll
path, stop, out = sys.argv[1], sys.argv[2], sys.argv[3]
poll(lambda: connect(path, read_only=True), stop, out)
"""

HOLDER = r"""
import duckdb, json, os, sys, time
from arena_pipeline.core.store.warehouse import connect  # the snapshot's files resolved against its folder
path, stop, out = sys.argv[1], sys.argv[2], sys.argv[3]
queries = failed = 0
con = connect(path, read_only=True)
pid = con.execute("SELECT max(publication_id) FROM arena.publications").fetchone()[0]
print("held", flush=True)
while not os.path.exists(stop):
    queries += 1
    try:
        con.execute("SELECT count(*), max(publication_id) FROM arena.leaderboard, arena.publications").fetchone()
    except Exception:
        failed += 1
    time.sleep(1.0)
con.close()
json.dump({"queries": queries, "failed": failed, "publication_held": pid}, open(out, "w"))
"""

CHILD = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import dagster as dg
from arena_pipeline.definitions import defs
job_name, out, bootstrap, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
job = defs.resolve_job_def(job_name)
with dg.DagsterInstance.ephemeral() as instance:
    started = time.perf_counter()
    result = job.execute_in_process(instance=instance, raise_on_error=False, run_config={
        "ops": {"rankings": {"config": {"bootstrap_rounds": bootstrap, "seed": seed}}}})
    seconds = time.perf_counter() - started
    steps = {s.step_key: (s.end_time or 0) - (s.start_time or 0) for s in instance.get_run_step_stats(result.run_id)}
    failures = [e.message for e in result.all_events if e.is_failure][:3]
import arena_pipeline
json.dump({"success": result.success, "seconds": seconds, "steps": steps, "failures": failures,
           "code": arena_pipeline.__file__}, open(out, "w"))
"""


def _variant(shard: Path, out: Path, drop: int) -> None:
    """``shard`` without its last ``drop`` rows, written to ``out`` (a new content revision)."""
    table = pq.read_table(shard)
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(table.slice(0, table.num_rows - drop), tmp, row_group_size=1000)
    os.replace(tmp, out)


def _live_dump(dump: Path, folder: Path) -> list[Path]:
    """A folder of hard links to ``dump``'s shards (its first one replaced per revision)."""
    shutil.rmtree(folder, ignore_errors=True)
    shards = sorted(dump.rglob("*.parquet"))
    for shard in shards:
        target = folder / shard.relative_to(dump)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(shard, target)
    return sorted(folder.rglob("*.parquet"))


@contextlib.contextmanager
def _reader(kind: str, warehouse: Path, scratch: Path, figures: dict):
    """A polling (``polled``) or holding (``held``) reader process during the block; its figures land in
    ``figures`` afterwards."""
    if kind not in ("polled", "held"):
        yield
        return
    stop, out = scratch / f"{kind}.stop", scratch / f"{kind}.json"
    stop.unlink(missing_ok=True)
    code = POLLER if kind == "polled" else HOLDER
    proc = subprocess.Popen([sys.executable, "-c", code, str(warehouse), str(stop), str(out)],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        if kind == "held":
            assert proc.stdout.readline().strip() == "held"
        else:
            time.sleep(0.5)
        yield
    finally:
        stop.touch()
        proc.wait(timeout=60)
        if out.exists():
            figures.update(json.loads(out.read_text()))


def _run(job: str, env: dict, scratch: Path, bootstrap: int, seed: int) -> dict:
    out = scratch / f"{job}.json"
    out.unlink(missing_ok=True)
    log = scratch / f"{job}.log"
    with log.open("a") as sink:
        # run in the scratch folder: ``python -c`` puts the working directory first on sys.path, and the
        # code measured must be the one PYTHONPATH names
        subprocess.run([sys.executable, "-c", CHILD, job, str(out), str(bootstrap), str(seed)], env=env,
                       stdout=sink, stderr=subprocess.STDOUT, check=False, cwd=scratch)
    if not out.exists():
        return {"success": False, "seconds": float("nan"), "steps": {}, "failures": [log.read_text()[-500:]]}
    return json.loads(out.read_text())


def _env(code: Path, scratch: Path, source: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARENA_", "DAGSTER_"))}
    env.update(ARENA_SOURCE=str(source), ARENA_WAREHOUSE=str(scratch / "warehouse.duckdb"),
               ARENA_CACHE_DIR=str(scratch / "cache"), ARENA_REPORT=str(scratch / "report" / "index.html"),
               PYTHONPATH=str(code))
    return env


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_dump_arguments(parser)
    parser.add_argument("--baseline", default="49b278d",
                        help="git commit whose code is measured alongside ('' for none; default 49b278d, "
                             "the code before the readers' snapshot)")
    parser.add_argument("--bootstrap", type=int, default=100, help="bootstrap rounds (default 100)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write all figures to this JSON file")
    args = parser.parse_args(argv)

    args.workdir.mkdir(parents=True, exist_ok=True)
    dump, meta = dump_from_args(args)
    root = Path(tempfile.mkdtemp(prefix="bench_readers_", dir=args.workdir))
    versions = {"this checkout": REPO}
    worktree = None
    if args.baseline:
        worktree = root / "baseline-code"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree), args.baseline],
                       check=True, capture_output=True)
        versions = {f"baseline {args.baseline}": worktree, **versions}
    print(f"dump      {args.rows:,} votes in {args.shards} shards ({dump}); bootstrap {args.bootstrap}")
    print(f"versions  {', '.join(versions)}; load avg {os.getloadavg()[0]:.2f}")
    figures: dict = {name: {} for name in versions}
    try:
        setups = {}
        for name, code in versions.items():
            scratch = root / name.split()[0]
            scratch.mkdir()
            shards = _live_dump(dump, scratch / "dump")
            setups[name] = (code, scratch, shards)
        for index, step in enumerate(STEPS):
            for name, (code, scratch, shards) in setups.items():
                if index:  # a new revision: the first shard without its last rows
                    _variant(sorted(dump.rglob("*.parquet"))[0], shards[0], 50 * index)
                reader: dict = {}
                env = _env(code, scratch, scratch / "dump")
                with _reader(step, Path(env["ARENA_WAREHOUSE"]), scratch, reader):
                    run = _run("refresh_job", env, scratch, args.bootstrap, seed=42)
                run["reader"] = reader
                figures[name][step] = run
                if "code" in run and not run["code"].startswith(str(code)):
                    raise SystemExit(f"{name} ran the code at {run['code']}, not {code}")
                extra = ""
                if step == "polled":
                    extra = (f"; reads {reader.get('attempted')} failed {reader.get('failed')} mixed "
                             f"{reader.get('mixed')} longest gap {reader.get('longest_gap_s', float('nan')):.1f} s")
                    if reader.get("errors"):
                        extra += f" ({'; '.join(f'{n}x {e}' for e, n in list(reader['errors'].items())[:2])})"
                elif step == "held":
                    extra = f"; held reader: {reader.get('queries')} queries, {reader.get('failed')} failed"
                status = "ok" if run["success"] else f"FAILED: {(run['failures'] or ['?'])[0][:160]}"
                print(f"  {name:24} {step:7} {run['seconds']:6.1f} s  {status}{extra}", flush=True)
        for name, (code, scratch, _) in setups.items():
            run = _run("rerank_job", _env(code, scratch, scratch / "dump"), scratch, args.bootstrap, seed=7)
            figures[name]["rerank"] = run
            gate = run["steps"].get("publication_gate", float("nan"))
            print(f"  {name:24} rerank  {run['seconds']:6.1f} s  (publication_gate step {gate:.1f} s) "
                  f"{'ok' if run['success'] else 'FAILED'}", flush=True)
            store = sum(p.stat().st_size for p in scratch.rglob("*") if p.is_file() and "dump" not in p.parts
                        and "cache" not in p.parts)
            figures[name]["disk_mb"] = store / 2**20
    finally:
        if worktree is not None:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)],
                           check=False, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)

    print("\nsummary")
    new = figures["this checkout"]
    polled = new["polled"]["reader"]
    print(f"  polled reader: {polled.get('attempted')} reads, {polled.get('failed')} failed, {polled.get('mixed')} "
          f"mixed, longest gap {polled.get('longest_gap_s', float('nan')):.1f} s  (target 0 failed, 0 mixed)")
    held, plain = new["held"], new["plain"]
    print(f"  refresh with a held reader {held['seconds']:.1f} s ({'ok' if held['success'] else 'FAILED'}) / "
          f"without {plain['seconds']:.1f} s = {held['seconds'] / plain['seconds']:.2f}x  (target at most 1.10x)")
    gate = new["rerank"]["steps"].get("publication_gate", float("nan"))
    print(f"  re-rank: {new['rerank']['seconds']:.1f} s, of which the publication (gate step) {gate:.1f} s  "
          "(target within 5 s at 1x)")
    for name, runs in figures.items():
        print(f"  {name}: warehouse files {runs.get('disk_mb', float('nan')):,.0f} MiB after the re-rank")
    if len(figures) > 1:
        base_name = next(n for n in figures if n.startswith("baseline"))
        base = figures[base_name]
        ratios = [new[s]["seconds"] / base[s]["seconds"] for s in STEPS if base[s]["success"] and new[s]["success"]]
        print(f"  this checkout / {base_name}, step by step: "
              + ", ".join(f"{s} {new[s]['seconds'] / base[s]['seconds']:.2f}x" for s in STEPS
                          if base[s]["success"] and new[s]["success"])
              + (f"; median {statistics.median(ratios):.2f}x  (target at most 1.2x)" if ratios else ""))
        bp = base["polled"]["reader"]
        print(f"  {base_name}: polled reader {bp.get('attempted')} reads, {bp.get('failed')} failed, "
              f"{bp.get('mixed')} mixed, longest gap {bp.get('longest_gap_s', float('nan')):.1f} s; held reader: "
              f"refresh {'ok' if base['held']['success'] else 'FAILED'} in {base['held']['seconds']:.1f} s")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "figures": figures}, indent=2, default=str))


if __name__ == "__main__":
    main()
