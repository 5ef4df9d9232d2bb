"""The pipeline materialized in process by the tests: one helper, its Dagster instance closed on return."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from arena_pipeline.core.store.snapshot import WORK_FILE, store_folder
from arena_pipeline.definitions import ASSET_CHECKS, ASSETS, default_resources
from arena_pipeline.resources import DumpSource, ModelCatalog, ReportSettings, Warehouse

#: The real 100-vote sample of the 140k dump (CSV export).
REAL_CSV = Path(__file__).parents[1] / "data" / "arena_human_preference_sample_100.csv"


def rank_config(**settings) -> dict:
    """A run config that sets the rankings step's ``settings``."""
    return {"ops": {"rankings": {"config": settings}}}


def materialize(resources: dict | None = None, *, selection=None, run_config: dict | None = None,
                instance: dg.DagsterInstance | None = None, raise_on_error: bool = False,
                tags: dict[str, str] | None = None, assets: list | None = None) -> dg.ExecuteInProcessResult:
    """Every asset and check (or ``selection``), with ``resources`` over the default resources;
    ``assets``: other assets than the pipeline's (``definitions.pipeline_assets`` with a test's module).

    Without ``instance`` the run has an ephemeral instance of its own, opened and closed here: an
    instance left to the garbage collector breaks a later test's run (see ``conftest.py``).
    """
    kwargs = {"selection": selection, "resources": {**default_resources(), **(resources or {})},
              "run_config": run_config, "raise_on_error": raise_on_error, "tags": tags}
    every = [*(ASSETS if assets is None else assets), *ASSET_CHECKS]
    if instance is not None:
        return dg.materialize(every, instance=instance, **kwargs)
    with dg.DagsterInstance.ephemeral() as ephemeral:
        return dg.materialize(every, instance=ephemeral, **kwargs)


def materialized(result: dg.ExecuteInProcessResult) -> set[str]:
    """The asset keys the run materialized, as ``a/b`` strings."""
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def copy_warehouse(source: Path, target: Path) -> Path:
    """A copy of the warehouse ``source`` at ``target``: the readers' snapshot and the pipeline's store
    folder beside it (its work file, write-ahead log included, and the Parquet vote tables)."""
    shutil.copy(source, target)
    if store_folder(source).is_dir():
        shutil.copytree(store_folder(source), store_folder(target))
    return target


def work_file(warehouse: Path) -> Path:
    """The pipeline's work file of the warehouse whose readers' snapshot is ``warehouse`` (where the
    version registry, ``arena_versions.versions``, and every version's table live)."""
    return store_folder(warehouse) / WORK_FILE


#: The sample run's ranking settings: models with 3 battles or more, 5 bootstrap rounds.
SAMPLE_RUN_CONFIG = rank_config(min_battles=3, bootstrap_rounds=5)


def sample_resources(root: Path, **overrides) -> dict:
    """The sample run's resources, writing under ``root`` (``warehouse.duckdb``, ``report/index.html``)."""
    return {"dump_source": DumpSource(source=str(REAL_CSV)),
            "warehouse": Warehouse(database=str(root / "warehouse.duckdb")),
            "model_catalog": ModelCatalog(),
            "report_settings": ReportSettings(report_path=str(root / "report" / "index.html")),
            **overrides}


def run_sample(root: Path, **overrides) -> dg.ExecuteInProcessResult:
    """The real sample materialized under ``root`` (:func:`sample_resources` with ``overrides``)."""
    return materialize(sample_resources(root, **overrides), run_config=SAMPLE_RUN_CONFIG)


@dataclass(frozen=True)
class SampleRun:
    """:func:`run_sample` with the default resources, once per session (``conftest.sample_run``).

    Tests read ``result`` and the ``warehouse`` (read-only connections); a test that writes copies
    the warehouse first (:func:`copy_warehouse`).
    """

    root: Path
    result: dg.ExecuteInProcessResult

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse.duckdb"

    @property
    def report(self) -> Path:
        return self.root / "report" / "index.html"
