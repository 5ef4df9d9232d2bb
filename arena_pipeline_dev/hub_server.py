"""Run the fake Hub (``arena_pipeline_dev.fake_hub``) as a subprocess for a ``with`` block.

    with fake_hub_server(tmp_path / "hub") as hub:
        publish_revision(hub.root, "org/name", "main", {...})
        download_dump("org/name", "main", cache_dir, endpoint=hub.url, token=None)
        hub.requests()          # [("HEAD", "/datasets/org/name/resolve/<sha>/data/..."), ...]

The server binds 127.0.0.1 on a free port; it is stopped by its PID (SIGTERM, then SIGKILL after
``stop_timeout`` seconds) when the block exits, whatever happens inside it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena_pipeline.core.ingest import hub as hub_core
from arena_pipeline_dev import fake_hub

_REPO_ROOT = Path(__file__).resolve().parents[1]


def verified_revisions(cache_dir: str | os.PathLike[str], repo_id: str) -> list[str]:
    """The shas of ``repo_id`` in the cache that ``hub_core.cached_dump`` would serve, sorted."""
    shas = sorted(p.stem for p in (hub_core._repo_dir(cache_dir, repo_id) / hub_core.RECORDS_DIR).glob("*.json"))
    return [sha for sha in shas if hub_core.cached_dump(cache_dir, repo_id, sha) is not None]


@dataclass(frozen=True)
class FakeHub:
    """A running fake Hub: its URL, root directory and process id."""

    url: str
    root: Path
    pid: int

    def requests(self) -> list[tuple[str, str]]:
        """``(method, path)`` of every request answered so far."""
        return fake_hub.read_request_log(self.root)

    def file_gets(self) -> list[str]:
        """Paths of the GET requests for file contents (``/datasets/.../resolve/...``)."""
        return [p for m, p in self.requests() if m == "GET" and "/resolve/" in p]

    def set_faults(self, **faults: Any) -> None:
        """Replace ``faults.json``; ``set_faults()`` clears every fault."""
        fake_hub.write_faults(self.root, faults)

    def faults(self) -> dict[str, Any]:
        """The current ``faults.json`` (counters decrease as faults fire)."""
        import json

        path = self.root / fake_hub.FAULTS_FILE
        return json.loads(path.read_text()) if path.exists() else {}

    def publish(self, repo_id: str, branch: str, files: dict[str, Path | bytes]) -> str:
        """``fake_hub.publish_revision`` on this server's root."""
        return fake_hub.publish_revision(self.root, repo_id, branch, files)


@contextmanager
def fake_hub_server(
    root: str | os.PathLike[str],
    *,
    start_timeout: float = 10.0,
    stop_timeout: float = 5.0,
) -> Iterator[FakeHub]:
    """Run ``python -m arena_pipeline_dev.fake_hub --root ROOT --port 0`` until the block exits.

    Parameters
    ----------
    root
        The directory the server serves (created if missing); also where ``faults.json`` and
        ``requests.log`` live.
    start_timeout
        Seconds to wait for the server to write its port file before giving up.
    stop_timeout
        Seconds to wait after SIGTERM before sending SIGKILL.
    """
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    port_file = root.parent / f".{root.name}.port"
    port_file.unlink(missing_ok=True)
    stderr_path = root.parent / f".{root.name}.stderr"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO_ROOT), env.get("PYTHONPATH")]))
    stderr = open(stderr_path, "wb")  # a file, not a pipe: a chatty server must never block on it
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "arena_pipeline_dev.fake_hub",
            "--root",
            str(root),
            "--port",
            "0",
            "--port-file",
            str(port_file),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    stderr.close()
    try:
        deadline = time.monotonic() + start_timeout
        while not port_file.exists():
            if proc.poll() is not None:
                err = stderr_path.read_text(errors="replace")
                raise RuntimeError(f"fake hub exited with code {proc.returncode}: {err}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"fake hub did not start within {start_timeout}s")
            time.sleep(0.02)
        port = int(port_file.read_text())
        yield FakeHub(url=f"http://127.0.0.1:{port}", root=root, pid=proc.pid)
    finally:
        _stop(proc, stop_timeout)
        port_file.unlink(missing_ok=True)


def _stop(proc: subprocess.Popen, timeout: float) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)
