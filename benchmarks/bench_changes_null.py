"""How often ``arena.publication_changes`` flags a model whose strength did not change, by simulation.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_changes_null.py                    # ~7 min (3 min of fitting)
    .venv/bin/python benchmarks/bench_changes_null.py --replicates 100 --grow 0.1

Prints figures only; it is not a test (``core/changes/test_changes.py`` holds the formulas).

The null. A publication shows a board; the next dump is the same votes and more, drawn from the same
strengths (a grown dump). Every model's strength is unchanged, so ``beyond_interval`` (0 outside the
95% interval of the change) should flag about 5% of the kept models, and never the reference model,
whose rating is pinned at 1000 on both boards.

The tournaments are ``bench_coverage``'s: ``--models`` models (default 40) with log-strengths
``N(0, 0.7)``, a skewed schedule (popularity over 100x, the least-played model about ``--min-battles``
battles in the grown dump, about 55,000 votes in all), LMArena's ties (35% between equals, half a
win each), the reference the model closest to 3,000 battles. The grown dump is the whole tournament;
the earlier dump is a random ``1 / (1 + grow)`` of its sessions (``--grow`` 0.25: the grown dump has
25% more votes), so every earlier vote is in the grown one, unchanged: ``data_relation`` "votes added".

Designs (each (before, after) pair of boards fitted with the project's code, ``core.ranking.board
.fit_bt_board``, and compared with the project's ``core.changes.changes.compare_boards``):

``sessions``
    ``none``: independent votes, sessions unknown (the primary interval is the vote-level one);
    ``revote``: bench_coverage's re-vote sessions (Geometric, mean 2.5 votes, each repeating the
    previous vote with probability 0.6), known: the primary is the clustered one (issue 36).
``primary``
    ``sandwich`` or ``bootstrap`` (``--rounds`` rounds): ``primary_interval``.
``alignment``
    ``off``, or ``on``: both boards aligned to one published board (the project's
    ``alignment_shifts``/``apply_alignment``/``alignment_record``) whose ratings are the true ones
    plus 250 points plus a model-level disagreement ``N(0, 14)`` (the audit measured 13-16 RMS);
    the shift is re-estimated on each board, as each publication does.

For each design: the share of kept models (the reference left out) flagged, its Monte-Carlo s.e.
(the replicate is the unit: the flags of one replicate share the reference's noise), the number of
times the reference was flagged, the share of rows whose variance was floored at 0 (``s1 >= s0``),
and the mean half-width of the change's interval; by battle band too.

Measured (500 replicates, grow 25%): 5.7% flagged without sessions and 5.5% with re-vote sessions,
for every primary and alignment, the reference never; with ``--grow 0.05`` (200 replicates) 4.9%
and 7.0%: with few added votes, models under 1,000 battles are flagged more often (6.2% and 9.2%),
the estimated s0^2 - s1^2 being a small difference of two noisy numbers (floored at 0 in 0.3% and 1.4%
of their rows).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
from bench_coverage import BANDS, add_tournament_arguments, draw_outcomes, skewed_tournament  # noqa: E402  (benchmarks/ is on sys.path)

from arena_pipeline.core.changes.changes import VOTES_ADDED, compare_boards
from arena_pipeline.core.dataset.models import load_aliases
from arena_pipeline.core.ranking.board import Board, fit_bt_board
from arena_pipeline.core.ranking.config import RankingConfig
from arena_pipeline.core.ranking.scale import to_ratings
from arena_pipeline.core.ranking.sessions import session_clusters
from arena_pipeline.core.validation.external import (
    alignment_record,
    alignment_shifts,
    apply_alignment,
    read_published_board,
)

CATEGORY = "overall"
#: The published board's offset from ours and its models' disagreement with the truth (points).
PUBLISHED_SHIFT, PUBLISHED_NOISE = 250.0, 14.0


class Flags:
    """Flag indicators per (design, band), kept per replicate (the independent unit)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, int], list[tuple[int, int, float, int]]] = {}
        self.reference: dict[str, list[int]] = {}

    def add(self, design: str, changes: pl.DataFrame, reference: str) -> None:
        kept = changes.filter(pl.col("status") == "kept")
        ref = kept.filter(pl.col("model") == reference)
        self.reference.setdefault(design, []).append(int(ref.get_column("beyond_interval").fill_null(False).sum()))
        kept = kept.filter(pl.col("model") != reference)
        flagged = kept.get_column("beyond_interval").fill_null(False).to_numpy()
        battles = kept.get_column("battles_before").to_numpy()
        half = (kept.get_column("change_ci_upper") - kept.get_column("rating_change")).to_numpy()
        floored = (half == 0).astype(int)
        for band, (low, high) in enumerate((*BANDS, (0, math.inf))):
            sel = (battles >= low) & (battles < high)
            row = (int(flagged[sel].sum()), int(sel.sum()), float(half[sel].sum()), int(floored[sel].sum()))
            self.rows.setdefault((design, band), []).append(row)

    def table(self) -> str:
        labels = [f"{lo:,}-{hi - 1:,}" if math.isfinite(hi) else f"{lo:,}+" for lo, hi in BANDS] + ["all"]
        lines = [f"  {'design':<44}{'battles':>13}{'n':>8}{'flagged %':>11}{'s.e.':>6}{'floored %':>11}"
                 f"{'half':>7}{'ref flagged':>13}"]
        for design in dict.fromkeys(d for d, _ in self.rows):
            for band, label in enumerate(labels):
                hits, n, half, floored = (np.array(c, dtype=float) for c in zip(*self.rows[design, band], strict=True))
                if n.sum() == 0:
                    continue
                share = hits.sum() / n.sum()
                r = len(n)
                se = math.sqrt(((hits - share * n) ** 2).sum() * r / max(r - 1, 1)) / n.sum()
                ref = f"{sum(self.reference[design])} of {len(self.reference[design])}" if label == "all" else ""
                lines.append(f"  {design:<44}{label:>13}{int(n.sum()):>8}{100 * share:>11.1f}{100 * se:>6.1f}"
                             f"{100 * floored.sum() / n.sum():>11.1f}{half.sum() / n.sum():>7.1f}{ref:>13}")
        return "\n".join(lines)


def published_board(path: Path, names: list[str], truth: np.ndarray, rng: np.random.Generator) -> pl.DataFrame:
    """A published board file (CSV) of the true ratings moved onto another scale, read as the pipeline reads it."""
    rating = truth + PUBLISHED_SHIFT + rng.normal(0.0, PUBLISHED_NOISE, truth.size)
    pl.DataFrame({"category": CATEGORY, "method": "bt", "model": names, "rating": rating}).write_csv(path)
    return read_published_board(path)


def aligned(frame: pl.DataFrame, theirs: pl.DataFrame, aliases: pl.DataFrame, path: Path,
            config: RankingConfig) -> tuple[pl.DataFrame, dict]:
    """The board moved onto the published board's scale, and the publication's alignment record."""
    shifts = alignment_shifts(frame, theirs, aliases)
    return apply_alignment(frame, shifts), alignment_record(shifts, str(path), "sha", None, config.anchor_rating)


def run(args: argparse.Namespace) -> str:
    rng = np.random.default_rng(args.seed)
    names = [f"m{i:02d}" for i in range(args.models)]
    aliases = load_aliases()
    configs = {p: RankingConfig(methods=("bt",), primary_interval=p, display_min_battles=0,
                                bootstrap_rounds=args.rounds if p == "bootstrap" else 0)
               for p in args.primary}
    flags = Flags()
    spent = 0.0
    votes, ci_methods = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "published.csv"
        for _ in range(args.replicates):
            for sessions in args.sessions:
                revote = sessions == "revote"
                t = skewed_tournament(rng, args.models, args.min_battles, args.reference_battles,
                                      mean_session=2.5 if revote else 1.0)
                o = draw_outcomes(rng, t, 0.6 if revote else 0.0)
                # the earlier dump: a random share of the sessions (all their votes), in the same order
                n_sessions = int(t.session.max()) + 1
                earlier = (rng.random(n_sessions) < 1.0 / (1.0 + args.grow))[t.session]
                known = t.session if revote else np.full(t.a.size, -1)
                votes.append((int(earlier.sum()), t.a.size))
                truth = to_ratings(t.theta, t.reference, 1000.0)
                theirs = published_board(path, names, truth, rng) if "on" in args.alignment else None
                for primary, config in configs.items():
                    started = time.process_time()
                    boards = []
                    for mask in (earlier, np.ones(t.a.size, bool)):
                        board = Board(CATEGORY, config, names, t.a[mask], t.b[mask], o[mask], None, t.reference,
                                      session_clusters(known[mask]).cluster)
                        boards.append(fit_bt_board(board).frame)
                    spent += time.process_time() - started
                    ci_methods[sessions, primary] = boards[1].get_column("ci_method")[0]
                    for alignment in args.alignment:
                        design = f"{sessions} / {ci_methods[sessions, primary]} / alignment {alignment}"
                        if alignment == "on":
                            (before, record0), (after, record1) = (aligned(b, theirs, aliases, path, config)
                                                                   for b in boards)
                        else:
                            (before, record0), (after, record1) = ((b, None) for b in boards)
                        changes = compare_boards(before, after, relation=VOTES_ADDED, settings_changed=False,
                                                 alignment_before=record0, alignment_after=record1)
                        if alignment == "on":  # the same published board: not a settings change
                            assert not changes.get_column("settings_changed").any()
                        flags.add(design, changes, names[t.reference])
    before, after = np.mean(votes, axis=0)
    head = (f"{args.replicates} replicates per design (a new tournament each), {args.models} models, "
            f"{before:,.0f} votes before and {after:,.0f} after on average (grow {args.grow:.0%}); "
            f"data_relation: {VOTES_ADDED}; reference: the model closest to {args.reference_battles:,.0f} battles")
    return (head + "\n" + flags.table()
            + f"\n  CPU fitting {spent:.0f} s ({1000 * spent / max(len(votes), 1) / max(len(configs), 1) / 2:.0f} ms "
              "per board)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tournament_arguments(parser, replicates=300, seed=20261127, rounds_help="bootstrap rounds of a bootstrap primary")
    parser.add_argument("--grow", type=float, default=0.25, help="votes added, as a share of the earlier dump's")
    parser.add_argument("--sessions", nargs="+", choices=("none", "revote"), default=["none", "revote"])
    parser.add_argument("--primary", nargs="+", choices=("sandwich", "bootstrap"), default=["sandwich", "bootstrap"])
    parser.add_argument("--alignment", nargs="+", choices=("off", "on"), default=["off", "on"])
    args = parser.parse_args()
    started = time.perf_counter()
    print(run(args), flush=True)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
