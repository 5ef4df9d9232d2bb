"""Tests of arena_pipeline.core.publication."""
