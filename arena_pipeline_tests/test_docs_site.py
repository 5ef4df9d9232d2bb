"""The docs site builds with ``mkdocs build --strict`` (no broken link or anchor), the README stays one page
whose links lead somewhere, and the hand-written configuration page names the variables the code reads."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from arena_pipeline.docs_reference import REFERENCE_PAGE

REPO_ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")
VARIABLE = re.compile(r"`((?:ARENA|HF)_[A-Z_]+)`")


def test_mkdocs_builds_strict_without_a_broken_link_or_anchor(tmp_path):
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                             str(REPO_ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr
    built = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("index.html")}
    pages = {p.relative_to(REPO_ROOT / "docs").with_suffix("").as_posix() for p in (REPO_ROOT / "docs").rglob("*.md")}
    assert {f"{p}/index.html" for p in pages if p != "index"} | {"index.html"} <= built


def test_mkdocs_config_validates_links_and_anchors():
    config = (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "strict: true" in config and "anchors: warn" in config and "not_found: warn" in config


def test_the_readme_is_one_page_with_the_two_commands_first():
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 150, len(lines)
    commands = [lines[i + 1] for i, line in enumerate(lines) if line == "```sh"]
    assert commands[0].endswith("DAGSTER_HOME=$PWD/dagster_home .venv/bin/arena-pipeline refresh")
    # the test command is what CI runs: .ci/run's pytest line, after the venv and the install
    ci_tests = [line for line in (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
                if line.startswith(".venv/bin/pytest")]
    assert len(ci_tests) == 1, ci_tests
    assert commands[1] == f"python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && {ci_tests[0]}"
    assert text.index(commands[1]) < text.index("## What it is")
    assert "![Leaderboard report](docs/screenshots/report-overview.png)" in text


def test_the_readmes_links_lead_to_files_and_headings_that_exist():
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    local = [link for link in LINK.findall(text) if not link.startswith(("http://", "https://"))]
    assert len(local) >= 10
    for link in local:
        path, _, anchor = link.partition("#")
        target = REPO_ROOT / path
        assert target.is_file(), link
        if anchor:
            headings = [line.lstrip("#").strip() for line in target.read_text(encoding="utf-8").splitlines()
                        if line.startswith("#")]
            slugs = {re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", h.lower())).strip("-") for h in headings}
            assert anchor in slugs, (link, sorted(slugs))


def test_the_configuration_page_names_exactly_the_variables_of_the_generated_reference():
    explained = set(VARIABLE.findall((REPO_ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")))
    generated = set(VARIABLE.findall((REPO_ROOT / REFERENCE_PAGE).read_text(encoding="utf-8")))
    assert len(generated) >= 15
    assert explained == generated
