"""What a fetched dump is: its source, resolved revision and files (one type for Hub and local dumps)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ShardFile:
    """One file of a dump as fetched.

    ``path`` is where the file is on disk (for a Hub dump, the snapshot entry in the download
    cache); ``name`` is its path inside the dump (``data/train-00000-of-00002.parquet``), the name
    ``arena.battles.source_file`` records.
    """

    path: str
    name: str
    size: int
    rows: int  #: -1 when not counted (a CSV export before parsing)
    sha256: str | None = None
    downloaded: bool = False  #: fetched by this call (False: read in place or from the cache)
    dump: str | None = None  #: the dump (dataset id) of a combined manifest; None: the manifest's source
    #: (size, mtime_ns, ctime_ns, inode) of the file when ``sha256`` was taken (``sources.file_stamp``);
    #: the load re-hashes a file whose stamp differs, or that has none (not part of the file's identity)
    stamp: tuple[int, ...] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class DumpManifest:
    """What the raw-dump asset hands on: the source, its resolved revision and its files."""

    source_kind: str
    source: str
    requested_revision: str
    revision: str
    files: tuple[ShardFile, ...] = field(default_factory=tuple)
    #: Per-cell limit of a CSV export (``ARENA_CSV_MAX_CELL_BYTES``); None: the default.
    csv_max_cell_bytes: int | None = None
    #: A combined manifest's dumps: (dataset id, requested revision, resolved revision), load order.
    parts: tuple[tuple[str, str, str], ...] = ()

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def downloaded(self) -> int:
        """How many files this fetch downloaded (0: everything came from the cache or in place)."""
        return sum(f.downloaded for f in self.files)


def combined_revision(revisions: Mapping[str, str]) -> str:
    """The revision of a list of dumps: ``dumps-`` + 16 hex of sha256 over every ``dataset@revision``
    in load order.

    It changes when any one dataset's revision changes, a dataset joins or leaves the list, or the
    order changes: the order decides which copy of a vote two dumps hold is kept, so two orders are
    two different tables.
    """
    digest = hashlib.sha256("\n".join(f"{d}@{r}" for d, r in revisions.items()).encode())
    return "dumps-" + digest.hexdigest()[:16]


def combine(manifests: Sequence[tuple[str, DumpManifest]]) -> DumpManifest:
    """One manifest over several dumps, in the given order (the order duplicates are resolved in).

    Each file keeps its dump (``ShardFile.dump``) and is named ``<dataset>/<path>``, so
    ``(source_file, source_row)`` stays unique across dumps; the revision is
    :func:`combined_revision` of the dumps' own revisions, which ``parts`` lists.
    """
    files = tuple(dataclasses.replace(f, name=f"{dump}/{f.name}", dump=dump)
                  for dump, manifest in manifests for f in manifest.files)
    parts = tuple((dump, m.requested_revision, m.revision) for dump, m in manifests)
    kinds = {m.source_kind for _, m in manifests}
    limits = [m.csv_max_cell_bytes for _, m in manifests if m.csv_max_cell_bytes is not None]
    return DumpManifest(
        source_kind=kinds.pop() if len(kinds) == 1 else "mixed",
        source=",".join(dump for dump, _ in manifests),
        requested_revision="combined",
        revision=combined_revision({dump: m.revision for dump, m in manifests}),
        files=files,
        csv_max_cell_bytes=limits[0] if limits else None,
        parts=parts,
    )


def manifest_to_json(manifest: DumpManifest) -> str:
    """A manifest as JSON (what a later partial run of the same build or dump reads back)."""
    return json.dumps(dataclasses.asdict(manifest))



def manifest_from_json(text: str | None) -> DumpManifest | None:
    """The manifest stored by ``manifest_to_json`` (None stays None)."""
    if not text:
        return None
    data = json.loads(text)
    files = tuple(ShardFile(**f) for f in data.pop("files", []))
    parts = tuple(tuple(p) for p in data.pop("parts", []))
    return DumpManifest(**data, files=files, parts=parts)
