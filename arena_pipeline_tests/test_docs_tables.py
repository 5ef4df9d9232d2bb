"""docs/tables.md's catalogue is generated from the assets' metadata (issue 46 item 1), not written twice: the
committed block equals what ``python -m arena_pipeline.docs_tables`` writes, and a table added is in it."""

from __future__ import annotations

from pathlib import Path

from arena_pipeline.definitions import CATALOG, pipeline_assets
from arena_pipeline.docs_tables import BEGIN, END, TABLES_PAGE, main, render, render_block
from arena_pipeline_tests import toy_fit_table, toy_table

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_catalogue_is_what_the_code_generates():
    committed = (REPO_ROOT / TABLES_PAGE).read_text(encoding="utf-8")
    assert committed == render(committed), "docs/tables.md is out of date: python -m arena_pipeline.docs_tables"


def _rows(block: str) -> dict[str, list[str]]:
    """The catalogue table's rows of a generated block, by table: its cells after the name."""
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines() if line.startswith("| `")]
    return {row[0].strip("`"): row[1:] for row in cells}


def test_a_table_added_to_a_step_or_as_a_module_is_in_the_generated_block():
    assets, catalog = pipeline_assets(toy_table, toy_fit_table)
    block = render_block(assets, catalog)
    rows = _rows(block)
    assert rows[f"arena.{toy_table.TOY}"][:2] == [f"`arena/{toy_table.TOY}`", "published view, exported"]
    assert rows[f"arena.{toy_fit_table.TOY_FIT}"][:2] == ["`rankings`", "published view, exported"]
    columns = "category (String), method (String), models (UInt32), dump_revision (String)"
    assert f"- `arena.{toy_fit_table.TOY_FIT}`: {columns}" in block.splitlines()
    assert set(rows) == {f"arena.{t}" for t in (*catalog.specs, *catalog.extra)}


def test_every_table_of_the_catalogue_has_its_notes_in_the_page():
    """The hand-written notes below the block (what a row is, what a column means) name every table."""
    notes = (REPO_ROOT / TABLES_PAGE).read_text(encoding="utf-8").partition(END)[2]
    assert [t for t in (*CATALOG.specs, *CATALOG.extra) if f"`arena.{t}`" not in notes] == []


def test_check_mode_says_when_the_page_is_out_of_date(tmp_path, capsys):
    page = tmp_path / TABLES_PAGE
    page.parent.mkdir(parents=True)
    page.write_text(f"# Tables\n\n{BEGIN}\n{END}\n\nnotes\n", encoding="utf-8")
    assert main(["--root", str(tmp_path), "--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert main(["--root", str(tmp_path)]) == 0
    assert main(["--root", str(tmp_path), "--check"]) == 0
    assert page.read_text(encoding="utf-8").endswith(f"{END}\n\nnotes\n")
