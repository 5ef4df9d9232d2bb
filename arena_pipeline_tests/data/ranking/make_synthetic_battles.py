"""Regenerate synthetic_battles.parquet: 1,200 synthetic battles among 6 models with style columns.

Run from the repository root:
``python arena_pipeline_tests/data/ranking/make_synthetic_battles.py``.
The draw is fixed by the seed, so the file is reproducible. True log-strengths (natural
log-odds) are TRUE_THETA and a longer answer helps (TRUE_TOKENS_EFFECT per unit of the raw
(a - b) / (a + b) token feature); 15% ties and 10% both_bad.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

SEED = 20240517
N_BATTLES = 1200
MODELS = ("model-a", "model-b", "model-c", "model-d", "model-e", "model-f")
TRUE_THETA = np.array([0.8, 0.4, 0.1, 0.0, -0.3, -0.6])
VERBOSITY = np.array([6.5, 6.0, 6.8, 5.5, 6.2, 5.8])  # log mean tokens
TRUE_TOKENS_EFFECT = 1.0


def make() -> pl.DataFrame:
    """Draw the battles."""
    rng = np.random.default_rng(SEED)
    a = rng.integers(0, len(MODELS), N_BATTLES)
    b = (a + rng.integers(1, len(MODELS), N_BATTLES)) % len(MODELS)
    cols: dict[str, np.ndarray] = {}
    tokens = {}
    for side, idx in (("a", a), ("b", b)):
        tok = np.exp(rng.normal(VERBOSITY[idx], 0.6)).astype(np.int32)
        tokens[side] = tok.astype(float)
        cols[f"sum_assistant_{side}_tokens"] = tok
        for i in range(1, 7):
            cols[f"header_count_{side}_h{i}"] = rng.poisson(tok / (800.0 * i))
        cols[f"list_count_{side}_ordered"] = rng.poisson(tok / 300.0)
        cols[f"list_count_{side}_unordered"] = rng.poisson(tok / 150.0)
        cols[f"bold_count_{side}_asterisk"] = rng.poisson(tok / 120.0)
        cols[f"bold_count_{side}_underscore"] = rng.poisson(0.05, N_BATTLES)
    feature = (tokens["a"] - tokens["b"]) / (tokens["a"] + tokens["b"])
    p_a = 1.0 / (1.0 + np.exp(-(TRUE_THETA[a] - TRUE_THETA[b] + TRUE_TOKENS_EFFECT * feature)))
    u = rng.random(N_BATTLES)
    draw = rng.random(N_BATTLES)
    winner = np.where(u < p_a, "model_a", "model_b").astype(object)
    winner[draw < 0.25] = "both_bad"
    winner[draw < 0.15] = "tie"
    # a few null style counts, read as 0
    header = cols["header_count_b_h2"].astype(float)
    header[::97] = np.nan
    frame = pl.DataFrame(
        {
            "id": [f"battle-{i:05d}" for i in range(N_BATTLES)],
            "model_a": [MODELS[i] for i in a],
            "model_b": [MODELS[i] for i in b],
            "winner": winner.tolist(),
            **cols,
        }
    )
    return frame.with_columns(
        pl.col("^(header|list|bold)_count_.*$").cast(pl.Int64),
        pl.col("sum_assistant_a_tokens", "sum_assistant_b_tokens").cast(pl.Int32),
    ).with_columns(pl.Series("header_count_b_h2", header, nan_to_null=True).cast(pl.Int64))


if __name__ == "__main__":
    out = Path(__file__).with_name("synthetic_battles.parquet")
    make().write_parquet(out)
    print(f"wrote {out}")
