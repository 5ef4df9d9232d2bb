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
    """Yield ``items`` in order while a worker thread makes up to ``depth`` of them ahead.

    The loader reads and flattens the next batch (pyarrow and Polars, which release the GIL) while
    DuckDB stores the current one, so the two overlap on two cores. Memory holds at most ``depth``
    items besides the one the consumer has, the one being made included: the worker starts an item
    only when the consumer has come back for the previous one (with ``depth=1``: the consumer's
    batch and the next one, made or being made; not a third one made while the second waits). An
    exception of ``items`` is raised here, in the consumer, at the point it occurred in the
    sequence; when the consumer stops early (an exception, ``close()``), the worker stops at its
    next item and ``items`` is closed in the worker.

    Parameters
    ----------
    items
        The iterator to run ahead (it is consumed in the worker thread only).
    depth
        Items made ahead of the consumer, the one being made included (at least 1).
    """
    if depth < 1:
        raise ValueError("depth must be at least 1")
    ready: queue.Queue = queue.Queue()  # bounded by the slots: at most depth + 1 entries
    slots = threading.Semaphore(depth + 1)  # the consumer's item and depth more
    stop = threading.Event()

    def acquire() -> bool:
        while not stop.is_set():
            if slots.acquire(timeout=_POLL_SECONDS):
                return True
        return False

    def work() -> None:
        try:
            while acquire():
                item = next(items, _DONE)
                ready.put((True, item))
                if item is _DONE:
                    break
                del item  # the consumer's now: not held while the next one is made
        except BaseException as exc:  # handed to the consumer, raised there
            ready.put((False, exc))
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
            del item  # the consumer is done with it: not held while the next one is awaited
            slots.release()
    finally:
        stop.set()
        worker.join()
