"""The lineage written in constants (PUBLISHED_TABLES, DERIVED_FROM, BUILT_TOGETHER) agrees with the asset graph."""

from __future__ import annotations

import dagster as dg
import pytest

from arena_pipeline import constants
from arena_pipeline.definitions import defs


@pytest.fixture(scope="module")
def graph():
    return defs.resolve_asset_graph()


def _key(table: str) -> dg.AssetKey:
    return dg.AssetKey([constants.SCHEMA, table])


def _upstream(graph, key: dg.AssetKey) -> set[dg.AssetKey]:
    """Every asset ``key`` is computed from, directly or through others."""
    seen: set[dg.AssetKey] = set()
    todo = list(graph.get(key).parent_keys)
    while todo:
        parent = todo.pop()
        if parent not in seen:
            seen.add(parent)
            todo.extend(graph.get(parent).parent_keys)
    return seen


def test_every_published_table_is_an_asset_the_gate_depends_on(graph):
    gate = graph.get(dg.AssetKey("publication_gate"))
    published = {k for k in gate.parent_keys if k.path[0] == constants.SCHEMA}
    assert published == {_key(t) for t in constants.PUBLISHED_TABLES}


@pytest.mark.parametrize("table", sorted(constants.DERIVED_FROM))
def test_derived_from_names_what_the_graph_computes_the_table_from(graph, table):
    """DERIVED_FROM lists exactly the published tables upstream of the table in the asset graph."""
    upstream = {k for k in _upstream(graph, _key(table)) if k.path[0] == constants.SCHEMA}
    published_upstream = {k for k in upstream if k.path[-1] in constants.PUBLISHED_TABLES}
    assert published_upstream == {_key(t) for t in constants.DERIVED_FROM[table]}


def test_every_published_table_made_from_another_says_so(graph):
    for table in constants.PUBLISHED_TABLES:
        upstream = {k.path[-1] for k in _upstream(graph, _key(table)) if k.path[0] == constants.SCHEMA}
        if upstream & set(constants.PUBLISHED_TABLES):
            assert table in constants.DERIVED_FROM, table


@pytest.mark.parametrize("group", constants.BUILT_TOGETHER, ids=lambda g: g[0])
def test_tables_built_together_are_one_step(graph, group):
    """Each BUILT_TOGETHER group is the output of one (multi-)asset, and nothing else of it is published."""
    nodes = {graph.get(_key(t)).assets_def for t in group}
    assert len(nodes) == 1
    outputs = {k.path[-1] for k in next(iter(nodes)).keys if k.path[0] == constants.SCHEMA}
    assert outputs & set(constants.PUBLISHED_TABLES) == set(group)
