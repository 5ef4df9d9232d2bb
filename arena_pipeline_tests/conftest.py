"""Test-wide safety net: no test writes into the working directory, reads the developer's settings
or leaves a Dagster instance open."""

import os

import dagster as dg
import pytest

from arena_pipeline_tests.support.postgres import new_lake, postgres_server  # noqa: F401 - fixtures

#: The prefixes of the pipeline's variables (and of huggingface_hub's): every variable that starts with
#: one is removed for the session, whatever its name, so a variable added later cannot reach a
#: developer's warehouse, store or Hub from a test (``test_isolated_environment.py`` holds it).
SETTING_PREFIXES = ("ARENA_", "HF_")

#: The file defaults pointed at the session's scratch folder, so a resource left at its default
#: writes nowhere near the working directory. ARENA_REPORT is not among them: the report follows its
#: warehouse (``report_beside``), so each test's warehouse has its own page; one page for the session
#: would be "the report of another warehouse" (never replaced) to every test after the first to write it.
SCRATCH_DEFAULTS = {"ARENA_WAREHOUSE": "warehouse.duckdb", "ARENA_CACHE_DIR": "cache"}


def pipeline_settings(environ=None) -> list[str]:
    """The names in ``environ`` (``os.environ``) that the session removes: every ``ARENA_*`` and ``HF_*``."""
    return sorted(name for name in (os.environ if environ is None else environ) if name.startswith(SETTING_PREFIXES))


@pytest.fixture(autouse=True, scope="session")
def _isolated_settings(tmp_path_factory):
    """Remove every ``ARENA_*`` and ``HF_*`` variable and point the file defaults at a temporary folder.

    Session-scoped so that it is in force before any module- or session-scoped fixture runs
    (a function-scoped autouse fixture comes after those). Tests that need a setting pass it
    explicitly to the resource, or set the variable themselves with ``monkeypatch``.
    """
    scratch = tmp_path_factory.mktemp("defaults")
    with pytest.MonkeyPatch.context() as patch:
        for name in pipeline_settings():
            patch.delenv(name)
        for name, relative in SCRATCH_DEFAULTS.items():
            patch.setenv(name, str(scratch / relative))
        yield scratch


#: The ``id`` of every instance entered and not exited yet.
_OPEN_INSTANCES: set[int] = set()


@pytest.fixture(autouse=True, scope="session")
def _track_instances():
    """Record every Dagster instance entered (``with``) and not yet exited.

    An instance entered and left to the garbage collector is exited whenever the collector runs:
    its exit then puts back, in whatever test is running, Dagster's current defs-state storage of
    an instance that is gone, and that test's next ``dg.materialize()`` fails with "Attempted to
    resolve undefined DagsterInstance weakref". So every instance is closed where it is opened
    (``with dg.DagsterInstance.ephemeral()``, ``dg.instance_for_test()``, the contexts of
    ``build_*_context`` used in ``with``), and :func:`_no_instance_left_open` fails the test that
    breaks the rule, at once and by name, rather than a later test by chance.
    """
    enter, exit_ = dg.DagsterInstance.__enter__, dg.DagsterInstance.__exit__

    def tracked_enter(self):
        _OPEN_INSTANCES.add(id(self))
        return enter(self)

    def tracked_exit(self, *exc):
        _OPEN_INSTANCES.discard(id(self))
        return exit_(self, *exc)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dg.DagsterInstance, "__enter__", tracked_enter)
        patch.setattr(dg.DagsterInstance, "__exit__", tracked_exit)
        yield


@pytest.fixture(autouse=True)
def _no_instance_left_open(_track_instances):
    """Fail a test that leaves a Dagster instance open (see :func:`_track_instances`).

    Instances that a module or session fixture holds open (and closes at its teardown) are
    entered before this fixture starts and are not counted.
    """
    before = set(_OPEN_INSTANCES)
    yield
    left = _OPEN_INSTANCES - before
    _OPEN_INSTANCES.difference_update(left)
    assert not left, (f"{len(left)} Dagster instance(s) entered and not exited by this test: enter them "
                      "with 'with' (dg.DagsterInstance.ephemeral(), dg.instance_for_test(), build_*_context)")


@pytest.fixture(scope="session")
def sample_run(tmp_path_factory):
    """The real 100-vote sample materialized and published once per session, with the default model
    catalog (no alias file, board or benchmark file): tests read it, or copy the warehouse to change it."""
    from arena_pipeline_tests.support.materialize import SampleRun, run_sample

    root = tmp_path_factory.mktemp("sample")
    run = SampleRun(root, run_sample(root))
    assert run.result.success
    return run


def pytest_addoption(parser):
    parser.addoption("--regen-golden", action="store_true", default=False,
                     help="rewrite the golden files (arena_pipeline_tests/golden/) from what the tests produce")


@pytest.fixture(scope="session")
def golden(request, tmp_path_factory):
    """The golden files of the user-facing messages and the catalogue (``support/golden.py``);
    ``pytest --regen-golden`` rewrites the cases the session meets."""
    from arena_pipeline_tests.support.golden import Golden

    keeper = Golden(request.config.getoption("--regen-golden"), tmp_path_factory.getbasetemp())
    yield keeper
    if keeper.regen:
        keeper.write()
