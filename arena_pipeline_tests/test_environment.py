"""The variables the typo check knows are exactly those the pipeline's default resources read."""

import dagster as dg

from arena_pipeline.definitions import default_resources
from arena_pipeline.environment import known_variables, resource_variables


def test_known_variables_are_those_of_the_default_resources():
    used = resource_variables(type(r) for r in default_resources().values() if isinstance(r, dg.ConfigurableResource))
    assert known_variables() == used
    assert "ARENA_SOURCE" in used and "ARENA_WAREHOUSE" in used
