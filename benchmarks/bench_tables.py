"""Row count and content hash of every published ``arena.*`` relation after a refresh: the no-change check.

Run::

    .venv/bin/python benchmarks/bench_tables.py --rows 20000 --out before.json
    .venv/bin/python benchmarks/bench_tables.py --rows 20000 --compare before.json

The dump is bench_ingest.py's synthetic dump (cached under ``--workdir``). The refresh job runs in this
process on a scratch warehouse, then the readers' snapshot is opened read-only and, for every view and
table of the ``arena`` schema, the rows are counted and hashed: an order-free sum of DuckDB's ``hash``
of each row, floats rounded to 6 decimals. Columns that differ between any two runs by design (timestamps,
run ids, durations, file paths, publication numbers' times) are left out and listed. Two code versions
that publish the same tables print the same hashes; ``--compare`` names the relations that differ.
"""

from __future__ import annotations

import argparse
import json
import re
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

#: column names whose values depend on the run, not on the votes and the code
VOLATILE = re.compile(r"(run_id|_at$|^at$|time|seconds|duration|elapsed|path|file|host|pid|_ms$|created|"
                      r"started|finished|version$|dagster|snapshot|^tables$)", re.IGNORECASE)


def relation_hashes(db: Path) -> dict:
    """``{relation: {"rows", "hash", "left_out"}}`` for every relation of the ``arena`` schema."""
    con = connect_warehouse(str(db), read_only=True)
    try:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'arena' ORDER BY 1").fetchall()]
        out = {}
        for name in names:
            cols = con.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = 'arena' AND table_name = ? ORDER BY ordinal_position", [name]).fetchall()
            kept, left_out = [], []
            for col, dtype in cols:
                if VOLATILE.search(col) or dtype.startswith("TIMESTAMP") or dtype in ("DATE", "INTERVAL"):
                    left_out.append(col)
                elif dtype in ("DOUBLE", "FLOAT", "REAL") or dtype.startswith("DECIMAL"):
                    kept.append(f'round("{col}", 6)')
                else:
                    kept.append(f'"{col}"')
            row_hash = f"hash({', '.join(kept)})" if kept else "0"
            rows, total = con.execute(
                f'SELECT count(*), sum({row_hash}::HUGEINT) % 18446744073709551557 FROM arena."{name}"').fetchone()
            out[name] = {"rows": rows, "hash": f"{int(total or 0):016x}", "left_out": left_out}
        return out
    finally:
        con.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_dump_arguments(parser)
    parser.add_argument("--bootstrap", type=int, default=20, help="bootstrap rounds (default 20)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--compare", type=Path, help="a JSON written by --out to compare with")
    args = parser.parse_args(argv)

    dump, meta = dump_from_args(args)
    scratch = Path(tempfile.mkdtemp(prefix="bench_tables_", dir=args.workdir))
    warehouse = scratch / "warehouse.duckdb"
    resources = {
        "dump_source": DumpSource(source=str(dump)),
        "warehouse": Warehouse(database=str(warehouse)),
        "report_settings": ReportSettings(report_path=str(scratch / "report" / "index.html")),
    }
    started = time.perf_counter()
    with dg.instance_for_test() as instance:
        result = defs.resolve_job_def("refresh_job").execute_in_process(
            instance=instance, resources=resources, raise_on_error=False,
            run_config={"ops": {"rankings": {"config": {"bootstrap_rounds": args.bootstrap}}}})
    print(f"dump {dump} ({meta['rows']:,} rows): refresh {'ok' if result.success else 'FAILED'} "
          f"in {time.perf_counter() - started:.1f} s; scratch {scratch}")
    figures = relation_hashes(warehouse)
    for name, f in figures.items():
        print(f"  arena.{name:<32} {f['rows']:>10,} rows  {f['hash']}"
              + (f"  (left out: {', '.join(f['left_out'])})" if f["left_out"] else ""))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))
    if args.compare:
        before = json.loads(args.compare.read_text())
        differ = sorted(n for n in set(before) | set(figures)
                        if (before.get(n) or {}).get("hash") != (figures.get(n) or {}).get("hash")
                        or (before.get(n) or {}).get("rows") != (figures.get(n) or {}).get("rows"))
        print(f"compared with {args.compare}: {len(figures)} relations now, {len(before)} before; "
              + ("identical" if not differ else f"{len(differ)} differ: {', '.join(differ)}"))


if __name__ == "__main__":
    main()
