"""Ranking assets: category tags and the per-category leaderboards, pairwise and style tables."""

import dataclasses
import datetime as dt
import functools
from collections.abc import Callable, Mapping, Sequence

import dagster as dg
import duckdb
import polars as pl

from arena_pipeline.assets.ingest import TABLE_KEYS
from arena_pipeline.assets.metadata import schema_metadata, table_spec
from arena_pipeline.assets.run_config import RankingRunConfig
from arena_pipeline.assets.version_store import VERSION_STORE, Later, TableRef, Versioned, stored_input
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
from arena_pipeline.core.dataset.categories import CATEGORY_RULES, tag_categories
from arena_pipeline.core.dataset.dumps import conflicting_copies
from arena_pipeline.core.dataset.models import CANONICAL_COLUMNS
from arena_pipeline.core.dataset.schema import BATTLES_SCHEMA
from arena_pipeline.core.ranking import (
    BOARD_STATUS_SCHEMA,
    LEADERBOARD_SCHEMA,
    PAIRWISE_SCHEMA,
    PAIRWISE_SIGNIFICANCE_SCHEMA,
    STYLE_COEFFICIENTS_SCHEMA,
    UNRATED_MODELS_SCHEMA,
    RankingConfig,
    RankingOutput,
    compute_rankings,
    per_dump_leaderboards,
)
from arena_pipeline.core.ranking.model_fit import (
    MODEL_FIT_CALIBRATION_SCHEMA,
    MODEL_FIT_SCHEMA,
    ModelFitOutput,
    compute_model_fit,
)
from arena_pipeline.core.ranking.rating_method import RATING_METHODS
from arena_pipeline.core.ranking.tags import BATCH_ROWS, tag_rows
from arena_pipeline.core.store.catalog import TableSpec
from arena_pipeline.core.store.warehouse import stream_frames
from arena_pipeline.core.validation.external import (
    BoardFormatError,
    alignment_record,
    alignment_shifts,
    apply_alignment,
    unaligned_record,
)
from arena_pipeline.presentation.markdown import board_previews
from arena_pipeline.presentation.read import PublicationView
from arena_pipeline.resources import DumpSource, HubAccess, ModelCatalog, Warehouse

BATTLE_CATEGORIES = dg.AssetKey([SCHEMA, BATTLE_CATEGORIES_TABLE])
REVISION_COLUMN = {"dump_revision": pl.String()}
#: what the tagging reads of the battles: the id, the dump and every rule's columns the table has (a rule
#: whose column it lacks stays unavailable, as on the whole table), not all of its columns
_TAGGED_COLUMNS = ", ".join(c for c in dict.fromkeys(["id", "dump", *(c for r in CATEGORY_RULES for c in r.source_columns)])
                            if c in BATTLES_SCHEMA)


@dg.asset(
    key=BATTLE_CATEGORIES,
    group_name="rankings",
    kinds={"polars", "duckdb"},
    metadata=schema_metadata({"battle_id": pl.String(), "category": pl.String()},
                             f"{SCHEMA}.{BATTLE_CATEGORIES_TABLE}", TableSpec(file_view=True)),
    ins={"battles": stored_input(TABLE_KEYS[BATTLES_TABLE], _TAGGED_COLUMNS)},
    io_manager_key=VERSION_STORE,
)
def battle_categories(battles: pl.DataFrame) -> Versioned:
    """arena.battle_categories: (battle_id, category) for overall and the 7 categories of the schema seed.

    Rules (core/dataset/categories.py): creative_writing, math, instruction_following flags; coding =
    is_code; hard_prompt = at least 6 of the 7 criteria; longer_query = sum_user_tokens > 500;
    multi_turn = turns > 1. A null flag counts as false and is counted in the metadata. The same
    battles and code tagged before: that version, as a view, and nothing is tagged (a ``Later``).
    """
    return Versioned(Later(functools.partial(_tagged, battles)), reuse=True)


def _tagged(battles: pl.DataFrame) -> tuple[pl.DataFrame, dict]:
    """The battles' category tags, and what the output's metadata says of them."""
    tags, meta = tag_categories(battles)
    counts = {name: m["battles"] for name, m in meta.items()}
    nulls = {name: m["null_as_false"] for name, m in meta.items()}
    return tags, {
        "battles_per_category": dg.MetadataValue.json(counts),
        "null_flags_counted_false": dg.MetadataValue.json(nulls),
        "unavailable": dg.MetadataValue.json([n for n, m in meta.items() if not m["available"]]),
        "unavailable_by_dump": dg.MetadataValue.json(
            {n: m["unavailable_in"] for n, m in meta.items() if m.get("unavailable_in")}),
    }


def _aligned(context: dg.AssetExecutionContext, leaderboard: pl.DataFrame, model_catalog: ModelCatalog,
             anchor_rating: float, hub_access: HubAccess, last_vote: dt.datetime | None) -> tuple[pl.DataFrame, dict | None]:
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
            theirs, read = model_catalog.read_board(aliases, hub_access, last_vote)
        except (BoardFormatError, FileNotFoundError) as exc:
            record = unaligned_record(path, f"the published board is unusable: {exc}", date)
        else:
            shifts = alignment_shifts(leaderboard, theirs, aliases)
            record = alignment_record(shifts, path, read["sha256"], read.get("board_date", date), anchor_rating)
            if "history" in read:  # which publication of the ratings history, and why
                record["history"] = read["history"]
            return apply_alignment(leaderboard, shifts), record
    context.log.warning(f"boards not aligned: {record['problem']}")
    return leaderboard, record


def fit_columns(con: duckdb.DuckDBPyConnection, battles: str, config: RankingConfig) -> str:
    """The SQL column list of the battles relation ``battles`` the fit reads, in the table's order: the id, the
    winner, the canonical model names (the boards rank them, :class:`Fit` puts them in ``model_a``/``model_b``:
    the raw names are not read), the time, the dumps, every registered method's columns, every category
    rule's (the per-dump boards tag the conflicting copies; the board status names a rule's missing column)
    and the cluster column. Not the other columns (raw names, message counts, source file and row, scores
    no rule reads)."""
    keep = {"id", "winner", "timestamp", "dump", "also_in_dumps", *CANONICAL_COLUMNS.values(),
            *(c for method in RATING_METHODS.values() for c in method.battle_columns()),
            *(c for rule in CATEGORY_RULES for c in rule.source_columns),
            *([config.cluster_column] if config.cluster_column else [])}
    present = con.execute(f"SELECT * FROM {battles} LIMIT 0").pl().columns
    return ", ".join(f'"{c}"' for c in present if c in keep)


def read_votes(con: duckdb.DuckDBPyConnection, battles: str, battle_categories: str,
               config: RankingConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The votes the fit reads: the columns of :func:`fit_columns` of the relation ``battles``, and the
    category tags of ``battle_categories`` as rows of those battles (``core.ranking.tags.tag_rows``: a
    categorical and a row number each, not two strings). Both are read ``tags.BATCH_ROWS`` rows at a
    time (``warehouse.stream_frames``), each batch of the battles a chunk of the frame."""
    frame = pl.concat(stream_frames(con, f"SELECT {fit_columns(con, battles, config)} FROM {battles}",
                                    batch_rows=BATCH_ROWS), rechunk=False)
    tags = stream_frames(con, f"SELECT battle_id, category FROM {battle_categories}", batch_rows=BATCH_ROWS)
    return frame, tag_rows(frame.get_column("id"), tags)


class Fit:
    """What one run of the rankings step computes, each part once and only when a selected table needs it:
    the boards (and their alignment), each dump's own boards, the held-out model fit."""

    def __init__(self, context: dg.AssetExecutionContext, config: RankingRunConfig, model_catalog: ModelCatalog,
                 dump_source: DumpSource, votes: Callable[[RankingConfig], tuple[pl.DataFrame, pl.DataFrame]],
                 quarantine: pl.DataFrame):
        # votes: (battles, battle_categories) read for the ranking settings, when a part is first computed
        # (an unchanged re-run whose fits are reused reads no vote)
        # the leaderboards rank canonical names (core/dataset/models.py); raw names stay in arena.battles
        self._canonical = {"model_a": pl.col("model_a_canonical"), "model_b": pl.col("model_b_canonical")}
        self.context, self.model_catalog, self.quarantine = context, model_catalog, quarantine
        self.dump_source, self._votes = dump_source, votes
        self.config = config.ranking_config()

    @functools.cached_property
    def _read(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        battles, battle_categories = self._votes(self.config)
        return battles.with_columns(**self._canonical), battle_categories

    @property
    def battles(self) -> pl.DataFrame:
        """The votes the boards fit (the columns of :func:`fit_columns`, canonical model names)."""
        return self._read[0]

    @property
    def battle_categories(self) -> pl.DataFrame:
        """Their category tags, as rows of :attr:`battles` (``core.ranking.tags.tag_rows``)."""
        return self._read[1]

    @functools.cached_property
    def output(self) -> RankingOutput:
        """Every board of every method (on the reference scale), with what the boards leave out."""
        output = compute_rankings(self.battles, self.battle_categories, self.config)
        self.context.log.info(f"rankings: {output.leaderboard.height} leaderboard rows")
        return output

    @functools.cached_property
    def aligned(self) -> tuple[pl.DataFrame, dict | None]:
        """arena.leaderboard as published (aligned when asked) and the alignment's record (None: not asked)."""
        last_vote = self.battles.get_column("timestamp").max() if "timestamp" in self.battles.columns else None
        return _aligned(self.context, self.output.leaderboard, self.model_catalog, self.config.anchor_rating,
                        self.dump_source.hub_access(), last_vote)

    @functools.cached_property
    def dump_boards(self) -> tuple[pl.DataFrame, dict[str, float]]:
        """Each loaded dump's own boards and the seconds each took."""
        copies = conflicting_copies(self.quarantine).with_columns(**self._canonical)
        return per_dump_leaderboards(self.battles, self.battle_categories, self.config, self.output.leaderboard,
                                     copies)

    @functools.cached_property
    def model_fit(self) -> ModelFitOutput:
        """How well each Bradley-Terry board predicts held-out votes."""
        return compute_model_fit(self.battles, self.battle_categories, self.output.leaderboard, self.config)

    def settings(self) -> dict:
        """The settings every table of the fit records (the ranking settings, and the alignment when asked:
        only then is the fit computed for them)."""
        if not self.model_catalog.align_to_board():
            return {"ranking": dataclasses.asdict(self.config)}
        alignment = self.aligned[1]
        return {"ranking": dataclasses.asdict(self.config), **({"alignment": alignment} if alignment is not None else {})}


def _made(table: "FitTable", fit: Fit) -> tuple[pl.DataFrame, dict]:
    """One table of the fit and its output metadata, computed (the store calls it when it reuses nothing)."""
    frame = table.frame(fit)
    return frame, table.metadata(fit, frame)


def _no_metadata(fit: Fit, frame: pl.DataFrame) -> dict:
    return {}


@dataclasses.dataclass(frozen=True)
class FitTable:
    """One table of the fit, declared once: the multi-asset's output, its key, its column schema, what the
    table is (its :class:`TableSpec`, read by the catalogue) and its description all come from here;
    ``frame`` takes its rows from the :class:`Fit` and ``metadata`` adds what the run shows about it."""

    name: str
    columns: Mapping[str, pl.DataType]  # the store adds dump_revision
    spec: TableSpec
    description: str
    frame: Callable[[Fit], pl.DataFrame]
    metadata: Callable[[Fit, pl.DataFrame], dict] = _no_metadata
    reads_quarantine: bool = False  # each dump's boards count its copies of votes another dump holds

    def asset_spec(self) -> dg.AssetSpec:
        # the inputs come in as the multi-asset's ins (below)
        return table_spec(self.name, {**self.columns, **REVISION_COLUMN}, self.spec, group="rankings",
                          kinds={"numpy", "duckdb"}, deps=[], description=self.description)


def _board_metadata(fit: Fit, frame: pl.DataFrame) -> dict:
    """The UI previews (top 10 per category (bt) and the overall ratings chart) and the fit's diagnostics."""
    output, (board, alignment) = fit.output, fit.aligned
    previews = board_previews(PublicationView.from_output(dataclasses.replace(output, leaderboard=board)))
    meta = output.metadata
    no_board = output.board_status.filter(pl.col("status") != "board")
    return {**{k: dg.MetadataValue.md(v) for k, v in previews.items()},
            "excluded_models": dg.MetadataValue.json(meta.get("excluded_models", {})),
            "no_board": dg.MetadataValue.json({r["category"]: r["reason"] for r in no_board.iter_rows(named=True)}),
            "kendall_tau_spectral_vs_bt": dg.MetadataValue.json(meta.get("kendall_tau", {})),
            "seconds": dg.MetadataValue.json({k: round(v, 3) for k, v in meta.get("timings_s", {}).items()}),
            "bt_style_votes_without_style_counts": dg.MetadataValue.json(meta.get("style_left_out", {})),
            **({"alignment": dg.MetadataValue.json(alignment)} if alignment is not None else {})}


def _dump_board_metadata(fit: Fit, frame: pl.DataFrame) -> dict:
    return {"seconds_per_dump": dg.MetadataValue.json({k: round(v, 3) for k, v in fit.dump_boards[1].items()})}


def _model_fit_metadata(fit: Fit, frame: pl.DataFrame) -> dict:
    return {"seconds": round(fit.model_fit.metadata["seconds"], 3), "log_loss_bt_vs_win_rate": dg.MetadataValue.json(
        {r["category"]: [r["log_loss"], r["log_loss_baseline"]] for r in frame.iter_rows(named=True)})}


#: every table of the fit is published and exported; the boards and the style coefficients keep their history
_EXPORTED, _WITH_HISTORY = TableSpec(exported=True), TableSpec(exported=True, history=True)

#: The fit's tables, in output order: a new table of the fit is one entry here (and its computation in core)
FIT_TABLES = (
    FitTable(LEADERBOARD_TABLE, LEADERBOARD_SCHEMA, _WITH_HISTORY,
             "arena.leaderboard: one row per (category, method, model) with rating, 95% CI, rank, the rank spread "
             "rank_ub-rank_lb (for this model: 95% for each model alone) and "
             "rank_ub_simultaneous-rank_lb_simultaneous (for every model at once: 95% for the whole board), and "
             "counts; methods bt, bt_style (style control) and spectral.",
             lambda fit: fit.aligned[0], _board_metadata),
    FitTable(PAIRWISE_TABLE, PAIRWISE_SCHEMA, _EXPORTED,
             "arena.pairwise: per category and model pair, battles, wins, ties, observed score rate and the "
             "Bradley-Terry expected score (win_rate_1, predicted_win_rate_1: a tie counts 1/2, so these are "
             "expected scores, not chances of an outright win; what a win-rate heatmap reads).",
             lambda fit: fit.output.pairwise),
    FitTable(PAIRWISE_SIGNIFICANCE_TABLE, PAIRWISE_SIGNIFICANCE_SCHEMA, _EXPORTED,
             "arena.pairwise_significance: per category, method and pair of shown models, the rating difference, "
             "its 95% interval from the full covariance of the primary method (clustered by session where "
             "sessions are known, bt_style included) and whether it excludes 0 (significant: 95% for this pair "
             "alone; rank_ub and rank_lb are read from it) and whether the claim holds for every pair of the "
             "board at once (significant_simultaneous: family-wise 95%, max-t with step-down; the simultaneous "
             "rank bounds are read from it). expected_score_1 is model_1's expected score (a tie counting 1/2), "
             "not its chance of an outright win.",
             lambda fit: fit.output.pairwise_significance),
    FitTable(STYLE_COEFFICIENTS_TABLE, STYLE_COEFFICIENTS_SCHEMA, _WITH_HISTORY,
             "arena.style_coefficients: the style-control coefficients (tokens, headers, lists, bold) per "
             "category with 95% intervals, beside the same fit without the penalty (coefficient_unpenalised) "
             "and the share of it the penalty keeps (share_kept).",
             lambda fit: fit.output.style_coefficients),
    FitTable(UNRATED_MODELS_TABLE, UNRATED_MODELS_SCHEMA, _EXPORTED,
             "arena.unrated_models: per category, the models with battles but no rating (only wins, only "
             "losses, not connected, under min_battles), their record and the reason.",
             lambda fit: fit.output.unrated_models),
    FitTable(BOARD_STATUS_TABLE, BOARD_STATUS_SCHEMA, _EXPORTED,
             "arena.board_status: one row per category rule: board, no_board (and why) or unavailable, with "
             "battles and rated / shown / provisional / unrated model counts.",
             lambda fit: fit.output.board_status),
    FitTable(DUMP_LEADERBOARD_TABLE, {**LEADERBOARD_SCHEMA, "dump": pl.String()}, _EXPORTED,
             "arena.dump_leaderboard: arena.leaderboard per loaded dump (column dump), same methods and "
             "intervals, each dump's own votes (its conflicting copies of another dump's votes, in "
             "arena.quarantine, included); arena.leaderboard is the board over every dump, each vote once.",
             lambda fit: fit.dump_boards[0], _dump_board_metadata, reads_quarantine=True),
    FitTable(MODEL_FIT_TABLE, MODEL_FIT_SCHEMA, _EXPORTED,
             "arena.model_fit: per board, held-out (5-fold by session) log-loss and Brier score of Bradley-Terry "
             "against the models' calibrated win rates (logistic on the log-odds difference, fitted on the "
             "training folds): the gain is what whom each model met adds, with the calibration error.",
             lambda fit: fit.model_fit.summary, _model_fit_metadata),
    FitTable(MODEL_FIT_CALIBRATION_TABLE, MODEL_FIT_CALIBRATION_SCHEMA, _EXPORTED,
             "arena.model_fit_calibration: per board, predictor (bt, win_rate) and decile of the held-out "
             "predictions, the favourite's predicted and observed expected score (a draw counting 1/2, not the "
             "chance of an outright win).",
             lambda fit: fit.model_fit.calibration),
)

RANKING_KEYS = {table.name: dg.AssetKey([SCHEMA, table.name]) for table in FIT_TABLES}


def fit_asset(tables: Sequence[FitTable] = FIT_TABLES) -> dg.AssetsDefinition:
    """The rankings step: one multi-asset whose outputs, keys, dependencies and catalogue entries are ``tables``."""
    specs = {table.name: table.asset_spec() for table in tables}
    quarantine = stored_input(TABLE_KEYS[QUARANTINE_TABLE], "rule, raw")  # only rule and raw

    @dg.multi_asset(
        name="rankings",
        # outputs the version store keeps (a specs-only multi-asset's outputs carry no value), in declaration order
        outs={name: dg.AssetOut.from_spec(spec, is_required=False, io_manager_key=VERSION_STORE)
              for name, spec in specs.items()},
        # the votes as references: read (only the columns the fit reads) when a table is fitted, not reused
        ins={"battles": stored_input(TABLE_KEYS[BATTLES_TABLE]), "battle_categories": stored_input(BATTLE_CATEGORIES),
             "quarantine": quarantine},
        internal_asset_deps={table.name: {TABLE_KEYS[BATTLES_TABLE], BATTLE_CATEGORIES,
                                          *([TABLE_KEYS[QUARANTINE_TABLE]] if table.reads_quarantine else [])}
                             for table in tables},
        can_subset=True,
    )
    def rankings(context: dg.AssetExecutionContext, config: RankingRunConfig, model_catalog: ModelCatalog,
                 dump_source: DumpSource, warehouse: Warehouse, battles: TableRef, battle_categories: TableRef,
                 quarantine: pl.DataFrame):
        """Fit Bradley-Terry (exact MLE), style-controlled BT and Rank Centrality for every category.

        The tables of the fit (``FIT_TABLES``) come from one fit: a publication takes them all from the
        same run, so select them together (the rerank_job does) to re-rank with other settings.
        arena.unrated_models and arena.board_status say what the boards leave out and why;
        arena.dump_leaderboard holds each loaded dump's own boards (arena.leaderboard is the board over
        every dump).

        With ARENA_ALIGN_TO_PUBLISHED_BOARD (off by default) each board of arena.leaderboard is moved onto
        the scale of ARENA_PUBLISHED_BOARD's board of the same category and method, and the shifts are
        recorded in the settings (``alignment``) that reach arena.publications; arena.dump_leaderboard
        stays on the reference scale.

        arena.model_fit and arena.model_fit_calibration (core/ranking/model_fit.py) say how well each
        Bradley-Terry board predicts held-out votes (on the reference scale: the fit's models and votes);
        they are built with the boards, from the same settings.
        """
        selected = {key.path[-1] for key in context.selected_asset_keys}
        def votes(ranking: RankingConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
            with warehouse.connection() as con:
                return read_votes(con, battles.name, battle_categories.name, ranking)

        fit = Fit(context, config, model_catalog, dump_source, votes, quarantine)
        settings = fit.settings()
        # the same votes, settings and code fitted before: those versions, and nothing is fitted; an aligned
        # board's settings hold the alignment, known only once fitted: fitted every time
        reuse = not model_catalog.align_to_board()
        for table in tables:
            if table.name in selected:  # the store adds dump_revision
                if reuse:
                    yield dg.Output(Versioned(Later(functools.partial(_made, table, fit)), settings, reuse=True),
                                    output_name=table.name)
                else:
                    frame = table.frame(fit)
                    yield dg.Output(Versioned(frame, settings), output_name=table.name,
                                    metadata=table.metadata(fit, frame))

    return rankings


rankings = fit_asset()
