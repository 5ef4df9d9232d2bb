"""Publication targets: the one protocol every place readers read a publication from implements.

The work file decides what a publication shows (``core/store/publish.py``: the ``arena.*``
views re-pointed in one transaction, the records); a *target* makes that visible to readers
elsewhere. The readers' snapshot file (``core/store/snapshot.py``) is the first target; another one
(a DuckLake on PostgreSQL, say) is one module implementing :class:`PublicationTarget` plus its tests.

A publication goes through every target in the same order (:func:`core.store.publish.publish`, which
:meth:`core.store.store.Store.publish` calls with the store's targets):

1. ``prepare()`` before any work: refuse what is not ours (a file of some other database), create
   what is missing (folders, a catalog);
2. ``stage(work_con, plan)`` inside the work file's publishing transaction: everything readers will
   see, written but not yet visible (a complete file beside the live one, a catalog transaction);
3. the work file COMMITs; then ``commit(staged)`` makes the staged publication visible to readers,
   atomically (one rename, one catalog COMMIT); a failure before the work file's COMMIT calls
   ``discard(staged)`` instead;
4. ``prune(work_con, schema)``: delete what no kept publication of the target needs any more.

``open_reader()`` opens a connection that sees the target's newest publication: what the one entry
every reader of the pipeline goes through (``core.store.connections.open_reader``) hands out.

The :class:`PublicationPlan` is what a publication shows, computed once from the work file
(:func:`plan_publication`) and handed to every target: the views' SQL per relation of the published
schema, the versions of small tables to copy, the Parquet files of the vote tables (paths relative to
the store folder: a target resolves them where it keeps them) and the records to copy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import duckdb

from arena_pipeline.constants import VERSIONS_SCHEMA
from arena_pipeline.core.store.records import BUILDS, RECORD_TABLES, VERSIONS, live_publication
from arena_pipeline.core.store.warehouse import relation_exists

#: A version named in a view's SQL (DuckDB stores identifiers unquoted where it can).
VERSION_IN_SQL = re.compile(rf'"?{VERSIONS_SCHEMA}"?\."?([0-9A-Za-z_]+)"?')


@dataclass(frozen=True)
class PublicationPlan:
    """What one publication shows readers, as the work file holds it (inside its publishing transaction).

    ``views``: ``(name, CREATE VIEW sql)`` for every view of ``schema`` (the ``arena.*`` relations, the
    ``*_history`` views), the work file's own SQL over ``arena_versions.<version>``;
    ``copied``: the versions of small tables (boards, comparisons, ...) a target copies whole;
    ``files``: per version of a vote table, its Parquet files, relative to the store folder;
    ``records``: ``(schema, table)`` of the records (publications, dumps, quality results, the builds
    and versions registries) a target copies whole.
    """

    schema: str
    publication_id: int | None
    views: tuple[tuple[str, str], ...] = ()
    copied: tuple[str, ...] = ()
    files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    records: tuple[tuple[str, str], ...] = ()

    @property
    def versions(self) -> tuple[str, ...]:
        """Every version the plan's views read (copied ones and file ones), sorted."""
        return tuple(sorted({*self.copied, *self.files}))


@runtime_checkable
class PublicationTarget(Protocol):
    """Where readers read publications from (see the module's docstring for the order of calls)."""

    #: a short name for logs and records ("snapshot", "ducklake", ...)
    name: str

    def prepare(self) -> None:
        """Before any work: refuse what is not ours, create what is missing."""

    def stage(self, work_con: duckdb.DuckDBPyConnection, plan: PublicationPlan) -> Any:
        """Write everything ``plan`` shows, not yet visible to readers; return the staged handle."""

    def commit(self, staged: Any) -> None:
        """Make ``staged`` the publication readers see, atomically."""

    def discard(self, staged: Any) -> None:
        """Drop ``staged`` (the work file rolled back): readers keep seeing what they saw."""

    def prune(self, work_con: duckdb.DuckDBPyConnection, schema: str) -> list[str]:
        """Delete what no kept publication of this target needs any more; return what was deleted."""

    def open_reader(self, *, timeout_s: float = 0.0, memory_limit: str | None = None,
                    config: dict | None = None) -> duckdb.DuckDBPyConnection:
        """A connection that sees this target's newest publication (read-only; the caller closes it):
        what ``store.open_reader``, the one entry of every reader, hands out."""


def plan_publication(con: duckdb.DuckDBPyConnection, schema: str,
                     files_of: Callable[[str], tuple[str, ...] | None]) -> PublicationPlan:
    """The plan of what ``con`` sees as live (inside a transaction: its uncommitted publication).

    ``files_of(version)`` gives a version's Parquet files (relative to the store folder), or None for
    a version copied whole (a small table).
    """
    live = live_publication(con, schema)
    views = tuple((name, sql) for name, sql in con.execute(
        "SELECT view_name, sql FROM duckdb_views() WHERE schema_name = ? AND NOT internal ORDER BY view_name",
        [schema]).fetchall())
    versions = sorted({name for _, sql in views for name in VERSION_IN_SQL.findall(sql)})
    files: dict[str, tuple[str, ...]] = {}
    copied: list[str] = []
    for version in versions:
        found = files_of(version)
        if found is None:
            copied.append(version)
        else:
            files[version] = tuple(found)
    records = [(schema, table) for table in RECORD_TABLES if relation_exists(con, schema, table)]
    records += [(VERSIONS_SCHEMA, registry.rpartition(".")[2].strip('"')) for registry in (BUILDS, VERSIONS)
                if relation_exists(con, VERSIONS_SCHEMA, registry.rpartition(".")[2].strip('"'))]
    return PublicationPlan(schema, live["publication_id"] if live else None, views, tuple(copied), files,
                           tuple(records))
