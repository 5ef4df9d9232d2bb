"""Tests of arena_pipeline.core.readside."""
