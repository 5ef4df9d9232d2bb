"""Fault tolerance of a refresh: kill -9 mid-run, a concurrent reader, a held lock, Hub faults.

Every run materializes the whole graph (``refresh_job``: every asset of ``defs``), so the tests
keep covering assets added later. Subprocesses are started in their own session and stopped by
PID (their process group), whatever happens in the test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest

from arena_pipeline.constants import SCHEMA, VERSIONS_SCHEMA
from arena_pipeline.core.ingest import hub as hub_core
from arena_pipeline.core.store import warehouse as core_warehouse
from arena_pipeline.core.store.snapshot import store_folder
from arena_pipeline.core.store.versions import revision_key
from arena_pipeline.core.store.warehouse import WarehouseLockedError
from arena_pipeline.definitions import CATALOG, defs
from arena_pipeline.resources import DumpSource, Warehouse
from arena_pipeline_dev.fixtures import write_dump
from arena_pipeline_dev.hub_server import fake_hub_server, verified_revisions
from arena_pipeline_tests.support.materialize import copy_warehouse, work_file
from arena_pipeline_tests.support.refresh_worker import no_retries_config, refresh_job, versioned_keys
from arena_pipeline_tests.support.waiting import wait_for

pytestmark = pytest.mark.slow  # subprocesses killed mid-refresh, a fake Hub server, lock holders

REPO_ROOT = Path(__file__).resolve().parents[1]
DAGSTER_YAML = REPO_ROOT / "dagster_home" / "dagster.yaml"
REPO = "lmarena-ai/arena-human-preference-140k"
WORKER = [sys.executable, "-m", "arena_pipeline_tests.support.refresh_worker"]
#: Rows of the published dump the kill and reader tests start from. At least 50 battles per model
#: (rankings' min_battles) for the fixtures' 6 models: an empty leaderboard fails the run.
OLD_ROWS = 200
#: Rows of the dump whose refresh is killed (4 shards: the fill pause comes after the 3rd batch).
KILL_ROWS = 400


# ------------------------------------------------------------------------------------- helpers

def _env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of a worker: no inherited ARENA_*/HF_* settings, a private DAGSTER_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARENA_", "HF_", "DAGSTER_"))}
    home = tmp_path / "dagster_home"
    if not home.exists():
        home.mkdir()
        shutil.copy(DAGSTER_YAML, home / "dagster.yaml")
    env.update(DAGSTER_HOME=str(home), PYTHONUNBUFFERED="1", HF_HUB_DISABLE_TELEMETRY="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    env.update(settings)
    return env


@contextmanager
def _process(args: list[str], env: dict[str, str], log: Path, cwd: Path):
    """Popen in a new session (its own process group); the group is SIGKILLed on exit if alive."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            _killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for(predicate, timeout: float, what: str, interval: float = 0.01):
    return wait_for(predicate, timeout, what, interval)


def _revision(path: Path) -> str:
    return DumpSource(source=str(path)).latest_revision()


@contextmanager
def _hermetic(workdir: Path):
    """No ARENA_* setting from the caller's environment, and ``workdir`` as the working directory:
    whatever a resource writes at its default relative path (data/...) lands in the test's tmp."""
    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith("ARENA_")]:
            mp.delenv(name)
        mp.chdir(workdir)
        yield


def _refresh_in_process(source: DumpSource, database: Path) -> dg.ExecuteInProcessResult:
    """Materialize every asset of refresh_job in this process (step retries as in production)."""
    with _hermetic(database.parent), dg.DagsterInstance.ephemeral() as instance:
        return defs.resolve_job_def("refresh_job").execute_in_process(
            instance=instance,
            resources={"dump_source": source, "warehouse": Warehouse(database=str(database))},
            raise_on_error=False,
        )


def _execute_without_retries(run_config: dict, workdir: Path) -> tuple[bool, list]:
    """refresh_job in process with step retries off; (success, [(step, SerializableErrorInfo)])."""
    with _hermetic(workdir), dg.DagsterInstance.ephemeral() as instance, \
            dg.execute_job(dg.reconstructable(refresh_job), instance, run_config=run_config,
                           raise_on_error=False) as run:
        failures = [(e.step_key, e.step_failure_data.error) for e in run.all_events if e.is_step_failure]
        return run.success, failures


@contextmanager
def _read(database: Path):
    """A read-only connection, waiting (bounded) while a writer holds the file."""
    con = core_warehouse.connect(str(database), read_only=True, timeout_s=30)
    try:
        yield con
    finally:
        con.close()


def _snapshot(database: Path) -> dict:
    """What users see (the readers' file): the published revision(s), and per arena.* view its revision
    key and rows; what the pipeline recorded (its work file): each revision's status and the versions."""
    with _read(work_file(database)) as con:
        statuses = dict(con.execute(f"SELECT revision, status FROM {SCHEMA}.dumps").fetchall())
        versions = sorted(r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = ?", [VERSIONS_SCHEMA]).fetchall())
    with _read(database) as con:
        published = [r[0] for r in con.execute(
            f"SELECT revision FROM {SCHEMA}.dumps WHERE status = 'published'").fetchall()]
        views = {}
        for name, sql in con.execute(
            "SELECT view_name, sql FROM duckdb_views() WHERE schema_name = ? AND NOT internal", [SCHEMA]
        ).fetchall():
            rows = con.execute(f'SELECT count(*) FROM "{SCHEMA}"."{name}"').fetchone()[0]
            views[name] = {"keys": sorted(versioned_keys(sql)), "rows": rows}
    return {"published": published, "statuses": statuses, "views": views, "versions": versions}


def _battle_fingerprint(dump_dir: Path) -> tuple[int, int, str, str]:
    """(rows, distinct source files, min id, max id) that arena.battles must show for a dump."""
    ids = [i for p in sorted(dump_dir.glob("data/*.parquet"))
           for i in pq.read_table(p, columns=["id"]).column("id").to_pylist()]
    return len(ids), len(list(dump_dir.glob("data/*.parquet"))), min(ids), max(ids)


def _assert_published(database: Path, revision: str, battles: int) -> dict:
    snap = _snapshot(database)
    assert snap["published"] == [revision]
    assert set(CATALOG.published) <= set(snap["views"])
    for table in CATALOG.published:
        assert snap["views"][table]["keys"] == [revision_key(revision)], (table, snap["views"][table])
    assert snap["views"]["battles"]["rows"] == battles
    return snap


@pytest.fixture(scope="module")
def published_old(tmp_path_factory) -> dict:
    """A warehouse with one published dump (OLD_ROWS rows, 2 shards), built once per module;
    tests copy the file rather than re-running the whole graph."""
    root = tmp_path_factory.mktemp("published_old")
    dump, database = root / "v1", root / "warehouse.duckdb"
    write_dump(dump, n_rows=OLD_ROWS, n_shards=2, seed=1)
    revision = _revision(dump)
    result = _refresh_in_process(DumpSource(source=str(dump)), database)
    assert result.success, [e.step_key for e in result.all_events if e.is_step_failure]
    snapshot = _assert_published(database, revision, OLD_ROWS)
    return {"dump": dump, "revision": revision, "database": database, "snapshot": snapshot}


def _copy_published(published_old: dict, tmp_path: Path) -> Path:
    database = copy_warehouse(published_old["database"], tmp_path / "warehouse.duckdb")
    assert not Path(f"{work_file(published_old['database'])}.wal").exists()  # closed cleanly: the file is whole
    return database


# ------------------------------------------------------------------------------------- kill -9

@pytest.mark.parametrize(
    "point, step, new_status",
    [("fill", "flat_tables", "fetched"), ("publish", "publication_gate", "loaded")],
    ids=["while_filling_tables", "inside_publication_transaction"],
)
def test_kill_9_mid_refresh_keeps_published_dump_then_rerun_publishes(tmp_path, published_old, point, step,
                                                                     new_status):
    """SIGKILL the whole run (its process group) at ``point``: while the new revision's staging
    tables are being filled, or inside publish()'s transaction after the first arena.* view was
    re-pointed. The refresh runs in a subprocess with the production resources read from ARENA_*;
    refresh_worker pauses it at the point (a wrapped core function) so the kill lands there."""
    database = _copy_published(published_old, tmp_path)
    old, before = published_old["revision"], published_old["snapshot"]
    new_dir = tmp_path / "v2"
    write_dump(new_dir, n_rows=KILL_ROWS, n_shards=4, seed=2)
    new = _revision(new_dir)
    env = _env(tmp_path, ARENA_SOURCE=str(new_dir), ARENA_WAREHOUSE=str(database),
               ARENA_CACHE_DIR=str(tmp_path / "cache"))
    log, paused = tmp_path / "killed_run.log", tmp_path / "paused"
    args = WORKER + ["refresh", "--pause-at", point, "--paused-file", str(paused)]
    with _process(args, env, log, tmp_path) as proc:
        text = lambda: log.read_text(errors="replace")  # noqa: E731
        _wait_for(lambda: paused.exists() or proc.poll() is not None, 120, f"the refresh to reach {point}")
        assert proc.poll() is None, f"the refresh ended before reaching {point}:\n{text()[-3000:]}"
        wal = Path(f"{work_file(database)}.wal")
        wal_bytes = wal.stat().st_size if wal.exists() else 0
        _killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    _wait_for(lambda: not _group_alive(proc.pid), 10, "every process of the killed run to be gone")
    killed_log = text()
    assert f'Started execution of step "{step}"' in killed_log
    assert f'Finished execution of step "{step}"' not in killed_log  # the kill landed mid-step
    assert "RUN_SUCCESS" not in killed_log

    after = _snapshot(database)  # opening the file replays what the WAL holds
    assert after["published"] == [old]
    assert after["views"] == before["views"]  # every arena.* view: same revision, same row count
    assert after["statuses"][new] == new_status
    leftovers = [t for t in after["versions"] if f"__{revision_key(new)}__" in t]
    with _read(work_file(database)) as con:
        left = {t: con.execute(f'SELECT count(*) FROM {VERSIONS_SCHEMA}."{t}"').fetchone()[0] for t in leftovers}
    print(f"\nkill -9 at {point} ({step}): WAL {wal_bytes} bytes; arena.dumps has the new revision as "
          f"{after['statuses'][new]!r}; its tables left (rows): {left}; arena.* views unchanged: "
          f"{json.dumps(after['views'])}")

    # the re-run (same dump, same warehouse) starts over and publishes
    started = time.monotonic()
    assert _refresh_in_process(DumpSource(source=str(new_dir)), database).success
    print(f"re-run to completion: {time.monotonic() - started:.1f} s")
    done = _assert_published(database, new, KILL_ROWS)
    assert done["statuses"][old] == "superseded"
    # the old revision keeps only the tables its *_history views read; the killed run's tables
    # (its process is gone) are dropped, staging tables included
    old_key = revision_key(old)
    assert {t.rpartition("__")[0] for t in done["versions"] if f"__{old_key}__" in t} <= {
        f"{h}__{old_key}" for h in CATALOG.history}
    assert not [t for t in done["versions"] if t.startswith("_stage_")]
    # nor any folder of the killed load's part files (hidden until registered; its process is gone)
    assert not [p.name for p in (store_folder(database) / "tables").iterdir() if p.name.startswith(".")]


# -------------------------------------------------------------------------------------- reader

def test_reader_during_refresh_sees_one_complete_revision_at_a_time(tmp_path, published_old):
    database = _copy_published(published_old, tmp_path)
    old_dir, new_dir = published_old["dump"], tmp_path / "v2"
    write_dump(new_dir, n_rows=800, n_shards=3, seed=2)
    old, new = published_old["revision"], _revision(new_dir)
    expected = {old: _battle_fingerprint(old_dir), new: _battle_fingerprint(new_dir)}

    out, stop, ready = tmp_path / "reader.json", tmp_path / "reader.stop", tmp_path / "reader.ready"
    args = WORKER + ["read", "--warehouse", str(database), "--out", str(out), "--stop-file", str(stop),
                     "--ready-file", str(ready)]
    hold_ready, release = tmp_path / "hold.ready", tmp_path / "hold.release"
    hold = WORKER + ["hold", "--warehouse", str(database), "--ready-file", str(hold_ready), "--release-file",
                     str(release), "--read-only"]
    with _process(args, _env(tmp_path), tmp_path / "reader.log", tmp_path) as reader, \
            _process(hold, _env(tmp_path), tmp_path / "hold.log", tmp_path) as holder:
        _wait_for(lambda: ready.exists() or reader.poll() is not None, 60, "the reader's first read")
        _wait_for(lambda: hold_ready.exists() or holder.poll() is not None, 60, "the held connection")
        assert reader.poll() is None, (tmp_path / "reader.log").read_text()
        refresh_start = time.time()
        result = _refresh_in_process(DumpSource(source=str(new_dir)), database)
        refresh_end = time.time()
        release.touch()
        assert holder.wait(timeout=30) == 0, (tmp_path / "hold.log").read_text()
        time.sleep(1.0)  # keep reading the new revision a little
        stop.touch()
        reader.wait(timeout=30)
    assert result.success
    assert reader.returncode == 0, (tmp_path / "reader.log").read_text()
    summary = json.loads(out.read_text())

    assert summary["errors"] == {}  # no missing table, no failed query
    by_revision: dict[str, list[dict]] = {}
    for obs in summary["observations"]:
        assert len(obs["published"]) == 1, obs
        (revision,) = obs["published"]
        assert obs["view_keys"] == [revision_key(revision)], obs  # every view on the published dump
        assert (obs["battles"], obs["files"], obs["min_id"], obs["max_id"]) == tuple(expected[revision]), obs
        by_revision.setdefault(revision, []).append(obs)
    assert set(by_revision) == {old, new}
    assert all(len(v) == 1 for v in by_revision.values()), by_revision  # one picture per revision
    order = [summary["observations"][i]["published"][0] for _, i in summary["timeline"]]
    switch = order.index(new)
    assert set(order[:switch]) == {old} and set(order[switch:]) == {new}  # never back to the old one
    during = sum(refresh_start <= t <= refresh_end for t, _ in summary["timeline"])
    # a reader never waits on the pipeline (the readers' file is a snapshot it never opens read-write),
    # and the pipeline never waits on a reader (one held a connection through the whole refresh)
    assert during > 0 and summary["blocked"] == 0
    print(f"\nreader: {summary['attempts']} attempts, {summary['reads']} reads "
          f"({during} while the refresh ran for {refresh_end - refresh_start:.1f} s), "
          f"{summary['blocked']} blocked by the writer's lock; "
          f"battles rows seen: {sorted({o['battles'] for o in summary['observations']})}; "
          f"old revision {by_revision[old][0]['reads']} reads, new {by_revision[new][0]['reads']} reads")


# ---------------------------------------------------------------------------------------- lock

def test_held_lock_makes_writer_wait_bounded_then_fail_clearly(tmp_path):
    """Another pipeline process holding the work file (readers never open it): the writer waits,
    bounded, then fails clearly; released, it gets in."""
    database = tmp_path / "warehouse.duckdb"
    work = work_file(database)
    work.parent.mkdir()
    dump = tmp_path / "dump"
    write_dump(dump, n_rows=20, n_shards=1, seed=3)
    ready, release = tmp_path / "hold.ready", tmp_path / "hold.release"
    args = WORKER + ["hold", "--warehouse", str(work), "--ready-file", str(ready),
                     "--release-file", str(release)]
    with _process(args, _env(tmp_path), tmp_path / "hold.log", tmp_path) as holder:
        _wait_for(lambda: ready.exists() or holder.poll() is not None, 60, "the lock holder")
        assert holder.poll() is None, (tmp_path / "hold.log").read_text()

        started = time.monotonic()
        with pytest.raises(WarehouseLockedError) as caught:
            with Warehouse(database=str(database), lock_timeout_s=1.0).connection():
                pass
        waited = time.monotonic() - started
        assert 1.0 <= waited < 3.0  # the full timeout, not less (a last attempt at the deadline)
        message = str(caught.value)
        assert str(work) in message and "locked by another process" in message and "of 1 s)" in message

        # a whole refresh against the held file fails (bounded) with that error; it does not hang
        started = time.monotonic()
        config = no_retries_config({"dump_source": {"source": str(dump)},
                                    "warehouse": {"database": str(database), "lock_timeout_s": 1.0}})
        success, failed_steps = _execute_without_retries(config, tmp_path)
        assert not success
        failures = [error for _, error in failed_steps]
        run_seconds = time.monotonic() - started
        assert run_seconds < 30
        assert failures and any(err.cls_name == "WarehouseLockedError" or
                                "WarehouseLockedError" in err.to_string() for err in failures)
        assert "locked by another process" in failures[0].to_string()

        # released while the writer waits: the writer gets in
        threading.Timer(1.0, release.touch).start()
        started = time.monotonic()
        with Warehouse(database=str(database), lock_timeout_s=20.0).connection() as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
        got_in = time.monotonic() - started
        assert 0.9 < got_in < 10
        holder.wait(timeout=10)
    print(f"\nlock: resource gave up after {waited:.2f} s (lock_timeout_s=1), whole run failed in "
          f"{run_seconds:.1f} s, writer got in {got_in:.2f} s after waiting for a released lock")


# ---------------------------------------------------------------------------------- Hub faults

@pytest.fixture
def hub(tmp_path):
    with fake_hub_server(tmp_path / "hub") as server:
        yield server


def _hub_source(hub, tmp_path) -> dict:
    return {"source": REPO, "revision": "main", "cache_dir": str(tmp_path / "cache"),
            "hf_endpoint": hub.url, "attempts": 3, "backoff_s": 0.1, "timeout_s": 5.0}


def _failed_hub_run(hub, tmp_path, database: Path):
    """A refresh with step retries off (raw_dump's RetryPolicy would wait 5 + 10 s first); returns
    the Hub error that failed raw_dump, after checking that no other step failed."""
    config = no_retries_config({"dump_source": _hub_source(hub, tmp_path), "warehouse": {"database": str(database)}})
    success, failures = _execute_without_retries(config, tmp_path)
    assert not success
    assert [step for step, _ in failures] == ["raw_dump"]
    chain, error = [], failures[0][1]
    while error is not None:  # with retries off, Dagster wraps the error: the Hub error is a cause
        chain.append(error)
        error = error.cause
    (hub_error,) = [e for e in chain if e.cls_name in ("HubUnavailable", "DownloadFailed")][:1]
    return hub_error


def test_hub_faults_during_runs(hub, tmp_path):
    """Hub down, then every shard download failing: the run fails and says why, nothing is
    published, the cache holds no partial entry. Then a flaky Hub (two dropped API connections,
    two 503s on a shard): the Hub client's retries absorb it and the run publishes."""
    database = tmp_path / "warehouse.duckdb"
    cache = tmp_path / "cache"
    shards = write_dump(tmp_path / "v1", n_rows=OLD_ROWS, n_shards=2, seed=1)
    sha = hub.publish(REPO, "main", {f"data/{p.name}": p for p in shards})

    faults = {
        "hub_down": {"down": True},
        "downloads_fail": {"status_5xx_times": 1000, "status_code": 503, "status_match": "/resolve/"},
    }
    for name, fault in faults.items():
        hub.set_faults(**fault)
        error = _failed_hub_run(hub, tmp_path, database)
        message = error.message.strip()
        print(f"\nHub fault {name}: raw_dump failed with {error.cls_name}: {message[:400]}")
        assert error.cls_name == ("HubUnavailable" if name == "hub_down" else "DownloadFailed")
        # one message naming the endpoint, ending with what to do, and no chained library errors
        assert hub.url in message and "Hub unavailable" in message, message
        assert message.endswith(hub_core.OFFLINE_HINT) and error.cause is None, message
        assert "3 attempt(s)" in message if name == "hub_down" else "data/train-0000" in message
        if database.exists():  # nothing published, not even a history row for the revision
            with _read(database) as con:
                assert not con.execute("SELECT count(*) FROM duckdb_views() WHERE schema_name = ? "
                                       "AND NOT internal", [SCHEMA]).fetchone()[0]
                if con.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND "
                               "table_name = 'dumps'", [SCHEMA]).fetchone()[0]:
                    assert not con.execute(f"SELECT count(*) FROM {SCHEMA}.dumps").fetchone()[0]
        assert verified_revisions(cache, REPO) == []  # nothing a later run would trust

    hub.set_faults(reset_times=2, reset_match="/api/datasets/", reset_method="GET",
                   status_5xx_times=2, status_code=503, status_match="/resolve/", status_method="GET")
    result = _refresh_in_process(DumpSource(**_hub_source(hub, tmp_path)), database)
    assert result.success, [e.step_key for e in result.all_events if e.is_step_failure]
    left = hub.faults()
    assert left["reset_times"] == 0 and left["status_5xx_times"] == 0  # every fault fired
    assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]  # no step retry
    _assert_published(database, sha, OLD_ROWS)
    assert verified_revisions(cache, REPO) == [sha]
