"""What the publication tests share: a published warehouse setup, what readers see, and its checks."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.resources import DumpSource, ReportSettings, Warehouse
from arena_pipeline_tests.support.materialize import materialize

REPO_ROOT = Path(__file__).resolve().parents[2]
RANK = {"min_battles": 5, "bootstrap_rounds": 5}
#: Every table of the rankings fit (built together: a publication takes them from one run).
RANKING_SELECTION = ["arena/leaderboard", "arena/pairwise", "arena/pairwise_significance", "arena/style_coefficients",
                     "arena/unrated_models",
                     "arena/board_status", "arena/dump_leaderboard", "arena/model_fit", "arena/model_fit_calibration"]
#: The validation tables computed from the leaderboard (a re-rank rebuilds them before the gate).
VALIDATION_SELECTION = ["arena/external_comparison", "arena/external_comparison_models", "arena/benchmark_scores",
                        "arena/benchmark_agreement"]
RERANK_SELECTION = [*RANKING_SELECTION, *VALIDATION_SELECTION, "publication_gate",
                    "leaderboard_report"]


def fingerprint(warehouse: Path) -> dict:
    """What readers see: every arena view's SQL, row count and a digest of its rows."""
    with connect_warehouse(str(warehouse), read_only=True) as con:
        views = dict(con.execute("SELECT view_name, sql FROM duckdb_views() "
                                 "WHERE schema_name = 'arena' AND NOT internal ORDER BY 1").fetchall())
        out = {}
        for name, sql in views.items():
            n, digest = con.execute(f'SELECT count(*), md5(string_agg(CAST(t AS VARCHAR), \'|\' '
                                    f'ORDER BY CAST(t AS VARCHAR))) FROM arena."{name}" t').fetchone()
            out[name] = (sql, n, digest)
    return out


def query(warehouse: Path, sql: str, params: list | None = None) -> list[tuple]:
    with connect_warehouse(str(warehouse), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


@dataclass
class Setup:
    root: Path
    dump: Path
    warehouse: Path

    def resources(self, **overrides) -> dict:
        """This setup's resources (over the defaults), with ``overrides``."""
        return {"dump_source": DumpSource(source=str(self.dump), cache_dir=str(self.root / "cache")),
                "warehouse": Warehouse(database=str(self.warehouse), retention=50),
                "report_settings": ReportSettings(report_path=str(self.root / "report" / "index.html")),
                **overrides}

    def run(self, selection=None, rank: dict | None = None, publish: dict | None = None, **overrides):
        config = {"ops": {"rankings": {"config": {**RANK, **(rank or {})}}}}
        if publish:
            config["ops"]["publication_gate"] = {"config": publish}
        return materialize(self.resources(**overrides), selection=selection, run_config=config)


def publications(warehouse: Path) -> list[tuple]:
    return query(warehouse, "SELECT publication_id, revision, rebuilt FROM arena.publications ORDER BY 1")


def assert_live_is_one_publication(warehouse: Path) -> dict:
    """Every arena view reads exactly the versions of the newest publication, with its row counts."""
    with connect_warehouse(str(warehouse), read_only=True) as con:
        pid, tables, rows = con.execute("SELECT publication_id, tables, rows FROM arena.publications "
                                        "ORDER BY publication_id DESC LIMIT 1").fetchone()
        tables, rows = json.loads(tables), json.loads(rows)
        for table, version in tables.items():
            sql = con.execute("SELECT sql FROM duckdb_views() WHERE schema_name = 'arena' AND view_name = ?",
                              [table]).fetchone()[0]
            assert f'"{version}"' in sql or f".{version}" in sql, (table, version, sql)
            assert con.execute(f'SELECT count(*) FROM arena."{table}"').fetchone()[0] == rows[table]
    return {"publication_id": pid, "tables": tables}


def subprocess_env(setup: Setup, **settings: str) -> dict[str, str]:
    """A subprocess environment with this setup's settings and no DAGSTER_HOME (an ephemeral instance)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARENA_", "DAGSTER_", "HF_"))}
    env.update(ARENA_SOURCE=str(setup.dump), ARENA_WAREHOUSE=str(setup.warehouse),
               ARENA_CACHE_DIR=str(setup.root / "cache"), ARENA_REPORT=str(setup.root / "report" / "index.html"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(settings)
    return env


@contextlib.contextmanager
def held_by_another_process(path: Path):
    """``path`` held read-write by another process for the block (DuckDB's file lock works per process)."""
    code = "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(120)"
    holder = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.wait()
