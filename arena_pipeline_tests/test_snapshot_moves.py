"""A snapshot moves with its folder: the readers' file and its store folder copied elsewhere (and the
original deleted) read every ``arena.*`` relation in a fresh process from another working directory,
with no run; the snapshot names no absolute path."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import duckdb

from arena_pipeline.core.store.snapshot import store_folder

READ_ALL = """
import json, sys
if sys.argv[2] == "reader":  # the readers' entry: an in-memory connection that ATTACHes the file
    from arena_pipeline.reader import connect
    con = connect(sys.argv[1])
else:
    from arena_pipeline.core.store.warehouse import connect
    con = connect(sys.argv[1], read_only=True)
names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'arena' "
                                   "ORDER BY 1").fetchall()]
print(json.dumps({name: con.execute(f'SELECT count(*) FROM arena."{name}"').fetchone()[0] for name in names}))
"""


def _read_all(path, cwd, entry="warehouse") -> dict[str, int]:
    done = subprocess.run([sys.executable, "-c", READ_ALL, str(path), entry], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _copy(snapshot, to):
    to.mkdir(parents=True)
    shutil.copy2(snapshot, to / snapshot.name)
    shutil.copytree(store_folder(snapshot), to / store_folder(snapshot).name)
    return to / snapshot.name


def test_a_snapshot_copied_with_its_store_folder_reads_every_relation_from_anywhere(sample_run, tmp_path):
    expected = _read_all(sample_run.warehouse, tmp_path)
    assert {"battles", "messages", "context_messages", "quarantine", "preference_pairs", "leaderboard"} <= set(expected)
    assert expected["battles"] > 0 and expected["messages"] > 0
    first = _copy(sample_run.warehouse, tmp_path / "first")  # the session's sample stays where it is
    moved = _copy(first, tmp_path / "elsewhere" / "restored")
    shutil.rmtree(tmp_path / "first")  # the copy never reads the files it was copied from
    (tmp_path / "cwd").mkdir()
    assert _read_all(moved, tmp_path / "cwd") == expected
    assert _read_all(moved, tmp_path / "cwd", "reader") == expected  # arena_pipeline.reader.connect too
    link = tmp_path / "cwd" / "linked.duckdb"  # a link elsewhere: the files resolve against the file's own folder
    link.symlink_to(moved)
    assert _read_all(link, tmp_path, "reader") == expected
    assert _read_all(link, tmp_path) == expected
    with duckdb.connect(str(moved), read_only=True) as con:
        sql = " ".join(s for (s,) in con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall())
    assert "read_parquet" in sql and str(tmp_path) not in sql and str(sample_run.root) not in sql
    # a plain DuckDB connection from the snapshot's own folder reads the vote tables as they are
    done = subprocess.run([sys.executable, "-c", "import duckdb, sys; print(duckdb.connect(sys.argv[1], read_only=True)"
                           ".execute('SELECT count(*) FROM arena.messages').fetchone()[0])", moved.name],
                          cwd=moved.parent, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and int(done.stdout) == expected["messages"], done.stderr
