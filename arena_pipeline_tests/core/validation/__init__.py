"""Tests of arena_pipeline.core.validation."""
