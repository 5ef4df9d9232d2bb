"""Evaluating the schedule or the sensor in a test, with its resources torn down after the tick.

A context left open keeps resources bound to its instance; torn down later by the garbage
collector, after ``instance_for_test`` has ended, they broke the next test's run ("Attempted to
resolve undefined DagsterInstance weakref") once the warehouse resource took part in a tick.
"""

from __future__ import annotations

import dagster as dg


def tick(definition: dg.SensorDefinition | dg.ScheduleDefinition, instance: dg.DagsterInstance,
         resources: dict, cursor: str | None = None):
    """One tick of ``definition`` (a sensor takes the ``cursor``), its context closed afterwards."""
    if isinstance(definition, dg.SensorDefinition):
        context = dg.build_sensor_context(cursor=cursor, instance=instance, resources=resources)
    else:
        context = dg.build_schedule_context(instance=instance, resources=resources)
    with context:
        return definition.evaluate_tick(context)
