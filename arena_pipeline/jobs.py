"""Jobs: the full refresh of every asset, and a re-rank of the live dump that ends in a publication."""

import dagster as dg

from arena_pipeline.assets.rankings import rankings
from arena_pipeline.core.memory import (
    collect_everything_next,
    leave_alive_objects_out,
    resident_bytes,
    return_freed_memory,
)

#: a collection runs after a step when the process holds this much more than after the last one (or than
#: when the run's first step ended): below it, walking every object costs more than it could return
COLLECT_AFTER_GROWTH = 128 * 2**20
_run: dict[str, int | str | None] = {}  # the run this process runs (one at a time); its RSS after the last collection


@dg.success_hook(name="return_freed_memory")
def return_freed_memory_after_step(context: dg.HookContext) -> None:
    """After each step, give the system back what the step freed (``core/memory.py``), so that the next
    step starts near the memory of the imports instead of above the last step's peak (the run's steps share
    one process: the in-process executor). Python's garbage is collected when the process grew by
    ``COLLECT_AFTER_GROWTH`` since the last collection; in a fresh process the objects alive after the first
    step (the imports') are left out of those collections, and a process that ran a run before (the tests)
    lets them back in."""
    if _run.get("id") != context.run_id:
        if _run:
            collect_everything_next()
        else:
            leave_alive_objects_out()
        _run.update(id=context.run_id, collected_at=resident_bytes())
    returned = return_freed_memory((_run["collected_at"] or 0) + COLLECT_AFTER_GROWTH)
    if returned.collected:
        _run["collected_at"] = returned.rss_after


refresh_job = dg.define_asset_job(
    "refresh_job",
    selection=dg.AssetSelection.all(),
    description="Fetch the dump, rebuild the flat tables and everything computed from them, publish.",
    hooks={return_freed_memory_after_step},
)

rerank_job = dg.define_asset_job(
    "rerank_job",
    # every table of the rankings fit (a publication takes them from one run) and everything computed from
    # them, with their checks: the validation tables (a publication never shows the comparison of another
    # board: the gate refuses them stale), the gate and the report
    selection=dg.AssetSelection.assets(rankings).downstream(),
    description="Re-fit the leaderboards of the live dump with new ranking settings (run config of "
    "'rankings'), compare the new boards with the published board and the benchmark scores, and publish "
    "them through the gate, then render the report; the flat tables are reused, not copied.",
    hooks={return_freed_memory_after_step},
)
