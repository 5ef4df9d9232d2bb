"""Every step within one memory budget, whatever the dump's size: a whole refresh under a DuckDB
``memory_limit`` far below the dump's text (DuckDB spilling where it must) publishes."""

from __future__ import annotations

import random

import pytest

from arena_pipeline.core.store.warehouse import connect
from arena_pipeline.resources import DumpSource, ModelCatalog, ReportSettings, Warehouse
from arena_pipeline_dev import fixtures
from arena_pipeline_dev.fixtures import write_dump
from arena_pipeline_tests.support.materialize import SAMPLE_RUN_CONFIG, materialize

#: DuckDB's cap per connection in this test; the dump's texts are several times it
LIMIT_MB = 32


def _long_answer(rng: random.Random, model: str, prompt: str) -> str:
    """An answer of ~32 KB of text that does not compress away (hex of random bytes)."""
    return f"Answer from {model}: " + rng.randbytes(16_000).hex()


@pytest.mark.slow
def test_a_refresh_publishes_under_a_memory_limit_far_below_the_dumps_text(tmp_path, monkeypatch):
    monkeypatch.setattr(fixtures, "_answer", _long_answer)
    write_dump(tmp_path / "dump", n_rows=2_000, n_shards=3, seed=7)
    warehouse = tmp_path / "warehouse.duckdb"
    result = materialize({
        "dump_source": DumpSource(source=str(tmp_path / "dump")),
        "warehouse": Warehouse(database=str(warehouse), memory_limit=f"{LIMIT_MB}MB",
                               temp_directory=str(tmp_path / "spill")),
        "model_catalog": ModelCatalog(),
        "report_settings": ReportSettings(report_path=str(tmp_path / "report" / "index.html")),
    }, run_config=SAMPLE_RUN_CONFIG)
    assert result.success
    with connect(str(warehouse), read_only=True) as con:
        battles, text_mb = con.execute(
            "SELECT (SELECT count(*) FROM arena.battles), sum(strlen(text)) / 2^20 FROM arena.messages").fetchone()
    assert battles == 2_000
    assert text_mb > 4 * LIMIT_MB  # the texts alone are several times the budget
