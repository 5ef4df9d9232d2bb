"""The table catalogue derived from the asset graph (assets/catalog.py): what the gate publishes, what each
table is computed from, what is built together, and the tables each kind of table is, unchanged."""

from __future__ import annotations

import dagster as dg
import pytest

from arena_pipeline.constants import SCHEMA
from arena_pipeline.definitions import CATALOG, defs


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


def test_the_catalogue_is_the_tables_of_before():
    """The catalogue derived from the asset declarations names what the hand-written lists of issue 35's
    start named (no behaviour change): the same published tables, lineage, groups and kinds (the load makes
    the preference pairs with the flat tables: one producer, issue 35 item 3)."""
    flat = {"battles", "messages", "context_messages", "quarantine", "preference_pairs"}
    fit = {"leaderboard", "pairwise", "pairwise_significance", "style_coefficients", "unrated_models",
           "board_status", "dump_leaderboard", "model_fit", "model_fit_calibration"}
    validation = {"external_comparison", "external_comparison_models", "benchmark_scores", "benchmark_agreement"}
    analyses = {"battle_categories", "models", "position_bias", "rating_trend"}
    # publication_changes: an asset since issue 35 item 2 (before, the gate wrote it beside the assets)
    assert set(CATALOG.published) == flat | fit | validation | analyses | {"publication_changes"}
    assert {frozenset(g) for g in CATALOG.built_together} == {
        frozenset(flat), frozenset(fit), frozenset(validation - {"benchmark_scores", "benchmark_agreement"}),
        frozenset({"benchmark_scores", "benchmark_agreement"})}
    tagged = {"battles", "battle_categories"}
    assert {t: set(v) for t, v in CATALOG.derived_from.items()} == {
        "battle_categories": {"battles"},
        **dict.fromkeys(fit - {"dump_leaderboard"} | {"models", "position_bias", "rating_trend"}, tagged),
        "dump_leaderboard": tagged | {"quarantine"},
        **dict.fromkeys(validation, tagged | {"leaderboard"}),
        "publication_changes": tagged | {"leaderboard"},
    }
    assert set(CATALOG.checked) == {"battles", "messages"}
    assert set(CATALOG.history) == {"leaderboard", "style_coefficients"}
    assert CATALOG.file_tables == flat | {"battle_categories"}
    assert CATALOG.heavy == {"messages", "context_messages", "preference_pairs"}
    assert set(CATALOG.exported) == (fit | validation | {"models", "publication_changes", "quality_results", "dumps",
                                                         "leaderboard_history", "style_coefficients_history"})
