"""The table catalogue derived from the asset graph (assets/catalog.py): what the gate publishes, what each
table is computed from, what is built together; the whole catalogue is a committed snapshot (golden/catalogue.json)."""

from __future__ import annotations

import dataclasses
import json

import dagster as dg
import pytest

from arena_pipeline.constants import SCHEMA
from arena_pipeline.core.store.catalog import TableSpec
from arena_pipeline.definitions import ASSET_CHECKS, CATALOG, defs


@pytest.fixture(scope="module")
def graph():
    return defs.resolve_asset_graph()


def _key(table: str) -> dg.AssetKey:
    return dg.AssetKey([SCHEMA, table])


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
    published = {k for k in gate.parent_keys if k.path[0] == SCHEMA}
    assert published == {_key(t) for t in CATALOG.published}


@pytest.mark.parametrize("table", sorted(CATALOG.published))
def test_derived_from_names_what_the_graph_computes_the_table_from(graph, table):
    """derived_from lists exactly the published tables upstream of the table in the asset graph."""
    upstream = {k for k in _upstream(graph, _key(table)) if k.path[0] == SCHEMA}
    published_upstream = {k for k in upstream if k.path[-1] in CATALOG.published}
    assert published_upstream == {_key(t) for t in CATALOG.derived_from.get(table, ())}


@pytest.mark.parametrize("group", CATALOG.built_together, ids=lambda g: g[0])
def test_tables_built_together_are_one_step(graph, group):
    """Each built_together group is the output of one (multi-)asset, and nothing else of it is published."""
    nodes = {graph.get(_key(t)).assets_def for t in group}
    assert len(nodes) == 1
    outputs = {k.path[-1] for k in next(iter(nodes)).keys if k.path[0] == SCHEMA}
    assert outputs & set(CATALOG.published) == set(group)


def catalogue_document(catalog) -> str:
    """The catalogue as JSON: each table and what it is, the lineage, the groups built together, the export."""
    def flags(spec: TableSpec) -> str:
        return " ".join(name for name, value in dataclasses.asdict(spec).items() if value)

    lines = {"tables": {name: flags(spec) for name, spec in catalog.specs.items()},
             "records": {name: flags(spec) for name, spec in catalog.extra.items()},
             "derived_from": {name: " ".join(tables) for name, tables in catalog.derived_from.items()},
             "built_together": [" ".join(group) for group in catalog.built_together],
             "exported": " ".join(catalog.exported)}
    return json.dumps(lines, indent=1)


def test_the_catalogue_is_the_committed_snapshot(golden):
    """What the asset declarations make of the catalogue, against golden/catalogue.json: a table added,
    moved or flagged differently is one reviewed diff (``pytest --regen-golden`` rewrites it)."""
    golden.check_document("catalogue.json", catalogue_document(CATALOG))


def test_the_snapshot_sees_a_changed_flag():
    """The snapshot is not blind: a table's flag changed is a different document."""
    flipped = dataclasses.replace(CATALOG, specs={**CATALOG.specs, "battles": TableSpec(exported=True)})
    assert catalogue_document(flipped) != catalogue_document(CATALOG)


def test_checked_is_said_once_on_the_table():
    """Each table whose TableSpec says checked has its expectation suite's checks, and no other table has."""
    suites = {check.node_def.name for check in ASSET_CHECKS if check.node_def.name.endswith("_quality")}
    assert suites == {f"{table}_quality" for table in CATALOG.checked}
    assert {spec.asset_key.path[-1] for check in ASSET_CHECKS for spec in check.check_specs
            if spec.name.endswith(("_errors", "_warnings"))} == set(CATALOG.checked)
