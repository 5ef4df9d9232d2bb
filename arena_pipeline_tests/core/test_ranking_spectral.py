"""Rank Centrality (`spectral`): choix's published LSR case, exact recovery, tau vs bt."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.stats import kendalltau

from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.bradley_terry import aggregate_pairs
from arena_pipeline.core.ranking.spectral import rank_centrality

FIXTURE = Path(__file__).parents[1] / "data" / "ranking" / "synthetic_battles.parquet"


def frame_from(rows: list[tuple[str, str, str]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": [f"x{i}" for i in range(len(rows))],
            "model_a": [r[0] for r in rows],
            "model_b": [r[1] for r in rows],
            "winner": [r[2] for r in rows],
        }
    )


def boards(frame: pl.DataFrame, **config) -> tuple[dict[str, dict[str, float]], dict]:
    settings = {"methods": ("bt", "spectral"), "bootstrap_rounds": 0, "min_battles": 0, **config}
    categories = frame.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    out = compute_rankings(frame, categories, RankingConfig(**settings))
    result = {}
    for method in ("bt", "spectral"):
        board = out.leaderboard.filter(pl.col("method") == method)
        result[method] = dict(zip(board.get_column("model"), board.get_column("rating")))
    return result, out.metadata


def test_choix_lsr_pairwise_case():
    # lucasmaystre/choix tests/test_lsr.py: lsr_pairwise(3, ((0,1),(0,1),(1,2),(2,0)))
    # == [1.2, 0.6, 1.2] (uniform start, one LSR step = this random walk); tol 1e-9 log units
    pairs = aggregate_pairs(np.array([0, 0, 1, 2]), np.array([1, 1, 2, 0]), np.zeros(4, int), 3)
    log_pi = rank_centrality(pairs.lo, pairs.hi, pairs.score_lo, pairs.score_hi, 3)
    expected = np.log([1.2, 0.6, 1.2])
    assert np.allclose(log_pi - log_pi.mean(), expected - expected.mean(), atol=1e-9)
    rows = [(f"i{w}", f"i{l}", "model_a") for w, l in [(0, 1), (0, 1), (1, 2), (2, 0)]]
    r = boards(frame_from(rows))[0]["spectral"]
    assert r["i0"] - r["i1"] == pytest.approx(400.0 * math.log10(2.0), abs=1e-9)
    assert r["i0"] == pytest.approx(r["i2"], abs=1e-9)


def test_counts_that_follow_bradley_terry_exactly_are_recovered_by_both_methods():
    # strengths 1 : 2 : 4, every pair won in exact proportion -> 400 log10(2) apart
    rows = (
        [("s1", "s2", "model_a")] * 10 + [("s1", "s2", "model_b")] * 20
        + [("s1", "s4", "model_a")] * 10 + [("s4", "s1", "model_a")] * 40
        + [("s2", "s4", "model_a")] * 10 + [("s2", "s4", "model_b")] * 20
    )
    result, meta = boards(frame_from(rows))
    step = 400.0 * math.log10(2.0)
    for method in ("bt", "spectral"):
        r = result[method]
        assert r["s2"] - r["s1"] == pytest.approx(step, abs=1e-6)
        assert r["s4"] - r["s2"] == pytest.approx(step, abs=1e-6)
    assert meta["kendall_tau"]["overall"] == pytest.approx(1.0)


def test_kendall_tau_and_bootstrap_interval_on_fixture():
    frame = pl.read_parquet(FIXTURE).select("id", "model_a", "model_b", "winner")
    result, meta = boards(frame, bootstrap_rounds=50)
    models = sorted(result["bt"])
    tau = kendalltau([result["bt"][m] for m in models], [result["spectral"][m] for m in models])
    assert meta["kendall_tau"]["overall"] == pytest.approx(tau.statistic)
    assert meta["kendall_tau"]["overall"] > 0.7
    categories = frame.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    config = RankingConfig(methods=("spectral",), bootstrap_rounds=50)
    out = compute_rankings(frame, categories, config)
    board = out.leaderboard
    assert board.get_column("ci_method").unique().to_list() == ["bootstrap"]
    assert board.get_column("sandwich_lower").null_count() == board.height
    assert (board.get_column("ci_lower") <= board.get_column("rating")).all()
    assert (board.get_column("rating") <= board.get_column("ci_upper")).all()


def test_batched_equals_one_at_a_time():
    rng = np.random.default_rng(0)
    lo, hi = np.triu_indices(5, k=1)
    s_lo = rng.integers(1, 30, size=(4, len(lo))).astype(float)
    s_hi = rng.integers(1, 30, size=(4, len(lo))).astype(float)
    batch = rank_centrality(lo, hi, s_lo, s_hi, 5)
    for b in range(4):
        assert np.allclose(batch[b], rank_centrality(lo, hi, s_lo[b], s_hi[b], 5), atol=1e-12)
