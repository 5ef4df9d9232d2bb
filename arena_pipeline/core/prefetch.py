"""Run an iterator in a worker thread a bounded number of items ahead of its consumer."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")

_DONE = object()
_POLL_SECONDS = 0.05


def prefetched(items: Iterator[T], depth: int = 1) -> Iterator[T]:
    """Yield ``items`` in order while a worker thread produces up to ``depth`` of them ahead.

    The loader reads and flattens the next batch (pyarrow and Polars, which release the GIL) while
    DuckDB stores the current one, so the two overlap on two cores; memory grows by at most
    ``depth`` items plus the one being made. An exception of ``items`` is raised here, in the
    consumer, at the point it occurred in the sequence; when the consumer stops early (an exception,
    ``close()``), the worker stops at its next item and ``items`` is closed in the worker.

    Parameters
    ----------
    items
        The iterator to run ahead (it is consumed in the worker thread only).
    depth
        Items kept ready beyond the one the consumer holds (at least 1).
    """
    if depth < 1:
        raise ValueError("depth must be at least 1")
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple[bool, object]) -> bool:
        while not stop.is_set():
            try:
                ready.put(entry, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    break
            else:
                put((True, _DONE))
        except BaseException as exc:  # handed to the consumer, raised there
            put((False, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=work, name="prefetch", daemon=True)
    worker.start()
    try:
        while True:
            ok, item = ready.get()
            if not ok:
                raise item  # type: ignore[misc]
            if item is _DONE:
                return
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        worker.join()
