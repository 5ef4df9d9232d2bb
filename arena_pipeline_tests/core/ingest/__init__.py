"""Tests of arena_pipeline.core.ingest."""
