"""How much of a known style effect bt_style removes at each penalty, by simulation.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_style_control.py                      # ~2 min on 2 shared cores
    .venv/bin/python benchmarks/bench_style_control.py --replicates 200 --regs 0,0.01,0.1,1,10

Prints figures only; it is not a test (``arena_pipeline_tests/core/ranking/test_style_control.py`` holds
the fit to known answers).

The tournaments. ``--models`` models (30) with log-strengths ``N(0, 0.7)`` and a style of their own:
each model has a verbosity ``v ~ N(0, 1)`` and the four raw style features of a vote (LMArena's
``(a - b) / (a + b)`` differences, in [-1, 1]) are ``tanh(0.6 (v_a - v_b)) + noise`` for the length
feature and weaker copies of it for the markdown ones, so a verbose model's answers are longer and
better formatted against most opponents. Every pair meets ``--per-pair`` times (60: about 26,000
votes). The outcome of a vote follows the style-controlled model itself: ``logit P(a scores) =
theta_a - theta_b + beta . z`` with ``z`` the z-scored features and the true ``beta`` =
(``--beta``, 0.1, 0.1, 0.05) natural log-odds per standard deviation (0.4 for length: a one-SD longer
answer wins ~10 points more often; LMArena's published length coefficient is of that order). Ties as
in ``bench_coverage.py`` (35% between equals, half a win each).

The style effect a board absorbs. Plain Bradley-Terry (``bt``) credits the verbose models with the
votes their style won: its ratings ``R_bt`` differ from the true strengths ``R`` (both centred, in
points) by the style-induced offset ``R_bt - R``. A style-controlled fit ``R_s`` leaves ``R_s - R``.
The share of the style effect removed is ``1 - <R_s - R, R_bt - R> / |R_bt - R|^2`` per replicate
(the projection of what is left on what plain BT absorbed: 1 = all of it removed, 0 = none; the
fit's own noise, independent of the offset, averages out), with ``rms(R_bt - R)`` and ``rms(R_s - R)``
beside it. The coefficient kept is ``beta_hat / beta`` of the length feature (the penalised fit's own
``share_kept``, against its unpenalised fit, is in the last column). Every figure is a mean over
replicates with its Monte Carlo standard error (replicates independent).

Each ``--regs`` value is ``RankingConfig.style_reg`` with ``style_method="lmarena"`` (LMArena's
weights and its penalty on the mean loss; 1.0 is its value and the default), fitted by the project's
``core.ranking.style_board.fit_style_board``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

import numpy as np

from arena_pipeline.core.ranking.board import Board, fit_bt_board
from arena_pipeline.core.ranking.config import RankingConfig
from arena_pipeline.core.ranking.scale import to_ratings
from arena_pipeline.core.ranking.style_board import fit_style_board
from arena_pipeline.core.ranking.style_control import standardize

#: Ties (tie + both_bad) between equals, as in bench_coverage.py.
TIE_SHARE = 0.35
#: How strongly each feature follows the models' verbosity (length, then the markdown counts).
LOADINGS = (1.0, 0.6, 0.5, 0.4)


def tournament(rng: np.random.Generator, models: int, per_pair: int, beta: np.ndarray):
    """Strengths, a round robin of ``per_pair`` votes a pair, style features and outcome codes."""
    theta = rng.normal(0.0, 0.7, models)
    verbosity = rng.normal(0.0, 1.0, models)
    lo, hi = np.triu_indices(models, k=1)
    a, b = np.repeat(lo, per_pair), np.repeat(hi, per_pair)
    swap = rng.random(a.size) < 0.5
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    gap = np.tanh(0.6 * (verbosity[a] - verbosity[b]))
    raw = np.clip(np.stack([w * gap + 0.3 * rng.standard_normal(a.size) for w in LOADINGS], axis=1), -1.0, 1.0)
    z, _, _ = standardize(raw)
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b] + z @ beta)))
    tau = TIE_SHARE * 4.0 * p * (1.0 - p)
    u = rng.random(a.size)
    o = np.where(u < p - tau / 2.0, 0, np.where(u < p + tau / 2.0, 2 + (rng.random(a.size) < 0.5), 1))
    return theta, a, b, raw, o


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicates", type=int, default=100)
    parser.add_argument("--models", type=int, default=30)
    parser.add_argument("--per-pair", type=int, default=60)
    parser.add_argument("--beta", type=float, default=0.4, help="true length coefficient (log-odds per SD)")
    parser.add_argument("--regs", type=lambda s: [float(x) for x in s.split(",")], default=[0.0, 0.001, 0.01, 0.1, 1.0])
    parser.add_argument("--seed", type=int, default=20261128)
    args = parser.parse_args()
    beta = np.array([args.beta, 0.1, 0.1, 0.05])
    rng = np.random.default_rng(args.seed)
    names = [f"m{i:02d}" for i in range(args.models)]
    base = RankingConfig(methods=("bt_style",), bootstrap_rounds=0, display_min_battles=0, anchor_models=())
    rows: dict[float, list[tuple[float, float, float, float]]] = {reg: [] for reg in args.regs}
    absorbed, votes = [], 0
    started = time.perf_counter()
    for _ in range(args.replicates):
        theta, a, b, raw, o = tournament(rng, args.models, args.per_pair, beta)
        votes = a.size
        truth = to_ratings(theta, None, 1000.0)
        board = Board("sim", base, names, a, b, o, raw, None)
        bt = fit_bt_board(board)
        offset = bt.rating - truth
        absorbed.append(math.sqrt((offset**2).mean()))
        for reg in args.regs:
            config = dataclasses.replace(base, style_reg=reg)
            frame, coefficients, _, _ = fit_style_board(Board("sim", config, names, a, b, o, raw, None), bt.theta)
            left = frame.get_column("rating").to_numpy() - truth
            removed = 1.0 - float(left @ offset) / float(offset @ offset)
            length = coefficients.row(0, named=True)
            rows[reg].append((removed, math.sqrt((left**2).mean()), length["coefficient"] / beta[0],
                              length["share_kept"]))
    absorbed_arr = np.array(absorbed)
    print(f"{args.replicates} replicates, {args.models} models, {votes:,} votes each; true beta {beta.tolist()} "
          f"(log-odds per SD); plain bt's style-induced offset rms(R_bt - R) = {absorbed_arr.mean():.1f} "
          f"± {absorbed_arr.std(ddof=1) / math.sqrt(len(absorbed_arr)):.1f} points")
    print(f"  {'style_reg':>10}{'style effect removed %':>24}{'s.e.':>6}{'rms(R_s - R)':>14}{'s.e.':>6}"
          f"{'length beta kept %':>20}{'s.e.':>6}{'share_kept %':>14}{'s.e.':>6}")
    for reg, values in rows.items():
        arr = np.array(values)
        mean, se = arr.mean(axis=0), arr.std(axis=0, ddof=1) / math.sqrt(len(arr))
        print(f"  {reg:>10g}{100 * mean[0]:>24.1f}{100 * se[0]:>6.1f}{mean[1]:>14.1f}{se[1]:>6.1f}"
              f"{100 * mean[2]:>20.1f}{100 * se[2]:>6.1f}{100 * mean[3]:>14.1f}{100 * se[3]:>6.1f}")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
