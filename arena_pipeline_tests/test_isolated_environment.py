"""The test session starts with no ``ARENA_*``/``HF_*`` variable of the developer's: no test can touch a real store."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arena_pipeline.definitions import default_resources
from arena_pipeline_tests.conftest import SCRATCH_DEFAULTS, SETTING_PREFIXES, pipeline_settings

REPO_ROOT = Path(__file__).parents[1]

#: Every variable the package, its tools and its tests read by name, and one no code reads yet: the
#: session must remove a variable by its prefix, not by a list that the next setting is missing from.
KNOWN = ("ARENA_SOURCE", "ARENA_REVISION", "ARENA_WAREHOUSE", "ARENA_STORE_DIR", "ARENA_CACHE_DIR", "ARENA_REPORT",
         "ARENA_MODEL_ALIASES", "ARENA_PUBLISHED_BOARD", "ARENA_PUBLISHED_BOARD_DATE",
         "ARENA_ALIGN_TO_PUBLISHED_BOARD", "ARENA_BENCHMARKS", "ARENA_DATASETS", "ARENA_DISCOVER",
         "ARENA_CSV_MAX_CELL_BYTES", "ARENA_MAX_PUBLICATION_AGE_HOURS", "ARENA_TEST_RUN_CONFIG",
         "HF_ENDPOINT", "HF_TOKEN", "HF_HOME", "ARENA_SETTING_NOT_WRITTEN_YET", "HF_SETTING_NOT_WRITTEN_YET")

#: The tests the subprocess runs: the two below, and suite tests on the shared published sample.
PROBES = ("arena_pipeline_tests/test_isolated_environment.py::test_the_session_holds_only_the_scratch_defaults",
          "arena_pipeline_tests/test_isolated_environment.py::test_default_resources_resolve_into_the_scratch_folder",
          "arena_pipeline_tests/test_published_views.py::test_after_a_full_run_schema_arena_has_no_base_table_but_the_records",
          "arena_pipeline_tests/assets/test_models.py::test_no_board_configured_publishes_empty_comparison_tables")


def test_the_session_holds_only_the_scratch_defaults(_isolated_settings):
    assert pipeline_settings() == sorted(SCRATCH_DEFAULTS)
    assert all(Path(os.environ[name]).is_relative_to(_isolated_settings) for name in SCRATCH_DEFAULTS)


def test_default_resources_resolve_into_the_scratch_folder(_isolated_settings):
    resources = default_resources()
    warehouse, source = resources["warehouse"], resources["dump_source"]
    paths = [Path(warehouse.database_path()), warehouse.store_path(), source.cache_root(),
             resources["report_settings"].path()]
    assert all(path.is_relative_to(_isolated_settings) for path in paths), paths
    catalog = resources["model_catalog"]
    assert (source.endpoint(), source.discovery_pattern(), source.configured_datasets()) == (None, None, [])
    assert (catalog.board_path(), catalog.board_date(), catalog.benchmarks_location(), catalog.align_to_board()) == (
        None, None, None, False)


@pytest.mark.slow
def test_exported_variables_reach_no_test(tmp_path):
    """Every known variable (and a new one) exported to a throwaway folder: the suite's fixtures, the
    shared sample's whole run among them, pass and write nothing there."""
    throwaway = tmp_path / "developer"
    throwaway.mkdir()
    env = {name: value for name, value in os.environ.items() if not name.startswith(SETTING_PREFIXES)}
    env |= {name: str(throwaway / name.lower()) for name in KNOWN}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                             "--basetemp", str(tmp_path / "inner"), *PROBES],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"{len(PROBES)} passed" in result.stdout
    assert sorted(str(p.relative_to(throwaway)) for p in throwaway.rglob("*")) == []
