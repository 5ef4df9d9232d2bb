"""``arena-pipeline export``: the published tables written to files, all or nothing."""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import duckdb

from arena_pipeline.constants import PUBLICATIONS_TABLE, SCHEMA
from arena_pipeline.core.store.atomic import make_folder
from arena_pipeline.core.store.records import published_dump_row
from arena_pipeline.core.store.warehouse import quoted, read_snapshot, relation_exists, sql_string

#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP "CSV injection").
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
#: DuckDB type ids that CSV exports write as JSON (``to_json``): lists and fixed-size arrays as
#: arrays, structs and maps as objects.
NESTED_TYPE_IDS = frozenset({"list", "array", "struct", "map"})


def _csv_cell(ident: str, dtype: duckdb.DuckDBPyType) -> str:
    """The select item that writes column ``ident`` (of type ``dtype``) as CSV cells."""
    if dtype.id in NESTED_TYPE_IDS:
        return f"to_json({ident}) AS {ident}"
    if str(dtype) == "VARCHAR":
        prefixes = ", ".join(map(sql_string, FORMULA_PREFIXES))
        return f"CASE WHEN left({ident}, 1) IN ({prefixes}) THEN '''' || {ident} ELSE {ident} END AS {ident}"
    return ident


def csv_safe_select(con: duckdb.DuckDBPyConnection, source: str) -> str:
    """``source`` as written to CSV: text cells safe from formulas, nested cells as JSON.

    A text cell starting with a formula character is prefixed by ``'``: spreadsheets then show the
    text as typed instead of evaluating it; numbers (a negative rating) are numeric columns and stay
    as they are. A list cell is a JSON array (``["a","b"]``; a list of structs, an array of
    objects), a struct or map cell a JSON object, a null an empty cell: DuckDB's own text form
    quotes an element only when it holds special characters (``[a, 'b:0']``), which no reader can
    split reliably. A JSON cell starts with ``[`` or ``{``, never a formula character. Parquet
    exports are written raw, lists as lists.
    """
    relation = con.sql(source)
    idents = ['"' + name.replace('"', '""') + '"' for name in relation.columns]
    select = [_csv_cell(i, dtype) for i, dtype in zip(idents, relation.types, strict=True)]
    return f"SELECT {', '.join(select)} FROM ({source})"


def exported_by_publication(con: duckdb.DuckDBPyConnection) -> tuple[str, ...] | None:
    """The tables the live publication says are exported (its settings' ``exported``: the gate records the
    table catalogue's list), or None for a warehouse whose publication does not say (from before, or none).
    Read with DuckDB alone (no frame library: the command starts fast)."""
    if not relation_exists(con, SCHEMA, PUBLICATIONS_TABLE):
        return None
    row = con.execute(f"SELECT settings FROM {quoted(SCHEMA, PUBLICATIONS_TABLE)} "
                      "ORDER BY publication_id DESC LIMIT 1").fetchone()
    listed = (json.loads(row[0]) if row and row[0] else {}).get("exported")
    return tuple(listed) if listed else None


def export_files(tables: Iterable[str]) -> set[str]:
    """The files an export folder of ``tables`` may hold."""
    return {f"{t}{ext}" for t in tables for ext in (".parquet", ".csv")} | {"manifest.json"}


def export_folder_problem(out_dir: Path, names: set[str]) -> str | None:
    """Why ``out_dir`` cannot receive an export of the files ``names`` (:func:`export_files`; None when it
    can: new, empty or an earlier export).

    A symbolic link is judged by the folder it leads to (:func:`export_tables` writes there); a link
    that leads to no folder (its target missing, or a loop of links) is refused rather than replaced.
    """
    if out_dir.is_symlink() and not out_dir.exists():  # exists() follows the link; False on a loop too
        return (f"{out_dir} is a symbolic link to {os.readlink(out_dir)}, which is no folder; "
                "create the folder or give another path for OUT_DIR")
    if out_dir.exists() and not out_dir.is_dir():
        return f"{out_dir} exists and is not a folder; give a folder path for OUT_DIR"
    if out_dir.is_dir():
        foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in names)
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            return (f"{out_dir} holds files that are not from an export ({shown}); "
                    "give a new or empty folder, or an earlier export's folder")
    return None


def export_tables(con: duckdb.DuckDBPyConnection, out_dir: Path, fmt: str, warehouse: str, tables: Iterable[str],
                  ) -> tuple[dict[str, dict[str, object]], list[str], str | None]:
    """Write every table of ``tables`` present, in order (the catalogue's ``exported``: what the assets
    declare exported, each with its history view, and the records; only ``leaderboard`` is required),
    from one snapshot, and ``manifest.json`` into a
    temporary folder beside ``out_dir``, then swap it in: a failure (a full disk) leaves ``out_dir``
    as it was, never a mix of two revisions. When ``out_dir`` is a symbolic link (to a link, ...), the
    folder it finally leads to is the one written and swapped, beside itself (on its own file system):
    the link stays and points at the new export. Returns the tables written (file, rows), the tables
    missing and the published revision. Raises OSError or duckdb.Error with nothing changed."""
    if out_dir.is_symlink():  # swapping the link itself would replace it with a plain folder
        out_dir = Path(os.path.realpath(out_dir))
    suffix, options = (".parquet", "FORMAT parquet") if fmt == "parquet" else (".csv", "FORMAT csv, HEADER true")
    written: dict[str, dict[str, object]] = {}
    skipped: list[str] = []
    make_folder(out_dir.parent)
    staging = _new_folder(out_dir.parent, prefix=f".{out_dir.name}.", suffix=".export-tmp")
    try:
        with read_snapshot(con):  # one snapshot for every table
            revision = (published_dump_row(con, SCHEMA) or {}).get("revision")
            for table in tables:
                if not relation_exists(con, SCHEMA, table):
                    skipped.append(table)
                    continue
                target, source = staging / f"{table}{suffix}", f"SELECT * FROM {quoted(SCHEMA, table)}"
                if fmt == "csv":
                    source = csv_safe_select(con, source)
                rows = con.execute(f"COPY ({source}) TO {sql_string(str(target))} ({options})").fetchone()[0]
                written[table] = {"file": target.name, "rows": int(rows)}  # COPY returns the rows written
        manifest = {"revision": revision, "format": fmt, "warehouse": warehouse,
                    "exported_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    "tables": written, "missing_tables": skipped}
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        _swap_in(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return written, skipped, revision


def _new_folder(parent: Path, prefix: str, suffix: str) -> Path:
    """A new folder in ``parent`` under a unique name, with the mode ``mkdir`` gives (0o777 less the umask).

    The staging folder becomes ``OUT_DIR`` by a rename, so it must have a new folder's mode;
    ``tempfile.mkdtemp`` would make it 0o700 whatever the umask. The files written into it get
    0o666 less the umask (DuckDB's COPY, ``Path.write_text``) without help.
    """
    for _ in range(100):  # a 64-bit random name is taken only by accident: retry then
        path = parent / f"{prefix}{secrets.token_hex(8)}{suffix}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no unused temporary folder name in {parent}")


def _swap_in(staging: Path, out_dir: Path) -> None:
    """Replace ``out_dir`` (absent, or an earlier export) by the complete ``staging`` folder."""
    if not out_dir.exists():
        os.rename(staging, out_dir)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".export-old", dir=out_dir.parent))
    os.rename(out_dir, old / "previous")
    try:
        os.rename(staging, out_dir)
    except OSError:
        os.rename(old / "previous", out_dir)  # put the earlier export back
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
