"""Peak memory of a CSV-export load (core.ingest.sources.read_csv_export) against file size and cell size.

Each case runs in a fresh subprocess and reports its peak RSS (``ru_maxrss``) above the baseline of
a process that only imported the package, so the figures are the load's own. Cases:

- ``rows``: the real 100-row sample repeated (new ids) to a few file sizes: the per-file factor;
- ``cell``: the sample plus one nested cell of realistic text just under / over the limit:
  the per-cell factor of ``ast.literal_eval``, and that an oversized cell is never parsed.

Run from the repository root: ``.venv/bin/python benchmarks/bench_csv_memory.py [--workdir DIR]``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from arena_pipeline.core.ingest.sources import MAX_CELL_SYNTAX_CHARS

SAMPLE = Path(__file__).resolve().parents[1] / "arena_pipeline_tests" / "data" / "arena_human_preference_sample_100.csv"

CHILD = r"""
import json, resource, sys, time
from arena_pipeline.core.ingest import sources
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
limit = int(sys.argv[2])
parsed = sources.read_csv_export(sys.argv[1], max_cell_bytes=limit)
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"baseline_mib": before / 1024, "peak_mib": peak / 1024, "seconds": seconds,
                  "rows": parsed.table.num_rows, "quarantined": parsed.quarantine.height,
                  "rules": sorted(set(parsed.quarantine["rule"].to_list()))}))
"""


def _records() -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(io.StringIO(SAMPLE.read_text(encoding="utf-8"))))
    return rows[0], rows[1:]


def write_repeated(path: Path, copies: int) -> Path:
    header, records = _records()
    index = header.index("id")
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for c in range(copies):
            for r in records:
                row = list(r)
                row[index] = f"{r[index]}-{c}"
                writer.writerow(row)
    return path


def write_cell(path: Path, cell: str) -> Path:
    """The sample with row 0's conversation_a replaced by ``cell``."""
    header, records = _records()
    records = [list(r) for r in records]
    records[0][header.index("conversation_a")] = cell
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(records)
    return path


def write_big_cell(path: Path, cell_bytes: int) -> Path:
    """The sample with row 0's conversation_a replaced by one of ``cell_bytes`` of real-looking text."""
    words = "The quick brown fox explains attention in transformers, step by step. "
    messages = []
    size = 0
    while size < cell_bytes:
        text = words * 200
        messages.append({"role": "user" if len(messages) % 2 == 0 else "assistant",
                         "content": [{"type": "text", "text": text, "image": None, "mimeType": None}]})
        size += len(repr(messages[-1])) + 2
    return write_cell(path, repr(messages))


def measure(path: Path, limit: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(limit)], capture_output=True,
                         text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["file_mib"] = path.stat().st_size / 2**20
    result["load_mib"] = result["peak_mib"] - result["baseline_mib"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None, help="where the CSV files are written (default: a temp dir)")
    parser.add_argument("--limit", type=int, default=16 * 2**20, help="per-cell limit in bytes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        print(f"{'case':<28}{'file MiB':>10}{'load MiB':>10}{'x file':>8}{'s':>7}  rows/quarantined")
        for copies in (10, 40, 160):
            r = measure(write_repeated(work / f"rows{copies}.csv", copies), args.limit)
            print(f"{f'rows x{copies * 100}':<28}{r['file_mib']:>10.1f}{r['load_mib']:>10.0f}"
                  f"{r['load_mib'] / r['file_mib']:>8.1f}{r['seconds']:>7.1f}  {r['rows']}/{r['quarantined']}")
        for label, size in (("cell 4 MiB", 4 * 2**20), ("cell just under limit", args.limit - 2**20),
                            ("cell 2x limit (quarantined)", 2 * args.limit)):
            r = measure(write_big_cell(work / "cell.csv", size), args.limit)
            print(f"{label:<28}{r['file_mib']:>10.1f}{r['load_mib']:>10.0f}"
                  f"{r['load_mib'] / r['file_mib']:>8.1f}{r['seconds']:>7.1f}  {r['rows']}/{r['quarantined']} "
                  f"{','.join(r['rules'])}")
        # the worst shape for ast.literal_eval: tiny elements, ~1 kB of syntax tree each
        for label, elements in (("0,0,.. just under syntax cap", MAX_CELL_SYNTAX_CHARS - 2),
                                ("0,0,.. 12M (quarantined)", 12_000_000)):
            r = measure(write_cell(work / "tiny.csv", "[" + "0," * elements + "]"), args.limit)
            print(f"{label:<28}{r['file_mib']:>10.1f}{r['load_mib']:>10.0f}"
                  f"{r['load_mib'] / r['file_mib']:>8.1f}{r['seconds']:>7.1f}  {r['rows']}/{r['quarantined']} "
                  f"{','.join(r['rules'])}")
    print("load MiB: peak RSS above the process's peak after importing the package (0: no higher).")


if __name__ == "__main__":
    main()
