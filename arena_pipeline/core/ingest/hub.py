"""Fetch a dataset revision's shards with huggingface_hub's downloader, verified before use.

``hf_hub_download`` fills its cache under ``cache_dir`` (HEAD, lock, ``Range`` resume, Xet, token
kept off CDNs, blobs shared across revisions); ``endpoint``/``token`` None defer to huggingface_hub
(``HF_ENDPOINT``, ``HF_TOKEN`` or the stored login); the token goes into headers only. Added here:

* Verification: size and sha256 as the Hub lists them, then ``verify`` (parquet footer, schema); a
  failing file is evicted. A verified revision gets a record (``arena_verified/<sha>.json`` in the
  repository's cache folder): a cached sha needs no request, a branch one.
* One bounded :class:`RetryPolicy` over huggingface_hub's own resume of a body and retries of a
  file's HEAD (5 each; a HEAD it gave up on is not retried again), and errors that say what to do
  (:data:`OFFLINE_HINT`) without the library's exception chain. One ``dataset_info`` lists the
  files: ``snapshot_download`` retries 5xx for ~23 s by itself and its ``allow_patterns`` cannot
  express the fallback of :data:`SHARD_PATTERNS`.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import httpx2
from huggingface_hub import HfApi, constants, hf_hub_download
from huggingface_hub.errors import (
    FileMetadataError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.file_download import repo_folder_name

from arena_pipeline.core.dataset.manifest import DumpManifest, ShardFile
from arena_pipeline.core.ingest.sources import SourceError, file_sha256, file_stamp, verify_shard
from arena_pipeline.core.store.atomic import write_text_atomic

logger = logging.getLogger(__name__)

T = TypeVar("T")

REPO_TYPE = "dataset"
#: a revision's shards: the first pattern with a match (``*.csv``: the 55k Kaggle CSV-only dump)
SHARD_PATTERNS = ("data/train-*.parquet", "*.parquet", "*.csv")
RECORDS_DIR = "arena_verified"
RECORD_FORMAT = 1
OFFLINE_HINT = ("Offline? Set ARENA_SOURCE to a local copy (a folder of parquet shards, a .parquet "
                "or a .csv file) or HF_ENDPOINT to a reachable Hub mirror.")
_STALE_PARTIAL_SECONDS = 24 * 3600
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})

VerifyFn = Callable[[Path], int]  #: ``verify(path) -> row count``; raises to reject the file


class HubError(Exception):
    """This module's errors; ``transient``: may succeed later; ``path``: the shard, if any."""

    transient = False

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class HubUnavailable(HubError):
    """The Hub could not be reached, or kept failing (refused, timeouts, 5xx), after the retries."""

    transient = True


class HubNotFound(HubError):
    """The repository, revision or a listed file does not exist (or the token does not open it)."""


class DownloadFailed(HubUnavailable):
    """A shard could not be downloaded after the retries; ``path`` names it."""


class ShardVerificationError(HubError, SourceError):
    """A shard never matched the Hub's size and sha256, or ``verify`` rejected it (don't retry);
    ``sha``: the commit if ``verify`` did (the dump itself is bad), None for a bad transfer."""

    def __init__(self, message: str, *, path: str | None = None, sha: str | None = None) -> None:
        super().__init__(message, path=path)
        self.sha = sha


class NoShardsFound(HubError):
    """The revision holds no file matching any of :data:`SHARD_PATTERNS`."""


class _CorruptTransfer(Exception):
    """Bytes on disk differ from what the Hub lists (size or sha256): worth another attempt."""


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` per request or file (>= 1); a first wait of ``backoff`` seconds, doubled after
    each failure up to ``max_backoff``; ``timeout`` seconds per API or HEAD answer."""

    attempts: int = 3
    backoff: float = 1.0
    max_backoff: float = 8.0
    timeout: float = 10.0


DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True)
class ShardInfo:
    """A shard of a revision, as the Hub lists it."""

    path: str  #: path in the repo, e.g. ``data/train-00000-of-00002.parquet``
    size: int  #: bytes
    sha256: str | None = None  #: LFS sha256, when the Hub gives it


def resolve_revision(repo_id: str, revision: str = "main", *, endpoint: str | None = None,
                     token: str | bool | None = None, retry: RetryPolicy = DEFAULT_RETRY) -> str:
    """The commit sha a branch, tag or commit points at (``GET /api/datasets/{repo}/revision/{r}``).

    Raises :class:`HubNotFound` (no such repository or revision, or not visible with this token),
    :class:`HubUnavailable` (refused, timeouts or 5xx on every attempt) or :class:`HubError`.
    """
    _check_repo_id(repo_id)
    info = _call(f"resolving {repo_id}@{revision}", lambda: _api(endpoint, token).dataset_info(
        repo_id, revision=revision, timeout=retry.timeout), retry, endpoint, repo_id, revision)
    sha = getattr(info, "sha", None)
    if not isinstance(sha, str) or not _COMMIT_RE.fullmatch(sha):
        raise HubError(f"the Hub answered for {repo_id}@{revision} without a commit sha: {sha!r}")
    return sha


def discover_datasets(pattern: str, *, endpoint: str | None = None, token: str | bool | None = None,
                      retry: RetryPolicy = DEFAULT_RETRY) -> dict[str, str]:
    """The datasets whose id matches ``pattern`` (``org/name-glob``) and their main commit sha.

    One ``list_datasets(author=org, search=<name up to the first wildcard>, expand=["sha"])``
    (paginated by huggingface_hub), then ``fnmatch`` on the ids; a dataset listed without a sha is
    resolved on its own. Errors as for :func:`resolve_revision`.
    """
    org, _, name = pattern.partition("/")
    if not org or not name or any(c in org for c in "*?["):
        raise ValueError("a discovery pattern is <org>/<name pattern>, e.g. lmarena-ai/arena-*: "
                         f"got {pattern!r}")
    search = re.split(r"[*?\[]", name, maxsplit=1)[0]
    found = _call(f"listing datasets of {org} matching {name}", lambda: [
        (d.id, getattr(d, "sha", None)) for d in _api(endpoint, token).list_datasets(
            author=org, search=search or None, expand=["sha"])], retry, endpoint, pattern, "main")
    out = {}
    for repo_id, sha in sorted(found):
        if fnmatch.fnmatchcase(repo_id, pattern):
            listed = isinstance(sha, str) and _COMMIT_RE.fullmatch(sha)
            out[repo_id] = sha if listed else resolve_revision(repo_id, endpoint=endpoint,
                                                               token=token, retry=retry)
    return out


def list_shards(repo_id: str, sha: str, *, endpoint: str | None = None,
                token: str | bool | None = None,
                retry: RetryPolicy = DEFAULT_RETRY) -> list[ShardInfo]:
    """A revision's files matching the first of :data:`SHARD_PATTERNS` that matches any, with size
    and sha256, sorted: ``GET /api/datasets/{repo}/revision/{sha}?blobs=true``. Errors as for
    :func:`resolve_revision`."""
    _check_repo_id(repo_id)
    info = _call(f"listing files of {repo_id}@{sha}", lambda: _api(endpoint, token).dataset_info(
        repo_id, revision=sha, files_metadata=True, timeout=retry.timeout), retry, endpoint,
        repo_id, sha)
    siblings = sorted(getattr(info, "siblings", None) or [], key=lambda s: s.rfilename)
    for pattern in SHARD_PATTERNS:
        if chosen := [s for s in siblings if fnmatch.fnmatchcase(s.rfilename, pattern)]:
            break
    if unsized := [s.rfilename for s in chosen if s.size is None]:
        raise HubError(f"the Hub listed {unsized[0]} of {repo_id}@{sha} without a size")
    return [ShardInfo(s.rfilename, int(s.size), s.lfs.sha256 if s.lfs else None) for s in chosen]


def download_dump(repo_id: str, revision: str, cache_dir: str | os.PathLike[str], *,
                  endpoint: str | None = None, token: str | bool | None = None,
                  verify: VerifyFn = verify_shard,
                  retry: RetryPolicy = DEFAULT_RETRY) -> DumpManifest:
    """Every shard of a revision in the cache and verified, fetching only what is missing.

    A cached full sha needs no request; else the revision is resolved and, on a miss, listed, each
    shard fetched (or linked to a blob the cache holds) and checked, then the record written.
    Files are in path order. Raises :func:`resolve_revision`'s errors, :class:`DownloadFailed`,
    :class:`ShardVerificationError` and :class:`NoShardsFound`.
    """
    if _COMMIT_RE.fullmatch(revision) and (hit := cached_dump(cache_dir, repo_id, revision)):
        logger.info("%s@%s: cache hit (no Hub request)", repo_id, revision[:12])
        return hit
    sha = resolve_revision(repo_id, revision, endpoint=endpoint, token=token, retry=retry)
    if hit := cached_dump(cache_dir, repo_id, sha, revision=revision):
        logger.info("%s@%s is %s: cache hit", repo_id, revision, sha[:12])
        return hit
    shards = list_shards(repo_id, sha, endpoint=endpoint, token=token, retry=retry)
    if not shards:
        raise NoShardsFound(f"{repo_id}@{sha} holds no {' nor '.join(SHARD_PATTERNS)}")
    logger.info("%s@%s is %s: fetching %d shard(s), %d bytes", repo_id, revision, sha[:12],
                len(shards), sum(s.size for s in shards))
    _remove_stale_partials(_repo_dir(cache_dir, repo_id))
    files = tuple(_fetch_shard(repo_id, sha, s, cache_dir, endpoint=endpoint, token=token,
                               verify=verify, retry=retry) for s in shards)
    _write_record(cache_dir, repo_id, sha, files)
    return DumpManifest("hub", repo_id, revision, sha, files)


def cached_dump(cache_dir: str | os.PathLike[str], repo_id: str, sha: str, *,
                revision: str | None = None) -> DumpManifest | None:
    """The verified revision ``sha`` from the cache, or None if it has no record or a file it lists
    is missing or has another size. No network, no hashing."""
    repo_dir = _repo_dir(cache_dir, repo_id)
    path = repo_dir / RECORDS_DIR / f"{sha}.json"
    try:
        record = json.loads(path.read_text())
        if [record.get(k) for k in ("format", "repo_id", "sha")] != [RECORD_FORMAT, repo_id, sha]:
            return None
        files = tuple(ShardFile(str(repo_dir / "snapshots" / sha / e["path"]), e["path"], e["size"],
                                e["rows"], e["sha256"]) for e in record["files"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        logger.warning("%s is unreadable; not a cache hit", path)
        return None
    for f in files:
        if not os.path.isfile(f.path) or os.path.getsize(f.path) != f.size:
            logger.warning("%s is missing or not the size verified; not a cache hit", f.path)
            return None
    return DumpManifest("hub", repo_id, revision or sha, sha, files) if files else None


def _api(endpoint: str | None, token: str | bool | None) -> HfApi:
    return HfApi(endpoint=endpoint.rstrip("/") if endpoint else None, token=token)


def _check_repo_id(repo_id: str) -> None:
    if not _REPO_ID_RE.fullmatch(repo_id) or ".." in repo_id:
        raise ValueError(f"repo_id must look like 'org/name', got {repo_id!r}")


def _repo_dir(cache_dir: str | os.PathLike[str], repo_id: str) -> Path:
    """The repository's folder in the cache, ``cache_dir`` resolved as ``hf_hub_download`` does."""
    _check_repo_id(repo_id)
    folder = repo_folder_name(repo_id=repo_id, repo_type=REPO_TYPE)
    return Path(cache_dir).expanduser().resolve() / folder


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, (_CorruptTransfer, httpx2.TransportError)):
        return True
    if isinstance(exc, (RepositoryNotFoundError, RevisionNotFoundError, RemoteEntryNotFoundError,
                        LocalEntryNotFoundError)):
        return False  # not found, or huggingface_hub already retried the HEAD on its own schedule
    if isinstance(exc, HfHubHTTPError):
        return exc.response is not None and exc.response.status_code in _TRANSIENT_STATUS
    # huggingface_hub's size check after its own resume attempts
    return isinstance(exc, OSError) and str(exc).startswith("Consistency check failed")


def _call(what: str, fn: Callable[[], T], retry: RetryPolicy, endpoint: str | None, repo_id: str,
          revision: str, path: str | None = None) -> T:
    """``fn()`` under the one retry and error policy: a transient error (refused, timeouts,
    408/429/5xx, a corrupt transfer) is retried, ``retry.attempts`` calls in all, the wait doubling
    from ``retry.backoff`` up to ``retry.max_backoff``; then, or on any other huggingface_hub error,
    this module's error is raised, naming ``what`` and the endpoint, without the library's chain."""
    where = f"{what} from {(endpoint or constants.ENDPOINT).rstrip('/')}"
    unavailable = DownloadFailed if path else HubUnavailable
    delay, attempts = retry.backoff, max(1, retry.attempts)
    try:
        for attempt in range(1, attempts + 1):
            try:
                return fn()
            except Exception as exc:  # classified just below: re-raised unless transient
                if not _is_transient(exc):
                    raise
                if attempt == attempts:
                    tries = f"{attempts} attempt(s), last error: {_describe(exc)}"
                    if isinstance(exc, _CorruptTransfer):
                        raise ShardVerificationError(f"{where}: the bytes never matched the "
                                                     f"Hub's size and sha256 in {tries}",
                                                     path=path) from None
                    raise unavailable(f"{where}: Hub unavailable after {tries}. {OFFLINE_HINT}",
                                      path=path) from None
                logger.warning("%s failed (attempt %d/%d: %s); retrying in %.1fs", what, attempt,
                               attempts, _describe(exc), delay)
                time.sleep(delay)
                delay = min(delay * 2, retry.max_backoff)
    except GatedRepoError:
        raise HubNotFound(f"{where}: {repo_id} is gated and the token does not open it") from None
    except RepositoryNotFoundError:
        raise HubNotFound(f"{where}: repository {repo_id} not found "
                          "(or private and the token does not grant access)") from None
    except RevisionNotFoundError:
        raise HubNotFound(f"{where}: revision {revision!r} not found in {repo_id}") from None
    except RemoteEntryNotFoundError:
        raise HubNotFound(f"{where}: not found in {repo_id}@{revision}", path=path) from None
    except OfflineModeIsEnabled:
        raise unavailable(f"{where}: HF_HUB_OFFLINE is set. {OFFLINE_HINT}", path=path) from None
    except LocalEntryNotFoundError as exc:  # hf_hub_download gave up on the file's HEAD
        cause = exc.__cause__ or exc
        if isinstance(cause, FileMetadataError):
            raise HubError(f"{where}: {cause} (is it a Hugging Face Hub?)", path=path) from None
        raise unavailable(f"{where}: Hub unavailable after huggingface_hub's own retries, last "
                          f"error: {_describe(cause)}. {OFFLINE_HINT}", path=path) from None
    except HfHubHTTPError as exc:
        raise HubError(f"{where}: {_describe(exc)}", path=path) from None


def _evict(local: str | os.PathLike[str]) -> None:
    """Remove a snapshot entry and the blob it points at."""
    for path in (os.path.realpath(local), local):
        Path(path).unlink(missing_ok=True)


def _fetch_shard(repo_id: str, sha: str, shard: ShardInfo, cache_dir: str | os.PathLike[str], *,
                 endpoint: str | None, token: str | bool | None, verify: VerifyFn,
                 retry: RetryPolicy) -> ShardFile:
    """One shard in the cache, its size and sha256 as listed, accepted by ``verify``."""
    what = f"downloading {shard.path} of {repo_id}@{sha[:12]}"
    repo_dir = _repo_dir(cache_dir, repo_id)
    entry = repo_dir / "snapshots" / sha / shard.path  # where hf_hub_download puts the file
    if entry.is_file() and entry.stat().st_size != shard.size:
        _evict(entry)  # damaged since: hf_hub_download would serve it as it is
    # blobs are named by their ETag, the sha256 for LFS files: one another revision holds is linked
    held = entry.is_file() or bool(shard.sha256 and (repo_dir / "blobs" / shard.sha256).is_file())

    def once() -> tuple[str, str]:
        local = hf_hub_download(repo_id, shard.path, repo_type=REPO_TYPE, revision=sha,
                                cache_dir=repo_dir.parent, endpoint=endpoint, token=token,
                                etag_timeout=retry.timeout)
        if Path(local) != entry:
            raise HubError(f"{what}: the endpoint served {local}, not commit {sha}")
        stamp = file_stamp(local)  # before the hash: a write after it changes the stamp
        size, digest = os.path.getsize(local), file_sha256(local)
        if size != shard.size or (shard.sha256 is not None and digest != shard.sha256):
            _evict(local)
            raise _CorruptTransfer(f"{shard.path}: {size} bytes with sha256 {digest}, the Hub "
                                   f"lists {shard.size} bytes with sha256 {shard.sha256}")
        return local, digest, stamp

    local, digest, stamp = _call(what, once, retry, endpoint, repo_id, sha, path=shard.path)
    try:
        rows = verify(Path(local))
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise ValueError(f"verify returned {rows!r}, expected a row count")
    except Exception as exc:  # noqa: BLE001 - whatever verify raises rejects the file
        _evict(local)
        raise ShardVerificationError(f"{shard.path} of {repo_id}@{sha[:12]} failed verification: "
                                     f"{_describe(exc)}", path=shard.path, sha=sha) from None
    logger.info("%s: %d bytes, %d rows%s", shard.path, shard.size, rows, " (cached)" * held)
    return ShardFile(local, shard.path, shard.size, rows, digest, downloaded=not held, stamp=stamp)


def _write_record(cache_dir: str | os.PathLike[str], repo_id: str, sha: str,
                  files: tuple[ShardFile, ...]) -> None:
    """Write the revision's record atomically: from then on it is a cache hit."""
    record = {"format": RECORD_FORMAT, "repo_id": repo_id, "sha": sha,
              "verified_at": datetime.now(UTC).isoformat(timespec="seconds"),
              "files": [{"path": f.name, "size": f.size, "sha256": f.sha256, "rows": f.rows}
                        for f in files]}
    write_text_atomic(_repo_dir(cache_dir, repo_id) / RECORDS_DIR / f"{sha}.json", json.dumps(record, indent=2))


def _remove_stale_partials(repo_dir: Path) -> None:
    """Remove partial downloads (``blobs/*.incomplete``) that killed processes left a day ago:
    huggingface_hub removes its process-unique ``<etag>.<8 hex>.incomplete`` when a download
    raises, but never resumes nor removes one a killed process left (``hf cache prune`` does)."""
    cutoff = time.time() - _STALE_PARTIAL_SECONDS
    for partial in repo_dir.glob("blobs/*.incomplete"):
        with suppress(FileNotFoundError):
            if partial.stat().st_mtime < cutoff:
                partial.unlink()
