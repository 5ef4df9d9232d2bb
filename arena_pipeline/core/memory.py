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
    """The process's resident memory before and after :func:`return_freed_memory` (None where unknown), and
    whether it collected Python's garbage."""

    rss_before: int | None
    rss_after: int | None
    collected: bool = True

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
    fresh process, after the imports, so that a collection walks only what was made since (a full one walks
    ~400k objects after the imports, a quarter of a CPU-second). Frozen cyclic garbage is never freed: call it
    where what is alive stays alive (the imports), never while a step's data is held."""
    gc.freeze()


def collect_everything_next() -> None:
    """Let the objects :func:`leave_alive_objects_out` left out back into collections (``gc.unfreeze``): in a
    process that runs many jobs (the tests), the earlier runs' garbage is collected as usual."""
    gc.unfreeze()


def _release_pages() -> None:
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def return_freed_memory(collect_above: int | None = None) -> Returned:
    """Give the system back what the step before freed, so that the next step starts near the imports' memory.

    Three holders keep freed memory in a process that runs many steps (the in-process executor), measured
    between the steps of a 10x refresh (docs/scaling.md, "What bounds the 10x peak"):

    - pyarrow's default memory pool (mimalloc in the wheels) keeps the pages of freed buffers (DuckDB's
      ``.pl()``/``.arrow()`` results, Parquet reads and writes) for reuse; ``release_unused()`` returns them.
    - glibc's heaps (NumPy arrays under the mmap threshold, which grows after large frees, and Python's
      own allocations): ``malloc_trim(0)`` returns their free pages.
    - Python's cyclic garbage: frames and arrays reachable only from reference cycles (a step's contexts,
      tracebacks, closures) wait for a full collection, which the generational thresholds rarely run.
      ``gc.collect()`` frees them, at the cost of walking every object (~0.1 CPU-s after a step that imported
      Great Expectations): it runs only when the process still holds more than ``collect_above`` bytes once
      the pages are returned (None: always; never where the RSS is unknown), and the pages it frees are returned after it.

    Polars' jemalloc (background purging threads, decay of 0.5-1 s) and DuckDB's allocator (flushed when a
    database closes) return their memory by themselves. The rows and the order of every computation are
    untouched: only freed memory moves.
    """
    before = resident_bytes()
    _release_pages()
    held = resident_bytes()
    collected = collect_above is None or (held is not None and held > collect_above)
    if collected:
        gc.collect()
        _release_pages()
    return Returned(before, resident_bytes(), collected)
