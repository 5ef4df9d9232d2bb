"""Metadata shared by the assets: Dagster table schemas built from the Polars schemas of core."""

import dagster as dg
import polars as pl

from arena_pipeline.constants import SCHEMA

COLUMN_SCHEMA = "dagster/column_schema"


def table_schema(columns: dict[str, pl.DataType], descriptions: dict[str, str] | None = None) -> dg.TableSchema:
    """A Dagster TableSchema (shown in the UI's column list) from a Polars schema."""
    descriptions = descriptions or {}
    return dg.TableSchema(
        columns=[
            dg.TableColumn(name=name, type=str(dtype), description=descriptions.get(name))
            for name, dtype in columns.items()
        ]
    )


def schema_metadata(columns: dict[str, pl.DataType], table: str) -> dict:
    """Definition-time metadata of a warehouse table: its columns and its SQL name."""
    return {COLUMN_SCHEMA: table_schema(columns), "dagster/table_name": table}


def table_spec(table: str, columns: dict[str, pl.DataType], *, group: str, kinds: set[str],
               deps: list, description: str) -> dg.AssetSpec:
    """The spec of a warehouse table ``arena.<table>`` (key, group, kinds, column schema, description)."""
    return dg.AssetSpec(
        dg.AssetKey([SCHEMA, table]),
        group_name=group,
        kinds=kinds,
        deps=deps,
        metadata=schema_metadata(columns, f"{SCHEMA}.{table}"),
        description=description,
    )
