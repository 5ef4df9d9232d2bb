"""Tests of arena_pipeline.core.changes."""
