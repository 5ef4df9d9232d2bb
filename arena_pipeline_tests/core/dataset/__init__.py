"""Tests of arena_pipeline.core.dataset."""
