"""Work run in worker processes (the load on every core): how many, and the process pool that runs them."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from typing import TypeVar

J = TypeVar("J")
R = TypeVar("R")

#: Worker processes of a load at most (each holds a batch: ``load.BATCH_ROWS`` votes, ~700 to 750 MiB of RSS at peak on
#: the 1x synthetic dump, its libraries and the pages it keeps for reuse (:data:`WORKER_JEMALLOC`) included: the
#: load's memory is bounded by this and the batch, never by the dump's size; benchmarks/bench_load_workers.py).
MAX_LOAD_WORKERS = 4
#: A dump smaller than this loads in one process unless the workers are set: starting a worker (its imports,
#: about 2 s of CPU) costs more than it saves on a few batches.
MIN_PARALLEL_BYTES = 64 * 2**20
#: The allocator settings of Polars (jemalloc) in the workers, appended to its own. Polars gives freed pages back
#: to the system after 0.5 s (1 s once MADV_FREE'd); a worker frees and allocates its batches' buffers many times a
#: second, each page given back costing a page fault when written again: ~1.5 M faults and 4 CPU-s of system time
#: per worker in a load of the 1x dump. With jemalloc's own default delay (10 s), the pages are reused and still
#: given back once a worker no longer uses them (benchmarks/bench_load_workers.py). Buffers of 8 MiB and more
#: (jemalloc's oversize arena) still go back at once: keeping them too (``oversize_threshold:0``) saved ~1.5 CPU-s
#: more at 1x for ~300 MiB more a worker, which the 10x refresh's peak (3 GB with the run's process) cannot spare.
WORKER_JEMALLOC = "dirty_decay_ms:10000,muzzy_decay_ms:10000"
#: The environment variable Polars' jemalloc reads its settings from (prefixed: not the system's allocator).
JEMALLOC_VARIABLE = "_RJEM_MALLOC_CONF"


def load_workers(workers: int | None = None) -> int:
    """The worker processes of a load: ``workers``, or the cores this process may use, at most
    :data:`MAX_LOAD_WORKERS`."""
    if workers is not None:
        return max(1, workers)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_LOAD_WORKERS))


def _context(preload: Sequence[str] = ()) -> multiprocessing.context.BaseContext:
    """The processes' context: a forkserver (spawn where there is none) that imports ``preload`` once."""
    context = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                                          else "spawn")
    if context.get_start_method() == "forkserver" and preload:
        context.set_forkserver_preload(list(preload))
    return context


@contextmanager
def _worker_environment() -> Iterator[None]:
    """The environment the processes started within inherit: the caller's, with :data:`WORKER_JEMALLOC`
    appended to Polars' allocator settings (a later setting wins). The caller's is restored after."""
    before = os.environ.get(JEMALLOC_VARIABLE)
    os.environ[JEMALLOC_VARIABLE] = f"{before},{WORKER_JEMALLOC}" if before else WORKER_JEMALLOC
    try:
        yield
    finally:
        if before is None:
            del os.environ[JEMALLOC_VARIABLE]
        else:
            os.environ[JEMALLOC_VARIABLE] = before


def start_processes(preload: Sequence[str] = ()) -> None:
    """Start the forkserver now, without waiting for it: its imports of ``preload`` (about 0.5 s of CPU, a
    second or more of wall time on a busy machine) run while the caller prepares the jobs, not after. A
    forkserver already running is kept (its preload is the one it started with)."""
    if _context(preload).get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with _worker_environment():  # the forkserver's environment is every worker's
            forkserver.ensure_running()


def run_in_processes(function: Callable[[J], R], jobs: Iterable[J], workers: int, preload: Sequence[str] = ()
                     ) -> list[R]:
    """``function`` of each of ``jobs`` in ``workers`` processes, the results in the jobs' order.

    The processes are started by a forkserver (spawn where there is none): Dagster's and DuckDB's threads
    make ``fork`` unsafe. The forkserver imports ``preload`` once; each process it starts is a copy. The
    first failure is raised as the process raised it, once every running job has stopped (the jobs not
    started are cancelled): a caller that deletes what the jobs wrote finds nothing being written. The
    processes run with :data:`WORKER_JEMALLOC`.
    """
    context = _context(preload)
    jobs = list(jobs)
    if not jobs:
        return []
    start_processes(preload)
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(jobs))), mp_context=context) as pool:
        with _worker_environment():  # without a forkserver, the processes start as the jobs are submitted
            futures: list[Future] = [pool.submit(function, job) for job in jobs]
        wait(futures, return_when=FIRST_EXCEPTION)
        failed = [f for f in futures if f.done() and not f.cancelled() and f.exception() is not None]
        if failed:
            pool.shutdown(wait=True, cancel_futures=True)
            raise failed[0].exception()
        return [future.result() for future in futures]
