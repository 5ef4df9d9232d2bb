"""core.prefetch: order, bounded look-ahead, errors raised in the consumer, early stop closes the source."""

import threading
import time

import pytest

from arena_pipeline.core.ingest.prefetch import prefetched


def test_yields_every_item_in_order():
    assert list(prefetched(iter(range(1000)), depth=3)) == list(range(1000))
    assert list(prefetched(iter([]))) == []


def test_runs_at_most_depth_items_ahead():
    made = []

    def source():
        for i in range(20):
            made.append(i)
            yield i

    consumer = prefetched(source(), depth=2)
    assert next(consumer) == 0
    time.sleep(0.3)  # plenty of time for the worker to run ahead if it could
    # the consumer holds item 0; the worker made 2 more (the one being made counts) and waits
    assert len(made) == 1 + 2
    assert list(consumer) == list(range(1, 20))


def test_work_overlaps_with_the_consumer():
    """The worker makes the next item while the consumer is busy (both sleep: 10 x 0.05 s each)."""
    def slow_source():
        for i in range(10):
            time.sleep(0.05)
            yield i

    started = time.perf_counter()
    for _ in prefetched(slow_source()):
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    assert elapsed < 0.9  # serial would be 1.0 s; overlapped about 0.55 s


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
    assert closed.wait(2.0)
    assert threading.active_count() == before


def test_depth_must_be_positive():
    with pytest.raises(ValueError):
        list(prefetched(iter([1]), depth=0))
