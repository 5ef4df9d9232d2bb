"""The code passes ruff with the rules chosen in pyproject.toml ([tool.ruff.lint])."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                          "arena_pipeline", "arena_pipeline_tests", "arena_pipeline_dev", "benchmarks"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_benchmarks_and_dev_tools_import_nothing_from_the_tests():
    """The tests lean on arena_pipeline_dev (fake Hub, synthetic dumps, references), never the reverse, and the
    benchmarks import the same tools from there, not from the tests."""
    import ast

    offenders = []
    for folder in ("benchmarks", "arena_pipeline_dev"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "arena_pipeline_tests"]
    assert offenders == []


def test_at_most_eight_functions_run_over_eighty_lines():
    """Issue 46: long functions are split where they grow; the count is held (arena_pipeline_dev.long_functions)."""
    from arena_pipeline_dev.long_functions import long_functions

    found = long_functions(80)
    assert len(found) <= 8, "\n".join(f"{length} {where} {name}" for length, where, name in found)
