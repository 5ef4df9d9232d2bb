"""Tests of arena_pipeline.core.store."""
