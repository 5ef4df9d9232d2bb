"""core.changes: rating and rank moves between two boards, their intervals under each data relation."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

import duckdb
import polars as pl
import pytest

from arena_pipeline.core.publication.changes import (
    CHANGES_SCHEMA,
    SAME_VOTES,
    UNKNOWN,
    VOTES_ADDED,
    VOTES_CHANGED,
    compare_boards,
    compose,
    data_relation,
    ranking_settings,
)
from arena_pipeline.core.ranking import RankingConfig
from arena_pipeline.core.store.records import VERSIONS, ensure_catalog
from arena_pipeline.core.store.versions import versioned


def board(rows: list[tuple], category: str = "overall", method: str = "bt") -> pl.DataFrame:
    """Leaderboard rows from (model, rating, ci_lower, ci_upper, rank, rank_ub, n_battles)."""
    frame = pl.DataFrame(rows, schema=["model", "rating", "ci_lower", "ci_upper", "rank", "rank_ub", "n_battles"],
                         orient="row")
    return frame.with_columns(category=pl.lit(category), method=pl.lit(method), ci_method=pl.lit("sandwich"),
                              provisional=pl.lit(False))


# reference (pinned, no bounds), a, b, c before; c gone, d new after. Half-widths 20 -> 15 for a.
BEFORE = board([("ref", 1000.0, None, None, 3, 2, 500), ("a", 1050.0, 1030.0, 1070.0, 1, 1, 300),
                ("b", 1020.0, 1000.0, 1040.0, 2, 1, 300), ("c", 990.0, 970.0, 1010.0, 4, 2, 100)])
AFTER = board([("ref", 1000.0, None, None, 3, 2, 700), ("a", 1070.0, 1055.0, 1085.0, 1, 1, 400),
               ("b", 1010.0, 995.0, 1025.0, 2, 1, 400), ("d", 1100.0, 1000.0, 1200.0, 4, 1, 20)])
SINCE = {"publication_id": 7, "revision": "rev7", "published_at": dt.datetime(2026, 11, 1, 3, 0)}


def _row(frame: pl.DataFrame, model: str) -> dict:
    return frame.filter(pl.col("model") == model).row(0, named=True)


@pytest.mark.parametrize(("relation", "half", "rho", "beyond"), [
    # the same votes move both fits alike: only the widths' difference (20 - 15) is allowed
    (SAME_VOTES, 5.0, 1.0, True),
    # the earlier votes are a subset: Var = s0^2 - s1^2, sqrt(20^2 - 15^2) = 13.2 on the interval scale
    (VOTES_ADDED, math.sqrt(20**2 - 15**2), 15 / 20, True),
    # independent: sqrt(20^2 + 15^2) = 25 > the move of 20
    (VOTES_CHANGED, 25.0, 0.0, False),
    (UNKNOWN, 25.0, 0.0, False),
])
def test_interval_of_the_change_follows_the_data_relation(relation, half, rho, beyond):
    out = compare_boards(BEFORE, AFTER, relation=relation, settings_changed=False, since=SINCE)
    a = _row(out, "a")
    assert a["status"] == "kept" and a["rating_change"] == pytest.approx(20.0)
    assert a["change_ci_upper"] - a["rating_change"] == pytest.approx(half)
    assert a["rating_change"] - a["change_ci_lower"] == pytest.approx(half)
    assert a["correlation"] == pytest.approx(rho) and a["beyond_interval"] is beyond
    assert a["data_relation"] == relation and a["since_publication"] == 7 and a["since_revision"] == "rev7"
    # the reference is pinned on both boards: no move, an exact interval
    ref = _row(out, "ref")
    assert (ref["rating_change"], ref["change_ci_lower"], ref["change_ci_upper"]) == (0.0, 0.0, 0.0)
    assert ref["beyond_interval"] is False


@pytest.mark.parametrize("settings_changed", [True, None])
def test_votes_added_under_other_or_unknown_settings_are_taken_as_independent(settings_changed):
    a = _row(compare_boards(BEFORE, AFTER, relation=VOTES_ADDED, settings_changed=settings_changed), "a")
    assert a["correlation"] == 0.0 and a["settings_changed"] is settings_changed
    assert a["change_ci_upper"] - a["rating_change"] == pytest.approx(25.0)


def test_new_and_gone_models_ranks_and_order():
    out = compare_boards(BEFORE, AFTER, relation=VOTES_ADDED, since=SINCE)
    assert out.schema == pl.Schema(CHANGES_SCHEMA)
    # kept models by the size of their move, then the new, then the gone
    assert out.get_column("model").to_list() == ["a", "b", "ref", "d", "c"]
    assert out.get_column("status").to_list() == ["kept", "kept", "kept", "new", "gone"]
    d, c = _row(out, "d"), _row(out, "c")
    assert d["rating_before"] is None and d["rating_after"] == 1100.0 and d["rating_change"] is None
    assert d["beyond_interval"] is None and d["rank_after"] == 4 and d["rank_change"] is None
    assert c["rating_after"] is None and c["rank_before"] == 4 and c["battles_before"] == 100
    b = _row(out, "b")
    assert (b["rank_change"], b["rank_ub_change"], b["battles_before"], b["battles_after"]) == (0, 0, 300, 400)


@pytest.mark.parametrize(("half_after", "half_change"), [
    (19.9, math.sqrt(20**2 - 19.9**2)), (20.0, 0.0), (20.1, 0.0), (30.0, 0.0)])
def test_votes_added_variance_is_continuous_and_never_negative(half_after, half_change):
    """Issue 36: Var = max(s0^2 - s1^2, 0) on both sides of s1 = s0 (before: s1 >= s0 switched to
    independence, s1 just under s0 gave a near-zero variance)."""
    wider = AFTER.with_columns(ci_lower=pl.col("rating") - half_after, ci_upper=pl.col("rating") + half_after)
    wider = wider.with_columns(ci_lower=pl.when(pl.col("model") == "ref").then(None).otherwise("ci_lower"),
                               ci_upper=pl.when(pl.col("model") == "ref").then(None).otherwise("ci_upper"))
    a = _row(compare_boards(BEFORE, wider, relation=VOTES_ADDED, settings_changed=False), "a")
    assert a["change_ci_upper"] - a["rating_change"] == pytest.approx(half_change, abs=1e-9)
    assert a["correlation"] == pytest.approx(min(half_after / 20, 1.0))
    assert a["change_variance"] == "max(s0^2 - s1^2, 0), sandwich intervals"


def test_the_test_reads_the_sandwich_of_a_bootstrap_primary():
    """A bootstrap primary's width is Monte-Carlo noise: s0, s1 come from the board's sandwich columns
    (the clustered sandwich for a clustered primary); spectral, without them, from its primary."""
    def with_sandwich(frame, method, half):
        return frame.with_columns(ci_method=pl.lit(method), ci_lower=pl.col("ci_lower") - 50,
                                  ci_upper=pl.col("ci_upper") + 50,
                                  cluster_sandwich_lower=pl.col("rating") - half,
                                  cluster_sandwich_upper=pl.col("rating") + half,
                                  sandwich_lower=pl.col("rating") - 1.0, sandwich_upper=pl.col("rating") + 1.0)
    pinned = pl.when(pl.col("model") == "ref")
    before, after = (with_sandwich(f, "cluster_bootstrap", h) for f, h in ((BEFORE, 20.0), (AFTER, 12.0)))
    before, after = (f.with_columns(**{c: pinned.then(None).otherwise(c) for c in
                                       ("cluster_sandwich_lower", "cluster_sandwich_upper", "sandwich_lower",
                                        "sandwich_upper")}) for f in (before, after))
    a = _row(compare_boards(before, after, relation=VOTES_ADDED, settings_changed=False), "a")
    assert a["change_ci_upper"] - a["rating_change"] == pytest.approx(16.0)  # sqrt(20^2 - 12^2)
    assert a["change_variance"] == "max(s0^2 - s1^2, 0), cluster_sandwich intervals"
    spectral = _row(compare_boards(BEFORE.with_columns(ci_method=pl.lit("bootstrap")),
                                   AFTER.with_columns(ci_method=pl.lit("bootstrap")),
                                   relation=VOTES_ADDED, settings_changed=False), "a")
    assert spectral["change_variance"] == "max(s0^2 - s1^2, 0), bootstrap intervals"


def _aligned(frame: pl.DataFrame, shift: float) -> tuple[pl.DataFrame, dict]:
    moved = frame.with_columns(pl.col(c) + shift for c in ("rating", "ci_lower", "ci_upper"))
    record = {"requested": True, "board_sha256": "abc", "estimator": "median", "min_models": 3,
              "boards": [{"category": "overall", "method": "bt", "shift": shift, "aligned": True}]}
    return moved, record


def test_aligned_boards_are_compared_without_their_shifts():
    """Issue 36: the shift is re-estimated each publication; comparing aligned ratings moved every
    model by its change and flagged the reference. The change is of the unaligned ratings, the shift's
    change is reported apart, and the reference is never flagged for it."""
    plain = compare_boards(BEFORE, AFTER, relation=VOTES_ADDED, settings_changed=False)
    (before, ab), (after, aa) = _aligned(BEFORE, 250.0), _aligned(AFTER, 262.5)
    out = compare_boards(before, after, relation=VOTES_ADDED, settings_changed=False,
                         alignment_before=ab, alignment_after=aa)
    same = ["model", "rating_change", "change_ci_lower", "change_ci_upper", "correlation", "beyond_interval"]
    assert out.select(same).equals(plain.select(same))
    ref, a = _row(out, "ref"), _row(out, "a")
    assert ref["rating_change"] == 0.0 and ref["beyond_interval"] is False
    assert (a["shift_before"], a["shift_after"], a["shift_change"]) == (250.0, 262.5, 12.5)
    # the ratings as published: the displayed move is the change plus the shift's change
    assert a["rating_after"] - a["rating_before"] == pytest.approx(a["rating_change"] + a["shift_change"])
    assert _row(plain, "a")["shift_change"] == 0.0


def test_turning_alignment_on_is_a_settings_change_but_not_another_estimator():
    from arena_pipeline.core.publication.changes import _or_aligned

    after, record = _aligned(AFTER, 240.0)
    assert _or_aligned(False, None, record) is True and _or_aligned(False, record, record) is False
    assert _or_aligned(None, record, {**record, "board_sha256": "other"}) is True
    out = compare_boards(BEFORE, after, relation=VOTES_ADDED, settings_changed=True, alignment_after=record,
                         estimator_changed=False)
    a = _row(out, "a")
    assert a["settings_changed"] is True and a["rating_change"] == pytest.approx(20.0)
    assert a["change_ci_upper"] - a["rating_change"] == pytest.approx(math.sqrt(20**2 - 15**2))
    assert _row(out, "ref")["beyond_interval"] is False


def test_another_reference_model_gives_no_interval_and_unbounded_stays_unbounded():
    other = AFTER.with_columns(
        ci_lower=pl.when(pl.col("model") == "b").then(None).otherwise(
            pl.when(pl.col("model") == "ref").then(990.0).otherwise("ci_lower")),
        ci_upper=pl.when(pl.col("model") == "b").then(None).otherwise(
            pl.when(pl.col("model") == "ref").then(1010.0).otherwise("ci_upper")))
    out = compare_boards(BEFORE, other, relation=VOTES_ADDED)
    a = _row(out, "a")
    assert a["same_reference"] is False and a["change_ci_lower"] is None and a["beyond_interval"] is None
    assert a["rating_change"] == pytest.approx(20.0)
    unbounded = AFTER.with_columns(ci_upper=pl.when(pl.col("model") == "a").then(float("inf")).otherwise("ci_upper"))
    a = _row(compare_boards(BEFORE, unbounded, relation=SAME_VOTES), "a")
    assert math.isinf(a["change_ci_upper"]) and a["beyond_interval"] is False and a["correlation"] is None


def test_boards_without_intervals_give_no_interval():
    before, after = (b.with_columns(ci_method=pl.lit("none"), ci_lower=None, ci_upper=None) for b in (BEFORE, AFTER))
    a = _row(compare_boards(before, after, relation=SAME_VOTES), "a")
    assert a["rating_change"] == pytest.approx(20.0) and a["change_ci_lower"] is None and a["beyond_interval"] is None


def test_categories_and_methods_are_compared_apart():
    before = pl.concat([BEFORE, board([("a", 1000.0, 990.0, 1010.0, 1, 1, 10)], category="math")])
    after = pl.concat([AFTER, board([("a", 1000.0, 990.0, 1010.0, 1, 1, 10)], method="bt_style")])
    out = compare_boards(before, after, relation=SAME_VOTES)
    assert out.filter(pl.col("category") == "math").select("status", "method").rows() == [("gone", "bt")]
    assert out.filter(pl.col("method") == "bt_style").select("status", "category").rows() == [("new", "overall")]


def test_compose_relations_along_a_chain():
    assert compose([SAME_VOTES, SAME_VOTES]) == SAME_VOTES
    assert compose([SAME_VOTES, VOTES_ADDED]) == VOTES_ADDED
    assert compose([VOTES_ADDED, VOTES_CHANGED]) == VOTES_CHANGED
    assert compose([VOTES_CHANGED, UNKNOWN]) == UNKNOWN


def test_data_relation_compares_the_votes_in_duckdb():
    con = duckdb.connect()
    ensure_catalog(con, "arena")
    votes = [("1", "a", "b", "model_a"), ("2", "b", "c", "tie"), ("3", "a", "c", "model_b")]
    for name, rows in (("old", votes[:2]), ("grown", votes), ("same", votes[:2]),
                       ("edited", [votes[0], ("2", "b", "c", "model_a"), votes[2]])):
        frame = pl.DataFrame(rows, schema=["id", "model_a_canonical", "model_b_canonical", "winner"], orient="row")
        con.register("frame", frame)
        con.execute(f"CREATE TABLE {versioned(name)} AS SELECT * FROM frame")
        con.unregister("frame")
        con.execute(f"INSERT INTO {VERSIONS} (version, table_name) VALUES (?, 'battles')", [name])
    con.execute(f"CREATE VIEW {versioned('reused')} AS SELECT * FROM {versioned('old')}")
    con.execute(f"INSERT INTO {VERSIONS} (version, table_name, same_as) VALUES ('reused', 'battles', 'old')")
    assert data_relation(con, "old", "old") == SAME_VOTES
    assert data_relation(con, "old", "reused") == SAME_VOTES
    assert data_relation(con, "old", "same") == SAME_VOTES
    assert data_relation(con, "old", "grown") == VOTES_ADDED
    assert data_relation(con, "grown", "old") == VOTES_CHANGED
    assert data_relation(con, "old", "edited") == VOTES_CHANGED
    assert data_relation(con, "dropped", "old") == UNKNOWN
    con.execute(f"CREATE TABLE {versioned('older')} AS SELECT id, winner FROM {versioned('old')}")  # no canonical names
    assert data_relation(con, "older", "old") == UNKNOWN
    assert data_relation(con, None, "old") == UNKNOWN


def test_recorded_ranking_settings_read_back_as_ranking_config():
    """An earlier record without a later setting equals a full one at that setting's default (the same
    fit, so settings_changed is False), whatever it records beyond this version's settings."""
    def row(ranking):
        return {"settings": {"tables": {"leaderboard": {"ranking": ranking}}}}

    full = dataclasses.asdict(RankingConfig(ties="drop"))
    earlier = {k: v for k, v in full.items() if k != "style_bootstrap_rounds"} | {"retired": 1}
    assert ranking_settings(row(full)) == ranking_settings(row(earlier)) == RankingConfig(ties="drop")
    assert ranking_settings(row(full)) != ranking_settings(row({"ties": "half"}))
    assert ranking_settings(row({})) is None and ranking_settings(None) is None
    assert ranking_settings(row({"display_min_battles": -1})) is None  # not settings of this version
