"""The load's worker processes (core/ingest/parallel.py): the forkserver starts before the jobs are ready and
forks workers with their libraries imported."""

from __future__ import annotations

import multiprocessing
import os
import resource
import subprocess
import sys
import time

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arena_pipeline.core.ingest.parallel import (
    JEMALLOC_VARIABLE,
    WORKER_JEMALLOC,
    run_in_processes,
    start_processes,
)

FORKSERVER = pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="no forkserver")


@FORKSERVER
def test_the_forkserver_runs_once_started_and_runs_the_jobs_after():
    start_processes(["colorsys"])  # returns at once: the forkserver imports while the caller goes on

    def forkserver_child() -> bool:  # its command line, once exec'd (a busy machine may take a moment)
        return any("forkserver" in " ".join(child.cmdline()) for child in psutil.Process().children())

    deadline = time.monotonic() + 30
    while not forkserver_child() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert forkserver_child()
    assert run_in_processes(abs, [-2, 3], 2) == [2, 3]


def pandas_loaded(_) -> bool:
    """Whether pandas is imported in the process running this (a job of :func:`run_in_processes`)."""
    return "pandas" in sys.modules


@FORKSERVER
def test_the_load_reads_the_ids_without_pandas_and_its_workers_start_with_it(tmp_path):
    """The main process reads the shards' ids without importing pyarrow.dataset (and pandas with it); the
    workers are forked with pandas imported (pyarrow imports it on a worker's first batch otherwise)."""
    shard = tmp_path / "data" / "train-00000-of-00001.parquet"
    shard.parent.mkdir()
    pq.write_table(pa.table({"id": ["a", "b", "a"]}), shard)
    script = f"""
import sys
from arena_pipeline.core.dataset.manifest import ShardFile, DumpManifest
from arena_pipeline.core.ingest import load
from arena_pipeline.core.ingest.parallel import run_in_processes
from arena_pipeline_tests.core.ingest.test_parallel import pandas_loaded
files = (ShardFile(path={str(shard)!r}, name="s", size=1, rows=3),)
manifest = DumpManifest(source_kind="local", source="s", requested_revision="r", revision="r", files=files)
repeated = load._repeated_ids(manifest).get_column("id").to_list()
print(repeated, "pyarrow.dataset" in sys.modules, "pandas" in sys.modules,
      run_in_processes(pandas_loaded, [0], 1, load._WORKER_PRELOAD))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[-2] == "['a'] False False [True]"


def allocator_settings(_) -> str | None:
    """Polars' allocator settings in the process running this (a job of :func:`run_in_processes`)."""
    return os.environ.get(JEMALLOC_VARIABLE)


#: Pages of the buffers :func:`faults_reallocating` allocates a round (4 KiB each): 64 MiB in 1 MiB buffers (under
#: jemalloc's oversize arena, 8 MiB and more, whose buffers go back at once in the workers too)
ROUND_PAGES = 64 * 2**20 // 4096


def faults_reallocating(pause: float) -> int:
    """Minor page faults of this process while it allocates :data:`ROUND_PAGES` in Polars buffers, frees them,
    waits ``pause`` seconds and does it again three times (the first round left out)."""
    import polars as pl

    def allocate() -> list[pl.Series]:
        return [pl.int_range(i, i + 2**17, eager=True) for i in range(64)]

    kept = allocate()
    del kept
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        time.sleep(pause)
        kept = allocate()
        del kept
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@FORKSERVER
def test_the_workers_keep_the_pages_they_free_for_the_next_batch_and_the_caller_is_unchanged():
    """Polars gives freed pages back after 0.5 s; a worker keeps them for
    jemalloc's default 10 s, so a batch allocated after a pause reuses the last one's pages instead of faulting
    on new ones. In a fresh process: the forkserver of this one may run already."""
    script = """
import os
from arena_pipeline.core.ingest.parallel import JEMALLOC_VARIABLE, run_in_processes
from arena_pipeline_tests.core.ingest.test_parallel import allocator_settings, faults_reallocating
before = os.environ.get(JEMALLOC_VARIABLE)
print(run_in_processes(allocator_settings, [0], 1)[0])
print(os.environ.get(JEMALLOC_VARIABLE) == before)
print(run_in_processes(faults_reallocating, [1.5], 1)[0])
print(faults_reallocating(1.5))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    settings, unchanged, in_worker, in_caller = done.stdout.split("\n")[:4]
    assert settings.endswith(WORKER_JEMALLOC)  # the last setting of a key wins
    assert unchanged == "True"
    assert int(in_worker) < 3 * ROUND_PAGES // 4  # a fault per page a round when the pages go back
    assert int(in_caller) > 3 * ROUND_PAGES // 2  # Polars' own settings: faulted again each round
