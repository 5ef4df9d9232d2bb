"""Errors that say their cause: out of memory, a full disk, a lock or a damaged work file, found anywhere in an
exception's chain, as one line with the setting or the command that fixes it.

DuckDB aborts the transaction of a statement that fails; the next statement on that connection (a
``finally`` resetting a setting, a retry) then fails with "Current transaction is aborted (please
ROLLBACK)", and the cause is only the first exception's ``__context__``. :func:`explain` looks through
the whole chain.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator

import duckdb

from arena_pipeline.core.store.warehouse import REBUILD_COMMAND, WarehouseCorruptError


class ResourceLimitError(RuntimeError):
    """The warehouse ran out of memory or disk: a retry fails the same way until a setting changes."""

    retryable = False


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it was raised from or while handling, each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo.extend([current.__cause__, current.__context__])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_DISK_FULL = re.compile(r"no space left on device|disk is full|disk quota exceeded", re.IGNORECASE)


def explain(exc: BaseException, *, memory_limit: str | None, temp_directory: str | None,
            store: str | os.PathLike[str]) -> ResourceLimitError | None:
    """A :class:`ResourceLimitError` naming the setting to change when ``exc`` (or what it was raised from,
    however deep) is DuckDB running out of memory or a full disk; None otherwise."""
    for cause in chain(exc):
        if isinstance(cause, duckdb.OutOfMemoryException) or "out of memory" in str(cause).lower()[:200]:
            return ResourceLimitError(
                f"DuckDB ran out of memory ({_first_line(cause)}) under the Warehouse resource's memory_limit "
                f"{memory_limit or 'unset (80% of RAM)'}: raise memory_limit, or give DuckDB disk to spill to "
                f"(temp_directory: {temp_directory or 'DuckDB default beside the work file'}), then run again")
        if (isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT)) or (
                isinstance(cause, duckdb.Error) and _DISK_FULL.search(str(cause))):
            return ResourceLimitError(
                f"the disk is full ({_first_line(cause)}): free space on the file system of the store {store} "
                f"(ARENA_STORE_DIR) and of DuckDB's spill folder (temp_directory: {temp_directory or 'beside the work file'}), or point them at a larger one, then "
                "run again; the live publication is unchanged")
    return None


def damaged_work_file(work: str | os.PathLike[str], snapshot: str | os.PathLike[str],
                      exc: BaseException) -> WarehouseCorruptError:
    """The advice for a damaged work file: the work file and the readers' snapshot (whose history the work
    file held) moved aside together, then a run that rebuilds the last publication from the cached dump."""
    return WarehouseCorruptError(
        f"the pipeline's work file {work} is damaged ({_first_line(exc.__cause__ or exc)}); opening it again would fail the same way, "
        f"so it is not retried. The last publication can be rebuilt from the cached dump (a Hub revision already in "
        f"ARENA_CACHE_DIR is not downloaded again): move the work file and the readers' snapshot aside together and "
        f"re-run the pipeline, e.g. `mv {work} {work}.damaged && mv {snapshot} {snapshot}.old && "
        f"ARENA_WAREHOUSE={snapshot} {REBUILD_COMMAND}` (add your usual --config-json); earlier publications' "
        f"history stays in the moved files")
