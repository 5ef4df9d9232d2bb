"""arena_pipeline.core.ingest.hub against the fake Hub (a subprocess on 127.0.0.1, stopped by PID)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import io
import json
import logging
import socket
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arena_pipeline.core.dataset.manifest import DumpManifest
from arena_pipeline.core.dataset.schema import DATASET_ARROW_SCHEMA
from arena_pipeline.core.ingest import hub
from arena_pipeline.core.ingest.sources import SourceError
from arena_pipeline_dev.hub_server import FakeHub, fake_hub_server, verified_revisions

pytestmark = pytest.mark.slow

REPO = "lmarena-ai/arena-human-preference-140k"
SHARD_0 = "data/train-00000-of-00002.parquet"
SHARD_1 = "data/train-00001-of-00002.parquet"
FAST = hub.RetryPolicy(attempts=3, backoff=0.05, max_backoff=0.2, timeout=2.0)


def _turn(role: str, text: str) -> dict:
    return {
        "role": role,
        "content": [{"type": "text", "text": text, "image": None, "mimeType": None}],
    }


def shard_bytes(n_rows: int, *, start: int = 0) -> bytes:
    """A parquet file with the dataset card's schema and ``n_rows`` small votes."""
    rows = []
    for i in range(start, start + n_rows):
        user, answer = _turn("user", f"question {i}"), _turn("assistant", f"answer {i}")
        rows.append(
            {
                "id": f"id-{i}",
                "model_a": "model-x",
                "model_b": "model-y",
                "winner": "model_a" if i % 2 else "tie",
                "evaluation_session_id": f"session-{i}",
                "evaluation_order": 1,
                "conversation_a": [user, answer],
                "conversation_b": [dict(user, num_tokens=3), dict(answer, num_tokens=4)],
                "full_conversation": [
                    {"user": user, "model_side_a": answer, "model_side_b": answer}
                ],
                "language": "en",
                "is_code": False,
                "timestamp": dt.datetime(2025, 6, 1, 12, 0, i % 60),
            }
        )
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=DATASET_ARROW_SCHEMA), buf)
    return buf.getvalue()


def verify(path: Path) -> int:
    schema = pq.read_schema(path)
    if not schema.equals(DATASET_ARROW_SCHEMA):
        raise ValueError(f"{path.name}: schema differs from the dataset card")
    return pq.ParquetFile(path).metadata.num_rows


def two_shards(start: int = 0) -> dict[str, bytes]:
    return {
        SHARD_0: shard_bytes(3, start=start),
        SHARD_1: shard_bytes(2, start=start + 3),
        "README.md": b"---\nlicense: cc-by-4.0\n---\n",
    }


@pytest.fixture
def fake(tmp_path: Path):
    with fake_hub_server(tmp_path / "hub") as server:
        yield server


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def download(fake: FakeHub, cache: Path, revision: str = "main", **kw) -> DumpManifest:
    kw.setdefault("verify", verify)
    kw.setdefault("retry", FAST)
    return hub.download_dump(REPO, revision, cache, endpoint=fake.url, token=False, **kw)


REPO_CACHE = "datasets--lmarena-ai--arena-human-preference-140k"


def cache_entries(cache: Path) -> list[str]:
    """The revisions a later run would trust, after checking that no blob holds damaged bytes."""
    for blob in (cache / REPO_CACHE / "blobs").glob("*"):
        # LFS blobs are named by their sha256 (the Hub's ETag); partial downloads never stay
        assert blob.name == hashlib.sha256(blob.read_bytes()).hexdigest(), blob
    return verified_revisions(cache, REPO)


# ---------------------------------------------------------------------------
# Happy paths
# ---------------------------------------------------------------------------


def test_first_download_lands_under_the_sha_with_a_record(fake: FakeHub, cache: Path) -> None:
    files = two_shards()
    sha = fake.publish(REPO, "main", files)

    result = download(fake, cache)

    root = cache / REPO_CACHE / "snapshots" / sha
    assert (result.source_kind, result.source) == ("hub", REPO)
    assert result.revision == sha and result.requested_revision == "main"
    assert [f.name for f in result.files] == [SHARD_0, SHARD_1]  # README.md is not a shard
    assert [f.rows for f in result.files] == [3, 2] and result.rows == 5
    assert result.downloaded == 2
    for f in result.files:
        assert Path(f.path) == root / f.name
        assert Path(f.path).read_bytes() == files[f.name]
        assert f.sha256 == hashlib.sha256(files[f.name]).hexdigest()
        assert f.size == len(files[f.name])
    record = json.loads((cache / REPO_CACHE / hub.RECORDS_DIR / f"{sha}.json").read_text())
    assert record["sha"] == sha and record["repo_id"] == REPO
    assert [(e["path"], e["size"], e["rows"]) for e in record["files"]] == [
        (SHARD_0, len(files[SHARD_0]), 3),
        (SHARD_1, len(files[SHARD_1]), 2),
    ]
    assert cache_entries(cache) == [sha]
    assert not list((cache / REPO_CACHE / "blobs").glob("*.incomplete"))  # nothing partial left
    assert hub.cached_dump(cache, REPO, sha) == dataclasses.replace(
        result,
        requested_revision=sha,
        files=tuple(dataclasses.replace(f, downloaded=False) for f in result.files),
    )


def test_rerun_with_same_sha_is_a_cache_hit_without_file_requests(
    fake: FakeHub, cache: Path
) -> None:
    sha = fake.publish(REPO, "main", two_shards())
    download(fake, cache)
    gets_before, requests_before = len(fake.file_gets()), len(fake.requests())

    again = download(fake, cache)

    assert again.revision == sha and again.downloaded == 0 and again.rows == 5
    assert len(fake.file_gets()) == gets_before  # zero GET of file paths
    assert fake.requests()[requests_before:] == [("GET", f"/api/datasets/{REPO}/revision/main")]

    # a pinned sha that is cached needs no request at all, even with the Hub down
    fake.set_faults(down=True)
    pinned = download(fake, cache, revision=sha)
    assert pinned.downloaded == 0 and pinned.revision == sha
    assert len(fake.requests()) == requests_before + 1


def test_new_revision_on_main_resolves_and_downloads_into_a_new_folder(
    fake: FakeHub, cache: Path
) -> None:
    old = fake.publish(REPO, "main", two_shards())
    first = download(fake, cache)
    assert hub.resolve_revision(REPO, endpoint=fake.url, token=False, retry=FAST) == old

    new_files = {SHARD_0: shard_bytes(4, start=100), SHARD_1: shard_bytes(1, start=104)}
    new = fake.publish(REPO, "main", new_files)
    assert new != old
    assert hub.resolve_revision(REPO, "main", endpoint=fake.url, token=False, retry=FAST) == new

    second = download(fake, cache)
    assert second.revision == new and second.downloaded == 2 and second.rows == 5
    assert Path(second.files[0].path).parent.parent.name == new
    assert Path(second.files[0].path).read_bytes() == new_files[SHARD_0]
    assert Path(first.files[0].path).read_bytes() == two_shards()[SHARD_0]  # old revision untouched
    assert cache_entries(cache) == sorted([old, new])


def test_pinned_commit_and_tag(fake: FakeHub, cache: Path) -> None:
    old = fake.publish(REPO, "main", two_shards())
    fake.publish(REPO, "v1.0", two_shards())  # tag on the same content = same sha
    new = fake.publish(REPO, "main", {SHARD_0: shard_bytes(1, start=50)})

    pinned = download(fake, cache, revision=old)
    assert pinned.revision == old and pinned.requested_revision == old and pinned.rows == 5
    assert hub.resolve_revision(REPO, "v1.0", endpoint=fake.url, token=False, retry=FAST) == old
    tagged = download(fake, cache, revision="v1.0")
    assert tagged.downloaded == 0 and tagged.revision == old and tagged.requested_revision == "v1.0"
    assert download(fake, cache).revision == new


def test_a_relative_cache_dir_gives_absolute_paths(
    fake: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = fake.publish(REPO, "main", two_shards())
    monkeypatch.chdir(tmp_path)
    result = download(fake, Path("relative-cache"))
    assert all(Path(f.path).is_absolute() and Path(f.path).is_file() for f in result.files)
    monkeypatch.chdir(tmp_path.parent)  # elsewhere, the cached entry is found by its absolute path
    assert hub.cached_dump(tmp_path / "relative-cache", REPO, sha) is not None


def test_list_shards_prefers_train_files_and_falls_back_to_any_parquet(fake: FakeHub) -> None:
    files = two_shards()
    sha = fake.publish(REPO, "main", {**files, "data/test-00000-of-00001.parquet": files[SHARD_1]})
    shards = hub.list_shards(REPO, sha, endpoint=fake.url, token=False, retry=FAST)
    assert shards == [
        hub.ShardInfo(p, len(files[p]), hashlib.sha256(files[p]).hexdigest())
        for p in (SHARD_0, SHARD_1)
    ]

    other = fake.publish(
        "org/flat", "main", {"b.parquet": b"x" * 3, "a.parquet": b"y", "notes.txt": b""}
    )
    assert [s.path for s in hub.list_shards("org/flat", other, endpoint=fake.url, token=False)] == [
        "a.parquet",
        "b.parquet",
    ]


def test_fake_hub_tree_listing_matches_what_hfapi_expects(fake: FakeHub) -> None:
    from huggingface_hub import HfApi

    sha = fake.publish(REPO, "main", two_shards())
    api = HfApi(endpoint=fake.url, token=False)
    top = api.list_repo_tree(REPO, repo_type="dataset", revision=sha)
    assert sorted((type(e).__name__, e.path) for e in top) == [
        ("RepoFile", "README.md"),
        ("RepoFolder", "data"),
    ]
    deep = api.list_repo_files(REPO, repo_type="dataset", revision="main")
    assert sorted(deep) == ["README.md", SHARD_0, SHARD_1]


# ---------------------------------------------------------------------------
# Transient failures are retried
# ---------------------------------------------------------------------------


def test_503_twice_on_a_file_then_success(fake: FakeHub, cache: Path) -> None:
    files = two_shards()
    fake.publish(REPO, "main", files)
    fake.set_faults(status_5xx_times=2, status_match="/resolve/", status_method="GET")

    result = download(fake, cache)

    assert result.downloaded == 2 and result.rows == 5
    assert fake.faults()["status_5xx_times"] == 0
    assert len(fake.file_gets()) == 2 + 2  # two answered 503, then each shard once
    assert [Path(f.path).read_bytes() for f in result.files] == [files[SHARD_0], files[SHARD_1]]


def test_503_twice_on_the_api_then_success(fake: FakeHub) -> None:
    sha = fake.publish(REPO, "main", two_shards())
    fake.set_faults(status_5xx_times=2, status_match="/api/")
    assert hub.resolve_revision(REPO, "main", endpoint=fake.url, token=False, retry=FAST) == sha
    assert len(fake.requests()) == 3


def test_a_head_failing_twice_is_absorbed_by_huggingface_hubs_own_retry(
    fake: FakeHub, cache: Path
) -> None:
    files = two_shards()
    fake.publish(REPO, "main", files)
    fake.set_faults(status_5xx_times=2, status_match=SHARD_0, status_method="HEAD")

    result = download(fake, cache, retry=dataclasses.replace(FAST, attempts=1))

    assert fake.faults()["status_5xx_times"] == 0 and result.rows == 5
    assert len(fake.file_gets()) == 2  # one GET per shard


def test_truncated_transfer_is_resumed_and_the_file_is_intact(fake: FakeHub, cache: Path) -> None:
    files = two_shards()
    fake.publish(REPO, "main", files)
    fake.set_faults(truncate_path=SHARD_1, truncate_times=1)

    result = download(fake, cache)

    assert fake.faults()["truncate_times"] == 0
    assert Path(result.files[1].path).read_bytes() == files[SHARD_1]
    assert result.rows == 5
    assert len([p for p in fake.file_gets() if p.endswith(SHARD_1)]) == 2  # cut, then resumed


def test_corrupted_bytes_are_caught_by_sha256_and_refetched(fake: FakeHub, cache: Path) -> None:
    files = two_shards()
    fake.publish(REPO, "main", files)
    fake.set_faults(corrupt_path=SHARD_0, corrupt_times=1)

    result = download(fake, cache)

    assert Path(result.files[0].path).read_bytes() == files[SHARD_0]
    assert len([p for p in fake.file_gets() if p.endswith(SHARD_0)]) == 2
    assert cache_entries(cache) == [result.revision]  # the corrupt copy was evicted


def test_a_connection_dropped_without_answer_is_retried(fake: FakeHub, cache: Path) -> None:
    fake.publish(REPO, "main", two_shards())
    fake.set_faults(reset_times=1, reset_match=SHARD_0, reset_method="HEAD")
    assert download(fake, cache).downloaded == 2
    heads = [p for m, p in fake.requests() if m == "HEAD" and p.endswith(SHARD_0)]
    assert len(heads) == 2


# ---------------------------------------------------------------------------
# Failures leave nothing a later run would trust
# ---------------------------------------------------------------------------


def test_permanent_failure_names_the_file_and_leaves_no_cache_entry(
    fake: FakeHub, cache: Path
) -> None:
    sha = fake.publish(REPO, "main", two_shards())
    fake.set_faults(status_5xx_times=100, status_match=SHARD_1, status_method="GET")

    with pytest.raises(hub.DownloadFailed) as err:
        download(fake, cache)

    assert err.value.path == SHARD_1 and SHARD_1 in str(err.value) and "3 attempt" in str(err.value)
    assert isinstance(err.value, hub.HubUnavailable) and err.value.transient
    assert str(err.value).endswith(hub.OFFLINE_HINT) and err.value.__cause__ is None
    assert cache_entries(cache) == []  # no record: nothing is trusted without checking it again
    assert hub.cached_dump(cache, REPO, sha) is None

    fake.set_faults()
    gets = len(fake.file_gets())
    again = download(fake, cache)
    # the shard verified before the failure is checked again from the cache, not fetched again
    assert [f.downloaded for f in again.files] == [False, True] and again.rows == 5
    assert [p for p in fake.file_gets()[gets:]] == [f"/datasets/{REPO}/resolve/{sha}/{SHARD_1}"]
    assert cache_entries(cache) == [sha]


def test_bytes_that_never_match_their_sha256_are_never_trusted(fake: FakeHub, cache: Path) -> None:
    fake.publish(REPO, "main", two_shards())
    fake.set_faults(corrupt_path=SHARD_0, corrupt_times=100)
    with pytest.raises(hub.ShardVerificationError, match="sha256") as err:
        download(fake, cache)
    assert err.value.path == SHARD_0 and "3 attempt" in str(err.value)
    # not worth a step retry: a SourceError, not transient
    assert isinstance(err.value, SourceError) and not err.value.transient
    assert len([p for p in fake.file_gets() if p.endswith(SHARD_0)]) == 3
    assert cache_entries(cache) == []  # every corrupt copy was evicted


def test_a_shard_failing_verify_is_evicted_and_not_retried(fake: FakeHub, cache: Path) -> None:
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": ["a", "b"], "winner": ["tie", "tie"]}), buf)
    sha = fake.publish(REPO, "main", {SHARD_0: shard_bytes(2), SHARD_1: buf.getvalue()})

    with pytest.raises(hub.ShardVerificationError, match="schema differs") as err:
        download(fake, cache)

    assert err.value.path == SHARD_1 and isinstance(err.value, SourceError)
    assert cache_entries(cache) == [] and hub.cached_dump(cache, REPO, sha) is None
    assert not (cache / REPO_CACHE / "snapshots" / sha / SHARD_1).exists()
    assert hashlib.sha256(buf.getvalue()).hexdigest() not in {
        p.name for p in (cache / REPO_CACHE / "blobs").iterdir()
    }
    assert len([p for p in fake.file_gets() if p.endswith(SHARD_1)]) == 1  # not retried


@pytest.mark.parametrize("damage", ["entry deleted", "blob deleted", "blob truncated"])
def test_a_damaged_cache_entry_is_downloaded_again(fake: FakeHub, cache: Path, damage: str) -> None:
    files = two_shards()
    sha = fake.publish(REPO, "main", files)
    first = download(fake, cache)
    entry = Path(first.files[1].path)
    if damage == "entry deleted":
        entry.unlink()
    elif damage == "blob deleted":
        entry.resolve().unlink()
    else:
        entry.resolve().write_bytes(files[SHARD_1][:100])
    assert hub.cached_dump(cache, REPO, sha) is None and verified_revisions(cache, REPO) == []

    gets = len(fake.file_gets())
    again = download(fake, cache)

    assert Path(again.files[1].path).read_bytes() == files[SHARD_1] and again.rows == 5
    assert again.files[0].downloaded is False
    assert again.files[1].downloaded is (damage != "entry deleted")
    # a deleted snapshot entry is re-linked to its blob; a missing or damaged blob is fetched
    assert len(fake.file_gets()) - gets == (0 if damage == "entry deleted" else 1)
    assert cache_entries(cache) == [sha]


def test_partial_downloads_of_killed_processes_are_removed_after_a_day(
    fake: FakeHub, cache: Path
) -> None:
    import os

    fake.publish(REPO, "main", two_shards())
    blobs = cache / REPO_CACHE / "blobs"
    blobs.mkdir(parents=True)
    stale, fresh = blobs / "0123.abcd1234.incomplete", blobs / "4567.dcba4321.incomplete"
    for partial in (stale, fresh):
        partial.write_bytes(b"half a file")
    two_days_ago = time.time() - 2 * 86400
    os.utime(stale, (two_days_ago, two_days_ago))

    download(fake, cache)

    assert not stale.exists() and fresh.exists()  # a fresh one may belong to a running download


def test_hub_down_raises_hub_unavailable_quickly(fake: FakeHub, cache: Path) -> None:
    fake.publish(REPO, "main", two_shards())
    fake.set_faults(down=True)

    started = time.monotonic()
    with pytest.raises(hub.HubUnavailable, match="3 attempt") as err:
        download(fake, cache)
    assert time.monotonic() - started < 5
    # one message: where, what, the last error and what to do; no chained library exceptions
    assert fake.url in str(err.value) and str(err.value).endswith(hub.OFFLINE_HINT)
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert len(fake.requests()) == 3  # bounded: FAST.attempts API calls, no file request
    assert cache_entries(cache) == []


def test_connection_refused_and_timeouts_raise_hub_unavailable(fake: FakeHub) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(hub.HubUnavailable):
        hub.resolve_revision(
            REPO, endpoint=f"http://127.0.0.1:{closed_port}", token=False, retry=FAST
        )
    assert time.monotonic() - started < 5

    fake.publish(REPO, "main", two_shards())
    fake.set_faults(delay_seconds=1.0, delay_match="/api/")
    slow = hub.RetryPolicy(attempts=2, backoff=0.01, timeout=0.2)
    with pytest.raises(hub.HubUnavailable, match="Timeout"):
        hub.resolve_revision(REPO, endpoint=fake.url, token=False, retry=slow)


def test_unknown_repo_or_revision_raises_not_found(fake: FakeHub, cache: Path) -> None:
    fake.publish(REPO, "main", two_shards())
    with pytest.raises(hub.HubNotFound, match="org/missing"):
        hub.resolve_revision("org/missing", endpoint=fake.url, token=False, retry=FAST)
    with pytest.raises(hub.HubNotFound, match="no-such-branch"):
        download(fake, cache, revision="no-such-branch")
    assert len(fake.requests()) == 2  # not found is not retried
    assert cache_entries(cache) == []


def test_a_revision_without_parquet_raises_no_shards(fake: FakeHub, cache: Path) -> None:
    fake.publish(REPO, "main", {"README.md": b"empty"})
    with pytest.raises(hub.NoShardsFound):
        download(fake, cache)


def test_token_is_sent_but_never_logged(
    fake: FakeHub, cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "hf_test_secret_token_123"
    fake.publish(REPO, "main", two_shards())
    fake.set_faults(require_token=secret)
    caplog.set_level(logging.DEBUG)

    with pytest.raises(hub.HubNotFound) as err:
        hub.download_dump(REPO, "main", cache, endpoint=fake.url, token=False, retry=FAST)
    assert secret not in str(err.value)

    result = hub.download_dump(REPO, "main", cache, endpoint=fake.url, token=secret, verify=verify)
    assert result.rows == 5
    assert secret not in caplog.text
    assert all(secret not in line for line in (fake.root / "requests.log").read_text().splitlines())
