"""Text that cannot go stale (issue 47 item 6): links to sections that exist (README, docs, the report's
references), lists that render as lists, figures the code states, one command path, the readers' claims."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import duckdb

from arena_pipeline_tests.test_docs_commands import all_blocks, blocks

REPO_ROOT = Path(__file__).resolve().parents[1]
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
TEMPLATES = sorted((REPO_ROOT / "arena_pipeline" / "presentation" / "templates").glob("*.j2"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: how the report names a docs section: ``docs/refresh.md, <em>Re-ranking and rebuilding: recipes</em>``
DOCS_REFERENCE = re.compile(r"(docs/[\w/-]+\.md), <em>([^<]+)</em>")
LIST_ITEM = re.compile(r"^(?:[-*+]|\d+\.) \S")


def _prose(path: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced blocks and HTML comments, numbered from 1."""
    out, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced and not line.lstrip().startswith("<!--"):
            out.append((number, line))
    return out


def _headings(path: Path) -> dict[str, str]:
    """Each heading's anchor (as mkdocs' toc makes it) and its text."""
    found = {}
    for _, line in _prose(path):
        if line.startswith("#"):
            text = line.lstrip("#").strip()
            slug = re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text.lower())).strip("-")
            found[slug] = re.sub(r"`", "", text)
    return found


def test_every_link_to_a_section_leads_to_one_that_exists():
    """README and every docs page: a link ``page.md#anchor`` (or ``#anchor`` on the page itself) names a heading
    of that page (mkdocs' strict build checks the site; this checks the README too, and runs in a second)."""
    broken, checked = [], 0
    for page in PAGES:
        for _, line in _prose(page):
            for link in LINK.findall(line):
                if link.startswith(("http://", "https://", "mailto:")):
                    continue
                path, _, anchor = link.partition("#")
                target = (page.parent / path).resolve() if path else page
                if not target.is_file():
                    broken.append(f"{page.relative_to(REPO_ROOT)}: {link} (no such file)")
                elif anchor and target.suffix == ".md":
                    checked += 1
                    if anchor not in _headings(target):
                        broken.append(f"{page.relative_to(REPO_ROOT)}: {link} (no such section)")
    assert checked >= 15
    assert not broken, broken


def test_the_reports_references_name_docs_sections_that_exist():
    """The report once pointed 16 times at README sections that had moved to the docs: every reference it
    makes is a docs page and one of its headings, and none is to the README."""
    found = []
    for template in TEMPLATES:
        text = template.read_text(encoding="utf-8")
        assert "README" not in text, template.name
        found += DOCS_REFERENCE.findall(text)
    assert len(found) >= 2
    for page, heading in found:
        assert heading in _headings(REPO_ROOT / page).values(), (page, heading)


def test_no_list_renders_as_a_paragraph():
    """A Markdown list right after a paragraph line, with no blank line between, renders as one paragraph
    (Python-Markdown, mkdocs): Get started's list of local sources did."""
    glued = []
    for page in PAGES:
        before = ""
        for number, line in _prose(page):
            starts = LIST_ITEM.match(line)
            prose = before.strip() and not LIST_ITEM.match(before) and not before.startswith(("#", "|", " ", "<"))
            if starts and prose:
                glued.append(f"{page.relative_to(REPO_ROOT)}:{number}: {line[:60]}")
            before = line
    assert not glued, glued


def test_the_graph_on_the_home_pages_fits_the_page():
    for page in (REPO_ROOT / "README.md", REPO_ROOT / "docs" / "index.md"):
        graph = next(b for b in blocks(page) if b.lang == "text" and b.text.startswith("raw_dump"))
        assert max(len(line) for line in graph.text.splitlines()) <= 80, page
        assert "publication_gate" in graph.text and "leaderboard_report" in graph.text


def test_the_row_group_size_the_docs_give_is_the_codes():
    from arena_pipeline.core.store.versions import ROW_GROUP_ROWS  # the part files the load writes

    text = (REPO_ROOT / "docs" / "snapshot.md").read_text(encoding="utf-8")
    stated = [int(found.replace(",", "")) for found in re.findall(r"row groups of at most\s+([\d,]+)\s+rows", text)]
    assert stated == [ROW_GROUP_ROWS], (stated, ROW_GROUP_ROWS)


def test_the_cookbooks_top_10_intervals_are_on_the_scale_its_comment_gives(sample_run):
    """The comment said "of rating - 1000" while the query returns bounds on the rating scale."""
    cookbook = next(b for b in blocks(REPO_ROOT / "docs" / "sql-cookbook.md") if b.lang == "sql")
    top10 = cookbook.text.split(";\n")[0]
    assert "rating - 1000" not in top10 and "on the rating scale (lo <= rating <= hi" in top10
    with duckdb.connect(str(sample_run.warehouse), read_only=True) as con:
        # the sample's models are all provisional under the default threshold: the filter dropped, as it says
        rows = con.execute(top10.replace("'math'", "'overall'").replace(" AND NOT provisional", "")).fetchall()
    bounded = [(rating, lo, hi) for _, _, _, rating, lo, hi, _ in rows if lo is not None]
    assert len(bounded) >= 5 and all(lo <= rating <= hi for rating, lo, hi in bounded), bounded


#: what runs the pipeline on a page: our command, or Dagster's
RUNS_PIPELINE = re.compile(r"arena-pipeline (?:refresh|rerank)|dagster asset materialize")


def test_arena_pipeline_comes_first_on_every_page_and_in_the_clis_hint():
    """Every page that runs the pipeline gives `arena-pipeline …` before Dagster's own command; the
    read commands' hint for a missing warehouse says the same."""
    from arena_pipeline.cli import MATERIALIZE_HINT

    assert "arena-pipeline refresh" in MATERIALIZE_HINT and "dagster asset materialize" not in MATERIALIZE_HINT
    first = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        found = RUNS_PIPELINE.search(text)
        if found:
            first[page.relative_to(REPO_ROOT).as_posix()] = found.group(0)
    assert {"README.md", "docs/getting-started.md", "docs/refresh.md", "docs/commands.md"} <= set(first)
    dagster_first = {page: what for page, what in first.items() if what.startswith("dagster")}
    assert not dagster_first, dagster_first


def test_the_dotenv_example_names_known_variables_and_dotenv_is_ignored():
    from arena_pipeline.environment import known_variables

    example = (REPO_ROOT / ".env.example").read_text(encoding="utf-8")
    names = re.findall(r"^([A-Z_]+)=", example, re.M)
    assert "ARENA_SOURCE" in names and set(names) <= set(known_variables())
    assert "/.env" in (REPO_ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    refresh = (REPO_ROOT / "docs" / "refresh.md").read_text(encoding="utf-8").split("\n## ")[0]  # its first lines
    assert "start **off**" in refresh and "dagster sensor start new_dump_sensor" in refresh and ".env" in refresh


def test_what_the_readers_pages_say_a_connection_sees(tmp_path):
    """docs/reading.md and snapshot.md: in one process, a connection held open keeps its publication, and a
    new ``duckdb.connect(path, read_only=True)`` then reuses it (the old publication); a fresh in-memory
    connection that ATTACHes the file reads the newest. A publication is a new file renamed over the old."""
    path = tmp_path / "warehouse.duckdb"

    def publish(n: int) -> None:
        staged = tmp_path / f"staged{n}.duckdb"
        with duckdb.connect(str(staged)) as con:
            con.execute(f"CREATE SCHEMA arena; CREATE TABLE arena.publications AS SELECT {n} AS publication_id")
        staged.replace(path)

    def attached() -> int:
        with duckdb.connect() as con:
            con.execute(f"ATTACH '{path}' AS warehouse (READ_ONLY)")
            con.execute("USE warehouse")
            return con.execute("SELECT publication_id FROM arena.publications").fetchone()[0]

    publish(1)
    held = duckdb.connect(str(path), read_only=True)
    publish(2)
    again = duckdb.connect(str(path), read_only=True)
    assert held.execute("SELECT publication_id FROM arena.publications").fetchone()[0] == 1
    assert again.execute("SELECT publication_id FROM arena.publications").fetchone()[0] == 1  # the held one's
    assert attached() == 2
    held.close()
    again.close()
    with duckdb.connect(str(path), read_only=True) as fresh:
        assert fresh.execute("SELECT publication_id FROM arena.publications").fetchone()[0] == 2
    text = (REPO_ROOT / "docs" / "reading.md").read_text(encoding="utf-8")
    assert "from arena_pipeline.reader import connect" in text and "ATTACH 'data/warehouse.duckdb'" in text


def test_every_python_recipe_runs_on_a_published_warehouse(sample_run, tmp_path):
    """The docs' Python blocks run as written from a folder holding the published sample as
    data/warehouse.duckdb (a block that cannot run yet says why, as shell blocks do)."""
    import subprocess
    import sys

    from arena_pipeline_tests.support.materialize import copy_warehouse

    (tmp_path / "data").mkdir()
    copy_warehouse(sample_run.warehouse, tmp_path / "data" / "warehouse.duckdb")
    recipes = [b for b in all_blocks() if b.lang == "python"]
    assert len(recipes) >= 2
    ran = 0
    for block in recipes:
        if block.not_run:
            continue
        # as a reader's shell runs it: no ARENA_* variable (the session points ARENA_WAREHOUSE elsewhere)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ARENA_", "HF_"))}
        result = subprocess.run([sys.executable, "-c", block.text], cwd=tmp_path, capture_output=True, text=True,
                                timeout=120, env=env)
        assert result.returncode == 0, f"{block}:\n{block.text}\n{result.stderr[-2000:]}"
        ran += 1
    assert ran >= 1
    shutil.rmtree(tmp_path / "data")
