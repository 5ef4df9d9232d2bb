"""End to end: ``dagster dev`` (webserver + daemon) refreshes the warehouse when the Hub moves.

The code location is ``arena_pipeline_tests.support.e2e_definitions`` (the real ``defs``, with the
new-dump sensor looking every 2 s). The fake Hub, ``dagster dev`` and everything they start run on
127.0.0.1 and are stopped by PID / process group in ``finally`` blocks. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest

from arena_pipeline.constants import REVISION_TAG, SCHEMA
from arena_pipeline.core.store import warehouse as core_warehouse
from arena_pipeline.resources import DumpSource, Warehouse
from arena_pipeline.sensors import new_dump_sensor
from arena_pipeline_dev.fixtures import write_dump
from arena_pipeline_dev.hub_server import fake_hub_server
from arena_pipeline_tests.support.e2e_definitions import E2E_SENSOR_INTERVAL_SECONDS
from arena_pipeline_tests.support.e2e_definitions import defs as e2e_defs
from arena_pipeline_tests.support.waiting import wait_for

REPO_ROOT = Path(__file__).resolve().parents[1]
DAGSTER_YAML = REPO_ROOT / "dagster_home" / "dagster.yaml"
REPO = "lmarena-ai/arena-human-preference-140k"
LOCATION_MODULE = "arena_pipeline_tests.support.e2e_definitions"
SENSOR = "new_dump_sensor"

WORKSPACE = """{ workspaceOrError { __typename
  ... on Workspace { locationEntries { name loadStatus locationOrLoadError { __typename
      ... on PythonError { message }
      ... on RepositoryLocation { repositories { name sensors { name minIntervalSeconds } } } } } }
  ... on PythonError { message } } }"""
START_SENSOR = """mutation($selector: SensorSelector!) { startSensor(sensorSelector: $selector) { __typename
  ... on Sensor { sensorState { status } } ... on Error { message } } }"""
RUNS = """query($filter: RunsFilter) { runsOrError(filter: $filter) { __typename
  ... on Runs { results { runId status creationTime startTime endTime tags { key value } } }
  ... on Error { message } } }"""
RUN_LOGS = """query($runId: ID!) { logsForRun(runId: $runId) { __typename
  ... on EventConnection { events { __typename ... on MessageEvent { stepKey message }
                                    ... on ErrorEvent { error { message } } } }
  ... on Error { message } } }"""
TICKS = """query($selector: SensorSelector!) { sensorOrError(sensorSelector: $selector) { __typename
  ... on Sensor { sensorState { status ticks(limit: 100) {
      status timestamp endTimestamp skipReason runIds error { message } } } }
  ... on Error { message } } }"""


# ------------------------------------------------------------------------------------- helpers

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(predicate, timeout: float, what: str, interval: float = 0.5):
    return wait_for(predicate, timeout, what, interval)


class Webserver:
    """The GraphQL API of a running ``dagster dev``."""

    def __init__(self, url: str, proc: subprocess.Popen, log: Path):
        self.url, self.proc, self.log = url, proc, log

    def alive(self) -> None:
        assert self.proc.poll() is None, f"dagster dev exited ({self.proc.returncode}):\n{self.tail()}"

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def up(self) -> bool:
        self.alive()
        try:
            with urllib.request.urlopen(f"{self.url}/server_info", timeout=5) as resp:
                return resp.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as resp:
            answer = json.load(resp)
        assert not answer.get("errors"), answer["errors"]
        return answer["data"]

    def runs(self, revision: str) -> list[dict]:
        data = self.graphql(RUNS, {"filter": {"tags": [{"key": REVISION_TAG, "value": revision}]}})
        runs = data["runsOrError"]
        assert runs["__typename"] == "Runs", runs
        return runs["results"]

    def run_errors(self, run_id: str) -> str:
        events = self.graphql(RUN_LOGS, {"runId": run_id})["logsForRun"].get("events", [])
        return "\n".join(f"{e.get('stepKey')}: {e.get('message')} {e.get('error') or ''}"
                         for e in events if e.get("error") or "FAILURE" in e["__typename"].upper())


@contextmanager
def dagster_dev(tmp_path: Path, env: dict[str, str], port: int):
    """``dagster dev -m arena_pipeline_tests.support.e2e_definitions`` in its own session; stopped by
    process group (SIGTERM, then SIGKILL after 30 s) however the block ends."""
    log = tmp_path / "dagster_dev.log"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dagster", "dev", "-m", LOCATION_MODULE,
             "-h", "127.0.0.1", "-p", str(port)],
            env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # job control: dagster dev then stops its children on SIGTERM
        )
    try:
        yield Webserver(f"http://127.0.0.1:{port}", proc, log)
    finally:
        _stop_group(proc, timeout=30)


def _stop_group(proc: subprocess.Popen, timeout: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc.poll()
            try:
                os.killpg(proc.pid, 0)  # anyone of the group (webserver, daemon, code server, runs) left?
            except ProcessLookupError:
                return
            time.sleep(0.2)
    proc.wait(timeout=10)


def _published(database: Path) -> dict[str, str]:
    """revision -> status from arena.dumps, read-only (waits, bounded, while a run holds the file)."""
    if not database.exists():
        return {}
    con = core_warehouse.connect(str(database), read_only=True, timeout_s=30)
    try:
        return dict(con.execute(f"SELECT revision, status FROM {SCHEMA}.dumps").fetchall())
    finally:
        con.close()


def _battles(database: Path) -> int:
    con = core_warehouse.connect(str(database), read_only=True, timeout_s=30)
    try:
        return con.execute(f"SELECT count(*) FROM {SCHEMA}.battles").fetchone()[0]
    finally:
        con.close()


def _await_refresh(dev: Webserver, revision: str, database: Path, published_at: float, timeout: float) -> dict:
    """Wait for the sensor's run for ``revision`` to succeed and for arena.dumps to show it published."""
    def finished():
        dev.alive()
        runs = dev.runs(revision)
        for run in runs:
            assert run["status"] not in ("FAILURE", "CANCELED"), \
                f"run {run['runId']} {run['status']}:\n{dev.run_errors(run['runId'])}\n{dev.tail()}"
        return next((r for r in runs if r["status"] == "SUCCESS"), None)

    run = _wait_for(finished, timeout, f"a successful sensor run for {revision}", interval=1.0)
    _wait_for(lambda: _published(database).get(revision) == "published", 30, f"{revision} published")
    visible = time.time()
    return {
        "run": run,
        "sensor_to_run_s": round(run["creationTime"] - published_at, 2),
        "run_s": round(run["endTime"] - run["startTime"], 2),
        "queue_s": round(run["startTime"] - run["creationTime"], 2),
        "total_s": round(visible - published_at, 2),
    }


# ----------------------------------------------------------------------------------- the tests

def test_e2e_location_is_the_real_definitions_with_a_fast_sensor():
    from arena_pipeline.definitions import defs

    sensor = e2e_defs.resolve_sensor_def(SENSOR)
    assert sensor.minimum_interval_seconds == E2E_SENSOR_INTERVAL_SECONDS
    assert sensor.job_name == "refresh_job"
    assert {s.name for s in e2e_defs.sensors} == {s.name for s in defs.sensors}
    assert set(e2e_defs.resolve_all_asset_keys()) == set(defs.resolve_all_asset_keys())
    assert set(e2e_defs.resources) == set(defs.resources)


@pytest.mark.slow
def test_noop_sensor_tick_time(tmp_path):
    """A tick whose revision is unchanged: one Hub API call, no download, no run."""
    shards = write_dump(tmp_path / "v1", n_rows=10, n_shards=1, seed=1)
    with fake_hub_server(tmp_path / "hub") as hub, dg.instance_for_test() as instance:
        sha = hub.publish(REPO, "main", {f"data/{p.name}": p for p in shards})
        source = DumpSource(source=REPO, revision="main", cache_dir=str(tmp_path / "cache"),
                            hf_endpoint=hub.url, attempts=1, timeout_s=5)
        times = []
        for _ in range(10):
            with dg.build_sensor_context(cursor=sha, instance=instance,  # closed: see ticks.py
                                         resources={"dump_source": source, "warehouse": Warehouse(
                                             database=str(tmp_path / "none.duckdb"))}) as context:
                started = time.perf_counter()
                result = new_dump_sensor.evaluate_tick(context)
                times.append(time.perf_counter() - started)
            assert not result.run_requests and "unchanged" in result.skip_message
        assert not hub.file_gets()
        api_calls = [p for m, p in hub.requests() if p.startswith("/api/")]
    assert len(api_calls) == 10  # exactly one Hub call per tick
    print(f"\nno-op sensor tick (in process, fake Hub on loopback): median {statistics.median(times) * 1000:.1f} ms, "
          f"max {max(times) * 1000:.1f} ms over {len(times)} ticks")
    assert statistics.median(times) < 2.0


@pytest.mark.slow
def test_dagster_dev_sensor_refreshes_on_new_hub_revision(tmp_path):
    database = tmp_path / "warehouse.duckdb"
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DAGSTER_YAML, home / "dagster.yaml")
    # at least 50 battles per model of the fixtures' 6 (rankings' min_battles): an empty leaderboard
    # fails the run
    v1 = write_dump(tmp_path / "v1", n_rows=200, n_shards=1, seed=1)
    v2 = write_dump(tmp_path / "v2", n_rows=240, n_shards=2, seed=2)

    with fake_hub_server(tmp_path / "hub") as hub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ARENA_", "HF_", "DAGSTER_"))}
        env.update(
            DAGSTER_HOME=str(home), ARENA_SOURCE=REPO, ARENA_WAREHOUSE=str(database),
            ARENA_CACHE_DIR=str(tmp_path / "cache"), HF_ENDPOINT=hub.url, HF_HUB_DISABLE_TELEMETRY="1",
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        )
        started = time.monotonic()
        with dagster_dev(tmp_path, env, _free_port()) as dev:
            _wait_for(dev.up, 120, "the webserver's /server_info")

            def location():
                entries = dev.graphql(WORKSPACE)["workspaceOrError"]["locationEntries"]
                entry = next((e for e in entries if e["loadStatus"] == "LOADED"), None)
                if entry is None:
                    return None
                assert entry["locationOrLoadError"]["__typename"] == "RepositoryLocation", entry
                return entry

            entry = _wait_for(location, 120, "the code location to load")
            (repo,) = entry["locationOrLoadError"]["repositories"]
            assert repo["name"] == "__repository__"
            assert {"name": SENSOR, "minIntervalSeconds": E2E_SENSOR_INTERVAL_SECONDS} in repo["sensors"]
            ready_s = time.monotonic() - started
            selector = {"repositoryLocationName": entry["name"], "repositoryName": repo["name"],
                        "sensorName": SENSOR}
            started_sensor = dev.graphql(START_SENSOR, {"selector": selector})["startSensor"]
            assert started_sensor == {"__typename": "Sensor", "sensorState": {"status": "RUNNING"}}, started_sensor

            t1 = time.time()
            sha1 = hub.publish(REPO, "main", {f"data/{p.name}": p for p in v1})
            first = _await_refresh(dev, sha1, database, t1, timeout=150)
            assert _battles(database) == 200

            t2 = time.time()
            sha2 = hub.publish(REPO, "main", {f"data/{p.name}": p for p in v2})
            second = _await_refresh(dev, sha2, database, t2, timeout=150)
            assert _published(database) == {sha1: "superseded", sha2: "published"}
            assert _battles(database) == 240
            assert [r["runId"] for r in dev.runs(sha1)] == [first["run"]["runId"]]  # one run per revision

            # no-op ticks (revision unchanged) as the daemon ran them
            def noop_ticks():
                ticks = dev.graphql(TICKS, {"selector": selector})["sensorOrError"]["sensorState"]["ticks"]
                done = [t for t in ticks if t["status"] == "SKIPPED" and "unchanged" in (t["skipReason"] or "")
                        and t["endTimestamp"] and t["timestamp"] > t2]
                return done if len(done) >= 2 else None

            noop = _wait_for(noop_ticks, 30, "two no-op sensor ticks after the second refresh", interval=1.0)
            tick_s = sorted(t["endTimestamp"] - t["timestamp"] for t in noop)
            shutdown_started = time.monotonic()
        shutdown_s = time.monotonic() - shutdown_started
    assert not [t for t in noop if t["runIds"]]
    print(f"\ndagster dev e2e: ready in {ready_s:.1f} s; revision 1: {json.dumps({k: v for k, v in first.items() if k != 'run'})}; "
          f"revision 2: {json.dumps({k: v for k, v in second.items() if k != 'run'})}; "
          f"no-op daemon ticks: median {statistics.median(tick_s):.3f} s, max {max(tick_s):.3f} s "
          f"over {len(tick_s)}; shutdown {shutdown_s:.1f} s")


def _alive_in_group(pgid: int) -> list[str]:
    """The processes of group ``pgid`` still running (zombies left for init to reap do not count)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(text[:text.rindex(")") + 1])
    return alive


def _await_ready(url: str, log: Path, proc: subprocess.Popen) -> None:
    """The webserver answers and the daemon has started (what stopping must then undo)."""
    def ready():
        assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
        try:
            with urllib.request.urlopen(f"{url}/server_info", timeout=5) as resp:
                up = resp.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False
        return up and "Instance is configured with the following daemons" in log.read_text(errors="replace")

    _wait_for(ready, 120, "dagster dev's webserver and daemon")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process groups from /proc")
def _as_from_a_terminal() -> None:
    """In the child, before exec: SIGINT handled by default, as in a shell started from a terminal. The
    test runner itself may run with SIGINT ignored (a background job of a script without job control,
    as a CI harness may start it), and an ignored signal is inherited across exec."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("how", ["ctrl-c in its terminal", "kill -INT, started by a script with set -m"])
def test_dagster_dev_stops_on_ctrl_c(tmp_path, how):
    """Ctrl-C (SIGINT to the terminal's foreground process group) stops ``dagster dev`` cleanly: the
    webserver, the daemon and the code servers exit, and so does dagster dev, with status 0. Started
    in the background by a script, it stops the same on ``kill -INT`` when the script has job control
    (``set -m``): without it the shell starts background commands with SIGINT ignored, and dagster dev
    then ignores SIGTERM too (it gives SIGTERM SIGINT's handler) -- docs/getting-started.md says so."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DAGSTER_YAML, home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARENA_", "HF_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(home), ARENA_WAREHOUSE=str(tmp_path / "warehouse.duckdb"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    port, log = _free_port(), tmp_path / "dagster_dev.log"
    dev = [sys.executable, "-m", "dagster", "dev", "-m", LOCATION_MODULE, "-h", "127.0.0.1", "-p", str(port)]
    (tmp_path / "cwd").mkdir()
    pgid = None
    with open(log, "wb") as out:
        if how.startswith("ctrl-c"):
            proc = subprocess.Popen(dev, env=env, cwd=tmp_path / "cwd", stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    preexec_fn=_as_from_a_terminal)
            pgid = target = proc.pid
        else:
            pid_file = tmp_path / "dev.pid"
            script = f"set -m\n{shlex.join(dev)} &\necho $! > {shlex.quote(str(pid_file))}\nwait $!\n"
            proc = subprocess.Popen(["bash", "-c", script], env=env, cwd=tmp_path / "cwd", stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                    preexec_fn=_as_from_a_terminal)
            target = int(_wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 30, "the pid"))
            pgid = target  # set -m: the background job is a process group of its own
    try:
        _await_ready(f"http://127.0.0.1:{port}", log, proc)
        started = time.monotonic()
        if how.startswith("ctrl-c"):
            os.killpg(pgid, signal.SIGINT)
        else:
            os.kill(target, signal.SIGINT)
        returncode = proc.wait(timeout=90)
        _wait_for(lambda: not _alive_in_group(pgid), 30, "every process dagster dev started to exit")
        stop_s = time.monotonic() - started
    finally:
        for group in {proc.pid, pgid} - {None}:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
    text = log.read_text(errors="replace")
    assert returncode == 0, text[-4000:]
    assert "Dagster services shut down." in text and "did not terminate cleanly" not in text, text[-4000:]
    print(f"\ndagster dev stopped ({how}) in {stop_s:.1f} s")
