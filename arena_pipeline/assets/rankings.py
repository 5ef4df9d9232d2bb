"""Ranking assets: category tags and the per-category leaderboards, pairwise and style tables."""

import dataclasses

import dagster as dg
import polars as pl

from arena_pipeline.assets.ingest import TABLE_KEYS
from arena_pipeline.assets.metadata import schema_metadata, table_spec
from arena_pipeline.assets.run_config import RankingRunConfig
from arena_pipeline.assets.version_store import VERSION_STORE, Versioned, stored_input
from arena_pipeline.constants import (
    BATTLE_CATEGORIES_TABLE,
    BATTLES_TABLE,
    BOARD_STATUS_TABLE,
    DUMP_LEADERBOARD_TABLE,
    LEADERBOARD_TABLE,
    MODEL_FIT_CALIBRATION_TABLE,
    MODEL_FIT_TABLE,
    PAIRWISE_SIGNIFICANCE_TABLE,
    PAIRWISE_TABLE,
    QUARANTINE_TABLE,
    SCHEMA,
    STYLE_COEFFICIENTS_TABLE,
    UNRATED_MODELS_TABLE,
)
from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.dataset.dumps import conflicting_copies
from arena_pipeline.core.ranking import (
    BOARD_STATUS_SCHEMA,
    LEADERBOARD_SCHEMA,
    PAIRWISE_SCHEMA,
    PAIRWISE_SIGNIFICANCE_SCHEMA,
    STYLE_COEFFICIENTS_SCHEMA,
    UNRATED_MODELS_SCHEMA,
    compute_rankings,
    per_dump_leaderboards,
)
from arena_pipeline.core.ranking.model_fit import (
    MODEL_FIT_CALIBRATION_SCHEMA,
    MODEL_FIT_SCHEMA,
    compute_model_fit,
)
from arena_pipeline.core.store.catalog import TableSpec
from arena_pipeline.core.validation.external import (
    BoardFormatError,
    alignment_record,
    alignment_shifts,
    apply_alignment,
    board_sha256,
    unaligned_record,
)
from arena_pipeline.presentation.markdown import board_previews
from arena_pipeline.presentation.read import PublicationView
from arena_pipeline.resources import ModelCatalog

BATTLE_CATEGORIES = dg.AssetKey([SCHEMA, BATTLE_CATEGORIES_TABLE])
REVISION_COLUMN = {"dump_revision": pl.String()}
RANKING_KEYS = {name: dg.AssetKey([SCHEMA, name])
                for name in (LEADERBOARD_TABLE, PAIRWISE_TABLE, PAIRWISE_SIGNIFICANCE_TABLE, STYLE_COEFFICIENTS_TABLE,
                             UNRATED_MODELS_TABLE, BOARD_STATUS_TABLE, DUMP_LEADERBOARD_TABLE,
                             MODEL_FIT_TABLE, MODEL_FIT_CALIBRATION_TABLE)}


@dg.asset(
    key=BATTLE_CATEGORIES,
    group_name="rankings",
    kinds={"polars", "duckdb"},
    metadata=schema_metadata({"battle_id": pl.String(), "category": pl.String()},
                             f"{SCHEMA}.{BATTLE_CATEGORIES_TABLE}", TableSpec(file_view=True)),
    ins={"battles": stored_input(TABLE_KEYS[BATTLES_TABLE])},
    io_manager_key=VERSION_STORE,
)
def battle_categories(battles: pl.DataFrame) -> dg.Output[Versioned]:
    """arena.battle_categories: (battle_id, category) for overall and the 7 categories of the schema seed.

    Rules (core/dataset/categories.py): creative_writing, math, instruction_following flags; coding =
    is_code; hard_prompt = at least 6 of the 7 criteria; longer_query = sum_user_tokens > 500;
    multi_turn = turns > 1. A null flag counts as false and is counted in the metadata. The same
    battles and code tagged before: that version, as a view.
    """
    tags, meta = tag_categories(battles)
    counts = {name: m["battles"] for name, m in meta.items()}
    nulls = {name: m["null_as_false"] for name, m in meta.items()}
    return dg.Output(
        Versioned(tags, reuse=True),
        metadata={
            "battles_per_category": dg.MetadataValue.json(counts),
            "null_flags_counted_false": dg.MetadataValue.json(nulls),
            "unavailable": dg.MetadataValue.json([n for n, m in meta.items() if not m["available"]]),
            "unavailable_by_dump": dg.MetadataValue.json(
                {n: m["unavailable_in"] for n, m in meta.items() if m.get("unavailable_in")}),
        },
    )


def _aligned(context: dg.AssetExecutionContext, leaderboard: pl.DataFrame, model_catalog: ModelCatalog,
             anchor_rating: float) -> tuple[pl.DataFrame, dict | None]:
    """The leaderboard moved onto the published board's scale when ARENA_ALIGN_TO_PUBLISHED_BOARD asks for it,
    and the record for the publication's settings (None: not asked). A missing or unreadable board leaves the
    boards on our scale and says why in the record (the leaderboards are never blocked by it)."""
    if not model_catalog.align_to_board():
        return leaderboard, None
    path, date = model_catalog.board_path(), model_catalog.board_date()
    if path is None:
        record = unaligned_record(None, "ARENA_PUBLISHED_BOARD is not set: no board to align to", date)
    else:
        aliases = model_catalog.aliases()
        try:
            theirs = model_catalog.read_board(aliases)
        except (BoardFormatError, FileNotFoundError) as exc:
            record = unaligned_record(path, f"the published board is unusable: {exc}", date)
        else:
            shifts = alignment_shifts(leaderboard, theirs, aliases)
            return (apply_alignment(leaderboard, shifts),
                    alignment_record(shifts, path, board_sha256(path), date, anchor_rating))
    context.log.warning(f"boards not aligned: {record['problem']}")
    return leaderboard, record


# the inputs come in as the multi-asset's ins (below); dump_leaderboard alone also reads arena.quarantine
_RANKED = {"group": "rankings", "kinds": {"numpy", "duckdb"}, "deps": []}
#: every table of the fit is published and exported; the boards and the style coefficients keep their history
_EXPORTED, _WITH_HISTORY = TableSpec(exported=True), TableSpec(exported=True, history=True)


_RANKING_SPECS = [
        table_spec(LEADERBOARD_TABLE, {**LEADERBOARD_SCHEMA, **REVISION_COLUMN}, _WITH_HISTORY, **_RANKED,
                   description="arena.leaderboard: one row per (category, method, model) with rating, 95% CI, "
                   "rank, the rank spread rank_ub-rank_lb (for this model: 95% for each model alone) and "
                   "rank_ub_simultaneous-rank_lb_simultaneous (for every model at once: 95% for the whole board), "
                   "and counts; methods bt, bt_style (style control) and spectral."),
        table_spec(PAIRWISE_TABLE, {**PAIRWISE_SCHEMA, **REVISION_COLUMN}, _EXPORTED, **_RANKED,
                   description="arena.pairwise: per category and model pair, battles, wins, ties, observed score "
                   "rate and the Bradley-Terry expected score (win_rate_1, predicted_win_rate_1: a tie counts 1/2, so "
                   "these are expected scores, not chances of an outright win; what a win-rate heatmap reads)."),
        table_spec(PAIRWISE_SIGNIFICANCE_TABLE, {**PAIRWISE_SIGNIFICANCE_SCHEMA, **REVISION_COLUMN}, _EXPORTED,
                   **_RANKED,
                   description="arena.pairwise_significance: per category, method and pair of shown models, the "
                   "rating difference, its 95% interval from the full covariance of the primary method "
                   "(clustered by session where sessions are known, bt_style included) and whether it excludes 0 "
                   "(significant: 95% for this pair alone; rank_ub and rank_lb are read from it) and whether the "
                   "claim holds for every pair of the board at once (significant_simultaneous: family-wise 95%, "
                   "max-t with step-down; the simultaneous rank bounds are read from it). expected_score_1 is "
                   "model_1's expected score (a tie counting 1/2), not its chance of an outright win."),
        table_spec(STYLE_COEFFICIENTS_TABLE, {**STYLE_COEFFICIENTS_SCHEMA, **REVISION_COLUMN}, _WITH_HISTORY,
                   **_RANKED,
                   description="arena.style_coefficients: the style-control coefficients (tokens, headers, "
                   "lists, bold) per category with 95% intervals, beside the same fit without the penalty "
                   "(coefficient_unpenalised) and the share of it the penalty keeps (share_kept)."),
        table_spec(UNRATED_MODELS_TABLE, {**UNRATED_MODELS_SCHEMA, **REVISION_COLUMN}, _EXPORTED, **_RANKED,
                   description="arena.unrated_models: per category, the models with battles but no rating "
                   "(only wins, only losses, not connected, under min_battles), their record and the reason."),
        table_spec(BOARD_STATUS_TABLE, {**BOARD_STATUS_SCHEMA, **REVISION_COLUMN}, _EXPORTED, **_RANKED,
                   description="arena.board_status: one row per category rule: board, no_board (and why) or "
                   "unavailable, with battles and rated / shown / provisional / unrated model counts."),
        table_spec(DUMP_LEADERBOARD_TABLE, {**LEADERBOARD_SCHEMA, **REVISION_COLUMN, "dump": pl.String()},
                   _EXPORTED, **_RANKED,
                   description="arena.dump_leaderboard: arena.leaderboard per loaded dump (column dump), same "
                   "methods and intervals, each dump's own votes (its conflicting copies of another dump's "
                   "votes, in arena.quarantine, included); arena.leaderboard is the board over every dump, "
                   "each vote once."),
        table_spec(MODEL_FIT_TABLE, {**MODEL_FIT_SCHEMA, **REVISION_COLUMN}, _EXPORTED, **_RANKED,
                   description="arena.model_fit: per board, held-out (5-fold by session) log-loss and Brier "
                   "score of Bradley-Terry against the models' calibrated win rates (logistic on the log-odds "
                   "difference, fitted on the training folds): the gain is what whom each model met adds, "
                   "with the calibration error."),
        table_spec(MODEL_FIT_CALIBRATION_TABLE, {**MODEL_FIT_CALIBRATION_SCHEMA, **REVISION_COLUMN}, _EXPORTED,
                   **_RANKED,
                   description="arena.model_fit_calibration: per board, predictor (bt, win_rate) and decile of "
                   "the held-out predictions, the predicted and observed probability that the favourite wins."),
]


@dg.multi_asset(
    # outputs the version store keeps (a specs-only multi-asset's outputs carry no value), in spec order
    outs={spec.key.path[-1]: dg.AssetOut.from_spec(spec, is_required=False, io_manager_key=VERSION_STORE)
          for spec in _RANKING_SPECS},
    ins={"battles": stored_input(TABLE_KEYS[BATTLES_TABLE]), "battle_categories": stored_input(BATTLE_CATEGORIES),
         # only rule and raw: each dump's board counts its copies of votes another dump holds with other content
         "quarantine": stored_input(TABLE_KEYS[QUARANTINE_TABLE], "rule, raw")},
    internal_asset_deps={
        spec.key.path[-1]: {TABLE_KEYS[BATTLES_TABLE], BATTLE_CATEGORIES,
                            *([TABLE_KEYS[QUARANTINE_TABLE]] if spec.key.path[-1] == DUMP_LEADERBOARD_TABLE else [])}
        for spec in _RANKING_SPECS},
    can_subset=True,
)
def rankings(context: dg.AssetExecutionContext, config: RankingRunConfig, model_catalog: ModelCatalog,
             battles: pl.DataFrame, battle_categories: pl.DataFrame, quarantine: pl.DataFrame):
    """Fit Bradley-Terry (exact MLE), style-controlled BT and Rank Centrality for every category.

    The seven tables come from one fit: a publication takes them all from the same run, so select
    them together (the rerank_job does) to re-rank with other settings. arena.unrated_models and
    arena.board_status say what the boards leave out and why; arena.dump_leaderboard holds each
    loaded dump's own boards (arena.leaderboard is the board over every dump).

    With ARENA_ALIGN_TO_PUBLISHED_BOARD (off by default) each board of arena.leaderboard is moved onto
    the scale of ARENA_PUBLISHED_BOARD's board of the same category and method, and the shifts are
    recorded in the settings (``alignment``) that reach arena.publications; arena.dump_leaderboard
    stays on the reference scale.

    arena.model_fit and arena.model_fit_calibration (core/ranking/model_fit.py) say how well each
    Bradley-Terry board predicts held-out votes (on the reference scale: the fit's models and votes);
    they are built with the seven, from the same settings.
    """
    selected = {key.path[-1] for key in context.selected_asset_keys}
    # the leaderboards rank canonical names (core/dataset/models.py); raw names stay in arena.battles
    canonical = {"model_a": pl.col("model_a_canonical"), "model_b": pl.col("model_b_canonical")}
    battles = battles.with_columns(**canonical)
    ranking_config = config.ranking_config()
    output = compute_rankings(battles, battle_categories, ranking_config)
    board, alignment = _aligned(context, output.leaderboard, model_catalog, ranking_config.anchor_rating)
    frames = {  # the store adds dump_revision
        LEADERBOARD_TABLE: board,
        PAIRWISE_TABLE: output.pairwise,
        PAIRWISE_SIGNIFICANCE_TABLE: output.pairwise_significance,
        STYLE_COEFFICIENTS_TABLE: output.style_coefficients,
        UNRATED_MODELS_TABLE: output.unrated_models,
        BOARD_STATUS_TABLE: output.board_status,
    }
    dump_seconds: dict[str, float] = {}
    if DUMP_LEADERBOARD_TABLE in selected:
        boards, dump_seconds = per_dump_leaderboards(battles, battle_categories, ranking_config, output.leaderboard,
                                                     conflicting_copies(quarantine).with_columns(**canonical))
        frames[DUMP_LEADERBOARD_TABLE] = boards
    fit_seconds = None
    if selected & {MODEL_FIT_TABLE, MODEL_FIT_CALIBRATION_TABLE}:
        fit = compute_model_fit(battles, battle_categories, output.leaderboard, ranking_config)
        frames[MODEL_FIT_TABLE] = fit.summary
        frames[MODEL_FIT_CALIBRATION_TABLE] = fit.calibration
        fit_seconds = round(fit.metadata["seconds"], 3)
    frames = {name: frame for name, frame in frames.items() if name in selected}
    settings = {"ranking": dataclasses.asdict(ranking_config),
                **({"alignment": alignment} if alignment is not None else {})}
    meta = output.metadata
    context.log.info(f"rankings: {output.leaderboard.height} leaderboard rows")
    for name, frame in frames.items():
        extra = {}
        if name == LEADERBOARD_TABLE:
            # the UI previews: top 10 per category (bt) and the overall ratings chart
            previews = board_previews(PublicationView.from_output(dataclasses.replace(output, leaderboard=board)))
            extra = {**{k: dg.MetadataValue.md(v) for k, v in previews.items()},
                "excluded_models": dg.MetadataValue.json(meta.get("excluded_models", {})),
                "no_board": dg.MetadataValue.json({r["category"]: r["reason"] for r in
                                                   output.board_status.filter(pl.col("status") != "board").iter_rows(named=True)}),
                "kendall_tau_spectral_vs_bt": dg.MetadataValue.json(meta.get("kendall_tau", {})),
                "seconds": dg.MetadataValue.json({k: round(v, 3) for k, v in meta.get("timings_s", {}).items()}),
                "bt_style_votes_without_style_counts": dg.MetadataValue.json(meta.get("style_left_out", {})),
                **({"alignment": dg.MetadataValue.json(alignment)} if alignment is not None else {}),
            }
        if name == DUMP_LEADERBOARD_TABLE:
            extra = {"seconds_per_dump": dg.MetadataValue.json({k: round(v, 3) for k, v in dump_seconds.items()})}
        if name == MODEL_FIT_TABLE:
            extra = {"seconds": fit_seconds, "log_loss_bt_vs_win_rate": dg.MetadataValue.json(
                {r["category"]: [r["log_loss"], r["log_loss_baseline"]] for r in frame.iter_rows(named=True)})}
        yield dg.Output(Versioned(frame, settings), output_name=name, metadata=extra)

