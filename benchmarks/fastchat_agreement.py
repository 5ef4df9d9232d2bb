"""Our `bt` (ties=half) against FastChat's own Bradley-Terry fit on the real 135,634 votes.

Run from the repository root (needs the ``dev`` extra, which installs fschat and scikit-learn)::

    .venv/bin/python benchmarks/fastchat_agreement.py [--votes PATH]

For each category the real vote table carries (overall, creative_writing, math,
instruction_following, hard_prompt), fits our ``bt`` on every battle (no pre-fit cut, centred)
and fschat 0.2.36's ``compute_elo_mle_with_tie`` on the same battles (self-battles left out,
``both_bad`` spelled ``tie (bothbad)``), twice: as FastChat runs it (scikit-learn defaults, an L2
penalty C=1 and tol=1e-4) and converged (no penalty, lbfgs to convergence; see
``arena_pipeline_dev/fastchat_reference.py``). Prints the largest centred difference per
category and the fit times.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from real_votes import REAL_VOTES, load_real_votes  # noqa: E402

from arena_pipeline.core.dataset.categories import tag_categories  # noqa: E402
from arena_pipeline.core.ranking import RankingConfig, compute_rankings  # noqa: E402
from arena_pipeline.core.ranking.tags import tag_rows  # noqa: E402
from arena_pipeline_dev.fastchat_reference import (  # noqa: E402
    centred,
    converged,
    fastchat_battles,
    fastchat_fit,
)

CATEGORIES = ("overall", "creative_writing", "math", "instruction_following", "hard_prompt")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--votes", type=Path, default=REAL_VOTES)
    args = parser.parse_args()
    votes = load_real_votes(args.votes)
    tags, _ = tag_categories(votes)
    config = RankingConfig(
        methods=("bt",), ties="half", bootstrap_rounds=0, min_battles=1, anchor_models=()
    )
    start = time.perf_counter()
    rows = tag_rows(votes.get_column("id"), [tags])
    board = compute_rankings(votes, rows, config).leaderboard.filter(pl.col("method") == "bt")
    print(f"votes: {votes.height:,}; our bt on {len(CATEGORIES)}+ boards: "
          f"{time.perf_counter() - start:.2f} s")
    fit = fastchat_fit()
    print(f"{'category':24s} {'models':>6s} {'battles':>8s} {'as run':>8s} {'converged':>10s} "
          f"{'t as run':>9s} {'t conv':>7s}")
    for category in CATEGORIES:
        ours = board.filter(pl.col("category") == category)
        models = ours.get_column("model").to_list()
        mine = centred(dict(zip(models, ours.get_column("rating"), strict=True)))
        ids = tags.filter(pl.col("category") == category).get_column("battle_id").implode()
        same = fastchat_battles(votes.filter(pl.col("id").is_in(ids)), models)
        row = []
        for mode in (contextlib.nullcontext(), converged()):
            with mode:
                start = time.perf_counter()
                theirs = centred(fit(same))
                row.append((max(abs(mine[m] - theirs[m]) for m in models),
                            time.perf_counter() - start))
        print(f"{category:24s} {len(models):6d} {len(same):8,d} {row[0][0]:8.4f} {row[1][0]:10.4f} "
              f"{row[0][1]:8.2f}s {row[1][1]:6.2f}s")


if __name__ == "__main__":
    main()
