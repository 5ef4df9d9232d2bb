"""Regenerate docs/screenshots/ from the current code: the offline sample materialized as the README says,
the report and Dagster's UI (its webserver on that instance) shot by headless Chromium (the browser tests'
DevTools client).

Run from the repository root: ``.venv/bin/python -m arena_pipeline_tests.docs_screenshots [OUT_DIR]``
(default ``docs/screenshots``; needs Debian's ``chromium``)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE = REPO_ROOT / "arena_pipeline_tests" / "data" / "arena_human_preference_sample_100.csv"
RANKING = '{"ops": {"rankings": {"config": {"display_min_battles": 0}}}}'
#: file name -> (page of the UI, or None for the report; width, height)
SHOTS = {
    "report-overview.png": (None, 1400, 900),
    "ui-asset-graph.png": ("/asset-groups", 1400, 780),
    "ui-leaderboard-asset.png": ("/assets/arena/leaderboard", 1400, 1240),
    "ui-checks.png": ("/assets/arena/battles?view=checks", 1400, 712),
}
#: what the UI keeps in the browser's local storage: the navigation collapsed, as in the earlier shots
UI_STORAGE = {"dagster-nav-collapsed": "true"}
#: on the lineage page, hide the asset tree beside the graph (its toggle, found by its icon)
HIDE_ASSET_TREE = ("[...document.querySelectorAll('button')]"
                   ".find(b => b.querySelector('[aria-label=panel_show_right]'))?.click()")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise SystemExit("chromium is not installed (apt-get install -y chromium)")
    return found


def shoot(page, url: str, out: Path, width: int, height: int, *, settle_s: float = 8.0) -> None:
    """One screenshot of ``url`` in a ``width`` x ``height`` window, once its scripts have settled."""
    page.send("Emulation.setDeviceMetricsOverride",
              {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    page.open(url)
    time.sleep(settle_s)
    if url.endswith("/asset-groups"):  # the groups as Dagster shows them first: collapsed, one box each
        page.js(HIDE_ASSET_TREE)
        time.sleep(settle_s)
    shot = page.send("Page.captureScreenshot", {"format": "png"})
    out.write_bytes(base64.b64decode(shot["data"]))


def _graphql(base: str, query: str) -> None:
    request = urllib.request.Request(f"{base}/graphql", data=json.dumps({"query": query}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30):
        pass


def _wait_for(url: str, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"the webserver did not answer at {url}")


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    bin_dir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        source = root / SAMPLE.relative_to(REPO_ROOT)  # a copy: the report names no path of this checkout
        source.parent.mkdir(parents=True)
        shutil.copy(SAMPLE, source)
        (root / "dagster_home").mkdir()
        shutil.copy(REPO_ROOT / "dagster_home" / "dagster.yaml", root / "dagster_home")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ARENA_", "DAGSTER_"))} | {
            "DAGSTER_HOME": str(root / "dagster_home"), "ARENA_SOURCE": str(SAMPLE.relative_to(REPO_ROOT)),
            "ARENA_WAREHOUSE": str(root / "warehouse.duckdb"), "ARENA_CACHE_DIR": str(root / "cache"),
            "ARENA_REPORT": str(root / "report" / "index.html")}
        subprocess.run([bin_dir / "dagster", "asset", "materialize", "-m", "arena_pipeline.definitions",
                        "--select", "*", "--config-json", RANKING], env=env, cwd=root, check=True)
        port = _free_port()
        server = subprocess.Popen([bin_dir / "dagster-webserver", "-m", "arena_pipeline.definitions",
                                   "-h", "127.0.0.1", "-p", str(port)], env=env, cwd=root,
                                  start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        from arena_pipeline_tests.support.browser import DevToolsPipe, Page

        base = f"http://127.0.0.1:{port}"
        browser = DevToolsPipe(_chromium(), root / "chromium", 1400, 1240)
        try:
            _wait_for(f"{base}/server_info")
            _graphql(base, "mutation { setNuxSeen }")  # no "join the community" dialog over the shots
            page = Page(browser)
            page.open(f"{base}/server_info")
            for key, value in UI_STORAGE.items():
                page.js(f"localStorage.setItem({key!r}, {value!r})")
            for name, (path, width, height) in SHOTS.items():
                url = (root / "report" / "index.html").as_uri() if path is None else f"{base}{path}"
                shoot(page, url, out_dir / name, width, height)
                print(f"wrote {out_dir / name} ({url})")
        finally:
            browser.close()
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT / "docs" / "screenshots")
