"""Reference numbers for bt_style from arena-rank's ContextualBradleyTerry (run once, in its own venv).

Run with a Python that has ``arena-rank`` (0.1.1), pandas and pyarrow installed, NOT the project's
environment (arena-rank pulls in JAX)::

    python3 -m venv .venv-ar && .venv-ar/bin/pip install arena-rank pandas pyarrow
    .venv-ar/bin/python benchmarks/arena_rank_style_reference.py

It reads the test fixture ``arena_pipeline_tests/data/ranking/synthetic_battles.parquet``, builds the
style features exactly as arena-rank's ``examples/example_utils.add_style_feature_cols`` does (summed
header / list / bold counts and assistant tokens per side, (a - b) / (a + b) with a zero total read as
1, z-scored), fits ``ContextualBradleyTerry`` with its defaults (reg=1, ``reweighted=True``,
``min_pair_count=50``) and writes ratings, 95% sandwich intervals and coefficients to
``arena_pipeline_tests/data/ranking/arena_rank_style_reference.json``. Two battle sets: ``all``
(every fixture battle) and ``skewed`` (battles involving model-a, plus every fifth other battle:
pair counts on both sides of the 50 floor, so the reweighting matters).
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
from arena_rank.utils.data_utils import ContextualPairDataset

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "arena_pipeline_tests" / "data" / "ranking" / "synthetic_battles.parquet"
OUT = ROOT / "arena_pipeline_tests" / "data" / "ranking" / "arena_rank_style_reference.json"
GROUPS = {
    "sum_assistant_tokens": ["sum_assistant_{s}_tokens"],
    "header_count": [f"header_count_{{s}}_h{i}" for i in range(1, 7)],
    "list_count": ["list_count_{s}_ordered", "list_count_{s}_unordered"],
    "bold_count": ["bold_count_{s}_asterisk", "bold_count_{s}_underscore"],
}


def features(df: pd.DataFrame) -> pd.DataFrame:
    out = df[["model_a", "model_b", "winner"]].copy()
    for name, cols in GROUPS.items():
        side = {s: sum(df[c.format(s=s)].fillna(0) for c in cols) for s in "ab"}
        total = (side["a"] + side["b"]).replace(0, 1)
        raw = (side["a"] - side["b"]) / total
        out[name] = (raw - raw.mean()) / raw.std()
    return out


def fit(df: pd.DataFrame) -> dict:
    data = features(df)
    dataset = ContextualPairDataset.from_pandas(data, feature_cols=list(GROUPS))
    model = ContextualBradleyTerry(n_competitors=len(dataset.competitors), n_features=len(GROUPS))
    res = model.compute_ratings_and_cis(dataset, significance_level=0.05)
    return {
        "models": list(res["competitors"]),
        "rating": np.asarray(res["ratings"]).tolist(),
        "rating_lower": np.asarray(res["rating_lower"]).tolist(),
        "rating_upper": np.asarray(res["rating_upper"]).tolist(),
        "coefficients": dict(zip(GROUPS, np.asarray(res["coeffs"]).tolist(), strict=True)),
        "battles": len(df),
    }


def main() -> None:
    df = pd.read_parquet(FIXTURE)
    pos = np.arange(len(df))
    skewed = df[(df["model_a"] == "model-a") | (df["model_b"] == "model-a") | (pos % 5 == 0)]
    result = {
        "source": "arena-rank " + version("arena-rank") + " ContextualBradleyTerry defaults "
        "(reg=1, reweighted, min_pair_count=50), sandwich 95%; benchmarks/arena_rank_style_reference.py",
        "all": fit(df),
        "skewed": fit(skewed),
    }
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    for key in ("all", "skewed"):
        print(key, result[key]["battles"], "battles",
              dict(zip(result[key]["models"], np.round(result[key]["rating"], 2), strict=True)))


if __name__ == "__main__":
    main()
