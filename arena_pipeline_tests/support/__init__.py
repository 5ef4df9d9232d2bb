"""Helpers the tests share: fixtures, runs of the pipeline, workers, waits."""
