"""The configuration reference is generated from the code, not written twice: the committed page equals what
``python -m arena_pipeline.docs_reference`` writes, and it lists every setting with its type, default and bounds."""

from __future__ import annotations

from pathlib import Path

from arena_pipeline.assets.run_config import RankingRunConfig
from arena_pipeline.docs_reference import REFERENCE_PAGE, main, render
from arena_pipeline.resources import DumpSource, ModelCatalog, ReportSettings, Warehouse

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_reference_is_what_the_code_generates():
    committed = (REPO_ROOT / REFERENCE_PAGE).read_text(encoding="utf-8")
    assert committed == render(), "docs/reference/configuration.md is out of date: python -m arena_pipeline.docs_reference"


def test_every_setting_is_in_the_reference_with_its_type_default_and_bounds():
    page = render()
    for resource in (DumpSource, Warehouse, ModelCatalog, ReportSettings):
        for name in resource.model_fields:
            assert f"| `{name}` |" in page, (resource.__name__, name)
    for name in RankingRunConfig.model_fields:
        assert f"| `{name}` |" in page, name
    assert "| `bootstrap_rounds` | `int` | `100` | ≥ 0, ≤ 2,000 |" in page
    assert "| `max_model_drop` | `float` | `0.5` | ≥ 0, ≤ 1 |" in page
    assert "| `ARENA_WAREHOUSE` | `Warehouse.database` (`warehouse`) |" in page
    assert "### `raw_dump`" in page and "### `rankings`" in page and "### `publication_gate`" in page


def test_check_mode_says_when_the_page_is_out_of_date(tmp_path, capsys):
    assert main(["--root", str(tmp_path), "--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert main(["--root", str(tmp_path)]) == 0
    assert main(["--root", str(tmp_path), "--check"]) == 0
