"""Small, reproducible published frames for the presentation, CLI and browser tests.

``synthetic_outputs`` ranks 3,000 Bradley-Terry battles among 9 models (one name carries HTML and
Markdown metacharacters) plus a model that only wins (so it has battles and no rating).
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache

import numpy as np
import polars as pl
from scipy.special import expit

from arena_pipeline.core.dataset.schema import CONVERSATION_STYLE_COLUMNS
from arena_pipeline.core.ranking import RankingConfig, RankingOutput, compute_rankings
from arena_pipeline.core.ranking.tags import tag_rows
from arena_pipeline.presentation.read import PublicationView

#: True strengths (natural log-odds) and verbosity of the synthetic models. One name carries
#: HTML/Markdown metacharacters to prove escaping.
SYNTHETIC_MODELS: dict[str, tuple[float, float]] = {
    "gemini-2.5-pro": (1.0, 1.5),
    "claude-opus-4-20250514-thinking-16k": (0.8, 0.8),
    "gpt-4.1-2025-04-14": (0.55, 1.0),
    "o3-2025-04-16": (0.5, 0.7),
    "deepseek-r1-0528": (0.3, 1.8),
    "qwen3-235b-a22b": (0.1, 1.2),
    "gemma-3-27b-it": (-0.2, 1.1),
    "llama-4-maverick-17b-128e-instruct": (-0.5, 0.9),
    "<b>odd|model</b> & co": (-0.7, 0.6),
}

REVISION = "0123456789abcdef0123456789abcdef01234567"


def synthetic_battles(n: int = 3000, seed: int = 0) -> pl.DataFrame:
    """Bradley-Terry battles among :data:`SYNTHETIC_MODELS` with ties, style columns, flags."""
    rng = np.random.default_rng(seed)
    names = list(SYNTHETIC_MODELS)
    strength = np.array([SYNTHETIC_MODELS[m][0] for m in names])
    verbosity = np.array([SYNTHETIC_MODELS[m][1] for m in names])
    a = rng.integers(0, len(names), n)
    b = (a + rng.integers(1, len(names), n)) % len(names)
    tokens_a, tokens_b = rng.poisson(400 * verbosity[a]), rng.poisson(400 * verbosity[b])
    p = expit(strength[a] - strength[b] + 0.5 * (tokens_a - tokens_b) / (tokens_a + tokens_b + 1))
    u, v = rng.random(n), rng.random(n)
    winner = np.where(u < 0.15, "tie", np.where(u < 0.2, "both_bad", np.where(v < p, "model_a", "model_b")))
    start = dt.datetime(2025, 4, 1)
    columns: dict[str, object] = {
        "id": [f"b{i:05d}" for i in range(n)],
        "model_a": [names[i] for i in a],
        "model_b": [names[i] for i in b],
        "winner": winner.tolist(),
        "timestamp": [start + dt.timedelta(minutes=int(m)) for m in rng.integers(0, 60 * 24 * 90, n)],
        "is_code": (rng.random(n) < 0.3).tolist(),
        "math": (rng.random(n) < 0.2).tolist(),
    }
    for side, tokens in (("a", tokens_a), ("b", tokens_b)):
        for feature, templates in CONVERSATION_STYLE_COLUMNS.items():
            for template in templates:
                columns[template.format(side=side)] = (
                    tokens if feature == "tokens" else rng.poisson(1.0, n)
                )
    return pl.DataFrame(columns).with_columns(pl.col("timestamp").cast(pl.Datetime("us")))


def synthetic_categories(battles: pl.DataFrame) -> pl.DataFrame:
    """``overall`` for every battle, ``coding`` / ``math`` from the flags, as rows of ``battles`` (``tags.tag_rows``)."""
    ids = pl.col("id").alias("battle_id")
    return tag_rows(battles.get_column("id"), [pl.concat(
        [
            battles.select(ids, category=pl.lit("overall")),
            battles.filter("math").select(ids, category=pl.lit("math")),
            battles.filter("is_code").select(ids, category=pl.lit("coding")),
        ]
    )])


#: A model that won each of its 24 overall battles: it has no finite rating.
CHAMPION = "zz-champion"


def with_champion(battles: pl.DataFrame, n: int = 24) -> pl.DataFrame:
    """``battles`` plus ``n`` battles (copies of the first rows) that :data:`CHAMPION` won as side a."""
    extra = battles.head(n).with_columns(
        id=pl.format("champ{}", pl.int_range(pl.len())), model_a=pl.lit(CHAMPION),
        winner=pl.lit("model_a"), is_code=pl.lit(False), math=pl.lit(False))
    return pl.concat([battles, extra])


@lru_cache(maxsize=4)
def synthetic_outputs(n: int = 3000, seed: int = 0) -> RankingOutput:
    """compute_rankings on :func:`synthetic_battles` and :data:`CHAMPION`'s battles (20 bootstrap
    rounds, min 20 battles)."""
    battles = with_champion(synthetic_battles(n, seed))
    return compute_rankings(
        battles, synthetic_categories(battles), RankingConfig(bootstrap_rounds=20, min_battles=20)
    )


def synthetic_published(**extra) -> PublicationView:
    """:func:`synthetic_outputs` as published frames, with quality results and the dumps row."""
    return PublicationView.from_output(synthetic_outputs(), quality_results=synthetic_quality(),
                                 dump=synthetic_dump(), style_profile=synthetic_style_profile(), **extra)


def synthetic_quality() -> pl.DataFrame:
    """Three expectation results, one failed warning, shaped like ``arena.quality_results``."""
    return pl.DataFrame(
        {
            "dump_revision": [REVISION] * 3,
            "table_name": ["battles", "battles", "messages"],
            "suite": ["battles", "battles", "messages"],
            "expectation_id": ["id_unique", "winner_in_set", "role_in_set"],
            "expectation_type": ["expect_column_values_to_be_unique", "expect_column_values_to_be_in_set",
                                 "expect_column_values_to_be_in_set"],
            "column_name": ["id", "winner", "role"],
            "severity": ["error", "warning", "error"],
            "success": [True, False, True],
            "element_count": [3000, 3000, 12000],
            "unexpected_count": [0, 3, 0],
            "unexpected_percent": [0.0, 0.1, 0.0],
            "sample_ids": [[], ["b00001", "b00002", "b00003"], []],
            "checked_at": [dt.datetime(2025, 7, 1, 3, 0)] * 3,
        }
    )


def synthetic_dump() -> dict:
    return {
        "revision": REVISION,
        "source": "lmarena-ai/arena-human-preference-140k",
        "source_kind": "hub",
        "requested_revision": "main",
        "rows": 3000,
        "files": '[{"name": "data/train-00000-of-00001.parquet"}]',
        "status": "published",
        "first_seen": dt.datetime(2025, 7, 1, 2, 0),
        "published_at": dt.datetime(2025, 7, 1, 3, 4),
    }


@lru_cache(maxsize=1)
def synthetic_style_profile() -> pl.DataFrame:
    """``core.readside.derived.style_profile`` of the synthetic battles, stored as ``arena.battles`` in DuckDB."""
    import duckdb

    from arena_pipeline.core.readside.derived import style_profile

    battles = with_champion(synthetic_battles())  # noqa: F841 - read by DuckDB
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA arena; CREATE TABLE arena.battles AS SELECT * FROM battles")
        return style_profile(con)


#: Benchmarks of :func:`synthetic_benchmarks`: a noisy copy of the true strengths, and one with
#: three models only (a small set).
BENCHMARK_NAMES = ("reasoning", "tiny")


@lru_cache(maxsize=1)
def synthetic_benchmarks(publication_id: int = 7):
    """Made-up benchmark scores of the synthetic models (one unknown model, one small benchmark),
    matched and compared with :func:`synthetic_outputs`' leaderboard by the core functions, as
    ``benchmark_comparison`` stores them, as publication ``publication_id`` shows them."""
    from arena_pipeline.core.readside.derived import Benchmarks
    from arena_pipeline.core.validation.benchmarks import benchmark_agreement, match_scores

    names = list(SYNTHETIC_MODELS)
    noise = np.random.default_rng(1).normal(0, 0.25, len(names))
    reasoning = [round(50 + 20 * (SYNTHETIC_MODELS[m][0] + e), 2) for m, e in zip(names, noise, strict=True)]
    rows = [*zip(names, ["reasoning"] * len(names), reasoning, strict=True), ("unknown-model-7b", "reasoning", 12.5),
            *zip(names[:3], ["tiny"] * 3, [3.0, 1.0, 2.0], strict=True)]
    read = pl.DataFrame(
        {"model": [r[0] for r in rows], "canonical": [r[0] for r in rows], "benchmark": [r[1] for r in rows],
         "score": [float(r[2]) for r in rows], "source": ["scores.csv"] * len(rows),
         "line": list(range(2, len(rows) + 2))})
    board = synthetic_outputs().leaderboard
    scores = match_scores(read, board.get_column("model").unique())
    return Benchmarks(scores, benchmark_agreement(board, scores, rounds=200), publication_id=publication_id)
