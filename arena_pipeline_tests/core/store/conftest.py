"""The store tests' shared fixture: ``work``, the open work file of a new store (support/small_store.py)."""

from arena_pipeline_tests.support.small_store import work  # noqa: F401 (a fixture, found by its name)
