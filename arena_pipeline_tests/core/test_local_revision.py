"""Content-addressed local revisions: a change in place changes the revision; an unchanged dump is not re-hashed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from arena_pipeline.core import ingest
from arena_pipeline.core.ingest import ContentHashes, local_manifest, local_revision
from arena_pipeline.core.sources import parse_source
from arena_pipeline.resources import DumpSource

REAL_CSV = Path(__file__).parents[1] / "data" / "arena_human_preference_sample_100.csv"


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
    real = ingest.file_sha256
    monkeypatch.setattr(ingest, "file_sha256", lambda p: calls.append(p) or real(p))
    assert local_revision(spec, ContentHashes(cache)) == first
    assert calls == []
    os.utime(dump)  # touched: hashed again, same content, same revision
    assert local_revision(spec, ContentHashes(cache)) == first and len(calls) == 1


def test_sensor_lookup_and_fetch_agree(tmp_path):
    dump = tmp_path / "votes.csv"
    shutil.copy(REAL_CSV, dump)
    source = DumpSource(source=str(dump), cache_dir=str(tmp_path / "cache"))
    assert source.latest_revision() == source.fetch().revision
    renamed = tmp_path / "other.csv"
    shutil.copy(REAL_CSV, renamed)
    # a single file is identified by its content alone: a renamed copy is the same dump
    assert DumpSource(source=str(renamed), cache_dir=str(tmp_path / "cache")).latest_revision() == source.latest_revision()
