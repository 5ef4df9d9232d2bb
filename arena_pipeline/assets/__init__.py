"""Thin Dagster assets that call arena_pipeline.core."""
