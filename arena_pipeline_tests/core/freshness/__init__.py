"""Tests of arena_pipeline.core.freshness."""
