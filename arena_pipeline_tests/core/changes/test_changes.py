"""core.changes: rating and rank moves between two boards, their intervals under each data relation."""

from __future__ import annotations

import datetime as dt
import json
import math

import duckdb
import numpy as np
import polars as pl
import pytest

from arena_pipeline.core.changes.changes import (
    CHANGES_SCHEMA,
    SAME_VOTES,
    UNKNOWN,
    VOTES_ADDED,
    VOTES_CHANGED,
    board_relations,
    compare_boards,
    compose,
    overall_relation,
    recorded_relation,
)
from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.style_control import style_columns
from arena_pipeline.core.ranking.tags import tag_rows
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


def _clustered(frame: pl.DataFrame, method: str, half: float, vote_half: float) -> pl.DataFrame:
    """``frame`` as a clustered board: a wide primary, the cluster sandwich ± ``half``, the vote-level
    sandwich ± ``vote_half`` (the reference pinned: no bounds)."""
    pinned = pl.when(pl.col("model") == "ref")
    bounds = {"cluster_sandwich_lower": pl.col("rating") - half, "cluster_sandwich_upper": pl.col("rating") + half,
              "sandwich_lower": pl.col("rating") - vote_half, "sandwich_upper": pl.col("rating") + vote_half}
    return frame.with_columns(ci_method=pl.lit(method), ci_lower=pl.col("ci_lower") - 50,
                              ci_upper=pl.col("ci_upper") + 50,
                              **{c: pinned.then(None).otherwise(e) for c, e in bounds.items()})


def test_the_test_reads_the_sandwich_of_a_bootstrap_primary():
    """A bootstrap primary's width is Monte-Carlo noise: s0, s1 come from the board's sandwich columns
    (the clustered sandwich for a clustered primary); spectral, without them, from its primary."""
    before, after = _clustered(BEFORE, "cluster_bootstrap", 20.0, 10.0), _clustered(AFTER, "cluster_bootstrap", 12.0, 6.0)
    a = _row(compare_boards(before, after, relation=VOTES_ADDED, settings_changed=False), "a")
    # the design effect (20/10)^2 = (12/6)^2 = 4: sqrt(10^2 - 6^2) * 12 / 6 = sqrt(20^2 - 12^2)
    assert a["change_ci_upper"] - a["rating_change"] == pytest.approx(16.0)
    assert a["change_variance"] == "max(v0^2 - v1^2, 0) (s1/v1)^2, cluster_sandwich intervals"
    assert a["correlation"] == pytest.approx(12 / 20)
    plain = [f.with_columns(ci_method=pl.lit("bootstrap")) for f in (before, after)]  # vote-level sandwich
    a = _row(compare_boards(*plain, relation=VOTES_ADDED, settings_changed=False), "a")
    assert a["change_ci_upper"] - a["rating_change"] == pytest.approx(8.0)  # sqrt(10^2 - 6^2)
    assert a["change_variance"] == "max(s0^2 - s1^2, 0), sandwich intervals"
    spectral = _row(compare_boards(BEFORE.with_columns(ci_method=pl.lit("bootstrap")),
                                   AFTER.with_columns(ci_method=pl.lit("bootstrap")),
                                   relation=VOTES_ADDED, settings_changed=False), "a")
    assert spectral["change_variance"] == "max(s0^2 - s1^2, 0), bootstrap intervals"


def test_a_clustered_votes_added_test_scales_the_vote_level_difference():
    """The grown-dump null simulation (benchmarks/bench_changes_null.py): the difference of two clustered
    (CR3) variances is noisy where a model has few sessions, and flagged 8.9% of unchanged models under
    1,000 battles (1.5% of them with a zero-width interval, s1 >= s0 by noise). The votes-added variance of
    a clustered board is the vote-level sandwich's difference (votes, not sessions, as the units) times the
    later board's design effect (s1 / v1)^2."""
    # the clustered width did not narrow (20 -> 20.5, noise), the vote-level one did (10 -> 8)
    before, after = _clustered(BEFORE, "cluster_sandwich", 20.0, 10.0), _clustered(AFTER, "cluster_sandwich", 20.5, 8.0)
    a = _row(compare_boards(before, after, relation=VOTES_ADDED, settings_changed=False), "a")
    assert a["change_ci_upper"] - a["rating_change"] == pytest.approx(6.0 * 20.5 / 8.0)
    assert a["beyond_interval"] is True and a["rating_change"] == pytest.approx(20.0)
    rho = (20.0 ** 2 + 20.5 ** 2 - (6.0 * 20.5 / 8.0) ** 2) / (2 * 20.0 * 20.5)
    assert a["correlation"] == pytest.approx(rho)
    # the reference stays pinned, and the other relations keep the clustered widths
    assert _row(compare_boards(before, after, relation=VOTES_ADDED, settings_changed=False), "ref")[
        "change_ci_upper"] == 0.0
    same = _row(compare_boards(before, after, relation=SAME_VOTES, settings_changed=False), "a")
    assert same["change_ci_upper"] - same["rating_change"] == pytest.approx(0.5)
    changed = _row(compare_boards(before, after, relation=VOTES_CHANGED, settings_changed=False), "a")
    assert changed["change_ci_upper"] - changed["rating_change"] == pytest.approx(math.hypot(20.0, 20.5))


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


@pytest.mark.parametrize("relation", [SAME_VOTES, VOTES_ADDED])
def test_unshifting_an_aligned_board_flags_nothing_by_rounding(relation):
    """Shifts that are not exact binary fractions: (R + shift) - shift differs from R by ~1e-13 points, and
    the reference (s = 0 on both boards) or a refit of the same votes (interval of width 0) was flagged for it
    (the grown-dump null simulation, benchmarks/bench_changes_null.py, flagged the reference in half the
    replicates)."""
    shifts = (225.5069, 243.2767)  # (1000 + s) - s is 1000 + 1.1e-13 and 1000 - 1.1e-13
    (before, ab), (after, aa) = _aligned(BEFORE, shifts[0]), _aligned(BEFORE if relation == SAME_VOTES else AFTER,
                                                                        shifts[1])
    out = compare_boards(before, after, relation=relation, settings_changed=False, alignment_before=ab,
                         alignment_after=aa).filter(pl.col("status") == "kept")
    ref = _row(out, "ref")
    assert abs(ref["rating_change"]) < 1e-9 and ref["beyond_interval"] is False
    if relation == SAME_VOTES:  # the same fit: no move and nothing flagged
        assert out.get_column("rating_change").abs().max() < 1e-9
        assert not out.get_column("beyond_interval").any()


def test_turning_alignment_on_is_a_settings_change_but_not_another_estimator():
    from arena_pipeline.core.changes.changes import _or_aligned

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


def _store(con: duckdb.DuckDBPyConnection, table: str, versions: dict[str, pl.DataFrame]) -> None:
    """Versions of ``table`` in the versions schema, as the version store keeps them."""
    for name, frame in versions.items():
        con.register("frame", frame)
        con.execute(f"CREATE TABLE {versioned(name)} AS SELECT * FROM frame")
        con.unregister("frame")
        con.execute(f"INSERT INTO {VERSIONS} (version, table_name) VALUES (?, ?)", [name, table])


def _tables(battles: str, categories: str = "cats") -> dict[str, str]:
    return {"battles": battles, "battle_categories": categories}


def _relations(con, before: dict, after: dict) -> dict[str, tuple[str, str]]:
    return {c: (d, s) for c, d, s in board_relations(con, before, after).iter_rows()}


def test_board_relations_compare_the_votes_of_each_board_in_duckdb():
    con = duckdb.connect()
    ensure_catalog(con, "arena")
    votes = [("1", "a", "b", "model_a"), ("2", "b", "c", "tie"), ("3", "a", "c", "model_b")]
    frames = {}
    for name, rows in (("old", votes[:2]), ("grown", votes), ("same", votes[:2]),
                       ("edited", [votes[0], ("2", "b", "c", "model_a"), votes[2]])):
        frames[name] = pl.DataFrame(rows, schema=["id", "model_a_canonical", "model_b_canonical", "winner"],
                                    orient="row").with_columns(sum_assistant_a_tokens=pl.lit(10, pl.Int64))
    frames["restyled"] = frames["old"].with_columns(sum_assistant_a_tokens=pl.Series([10, 11]))
    _store(con, "battles", frames)
    every = pl.DataFrame({"battle_id": ["1", "2", "3"], "category": "overall"})
    _store(con, "battle_categories", {
        "cats": pl.concat([every, pl.DataFrame({"battle_id": ["2"], "category": "math"})]),
        # vote 2 left math for coding: math lost a vote, coding is new, overall is the same
        "moved": pl.concat([every, pl.DataFrame({"battle_id": ["2"], "category": "coding"})])})
    con.execute(f"CREATE VIEW {versioned('reused')} AS SELECT * FROM {versioned('old')}")
    con.execute(f"INSERT INTO {VERSIONS} (version, table_name, same_as) VALUES ('reused', 'battles', 'old')")
    same = (SAME_VOTES, SAME_VOTES)
    assert _relations(con, _tables("old"), _tables("old")) == {"overall": same, "math": same}
    assert _relations(con, _tables("old"), _tables("reused")) == {"overall": same, "math": same}
    assert _relations(con, _tables("old"), _tables("same")) == {"overall": same, "math": same}
    # a vote added to overall only: math keeps the same votes
    assert _relations(con, _tables("old"), _tables("grown")) == {"overall": (VOTES_ADDED,) * 2, "math": same}
    assert _relations(con, _tables("grown"), _tables("old")) == {"overall": (VOTES_CHANGED,) * 2, "math": same}
    assert _relations(con, _tables("old"), _tables("edited")) == {"overall": (VOTES_CHANGED,) * 2,
                                                                  "math": (VOTES_CHANGED,) * 2}
    # other style counts on the same votes: only the style-controlled boards read them
    assert _relations(con, _tables("old"), _tables("restyled")) == {"overall": (SAME_VOTES, VOTES_CHANGED),
                                                                    "math": (SAME_VOTES, VOTES_CHANGED)}
    # the same battles, another category membership
    assert _relations(con, _tables("grown"), _tables("grown", "moved")) == {
        "overall": same, "math": (VOTES_CHANGED,) * 2, "coding": (VOTES_ADDED,) * 2}
    for missing in (_tables("dropped"), _tables("old", "dropped"), {"battles": "old"}, None):
        assert board_relations(con, missing, _tables("old")).is_empty()
    con.execute(f"CREATE TABLE {versioned('older')} AS SELECT id, winner FROM {versioned('old')}")  # no canonical names
    assert board_relations(con, _tables("older"), _tables("old")).is_empty()
    assert overall_relation(board_relations(con, _tables("old"), _tables("restyled"))) == VOTES_CHANGED
    assert overall_relation(board_relations(con, _tables("old"), _tables("old"))) == SAME_VOTES
    assert overall_relation(board_relations(con, _tables("older"), _tables("old"))) == UNKNOWN


def _regenerated(seed: int, n: int = 6000, models: int = 12) -> tuple[pl.DataFrame, ...]:
    """Battles from known strengths, and the same votes regenerated with other metadata: every style
    count drawn again, and a quarter of the votes with another language (the ``chinese`` board moves)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 0.6, models)
    a = rng.integers(0, models, n)
    b = (a + rng.integers(1, models, n)) % models
    p = 1 / (1 + np.exp(theta[b] - theta[a]))
    u = rng.random(n)
    winner = np.where(u < p - 0.1, "model_a", np.where(u < p + 0.1, "tie", "model_b"))
    names = np.array([f"m{i:02d}" for i in range(models)])
    votes = pl.DataFrame({"id": [f"v{i}" for i in range(n)], "model_a": names[a], "model_b": names[b],
                          "winner": winner}).with_columns(model_a_canonical="model_a", model_b_canonical="model_b")

    def metadata(chinese: np.ndarray) -> tuple[pl.DataFrame, pl.DataFrame]:
        battles = votes.with_columns(**{c: pl.Series(rng.integers(0, 400 if "tokens" in c else 4, n))
                                        for c in style_columns()})
        categories = pl.concat([pl.DataFrame({"battle_id": votes["id"], "category": "overall"}),
                                pl.DataFrame({"battle_id": votes["id"].filter(pl.Series(chinese)), "category": "chinese"}),
                                pl.DataFrame({"battle_id": votes["id"][: n // 2], "category": "math"})])
        return battles, categories

    chinese = rng.random(n) < 0.5
    moved = np.where(rng.random(n) < 0.25, ~chinese, chinese)
    return (*metadata(chinese), *metadata(moved))


def test_the_same_votes_with_other_metadata_are_same_votes_only_on_the_boards_they_leave_alone():
    """Issue 36: the same votes regenerated with other languages and style counts were "same votes" for
    every board, and most models of the language board and of bt_style were flagged for tiny moves."""
    battles0, categories0, battles1, categories1 = _regenerated(36)
    con = duckdb.connect()
    ensure_catalog(con, "arena")
    _store(con, "battles", {"b0": battles0, "b1": battles1})
    _store(con, "battle_categories", {"c0": categories0, "c1": categories1})
    relations = board_relations(con, _tables("b0", "c0"), _tables("b1", "c1"))
    assert _relations(con, _tables("b0", "c0"), _tables("b1", "c1")) == {
        "overall": (SAME_VOTES, VOTES_CHANGED), "math": (SAME_VOTES, VOTES_CHANGED),
        "chinese": (VOTES_CHANGED, VOTES_CHANGED)}
    config = RankingConfig(methods=("bt", "bt_style"), bootstrap_rounds=0)
    before, after = (compute_rankings(b, tag_rows(b.get_column("id"), [c]), config).leaderboard
                     for b, c in ((battles0, categories0), (battles1, categories1)))
    out = compare_boards(before, after, relation=relations, settings_changed=False)
    kept = out.filter(pl.col("status") == "kept")
    per_board = {k: frame for k, frame in kept.partition_by("category", "method", as_dict=True).items()}
    assert set(per_board) == {(c, m) for c in ("overall", "math", "chinese") for m in ("bt", "bt_style")}
    for (category, method), frame in per_board.items():
        expected = SAME_VOTES if category != "chinese" and method == "bt" else VOTES_CHANGED
        assert set(frame.get_column("data_relation")) == {expected}, (category, method)
        beyond = frame.get_column("beyond_interval").fill_null(False).mean()
        if expected == SAME_VOTES:  # the same fit: nothing moves
            assert frame.get_column("rating_change").abs().max() < 1e-6 and beyond == 0
        else:  # taken as independent: the moves are the metadata's, well inside the interval
            assert frame.get_column("rating_change").abs().max() > 0.01 and beyond <= 0.1, (category, method)
    # what the whole-table comparison said ("same votes" everywhere) flags these boards en masse
    wrong = compare_boards(before, after, relation=SAME_VOTES, settings_changed=False)
    flagged = wrong.filter((pl.col("status") == "kept") & (pl.col("method") == "bt_style"))
    assert flagged.get_column("beyond_interval").fill_null(False).mean() > 0.5


def test_recorded_relations_compose_per_board(tmp_path):
    """--since across publications whose battles are dropped: each board's recorded relations composed
    along the chain; a link recorded before the per-board relations counts for every board."""
    con = duckdb.connect()
    con.execute("CREATE SCHEMA arena")
    con.execute("CREATE TABLE arena.publications (publication_id INTEGER, settings VARCHAR)")

    def record(pid, since, relation, boards=None):
        own = {"since_publication": since, "data_relation": relation, "boards": boards}
        con.execute("INSERT INTO arena.publications VALUES (?, ?)",
                    [pid, json.dumps({"tables": {"publication_changes": own}})])

    record(1, None, None)
    record(2, 1, VOTES_CHANGED, [{"category": "overall", "data_relation": SAME_VOTES, "style_relation": VOTES_CHANGED},
                                 {"category": "math", "data_relation": SAME_VOTES, "style_relation": SAME_VOTES}])
    record(3, 2, VOTES_ADDED, [{"category": "overall", "data_relation": VOTES_ADDED, "style_relation": VOTES_ADDED},
                               {"category": "math", "data_relation": SAME_VOTES, "style_relation": SAME_VOTES}])
    record(4, 3, VOTES_ADDED)  # recorded before the per-board relations
    composed = recorded_relation(con, "arena", 1, 3)
    assert {c: (d, s) for c, d, s in composed.iter_rows()} == {
        "math": (SAME_VOTES, SAME_VOTES), "overall": (VOTES_ADDED, VOTES_CHANGED)}
    composed = recorded_relation(con, "arena", 1, 4)
    assert {c: (d, s) for c, d, s in composed.iter_rows()} == {
        "math": (VOTES_ADDED, VOTES_ADDED), "overall": (VOTES_ADDED, VOTES_CHANGED)}
    assert recorded_relation(con, "arena", 3, 4) == VOTES_ADDED
    assert recorded_relation(con, "arena", 0, 4) == UNKNOWN
    assert recorded_relation(con, "arena", 2, 2) == SAME_VOTES
