"""The table catalogue derived from the asset graph: what each table is, what it is computed from, what is built together.

Each warehouse table declares what it is once, on its asset (``assets/metadata.py``: a
:class:`TableSpec` in the spec's metadata). :func:`catalog_of` reads those declarations and the
graph's edges into a Dagster-free :class:`TableCatalog` that the gate, the snapshot and the export
use: a new table is one asset in one module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import dagster as dg

from arena_pipeline.assets.metadata import spec_of
from arena_pipeline.core.store.catalog import TableCatalog, TableSpec


def _ordered(assets: list[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    """``assets`` upstream first (a stable topological order: ties keep the given order)."""
    made = {key: index for index, node in enumerate(assets) for key in node.keys}
    needs = {index: {made[parent] for deps in node.asset_deps.values() for parent in deps
                     if parent in made and made[parent] != index}
             for index, node in enumerate(assets)}
    done: list[int] = []
    while len(done) < len(assets):
        ready = next(i for i in range(len(assets)) if i not in done and needs[i] <= set(done))
        done.append(ready)
    return [assets[i] for i in done]


def catalog_of(assets: Iterable, extra: Mapping[str, TableSpec] | None = None) -> TableCatalog:
    """The :class:`TableCatalog` of ``assets`` (asset definitions; anything else is skipped).

    A table is an asset whose metadata holds a :class:`TableSpec`, named by its key's last part.
    ``derived_from`` of a published table: the published tables upstream of it in the graph, directly
    or through other assets; ``built_together``: the published tables of each multi-asset with more
    than one. ``extra``: tables the pipeline writes beside the assets (the gate's, the records).
    """
    nodes = _ordered([a for a in assets if isinstance(a, dg.AssetsDefinition)])
    specs: dict[str, TableSpec] = {}
    parents: dict[dg.AssetKey, set[dg.AssetKey]] = {}
    together: list[tuple[str, ...]] = []
    for node in nodes:
        published = []
        for spec in node.specs:
            parents[spec.key] = set(node.asset_deps.get(spec.key, ()))
            table = spec_of(spec.metadata)
            if table is None:
                continue
            specs[spec.key.path[-1]] = table
            if table.published:
                published.append(spec.key.path[-1])
        if len(published) > 1:
            together.append(tuple(published))
    derived_from = {}
    for node in nodes:
        for spec in node.specs:
            name = spec.key.path[-1]
            if name not in specs or not specs[name].published:
                continue
            upstream = _upstream(parents, spec.key)
            found = tuple(t for t in specs if specs[t].published and any(k.path[-1] == t for k in upstream))
            if found:
                derived_from[name] = found
    return TableCatalog(specs, derived_from, tuple(together), dict(extra or {}))


def _upstream(parents: Mapping[dg.AssetKey, set[dg.AssetKey]], key: dg.AssetKey) -> set[dg.AssetKey]:
    """Every asset ``key`` is computed from, directly or through others."""
    seen: set[dg.AssetKey] = set()
    todo = list(parents.get(key, ()))
    while todo:
        parent = todo.pop()
        if parent not in seen:
            seen.add(parent)
            todo.extend(parents.get(parent, ()))
    return seen
