"""Tests of arena_pipeline.core.ranking."""
