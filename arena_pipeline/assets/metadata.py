"""Metadata shared by the assets: Dagster table schemas built from the Polars schemas of core."""

import dagster as dg
import polars as pl

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
