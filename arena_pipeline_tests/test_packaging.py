"""What the wheel ships: every subpackage, the suites (from expectations/ at the root) and rule tables."""

from __future__ import annotations

import tomllib
from importlib.resources import files
from pathlib import Path

from arena_pipeline.core.validation import quality

ROOT = Path(__file__).resolve().parents[1]


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_every_subpackage_is_listed_for_the_wheel():
    listed = set(_setuptools()["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "arena_pipeline").rglob("__init__.py")}
    assert found | {"arena_pipeline.expectations"} == listed


def test_suites_are_the_package_arena_pipeline_expectations_mapped_from_the_root_folder():
    assert _setuptools()["package-dir"] == {"arena_pipeline.expectations": "expectations"}
    packaged = files("arena_pipeline.expectations")
    root = sorted(p.name for p in (ROOT / "expectations").glob("*.json"))
    assert root == ["battles.json", "messages.json"]
    for name in root:  # what importlib.resources finds is the root copy, byte for byte
        assert packaged.joinpath(name).read_bytes() == (ROOT / "expectations" / name).read_bytes()
    assert quality.suite_path("battles").read_bytes() == (ROOT / "expectations" / "battles.json").read_bytes()


def test_every_third_party_import_is_declared():
    """Each top-level module the package imports is a declared dependency (or the standard library)."""
    import ast
    import re
    import sys

    declared = {re.match(r"[A-Za-z0-9_.-]+", r).group().lower().replace("-", "_")
                for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    imported = set()
    for path in (ROOT / "arena_pipeline").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {m for m in imported - set(sys.stdlib_module_names) if m != "arena_pipeline"}
    assert third_party, "the walk found no import"
    from importlib.metadata import packages_distributions

    # a module's distribution may be named otherwise (dotenv: python-dotenv), as the installed metadata says
    provided = {m: {d.lower().replace("-", "_") for d in ds} for m, ds in packages_distributions().items()}
    missing = {m for m in third_party if m not in declared and not provided.get(m, set()) & declared}
    assert not missing, f"imported but not declared in pyproject.toml: {sorted(missing)}"


def test_report_templates_ship_as_package_data():
    """Every file the report reads at render time matches a package-data pattern of its package."""
    from fnmatch import fnmatch

    patterns = _setuptools()["package-data"]["arena_pipeline.presentation"]
    folder = ROOT / "arena_pipeline" / "presentation" / "templates"
    shipped = sorted(p.name for p in folder.iterdir() if any(fnmatch(f"templates/{p.name}", g) for g in patterns))
    assert shipped == ["changes.html.j2", "charts.svg.j2", "report.css", "report.html.j2", "report.js"]
    assert all(files("arena_pipeline.presentation").joinpath("templates", n).is_file() for n in shipped)
