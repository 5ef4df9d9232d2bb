"""Download the dataset's parquet shards from the Hugging Face Hub into a sha-keyed local cache.

The cache holds one folder per commit, created in one atomic rename once every shard is downloaded,
checked and counted::

    <cache_dir>/<org>--<name>/<sha>/data/train-00000-of-00002.parquet
    <cache_dir>/<org>--<name>/<sha>/data/train-00001-of-00002.parquet
    <cache_dir>/<org>--<name>/<sha>/_manifest.json     sizes, sha256, row counts: present = complete
    <cache_dir>/<org>--<name>/.incomplete-<sha>-<id>/  a download in progress (removed on failure)

How the Hub is asked (``huggingface_hub`` 2.4):

* ``resolve_revision`` / ``latest_revision``: ``HfApi.dataset_info`` =
  ``GET {endpoint}/api/datasets/{repo}/revision/{rev}``, one request.
* ``list_shards``: ``HfApi.dataset_info(files_metadata=True)`` = the same URL with ``?blobs=true``,
  which lists every file with its size and LFS sha256 in one request (``list_repo_tree`` would do
  too, but it retries 5xx internally for up to ~23 s, outside this module's retry budget).
* each shard: ``get_hf_file_metadata`` = ``HEAD {endpoint}/datasets/{repo}/resolve/{sha}/{path}``
  (``X-Repo-Commit``, ``ETag``/``X-Linked-Etag``, size, CDN redirect), then
  ``file_download.http_get`` = ``GET`` of that location, which resumes a dropped transfer with
  ``Range`` by itself. This is what ``hf_hub_download`` does for a file that is not on Xet; it is
  called piece by piece so that retries stay bounded by :class:`RetryPolicy` (``hf_hub_download``
  retries a failing HEAD on its own 1-8 s schedule) and so that a file only enters the cache after
  ``verify`` has accepted it. Xet is not used: a file stored on Xet is fetched through the
  ``/resolve`` redirect over plain HTTP, as ``hf_hub_download`` does when ``hf_xet`` is missing.

``endpoint=None`` and ``token=None`` defer to ``huggingface_hub``: ``HF_ENDPOINT`` as it read it at
import time, and ``HF_TOKEN`` (or the stored login) at call time. Pass the endpoint explicitly from
configuration. The token only ever goes into request headers, never into a message or a log line.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx2
from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.file_download import http_get
from huggingface_hub.utils import build_hf_headers

logger = logging.getLogger(__name__)

T = TypeVar("T")

REPO_TYPE = "dataset"
TRAIN_SHARD_PATTERN = "data/train-*.parquet"
FALLBACK_SHARD_PATTERN = "*.parquet"
MANIFEST_NAME = "_manifest.json"
MANIFEST_FORMAT = 1
_STAGING_PREFIX = ".incomplete-"
_STALE_STAGING_SECONDS = 24 * 3600
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})

#: ``verify(path) -> row count``; raises when the file is not an acceptable shard.
VerifyFn = Callable[[Path], int]


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


class HubError(Exception):
    """Base class of every error raised by this module."""


class HubUnavailable(HubError):
    """The Hub could not be reached, or kept failing (refused, timeouts, 5xx), after retries.

    Transient: the same call may succeed later.
    """


class HubNotFound(HubError):
    """The repository, the revision (branch, tag, commit) or a listed file does not exist.

    Also raised for a private or gated repository the token does not open: the Hub answers both
    the same way.
    """


class DownloadFailed(HubUnavailable):
    """A shard could not be downloaded intact after retries; ``path`` names it (repo path)."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class ShardVerificationError(HubError):
    """``verify`` rejected a downloaded shard; ``path`` names it.

    Not retried: the bytes matched the Hub's sha256, so downloading them again would not help.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class NoShardsFound(HubError):
    """The revision holds no ``data/train-*.parquet`` file and no other ``*.parquet`` file."""


class _CorruptTransfer(Exception):
    """Bytes on disk differ from what the Hub announced (size or sha256): worth another attempt."""


class _RetriesExhausted(Exception):
    def __init__(self, attempts: int, last: BaseException) -> None:
        super().__init__(f"{attempts} attempt(s), last error: {_describe(last)}")
        self.attempts = attempts
        self.last = last


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try before giving up.

    Attributes
    ----------
    attempts
        Tries per request or per file (>= 1).
    backoff
        Seconds to wait after the first failure; doubled after each further failure.
    max_backoff
        Upper bound of one wait.
    timeout
        Seconds to wait for an API or HEAD answer. (File bodies use ``HF_HUB_DOWNLOAD_TIMEOUT``, and
        ``http_get`` resumes a dropped body by itself, waiting 1 s, up to 5 times without progress.)
    """

    attempts: int = 3
    backoff: float = 1.0
    max_backoff: float = 8.0
    timeout: float = 10.0


DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True)
class ShardInfo:
    """A parquet file of a revision, as the Hub lists it."""

    path: str  #: path in the repo, e.g. ``data/train-00000-of-00002.parquet``
    size: int  #: bytes
    sha256: str | None = None  #: LFS sha256, when the Hub gives it


@dataclass(frozen=True)
class ShardFile:
    """A shard in the local cache."""

    path: str  #: path in the repo
    local_path: Path  #: where it is on disk
    size: int  #: bytes
    rows: int | None  #: what ``verify`` returned; None when downloaded without ``verify``
    sha256: str | None  #: sha256 of the bytes on disk
    downloaded: bool  #: fetched by this call (False: served from the cache)


@dataclass(frozen=True)
class DownloadResult:
    """The outcome of :func:`download_dump`: one complete, verified revision in the cache."""

    repo_id: str
    revision: str  #: what was asked for (branch, tag or sha)
    sha: str  #: the commit it resolved to
    root: Path  #: ``<cache_dir>/<org>--<name>/<sha>``
    files: tuple[ShardFile, ...]

    @property
    def downloaded(self) -> int:
        """How many shards this call fetched (0 on a cache hit)."""
        return sum(f.downloaded for f in self.files)

    @property
    def from_cache(self) -> bool:
        """True when nothing was fetched."""
        return self.downloaded == 0

    @property
    def local_paths(self) -> list[Path]:
        return [f.local_path for f in self.files]

    @property
    def rows(self) -> int | None:
        """Total rows, or None if any shard was not counted."""
        counts = [f.rows for f in self.files]
        return None if any(c is None for c in counts) else sum(counts)  # type: ignore[misc]

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST_NAME


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def resolve_revision(
    repo_id: str,
    revision: str = "main",
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> str:
    """Return the commit sha a branch, tag or commit of a dataset repo points at.

    One ``GET /api/datasets/{repo}/revision/{revision}``, retried on transient failures.

    Parameters
    ----------
    repo_id
        ``"org/name"``, e.g. ``"lmarena-ai/arena-human-preference-140k"``.
    revision
        Branch, tag or commit sha.
    endpoint
        Hub base URL; None for ``huggingface_hub``'s default (``HF_ENDPOINT`` or huggingface.co).
    token
        Access token; None for ``HF_TOKEN`` / the stored login, False for none.
    retry
        Attempts, backoff and timeout.

    Returns
    -------
    str
        40 hex digits.

    Raises
    ------
    HubNotFound
        The repository or the revision does not exist (or is not visible with this token).
    HubUnavailable
        Connection refused, timeouts or 5xx on every attempt.
    HubError
        Any other refusal (e.g. 400).
    """
    _check_repo_id(repo_id)
    api = _api(endpoint, token)
    info = _hub_call(
        f"resolving {repo_id}@{revision}",
        lambda: api.dataset_info(repo_id, revision=revision, timeout=retry.timeout),
        retry,
        repo_id=repo_id,
        revision=revision,
    )
    sha = getattr(info, "sha", None)
    if not isinstance(sha, str) or not _COMMIT_RE.fullmatch(sha):
        raise HubError(f"the Hub answered for {repo_id}@{revision} without a commit sha: {sha!r}")
    return sha


def latest_revision(
    repo_id: str,
    revision: str = "main",
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> str:
    """The commit sha ``revision`` points at now: one API call, no download (for sensors).

    Same parameters, result and errors as :func:`resolve_revision`.
    """
    return resolve_revision(repo_id, revision, endpoint=endpoint, token=token, retry=retry)


def list_shards(
    repo_id: str,
    sha: str,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> list[ShardInfo]:
    """List the train split's parquet files of a revision, with their sizes.

    One ``GET /api/datasets/{repo}/revision/{sha}?blobs=true``. Files matching
    ``data/train-*.parquet`` are returned, sorted by path; when there are none, every ``*.parquet``.

    Parameters
    ----------
    repo_id, endpoint, token, retry
        As for :func:`resolve_revision`.
    sha
        The commit to list (a branch name works too, but then the listing may belong to a later
        commit than one resolved earlier).

    Returns
    -------
    list[ShardInfo]
        Possibly empty.

    Raises
    ------
    HubNotFound, HubUnavailable, HubError
        As for :func:`resolve_revision`.
    """
    _check_repo_id(repo_id)
    api = _api(endpoint, token)
    info = _hub_call(
        f"listing files of {repo_id}@{sha}",
        lambda: api.dataset_info(repo_id, revision=sha, files_metadata=True, timeout=retry.timeout),
        retry,
        repo_id=repo_id,
        revision=sha,
    )
    siblings = list(getattr(info, "siblings", None) or [])
    chosen = [s for s in siblings if fnmatch.fnmatchcase(s.rfilename, TRAIN_SHARD_PATTERN)]
    if not chosen:
        chosen = [s for s in siblings if fnmatch.fnmatchcase(s.rfilename, FALLBACK_SHARD_PATTERN)]
    shards = []
    for s in sorted(chosen, key=lambda s: s.rfilename):
        if s.size is None:
            raise HubError(f"the Hub listed {s.rfilename} of {repo_id}@{sha} without a size")
        sha256 = s.lfs.sha256 if s.lfs is not None else None
        shards.append(ShardInfo(path=s.rfilename, size=int(s.size), sha256=sha256))
    return shards


def download_dump(
    repo_id: str,
    revision: str,
    cache_dir: str | os.PathLike[str],
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    verify: VerifyFn | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> DownloadResult:
    """Make every train shard of a revision available locally, downloading only what is missing.

    Steps: resolve ``revision`` to a sha (skipped when ``revision`` is a full sha already cached);
    if ``<cache_dir>/<org>--<name>/<sha>/_manifest.json`` is complete, return it without any file
    request. Otherwise list the shards and download each into a staging folder, checking its size
    and sha256 against the listing and counting its rows with ``verify``; write the manifest; rename
    the staging folder to ``<sha>`` in one step. Any failure removes the staging folder, so a later
    run never trusts a partial download.

    Parameters
    ----------
    repo_id, endpoint, token, retry
        As for :func:`resolve_revision`; ``retry`` also applies to each file.
    revision
        Branch, tag or commit sha.
    cache_dir
        Root of the cache (created if missing).
    verify
        ``verify(path) -> rows``: opens a downloaded shard (still in staging), checks it and returns
        its row count; raises to reject it. Also run on cached shards whose row count is unknown.

    Returns
    -------
    DownloadResult
        ``files`` in path order; ``downloaded`` counts the shards fetched by this call.

    Raises
    ------
    HubNotFound
        Repository, revision or a listed file not found.
    HubUnavailable
        The Hub could not be reached while resolving or listing.
    DownloadFailed
        A shard kept failing (5xx, dropped connection, wrong size or sha256); a ``HubUnavailable``.
    ShardVerificationError
        ``verify`` rejected a shard.
    NoShardsFound
        The revision has no parquet file.
    """
    _check_repo_id(repo_id)
    cache_dir = Path(cache_dir)
    if _COMMIT_RE.fullmatch(revision):
        hit = cached_dump(cache_dir, repo_id, revision, verify=verify, revision=revision)
        if hit is not None:
            logger.info("%s@%s: cache hit at %s (no Hub request)", repo_id, revision[:12], hit.root)
            return hit

    sha = resolve_revision(repo_id, revision, endpoint=endpoint, token=token, retry=retry)
    hit = cached_dump(cache_dir, repo_id, sha, verify=verify, revision=revision)
    if hit is not None:
        logger.info("%s@%s is %s: cache hit at %s", repo_id, revision, sha[:12], hit.root)
        return hit

    shards = list_shards(repo_id, sha, endpoint=endpoint, token=token, retry=retry)
    if not shards:
        raise NoShardsFound(
            f"{repo_id}@{sha} holds no {TRAIN_SHARD_PATTERN} nor any *.parquet file"
        )

    repo_dir = cache_dir / _repo_dirname(repo_id)
    repo_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_staging(repo_dir)
    staging = repo_dir / f"{_STAGING_PREFIX}{sha}-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    logger.info(
        "%s@%s is %s: downloading %d shard(s), %d bytes",
        repo_id,
        revision,
        sha[:12],
        len(shards),
        sum(s.size for s in shards),
    )
    try:
        staged = [
            _download_shard(
                repo_id,
                sha,
                shard,
                staging,
                endpoint=endpoint,
                token=token,
                verify=verify,
                retry=retry,
            )
            for shard in shards
        ]
        _write_manifest(staging, repo_id=repo_id, sha=sha, revision=revision, files=staged)
        final = repo_dir / sha
        promoted = _promote(
            staging, final, is_complete=lambda: cached_dump(cache_dir, repo_id, sha) is not None
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    hit = cached_dump(cache_dir, repo_id, sha, verify=verify, revision=revision)
    if hit is None:  # pragma: no cover - only if the folder is deleted under our feet
        raise HubError(f"{final} vanished right after it was written")
    if not promoted:  # another process completed the same sha first; its copy is the cache entry
        return hit
    files = tuple(
        ShardFile(f.path, f.local_path, f.size, f.rows, f.sha256, downloaded=True)
        for f in hit.files
    )
    return DownloadResult(repo_id=repo_id, revision=revision, sha=sha, root=final, files=files)


def dump_dir(cache_dir: str | os.PathLike[str], repo_id: str, sha: str) -> Path:
    """``<cache_dir>/<org>--<name>/<sha>``: where :func:`download_dump` puts a revision."""
    _check_repo_id(repo_id)
    return Path(cache_dir) / _repo_dirname(repo_id) / sha


def cached_dump(
    cache_dir: str | os.PathLike[str],
    repo_id: str,
    sha: str,
    *,
    verify: VerifyFn | None = None,
    revision: str | None = None,
) -> DownloadResult | None:
    """The cached revision ``sha`` if it is complete, else None. No network.

    Complete means: the manifest exists, names this repo and sha, and every file it lists is on disk
    with the listed size. If ``verify`` is given and a shard's row count is unknown, it is counted
    now and the manifest updated.

    Raises
    ------
    ShardVerificationError
        ``verify`` rejected a cached shard.
    """
    root = dump_dir(cache_dir, repo_id, sha)
    manifest = _read_manifest(root / MANIFEST_NAME)
    if (
        manifest is None
        or manifest.get("format") != MANIFEST_FORMAT
        or manifest.get("repo_id") != repo_id
        or manifest.get("sha") != sha
        or manifest.get("complete") is not True
        or not manifest.get("files")
    ):
        return None
    files = []
    for entry in manifest["files"]:
        local = root / entry["path"]
        try:
            if local.stat().st_size != entry["size"]:
                logger.warning("%s: size differs from the manifest; not a cache hit", local)
                return None
        except FileNotFoundError:
            logger.warning("%s: missing; not a cache hit", local)
            return None
        files.append(entry)
    if verify is not None and any(e.get("rows") is None for e in files):
        for entry in files:
            if entry.get("rows") is None:
                entry["rows"] = _run_verify(verify, root / entry["path"], entry["path"])
        _write_json_atomic(root / MANIFEST_NAME, manifest)
    return DownloadResult(
        repo_id=repo_id,
        revision=revision or sha,
        sha=sha,
        root=root,
        files=tuple(
            ShardFile(
                path=e["path"],
                local_path=root / e["path"],
                size=e["size"],
                rows=e.get("rows"),
                sha256=e.get("sha256"),
                downloaded=False,
            )
            for e in files
        ),
    )


# ---------------------------------------------------------------------------
# Internals
# ---------------------------------------------------------------------------


def _api(endpoint: str | None, token: str | bool | None) -> HfApi:
    return HfApi(endpoint=endpoint.rstrip("/") if endpoint else None, token=token)


def _check_repo_id(repo_id: str) -> None:
    if not _REPO_ID_RE.fullmatch(repo_id) or ".." in repo_id:
        raise ValueError(f"repo_id must look like 'org/name', got {repo_id!r}")


def _repo_dirname(repo_id: str) -> str:
    return repo_id.replace("/", "--")


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, (RepositoryNotFoundError, RevisionNotFoundError, RemoteEntryNotFoundError)):
        return False
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else None
        return status in _TRANSIENT_STATUS
    return isinstance(exc, (httpx2.TransportError, _CorruptTransfer))


def _with_retries(what: str, fn: Callable[[], T], retry: RetryPolicy) -> T:
    """Call ``fn``; on a transient error wait and call again, ``retry.attempts`` times in all."""
    delay = retry.backoff
    attempts = max(1, retry.attempts)
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - classified just below
            if not _is_transient(exc):
                raise
            if attempt == attempts:
                raise _RetriesExhausted(attempts, exc) from exc
            logger.warning(
                "%s failed (attempt %d/%d: %s); retrying in %.1fs",
                what,
                attempt,
                attempts,
                _describe(exc),
                delay,
            )
            time.sleep(delay)
            delay = min(delay * 2, retry.max_backoff)
    raise AssertionError("unreachable")  # pragma: no cover


def _hub_call(
    what: str, fn: Callable[[], T], retry: RetryPolicy, *, repo_id: str, revision: str
) -> T:
    """``_with_retries`` with huggingface_hub's errors turned into this module's."""
    try:
        return _with_retries(what, fn, retry)
    except GatedRepoError as exc:
        raise HubNotFound(
            f"{what}: {repo_id} is gated and the token does not grant access"
        ) from exc
    except RepositoryNotFoundError as exc:
        raise HubNotFound(
            f"{what}: repository {repo_id} not found "
            "(or private and the token does not grant access)"
        ) from exc
    except RevisionNotFoundError as exc:
        raise HubNotFound(f"{what}: revision {revision!r} not found in {repo_id}") from exc
    except RemoteEntryNotFoundError as exc:
        raise HubNotFound(f"{what}: not found in {repo_id}@{revision}") from exc
    except OfflineModeIsEnabled as exc:
        raise HubUnavailable(f"{what}: HF_HUB_OFFLINE is set") from exc
    except _RetriesExhausted as exc:
        raise HubUnavailable(f"{what}: Hub unavailable after {exc}") from exc.last
    except HfHubHTTPError as exc:
        raise HubError(f"{what}: {_describe(exc)}") from exc


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fetch_once(
    repo_id: str,
    sha: str,
    shard: ShardInfo,
    dest: Path,
    *,
    endpoint: str | None,
    token: str | bool | None,
    timeout: float,
) -> str:
    """One attempt: HEAD, GET into ``dest`` (overwritten), check size and sha256; return sha256."""
    url = hf_hub_url(repo_id, shard.path, repo_type=REPO_TYPE, revision=sha, endpoint=endpoint)
    meta = get_hf_file_metadata(url, token=token, timeout=timeout, endpoint=endpoint)
    if meta.commit_hash is None:
        raise HubError(
            f"{url} answered without an X-Repo-Commit header: "
            "the endpoint is not a Hugging Face Hub"
        )
    if meta.commit_hash != sha:
        raise HubError(f"{url} is served from commit {meta.commit_hash}, expected {sha}")
    expected_sha256 = shard.sha256 or (
        meta.etag if meta.etag and _SHA256_RE.fullmatch(meta.etag) else None
    )
    headers = build_hf_headers(token=token, library_name="arena_pipeline")
    location = meta.location or url
    if _origin(location) != _origin(url):
        headers.pop("authorization", None)  # signed CDN URL: the token stays on the Hub
    with open(dest, "wb") as f:
        try:
            http_get(
                location,
                f,
                headers=headers,
                expected_size=shard.size,
                displayed_filename=shard.path,
            )
        except OSError as exc:
            if isinstance(exc, HfHubHTTPError) or not str(exc).startswith(
                "Consistency check failed"
            ):
                raise
            raise _CorruptTransfer(str(exc).splitlines()[0]) from exc
        f.flush()
        os.fsync(f.fileno())
    size = dest.stat().st_size
    if size != shard.size:
        raise _CorruptTransfer(f"{shard.path}: got {size} bytes, the Hub lists {shard.size}")
    digest = _sha256_file(dest)
    if expected_sha256 is not None and digest != expected_sha256:
        raise _CorruptTransfer(
            f"{shard.path}: sha256 {digest} differs from the Hub's {expected_sha256}"
        )
    return digest


def _run_verify(verify: VerifyFn, local: Path, path: str) -> int:
    try:
        rows = verify(local)
    except Exception as exc:
        raise ShardVerificationError(
            f"{path} failed verification: {_describe(exc)}", path=path
        ) from exc
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise ShardVerificationError(
            f"{path}: verify returned {rows!r}, expected a row count", path=path
        )
    return rows


def _download_shard(
    repo_id: str,
    sha: str,
    shard: ShardInfo,
    staging: Path,
    *,
    endpoint: str | None,
    token: str | bool | None,
    verify: VerifyFn | None,
    retry: RetryPolicy,
) -> dict[str, Any]:
    dest = staging / shard.path
    dest.parent.mkdir(parents=True, exist_ok=True)
    what = f"downloading {shard.path} of {repo_id}@{sha[:12]}"
    try:
        digest = _with_retries(
            what,
            lambda: _fetch_once(
                repo_id, sha, shard, dest, endpoint=endpoint, token=token, timeout=retry.timeout
            ),
            retry,
        )
    except _RetriesExhausted as exc:
        raise DownloadFailed(f"{what} failed after {exc}", path=shard.path) from exc.last
    except (RepositoryNotFoundError, RevisionNotFoundError, RemoteEntryNotFoundError) as exc:
        raise HubNotFound(f"{what}: {_describe(exc)}") from exc
    except OfflineModeIsEnabled as exc:
        raise HubUnavailable(f"{what}: HF_HUB_OFFLINE is set") from exc
    except HfHubHTTPError as exc:
        raise HubError(f"{what}: {_describe(exc)}") from exc
    rows = _run_verify(verify, dest, shard.path) if verify is not None else None
    logger.info("%s: %d bytes, %s rows", shard.path, shard.size, rows if rows is not None else "?")
    return {"path": shard.path, "size": shard.size, "sha256": digest, "rows": rows}


def _write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _write_manifest(
    staging: Path, *, repo_id: str, sha: str, revision: str, files: list[dict[str, Any]]
) -> None:
    _write_json_atomic(
        staging / MANIFEST_NAME,
        {
            "format": MANIFEST_FORMAT,
            "repo_id": repo_id,
            "sha": sha,
            "revision": revision,
            "downloaded_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "complete": True,
            "files": files,
        },
    )


def _read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        logger.warning("%s is unreadable; not a cache hit", path)
        return None
    return data if isinstance(data, dict) else None


def _promote(staging: Path, final: Path, *, is_complete: Callable[[], bool]) -> bool:
    """Rename ``staging`` to ``final`` in one step; False if a complete ``final`` was there."""
    try:
        os.rename(staging, final)
        return True
    except OSError:
        if not final.exists():
            raise
    if is_complete():
        return False  # another process completed the same sha: keep its copy
    # an incomplete or damaged entry (e.g. a file deleted by hand): move it aside, take its place
    trash = final.with_name(f"{_STAGING_PREFIX}{final.name}-stale-{uuid.uuid4().hex[:8]}")
    os.rename(final, trash)
    os.rename(staging, final)
    shutil.rmtree(trash, ignore_errors=True)
    return True


def _remove_stale_staging(repo_dir: Path) -> None:
    """Remove staging folders left by killed processes (older than a day)."""
    cutoff = time.time() - _STALE_STAGING_SECONDS
    for entry in repo_dir.glob(f"{_STAGING_PREFIX}*"):
        try:
            if entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
        except FileNotFoundError:
            pass
