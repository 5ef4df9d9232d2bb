"""core.prefetch: order, bounded look-ahead, errors raised in the consumer, early stop closes the source.

Ordered by events, not by elapsed time: a test waits for what the worker signals (an item begun, a
slot it found taken), with a timeout only as a guard against a hang.
"""

import threading

import pytest

from arena_pipeline.core.ingest import prefetch
from arena_pipeline.core.ingest.prefetch import prefetched

#: Seconds an event is waited for before the test fails (a guard against a hang, not a measurement).
GUARD_SECONDS = 10.0


def test_yields_every_item_in_order():
    assert list(prefetched(iter(range(1000)), depth=3)) == list(range(1000))
    assert list(prefetched(iter([]))) == []


class _Slots(threading.Semaphore):
    """The worker's slots, setting ``taken`` when the worker finds none free (it waits from then on)."""

    def __init__(self, value: int):
        super().__init__(value)
        self.taken = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        got = super().acquire(blocking, timeout)
        if not got:
            self.taken.set()
        return got


def test_runs_at_most_depth_items_ahead(monkeypatch):
    made, slots = [], []

    def source():
        for i in range(20):
            made.append(i)
            yield i

    def recorded(value: int) -> _Slots:
        slots.append(_Slots(value))
        return slots[-1]

    monkeypatch.setattr(prefetch.threading, "Semaphore", recorded)
    consumer = prefetched(source(), depth=2)
    assert next(consumer) == 0
    assert slots[0].taken.wait(GUARD_SECONDS)  # the worker ran ahead until no slot was free
    # the consumer holds item 0; the worker made 2 more (the one being made counts) and waits
    assert made == [0, 1, 2]
    assert list(consumer) == list(range(1, 20))
    assert made == list(range(20))


def test_work_overlaps_with_the_consumer():
    """While the consumer holds item i, the worker begins item i + 1 (a serial loop would begin it
    only once the consumer asks for it, so the wait below would fail)."""
    begun = [threading.Event() for _ in range(11)]

    def source():
        for i in range(10):
            begun[i].set()
            yield i
        begun[10].set()  # asked for the item after the last one: the end

    seen = []
    for item in prefetched(source()):
        assert begun[item + 1].wait(GUARD_SECONDS), f"item {item + 1} not begun while item {item} was in use"
        seen.append(item)
    assert seen == list(range(10))


def test_an_error_of_the_source_is_raised_in_the_consumer_after_the_items_before_it():
    def failing():
        yield 1
        yield 2
        raise ValueError("file changed while it was read")

    seen = []
    with pytest.raises(ValueError, match="changed while it was read"):
        for item in prefetched(failing()):
            seen.append(item)
    assert seen == [1, 2]


def test_stopping_early_closes_the_source_and_ends_the_worker():
    closed = threading.Event()

    def source():
        try:
            yield from range(10_000)
        finally:
            closed.set()

    before = threading.active_count()
    with pytest.raises(RuntimeError):
        for item in prefetched(source()):
            if item == 3:
                raise RuntimeError("the insert failed")
    assert closed.wait(GUARD_SECONDS)
    assert threading.active_count() == before


def test_depth_must_be_positive():
    with pytest.raises(ValueError):
        list(prefetched(iter([1]), depth=0))
