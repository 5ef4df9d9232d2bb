"""The built-in rating methods (Bradley-Terry, style-controlled Bradley-Terry, Rank Centrality), registered in board order.

A further method is a ``rating_method.RatingMethod`` subclass decorated with ``@register`` in a module of its
own, imported here (registration order is board order), with its test; its class carries its name, label,
note, role and settings. ``python -m arena_pipeline.core.ranking.catalogue`` then writes the built-in ones'
names, labels and roles to ``core.method_catalogue``, which the CLI reads without loading the ranking step
(``arena_pipeline_tests/core/ranking/test_methods.py`` registers a toy one from a test).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, Literal

import numpy as np
import polars as pl
from pydantic import Field

from arena_pipeline.core.ranking.board import Board, CategoryBoard, select_models
from arena_pipeline.core.ranking.bradley_terry import aggregate_pairs, fit_bt
from arena_pipeline.core.ranking.rating_method import BoardResult, RatingMethod, register
from arena_pipeline.core.ranking.sessions import session_clusters
from arena_pipeline.core.ranking.spectral import fit_spectral_board
from arena_pipeline.core.ranking.style_board import fit_style_board
from arena_pipeline.core.ranking.style_control import (
    STYLE_FEATURES,
    has_style_counts,
    style_columns,
    style_feature_exprs,
)
from arena_pipeline.core.ranking.types import MAX_STYLE_BOOTSTRAP_ROUNDS, STYLE_BOOTSTRAP_LIMIT, Setting

#: Shared settings every bootstrap of a Bradley-Terry fit reads.
_FIT_SETTINGS = ("tol", "max_iter", "seed")


@register
class BradleyTerry(RatingMethod):
    """``bt``: exact MLE by Newton's method on per-pair counts (gradient norm below ``tol``).

    Intervals: percentile bootstrap over ``bootstrap_rounds`` resamples of the battles (drawn with
    replacement and aggregated per (pair, outcome) cell: the counts are multinomial, exactly as when
    resampling rows; each replicate re-anchored on the reference), and the sandwich (HC0) normal
    interval of the difference from the reference; with sessions, their clustered forms
    (:func:`board.fit_bt_board`). The fit is the category's base fit (``CategoryBoard.bt``), made
    whether or not ``bt`` is configured: the pairwise predictions and the other methods use it.
    """

    name = "bt"
    label = "Bradley-Terry"
    role = "primary"
    reads = ("bootstrap_rounds", "cluster_column", "primary_interval", "cluster_primary", *_FIT_SETTINGS)

    def fit(self, board: CategoryBoard) -> BoardResult:
        bt = board.bt
        return BoardResult(bt.frame, bt.significance, bt.info)


@register
class StyleControlled(RatingMethod):
    """``bt_style``: Bradley-Terry with four style covariates fitted jointly per battle.

    See ``RankingConfig.style_method`` and :func:`style_board.fit_style_board`; bootstrap
    (``style_bootstrap_rounds``, default 0) by resampling battles. On a board whose votes carry
    sessions, the session-clustered (CR3) sandwich as ``bt``'s, primary with ``cluster_primary``
    (its ratings, its pairwise rows and its coefficients); the coefficient rows also give the
    unpenalised coefficients and the share of each the penalty keeps. Only battles with style counts
    (``style_control.has_style_counts``) enter it: a dump whose format has no style counts leaves
    them null, and such votes are left out (models selected and the reference chosen again among the
    rest, so the board equals the one fitted on those battles alone), never entered with a style
    difference of 0. How many were left out is in the coefficient rows (``battles_without_style``)
    and ``metadata["style_left_out"]``; a category with fewer than 2 models among its styled votes
    has no ``bt_style`` board.
    """

    name = "bt_style"
    label = "Bradley-Terry, style-controlled"
    role = "style"
    settings = {
        "style_bootstrap_rounds": Setting(
            Annotated[int, STYLE_BOOTSTRAP_LIMIT], Field(
                default=0, ge=0, description="Bootstrap rounds of bt_style's second interval (0: sandwich only, as "
                "LMArena publishes for style control). Each round refits the per-battle style model (about "
                f"0.05-0.5 s per board on the full dump); at most {MAX_STYLE_BOOTSTRAP_ROUNDS:,}."), run=True),
        "style_method": Setting(
            Literal["lmarena", "unweighted"], Field(
                default="lmarena", description="'lmarena': LMArena's current style control, as arena-rank's "
                "ContextualBradleyTerry on a reweighted ContextualPairDataset: four z-scored features, battles "
                "weighted 1 / max(n_pair, style_min_pair_count) (mean 1) and style_reg / 2 * |beta|^2 added to the "
                "mean weighted negative log-likelihood; 'unweighted': the earlier variant, no weights and style_l2 "
                "on the summed loss."), run=True),
        "style_reg": Setting(
            float, Field(
                default=1.0, ge=0, allow_inf_nan=False, description="bt_style's penalty for style_method 'lmarena': "
                "style_reg / 2 * |beta|^2 on the mean weighted negative log-likelihood (arena-rank's reg; 1.0 is "
                "the value of LMArena's style-control notebook, the default). It is not negligible: arena.style_coefficients "
                "gives each coefficient beside the unpenalised one (coefficient_unpenalised, share_kept), and "
                "benchmarks/bench_style_control.py how much of a known style effect each value removes; 0 fits the "
                "style coefficients without penalty."), run=True),
        "style_min_pair_count": Setting(
            int, Field(
                default=50, ge=1, description="arena-rank's min_pair_count, for style_method 'lmarena'.")),
        "style_l2": Setting(
            float, Field(
                default=1.0, ge=0, allow_inf_nan=False, description="For style_method 'unweighted': ridge penalty "
                "style_l2 / 2 * |beta|^2 on the four style coefficients (natural log-odds per standard deviation of "
                "the feature), added to the summed (not averaged) negative log-likelihood. 1.0 is a N(0, 1) prior: "
                "negligible against boards of thousands of battles, a mild stabiliser on small ones. arena-rank's "
                "reg=r equals style_l2 = r * n_battles."), run=True),
    }
    reads = ("primary_interval", "cluster_column", "cluster_primary", *_FIT_SETTINGS)
    summary = "style_left_out"
    needs = "the conversation style columns"

    def battle_columns(self) -> list[str]:
        return style_columns()

    def battle_features(self) -> list[pl.Expr]:
        return [*style_feature_exprs(), has_style_counts()]

    def fit(self, board: CategoryBoard) -> BoardResult:
        styled = board.part.get_column("_styled").to_numpy()
        left_out = int((~styled).sum())
        info: dict[str, Any]
        if styled.all():
            raw_style = board.part.select(STYLE_FEATURES).to_numpy()[board.keep]
            style_board, theta0, info = replace(board.board, raw_style=raw_style), board.bt.theta, {}
        else:
            style_board, theta0, info = _styled_board(board, styled)
        if style_board is None:
            return BoardResult(None, info=info, summary=left_out)
        frame, coefficients, fitted, significance = fit_style_board(style_board, theta0, left_out)
        info.update(fitted)
        return BoardResult(frame, significance, info, coefficients, summary=left_out)


@register
class Spectral(RatingMethod):
    """``spectral``: Rank Centrality (Negahban et al.: a walk on per-pair win fractions, normalised by
    the maximum degree), expressed in rating points but not Bradley-Terry's estimate: a pair met once
    weighs like a pair met often, so it is a differently targeted, less efficient cross-check
    (its ``note``), with a bootstrap interval from the same resamples as ``bt``; no
    sandwich interval. The Kendall tau between its ratings and ``bt``'s is in
    ``metadata["kendall_tau"]`` (:func:`spectral.fit_spectral_board`).
    """

    name = "spectral"
    label = "Rank Centrality cross-check (spectral)"
    note = (
        "A cross-check, not Bradley-Terry's scale: Rank Centrality is the stationary distribution of a walk "
        "on per-pair win fractions, where a pair met once weighs as much as a pair met a thousand times. It "
        "targets Bradley-Terry's strengths only when Bradley-Terry holds exactly, uses the votes less "
        "efficiently (wider intervals), and its ratings can differ from Bradley-Terry's by tens of points "
        "(up to 39 on a shown model of LMArena's boards); compare its order with Bradley-Terry's, not its "
        "ratings.")
    reads = ("bootstrap_rounds", "cluster_column", "primary_interval", "cluster_primary", "seed")
    summary = "kendall_tau"

    def fit(self, board: CategoryBoard) -> BoardResult:
        frame, info, significance = fit_spectral_board(board.board, board.bt)
        return BoardResult(frame, significance, info, summary=info["kendall_tau_vs_bt"])


def _styled_board(category: CategoryBoard, styled: np.ndarray) -> tuple[Board | None, np.ndarray | None, dict]:
    """The category's board over its battles with style counts only, for ``bt_style``.

    Models are selected again on those battles (``select_models``: a model may have no finite
    estimate without the others), the reference chosen again among them, and the start of the
    style fit is the plain Bradley-Terry fit of the same battles: exactly what
    ``compute_rankings`` does when given only these battles. None (and why, in the returned
    info) when fewer than 2 models are left.
    """
    board, part, names = category.board, category.part, category.names
    c = board.config
    a, b, o = (part.get_column(col).to_numpy()[styled] for col in ("_a", "_b", "_o"))
    active, _ = select_models(a, b, o, names, c.min_battles)
    info: dict[str, Any] = {
        "battles_with_style": len(a),
        "models_without_style_board": sorted(set(board.models) - {names[i] for i in np.flatnonzero(active)}),
    }
    models = [names[i] for i in np.flatnonzero(active)]
    if len(models) < 2:
        info["note"] = (f"{len(models)} model(s) left among the {len(a)} battles with style counts: "
                        "no bt_style board (the other battles' dumps have no style counts)")
        return None, None, info
    keep = active[a] & active[b]
    local = np.cumsum(active) - 1
    anchor_name = next((name for name in category.candidates if name in set(models)), None)
    info["anchor"] = anchor_name
    cluster = None
    if board.cluster is not None:  # the board's sessions, renumbered over the styled battles kept
        cluster = session_clusters(part.get_column("_cluster").to_numpy()[styled][keep]).cluster
    style_board = Board(
        category=board.category,
        config=c,
        models=models,
        a=local[a[keep]],
        b=local[b[keep]],
        o=o[keep],
        raw_style=part.select(STYLE_FEATURES).to_numpy()[styled][keep],
        anchor=models.index(anchor_name) if anchor_name is not None else None,
        cluster=cluster,
    )
    pairs = aggregate_pairs(style_board.a, style_board.b, style_board.o, style_board.m)
    theta0 = fit_bt(pairs, tol=c.tol, max_iter=c.max_iter).x[0]
    return style_board, theta0, info
