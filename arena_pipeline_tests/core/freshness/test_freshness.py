"""core.freshness: the live publication's age and the newer dump revisions seen but not published."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from arena_pipeline.core.freshness.freshness import (
    BUILDS_SCHEMA,
    DUMPS_SCHEMA,
    PUBLICATIONS_SCHEMA,
    RUNS_SCHEMA,
    WarehouseRecords,
    assess,
    format_age,
    read_records,
)
from arena_pipeline.core.store.records import ensure_catalog
from arena_pipeline.core.store.warehouse import connect
from arena_pipeline.core.text import one_line

T0 = dt.datetime(2026, 11, 1)
WEEK = dt.timedelta(days=7)
REFUSAL = "publication refused, nothing changed: the new overall leaderboard is empty\n(lower min_battles)"


def at(hours: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=hours)


def records(publications=(), dumps=(), builds=()) -> WarehouseRecords:
    """Warehouse rows: publications (id, revision, hour), dumps (revision, hour, status, detail),
    builds (id, revision, hour, status, detail)."""
    return WarehouseRecords(
        pl.DataFrame([(i, r, at(h)) for i, r, h in publications], schema=PUBLICATIONS_SCHEMA, orient="row"),
        pl.DataFrame([(r, at(h), s, d) for r, h, s, d in dumps], schema=DUMPS_SCHEMA, orient="row"),
        pl.DataFrame([(b, r, at(h), s, d) for b, r, h, s, d in builds], schema=BUILDS_SCHEMA, orient="row"),
    )


def runs(*rows) -> pl.DataFrame:
    """Refresh runs (id, revision, Dagster status, hour created)."""
    return pl.DataFrame([(i, r, s, at(h)) for i, r, s, h in rows], schema=RUNS_SCHEMA, orient="row")


#: revision A fetched at hour 0 by run r1 and published at hour 1
LIVE_A = {"publications": [(1, "A", 1)], "dumps": [("A", 0, "published", None)],
          "builds": [("r1", "A", 0, "published", None)]}


def test_age_is_the_live_publications_and_a_rerank_makes_it_young_again(golden):
    fresh = assess(records(**LIVE_A), runs(("r1", "A", "SUCCESS", 0)), now=at(25), max_age=WEEK)
    assert fresh.live.publication_id == 1 and fresh.age == dt.timedelta(hours=24) and fresh.fresh
    assert fresh.pending == [] and fresh.newest is None
    golden.check("freshness", "summary: fresh, nothing newer", fresh.summary())
    stale = assess(records(**LIVE_A), runs(), now=at(1 + 24 * 7 + 1), max_age=WEEK)
    assert not stale.fresh
    golden.check("freshness", "age: over the limit", stale.age_text())
    exactly = assess(records(**LIVE_A), runs(), now=at(1 + 24 * 7), max_age=WEEK)
    assert exactly.fresh  # at most max_age old
    # a re-rank publishes the same revision again: the board is as old as its newest publication
    rerank = {**LIVE_A, "publications": [(1, "A", 1), (2, "A", 200)]}
    again = assess(records(**rerank), runs(), now=at(201), max_age=WEEK)
    assert again.live.publication_id == 2 and again.fresh
    assert again.live.revision_live_since == at(1)


def test_nothing_published_yet(golden):
    empty = assess(WarehouseRecords.empty(), runs(), now=at(0), max_age=WEEK)
    assert empty.live is None and empty.age is None and not empty.fresh
    golden.check("freshness", "summary: nothing published, nothing seen", empty.summary())
    # the first revision's run failed: pending, with why
    first = assess(records(dumps=[("A", 0, "failed", "rejected: data/x.parquet is not a parquet file")]),
                   runs(("r1", "A", "FAILURE", 0)), now=at(1), max_age=WEEK)
    assert first.newest.state == "failed"
    golden.check("freshness", "pending: the first revision failed", first.pending_text())


@pytest.mark.parametrize(("run", "build", "dump", "state", "reason"), [
    (("r2", "B", "QUEUED", 10), None, None, "queued", "queued (run r2)"),
    (("r2", "B", "NOT_STARTED", 10), None, None, "queued", "queued (run r2)"),
    (("r2", "B", "STARTED", 10), ("r2", "B", 10, "running", None), ("B", 10, "fetched", None),
     "running", "running (run r2)"),
    # the gate refused: the build's record wins over the run (failing, or failed)
    (("r2", "B", "STARTED", 10), ("r2", "B", 10, "refused", REFUSAL), ("B", 10, "loaded", "not published: x"),
     "refused", "refused by the gate (run r2): " + one_line(REFUSAL)),
    (("r2", "B", "FAILURE", 10), ("r2", "B", 10, "failed", "flatten: boom"), ("B", 10, "failed", "flatten: boom"),
     "failed", "failed (run r2): flatten: boom"),
    # rejected at the fetch: no build, the dump's record says why
    (("r2", "B", "FAILURE", 10), None, ("B", 10, "failed", "rejected: bad schema"),
     "failed", "failed (run r2): rejected: bad schema"),
    # the Hub could not be reached: nothing in the warehouse
    (("r2", "B", "FAILURE", 10), None, None, "failed",
     "failed (run r2): the run failed before the warehouse recorded why; see the run's logs"),
    (("r2", "B", "CANCELED", 10), ("r2", "B", 10, "running", None), None, "canceled", "canceled (run r2)"),
    (("r2", "B", "FAILURE", 10), ("r2", "B", 10, "abandoned", "its process (7 on h) ended"), None,
     "abandoned", "abandoned (run r2): its process (7 on h) ended"),
    (("r2", "B", "SUCCESS", 10), ("r2", "B", 10, "running", None), None,
     "not published", "its run succeeded without publishing (run r2)"),
    # a run of another instance (no Dagster run here), still running
    (None, ("r9", "B", 10, "running", None), ("B", 10, "fetched", None),
     "running", "running (run r9)"),
    (None, None, ("B", 10, "fetched", None), "not run", "seen, but no run has started for it"),
])
def test_the_newest_revision_seen_says_why_it_is_not_published(run, build, dump, state, reason):
    rows = records(publications=LIVE_A["publications"], dumps=LIVE_A["dumps"] + ([dump] if dump else []),
                   builds=LIVE_A["builds"] + ([build] if build else []))
    result = assess(rows, runs(*([run] if run else [])), now=at(12), max_age=WEEK)
    (pending,) = result.pending
    assert (pending.revision, pending.state, pending.reason) == ("B", state, reason)
    assert pending.first_seen == at(10) and pending.in_progress == (state in ("queued", "running"))
    assert result.pending_text().endswith(f" B is not published: {reason}")  # the reason: parametrized above


def test_a_failed_newer_revision_stays_pending_across_reranks_of_the_live_one():
    rows = records(publications=[(1, "A", 1), (2, "A", 30)],
                   dumps=[("A", 0, "published", None), ("B", 10, "failed", "flatten: boom")],
                   builds=[("r1", "A", 0, "published", None), ("r2", "B", 10, "failed", "flatten: boom"),
                           ("r3", "A", 29, "published", None)])  # r3: a re-rank of A (fetches nothing)
    result = assess(rows, runs(("r1", "A", "SUCCESS", 0), ("r2", "B", "FAILURE", 10)), now=at(31), max_age=WEEK)
    assert result.live.publication_id == 2 and [p.revision for p in result.pending] == ["B"]


def test_only_revisions_seen_since_the_live_one_count_and_the_latest_leads(golden):
    rows = records(publications=[(1, "B", 21)],
                   dumps=[("A", 0, "failed", "rejected: x"), ("B", 20, "published", None),
                          ("C", 30, "loaded", "not published: " + REFUSAL)],
                   builds=[("r2", "B", 20, "published", None), ("r3", "C", 30, "refused", REFUSAL)])
    result = assess(rows, runs(("r1", "A", "FAILURE", 0), ("r2", "B", "SUCCESS", 20), ("r3", "C", "FAILURE", 30),
                               ("r4", "D", "STARTED", 40)), now=at(41), max_age=WEEK)
    # A failed before B went live: not pending; D (running) is the latest seen, C (refused) is listed too
    assert [(p.revision, p.state) for p in result.pending] == [("D", "running"), ("C", "refused")]
    golden.check("freshness", "pending: the latest leads, the others counted", result.pending_text())


def test_a_source_put_back_to_an_earlier_revision_is_what_is_newest():
    """A was live, B was published after it, then the source went back to A: the sensor requests A
    again (a new run of A is the latest sighting), so A is pending and B is not."""
    rows = records(publications=[(1, "A", 1), (2, "B", 11)],
                   dumps=[("A", 0, "superseded", None), ("B", 10, "published", None)],
                   builds=[("r1", "A", 0, "published", None), ("r2", "B", 10, "published", None),
                           ("r3", "A", 20, "running", None)])
    result = assess(rows, runs(("r1", "A", "SUCCESS", 0), ("r2", "B", "SUCCESS", 10), ("r3", "A", "STARTED", 20)),
                    now=at(21), max_age=WEEK)
    assert [(p.revision, p.state) for p in result.pending] == [("A", "running")]
    # the latest attempt decides, not the first: r1 published A, r3 is running
    assert result.newest.run_id == "r3"


def test_long_details_are_one_line_and_cut():
    detail = "models: " + "\n".join(f"m{i}" for i in range(500))
    rows = records(publications=LIVE_A["publications"], dumps=LIVE_A["dumps"],
                   builds=LIVE_A["builds"] + [("r2", "B", 10, "refused", detail)])
    (pending,) = assess(rows, runs(("r2", "B", "FAILURE", 10)), now=at(11), max_age=WEEK).pending
    assert "\n" not in pending.reason and len(pending.detail) == 300 and pending.detail.endswith("…")
    assert pending.detail.startswith("models: m0 m1 m2")


def test_ages_are_shown_in_minutes_hours_or_days():
    assert format_age(dt.timedelta(hours=47.94)) == "47.9 h" and format_age(dt.timedelta(days=3)) == "3.0 days"
    assert format_age(dt.timedelta(minutes=36.4)) == "36 min" and format_age(dt.timedelta(hours=1)) == "1.0 h"


def test_read_records_from_a_warehouse(tmp_path):
    path = str(tmp_path / "w.duckdb")
    con = connect(path)
    try:
        assert read_records(con, "arena").publications.is_empty()  # no catalog yet: empty, not an error
        ensure_catalog(con, "arena")
        con.execute("INSERT INTO arena.publications (publication_id, revision, published_at) "
                    "VALUES (1, 'A', TIMESTAMP '2026-11-01 01:00:00')")
        con.execute("INSERT INTO arena.dumps (revision, first_seen, status) VALUES ('A', TIMESTAMP '2026-11-01', "
                    "'published')")
        got = read_records(con, "arena")
    finally:
        con.close()
    assert got.publications.schema == pl.Schema(PUBLICATIONS_SCHEMA) and got.builds.is_empty()
    result = assess(got, runs(), now=at(2), max_age=WEEK)
    assert result.live.published_at == at(1) and result.fresh


def test_unpublished_revisions_of_a_warehouse_without_records_or_with_older_tables():
    import duckdb

    from arena_pipeline.core.freshness.freshness import unpublished_revisions

    with duckdb.connect() as con:
        assert unpublished_revisions(con, "arena") == []  # nothing recorded yet
        con.execute("CREATE SCHEMA arena")
        con.execute("CREATE TABLE arena.publications (publication_id INTEGER, revision VARCHAR)")
        assert unpublished_revisions(con, "arena") == []  # written before published_at was recorded
