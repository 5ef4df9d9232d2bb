"""No hand-written list of table names anywhere in the package (issues 35 and 46, item 1): what a table is lives
on its asset (a TableSpec; a step of several tables declares them once, as ``FIT_TABLES`` does) or, for the
records, beside their DDL (core/store/records.py's ``RECORD_TABLES``); every other list of tables (published,
exported, heavy, checked, with history, lineage, a step's outputs) is derived. The check reads every module,
the assets and function bodies included."""

from __future__ import annotations

import ast

from arena_pipeline_tests.support.package_sources import PACKAGE, package_sources

#: where a list of tables is the declaration itself: the records' DDL
DECLARATIONS = ("core/store/records.py",)
#: modules that still hold lists: none (the load's tables are declared once, core/ingest/tables.py's LOAD_TABLES;
#: the fits' in assets/rankings.py's FIT_TABLES); a module added here must leave once its list is gone
NOT_YET: tuple[str, ...] = ()


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
    """(line, names) of every display that lists two table names or more, anywhere in the module (function
    bodies included), in line order."""
    found = [(node.lineno, names) for node in ast.walk(ast.parse(source)) if len(names := _table_names(node)) >= 2]
    return sorted(found)


def test_the_check_finds_a_list_of_tables():
    """The check itself: a tuple, a dict, a class attribute and a list inside a function (a loop's, a
    method's) are found; one name and a list of other names are not."""
    source = ("A = (BATTLES_TABLE, MESSAGES_TABLE)\nB = {LEADERBOARD_TABLE: (BATTLES_TABLE,), MODELS_TABLE: ()}\n"
              "class C:\n    tables = [X_TABLE, Y_TABLE]\n"
              "D = (BATTLES_TABLE,)\nE = (SCHEMA, VERSIONS_SCHEMA)\ndef f():\n    return (A_TABLE, B_TABLE)\n"
              "class G:\n    def h(self):\n        for t in {A_TABLE, B_TABLE}:\n            pass\n")
    assert [line for line, _ in table_lists(source)] == [1, 2, 4, 8, 11]


def test_no_hand_written_list_of_table_names_outside_the_declarations():
    offenders = {}
    for relative, source in package_sources(skip=DECLARATIONS + NOT_YET):
        if found := table_lists(source):
            offenders[relative] = found
    assert offenders == {}


def test_the_modules_not_checked_yet_still_hold_lists():
    """An allowance ends with its list: a module of NOT_YET without one must leave NOT_YET."""
    sources = dict(package_sources())
    assert [path for path in NOT_YET if path in sources and not table_lists(sources[path])] == []


def test_constants_hold_table_names_only_as_names():
    """constants.py names tables (one string each) and lists none."""
    tree = ast.parse((PACKAGE / "constants.py").read_text(encoding="utf-8"))
    for statement in tree.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if any(isinstance(t, ast.Name) and t.id.endswith("_TABLE") for t in targets):
                assert isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)
            assert not any(_table_names(node) for node in ast.walk(statement))
