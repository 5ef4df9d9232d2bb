"""Tests of arena_pipeline.core.memory: what a step freed is given back to the system."""

import gc
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from arena_pipeline.core.memory import resident_bytes, return_freed_memory

MIB = 2**20
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")


def _touched(n_bytes: int) -> np.ndarray:
    values = np.ones(n_bytes // 8)
    values += 1  # every page resident
    return values


def test_the_pages_of_freed_arrow_buffers_are_given_back():
    # pyarrow's default pool keeps the pages of freed buffers for reuse: they stay resident until released
    pa.default_memory_pool().release_unused()
    table = pa.table({"x": pc.multiply(pa.array(_touched(300 * MIB)), 2.0)})  # the product in pyarrow's pool
    assert pa.total_allocated_bytes() >= 300 * MIB
    del table
    held = resident_bytes()
    returned = return_freed_memory()
    assert pa.total_allocated_bytes() < MIB
    assert returned.rss_before >= held - 20 * MIB
    assert returned.returned >= 200 * MIB, returned


class _Cycle:
    def __init__(self, n_bytes: int):
        self.values, self.me = _touched(n_bytes), self


def test_arrays_held_only_by_a_reference_cycle_are_freed():
    gc.collect()
    was = gc.isenabled()
    gc.disable()  # no collection but ours
    try:
        _Cycle(200 * MIB)  # unreachable at once, freed only by a collection
        returned = return_freed_memory()
    finally:
        if was:
            gc.enable()
    assert returned.returned >= 150 * MIB, returned


def test_objects_left_out_of_collections_until_let_back():
    from arena_pipeline.core.memory import collect_everything_next, leave_alive_objects_out

    alive = [object() for _ in range(1000)]
    leave_alive_objects_out()
    assert gc.get_freeze_count() >= len(alive)  # a later collection walks only what is made after
    collect_everything_next()
    assert gc.get_freeze_count() == 0


def test_garbage_is_collected_only_above_the_given_resident_size():
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        _Cycle(200 * MIB)
        kept = return_freed_memory(collect_above=resident_bytes() + 10 * 2**30)  # far above: no collection
        collected = return_freed_memory(collect_above=resident_bytes() - 100 * MIB)  # above it: collected
    finally:
        if was:
            gc.enable()
    assert not kept.collected and abs(kept.returned) < 50 * MIB, kept
    assert collected.collected and collected.returned >= 150 * MIB, collected
