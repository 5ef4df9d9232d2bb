"""Configurable resources: where the dump comes from (Hub or local) and the DuckDB warehouse.

Every field may be set explicitly (tests do) or left unset, in which case it is resolved when the
resource is used, at run time, from its environment variable and then from its documented default.
Dagster's ``EnvVar`` has no default and fails a run when the variable is unset, so it is used for
the variables that are required when present (see ``definitions.py``) and not for these optional
settings. Nothing here reads the environment at import time.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import dagster as dg
import duckdb
import polars as pl
from pydantic import Field

from arena_pipeline.constants import (
    DATASET_ID,
    DEFAULT_CACHE_DIR,
    DEFAULT_REPORT_PATH,
    DEFAULT_REVISION,
    DEFAULT_WAREHOUSE,
)
from arena_pipeline.core import hub, warehouse
from arena_pipeline.core.external import load_category_map, read_published_board
from arena_pipeline.core.ingest import DumpManifest, ShardFile, local_files, local_fingerprint, local_manifest
from arena_pipeline.core.models import load_aliases
from arena_pipeline.core.sources import (
    DEFAULT_MAX_CELL_BYTES,
    SourceError,
    SourceSpec,
    parse_source,
    verify_shard,
)


def _setting(value: Optional[str], env: str, default: Optional[str]) -> Optional[str]:
    if value not in (None, ""):
        return value
    found = os.environ.get(env)
    return found if found not in (None, "") else default


class DumpSource(dg.ConfigurableResource):
    """The dump to ingest: a Hub dataset pinned to a revision, a local folder, parquet file or CSV export."""

    source: Optional[str] = Field(
        default=None, description=f"ARENA_SOURCE: Hub dataset id or local path (default {DATASET_ID})."
    )
    revision: Optional[str] = Field(
        default=None, description="ARENA_REVISION: Hub branch, tag or commit (default main)."
    )
    cache_dir: Optional[str] = Field(
        default=None, description=f"ARENA_CACHE_DIR: download cache (default {DEFAULT_CACHE_DIR})."
    )
    hf_endpoint: Optional[str] = Field(
        default=None, description="HF_ENDPOINT: Hub base URL (default https://huggingface.co)."
    )
    hf_token: Optional[str] = Field(default=None, description="HF_TOKEN: Hub token (never logged).")
    timeout_s: float = Field(default=30.0, description="Per-request Hub timeout in seconds.")
    attempts: int = Field(default=3, description="Tries per Hub request or file before failing.")
    backoff_s: float = Field(default=1.0, description="First wait after a failed try; doubled after each.")
    csv_max_cell_bytes: Optional[int] = Field(
        default=None,
        description="ARENA_CSV_MAX_CELL_BYTES: a CSV export's cells larger than this are quarantined "
        "unparsed (default 16 MiB).",
    )

    def retry_policy(self) -> hub.RetryPolicy:
        return hub.RetryPolicy(attempts=self.attempts, backoff=self.backoff_s, timeout=self.timeout_s)

    def spec(self) -> SourceSpec:
        """The parsed source."""
        return parse_source(_setting(self.source, "ARENA_SOURCE", DATASET_ID))

    def requested_revision(self) -> str:
        return _setting(self.revision, "ARENA_REVISION", DEFAULT_REVISION)

    def endpoint(self) -> Optional[str]:
        return _setting(self.hf_endpoint, "HF_ENDPOINT", None)

    def _token(self) -> Optional[str]:
        return _setting(self.hf_token, "HF_TOKEN", None)

    def max_cell_bytes(self) -> int:
        """The per-cell limit of a CSV export (field, then ARENA_CSV_MAX_CELL_BYTES, then 16 MiB)."""
        value = _setting(None if self.csv_max_cell_bytes is None else str(self.csv_max_cell_bytes),
                         "ARENA_CSV_MAX_CELL_BYTES", str(DEFAULT_MAX_CELL_BYTES))
        try:
            limit = int(value)
        except ValueError:
            limit = 0
        if limit <= 0:
            # a SourceError: the run fails at once, without the step's retries
            raise SourceError(f"ARENA_CSV_MAX_CELL_BYTES must be a positive number of bytes, got {value!r}")
        return limit

    def cache_root(self) -> Path:
        return Path(_setting(self.cache_dir, "ARENA_CACHE_DIR", DEFAULT_CACHE_DIR))

    def latest_revision(self) -> str:
        """The current revision of the source, cheaply: one Hub API call, or a local file fingerprint."""
        spec = self.spec()
        if spec.kind == "hub":
            return hub.latest_revision(
                spec.location, self.requested_revision(), endpoint=self.endpoint(), token=self._token(),
                retry=self.retry_policy(),
            )
        return local_fingerprint(local_files(spec))

    def fetch(self, revision: Optional[str] = None) -> DumpManifest:
        """Download (Hub, cached by commit sha) or describe in place (local) the dump's files.

        ``revision`` overrides ARENA_REVISION for this call (Hub sources only).
        """
        spec = self.spec()
        if spec.kind != "hub":
            return local_manifest(spec, self.max_cell_bytes() if spec.kind == "csv" else None)
        requested = revision or self.requested_revision()
        result = hub.download_dump(
            spec.location,
            requested,
            self.cache_root(),
            endpoint=self.endpoint(),
            token=self._token(),
            verify=verify_shard,
            retry=self.retry_policy(),
        )
        files = tuple(ShardFile(str(f.local_path), f.path, f.size, f.rows, f.sha256) for f in result.files)
        return DumpManifest("hub", spec.location, requested, result.sha, files)


class Warehouse(dg.ConfigurableResource):
    """The DuckDB file the tables are published to (schema ``arena``)."""

    path: Optional[str] = Field(
        default=None, description=f"ARENA_WAREHOUSE: DuckDB file (default {DEFAULT_WAREHOUSE})."
    )
    lock_timeout_s: float = Field(default=120.0, description="How long to wait for another process's lock.")
    memory_limit: Optional[str] = Field(
        default="4GB", description="DuckDB buffer-pool cap per connection (DuckDB's own default: 80% of RAM)."
    )
    retention: int = Field(
        default=5, description="How many published dumps keep their leaderboards in the *_history views."
    )

    def database(self) -> str:
        return _setting(self.path, "ARENA_WAREHOUSE", DEFAULT_WAREHOUSE)

    @contextmanager
    def connection(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived connection; waits (bounded) for a lock held by another process."""
        database = self.database()
        if not read_only:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        con = warehouse.connect(database, read_only=read_only, timeout_s=self.lock_timeout_s,
                                memory_limit=self.memory_limit)
        try:
            yield con
        finally:
            con.close()


class ModelCatalog(dg.ConfigurableResource):
    """Model identity: the alias table used to normalize names, and a published board to compare with."""

    aliases_path: Optional[str] = Field(
        default=None,
        description="ARENA_MODEL_ALIASES: a CSV (alias,canonical[,provider]) merged over the packaged "
        "arena_pipeline/data/model_aliases.csv.",
    )
    published_board: Optional[str] = Field(
        default=None,
        description="ARENA_PUBLISHED_BOARD: a published leaderboard file (LMArena JSON or CSV) to compare with.",
    )

    def aliases(self) -> pl.DataFrame:
        """The merged alias table."""
        return load_aliases(_setting(self.aliases_path, "ARENA_MODEL_ALIASES", None))

    def board_path(self) -> Optional[str]:
        return _setting(self.published_board, "ARENA_PUBLISHED_BOARD", None)

    def read_board(self, aliases: pl.DataFrame) -> Optional[pl.DataFrame]:
        """The published board, or None when none is configured (BoardFormatError if malformed)."""
        path = self.board_path()
        return None if path is None else read_published_board(path, aliases=aliases, category_map=load_category_map())


class ReportSettings(dg.ConfigurableResource):
    """Where the static HTML report is written."""

    report_path: Optional[str] = Field(
        default=None, description=f"ARENA_REPORT: the report's HTML file (default {DEFAULT_REPORT_PATH})."
    )

    def path(self) -> Path:
        return Path(_setting(self.report_path, "ARENA_REPORT", DEFAULT_REPORT_PATH))
