"""The version store is the only writer of versions (issue 35, item 2): no module outside core/store/ and
assets/version_store.py creates a table in ``arena_versions`` or registers a version.

An AST check of the package's source: outside the store no module names a function that writes or
registers versions, no SQL text creates, alters or inserts into a relation of the versions schema, and
the versions schema is passed only to the readers (``READERS``)."""

from __future__ import annotations

import ast
import re

from arena_pipeline_tests.support.package_sources import package_sources

#: the version store: core/store/ (its functions) and the IO manager that calls them
STORE = ("core/store/", "assets/version_store.py")
#: writers left outside the store: none (the gate's recomputed publication_changes goes through the store's
#: store_frame); an entry here would name a file and what it does
PENDING: dict[str, list[str]] = {}
#: core.store.versions' functions that create or register versions
WRITERS = frozenset({"register_version", "reuse_version", "reuse_together", "write_version", "write_version_with",
                     "write_file_versions"})
#: functions that may take the versions schema as an argument outside the store: they only read
READERS = frozenset({"relation_exists", "quoted", "table"})
#: an expression that names a relation of the versions schema (or the schema)
_VERSIONS = re.compile(r"\bversioned\(|\bVERSIONS_SCHEMA\b|\bVERSIONS\b|\bBUILDS\b|arena_versions")
#: SQL that makes (or adds rows to) the relation named right after it
_DDL = re.compile(r"\b(CREATE\s+(OR\s+REPLACE\s+)?(TEMP\s+|TEMPORARY\s+)?(TABLE|VIEW)(\s+IF\s+NOT\s+EXISTS)?"
                  r"|ALTER\s+TABLE|INSERT\s+(OR\s+REPLACE\s+)?INTO|COPY)\s*$", re.IGNORECASE)
_DDL_LITERAL = re.compile(r"\b(CREATE\s+(OR\s+REPLACE\s+)?(TABLE|VIEW)(\s+IF\s+NOT\s+EXISTS)?|ALTER\s+TABLE|INSERT\s+INTO)"
                          r"\s+\"?arena_versions\"?\.", re.IGNORECASE)


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def version_writes(source: str) -> list[tuple[int, str]]:
    """(line, what) of every place in ``source`` that writes versions (see the module docstring)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            found += [(node.lineno, f"imports {a.name}") for a in node.names if a.name in WRITERS]
        elif isinstance(node, (ast.Name, ast.Attribute)) and _name(node) in WRITERS:
            found.append((node.lineno, f"uses {_name(node)}"))
        elif isinstance(node, ast.Call) and _name(node.func) not in READERS:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if (isinstance(arg, ast.Name) and arg.id == "VERSIONS_SCHEMA") or (
                        isinstance(arg, ast.Constant) and arg.value == "arena_versions"):
                    found.append((node.lineno, f"passes the versions schema to {_name(node.func)}"))
        elif isinstance(node, ast.JoinedStr):
            parts = node.values
            for text, target in zip(parts, parts[1:], strict=False):
                if (isinstance(text, ast.Constant) and isinstance(target, ast.FormattedValue)
                        and _DDL.search(str(text.value)) and _VERSIONS.search(ast.unparse(target.value))):
                    found.append((node.lineno, f"SQL {text.value.strip()!r} into {ast.unparse(target.value)}"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _DDL_LITERAL.search(node.value):
            found.append((node.lineno, f"SQL {node.value[:60]!r}"))
    return sorted(set(found))


def test_the_check_finds_what_writes_versions():
    """The check itself: the flat tables' former code (the load into the versions schema, registered by
    the asset) and SQL that creates a version are found; reads of versions, and tables made elsewhere, are not."""
    writing = (
        "from arena_pipeline.core.store.versions import register_version, version_name\n"          # 1
        "load_dump(manifest, con, VERSIONS_SCHEMA, suffix=version_name('', build))\n"               # 2
        "con.execute(f'CREATE OR REPLACE TABLE {versioned(v)} AS SELECT 1')\n"                     # 3
        "con.execute(f'INSERT INTO {VERSIONS} (version) VALUES (?)', [v])\n"                       # 4
        "con.execute('CREATE TABLE arena_versions.x AS SELECT 1')\n"                               # 5
        "versions.reuse_together(con, tables, build)\n"                                            # 6
    )
    assert [line for line, _ in version_writes(writing)] == [1, 2, 3, 4, 5, 6]
    reading = (
        "con.execute(f'SELECT * FROM {versioned(v)}')\n"
        "con.execute(f'CREATE OR REPLACE VIEW {quoted(schema, t)} AS SELECT * FROM {versioned(v)}')\n"
        "relation_exists(con, VERSIONS_SCHEMA, name)\n"
        "con.execute('SELECT 1 FROM duckdb_tables() WHERE schema_name = ?', [VERSIONS_SCHEMA])\n"
        "con.execute(f'DROP TABLE IF EXISTS {versioned(v)}')\n"
        "write_table(con, SCHEMA, name, frame)\n"
    )
    assert version_writes(reading) == []


def test_only_the_version_store_writes_versions():
    offenders = {}
    for relative, source in package_sources(skip=STORE):
        if found := version_writes(source):
            offenders[relative] = sorted({what for _, what in found})
    assert offenders == PENDING, "only the version store (core/store/, assets/version_store.py) writes versions"
