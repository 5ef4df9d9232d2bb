"""Docs that cannot rot (issue 37 item 2): every shell block of README.md and docs/*.md is run here, offline,
in a temporary checkout of its own, or carries ``<!-- not run: why -->`` on the line before it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(?P<indent>\s*)(?P<ticks>```+)(?P<lang>[^\s`]*)\s*$")
NOT_RUN = re.compile(r"^<!-- not run: (?P<why>.+\S) -->$")
#: the languages a fenced block may carry: shell commands, SQL (run by the cookbook's tests), Python recipes (run by
#: test_docs_text.py), anything else
LANGUAGES = {"sh", "sql", "python", "text"}
#: how a command starts: a block of another language beginning like this hides a command from the test
COMMAND_START = re.compile(r"^(\.venv/|python3? |DAGSTER_HOME=|ARENA_[A-Z_]+=|dagster |arena-pipeline |pip |mv |cd )")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    text: str
    not_run: str | None

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md first (its offline run makes the warehouse the others read), then docs/ by name."""
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, dedented, with the reason given before a block not run."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, ticks = opening["indent"], opening["ticks"]
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks)
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = NOT_RUN.match(before)
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines[i + 1:end])
        found.append(Block(str(path.relative_to(REPO_ROOT)), i + 1, opening["lang"], body,
                           marker["why"] if marker else None))
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [b for page in pages() for b in blocks(page)]


def runnable() -> list[Block]:
    """The shell blocks to run, each distinct command once (the README repeats the offline run of its docs)."""
    seen, out = set(), []
    for block in all_blocks():
        if block.lang == "sh" and block.not_run is None and block.text not in seen:
            seen.add(block.text)
            out.append(block)
    return out


def test_every_block_says_what_it_is_and_every_shell_block_is_run_or_says_why_not():
    found = all_blocks()
    assert len(found) >= 20, "the parser found too few blocks"
    untagged = [str(b) for b in found if b.lang not in LANGUAGES]
    assert not untagged, f"fenced blocks need a language of {sorted(LANGUAGES)}: {untagged}"
    hidden = [str(b) for b in found if b.lang != "sh" and any(COMMAND_START.match(line) for line in b.text.splitlines())]
    assert not hidden, f"commands in a block that is not 'sh' would never be run: {hidden}"
    markers = [str(b) for b in found if b.lang not in ("sh", "python") and b.not_run]
    assert not markers, f"a 'not run' marker on a block that is no shell block: {markers}"
    # the marker is the only way out, and its reason is said
    assert all(len(b.not_run) > 10 for b in found if b.not_run)
    # what CI runs and the offline run are among the blocks, the first as it is and not run, the second run
    readme = blocks(REPO_ROOT / "README.md")
    assert readme[1].text == ("python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && "
                              ".venv/bin/pytest -n 2 --dist loadfile")
    assert any("arena_human_preference_sample_100.csv" in b.text for b in runnable() if b.page == "README.md")


def _checkout(root: Path) -> dict[str, str]:
    """A folder that looks like the checkout to the commands (the venv, the test data, the benchmarks' files,
    the instance's settings), with an environment of its own: no ARENA_* or DAGSTER_HOME of the caller, and a
    Hub endpoint nothing answers, so a block that would need the Hub fails here instead of downloading."""
    (root / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    for name in ("arena_pipeline", "arena_pipeline_tests", "arena_pipeline_dev", "benchmarks"):  # read only
        (root / name).symlink_to(REPO_ROOT / name, target_is_directory=True)
    shutil.copytree(REPO_ROOT / "docs", root / "docs")  # copies: a command may write there (the reference)
    for name in ("mkdocs.yml", "pyproject.toml"):
        shutil.copy(REPO_ROOT / name, root / name)
    (root / "dagster_home").mkdir()
    shutil.copy(REPO_ROOT / "dagster_home" / "dagster.yaml", root / "dagster_home" / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARENA_", "DAGSTER_", "HF_"))}
    return env | {"HF_ENDPOINT": "http://127.0.0.1:9", "PWD": str(root)}


@pytest.mark.slow
def test_every_runnable_docs_command_runs_as_written(tmp_path):
    env = _checkout(tmp_path)
    ran = []
    for block in runnable():
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, (f"{block} exited {result.returncode}:\n{block.text}\n--- stdout\n"
                                        f"{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}")
        ran.append(str(block))
    # what the commands made is where the docs say: the warehouse, the report, the export
    assert (tmp_path / "data" / "warehouse.duckdb").is_file() and (tmp_path / "data" / "report" / "index.html").is_file()
    assert any((tmp_path / "exports").iterdir()) and (tmp_path / "site" / "index.html").is_file()
    assert len(ran) >= 9, ran


def test_every_sql_block_runs_on_a_published_warehouse(sample_run):
    """The docs' SQL (the cookbook, the freshness questions, the alignment record) runs as written on the
    session's published sample: a renamed column or table fails here."""
    import duckdb

    from arena_pipeline.core.store.warehouse import connect as connect_warehouse

    statements = [(str(block), s.strip()) for block in all_blocks() if block.lang == "sql"
                  for s in block.text.split(";")
                  if any(line.strip() and not line.strip().startswith("--") for line in s.splitlines())]
    assert len(statements) >= 15
    with connect_warehouse(str(sample_run.warehouse), read_only=True) as con:
        for where, statement in statements:
            try:
                con.execute(statement).fetchall()
            except duckdb.Error as exc:
                pytest.fail(f"{where}: {exc}\n{statement}")
