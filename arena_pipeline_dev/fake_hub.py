"""A fake Hugging Face Hub serving dataset repos from a directory, for tests (no internet needed).

Run it as a subprocess (see ``arena_pipeline_dev.hub_server``)::

    python -m arena_pipeline_dev.fake_hub --root DIR --port 0 --port-file FILE

It binds 127.0.0.1, writes the bound port to ``--port-file`` once it accepts connections, and
serves only the endpoints ``huggingface_hub`` 2.4 calls for ``arena_pipeline.core.ingest.hub``
(``HfApi.dataset_info`` and ``hf_hub_download``):

``GET /api/datasets/{repo}`` and ``GET /api/datasets/{repo}/revision/{rev}``
    ``HfApi.dataset_info``; ``?blobs=true`` adds sizes and LFS sha256 to ``siblings``.
``GET /api/datasets/{repo}/tree/{rev}[/{path}]?recursive=...``
    ``HfApi.list_repo_tree`` (one page, no pagination).
``GET /api/datasets?author=ORG&search=TEXT&expand=sha``
    ``HfApi.list_datasets``: every repo of ``ORG`` whose id contains ``TEXT``, sorted, one page
    (no ``Link`` header); ``sha`` (of ``main``) only when ``expand`` asks for it, as the Hub does.
``HEAD|GET /datasets/{repo}/resolve/{rev}/{path}``
    ``hf_hub_download``'s HEAD (``get_hf_file_metadata``) and GET (``http_get``):
    ``X-Repo-Commit``, ``ETag`` (the file's sha256, as the Hub sends for LFS files; the download
    cache names the blob after it), ``Content-Length``, ``Accept-Ranges``; ``Range: bytes=N-``
    gets a 206.

Nothing advertises Xet (no ``X-Xet-Hash`` header, no ``xetHash`` in listings): clients use HTTP.
Errors carry the Hub's ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``).

Layout of ``ROOT``::

    ROOT/<org>/<name>/refs.json      {"main": "<sha>", "v1.0": "<sha>"}  (branches and tags)
    ROOT/<org>/<name>/<sha>/data/train-00000-of-00002.parquet
    ROOT/faults.json                 optional; read, and its counters decremented, per request
    ROOT/requests.log                written by the server: one "METHOD PATH" line per request

``refs.json`` is re-read on every request, so ``publish_revision`` can move ``main`` while the
server runs.

Fault injection (``ROOT/faults.json``; every key optional; ``*_times`` counters are decremented in
the file as faults fire; ``*_match`` / ``*_path`` is a substring of the request path, default:
every path; ``*_method`` is ``"GET"``, ``"HEAD"``, or absent for both):

``{"down": true}``
    503 for every request.
``{"status_5xx_times": 2, "status_code": 503, "status_match": "/resolve/", "status_method": "GET"}``
    answer ``status_code`` (default 503) to the next N matching requests.
``{"truncate_path": "train-00001", "truncate_times": 1}``
    a file GET sends its headers (full ``Content-Length``) and half its body, then hangs up.
``{"corrupt_path": "train-00000", "corrupt_times": 1}``
    a file GET sends a body of the right length whose bytes are flipped.
``{"reset_times": 1, "reset_match": "/resolve/", "reset_method": "GET"}``
    close the connection without answering.
``{"delay_seconds": 2.0, "delay_match": "/api/"}``
    sleep before answering (for client timeouts).
``{"require_token": "hf_xxx"}``
    answer 401 ``RepoNotFound`` (as the Hub does for private repos) unless the request has
    ``Authorization: Bearer hf_xxx``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

FAULTS_FILE = "faults.json"
REQUEST_LOG = "requests.log"
REFS_FILE = "refs.json"

_LOCK = threading.Lock()


# ---------------------------------------------------------------------------
# Publishing revisions (used by tests, no server needed)
# ---------------------------------------------------------------------------


def publish_revision(
    root: str | os.PathLike[str],
    repo_id: str,
    branch: str,
    files: dict[str, Path | bytes],
) -> str:
    """Write a revision of ``repo_id`` under ``root`` and point ``branch`` at it.

    Parameters
    ----------
    root
        The fake hub's root directory.
    repo_id
        ``"org/name"``.
    branch
        The branch or tag to move to the new revision (created if missing).
    files
        Repo path (``"data/train-00000-of-00001.parquet"``) to the file's bytes, or to a local
        file to copy.

    Returns
    -------
    str
        The revision's commit sha: 40 hex digits, the sha1 of the sorted paths and their
        contents' sha256, so publishing the same files twice gives the same sha.
    """
    contents = {
        path: (data if isinstance(data, bytes) else Path(data).read_bytes())
        for path, data in files.items()
    }
    digest = hashlib.sha1()
    for path in sorted(contents):
        digest.update(path.encode() + b"\0" + hashlib.sha256(contents[path]).digest())
    sha = digest.hexdigest()
    repo_dir = Path(root) / repo_id
    for path, data in contents.items():
        target = repo_dir / sha / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    set_ref(root, repo_id, branch, sha)
    return sha


def set_ref(root: str | os.PathLike[str], repo_id: str, ref: str, sha: str) -> None:
    """Point branch or tag ``ref`` of ``repo_id`` at ``sha`` (atomically rewrites ``refs.json``)."""
    repo_dir = Path(root) / repo_id
    repo_dir.mkdir(parents=True, exist_ok=True)
    refs_path = repo_dir / REFS_FILE
    refs = json.loads(refs_path.read_text()) if refs_path.exists() else {}
    refs[ref] = sha
    _write_json_atomic(refs_path, refs)


def write_faults(root: str | os.PathLike[str], faults: dict[str, Any]) -> None:
    """Replace ``ROOT/faults.json`` (``{}`` clears every fault)."""
    _write_json_atomic(Path(root) / FAULTS_FILE, faults)


def read_request_log(root: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """The ``(method, path)`` pairs the server has answered so far, oldest first."""
    log = Path(root) / REQUEST_LOG
    if not log.exists():
        return []
    lines = log.read_text().splitlines()
    return [(line.split(" ", 1)[0], line.split(" ", 1)[1]) for line in lines if " " in line]


def _write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------


def _git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Repo:
    """A repo directory; everything is read from disk on each request."""

    def __init__(self, root: Path, repo_id: str) -> None:
        self.repo_id = repo_id
        self.dir = root / repo_id

    def exists(self) -> bool:
        return (self.dir / REFS_FILE).is_file()

    def resolve(self, revision: str) -> str | None:
        refs = json.loads((self.dir / REFS_FILE).read_text())
        if revision in refs:
            return refs[revision]
        if len(revision) == 40 and (self.dir / revision).is_dir():
            return revision
        return None

    def files(self, sha: str) -> list[str]:
        base = self.dir / sha
        return sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())

    def path(self, sha: str, path: str) -> Path:
        return self.dir / sha / path


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _FakeHubServer

    # quiet: the request log file is the record
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_HEAD(self) -> None:  # noqa: N802
        self._handle("HEAD")

    def do_GET(self) -> None:  # noqa: N802
        self._handle("GET")

    # -- plumbing ---------------------------------------------------------

    def _handle(self, method: str) -> None:
        root = self.server.root
        with _LOCK:
            with open(root / REQUEST_LOG, "a") as log:
                log.write(f"{method} {self.path}\n")
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        faults = _Faults(root, method, path)

        if faults.delay:
            time.sleep(faults.delay)
        if faults.take("reset_times", "reset_match", "reset_method"):
            self.close_connection = True
            return
        if faults.get("down"):
            return self._error(503, "Hub is down (fault injection)")
        if faults.take("status_5xx_times", "status_match", "status_method"):
            return self._error(int(faults.get("status_code", 503)), "Injected server error")
        token = faults.get("require_token")
        if token and self.headers.get("Authorization") != f"Bearer {token}":
            return self._error(401, "Invalid username or password.", code="RepoNotFound")

        try:
            if path.rstrip("/") == "/api/datasets":
                return self._list(query)
            if path.startswith("/api/datasets/"):
                return self._api(path[len("/api/datasets/") :], query)
            if path.startswith("/datasets/"):
                return self._resolve(method, path[len("/datasets/") :], faults)
        except Exception as exc:  # a bug in the fake must show up as a 500, not a hang
            return self._error(500, f"fake hub error: {exc!r}")
        return self._error(404, "Not found")

    def _send(
        self, status: int, body: bytes, headers: dict[str, str], *, head: bool = False
    ) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, data: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(data).encode()
        self._send(200, body, {"Content-Type": "application/json", **(headers or {})})

    def _error(
        self, status: int, message: str, *, code: str | None = None, commit: str | None = None
    ) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        if commit:
            headers["X-Repo-Commit"] = commit
        self._send(
            status, json.dumps({"error": message}).encode(), headers, head=self.command == "HEAD"
        )

    def _split_repo(self, rest: str) -> tuple[_Repo | None, list[str]]:
        parts = rest.split("/")
        if len(parts) < 2:
            return None, []
        repo = _Repo(self.server.root, "/".join(parts[:2]))
        if not repo.exists():
            return None, parts[2:]
        return repo, parts[2:]

    # -- endpoints ------------------------------------------------------------

    def _api(self, rest: str, query: dict[str, list[str]]) -> None:
        repo, tail = self._split_repo(rest)
        if repo is None:
            return self._error(401, "Repository not found", code="RepoNotFound")
        if not tail:
            tail = ["revision", "main"]
        kind = tail[0]
        if kind not in ("revision", "tree") or len(tail) < 2:
            return self._error(404, "Not found")
        revision = tail[1]
        sha = repo.resolve(revision)
        if sha is None:
            return self._error(404, f"Invalid rev id: {revision}", code="RevisionNotFound")
        files = repo.files(sha)
        if kind == "revision":
            blobs = query.get("blobs", ["false"])[0].lower() == "true"
            return self._json(self._dataset_info(repo, sha, files, blobs=blobs))
        prefix = "/".join(tail[2:])
        recursive = query.get("recursive", ["false"])[0].lower() == "true"
        return self._json(self._tree(repo, sha, files, prefix, recursive=recursive))

    def _list(self, query: dict[str, list[str]]) -> None:
        author = query.get("author", [""])[0]
        searches = query.get("search", [])
        expand = set(query.get("expand", []))
        root = self.server.root
        out = []
        for refs in sorted(root.glob(f"*/*/{REFS_FILE}")):
            repo_id = refs.parent.relative_to(root).as_posix()
            if author and repo_id.split("/")[0] != author:
                continue
            if any(term not in repo_id for term in searches):
                continue
            item: dict[str, Any] = {"id": repo_id, "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24]}
            if "sha" in expand:
                item["sha"] = _Repo(root, repo_id).resolve("main")
            if not expand:
                item.update({"author": repo_id.split("/")[0], "private": False, "gated": False,
                             "lastModified": "2025-01-01T00:00:00.000Z", "downloads": 0, "likes": 0})
            out.append(item)
        return self._json(out)

    def _entry(self, repo: _Repo, sha: str, path: str) -> dict[str, Any]:
        data = repo.path(sha, path).read_bytes()
        return {
            "path": path,
            "size": len(data),
            "oid": _git_blob_oid(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }

    def _dataset_info(self, repo: _Repo, sha: str, files: list[str], *, blobs: bool) -> dict:
        siblings = []
        for path in files:
            if not blobs:
                siblings.append({"rfilename": path})
                continue
            entry = self._entry(repo, sha, path)
            siblings.append(
                {
                    "rfilename": path,
                    "size": entry["size"],
                    "blobId": entry["oid"],
                    "lfs": {"size": entry["size"], "sha256": entry["sha256"], "pointerSize": 134},
                }
            )
        return {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "sha": sha,
            "lastModified": "2025-01-01T00:00:00.000Z",
            "private": False,
            "gated": False,
            "disabled": False,
            "tags": [],
            "downloads": 0,
            "likes": 0,
            "siblings": siblings,
        }

    def _tree(
        self, repo: _Repo, sha: str, files: list[str], prefix: str, *, recursive: bool
    ) -> list:
        base = f"{prefix.rstrip('/')}/" if prefix else ""
        out: list[dict[str, Any]] = []
        seen_dirs: set[str] = set()
        for path in files:
            if not path.startswith(base):
                continue
            rel = path[len(base) :].split("/")
            if len(rel) > 1:
                dirs = range(1, len(rel)) if recursive else range(1, 2)
                for depth in dirs:
                    d = base + "/".join(rel[:depth])
                    if d not in seen_dirs:
                        seen_dirs.add(d)
                        oid = hashlib.sha1(d.encode()).hexdigest()
                        out.append({"type": "directory", "oid": oid, "size": 0, "path": d})
                if not recursive:
                    continue
            entry = self._entry(repo, sha, path)
            out.append(
                {
                    "type": "file",
                    "oid": entry["oid"],
                    "size": entry["size"],
                    "path": path,
                    "lfs": {"oid": entry["sha256"], "size": entry["size"], "pointerSize": 134},
                }
            )
        return out

    def _resolve(self, method: str, rest: str, faults: _Faults) -> None:
        repo, tail = self._split_repo(rest)
        if repo is None:
            return self._error(401, "Repository not found", code="RepoNotFound")
        if len(tail) < 3 or tail[0] != "resolve":
            return self._error(404, "Not found")
        revision, path = tail[1], "/".join(tail[2:])
        sha = repo.resolve(revision)
        if sha is None:
            return self._error(404, f"Invalid rev id: {revision}", code="RevisionNotFound")
        file = repo.path(sha, path)
        if not file.is_file():
            return self._error(404, "Entry not found", code="EntryNotFound", commit=sha)
        data = file.read_bytes()
        headers = {
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
            "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
            "X-Repo-Commit": sha,
        }
        if method == "HEAD":
            return self._send(200, data, headers, head=True)

        status, start = 200, 0
        range_header = self.headers.get("Range")
        if range_header and range_header.startswith("bytes="):
            first, _, last = range_header[len("bytes=") :].partition("-")
            start = int(first or 0)
            end = int(last) if last else len(data) - 1
            if start >= len(data):
                headers["Content-Range"] = f"bytes */{len(data)}"
                return self._send(416, b"", headers)
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            data = data[start : end + 1]

        if faults.take("truncate_times", "truncate_path", None):
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if faults.take("corrupt_times", "corrupt_path", None):
            data = bytes(b ^ 0xFF for b in data)
        return self._send(status, data, headers)


class _Faults:
    """The faults that apply to one request; ``take`` consumes one count of a fault."""

    def __init__(self, root: Path, method: str, path: str) -> None:
        self.file = root / FAULTS_FILE
        self.method = method
        self.path = path
        self.data = self._load()
        self.delay = float(self.data.get("delay_seconds", 0) or 0)
        if self.delay and self.data.get("delay_match", "") not in path:
            self.delay = 0.0

    def _load(self) -> dict[str, Any]:
        try:
            return json.loads(self.file.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def take(self, times_key: str, match_key: str, method_key: str | None) -> bool:
        """Whether the fault counted by ``times_key`` fires for this request (counting it down)."""
        if not self.data.get(times_key):
            return False
        if match_key and self.data.get(match_key, "") not in self.path:
            return False
        if method_key and self.data.get(method_key) not in (None, self.method):
            return False
        with _LOCK:
            current = self._load()  # re-read under the lock: another thread may have consumed it
            remaining = int(current.get(times_key) or 0)
            if remaining <= 0:
                return False
            current[times_key] = remaining - 1
            _write_json_atomic(self.file, current)
        return True


class _FakeHubServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        super().__init__(("127.0.0.1", port), _Handler)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, type=Path, help="directory holding the repos")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--port-file", type=Path, help="where to write the bound port once listening"
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    server = _FakeHubServer(root, args.port)
    port = server.server_address[1]
    if args.port_file is not None:
        tmp = args.port_file.with_name(args.port_file.name + ".tmp")
        tmp.write_text(str(port))
        os.replace(tmp, args.port_file)
    print(f"fake hub serving {root} on http://127.0.0.1:{port}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
