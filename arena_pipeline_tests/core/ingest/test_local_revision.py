"""Content-addressed local revisions: a change in place changes the revision; an unchanged dump is not re-hashed."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from arena_pipeline.core.ingest import load as ingest
from arena_pipeline.core.ingest import local_dump
from arena_pipeline.core.ingest.local_dump import ContentHashes, local_manifest, local_revision
from arena_pipeline.core.ingest.sources import parse_source
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.resources import DumpSource

REAL_CSV = Path(__file__).parents[2] / "data" / "arena_human_preference_sample_100.csv"


def _undigested(text: str) -> str:
    """``text`` with its sha256 digests as ``<sha256>`` (they follow the file's bytes, the writer's version's too)."""
    return re.sub(r"[0-9a-f]{64}", "<sha256>", text)


def _swap_winner_in_place(path: Path) -> None:
    """Swap one 'model_a' winner for 'model_b' without changing the size, inode or modification time."""
    stat = path.stat()
    data = path.read_bytes()
    at = data.index(b",model_a,")
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(b",model_b,")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (stat.st_size, stat.st_mtime_ns, stat.st_ino)


def test_in_place_change_with_same_size_and_mtime_changes_the_revision(tmp_path):
    dump = tmp_path / "votes.csv"
    shutil.copy(REAL_CSV, dump)
    hashes = ContentHashes(tmp_path / "cache" / "local-sha256.json")
    spec = parse_source(str(dump))
    before = local_revision(spec, hashes)
    assert before.startswith("local-") and len(before) == 22
    _swap_winner_in_place(dump)
    after = local_revision(spec, ContentHashes(tmp_path / "cache" / "local-sha256.json"))
    assert after != before
    assert local_manifest(spec).revision == after  # the manual run and the sensor agree


def test_unchanged_dump_is_not_rehashed(tmp_path, monkeypatch):
    dump = tmp_path / "votes.csv"
    shutil.copy(REAL_CSV, dump)
    cache = tmp_path / "cache" / "local-sha256.json"
    spec = parse_source(str(dump))
    first = local_revision(spec, ContentHashes(cache))
    calls = []
    real = local_dump.file_sha256
    monkeypatch.setattr(local_dump, "file_sha256", lambda p: calls.append(p) or real(p))
    assert local_revision(spec, ContentHashes(cache)) == first
    assert calls == []
    os.utime(dump)  # touched: hashed again, same content, same revision
    assert local_revision(spec, ContentHashes(cache)) == first and len(calls) == 1


def test_a_cache_entry_is_checked_against_the_file_before_use(tmp_path, monkeypatch):
    """local-sha256.json was trusted as is: a list or a string entry crashed the look-up, a damaged digest
    became the revision (issue 38, item 8). An entry is used only if it fits the file now; else: re-hash."""
    import json

    dump = tmp_path / "votes.csv"
    shutil.copy(REAL_CSV, dump)
    cache = tmp_path / "cache" / "local-sha256.json"
    spec = parse_source(str(dump))
    right = local_revision(spec, ContentHashes(cache))
    entry = json.loads(cache.read_text())[str(dump.resolve())]
    size, mtime = dump.stat().st_size, dump.stat().st_mtime_ns
    assert (entry["size"], entry["mtime_ns"], entry["stamp"][:2]) == (size, mtime, [size, mtime])
    calls = []
    real = local_dump.file_sha256
    monkeypatch.setattr(local_dump, "file_sha256", lambda p: calls.append(p) or real(p))
    key = str(dump.resolve())
    damaged = [
        [],  # not an object of entries
        {key: "x"},
        {key: dict(entry, sha256=5)},
        {key: dict(entry, sha256="0" * 63)},
        {key: dict(entry, sha256=entry["sha256"].upper())},
        {key: dict(entry, size=size + 1)},  # the size or mtime recorded is not the file's
        {key: dict(entry, mtime_ns=mtime - 1)},
        {key: {k: v for k, v in entry.items() if k != "size"}},  # an entry from before the fields
        {key: dict(entry, stamp="abc")},
    ]
    for content in damaged:
        cache.write_text(json.dumps(content))
        assert local_revision(spec, ContentHashes(cache)) == right, content
    assert len(calls) == len(damaged)  # each damaged entry hashed the file again
    assert json.loads(cache.read_text())[key] == entry  # and was replaced by a sound one
    assert local_revision(spec, ContentHashes(cache)) == right and len(calls) == len(damaged)


def test_sensor_lookup_and_fetch_agree(tmp_path):
    dump = tmp_path / "votes.csv"
    shutil.copy(REAL_CSV, dump)
    source = DumpSource(source=str(dump), cache_dir=str(tmp_path / "cache"))
    assert source.latest_revision() == source.fetch().revision
    renamed = tmp_path / "other.csv"
    shutil.copy(REAL_CSV, renamed)
    # a single file is identified by its content alone: a renamed copy is the same dump
    assert DumpSource(source=str(renamed), cache_dir=str(tmp_path / "cache")).latest_revision() == source.latest_revision()


# the load reads what the revision hashed -------------------------------------------------------

def _loaded(manifest, tmp_path):
    import duckdb

    with duckdb.connect(str(tmp_path / "load.duckdb")) as con:
        return ingest.load_dump(manifest, con, "arena")


def test_a_file_rewritten_after_its_revision_was_computed_is_not_loaded_under_it(tmp_path, golden):
    import pytest

    from arena_pipeline.core.ingest.sources import SourceError

    dump = tmp_path / "votes.csv"
    shutil.copy(REAL_CSV, dump)
    manifest = local_manifest(parse_source(str(dump)))
    _swap_winner_in_place(dump)  # same size, inode and modification time: only the content differs
    with pytest.raises(SourceError) as raised:
        _loaded(manifest, tmp_path)
    golden.check("load", "a file changed in place: its digest", _undigested(str(raised.value)))


def test_an_unchanged_file_is_not_hashed_again_by_the_load(tmp_path, monkeypatch):
    dump = tmp_path / "votes.csv"
    shutil.copy(REAL_CSV, dump)
    manifest = local_manifest(parse_source(str(dump)))
    assert manifest.files[0].stamp is not None
    hashed = []
    real = ingest.file_sha256
    monkeypatch.setattr(ingest, "file_sha256", lambda path: hashed.append(path) or real(path))
    assert _loaded(manifest, tmp_path).battles > 0
    assert hashed == []  # the stamp taken with the revision's hash vouches for the content
    # a stamp that differs (a Hub shard from the cache has none) costs one hash, and loads when it matches
    import dataclasses

    unstamped = dataclasses.replace(manifest, files=(dataclasses.replace(manifest.files[0], stamp=None),))
    (tmp_path / "load.duckdb").unlink()
    assert _loaded(unstamped, tmp_path).battles > 0 and hashed == [str(dump)]


def test_a_file_changed_while_it_is_read_fails_the_load(tmp_path, monkeypatch, golden):
    import pytest

    from arena_pipeline.core.ingest.sources import SourceError

    dump = tmp_path / "votes.csv"
    shutil.copy(REAL_CSV, dump)
    manifest = local_manifest(parse_source(str(dump)))
    real = ingest._iter_file

    def rewrite_midway(*args, **kwargs):
        for i, batch in enumerate(real(*args, **kwargs)):
            if i == 0:
                os.utime(dump)  # a write while the load reads the file changes its stamp
            yield batch

    monkeypatch.setattr(ingest, "_iter_file", rewrite_midway)
    with pytest.raises(SourceError) as raised:
        _loaded(manifest, tmp_path)
    golden.check("load", "a file changed while it is read", str(raised.value))


def _truncate(path: Path, keep: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(keep)


def test_a_shard_cut_short_after_the_fetch_is_named_as_changed(tmp_path, monkeypatch, golden):
    """The second shard truncated while the first is read failed with "Parquet magic bytes not found", no
    file named, and the revision was recorded as a bad dump (issue 38, item 5): it is named as changed since
    it was fetched, with how, and the first shard's rows are not loaded under the revision."""
    import pytest

    from arena_pipeline_dev.fixtures import write_dump

    first, second = write_dump(tmp_path / "dump", n_rows=60, n_shards=2, seed=3)
    manifest = local_manifest(parse_source(str(tmp_path / "dump")))
    size = second.stat().st_size
    real = ingest._iter_file

    def cut_the_next_shard_midway(shard, *args, **kwargs):
        for i, batch in enumerate(real(shard, *args, **kwargs)):
            if shard.path == str(first) and i == 0:
                _truncate(second, size // 3)  # while the first shard is read
            yield batch

    monkeypatch.setattr(ingest, "_iter_file", cut_the_next_shard_midway)
    with pytest.raises(ingest.FileChangedError) as raised:
        _loaded(manifest, tmp_path)
    golden.check("load", "a shard cut short after the fetch", str(raised.value), {f"{size:,}": "<size>",
                                                                                  f"{size // 3:,}": "<a third>"})
    # and the failed load leaves no staging table behind (they stayed, empty, until the next publication)

    with connect_warehouse(str(tmp_path / "load.duckdb"), read_only=True) as con:
        assert con.execute("SELECT schema_name, table_name FROM duckdb_tables()").fetchall() == []


def test_every_read_error_names_the_file(tmp_path, golden):
    """A shard that does not read, and did not change since it was fetched (a manifest without a digest or
    stamp: nothing to compare), fails with its name and the reader's reason; one rewritten with other
    bytes of the same size is named as changed (its digest)."""
    import dataclasses

    import pytest

    from arena_pipeline.core.ingest.sources import SourceError
    from arena_pipeline_dev.fixtures import write_dump

    first, second = write_dump(tmp_path / "dump", n_rows=60, n_shards=2, seed=4)
    manifest = local_manifest(parse_source(str(tmp_path / "dump")))
    size = second.stat().st_size
    second.write_bytes(b"\0" * size)  # same size, other bytes: no parquet footer any more
    with pytest.raises(ingest.FileChangedError) as changed:
        _loaded(manifest, tmp_path)
    golden.check("load", "a shard rewritten with other bytes: its digest", _undigested(str(changed.value)))
    unknown = dataclasses.replace(manifest, files=tuple(dataclasses.replace(f, sha256=None, stamp=None)
                                                        for f in manifest.files))
    (tmp_path / "load.duckdb").unlink(missing_ok=True)
    with pytest.raises(SourceError) as raised:
        _loaded(unknown, tmp_path)
    assert not isinstance(raised.value, ingest.FileChangedError)
    said = str(raised.value)  # the file, then pyarrow's reason (its words vary with its version), then the outcome
    golden.check("load", "a shard that does not read", said.partition(" (Arrow")[0] + " ... " + said.rpartition("; ")[2])
    assert "magic bytes" in said
