"""The load on every core: the dump's shards flattened by worker processes, each writing its own part files."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from arena_pipeline.core.dataset.adapters import ARENA_140K
from arena_pipeline.core.dataset.manifest import DumpManifest, ShardFile
from arena_pipeline.core.dataset.quarantine import split_quarantine
from arena_pipeline.core.ingest import load
from arena_pipeline.core.ingest.tables import Batch, LoadTable

#: Worker processes of a load at most (each holds a batch: ``load.BATCH_ROWS`` votes, ~400 MB at peak on the
#: real dump, so the load's memory is bounded by this and the batch, never by the dump's size).
MAX_LOAD_WORKERS = 4
#: Part files a shard's worker may number (each job numbers its own range: names unique in every folder).
_PARTS_PER_JOB = 100_000


def load_workers(workers: int | None = None) -> int:
    """The worker processes of a load: ``workers``, or the cores this process may use, at most
    :data:`MAX_LOAD_WORKERS`."""
    if workers is not None:
        return max(1, workers)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_LOAD_WORKERS))


def parallel_shards(manifest: DumpManifest, workers: int) -> bool:
    """Whether a load of ``manifest`` runs in worker processes: several workers and several files, every
    file a parquet shard of the card's format (other formats, read whole, load in this process)."""
    if workers < 2 or len(manifest.files) < 2:
        return False
    try:
        return all(Path(shard.path).suffix.lower() == ".parquet"
                   and load.file_adapter(Path(shard.path)) is ARENA_140K for shard in manifest.files)
    except Exception:  # a file that cannot be read now: the sequential load names it
        return False


@dataclass(frozen=True)
class ShardJob:
    """One shard for a worker: phase 1 writes the rows of its votes whose id no other row has and hands the
    others back (``repeated``); phase 2 (``only``: kept battles of those votes) writes theirs."""

    shard: ShardFile
    number: int
    dump: str
    revision: str
    aliases: pl.DataFrame | None
    folders: Mapping[str, Path]
    schemas: Mapping[str, Mapping]
    tables: tuple[LoadTable, ...]
    several_dumps: bool
    batch_rows: int = load.BATCH_ROWS
    repeated: pl.DataFrame | None = None
    only: pl.DataFrame | None = None
    phase: int = 1


@dataclass
class ShardResult:
    """What a worker hands back: battle-level rows only (no texts)."""

    number: int
    rows_read: int = 0
    format: str = ""
    kept: list[pl.DataFrame] = field(default_factory=list)
    quarantine: list[pl.DataFrame] = field(default_factory=list)
    deferred: list[pl.DataFrame] = field(default_factory=list)
    keys: list[pl.DataFrame] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    parts: int = 0


def _write_batch(job: ShardJob, parts: load._Parts, result: ShardResult, table, battles: pl.DataFrame,
                 keep: pl.Series) -> None:
    """Write the tables made batch by batch for the ``keep`` rows of ``table`` (``battles``: their kept rows)."""
    frame = pl.from_arrow(load._filtered(table, keep) if not keep.all() else table)
    if job.several_dumps:
        result.keys.append(battles.select("id", "dump", "source_file", "source_row").with_columns(
            load._content_key(battles, frame), _file=pl.lit(job.number)))
    batch = Batch(frame, battles, job.dump, job.revision)
    for item in job.tables:
        if item.keyed_by_battle:
            result.rows[item.name] = result.rows.get(item.name, 0) + parts.append(item.name, item.batch(batch))


def flatten_shard(job: ShardJob) -> ShardResult:
    """Read, screen and flatten one shard in a worker process (see :func:`fill_parallel`)."""
    shard, result = job.shard, ShardResult(job.number)
    load.BATCH_ROWS = job.batch_rows  # this process loads one shard at a time: the load's batch size
    stamp = load.content_unchanged(shard)
    try:
        adapter = load.file_adapter(Path(shard.path))
    except Exception as exc:
        raise (load.read_failure(shard, exc) or exc) from exc
    result.format = adapter.name
    parts = load._Parts(job.folders, job.schemas, first=(2 * job.number + job.phase) * _PARTS_PER_JOB)
    for number, (table, battles, unparsed) in enumerate(
            load._read_file(shard, job.aliases, None, job.dump, adapter)):
        result.rows_read += battles.height + unparsed.height
        if job.only is not None:
            keep = battles.get_column("source_row").is_in(job.only.get_column("source_row").implode())
            if keep.any():
                kept = battles.filter(keep).select("source_row").join(job.only, on="source_row", how="left",
                                                                       maintain_order="left")
                _write_batch(job, parts, result, table, kept, keep)
            continue
        result.quarantine.append(unparsed)
        deferred = battles.get_column("id").is_in(job.repeated.get_column("id").implode()).fill_null(False)
        if deferred.any():
            result.deferred.append(battles.filter(deferred).with_columns(_batch=pl.lit(number)))
        clean, rejected = split_quarantine(battles.filter(~deferred), adapter.unavailable)
        result.quarantine.append(rejected)
        result.kept.append(clean.with_columns(_file=pl.lit(job.number)))
        keep = battles.get_column("source_row").is_in(clean.get_column("source_row").implode())
        _write_batch(job, parts, result, table, clean, keep)
    if load.file_stamp(shard.path) != stamp:
        change = load.file_change(shard)
        raise load.changed_error(shard, "modified while it was read" + (f": {change}" if change else ""))
    result.parts = max(parts.written.values(), default=0)
    return result


def _repeated_ids(manifest: DumpManifest) -> pl.DataFrame | None:
    """The ids more than one row of the dump's shards has (read from the ``id`` column alone): their votes are
    screened in load order by the main process; every other vote is decided by its own row. None when a
    shard's ids cannot be read (the load then runs in this process, and fails as it does there)."""
    try:
        ids = [pl.from_arrow(pq.read_table(shard.path, columns=["id"])).select(pl.col("id").cast(pl.String))
               for shard in manifest.files]
    except Exception:
        return None
    return pl.concat(ids).drop_nulls().group_by("id").len().filter(pl.col("len") > 1).select("id")


def _run(jobs: Iterable[ShardJob], workers: int) -> list[ShardResult]:
    """Run ``jobs`` in ``workers`` processes (forkserver: Dagster's and DuckDB's threads make fork unsafe);
    the first failure is raised as the worker raised it, once every running job has stopped."""
    context = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                                          else "spawn")
    if context.get_start_method() == "forkserver":
        context.set_forkserver_preload([__name__])
    jobs = list(jobs)
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context) as pool:
        futures: list[Future] = [pool.submit(flatten_shard, job) for job in jobs]
        wait(futures, return_when=FIRST_EXCEPTION)
        failed = [f for f in futures if f.done() and f.exception() is not None]
        if failed:
            for future in futures:
                future.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
            raise failed[0].exception()
        return [future.result() for future in futures]


def _replay(results: list[ShardResult], jobs: list[ShardJob], screened: load._Accumulated) -> pl.DataFrame:
    """Screen the votes of repeated ids batch by batch in load order, as the sequential load does
    (``load._same_id_elsewhere``, ``load._screen``); return their kept battles (with ``_file``)."""
    earlier: list[pl.DataFrame] = []
    files: list[int] = []
    for result, job in zip(results, jobs, strict=True):
        if not result.deferred:
            continue
        optional = load.file_adapter(Path(job.shard.path)).unavailable
        rows = pl.concat(result.deferred)
        for (_,), batch in rows.group_by("_batch", maintain_order=True):
            battles, repeated, seen_in = load._same_id_elsewhere(batch.drop("_batch"), earlier, job.dump, optional)
            clean, rejected = load._screen(battles, earlier, optional)
            screened.quarantine.append(rejected)
            screened.cross.append(repeated)
            screened.pairs.append(seen_in)
            earlier.append(clean)
            files.append(job.number)
    return (pl.concat([part.with_columns(_file=pl.lit(number)) for part, number in zip(earlier, files, strict=True)])
            if earlier else pl.DataFrame())


def fill_parallel(manifest: DumpManifest, stages: load._Parts, aliases: pl.DataFrame | None, report: load.LoadReport,
                  when_read: Callable[[], None] | None, tables: tuple[LoadTable, ...], workers: int) -> None:
    """Write the part files of ``manifest``'s shards in ``workers`` processes, the same rows as the sequential
    load (``load._fill_parts``).

    The screening is sequential (a vote's later copies lose to its first clean copy, across files and
    dumps): the ``id`` column of every shard is read first (a column alone), and a vote whose id no other
    row has is decided by its own row, in its worker, which writes its messages, context messages and
    pairs at once. The votes of a repeated id come back (battle columns only) and are screened here, batch
    by batch in load order; the workers then write the rows of those kept (their shards read again: none
    in the real dump). Battles and quarantine are written last, here, as by the sequential load.
    """
    several_dumps = len({load.dump_label(manifest, shard) for shard in manifest.files}) > 1
    folders = {t.name: stages.folders[t.name] for t in tables if t.keyed_by_battle}
    schemas = {name: stages.schemas[name] for name in folders}
    repeated = _repeated_ids(manifest)
    if repeated is None:
        load._fill_parts(manifest, stages, aliases, report, when_read, tables)
        return
    jobs = [ShardJob(shard, number, load.dump_label(manifest, shard), manifest.revision, aliases, folders, schemas,
                     tables, several_dumps, load.BATCH_ROWS, repeated=repeated)
            for number, shard in enumerate(manifest.files)]
    results = _run(jobs, workers)
    screened = load._Accumulated()
    for result, job in zip(results, jobs, strict=True):
        screened.formats.setdefault(job.dump, result.format)
        screened.quarantine += result.quarantine
        report.rows_read += result.rows_read
        report.per_file.append({"file": job.shard.name, "rows": result.rows_read, "dump": job.dump,
                                "format": result.format})
    kept = _replay(results, jobs, screened)
    later = []
    if kept.height:
        later = [ShardJob(job.shard, job.number, job.dump, job.revision, aliases, folders, schemas, tables,
                          several_dumps, load.BATCH_ROWS, only=kept.filter(pl.col("_file") == job.number).drop("_file"), phase=2)
                 for job in jobs if kept.filter(pl.col("_file") == job.number).height]
    finished = results + (_run(later, workers) if later else [])
    if when_read is not None:
        when_read()
    order = ["_file", "source_row"]
    report.rows = dict.fromkeys((t.name for t in tables), 0)
    for result in finished:
        for name, rows in result.rows.items():
            report.rows[name] += rows
    for name in folders:  # every part file of the workers counts (a table without any gets an empty one)
        stages.written[name] += sum(1 for _ in stages.folders[name].glob(load.PART_GLOB))
    battles = [part for result in results for part in result.kept] + ([kept] if kept.height else [])
    screened.kept = [pl.concat(battles, how="vertical_relaxed").sort(order).drop("_file")] if battles else []
    keys = [part for result in finished for part in result.keys]
    if keys:
        screened.keys = [pl.concat(keys).sort(order).drop("_file")]
    load._finish(stages, report, screened, tables)
