"""How ``raw_dump`` identifies a local dump: its files' sha256 taken once, then remembered.

Run::

    .venv/bin/python benchmarks/bench_dump_hash.py DUMP [DUMP ...]

``DUMP`` is a local source as ``ARENA_DUMP`` names it (a folder of parquet shards, or one CSV export), e.g. a
synthetic dump of bench_scale.py under its ``--workdir``. For each, ``local_dump.local_manifest`` (what
``raw_dump`` calls) runs twice on a remembered-hashes file of its own, empty at first (in a temporary folder,
deleted after): the first run hashes every file, the second finds each file's sha256 remembered
(``ContentHashes``: path, size, times and inode unchanged) and only opens each shard's footer. It prints the
files, their size, wall and CPU seconds (the process's, the hashing threads included) of each run, and the
revision, which both runs must agree on.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from arena_pipeline.core.ingest.local_dump import ContentHashes, local_manifest
from arena_pipeline.core.ingest.sources import parse_source

MB = 1 << 20


def measure(dump: str) -> list[dict]:
    """The two runs of ``local_manifest`` on ``dump``: hashed, then remembered."""
    spec = parse_source(dump)
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench_dump_hash_") as folder:
        hashes = Path(folder) / "local-sha256.json"
        for label in ("hashed", "remembered"):
            cpu, wall = time.process_time(), time.perf_counter()
            manifest = local_manifest(spec, ContentHashes(hashes))
            runs.append({"run": label, "files": len(manifest.files), "mib": manifest.bytes / MB,
                         "seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu,
                         "revision": manifest.revision})
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dumps", nargs="+", help="local dumps (a folder of parquet shards or a CSV export)")
    args = parser.parse_args()
    for dump in args.dumps:
        runs = measure(dump)
        for run in runs:
            print(f"{Path(dump).name}: {run['run']:<10} {run['files']:4d} files {run['mib']:9,.0f} MiB "
                  f"{run['seconds']:7.2f} s wall {run['cpu_seconds']:7.2f} s CPU  {run['revision']}")
        if len({run["revision"] for run in runs}) != 1:
            raise SystemExit(f"{dump}: the two runs disagree on the revision")


if __name__ == "__main__":
    main()
