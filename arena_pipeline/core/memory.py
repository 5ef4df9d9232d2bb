"""Memory a step freed but the process's allocators kept, given back to the system between steps."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

_STATM = Path("/proc/self/statm")


@dataclass(frozen=True)
class Returned:
    """The process's resident memory before and after :func:`return_freed_memory` (None where unknown)."""

    rss_before: int | None
    rss_after: int | None

    @property
    def returned(self) -> int | None:
        """Bytes the process's resident set shrank by (None where unknown)."""
        if self.rss_before is None or self.rss_after is None:
            return None
        return self.rss_before - self.rss_after


def resident_bytes() -> int | None:
    """The process's resident set in bytes (Linux ``/proc/self/statm``; None elsewhere)."""
    try:
        return int(_STATM.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim`` (None with another C library, e.g. musl or macOS's)."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def leave_alive_objects_out() -> None:
    """Leave every object alive now out of later collections (``gc.freeze``), without walking them: in a
    fresh process, the imports' ~400k objects (a quarter of a CPU-second a full collection)."""
    gc.freeze()


def collect_everything_next() -> None:
    """Let the objects an earlier :func:`return_freed_memory` or :func:`leave_alive_objects_out` left out
    back into collections, so that the next one walks everything: in a process that runs many jobs (the
    tests), at a run's start, the earlier runs' garbage is collected."""
    gc.unfreeze()


def return_freed_memory() -> Returned:
    """Give the system back what the step before freed, so that the next step starts near the imports' memory.

    Three holders keep freed memory in a process that runs many steps (the in-process executor), measured
    between the steps of a 10x refresh (docs/scaling.md, "What bounds the 10x peak"):

    - Python's cyclic garbage: frames and arrays reachable only from reference cycles (a step's contexts,
      tracebacks, closures) wait for a full collection, which the generational thresholds rarely run;
      ``gc.collect()`` frees them now. What survives it is then left out of later collections
      (``gc.freeze``): a full collection walks every object, ~400k after the imports (a quarter of a
      CPU-second), so the next one walks only what was made since (the next step's objects).
    - pyarrow's default memory pool (mimalloc in the wheels) keeps the pages of freed buffers (DuckDB's
      ``.pl()``/``.arrow()`` results, Parquet reads and writes) for reuse; ``release_unused()`` returns them.
    - glibc's heaps (NumPy arrays under the mmap threshold, which grows after large frees, and Python's
      own allocations): ``malloc_trim(0)`` returns their free pages.

    Polars' jemalloc (background purging threads, decay of 0.5-1 s) and DuckDB's allocator (flushed when a
    database closes) return their memory by themselves. The rows and the order of every computation are
    untouched: only freed memory moves.
    """
    before = resident_bytes()
    gc.collect()
    gc.freeze()
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    return Returned(before, resident_bytes())
