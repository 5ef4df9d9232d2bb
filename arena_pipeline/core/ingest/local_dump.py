"""A local dump described in place: its files, their remembered sha256 and its content revision."""

from __future__ import annotations

import hashlib
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from arena_pipeline.core.dataset.manifest import DumpManifest, ShardFile
from arena_pipeline.core.ingest.sources import (
    SourceSpec,
    csv_row_count,
    file_sha256,
    file_stamp,
    local_shards,
    single_format,
    verify_shard,
)
from arena_pipeline.core.store.atomic import write_text_atomic

_SHA256 = re.compile(r"[0-9a-f]{64}")


def remembered_digest(entry: object, stamp: tuple[int, ...]) -> str | None:
    """The sha256 an entry of the cache file remembers, if it may be used for a file whose stamp is ``stamp``.

    The cache file is read, not trusted: an entry is used only when it is an object whose ``size`` and
    ``mtime_ns`` are the file's size and modification time now, whose ``stamp`` is the file's whole stamp
    (``sources.file_stamp``: size, mtime, ctime, inode) and whose ``sha256`` is 64 lower-case hex digits.
    Anything else (another shape, a changed file, a damaged digest) is None: the file is hashed again.
    """
    if not isinstance(entry, dict):
        return None
    digest = entry.get("sha256")
    if entry.get("size") != stamp[0] or entry.get("mtime_ns") != stamp[1] or entry.get("stamp") != list(stamp):
        return None
    return digest if isinstance(digest, str) and _SHA256.fullmatch(digest) else None


class ContentHashes:
    """sha256 of local files, remembered by (path, size, mtime, ctime, inode) in a JSON file.

    The status-change time (ctime) cannot be set back by a program, so rewriting a file in place
    with its old size and modification time still invalidates its entry; an unchanged dump costs
    no re-hash. Each entry is checked against the file before use (:func:`remembered_digest`); a
    file of another shape is ignored (rewritten at the next save). Without a ``path`` nothing is
    remembered.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._entries: dict[str, dict] = {}
        self._dirty = False
        if path is not None and path.is_file():
            try:
                entries = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                entries = {}
            self._entries = entries if isinstance(entries, dict) else {}

    def stamped(self, path: Path) -> tuple[str, tuple[int, ...]]:
        """(sha256, the file's stamp when it was taken: ``sources.file_stamp``)."""
        key = str(path.resolve())
        stamp = file_stamp(path)
        digest = remembered_digest(self._entries.get(key), stamp)
        if digest is not None:
            return digest, stamp
        digest = file_sha256(path)
        if file_stamp(path) == stamp:  # not changed while it was read
            self._entries[key] = {"size": stamp[0], "mtime_ns": stamp[1], "stamp": list(stamp), "sha256": digest}
            self._dirty = True
        return digest, stamp

    def stamped_all(self, paths: list[Path]) -> list[tuple[str, tuple[int, ...]]]:
        """:meth:`stamped` of each path, in order; files not remembered are hashed on every core at once
        (hashlib lets go of the GIL: a new 1.5 GB dump of 8 shards took 1.56 s on one core of this
        2-core machine, about half that on both)."""
        workers = min(len(paths), os.cpu_count() or 1)
        if workers <= 1:
            return [self.stamped(path) for path in paths]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sha256") as pool:
            return list(pool.map(self.stamped, paths))

    def save(self) -> None:
        if self.path is None or not self._dirty:
            return
        write_text_atomic(self.path, json.dumps(self._entries, sort_keys=True))
        self._dirty = False


def content_revision(names_and_digests: list[tuple[str, str]]) -> str:
    """A local dump's revision: 'local-' + 16 hex of sha256 over its files' identities and contents."""
    digest = hashlib.sha256()
    for name, sha in sorted(names_and_digests):
        digest.update(f"{name}\0{sha}\n".encode())
    return "local-" + digest.hexdigest()[:16]


def _root(spec: SourceSpec) -> Path:
    return Path(spec.location) if spec.kind == "parquet_dir" else Path(spec.location).parent


def local_revision(spec: SourceSpec, hashes: ContentHashes | None = None) -> str:
    """The content-addressed revision of a local source (what the sensor and a manual run agree on)."""
    hashes = hashes or ContentHashes()
    root = _root(spec)
    paths = local_files(spec)
    stamped = hashes.stamped_all(paths)
    revision = content_revision([(_identity(spec, p.relative_to(root)), digest)
                                 for p, (digest, _) in zip(paths, stamped, strict=True)])
    hashes.save()
    return revision


def _identity(spec: SourceSpec, name) -> str:
    """What of a file's name is part of the dump's identity: a shard's relative path (the shard order
    decides which copy of a duplicate is kept), nothing for a single file."""
    return str(name) if spec.kind == "parquet_dir" else ""


def local_files(spec: SourceSpec) -> list[Path]:
    """The files of a local source, in load order."""
    if spec.kind == "parquet_dir":
        return local_shards(Path(spec.location))
    return [Path(spec.location)]


def local_manifest(spec: SourceSpec, hashes: ContentHashes | None = None,
                   csv_max_cell_bytes: int | None = None) -> DumpManifest:
    """Describe a local dump in place (parquet shards are verified against the dataset card); its
    revision comes from the files' content (see ``content_revision``).

    ``csv_max_cell_bytes`` is the per-cell limit used when a CSV export is loaded (None: default).
    """
    hashes = hashes or ContentHashes()
    paths = local_files(spec)
    files = []
    root = _root(spec)
    if spec.kind == "parquet_dir":  # before hashing: a folder of two formats is refused at once
        single_format(root, paths)
    for path, (digest, stamp) in zip(paths, hashes.stamped_all(paths), strict=True):
        rows = verify_shard(path) if path.suffix.lower() == ".parquet" else csv_row_count(path)
        files.append(ShardFile(str(path), str(path.relative_to(root)), stamp[0], rows, digest, stamp=stamp))
    hashes.save()
    revision = content_revision([(_identity(spec, f.name), f.sha256) for f in files])
    return DumpManifest(spec.kind, spec.location, "local", revision, tuple(files), csv_max_cell_bytes)
