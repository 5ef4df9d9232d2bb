"""Run-scoped versions, the publication gate's table rules, publications as data, and retention."""

from __future__ import annotations

import datetime as dt
import json

import duckdb
import polars as pl
import pytest

from arena_pipeline.core.dataset.manifest import DumpManifest, ShardFile, manifest_from_json, manifest_to_json
from arena_pipeline.core.publication.gate import plan_tables
from arena_pipeline.core.store.publish import publish
from arena_pipeline.core.store.records import live_publication, record_dump
from arena_pipeline.core.store.versions import (
    NothingPublishedError,
    PublicationError,
    build_key,
    current_build,
    input_version,
    read_input,
    record_checks,
    refuse_build,
    revision_key,
    start_build,
    version_name,
    write_version,
)

SHA1 = "1" * 40
SHA2 = "2" * 40
TABLES = ["battles", "leaderboard", "pairwise"]
DERIVED = {"leaderboard": ("battles",), "pairwise": ("battles",)}
TOGETHER = (("leaderboard", "pairwise"),)
RULES = {"derived_from": DERIVED, "built_together": TOGETHER, "checked": ("battles",)}


def _manifest(revision: str) -> DumpManifest:
    return DumpManifest("hub", "org/name", "main", revision, (ShardFile("/x/a.parquet", "a.parquet", 10, 3, "ab"),))


@pytest.fixture
def con(tmp_path):
    connection = duckdb.connect(str(tmp_path / "w.duckdb"))
    yield connection
    connection.close()


def _frame(n: int, tag: str) -> pl.DataFrame:
    return pl.DataFrame({"i": list(range(n)), "tag": [tag] * n})


def _board(models: list[str], categories=("overall",)) -> pl.DataFrame:
    rows = [{"category": c, "method": "bt", "model": m} for c in categories for m in models]
    return pl.DataFrame(rows)


def _full_build(con, run: str, revision: str, n: int, *, settings=None, checks=True):
    build = start_build(con, "arena", run, _manifest(revision))
    record_dump(con, "arena", revision=revision, status="fetched", source="org/name", rows=n)
    write_version(con, "battles", build, _frame(n, run), settings)
    record_checks(con, version_name("battles", build), checks, {"suite": "battles"})
    write_version(con, "leaderboard", build, _frame(n, run), {"ranking": {"ties": "half"}})
    write_version(con, "pairwise", build, _frame(n, run), {"ranking": {"ties": "half"}})
    return build


def _publish(con, build, **kwargs):
    chosen, rebuilt = plan_tables(con, "arena", build, TABLES, **RULES)
    return publish(con, "arena", build, chosen, rebuilt=rebuilt, history_tables=("leaderboard",), **kwargs)


def _tags(con, table: str) -> set[str]:
    return {r[0] for r in con.execute(f"SELECT DISTINCT tag FROM arena.{table}").fetchall()}


def test_keys_are_identifier_safe():
    assert revision_key(SHA1) == "111111111111"
    assert revision_key("local-ABCdef0123456789") == "local_abcdef0123456789"
    assert build_key("43b6ede7-1eac-4da9-ba46-ef1e02000180") == "43b6ede71eac"
    with pytest.raises(ValueError):
        revision_key("///")


def test_manifest_round_trips_through_json():
    manifest = _manifest(SHA1)
    assert manifest_from_json(manifest_to_json(manifest)) == manifest
    assert manifest_from_json(None) is None


def test_each_run_writes_its_own_versions_and_publication_points_views_at_them(con):
    first = _full_build(con, "run-aaaa", SHA1, 3)
    assert live_publication(con, "arena") is None
    report = _publish(con, first)
    assert report.publication_id == 1 and report.previous is None
    assert sorted(report.rebuilt) == sorted(TABLES)
    assert _tags(con, "battles") == {"run-aaaa"} and _tags(con, "leaderboard") == {"run-aaaa"}
    # a second full run of the SAME revision writes new versions: the live views do not move
    second = _full_build(con, "run-bbbb", SHA1, 5)
    assert version_name("battles", second) != version_name("battles", first)
    assert _tags(con, "battles") == {"run-aaaa"}
    assert con.execute("SELECT count(*) FROM arena.battles").fetchone() == (3,)
    _publish(con, second)
    assert _tags(con, "battles") == {"run-bbbb"}
    pubs = con.execute("SELECT publication_id, revision, run_id, previous_publication FROM arena.publications "
                       "ORDER BY 1").fetchall()
    assert pubs == [(1, SHA1, "run-aaaa", None), (2, SHA1, "run-bbbb", 1)]
    # history is keyed by publication: the re-run of the same dump keeps the earlier board
    history = con.execute("SELECT publication_id, tag, count(*) FROM arena.leaderboard_history "
                          "GROUP BY ALL ORDER BY 1").fetchall()
    assert history == [(1, "run-aaaa", 3), (2, "run-bbbb", 5)]
    assert con.execute("SELECT status FROM arena.dumps").fetchall() == [("published",)]


def test_partial_run_builds_on_the_live_publication(con):
    _publish(con, _full_build(con, "run-full", SHA1, 4))
    rerank = current_build(con, "arena", "run-rerank")
    assert rerank.revision == SHA1 and rerank.manifest == _manifest(SHA1)
    assert live_publication(con, "arena")["publication_id"] == 1  # what it builds on
    # inputs it did not build come from the live publication
    assert input_version(con, "arena", "battles", rerank) == live_publication(con, "arena")["tables"]["battles"]
    assert read_input(con, "arena", "battles", rerank).height == 4
    write_version(con, "leaderboard", rerank, _frame(7, "rerank"), {"ranking": {"ties": "drop"}})
    write_version(con, "pairwise", rerank, _frame(7, "rerank"), {"ranking": {"ties": "drop"}})
    report = _publish(con, rerank)
    assert sorted(report.rebuilt) == ["leaderboard", "pairwise"]
    assert _tags(con, "leaderboard") == {"rerank"} and _tags(con, "battles") == {"run-full"}
    # the big table is shared, not copied: both publications name the same battles version
    tables = [json.loads(t) for (t,) in con.execute("SELECT tables FROM arena.publications ORDER BY 1").fetchall()]
    assert tables[0]["battles"] == tables[1]["battles"] and tables[0]["leaderboard"] != tables[1]["leaderboard"]


def test_a_partial_run_needs_a_publication(con):
    with pytest.raises(NothingPublishedError, match="materialize the whole graph"):
        current_build(con, "arena", "run-x")


def test_gate_refuses_mixed_or_unchecked_tables_and_changes_nothing(con, golden):
    _publish(con, _full_build(con, "run-full", SHA1, 4))
    before = con.execute("SELECT sql FROM duckdb_views() WHERE schema_name = 'arena' ORDER BY view_name").fetchall()

    rebuilt_input = current_build(con, "arena", "run-alias")
    write_version(con, "battles", rebuilt_input, _frame(2, "alias"))
    record_checks(con, version_name("battles", rebuilt_input), True, {})
    with pytest.raises(PublicationError) as refused:
        plan_tables(con, "arena", rebuilt_input, TABLES, **RULES)
    golden.check("refusals", "a table stale beside a rebuilt input", str(refused.value))

    half_fit = current_build(con, "arena", "run-half")
    write_version(con, "leaderboard", half_fit, _frame(2, "half"))
    with pytest.raises(PublicationError, match="computed together"):
        plan_tables(con, "arena", half_fit, TABLES, **RULES)

    unchecked = _full_build(con, "run-unchecked", SHA2, 3, checks=False)
    with pytest.raises(PublicationError) as refused:
        plan_tables(con, "arena", unchecked, TABLES, **RULES)
    golden.check("refusals", "a version whose blocking checks failed", str(refused.value))

    missing = start_build(con, "arena", "run-missing", _manifest(SHA2))
    write_version(con, "battles", missing, _frame(1, "m"))
    with pytest.raises(PublicationError) as refused:
        plan_tables(con, "arena", missing, TABLES, **RULES)
    golden.check("refusals", "a table not built for the revision", str(refused.value))

    nothing = current_build(con, "arena", "run-nothing")
    with pytest.raises(PublicationError, match="built no table"):
        plan_tables(con, "arena", nothing, TABLES, **RULES)
    after = con.execute("SELECT sql FROM duckdb_views() WHERE schema_name = 'arena' ORDER BY view_name").fetchall()
    assert after == before and _tags(con, "battles") == {"run-full"}


def test_gate_refuses_tables_made_with_different_settings(con):
    _publish(con, _full_build(con, "run-full", SHA1, 4, settings={"aliases_sha256": "aaa"}))
    models_only = current_build(con, "arena", "run-models")
    write_version(con, "models", models_only, _frame(1, "x"), {"aliases_sha256": "bbb"})
    with pytest.raises(PublicationError, match="different aliases_sha256"):
        plan_tables(con, "arena", models_only, [*TABLES, "models"], **RULES)


def test_failed_rerun_of_a_published_dump_keeps_it_published(con):
    _publish(con, _full_build(con, "run-full", SHA1, 4))
    record_dump(con, "arena", revision=SHA1, status="loaded")
    record_dump(con, "arena", revision=SHA1, status="failed", detail="battles failed")
    assert con.execute("SELECT status, status_detail FROM arena.dumps").fetchall() == [("published", None)]
    record_dump(con, "arena", revision=SHA2, status="failed", detail="bad")
    assert con.execute("SELECT status FROM arena.dumps WHERE revision = ?", [SHA2]).fetchall() == [("failed",)]


def test_a_refused_build_is_finished_and_its_new_dump_says_why(con):
    """The gate's refusal ends the build ('refused', not 'running' for good, so retention may drop
    its versions) and the refused revision's dump row says it was not published and why; a published
    dump refused on a re-run stays published."""
    _publish(con, _full_build(con, "run-one", SHA1, 4))
    refused = _full_build(con, "run-two", SHA2, 4)
    why = "publication refused, nothing changed: too few models"
    refuse_build(con, "arena", refused, why)
    assert con.execute("SELECT status, status_detail FROM arena_versions.builds WHERE build_id = 'run-two'"
                       ).fetchall() == [("refused", why)]
    assert con.execute("SELECT status, status_detail FROM arena.dumps WHERE revision = ?", [SHA2]).fetchall() == [
        ("loaded", f"not published: {why}")]
    refuse_build(con, "arena", _full_build(con, "run-three", SHA1, 4), "publication refused: x")
    assert con.execute("SELECT status, status_detail FROM arena.dumps WHERE revision = ?", [SHA1]).fetchall() == [
        ("published", None)]
    # retention: the refused build is finished, so a later publication drops its unused versions
    _publish(con, _full_build(con, "run-four", SHA1, 4))
    left = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'arena_versions'"
                                      ).fetchall()}
    assert not {version_name(t, refused) for t in TABLES} & left


def test_retention_drops_only_finished_unused_versions(con):
    _publish(con, _full_build(con, "run-one", SHA1, 1))
    running = _full_build(con, "run-running", SHA1, 2)  # another run, still going
    killed = _full_build(con, "run-killed", SHA1, 2)
    killed_tables = {version_name(t, killed) for t in TABLES}
    con.execute("UPDATE arena_versions.builds SET started_at = ? WHERE build_id = 'run-killed'",
                [dt.datetime(2000, 1, 1)])
    third = _full_build(con, "run-three", SHA2, 3)

    def is_finished(build_id, started_at):
        return started_at < dt.datetime(2001, 1, 1)

    report = _publish(con, third, retention=1, is_finished=is_finished)
    names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'arena_versions'").fetchall()}
    assert killed_tables <= set(report.dropped) and not killed_tables & names
    assert {version_name(t, running) for t in TABLES} <= names  # a running build's tables are never dropped
    assert {version_name(t, third) for t in TABLES} <= names  # the live ones neither
    # with retention 1 the first publication's board leaves the history, and its tables go
    assert not {n for n in names if n.endswith(build_key("run-one"))}
    assert con.execute("SELECT DISTINCT publication_id FROM arena.leaderboard_history").fetchall() == [(2,)]


def test_publication_is_atomic_when_it_fails_before_commit(con):
    _publish(con, _full_build(con, "run-one", SHA1, 1))
    second = _full_build(con, "run-two", SHA2, 2)
    chosen, rebuilt = plan_tables(con, "arena", second, TABLES, **RULES)

    def crash():
        raise RuntimeError("killed inside the transaction")

    with pytest.raises(RuntimeError):
        publish(con, "arena", second, chosen, rebuilt=rebuilt, before_commit=crash)
    assert _tags(con, "battles") == {"run-one"}
    assert con.execute("SELECT count(*) FROM arena.publications").fetchone() == (1,)
    assert con.execute("SELECT status FROM arena.dumps WHERE revision = ?", [SHA1]).fetchone() == ("published",)


def test_a_build_whose_process_is_gone_is_ended_abandoned_by_the_next_run(con):
    import socket
    import subprocess
    import sys

    from arena_pipeline.constants import VERSIONS_SCHEMA

    killed = start_build(con, "arena", "run-killed", _manifest("a" * 40))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid of this host that has exited: the killed run's process
    con.execute(f'UPDATE "{VERSIONS_SCHEMA}".builds SET pid = ? WHERE build_id = ?', [gone.pid, killed.build_id])
    alive = start_build(con, "arena", "run-alive", _manifest("b" * 40))  # this process: still running
    start_build(con, "arena", "run-next", _manifest("c" * 40))
    rows = dict((r[0], r[1:]) for r in con.execute(
        f'SELECT build_id, status, status_detail, finished_at FROM "{VERSIONS_SCHEMA}".builds').fetchall())
    status, detail, finished = rows[killed.build_id]
    assert status == "abandoned" and finished is not None
    assert f"({gone.pid} on {socket.gethostname()})" in detail
    assert rows[alive.build_id][0] == "running"


def test_a_reused_version_records_the_key_it_was_found_by_computed_once(con, monkeypatch):
    from arena_pipeline.core.store import versions as publication
    from arena_pipeline.core.store.versions import reusable_version, reuse_version

    first = start_build(con, "arena", "run-a", _manifest(SHA1))
    write_version(con, "battles", first, _frame(3, "a"), {"x": 1})
    second = start_build(con, "arena", "run-b", _manifest(SHA1))
    calls, real = [], publication.inputs_key
    monkeypatch.setattr(publication, "inputs_key", lambda *args: calls.append(args) or real(*args))
    base, rows = reusable_version(con, "battles", second, {"x": 1})
    assert (base, rows) == (version_name("battles", first), 3)
    reuse_version(con, "battles", second, base, rows, {"x": 1})
    assert len(calls) == 1  # by reusable_version; reuse_version takes the key base was found by
    keys = dict(con.execute("SELECT version, inputs_key FROM arena_versions.versions").fetchall())
    assert keys[version_name("battles", second)] == keys[base] == real(con, "battles", second, {"x": 1})
    assert read_input(con, "arena", "battles", second).get_column("tag").to_list() == ["a"] * 3
