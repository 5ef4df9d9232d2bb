"""Configurable resources: where the dump comes from (Hub or local) and the DuckDB warehouse.

Every field may be set explicitly (tests do) or left unset, in which case it is resolved when the
resource is used, at run time, from its environment variable and then from its documented default.
Dagster's ``EnvVar`` has no default and fails a run when the variable is unset, so no setting uses
it: every setting is optional. Nothing here reads the environment at import time.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import polars as pl
from dagster_duckdb import DuckDBResource
from pydantic import Field

from arena_pipeline.constants import (
    DATASET_ID,
    DEFAULT_CACHE_DIR,
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_REPORT_PATH,
    DEFAULT_REVISION,
    DEFAULT_WAREHOUSE,
    SCHEMA,
    report_beside,
)
from arena_pipeline.core.dataset.manifest import DumpManifest, combine, combined_revision
from arena_pipeline.core.dataset.models import AliasTableError, load_aliases
from arena_pipeline.core.freshness.freshness import DEFAULT_MAX_AGE_HOURS
from arena_pipeline.core.ingest import hub
from arena_pipeline.core.ingest.local_dump import ContentHashes, local_manifest, local_revision
from arena_pipeline.core.ingest.parallel import MAX_LOAD_WORKERS, MIN_PARALLEL_BYTES, load_workers
from arena_pipeline.core.ingest.sources import (
    DEFAULT_MAX_CELL_BYTES,
    SourceError,
    SourceSpec,
    dump_name,
    hub_not_found_note,
    parse_source,
    verify_file,
)
from arena_pipeline.core.store import snapshot
from arena_pipeline.core.store.connections import ReaderConnection, WorkConnection
from arena_pipeline.core.store.store import Store
from arena_pipeline.core.store.targets import PublicationTarget
from arena_pipeline.core.validation.benchmarks import read_benchmarks
from arena_pipeline.core.validation.external import load_category_map
from arena_pipeline.core.validation.leaderboard_dataset import read_board

#: The range of ``Warehouse.max_publication_age_hours`` (ARENA_MAX_PUBLICATION_AGE_HOURS): 1 minute to
#: 10 years (of 365.25 days). Beyond it the age limit is a typo, not a policy: 1e300 hours overflow a
#: timedelta, 1e8 hours (11,400 years) the date the freshness check subtracts it from, and 1e-300 hours
#: would read as "0 min".
MAX_PUBLICATION_AGE_RANGE_HOURS = (1 / 60, 10 * 365.25 * 24)


def _setting(value: str | None, env: str, default: str | None) -> str | None:
    if value not in (None, ""):
        return value
    found = os.environ.get(env)
    return found if found not in (None, "") else default


@contextmanager
def _hub_not_found_note(spec: SourceSpec) -> Iterator[None]:
    """A Hub "not found" for a bare ``org/name`` source also says no local path of that name exists."""
    try:
        yield
    except hub.HubNotFound as exc:
        note = hub_not_found_note(spec)
        if not note:
            raise
        raise hub.HubNotFound(f"{exc}{note}", path=exc.path) from None


@dataclass(frozen=True)
class HubAccess:
    """How the Hub is reached: the settings :class:`DumpSource` resolves, used by every Hub read."""

    cache_dir: Path
    endpoint: str | None
    token: str | None


class DumpSource(dg.ConfigurableResource):
    """The dump to ingest: a Hub dataset pinned to a revision, a local folder, parquet file or CSV export."""

    source: str | None = Field(
        default=None,
        description=f"ARENA_SOURCE: local path, Hub dataset id or hf://datasets/<org>/<name>[@revision] "
        f"(default {DATASET_ID}).",
    )
    revision: str | None = Field(
        default=None, description="ARENA_REVISION: Hub branch, tag or commit (default main)."
    )
    cache_dir: str | None = Field(
        default=None, description=f"ARENA_CACHE_DIR: download cache (default {DEFAULT_CACHE_DIR})."
    )
    hf_endpoint: str | None = Field(
        default=None, description="HF_ENDPOINT: Hub base URL (default https://huggingface.co)."
    )
    hf_token: str | None = Field(default=None, description="HF_TOKEN: Hub token (never logged).")
    timeout_s: float = Field(default=30.0, description="Per-request Hub timeout in seconds.")
    attempts: int = Field(default=3, description="Tries per Hub request or file before failing.")
    backoff_s: float = Field(default=1.0, description="First wait after a failed try; doubled after each.")
    csv_max_cell_bytes: int | None = Field(
        default=None,
        description="ARENA_CSV_MAX_CELL_BYTES: a CSV export's cells larger than this are quarantined "
        "unparsed (default 16 MiB).",
    )
    datasets: str | None = Field(
        default=None,
        description="ARENA_DATASETS: several dumps loaded together, comma-separated (Hub ids, "
        "hf://datasets/<org>/<name>@<revision> or local paths), in the order a vote two dumps share is "
        "kept in. Unset: the single ARENA_SOURCE.",
    )
    discover: str | None = Field(
        default=None,
        description="ARENA_DISCOVER: also load every Hub dataset whose id matches this pattern, e.g. "
        "lmarena-ai/arena-human-preference-* (huggingface_hub's dataset listing; after ARENA_DATASETS).",
    )

    def retry_policy(self) -> hub.RetryPolicy:
        return hub.RetryPolicy(attempts=self.attempts, backoff=self.backoff_s, timeout=self.timeout_s)

    def spec(self) -> SourceSpec:
        """The parsed source."""
        return parse_source(_setting(self.source, "ARENA_SOURCE", DATASET_ID))

    def requested_revision(self) -> str:
        """ARENA_REVISION, or the revision of an ``hf://datasets/org/name@revision`` source, or main."""
        configured = _setting(self.revision, "ARENA_REVISION", None)
        pinned = self.spec().revision
        if pinned and configured and pinned != configured:
            raise SourceError(f"ARENA_SOURCE pins revision {pinned!r} but ARENA_REVISION is {configured!r}: "
                              "set only one of them")
        return pinned or configured or DEFAULT_REVISION

    def endpoint(self) -> str | None:
        return _setting(self.hf_endpoint, "HF_ENDPOINT", None)

    def _token(self) -> str | None:
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

    def hub_access(self) -> HubAccess:
        """The Hub settings (cache, endpoint, token) for the other Hub reads, e.g. benchmark scores."""
        return HubAccess(self.cache_root(), self.endpoint(), self._token())

    def content_hashes(self) -> ContentHashes:
        """The remembered sha256 of local files (so an unchanged local dump is not re-hashed)."""
        return ContentHashes(self.cache_root() / "local-sha256.json")

    # ------------------------------------------------------------------ several dumps

    def configured_datasets(self) -> list[str]:
        """ARENA_DATASETS as a list (order kept, repeats dropped); [] when unset."""
        value = _setting(self.datasets, "ARENA_DATASETS", None) or ""
        return list(dict.fromkeys(d.strip() for d in value.split(",") if d.strip()))

    def discovery_pattern(self) -> str | None:
        return _setting(self.discover, "ARENA_DISCOVER", None)

    def is_multi(self) -> bool:
        """Whether several dumps are configured (ARENA_DATASETS or ARENA_DISCOVER)."""
        return bool(self.configured_datasets() or self.discovery_pattern())

    def _dataset_spec(self, dataset: str) -> SourceSpec:
        spec = parse_source(dataset)
        if spec.kind == "hub" and spec.revision is None:
            spec = SourceSpec("hub", spec.location, _setting(self.revision, "ARENA_REVISION", None) or DEFAULT_REVISION,
                              spec.explicit)
        return spec

    def named_specs(self) -> dict[str, SourceSpec]:
        """The configured dumps by the name their rows carry (:func:`dump_name`), in load order.

        Raises SourceError when two would carry one name (two local files both called
        ``votes.csv``, or one Hub dataset twice): one would silently replace the other.
        """
        named: dict[str, SourceSpec] = {}
        for dataset in self.configured_datasets():
            spec = self._dataset_spec(dataset)
            name = dump_name(spec.kind, spec.location)
            if name in named:
                raise SourceError(f"ARENA_DATASETS: {named[name].location} and {spec.location} would both be "
                                  f"the dump {name!r} (a local dump is named by its file or folder name, a Hub "
                                  "dump by its id); rename one, or list a Hub dataset once")
            named[name] = spec
        return named

    def _revision_of(self, spec: SourceSpec, revision: str | None) -> str:
        """One dump's current revision: the Hub's commit sha of ``revision``, or a local fingerprint."""
        if spec.kind != "hub":
            return local_revision(spec, self.content_hashes())
        with _hub_not_found_note(spec):
            return hub.resolve_revision(spec.location, revision, endpoint=self.endpoint(), token=self._token(),
                                        retry=self.retry_policy())

    def _manifest_of(self, spec: SourceSpec, revision: str | None) -> DumpManifest:
        """One dump's files: downloaded at ``revision`` (Hub, cached by commit sha), or described in place."""
        if spec.kind != "hub":
            return local_manifest(spec, self.content_hashes(), self.max_cell_bytes() if spec.kind == "csv" else None)
        with _hub_not_found_note(spec):
            return hub.download_dump(spec.location, revision, self.cache_root(), endpoint=self.endpoint(),
                                     token=self._token(), verify=verify_file, retry=self.retry_policy())

    def latest_revisions(self) -> dict[str, str]:
        """Each dump's current revision, by dump (dataset id, or a local file's name), in load order.

        One Hub call per configured Hub dataset (or a local fingerprint) and one listing for
        ARENA_DISCOVER, whose answer carries the discovered datasets' shas.
        """
        out = {name: self._revision_of(spec, spec.revision) for name, spec in self.named_specs().items()}
        pattern = self.discovery_pattern()
        if pattern:
            found = hub.discover_datasets(pattern, endpoint=self.endpoint(), token=self._token(),
                                          retry=self.retry_policy())
            for repo_id, sha in found.items():
                out.setdefault(repo_id, sha)
        if not out:
            raise SourceError(f"no dataset to load: ARENA_DATASETS is empty and ARENA_DISCOVER {pattern!r} "
                              "matched nothing")
        return out

    def _fetch_many(self, revisions: dict[str, str] | None) -> DumpManifest:
        """Fetch every dump (pinned to ``revisions`` where given) and combine them in load order."""
        pinned = dict(revisions or {})
        wanted = list(pinned) if pinned else list(self.latest_revisions())
        configured = self.named_specs()
        parts = []
        for label in wanted:
            spec = configured.get(label) or self._dataset_spec(label)
            parts.append((label, self._manifest_of(spec, pinned.get(label) or spec.revision)))
        return combine(parts)

    def latest_revision(self) -> str:
        """The current revision of the source, cheaply: one Hub API call, or a local file fingerprint.

        With several dumps: :func:`~arena_pipeline.core.dataset.manifest.combined_revision` of each one's.
        """
        if self.is_multi():
            return combined_revision(self.latest_revisions())
        spec = self.spec()
        return self._revision_of(spec, self.requested_revision() if spec.kind == "hub" else None)

    def fetch(self, revision: str | None = None, revisions: dict[str, str] | None = None) -> DumpManifest:
        """Download (Hub, cached by commit sha) or describe in place (local) the dump's files.

        ``revision`` overrides ARENA_REVISION for this call (Hub sources only). With several dumps
        the result is one combined manifest; ``revisions`` pins each dump (what the sensor saw).
        """
        if self.is_multi():
            return self._fetch_many(revisions)
        spec = self.spec()
        return self._manifest_of(spec, (revision or self.requested_revision()) if spec.kind == "hub" else None)


class Warehouse(DuckDBResource):
    """The pipeline's store and what readers read, on dagster-duckdb's resource: the published snapshot
    readers open (``database``, schema ``arena``), the store folder beside it, retention, DuckDB's limits
    and the DuckLake.

    :meth:`store` makes the :class:`Store` these settings describe (``core/store/store.py``). ``connection()`` is its work file (read-write;
    in the store folder, which readers never open; the readers' targets brought level on leaving);
    :meth:`reader` is its readers' entry, the snapshot, which no process ever holds read-write, so it
    never waits on a run. ``DuckDBResource`` gives the ``database`` and ``connection_config`` fields and
    the Dagster resource type; this adds the ARENA_WAREHOUSE fallback resolved at run time.
    """

    database: str | None = Field(  # type: ignore[assignment] - optional here, resolved at run time
        default=None, description=f"ARENA_WAREHOUSE: the DuckDB file readers open, the live publication "
        f"(default {DEFAULT_WAREHOUSE}); the pipeline never opens it read-write."
    )
    store_dir: str | None = Field(
        default=None, description="ARENA_STORE_DIR: the pipeline's own folder: its work file (work.duckdb) "
        "and the Parquet files of the published vote tables (default: '<warehouse name>.pipeline' beside "
        "ARENA_WAREHOUSE). Keep it on the same file system as the warehouse.",
    )
    keep_revisions: int = Field(
        default=2, ge=0, le=100,
        description="How many dump revisions beyond the live one keep their vote tables' Parquet files (a "
        "reader holding an older snapshot open keeps reading them).",
    )
    keep_publications: int = Field(
        default=3, ge=0, le=1000,
        description="How many publications before the live one keep their vote tables' Parquet files, whatever "
        "their revision (a connection opened on one of them keeps reading it; after that it must reconnect).",
    )
    lock_timeout_s: float = Field(default=120.0, description="How long to wait for another process's lock.")
    memory_limit: str | None = Field(
        default=DEFAULT_MEMORY_LIMIT,
        description="DuckDB's memory cap per connection (its buffer pool: tables being written, joins, "
        "aggregations; beyond it DuckDB spills to temp_directory). With the ingest batch it sets the "
        "refresh's peak memory, whatever the dump's size (docs/scaling.md). DuckDB's own default: 80% of RAM.",
    )
    temp_directory: str | None = Field(
        default=None,
        description="Where DuckDB spills what does not fit in memory_limit (default: DuckDB's, "
        "'<warehouse>.tmp' beside the file).",
    )
    load_workers: int | None = Field(
        default=None, ge=0, le=MAX_LOAD_WORKERS,
        description=f"ARENA_LOAD_WORKERS: worker processes that flatten a dump of several parquet shards (default "
        f"0: one per core, at most {MAX_LOAD_WORKERS}, and one process for a dump under "
        f"{MIN_PARALLEL_BYTES // 2**20} MiB; 1: the load in one process). Each holds a batch of votes and its "
        "libraries (about 700 MiB at peak), so the load's memory is this many batches, whatever the dump's size.",
    )
    retention: int = Field(
        default=5, ge=1, description="How many publications keep their leaderboards in the *_history views."
    )
    stale_build_hours: float = Field(
        default=24.0, gt=0,
        description="A run that never finished (killed) keeps its unpublished tables this long before a "
        "publication drops them (runs known to the Dagster instance as finished are cleaned at once).",
    )

    ducklake: str | None = Field(
        default=None,
        description="ARENA_DUCKLAKE: a DuckLake to publish to as well, its attach string (e.g. 'ducklake:postgres:"
        "dbname=arena host=127.0.0.1 port=5432 user=arena'); each publication is one DuckLake transaction "
        "(core/store/lake.py, docs/reading.md). Unset: the snapshot file only. Needs the [lake] extra.",
    )
    ducklake_data_path: str | None = Field(
        default=None,
        description="ARENA_DUCKLAKE_DATA_PATH: the DuckLake's data path, a folder or an object-storage URL (needed "
        "when the lake is created; afterwards its catalog records it).",
    )
    ducklake_cleanup_after_s: float = Field(
        default=3600.0, ge=0,
        description="Files of the DuckLake snapshots retention expired are deleted once they were scheduled for "
        "deletion this long ago (a reader may still be scanning them).",
    )

    max_publication_age_hours: float | None = Field(
        default=None, gt=0,
        description="ARENA_MAX_PUBLICATION_AGE_HOURS: the live publication (arena.publications.published_at) "
        f"older than this fails the publication_age check (default {DEFAULT_MAX_AGE_HOURS:g}: a week).",
    )

    def database_path(self) -> str:
        """The readers' snapshot file (ARENA_WAREHOUSE)."""
        return _setting(self.database, "ARENA_WAREHOUSE", DEFAULT_WAREHOUSE)

    def store_path(self) -> Path:
        """The pipeline's own folder (ARENA_STORE_DIR, else beside the snapshot)."""
        configured = _setting(self.store_dir, "ARENA_STORE_DIR", None)
        return Path(configured) if configured else snapshot.store_folder(self.database_path())

    def work_path(self) -> str:
        """The pipeline's work file (read-write, never opened by readers)."""
        return str(self.store_path() / snapshot.WORK_FILE)

    def store(self) -> Store:
        """The store these settings describe (``core/store/store.py``): its work file, its targets, its readers' entry."""
        return Store(Path(self.database_path()), self.store_path(), SCHEMA, keep_revisions=self.keep_revisions,
                     keep_publications=self.keep_publications, retention=self.retention,
                     lock_timeout_s=self.lock_timeout_s, memory_limit=self.memory_limit,
                     temp_directory=self.temp_directory, settings=self.duckdb_settings(),
                     lake_attach=_setting(self.ducklake, "ARENA_DUCKLAKE", None),
                     lake_data_path=_setting(self.ducklake_data_path, "ARENA_DUCKLAKE_DATA_PATH", None),
                     lake_cleanup_after_s=self.ducklake_cleanup_after_s)

    def targets(self, file_tables: Iterable[str] | None = None) -> list[PublicationTarget]:
        """Where publications go (``Store.targets``): the readers' snapshot file, and the DuckLake when
        ARENA_DUCKLAKE is set."""
        return self.store().targets(file_tables)

    def load_processes(self, manifest: DumpManifest) -> int:
        """The worker processes of ``manifest``'s load (field, then ARENA_LOAD_WORKERS, then 0: automatic).

        Raises SourceError (the run fails at once, without retries) for a value that is not a whole number
        from 0 to :data:`MAX_LOAD_WORKERS`.
        """
        value = _setting(None if self.load_workers is None else str(self.load_workers), "ARENA_LOAD_WORKERS", "0")
        try:
            workers = int(value)
        except ValueError:
            workers = -1
        if not 0 <= workers <= MAX_LOAD_WORKERS:
            raise SourceError(f"ARENA_LOAD_WORKERS must be a whole number from 0 to {MAX_LOAD_WORKERS}, got {value!r}")
        if workers == 0 and sum(f.size for f in manifest.files) < MIN_PARALLEL_BYTES:
            return 1
        return load_workers(workers or None)

    def max_publication_age(self) -> dt.timedelta:
        """How old the live publication may be (field, then ARENA_MAX_PUBLICATION_AGE_HOURS, then a week).

        Raises ValueError for a value that is not a positive number of hours, or is outside
        :data:`MAX_PUBLICATION_AGE_RANGE_HOURS` (1 minute to 10 years), rather than guessing.
        """
        configured = None if self.max_publication_age_hours is None else str(self.max_publication_age_hours)
        value = _setting(configured, "ARENA_MAX_PUBLICATION_AGE_HOURS", str(DEFAULT_MAX_AGE_HOURS))
        try:
            hours = float(value)
        except ValueError:
            hours = float("nan")
        if not hours > 0 or hours == float("inf"):
            raise ValueError(f"ARENA_MAX_PUBLICATION_AGE_HOURS must be a positive number of hours, got {value!r}")
        low, high = MAX_PUBLICATION_AGE_RANGE_HOURS
        if not low <= hours <= high:  # 1e300 overflows a timedelta; 1e8 hours, the date it is subtracted from
            raise ValueError(f"ARENA_MAX_PUBLICATION_AGE_HOURS must be from 1 minute to 10 years ({low:.4g} to "
                             f"{high:g} hours), got {value!r}")
        return dt.timedelta(hours=hours)

    def duckdb_settings(self) -> dict:
        """DuckDB settings of every connection: ``connection_config`` over the bounded-memory defaults
        (no insertion order kept for results: DuckDB then streams large writes instead of buffering)."""
        settings = {"preserve_insertion_order": False}
        if self.temp_directory:
            settings["temp_directory"] = self.temp_directory
        return {**settings, **(self.connection_config or {})}

    @contextmanager
    def get_connection(self) -> Iterator[WorkConnection]:
        """A short-lived read-write connection to the work file (``Store.work``: a bounded wait for another
        pipeline process's lock; the readers' targets brought level on leaving). Readers open
        :meth:`reader`, never this."""
        with self.store().work() as con:
            yield con

    connection = get_connection

    def reader(self, *, timeout_s: float | None = None) -> ReaderConnection:
        """A read-only connection to the live publication of the readers' snapshot (``Store.reader``; an
        empty in-memory database while nothing is published: every relation is missing)."""
        return self.store().reader(timeout_s=timeout_s)

    def check_readers_file(self) -> None:
        """Refuse, before a run does any work, a readers' file this store may not replace (``Store.check_readers_file``)."""
        self.store().check_readers_file()

    def files_path(self) -> Path:
        """The store's folder of Parquet files: the vote tables' versions (core/store/versions.py)."""
        return self.store().files_path

    def bring_readers_level(self) -> int | None:
        """``Store.bring_readers_level``: the sensor and the schedule call it at every tick; never raises."""
        return self.store().bring_readers_level()


class ModelCatalog(dg.ConfigurableResource):
    """Model identity: the alias table used to normalize names, and the boards and benchmarks to compare with."""

    aliases_path: str | None = Field(
        default=None,
        description="ARENA_MODEL_ALIASES: a CSV (alias,canonical[,provider]) merged over the packaged "
        "arena_pipeline/data/model_aliases.csv.",
    )
    published_board: str | None = Field(
        default=None,
        description="ARENA_PUBLISHED_BOARD: a published leaderboard to compare with: a file (LMArena JSON or CSV), "
        "or LMArena's ratings history (lmarena-ai/leaderboard-dataset's layout): its Hub id, "
        "hf://datasets/lmarena-ai/leaderboard-dataset@<revision>, a local copy's folder or one of its parquet files.",
    )

    align_to_published_board: bool | None = Field(
        default=None,
        description="ARENA_ALIGN_TO_PUBLISHED_BOARD: 'true' shifts each board of arena.leaderboard onto the "
        "scale of ARENA_PUBLISHED_BOARD's board of the same category and method (median difference over the "
        "matched shown models made zero; ratings and intervals move together; ranks do not). Off by default.",
    )
    published_board_date: str | None = Field(
        default=None,
        description="ARENA_PUBLISHED_BOARD_DATE: the date the published board was taken (free text, e.g. "
        "2025-11-05), shown beside an aligned board; for the ratings history, the release to read (YYYY-MM-DD; "
        "unset: the one nearest the dump's last vote).",
    )

    benchmarks: str | None = Field(
        default=None,
        description="ARENA_BENCHMARKS: benchmark scores to compare with: a CSV or parquet file (long "
        "'model,benchmark,score', wide 'model,<benchmark>...', or the Open LLM Leaderboard's layout) or a "
        "Hub dataset id such as open-llm-leaderboard/contents (fetched through HF_ENDPOINT into ARENA_CACHE_DIR).",
    )

    def aliases(self) -> pl.DataFrame:
        """The merged alias table."""
        return load_aliases(_setting(self.aliases_path, "ARENA_MODEL_ALIASES", None))

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Check the alias file when the run starts (a missing or malformed one failed the load step,
        half a minute in, inside a traceback): one line naming the setting and the file. So is the
        alignment switch (ARENA_ALIGN_TO_PUBLISHED_BOARD)."""
        try:
            self.align_to_board()
        except ValueError as exc:
            raise dg.Failure(description=str(exc), allow_retries=False) from None
        path = _setting(self.aliases_path, "ARENA_MODEL_ALIASES", None)
        if path is None:
            return
        where = "ModelCatalog.aliases_path" if self.aliases_path not in (None, "") else "ARENA_MODEL_ALIASES"
        if not Path(path).is_file():
            raise dg.Failure(description=f"{where} is {path!r}, which is not a file: give the path of a CSV "
                             "'alias,canonical[,provider]' or leave it unset", allow_retries=False)
        try:
            self.aliases()
        except (AliasTableError, OSError, ValueError) as exc:
            raise dg.Failure(description=f"{where} ({path}): {exc}", allow_retries=False) from None

    def board_path(self) -> str | None:
        return _setting(self.published_board, "ARENA_PUBLISHED_BOARD", None)

    def read_board(self, aliases: pl.DataFrame, hub_access: HubAccess,
                   last_vote: dt.datetime | dt.date | None = None) -> tuple[pl.DataFrame, dict] | None:
        """The published board and what identifies it (``sha256``; for the ratings history also ``board_date``, the
        publication read, and ``history``: files, Hub commit, how the date was chosen), or None when none is
        configured.

        ``core.validation.leaderboard_dataset.read_board``: the ratings history is read from the Hub with
        ``hub_access`` (the run's one set of Hub settings) or from a local copy, at ARENA_PUBLISHED_BOARD_DATE's
        publication, else the one nearest ``last_vote``; any other location is a JSON or CSV file. Raises
        BoardFormatError (a Hub that does not serve it included) or FileNotFoundError.
        """
        location = self.board_path()
        if location is None:
            return None
        return read_board(location, aliases, load_category_map(), publish_date=self.board_date(), near=last_vote,
                          cache_dir=hub_access.cache_dir, endpoint=hub_access.endpoint, token=hub_access.token)

    def align_to_board(self) -> bool:
        """Whether the boards are to be aligned to the published board (ARENA_ALIGN_TO_PUBLISHED_BOARD).

        Raises ValueError for a value that is not a yes/no word, rather than guessing.
        """
        if self.align_to_published_board is not None:
            return self.align_to_published_board
        value = (_setting(None, "ARENA_ALIGN_TO_PUBLISHED_BOARD", "false") or "false").strip().lower()
        if value in ("1", "true", "yes", "on"):
            return True
        if value in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"ARENA_ALIGN_TO_PUBLISHED_BOARD must be true or false, got {value!r}")

    def board_date(self) -> str | None:
        return _setting(self.published_board_date, "ARENA_PUBLISHED_BOARD_DATE", None)

    def benchmarks_location(self) -> str | None:
        return _setting(self.benchmarks, "ARENA_BENCHMARKS", None)

    def read_benchmarks(self, aliases: pl.DataFrame, hub_access: HubAccess) -> pl.DataFrame | None:
        """The benchmark scores (``core.validation.benchmarks.READ_SCHEMA``), or None when none are configured.

        A Hub id is fetched with ``hub_access`` (``DumpSource.hub_access()``: the run's one set of Hub
        settings). Raises BenchmarkFormatError (file and line), FileNotFoundError or a ``core.ingest.hub`` error.
        """
        location = self.benchmarks_location()
        if location is None:
            return None
        return read_benchmarks(location, aliases, cache_dir=hub_access.cache_dir, endpoint=hub_access.endpoint,
                               token=hub_access.token)


class ReportSettings(dg.ConfigurableResource):
    """Where the static HTML report is written."""

    report_path: str | None = Field(
        default=None, description="ARENA_REPORT: the report's HTML file (default: beside the warehouse, "
        f"report/index.html for warehouse.duckdb ({DEFAULT_REPORT_PATH} for the default one), report/<name>.html "
        "for <name>.duckdb)."
    )

    def path(self, warehouse: str | None = None) -> Path:
        """The report file: ARENA_REPORT, else :func:`report_beside` the warehouse (``warehouse``, the
        Warehouse resource's file; else ARENA_WAREHOUSE or its default), so two warehouses never share one."""
        configured = _setting(self.report_path, "ARENA_REPORT", None)
        return Path(configured) if configured else report_beside(
            warehouse or _setting(None, "ARENA_WAREHOUSE", DEFAULT_WAREHOUSE))
