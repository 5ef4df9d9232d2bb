"""The jobs give the system back what each step freed (jobs.py's hook, core/memory.py): the next step starts low."""

import sys

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from arena_pipeline.core.memory import resident_bytes
from arena_pipeline.definitions import defs
from arena_pipeline.jobs import return_freed_memory_after_step

MIB = 2**20
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")


def test_every_job_of_the_pipeline_returns_freed_memory_after_each_step():
    for name in ("refresh_job", "rerank_job"):
        assert return_freed_memory_after_step in defs.resolve_job_def(name).hook_defs, name


def test_a_step_starts_without_the_memory_the_step_before_freed():
    seen: dict[str, int] = {}

    @dg.asset
    def allocates() -> int:
        """Makes 300 MiB in pyarrow's pool and frees it (its pool keeps the pages)."""
        product = pc.multiply(pc.random(300 * MIB // 8), 2.0)
        seen["peak"] = resident_bytes()
        del product
        seen["freed"] = resident_bytes()
        return 1

    @dg.asset
    def after(allocates: int) -> int:
        """Notes the memory it starts with."""
        seen["next"] = resident_bytes()
        return allocates

    pa.default_memory_pool().release_unused()
    job = dg.define_asset_job("two_steps", hooks={return_freed_memory_after_step})
    definitions = dg.Definitions(assets=[allocates, after], jobs=[job])
    with dg.instance_for_test() as instance:
        assert definitions.resolve_job_def("two_steps").execute_in_process(instance=instance).success
    assert seen["freed"] > seen["peak"] - 100 * MIB  # the pool kept the pages ...
    assert seen["next"] < seen["peak"] - 200 * MIB, {k: v // MIB for k, v in seen.items()}  # ... until the hook
