"""What a fetched dump is: its source, resolved revision and files (one type for Hub and local dumps)."""

from __future__ import annotations

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
