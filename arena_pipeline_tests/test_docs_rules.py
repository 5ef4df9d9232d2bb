"""The gate's rules as a numbered specification (issue 35 item 5): docs/publication-rules.md names, for each
rule, the tests that hold it; each named test exists, and the gate's code points only to rules that exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RULES_PAGE = REPO_ROOT / "docs" / "publication-rules.md"
RULE = re.compile(r"^\*\*Rule (\d+)[^*]*\*\*")
TEST = re.compile(r"`([\w/]+\.py)::(test_\w+)`")
#: "publication rule 8", "publication rules 11 to 16", "rules 12, 13 and 15", "(rule 5)"
CODE_REFERENCE = re.compile(r"\brules? (\d+(?:(?:, | and | to |-)\d+)*)")


def rules() -> dict[int, str]:
    """Each rule's number and its text (up to the next rule or heading)."""
    found: dict[int, list[str]] = {}
    current = None
    for line in RULES_PAGE.read_text(encoding="utf-8").splitlines():
        start = RULE.match(line)
        if start:
            current = int(start.group(1))
            assert current not in found, f"rule {current} twice"
            found[current] = []
        elif line.startswith("#"):
            current = None
        if current is not None:
            found[current].append(line)
    return {n: "\n".join(lines) for n, lines in found.items()}


def _defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_rules_are_numbered_in_order_and_each_names_a_test():
    found = rules()
    assert list(found) == list(range(1, len(found) + 1)) and len(found) >= 20
    without = [n for n, text in found.items() if not TEST.search(text.split("Tests:", 1)[-1])]
    assert not without, f"rules naming no test: {without}"


def test_every_named_test_exists():
    missing = []
    for number, text in rules().items():
        for path, name in TEST.findall(text):
            module = REPO_ROOT / "arena_pipeline_tests" / path
            if not module.is_file() or name not in _defined_tests(module):
                missing.append(f"rule {number}: {path}::{name}")
    assert not missing, missing


def _numbers(reference: str) -> set[int]:
    numbers = [int(n) for n in re.findall(r"\d+", reference)]
    if " to " in reference or "-" in reference:
        return set(range(numbers[0], numbers[-1] + 1))
    return set(numbers)


def test_the_gate_code_points_to_rules_that_exist():
    source = (REPO_ROOT / "arena_pipeline" / "core" / "publication" / "gate.py").read_text(encoding="utf-8")
    docstrings = "\n".join(ast.get_docstring(node) or "" for node in ast.walk(ast.parse(source))
                           if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef))
    cited = set().union(*(_numbers(m) for m in CODE_REFERENCE.findall(docstrings)))
    assert "docs/publication-rules.md" in docstrings
    assert cited <= set(rules()), sorted(cited - set(rules()))
    assert set(range(5, 18)) <= cited  # every table and board rule gate.py implements
