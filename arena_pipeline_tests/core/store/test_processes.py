"""A build whose pid now belongs to another process (a reused pid) is told apart from a live build by the
time its process started."""

from __future__ import annotations

import os
import subprocess
import sys

import duckdb

from arena_pipeline.core.dataset.manifest import DumpManifest, ShardFile
from arena_pipeline.core.store.processes import process_start
from arena_pipeline.core.store.versions import close_abandoned_builds, start_build


def test_a_reused_pid_is_told_apart_from_a_live_build(tmp_path):
    manifest = DumpManifest("hub", "org/name", "main", "1" * 40, (ShardFile("/x/a.parquet", "a.parquet", 10, 3, "ab"),))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert process_start(child.pid) is not None and process_start(child.pid) != process_start(os.getpid())
        with duckdb.connect(str(tmp_path / "work.duckdb")) as con:
            start_build(con, "arena", "live-run", manifest)  # this process: alive, the start it recorded
            start_build(con, "arena", "reused-run", manifest)
            # the run that registered "reused-run" is gone and the system gave its pid to ``child``
            con.execute("UPDATE arena_versions.builds SET pid = ?, pid_started = ? WHERE build_id = 'reused-run'",
                        [child.pid, process_start(child.pid) - 1])
            assert close_abandoned_builds(con) == ["reused-run"]
            status = dict(con.execute("SELECT build_id, status FROM arena_versions.builds").fetchall())
            assert status == {"live-run": "running", "reused-run": "abandoned"}
            # the pid's own process, started when recorded, is a live build
            con.execute("UPDATE arena_versions.builds SET status = 'running', pid_started = ? "
                        "WHERE build_id = 'reused-run'", [process_start(child.pid)])
            assert close_abandoned_builds(con) == []
    finally:
        child.kill()
        child.wait()
