"""Wall time of a Hub download (``core.ingest.hub.download_dump``) from the fake Hub on 127.0.0.1.

Run::

    .venv/bin/python benchmarks/bench_hub.py                 # 20,000 rows in 4 shards (~450 MB)
    .venv/bin/python benchmarks/bench_hub.py --rows 135634 --shards 8   # full size (~3 GB)

The dump is bench_ingest.py's synthetic dump (same cache under ``--workdir``), published on the
test suite's fake Hub (``arena_pipeline_dev/fake_hub.py``, a subprocess stopped by PID). Three
figures, best of ``--repeat``: a cold download into an empty cache (every shard fetched, checked
against the Hub's size and sha256, opened and checked against the dataset card), a warm call for
``main`` (one API request, no file request) and a call pinned to the cached commit (no request).
The fake Hub serves from the same disk over loopback, so the cold figure is the client's own cost
(HTTP, hashing, verification), not a network's.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_ingest import add_dump_arguments, dump_from_args  # noqa: E402

from arena_pipeline.core.ingest import hub  # noqa: E402
from arena_pipeline.core.ingest.sources import verify_shard  # noqa: E402
from arena_pipeline_dev.hub_server import fake_hub_server  # noqa: E402

REPO = "lmarena-ai/arena-human-preference-140k"


def _timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_dump_arguments(parser, rows=20_000, shards=4)
    parser.add_argument("--repeat", type=int, default=3, help="keep the best of N runs (default 3)")
    args = parser.parse_args(argv)

    dump, _ = dump_from_args(args)
    shards = sorted((dump / "data").glob("train-*.parquet"))
    size = sum(p.stat().st_size for p in shards)
    print(f"dump: {len(shards)} shard(s), {size / 1e6:.0f} MB, {args.rows} rows")
    with tempfile.TemporaryDirectory(dir=args.workdir) as scratch:
        scratch = Path(scratch)
        with fake_hub_server(scratch / "hub") as server:
            sha = server.publish(REPO, "main", {f"data/{p.name}": p for p in shards})
            cache = scratch / "cache"

            def fetch(revision: str):
                return hub.download_dump(REPO, revision, cache, endpoint=server.url, token=False,
                                         verify=verify_shard)

            cold, warm, pinned = [], [], []
            for _ in range(args.repeat):
                shutil.rmtree(cache, ignore_errors=True)
                cold.append(_timed(lambda: fetch("main"))[0])
                warm.append(_timed(lambda: fetch("main"))[0])
                pinned.append(_timed(lambda: fetch(sha))[0])
    print(f"cold download: {min(cold):.2f} s ({size / 1e6 / min(cold):.0f} MB/s)")
    print(f"cache hit for main (1 API request): {min(warm) * 1000:.0f} ms")
    print(f"cache hit for the pinned sha (no request): {min(pinned) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
