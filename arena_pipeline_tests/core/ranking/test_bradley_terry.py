"""Bradley-Terry (`bt`): known answers, an independent statsmodels fit, invariants, edge cases."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import statsmodels.api as sm

from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.board import NOT_CONNECTED, ONLY_LOSSES, ONLY_WINS
from arena_pipeline.core.ranking.bradley_terry import aggregate_pairs, fit_bt, mle_support
from arena_pipeline.core.ranking.scale import percentile_interval
from arena_pipeline.core.ranking.tags import tag_rows

FIXTURE = Path(__file__).parents[2] / "data" / "ranking" / "synthetic_battles.parquet"
PPL = 400.0 / math.log(10.0)  # rating points per natural log-odds
Z95 = 1.959963984540054


def load_fixture() -> pl.DataFrame:
    return pl.read_parquet(FIXTURE).select("id", "model_a", "model_b", "winner")


def frame_from(rows: list[tuple[str, str, str]], prefix: str = "x") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": [f"{prefix}{i}" for i in range(len(rows))],
            "model_a": [r[0] for r in rows],
            "model_b": [r[1] for r in rows],
            "winner": [r[2] for r in rows],
        }
    )


def overall(frame: pl.DataFrame) -> pl.DataFrame:
    every = frame.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    return tag_rows(frame.get_column("id"), [every])


def bt_board(frame: pl.DataFrame, **config) -> tuple[pl.DataFrame, dict]:
    settings = {"methods": ("bt",), "bootstrap_rounds": 0, "min_battles": 1, **config}
    out = compute_rankings(frame, overall(frame), RankingConfig(**settings))
    return out.leaderboard.filter(pl.col("method") == "bt"), out.metadata


def ratings(board: pl.DataFrame) -> dict[str, float]:
    return dict(zip(board.get_column("model"), board.get_column("rating"), strict=True))


def design(frame: pl.DataFrame) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Per-battle +1/-1 model design (all models) and side-a outcome 1 / 0 / 0.5."""
    models = sorted(set(frame.get_column("model_a")) | set(frame.get_column("model_b")))
    index = {m: i for i, m in enumerate(models)}
    x = np.zeros((frame.height, len(models)))
    rows = np.arange(frame.height)
    x[rows, [index[m] for m in frame.get_column("model_a")]] = 1.0
    x[rows, [index[m] for m in frame.get_column("model_b")]] = -1.0
    winner = frame.get_column("winner").to_numpy()
    y = np.where(winner == "model_a", 1.0, np.where(winner == "model_b", 0.0, 0.5))
    return models, x, y


def centred(theta: np.ndarray) -> np.ndarray:
    return 1000.0 + PPL * (theta - theta.mean())


# --------------------------------------------------------------------------- known answers


def test_two_models_closed_form():
    # w wins and l losses: R_a - R_b = 400 log10(w / l) exactly; a tie is half a win each way.
    # Tolerance 1e-6 points: Newton stops at a gradient norm below 1e-8.
    rows = [("p", "q", "model_a")] * 7 + [("q", "p", "model_a")] * 3
    board, _ = bt_board(frame_from(rows))
    r = ratings(board)
    assert r["p"] - r["q"] == pytest.approx(400.0 * math.log10(7 / 3), abs=1e-6)
    assert (r["p"] + r["q"]) / 2 == pytest.approx(1000.0, abs=1e-9)
    with_ties = rows + [("p", "q", "tie")] * 2 + [("q", "p", "both_bad")] * 2
    r = ratings(bt_board(frame_from(with_ties))[0])
    assert r["p"] - r["q"] == pytest.approx(400.0 * math.log10(9 / 5), abs=1e-6)
    r = ratings(bt_board(frame_from(with_ties), ties="drop")[0])
    assert r["p"] - r["q"] == pytest.approx(400.0 * math.log10(7 / 3), abs=1e-6)


def test_choix_published_testcases():
    # lucasmaystre/choix tests/data/testcase-pairwise-{1,2}.json: (winner, loser) pairs and
    # ML strengths; ratings must differ by 400 log10 of the strength ratio. Tolerance 1e-5
    # points: the published strengths carry 9 significant digits.
    cycle = [(0, 1), (1, 2), (2, 0)]
    cases = [(cycle, [1.0, 1.0, 1.0]), ([(0, 1)] + cycle, [1.43586088, 0.62035049, 0.94378863])]
    for data, ml_est in cases:
        board, _ = bt_board(frame_from([(f"i{w}", f"i{lo}", "model_a") for w, lo in data]))
        r = ratings(board)
        for i in range(3):
            expected = 400.0 * math.log10(ml_est[i] / ml_est[0])
            assert r[f"i{i}"] - r["i0"] == pytest.approx(expected, abs=1e-5)


def test_three_cycle_gives_equal_ratings():
    rows = [("a", "b", "model_a"), ("b", "c", "model_a"), ("c", "a", "model_a")] * 5
    r = ratings(bt_board(frame_from(rows))[0])
    assert max(r.values()) - min(r.values()) < 1e-9
    assert r["a"] == pytest.approx(1000.0, abs=1e-9)


# --------------------------------------------------------------------------- independent fit


def test_matches_statsmodels_logistic_regression_with_half_weight_ties():
    """bt == unpenalised per-battle logistic regression (statsmodels GLM), tol 0.01 points.

    Ties and both_bad are entered as two rows (a won, b won) with frequency weight 0.5.
    """
    frame = load_fixture()
    models, x, y = design(frame)
    draw = (y == 0.5)
    xs = np.vstack([x[~draw], x[draw], x[draw]])
    ys = np.concatenate([y[~draw], np.ones(draw.sum()), np.zeros(draw.sum())])
    ws = np.concatenate([np.ones((~draw).sum()), np.full(2 * draw.sum(), 0.5)])
    # the first model is the reference (theta = 0): drop its column
    fit = sm.GLM(ys, xs[:, 1:], family=sm.families.Binomial(), freq_weights=ws).fit(
        tol=1e-13, maxiter=200
    )
    expected = centred(np.concatenate([[0.0], fit.params]))
    board, meta = bt_board(frame)
    got = ratings(board)
    assert max(abs(got[m] - e) for m, e in zip(models, expected, strict=True)) < 0.01
    assert meta["categories"]["overall"]["bt"]["grad_norm"] < 1e-8


def test_sandwich_interval_matches_statsmodels_hc0():
    """Sandwich half-widths == statsmodels GLM HC0 on one row per battle (relative tol 1e-6)."""
    frame = load_fixture()
    models, x, y = design(frame)
    m = len(models)
    fit = sm.GLM(y, x[:, 1:], family=sm.families.Binomial()).fit(
        tol=1e-13, maxiter=200, cov_type="HC0"
    )
    embed = np.vstack([np.zeros(m - 1), np.eye(m - 1)])  # beta -> theta with theta_0 = 0
    contrast = (np.eye(m) - 1.0 / m) @ embed
    cov = PPL**2 * contrast @ fit.cov_params() @ contrast.T
    expected = dict(zip(models, Z95 * np.sqrt(np.diag(cov)), strict=True))
    board, _ = bt_board(frame)
    for row in board.iter_rows(named=True):
        assert row["ci_method"] == "sandwich"
        half = row["sandwich_upper"] - row["rating"]
        assert half == pytest.approx(expected[row["model"]], rel=1e-6)
        assert row["rating"] - row["sandwich_lower"] == pytest.approx(half, rel=1e-9)


def test_anchored_sandwich_interval_is_the_reference_contrast_of_statsmodels_hc0():
    """On an anchored board the interval is that of rating - 1000, i.e. of theta_i - theta_ref:
    statsmodels GLM HC0 with the reference's column left out (its coefficients are then exactly
    theta_i - theta_ref, no contrast algebra), relative tolerance 1e-6. The reference has none."""
    frame = load_fixture()
    models, x, y = design(frame)
    ref = models.index("model-d")
    keep = [i for i in range(len(models)) if i != ref]
    fit = sm.GLM(y, x[:, keep], family=sm.families.Binomial()).fit(
        tol=1e-13, maxiter=200, cov_type="HC0"
    )
    expected = dict(zip([models[i] for i in keep], Z95 * PPL * np.sqrt(np.diag(fit.cov_params())),
                        strict=True))
    board, _ = bt_board(frame, anchor_model="model-d")
    for row in board.iter_rows(named=True):
        if row["model"] == "model-d":
            assert row["rating"] == 1000.0 and row["ci_lower"] is None and row["ci_upper"] is None
            continue
        assert row["rating"] - 1000.0 == pytest.approx(PPL * fit.params[keep.index(models.index(row["model"]))],
                                                     abs=0.01)
        assert row["ci_upper"] - row["rating"] == pytest.approx(expected[row["model"]], rel=1e-6)
        assert row["rating"] - row["ci_lower"] == pytest.approx(expected[row["model"]], rel=1e-6)


def test_two_models_anchored_intervals_are_twice_the_centred_ones():
    """Known answer: with two models the centred strengths are +-d/2 and the anchored rating is d,
    so every interval of the non-reference model (sandwich, and the bootstrap re-anchored in each
    round, same resamples) is exactly twice as wide; the reference has none; rank_ub is the same."""
    rows = [("p", "q", "model_a")] * 14 + [("q", "p", "model_a")] * 6 + [("p", "q", "tie")] * 5
    frame = frame_from(rows)
    centred, _ = bt_board(frame, bootstrap_rounds=200)
    anchored, _ = bt_board(frame, bootstrap_rounds=200, anchor_model="q")
    p_centred = centred.filter(pl.col("model") == "p").row(0, named=True)
    p_anchored = anchored.filter(pl.col("model") == "p").row(0, named=True)
    for k in ("sandwich", "bootstrap"):
        w_c = p_centred[f"{k}_upper"] - p_centred[f"{k}_lower"]
        assert p_anchored[f"{k}_upper"] - p_anchored[f"{k}_lower"] == pytest.approx(2.0 * w_c, rel=1e-9)
    q_anchored = anchored.filter(pl.col("model") == "q").row(0, named=True)
    assert q_anchored["sandwich_lower"] is None and q_anchored["bootstrap_upper"] is None
    assert anchored.sort("model").get_column("rank_ub").equals(centred.sort("model").get_column("rank_ub"))


def test_percentile_interval_takes_the_b_plus_one_alpha_order_statistics():
    # 99 replicates 1..99: the (B + 1) alpha-th smallest is the 5th for a 90% interval, and the
    # 2.5th (interpolated) for a 95% one (Davison and Hinkley 1997, section 5.2)
    samples = np.arange(1.0, 100.0)
    assert percentile_interval(samples, 0.90) == (pytest.approx(5.0), pytest.approx(95.0))
    assert percentile_interval(samples, 0.95) == (pytest.approx(2.5), pytest.approx(97.5))


# --------------------------------------------------------------------------- invariants


def swapped(frame: pl.DataFrame) -> pl.DataFrame:
    flip = {"model_a": "model_b", "model_b": "model_a", "tie": "tie", "both_bad": "both_bad"}
    return frame.with_columns(
        model_a=pl.col("model_b"),
        model_b=pl.col("model_a"),
        winner=pl.col("winner").replace_strict(flip),
    )


def test_swapping_sides_changes_nothing():
    frame = load_fixture()
    config = {"bootstrap_rounds": 30}
    board, _ = bt_board(frame, **config)
    other, _ = bt_board(swapped(frame), **config)
    numeric = ["rating", "ci_lower", "ci_upper", "sandwich_lower", "sandwich_upper"]
    diff = board.select(numeric).to_numpy() - other.select(numeric).to_numpy()
    assert np.abs(diff).max() < 1e-6
    assert board.drop(numeric).equals(other.drop(numeric))


def test_anchor_pins_one_model_and_keeps_differences():
    frame = load_fixture()
    free = ratings(bt_board(frame)[0])
    pinned = ratings(bt_board(frame, anchor_model="model-d", anchor_rating=1200.0)[0])
    assert pinned["model-d"] == pytest.approx(1200.0, abs=1e-9)
    for m in free:
        assert pinned[m] - pinned["model-a"] == pytest.approx(free[m] - free["model-a"], abs=1e-6)


def test_more_data_narrows_intervals():
    frame = load_fixture()
    four_times = pl.concat(
        [frame.with_columns(pl.col("id") + f"-copy{k}") for k in range(4)]
    )
    config = {"bootstrap_rounds": 60}
    small, _ = bt_board(frame, **config)
    large, _ = bt_board(four_times, **config)
    width = {
        name: b.select(
            (pl.col("ci_upper") - pl.col("ci_lower")).alias("boot"),
            (pl.col("sandwich_upper") - pl.col("sandwich_lower")).alias("sand"),
        )
        for name, b in (("small", small), ("large", large))
    }
    # same point estimates; sandwich exactly halves with 4x the data; bootstrap about halves
    assert np.allclose(small.get_column("rating"), large.get_column("rating"), atol=1e-6)
    ratio = width["large"]["sand"] / width["small"]["sand"]
    assert np.allclose(ratio.to_numpy(), 0.5, rtol=1e-6)
    assert (width["large"]["boot"] < width["small"]["boot"]).all()


# --------------------------------------------------------------------------- edge cases


def test_model_that_only_loses_is_excluded_and_listed():
    frame = load_fixture()
    opponents = frame.get_column("model_a").unique().sort().to_list()
    loser = frame_from(
        [("zz-loser", opponents[i % 6], "model_b") for i in range(60)], prefix="loser"
    )
    board, meta = bt_board(pl.concat([frame, loser]), min_battles=50)
    assert "zz-loser" not in board.get_column("model").to_list()
    (entry,) = meta["excluded_models"]["overall"]
    assert entry == {
        "model": "zz-loser",
        "reason": ONLY_LOSSES,
        "n_battles": 60,
    }
    # the others are fitted exactly as without the loser's battles
    alone = ratings(bt_board(frame)[0])
    got = ratings(board)
    assert max(abs(got[m] - alone[m]) for m in alone) < 1e-6


def test_model_that_only_wins_is_excluded():
    rows = [("champ", m, "model_a") for m in ("a", "b", "c")] * 5
    rows += [("a", "b", "model_a"), ("b", "c", "model_a"), ("c", "a", "model_a"), ("b", "a", "tie")]
    board, meta = bt_board(frame_from(rows))
    assert sorted(board.get_column("model")) == ["a", "b", "c"]
    assert meta["excluded_models"]["overall"][0]["reason"] == ONLY_WINS


def test_rare_win_survives_the_bootstrap():
    # one win in 60 battles: the MLE is finite, but about a third of the resamples lose
    # that win; the bootstrap ridge keeps those replicates finite (a very low lower bound)
    frame = load_fixture()
    opponents = frame.get_column("model_a").unique().sort().to_list()
    rare = [("zz-rare", opponents[i % 6], "model_a" if i == 0 else "model_b") for i in range(60)]
    board, meta = bt_board(pl.concat([frame, frame_from(rare, "rare")]), bootstrap_rounds=50)
    row = board.filter(pl.col("model") == "zz-rare").row(0, named=True)
    assert row["rank"] == 7 and np.isfinite(row["ci_lower"])
    assert row["ci_lower"] < row["rating"] - 200.0 < row["ci_upper"] - 200.0
    info = meta["categories"]["overall"]["bt"]
    assert info["bootstrap_degenerate_rounds"] > 0
    assert info["bootstrap_max_grad_norm"] < 1e-8


def test_disconnected_comparison_graph_keeps_the_largest_group():
    frame = load_fixture()
    island = frame_from(
        [("x1", "x2", "model_a"), ("x2", "x3", "model_a"), ("x3", "x1", "model_a")] * 20,
        prefix="island",
    )
    board, meta = bt_board(pl.concat([frame, island]))
    assert sorted(board.get_column("model")) == sorted(ratings(bt_board(frame)[0]))
    reasons = {e["model"]: e["reason"] for e in meta["excluded_models"]["overall"]}
    assert reasons == dict.fromkeys(
        ["x1", "x2", "x3"], NOT_CONNECTED
    )


def test_mle_support_and_newton_on_arrays():
    # 0 beats 1 and 1 beats 2 but 2 never scores: only {0, 1} is strongly connected
    a = np.array([0, 1, 1, 2])
    b = np.array([1, 0, 2, 0])
    o = np.array([0, 0, 0, 1])
    pairs = aggregate_pairs(a, b, o, 3)
    assert mle_support(pairs).tolist() == [True, True, False]
    keep = np.array([True, True, False, False])
    res = fit_bt(aggregate_pairs(a[keep], b[keep], o[keep], 2))
    assert res.converged.all() and res.grad_norm[0] < 1e-8
    assert res.x[0, 0] - res.x[0, 1] == pytest.approx(0.0, abs=1e-12)  # one win each
