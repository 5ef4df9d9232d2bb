"""Test-only code location: the real ``defs`` with a 2-second new-dump sensor.

Used by ``test_dagster_dev_e2e.py`` (``dagster dev -m arena_pipeline_tests.support.e2e_definitions``).
Everything else (assets, checks, jobs, schedules, other sensors, resources, loggers) is taken
from ``arena_pipeline.definitions.defs`` as it is, so assets added there are covered here without
a change. Resources read ARENA_* and HF_* at run time, as in production.

The one difference from production, for the test's wall time: the sensor looks every 2 s
instead of every 10 min. (Both run steps in the run's own process, ``in_process_executor``: the
default multiprocess executor starts one Python process per step, each importing the whole code
location again, which made one refresh of a 40-row dump take 110-130 s on the 2-core machine.)
"""

import dagster as dg

from arena_pipeline import definitions as production
from arena_pipeline.sensors import make_new_dump_sensor

E2E_SENSOR_INTERVAL_SECONDS = 2


def for_e2e(base: dg.Definitions, interval_seconds: int) -> dg.Definitions:
    """``base`` with its new-dump sensor looking every ``interval_seconds``.

    (A function, not a module-level alias: Dagster refuses a module holding two Definitions.)
    """
    sensor = make_new_dump_sensor(interval_seconds=interval_seconds)
    return dg.Definitions(
        assets=base.assets,
        asset_checks=base.asset_checks,
        jobs=base.jobs,
        schedules=base.schedules,
        sensors=[s for s in (base.sensors or []) if s.name != sensor.name] + [sensor],
        resources=base.resources,
        executor=base.executor,
        loggers=base.loggers,
        metadata=base.metadata,
    )


defs = for_e2e(production.defs, E2E_SENSOR_INTERVAL_SECONDS)
