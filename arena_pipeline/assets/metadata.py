"""Metadata shared by the assets: Dagster table schemas built from the Polars schemas of core, and what
each table is (its :class:`~arena_pipeline.core.store.catalog.TableSpec`, declared once, on its asset)."""

import dataclasses
from collections.abc import Mapping

import dagster as dg
import polars as pl

from arena_pipeline.constants import SCHEMA
from arena_pipeline.core.store.catalog import TableSpec

COLUMN_SCHEMA = "dagster/column_schema"
#: The asset metadata entry that says what a warehouse table is (``assets/catalog.py`` reads it)
TABLE_SPEC = "arena/table"


def table_metadata(spec: TableSpec) -> dict:
    """The metadata entry of a table's spec (shown in the UI as JSON)."""
    return {TABLE_SPEC: dg.MetadataValue.json(dataclasses.asdict(spec))}


def spec_of(metadata: Mapping | None) -> TableSpec | None:
    """The :class:`TableSpec` declared in an asset's (or output's) metadata, None for an asset that is
    no warehouse table."""
    value = (metadata or {}).get(TABLE_SPEC)
    if value is None:
        return None
    return TableSpec(**(value.data if isinstance(value, dg.JsonMetadataValue) else value))


def table_schema(columns: dict[str, pl.DataType], descriptions: dict[str, str] | None = None) -> dg.TableSchema:
    """A Dagster TableSchema (shown in the UI's column list) from a Polars schema."""
    descriptions = descriptions or {}
    return dg.TableSchema(
        columns=[
            dg.TableColumn(name=name, type=str(dtype), description=descriptions.get(name))
            for name, dtype in columns.items()
        ]
    )


def schema_metadata(columns: dict[str, pl.DataType], table: str, spec: TableSpec | None = None) -> dict:
    """Definition-time metadata of a warehouse table: its columns, its SQL name and what it is (``spec``)."""
    return {COLUMN_SCHEMA: table_schema(columns), "dagster/table_name": table,
            **(table_metadata(spec) if spec is not None else {})}


def table_spec(table: str, columns: dict[str, pl.DataType], spec: TableSpec, *, group: str, kinds: set[str],
               deps: list, description: str) -> dg.AssetSpec:
    """The spec of a warehouse table ``arena.<table>`` (key, group, kinds, column schema, what it is, description)."""
    return dg.AssetSpec(
        dg.AssetKey([SCHEMA, table]),
        group_name=group,
        kinds=kinds,
        deps=deps,
        metadata=schema_metadata(columns, f"{SCHEMA}.{table}", spec),
        description=description,
    )
