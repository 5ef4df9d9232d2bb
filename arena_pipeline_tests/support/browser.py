"""A headless Chromium driven through the DevTools protocol over ``--remote-debugging-pipe`` (file
descriptors 3 and 4, NUL-separated JSON): no websocket client, driver or browser download, only Debian's
``chromium``. The browser runs in its own process group, is asked to close over the protocol, and is killed
by that group id if it does not exit. Used by the report's browser tests and the docs' screenshots."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class DevToolsPipe:
    """A minimal Chrome DevTools protocol client over ``--remote-debugging-pipe``."""

    def __init__(self, executable: str, profile: Path, width: int = 1280, height: int = 1000) -> None:
        profile.mkdir(parents=True, exist_ok=True)
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # move the browser's ends above 9 so the shell redirections below cannot collide
        read_fd = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
        write_fd = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)
        args = [
            executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--no-default-browser-check", "--disable-background-networking", "--disable-sync",
            "--disable-component-update", "--disable-extensions", "--disable-default-apps",
            "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio", f"--window-size={width},{height}",
            f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank",
        ]
        self.log_path = profile / "chromium.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", f'exec "$@" 3<&{read_fd} 4>&{write_fd} {read_fd}<&- {write_fd}>&-',
             "bash", *args],
            pass_fds=(read_fd, write_fd),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            start_new_session=True,
        )
        os.close(read_fd)
        os.close(write_fd)
        self._id = 0
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        while chunk := os.read(self._from_browser, 1 << 16):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for message in messages:
                self._inbox.put(json.loads(message))
        self._inbox.put(None)

    def _next(self, deadline: float) -> dict[str, Any]:
        message = self._inbox.get(timeout=max(0.01, deadline - time.monotonic()))
        if message is None:
            raise RuntimeError(f"chromium closed the pipe; log: {self.log_path.read_text(errors='replace')[-2000:]}")
        return message

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._next(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str, timeout: float = 30.0) -> dict[str, Any]:
        for seen in self.events:
            if seen.get("method") == event:
                return seen
        deadline = time.monotonic() + timeout
        while True:
            message = self._next(deadline)
            self.events.append(message)
            if message.get("method") == event:
                return message

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.send("Browser.close", timeout=10)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # the group this test started
            self.proc.wait(timeout=15)
        os.close(self._to_browser)
        self._log.close()


class Page:
    """One tab of :class:`DevToolsPipe` with Page, Runtime, Log and Network events on."""

    def __init__(self, browser: DevToolsPipe) -> None:
        self.browser = browser
        target = browser.send("Target.createTarget", {"url": "about:blank"})
        self.session = browser.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def send(self, method: str, params: dict | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, self.session)

    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.browser.wait_for("Page.loadEventFired")

    def js(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"JS error in {expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def problems(self) -> list[str]:
        """Console errors/warnings, uncaught exceptions, and browser log errors (e.g. CSP)."""
        found = []
        for event in self.browser.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                found.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                found.append(f"log: {params['entry']}")
        return found

    def requested_urls(self) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self.browser.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def screenshot(self, path: Path) -> Path:
        shot = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
