"""No hand-written list of table names outside the declarations (issue 35, item 1): what a table is lives on
its asset (assets/*) or, for the records, beside their DDL (core/store/records.py); every other list of
tables (published, exported, heavy, checked, with history, lineage) is derived from the asset graph."""

from __future__ import annotations

import ast

from arena_pipeline_tests.support.package_sources import PACKAGE, package_sources

#: where tables are declared: the assets (each module its own tables) and the records' DDL
DECLARATIONS = ("assets/", "core/store/records.py")


def _table_names(node: ast.AST) -> list[str]:
    """The ``*_TABLE`` names listed directly in a tuple, list, set or dict display (its keys), or []."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        elements = node.elts
    elif isinstance(node, ast.Dict):
        elements = [key for key in node.keys if key is not None]
    else:
        return []
    return [e.id for e in elements if isinstance(e, ast.Name) and e.id.endswith("_TABLE")]


def table_lists(source: str) -> list[tuple[int, list[str]]]:
    """(line, names) of every module- or class-level statement that lists two table names or more."""
    found = []
    for statement in ast.parse(source).body:
        scopes = statement.body if isinstance(statement, ast.ClassDef) else [statement]
        for top in scopes:
            if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue  # what one function reads or writes (say, the loader's four tables) is its own
            for node in ast.walk(top):
                names = _table_names(node)
                if len(names) >= 2:
                    found.append((node.lineno, names))
    return found


def test_the_check_finds_a_list_of_tables():
    """The check itself: a tuple, a dict and a class attribute of table names are found; one name,
    a list inside a function and a list of other names are not."""
    source = ("A = (BATTLES_TABLE, MESSAGES_TABLE)\nB = {LEADERBOARD_TABLE: (BATTLES_TABLE,), MODELS_TABLE: ()}\n"
              "class C:\n    tables = [X_TABLE, Y_TABLE]\n"
              "D = (BATTLES_TABLE,)\nE = (SCHEMA, VERSIONS_SCHEMA)\ndef f():\n    return (A_TABLE, B_TABLE)\n")
    assert [line for line, _ in table_lists(source)] == [1, 2, 4]


def test_no_hand_written_list_of_table_names_outside_the_declarations():
    offenders = {}
    for relative, source in package_sources(skip=DECLARATIONS):
        if found := table_lists(source):
            offenders[relative] = found
    assert offenders == {}


def test_constants_hold_table_names_only_as_names():
    """constants.py names tables (one string each) and lists none."""
    tree = ast.parse((PACKAGE / "constants.py").read_text(encoding="utf-8"))
    for statement in tree.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if any(isinstance(t, ast.Name) and t.id.endswith("_TABLE") for t in targets):
                assert isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)
            assert not any(_table_names(node) for node in ast.walk(statement))
