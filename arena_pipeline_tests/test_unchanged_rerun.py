"""An unchanged re-run does nothing costly and publishes nothing new (issue 42 item 7; issue 47's cosmetic friction
"a manual refresh of an unchanged dump publishes an identical new publication"): its checks reuse their recorded
outcome (no suite is run), its fits and analysis tables reuse their versions (nothing is fitted or counted), it
writes no vote file and leaves the readers' snapshot as it is, and the gate keeps the live publication; a change of one input (a ranking setting, the dump) still fits or checks what it changes, and
publishes. Run through ``arena-pipeline refresh`` on the offline sample, as a user runs it."""

from __future__ import annotations

import csv
import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

import arena_pipeline.assets.analysis as analysis_module
import arena_pipeline.assets.models as models_module
import arena_pipeline.assets.rankings as rankings_module
import arena_pipeline.checks as checks_module
import arena_pipeline.core.store.store as store_module
from arena_pipeline.cli import EXIT_OK, main
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline_tests.support.bad_inputs import REAL_CSV
from arena_pipeline_tests.support.materialize import work_file
from arena_pipeline_tests.support.publication_support import query

PROJECT_HOME = Path(__file__).parents[1] / "dagster_home"
#: Holds of the work file an unchanged re-run of the sample takes at most (each a DuckDB open, checks and, after
#: a write, a checkpoint: ~60 ms of CPU at 1x)
RERUN_HOLDS = 25
SAMPLE_FLAGS = ["--min-battles", "3", "--bootstrap-rounds", "5", "--display-min-battles", "0"]


@pytest.fixture
def counted(tmp_path, monkeypatch) -> Counter:
    """A DAGSTER_HOME, warehouse and report of the test's own (the sample as the source), and a count of the
    suites validated (by table) and of the fits computed."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    (tmp_path / "dagster_home").mkdir()
    shutil.copy(PROJECT_HOME / "dagster.yaml", tmp_path / "dagster_home")
    monkeypatch.setenv("ARENA_WAREHOUSE", str(tmp_path / "warehouse.duckdb"))
    monkeypatch.setenv("ARENA_REPORT", str(tmp_path / "report" / "index.html"))
    monkeypatch.setenv("ARENA_SOURCE", str(REAL_CSV))
    seen: Counter = Counter()
    validate, fit = checks_module.validate_relation, rankings_module.compute_rankings

    def validate_counted(con, relation, table, **kwargs):
        seen[f"suite {table}"] += 1
        return validate(con, relation, table, **kwargs)

    def fit_counted(*args, **kwargs):
        seen["fit"] += 1
        return fit(*args, **kwargs)

    monkeypatch.setattr(checks_module, "validate_relation", validate_counted)
    monkeypatch.setattr(rankings_module, "compute_rankings", fit_counted)
    for module, name in ((analysis_module, "position_bias_in_duckdb"), (analysis_module, "rating_trend"),
                         (models_module, "model_facts_in_duckdb"),
                         (rankings_module, "tag_categories")):  # the analysis steps' counts and fits, the tagging
        monkeypatch.setattr(module, name, _counted(seen, name, getattr(module, name)))
    return seen


@pytest.fixture
def holds(monkeypatch) -> Counter:
    """Holds of the work file (``Store.work``) per step (its op's name; ``-`` outside a step)."""
    held: Counter = Counter()
    work = store_module.Store.work

    def counted(self, **kwargs):
        try:
            held[dg.AssetExecutionContext.get().op_handle.name] += 1
        except dg.DagsterInvariantViolationError:
            held["-"] += 1
        return work(self, **kwargs)

    monkeypatch.setattr(store_module.Store, "work", counted)
    return held


def _counted(seen: Counter, name: str, function):
    def counted(*args, **kwargs):
        seen[name] += 1
        return function(*args, **kwargs)

    return counted


def _written(tmp_path: Path) -> tuple:
    """What an unchanged re-run must leave as it is: the readers' snapshot (the file: inode, size and time)
    and the store's Parquet files (the vote tables)."""
    snapshot = (tmp_path / "warehouse.duckdb").stat()
    files = work_file(tmp_path / "warehouse.duckdb").parent / "tables"
    return ((snapshot.st_ino, snapshot.st_size, snapshot.st_mtime_ns),
            sorted((str(p.relative_to(files)), p.stat().st_mtime_ns) for p in files.rglob("*.parquet")))


def _refresh(capsys, seen: Counter, *flags: str) -> tuple[str, Counter]:
    """Run ``arena-pipeline refresh``; its last line and what it validated and fitted."""
    seen.clear()
    assert main(["refresh", *SAMPLE_FLAGS, *flags]) == EXIT_OK
    return capsys.readouterr().out.strip().splitlines()[-1], Counter(seen)


def _publications(tmp_path: Path) -> list[int]:
    return [p for (p,) in query(tmp_path / "warehouse.duckdb", "SELECT publication_id FROM arena.publications ORDER BY 1")]


@pytest.mark.slow
def test_an_unchanged_rerun_validates_fits_and_publishes_nothing_and_a_changed_input_still_does(
        counted, holds, tmp_path, capsys, golden):
    line, first = _refresh(capsys, counted)
    assert line.startswith("published: publication 1 ")
    suites = {name for name in first if name.startswith("suite ")}
    assert suites and all(first[name] == 1 for name in suites) and first["fit"] == 1
    assert first["position_bias_in_duckdb"] == first["rating_trend"] == first["model_facts_in_duckdb"] == 1
    assert first["tag_categories"] == 1
    page = (tmp_path / "report" / "index.html").stat().st_mtime_ns
    written = _written(tmp_path)

    holds.clear()
    line, again = _refresh(capsys, counted)  # the same dump and settings
    assert again == Counter(), again  # no suite validated, nothing fitted or counted again
    # the fits' reused tables in one hold of the work file (its quarantine input read in another), not one each
    assert holds["rankings"] <= 2, holds
    assert sum(holds.values()) <= RERUN_HOLDS, holds
    assert _written(tmp_path) == written  # no vote file written, the readers' snapshot not rewritten
    assert _publications(tmp_path) == [1]  # no identical new publication
    golden.check("run_end", "refresh of an unchanged dump", line,
                 {str((tmp_path / "report" / "index.html").resolve()): "<report>"})
    assert (tmp_path / "report" / "index.html").stat().st_mtime_ns == page  # the page shows publication 1 already
    with connect_warehouse(str(work_file(tmp_path / "warehouse.duckdb")), read_only=True) as con:
        builds = con.execute("SELECT status, status_detail FROM arena_versions.builds ORDER BY started_at").fetchall()
        reused = con.execute("SELECT version, json_extract_string(checks, '$.reused_from') FROM arena_versions.versions "
                             "WHERE checks_passed IS NOT NULL ORDER BY created_at").fetchall()
    assert builds[-1] == ("published", "unchanged: publication 1 stays live")
    assert {source for _, source in reused} - {None}  # the second build's checks name the versions checked before

    line, rerank = _refresh(capsys, counted, "--bootstrap-rounds", "6")  # one ranking setting changed
    assert line.startswith("published: publication 2 ")
    assert rerank == Counter(fit=1)  # fitted again; the same rows need no new validation, count or trend
    # the live publication's checks are its versions' own rows (copied with the time they were checked)
    (tables,), = query(tmp_path / "warehouse.duckdb", "SELECT tables FROM arena.publications WHERE publication_id = 2")
    checked = query(tmp_path / "warehouse.duckdb", "SELECT DISTINCT table_name FROM arena.quality_results "
                    "WHERE table_version IN (SELECT unnest(?))", [list(json.loads(tables).values())])
    assert {f"suite {t}" for (t,) in checked} == suites

    changed = tmp_path / "changed.csv"  # another revision of the dump: its last vote left out
    csv.field_size_limit(sys.maxsize)
    with REAL_CSV.open(newline="", encoding="utf-8") as source, changed.open("w", newline="", encoding="utf-8") as out:
        csv.writer(out).writerows(list(csv.reader(source))[:-1])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ARENA_SOURCE", str(changed))
        line, new_dump = _refresh(capsys, counted, "--bootstrap-rounds", "6")
    assert line.startswith("published: publication 3 ")
    assert new_dump == Counter({**{name: 1 for name in suites}, "fit": 1, "position_bias_in_duckdb": 1,
                                "rating_trend": 1, "model_facts_in_duckdb": 1,
                                "tag_categories": 1})  # validated, counted, fitted again
