"""Rank Centrality (`spectral`): an independent eigenvector reference, exact recovery, tau vs bt."""

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
from arena_pipeline.core.ranking.tags import tag_rows

FIXTURE = Path(__file__).parents[2] / "data" / "ranking" / "synthetic_battles.parquet"


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
    settings = {"methods": ("bt", "spectral"), "bootstrap_rounds": 0, "min_battles": 1, **config}
    every = frame.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    categories = tag_rows(frame.get_column("id"), [every])
    out = compute_rankings(frame, categories, RankingConfig(**settings))
    result = {}
    for method in ("bt", "spectral"):
        board = out.leaderboard.filter(pl.col("method") == method)
        result[method] = dict(zip(board.get_column("model"), board.get_column("rating"), strict=True))
    return result, out.metadata


def reference_rank_centrality(rows: list[tuple[int, int, float]], n: int) -> np.ndarray:
    """Negahban et al.'s algorithm written out: A from per-pair fractions, P = A / d_max,
    P_ii = 1 - row sum, pi = left eigenvector of P for eigenvalue 1 (numpy.linalg.eig)."""
    wins = np.zeros((n, n))  # wins[i, j]: score of i against j
    for i, j, score_i in rows:
        wins[i, j] += score_i
        wins[j, i] += 1.0 - score_i
    met = (wins + wins.T) > 0
    a = np.where(met, wins.T / np.where(met, wins + wins.T, 1.0), 0.0)  # a[i, j]: j beat i
    d_max = met.sum(axis=1).max()
    p = a / d_max
    p[np.diag_indices(n)] = 1.0 - p.sum(axis=1)
    values, vectors = np.linalg.eig(p.T)
    pi = np.real(vectors[:, np.argmin(np.abs(values - 1.0))])
    return np.log(pi / pi.sum())


def test_matches_an_independent_eigenvector_reference():
    rng = np.random.default_rng(3)
    n = 7
    strength = rng.normal(0.0, 1.0, n)
    rows = []
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < 0.7:  # an incomplete graph with very different pair counts
                for _ in range(int(rng.integers(1, 60))):
                    p = 1.0 / (1.0 + np.exp(strength[j] - strength[i]))
                    u = rng.random()
                    rows.append((i, j, 0.5 if u < 0.1 else float(u < 0.1 + 0.9 * p)))
    a = np.array([r[0] for r in rows])
    b = np.array([r[1] for r in rows])
    o = np.array([2 if r[2] == 0.5 else (0 if r[2] == 1.0 else 1) for r in rows])
    pairs = aggregate_pairs(a, b, o, n)
    log_pi = rank_centrality(pairs.lo, pairs.hi, pairs.score_lo, pairs.score_hi, n)
    expected = reference_rank_centrality(rows, n)
    assert np.allclose(log_pi - log_pi.mean(), expected - expected.mean(), atol=1e-9)


def test_fractions_not_counts_drive_the_walk():
    # a 3-cycle: each pair's winner takes all its battles, with 2, 1 and 1 battles. Rank
    # Centrality depends only on the fractions: equal ratings. A walk on raw counts (one
    # LSR step, choix.lsr_pairwise) gives [1.2, 0.6, 1.2] instead.
    rows = [(f"i{w}", f"i{lo}", "model_a") for w, lo in [(0, 1), (0, 1), (1, 2), (2, 0)]]
    r = boards(frame_from(rows))[0]["spectral"]
    assert r["i0"] == pytest.approx(r["i1"], abs=1e-9)
    assert r["i0"] == pytest.approx(r["i2"], abs=1e-9)
    assert r["i0"] == pytest.approx(1000.0, abs=1e-9)


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
    every = frame.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    categories = tag_rows(frame.get_column("id"), [every])
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
