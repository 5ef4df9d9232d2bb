"""Whether a publication may replace the file at ARENA_WAREHOUSE, and the file, mode and name it publishes under.

The readers' file is replaced by every publication (a rename over it), so the pipeline first makes sure
the file is its own: absent, a DuckDB file with nothing in it, or a snapshot of *this* store (its marker
names a publication the work file holds, with the same run and time: a copied or moved store and its
snapshot stay one). Anything else (a user's own database, a text file, another store's snapshot, a
snapshot ahead of a work file restored from an older backup, a snapshot some process holds read-write)
is refused with one line naming the file and what to do, at the start of every step that writes
(``Warehouse.get_connection``: read once per process and again whenever the file changed on disk) and
again right before the rename (``StagedSnapshot.swap``: read always).

Also decided here: a symbolic link at ARENA_WAREHOUSE publishes to the file it leads to (the link
stays), the snapshot keeps the mode and group the replaced file had, a stale write-ahead log beside it
never reaches the next snapshot, names that would bend a reader's catalog are refused, and the
Parquet paths a snapshot's views read are written so that no glob character in a folder name matches
another folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

import duckdb

from arena_pipeline.constants import PUBLICATIONS_TABLE, VERSIONS_SCHEMA
from arena_pipeline.core.store.reader import ALIAS, attach
from arena_pipeline.core.store.warehouse import (
    WAREHOUSE_SCHEMAS,
    NotAWarehouseError,
    corruption_error,
    quoted,
    relation_exists,
)

#: What identifies a publication across copies of its store: publication id -> (run id, published at).
Publications = Mapping[int, tuple[str | None, str | None]]

#: The marker of a snapshot (one row: the publication it shows, when it was written, its store folder):
#: what tells a snapshot of this store from any other DuckDB file.
SNAPSHOT_MARKER = "snapshot"


class ForeignFileError(NotAWarehouseError):
    """ARENA_WAREHOUSE holds something this store did not publish: it is never replaced (never retried)."""


class WarehouseNameError(NotAWarehouseError):
    """A warehouse path that would make readers resolve ``arena.*`` to the wrong catalog."""


def published_path(path: str | os.PathLike[str]) -> Path:
    """The file a publication replaces: ``path``, or the file a symbolic link at ``path`` leads to (the
    link stays, and keeps leading to the new snapshot)."""
    return Path(os.path.realpath(path))


def check_name(path: str | os.PathLike[str], work: str | os.PathLike[str] | None = None) -> None:
    """Refuse a warehouse file that DuckDB would open as a catalog named like a warehouse schema
    (``arena.duckdb``, ``arena_versions.db``: the catalog is the name up to its first dot): every
    ``arena.leaderboard`` of a plain ``duckdb.connect(path)`` would then be ambiguous. Refuse a ``?`` in
    the warehouse's or the work file's (``work``) path too: DuckDB reads what follows it as options and
    opens the path before it (``st?ar/w.duckdb`` is the file ``st``). Refuse a ``,`` in either file's folder:
    ``file_search_path`` (``warehouse.search_path``) is a comma-separated list."""
    for role, where in (("ARENA_WAREHOUSE", path), ("the work file", work)):
        if where is not None and "?" in os.fspath(where):
            raise WarehouseNameError(
                f"{role} {where}: DuckDB reads what follows '?' in a database path as options and would open "
                f"{os.fspath(where).partition('?')[0]!r} instead; nothing was written. Choose a path without '?'"
                + ("" if role == "ARENA_WAREHOUSE" else " (ARENA_STORE_DIR)"))
    for role, where in (("ARENA_WAREHOUSE", path), ("the work file", work)):
        folder = os.path.dirname(published_path(where)) if where is not None else ""
        if "," in folder:
            raise WarehouseNameError(
                f"{role} {where}: its folder {folder!r} holds a ',', but DuckDB's file_search_path, which resolves "
                "the vote tables' Parquet files against the folder, is a comma-separated list (readers would not "
                "find them); nothing was written. Choose a folder without ','"
                + ("" if role == "ARENA_WAREHOUSE" else " (ARENA_STORE_DIR)"))
    for candidate in dict.fromkeys((Path(path), published_path(path))):
        catalog = candidate.name.split(".")[0]
        if catalog.lower() in WAREHOUSE_SCHEMAS:
            raise WarehouseNameError(
                f"ARENA_WAREHOUSE {path}: a DuckDB file named {candidate.name!r} opens as the catalog "
                f"{catalog!r}, which readers cannot tell from the schema {catalog.lower()!r} (every "
                "arena.* query fails as ambiguous); nothing was written. Name the file otherwise, e.g. "
                "warehouse.duckdb")


#: Characters DuckDB's file patterns treat as wildcards (``*``, ``?``, ``[...]``) or groups (``{...}``).
_GLOB = re.compile(r"([*?\[{}])")


def literal_path(path: str) -> str:
    """``path`` as a ``read_parquet`` pattern that matches only itself (each wildcard character put in
    brackets): a folder ``st*ar`` never reads its sibling ``stXar``'s files."""
    return _GLOB.sub(r"[\1]", path)


def store_publications(con: duckdb.DuckDBPyConnection, schema: str) -> dict[int, tuple[str | None, str | None]]:
    """The work file's publications (``con``), as :data:`Publications`."""
    if not relation_exists(con, schema, PUBLICATIONS_TABLE):
        return {}
    rows = con.execute(f"SELECT publication_id, run_id, CAST(published_at AS VARCHAR) "
                       f"FROM {quoted(schema, PUBLICATIONS_TABLE)}").fetchall()
    return {pid: (run, at) for pid, run, at in rows}


def lock_holder(exc: BaseException) -> str:
    """Who holds a DuckDB lock, from its message (``Conflicting lock is held in <program> (PID n)``)."""
    found = re.search(r"held in (.+?) \(PID (\d+)\)", str(exc))
    return f"process {found.group(2)} ({found.group(1)})" if found else "another process"


def read_write_holder_error(path: str | os.PathLike[str], exc: Exception) -> ForeignFileError:
    """The error for a snapshot some process holds read-write (the pipeline never does)."""
    return ForeignFileError(
        f"{path} is open read-write by {lock_holder(exc)}: the pipeline never opens it so, and readers must open it "
        "read-only (duckdb.connect(path, read_only=True), or arena_pipeline.reader.connect); what they write "
        "there would be lost. Close that connection and run again")


#: What the snapshot at a path showed when this process last read it (:func:`check_replaceable`), with the
#: file's identity then (device, inode, size, modification and change times): real path -> (identity, shown).
_SHOWN: dict[str, tuple[tuple[int, ...], tuple | None]] = {}


def _identity(real: Path) -> tuple[int, ...]:
    """The file's and its write-ahead log's device, inode, size and times (0s for no log)."""
    found = [real.stat()]
    with contextlib.suppress(FileNotFoundError):
        found.append(Path(f"{real}.wal").stat())
    return tuple(n for f in found for n in (f.st_dev, f.st_ino, f.st_size, f.st_mtime_ns, f.st_ctime_ns))


def check_replaceable(path: str | os.PathLike[str], work: str | os.PathLike[str], publications: Publications,
                      schema: str = "arena", *, reread: bool = True) -> None:
    """Refuse unless the file at ``path`` (or where its link leads) may be replaced by a publication of the
    store whose work file is ``work`` and holds ``publications``.

    ``reread=False`` (every writing connection after a run's first): what the file shows is read again only
    when the file changed on disk since this process last read it (another file, size or time); the run's
    first check and the one right before the rename read it always, and so also find a process holding it
    read-write.

    Raises
    ------
    WarehouseNameError
        :func:`check_name` (also called alone before a store is opened).
    ForeignFileError
        The file is not a snapshot of this store, or a process holds it read-write; one line naming it.
    """

    check_name(path, work)
    real = published_path(path)
    if not real.exists() or (real.is_file() and real.stat().st_size == 0):
        return
    what = f"ARENA_WAREHOUSE {path}" + (f" (a link to {real})" if str(real) != os.path.abspath(path) else "")
    advice = ("nothing was written. Move it away, or point ARENA_WAREHOUSE at a new file or at this store's "
              "snapshot")
    if not real.is_file():
        raise ForeignFileError(f"{what} is not a file; {advice}")
    if Path(work).exists() and os.path.samefile(real, work):  # a warehouse from before the snapshot, adopted
        return
    identity = _identity(real)
    cached = _SHOWN.get(str(real))
    if not reread and cached is not None and cached[0] == identity:
        shown = cached[1]
    else:
        shown = _shows(real, path, what, advice, schema)
        _SHOWN[str(real)] = (identity, shown)
    if shown is None:
        return
    held, row = shown
    if held in publications and publications[held] == row:
        return
    newest = max(publications, default=0)
    ends = f"ends at publication {newest}" if held > newest else f"has another publication {held}"
    raise ForeignFileError(
        f"{what} shows publication {held}, but this store's work file {work} {ends}: the snapshot belongs to another "
        "store, or the work file was restored from an older backup; nothing was written. Point ARENA_STORE_DIR at "
        "the snapshot's own store (or restore the work file that goes with it), or ARENA_WAREHOUSE at a new file")


def _shows(real: Path, path: str | os.PathLike[str], what: str, advice: str, schema: str) -> tuple | None:
    """What the snapshot ``real`` shows: (its publication, (that publication's run, time)), or None when it
    holds nothing to lose (an empty DuckDB file, a snapshot of a store that never published); refused when it
    is no snapshot or a process holds it read-write."""
    try:
        con = attach(str(real))
    except duckdb.Error as exc:
        if isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower():
            raise read_write_holder_error(path, exc) from exc
        damaged = corruption_error(str(real), exc)
        if damaged is not None:
            raise damaged from exc
        raise ForeignFileError(f"{what} is not a DuckDB file the pipeline published; {advice}") from exc
    try:
        names = con.execute("SELECT table_schema, table_name FROM information_schema.tables "
                            f"WHERE table_catalog = '{ALIAS}'").fetchall()
        if not names:
            return None  # an empty DuckDB file: nothing to lose
        if (VERSIONS_SCHEMA, SNAPSHOT_MARKER) not in names:
            listed = ", ".join(f"{s}.{t}" for s, t in sorted(names)[:3]) + (" ..." if len(names) > 3 else "")
            raise ForeignFileError(f"{what} is a DuckDB database the pipeline did not publish ({listed}); {advice}")
        (held,) = con.execute(f"SELECT publication_id FROM {quoted(VERSIONS_SCHEMA, SNAPSHOT_MARKER)}").fetchone()
        if held is None:
            return None  # a snapshot of a store that never published: nothing to lose
        row = con.execute(f"SELECT run_id, CAST(published_at AS VARCHAR) FROM {quoted(schema, PUBLICATIONS_TABLE)} "
                          f"WHERE publication_id = {int(held)}").fetchone()
    finally:
        con.close()
    return held, row


def prepare_rename(staged: Path, target: Path) -> None:
    """Make the staged snapshot take the place of ``target`` as the file it replaces was: the same mode
    and group (a new file keeps the umask's), and no write-ahead log of the old file beside it (DuckDB
    would replay it into the new snapshot at its next read-write open)."""
    with contextlib.suppress(FileNotFoundError):
        old = target.stat()
        os.chmod(staged, stat.S_IMODE(old.st_mode))
        with contextlib.suppress(PermissionError):  # only a member of the group may give it
            os.chown(staged, -1, old.st_gid)
    Path(f"{target}.wal").unlink(missing_ok=True)
