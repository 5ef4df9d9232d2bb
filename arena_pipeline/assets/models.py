"""Model identity assets: the models table, and the comparison with a published leaderboard."""

import dagster as dg
import polars as pl

from arena_pipeline.assets.builds import table_sha256
from arena_pipeline.assets.ingest import TABLE_KEYS
from arena_pipeline.assets.metadata import schema_metadata
from arena_pipeline.assets.rankings import BATTLE_CATEGORIES, RANKING_KEYS
from arena_pipeline.assets.version_store import VERSION_STORE, Later, TableRef, Versioned, stored_input
from arena_pipeline.constants import (
    BATTLES_TABLE,
    EXTERNAL_COMPARISON_MODELS_TABLE,
    EXTERNAL_COMPARISON_TABLE,
    LEADERBOARD_TABLE,
    MODELS_TABLE,
    SCHEMA,
)
from arena_pipeline.core.dataset.models import MODELS_SCHEMA, merged_names, model_facts_in_duckdb, models_table
from arena_pipeline.core.labels import PRIMARY_METHOD
from arena_pipeline.core.store.catalog import TableSpec
from arena_pipeline.core.validation.external import (
    EXTERNAL_COMPARISON_MODELS_SCHEMA,
    EXTERNAL_COMPARISON_SCHEMA,
    BoardFormatError,
    compare_leaderboard,
)
from arena_pipeline.presentation.markdown import frame_markdown
from arena_pipeline.resources import DumpSource, ModelCatalog, Warehouse

MODELS = dg.AssetKey([SCHEMA, MODELS_TABLE])
EXTERNAL_COMPARISON = dg.AssetKey([SCHEMA, EXTERNAL_COMPARISON_TABLE])
EXTERNAL_COMPARISON_MODELS = dg.AssetKey([SCHEMA, EXTERNAL_COMPARISON_MODELS_TABLE])


@dg.asset(
    key=MODELS,
    group_name="rankings",
    kinds={"polars", "duckdb"},
    metadata=schema_metadata(MODELS_SCHEMA, f"{SCHEMA}.{MODELS_TABLE}", TableSpec(exported=True)),
    # references: aggregated inside DuckDB over the stored files, a few rows per model reach Python
    ins={"battles": stored_input(TABLE_KEYS[BATTLES_TABLE]), "battle_categories": stored_input(BATTLE_CATEGORIES)},
    io_manager_key=VERSION_STORE,
)
def models(model_catalog: ModelCatalog, warehouse: Warehouse, battles: TableRef,
           battle_categories: TableRef) -> dg.Output[Versioned]:
    """arena.models: one row per canonical model name with its provider, the raw names seen, first and
    last battle, and battles per category. Raw names that normalize to one model are listed in the metadata."""
    aliases = model_catalog.aliases()

    # counted only when the store finds no version of the same votes, tags, aliases and code (an unchanged
    # re-run reuses it, without that metadata)
    def make() -> tuple[pl.DataFrame, dict]:
        # counted inside DuckDB over the stored files: the step's memory does not grow with the votes
        with warehouse.connection() as con:
            facts = model_facts_in_duckdb(con, battles.name, battle_categories.name)
        table = models_table(facts, aliases=aliases)
        merged = merged_names(facts, aliases)
        return table, {
            "merged_names": dg.MetadataValue.json(
                [{"canonical": r["canonical"], "raw_names": r["raw_names"], "battles": r["n_battles"]}
                 for r in merged.iter_rows(named=True)]
            ),
            "models_without_provider": dg.MetadataValue.json(
                table.filter(pl.col("provider").is_null()).get_column("model").to_list()
            ),
        }

    return dg.Output(Versioned(Later(make), {"aliases_sha256": table_sha256(aliases)}, reuse=True))


BOARD_CHECK = "published_board_valid"


def _last_vote(frame: pl.DataFrame):
    """The one value of a ``last_vote`` input (None: no vote has a time, or an empty frame)."""
    return frame.item(0, 0) if frame.height and frame.width else None


_COMPARISON_SPECS = [
    dg.AssetSpec(
        EXTERNAL_COMPARISON, group_name="validation", kinds={"polars", "duckdb"},
        metadata=schema_metadata(EXTERNAL_COMPARISON_SCHEMA, f"{SCHEMA}.{EXTERNAL_COMPARISON_TABLE}",
                                 TableSpec(exported=True)),
        description="This run's leaderboard against ARENA_PUBLISHED_BOARD, per category and method (rank "
        "correlations, rating differences, slope and residual RMS of published ~ a + b * ours); a version "
        "of the publication like every table (empty when no board is configured or the board is "
        "unusable: then the published_board_valid check fails and the settings say why).",
    ),
    dg.AssetSpec(
        EXTERNAL_COMPARISON_MODELS, group_name="validation", kinds={"polars", "duckdb"},
        metadata=schema_metadata(EXTERNAL_COMPARISON_MODELS_SCHEMA,
                                 f"{SCHEMA}.{EXTERNAL_COMPARISON_MODELS_TABLE}", TableSpec(exported=True)),
        description="Per model of arena.external_comparison: our and their rating and rank, the centred "
        "difference, or why the model is on one side only (empty like arena.external_comparison).",
    ),
]


@dg.multi_asset(
    name="external_comparison",
    # outputs the version store keeps, in spec order (the store's last-output line follows the last)
    outs={spec.key.path[-1]: dg.AssetOut.from_spec(spec, is_required=False, io_manager_key=VERSION_STORE)
          for spec in _COMPARISON_SPECS},
    # the dump's last vote chooses the publication of LMArena's ratings history (one row, not the votes)
    ins={"leaderboard": stored_input(RANKING_KEYS[LEADERBOARD_TABLE]),
         "last_vote": stored_input(TABLE_KEYS[BATTLES_TABLE], "max(timestamp) AS last_vote")},
    check_specs=[dg.AssetCheckSpec(
        BOARD_CHECK, asset=EXTERNAL_COMPARISON,
        description="The published leaderboard file (ARENA_PUBLISHED_BOARD) is readable; a malformed "
        "board fails this check, not the run, and its publication shows no comparison. Not executed "
        "when no board is configured.")],
    can_subset=True,  # the check may be left out; the gate refuses one table without the other
)
def external_comparison(context: dg.AssetExecutionContext, model_catalog: ModelCatalog, dump_source: DumpSource,
                        leaderboard: pl.DataFrame, last_vote: pl.DataFrame):
    """arena.external_comparison (per category and method) and arena.external_comparison_models (per
    model): the leaderboard this run publishes against a published leaderboard file
    (ARENA_PUBLISHED_BOARD: LMArena's JSON, a CSV, or LMArena's ratings history, lmarena-ai/leaderboard-dataset,
    whose publication nearest the dump's last vote is read unless ARENA_PUBLISHED_BOARD_DATE names one), matched through the model-name normalization and aliases; rank correlations
    and rating differences after centring, and how far the scales agree (slope, intercept and residual
    RMS of published ~ intercept + slope * ours, the median shift, the RMS after the best shift).

    Runs before the gate, on the leaderboard the run would publish (its own, or the live one of the same
    dump), and writes versions the gate publishes with it: a publication never shows another board's
    comparison. It never blocks the publication: with no board configured, or one that cannot be read,
    both versions are empty and their settings say why (``published_board.status`` /
    ``published_board.problem``); an unreadable board also fails the check ``published_board_valid``
    while the run and its publication stand.
    """
    aliases = model_catalog.aliases()
    path = model_catalog.board_path()
    problem = theirs = None
    read: dict = {}
    try:
        found = model_catalog.read_board(aliases, dump_source.hub_access(), _last_vote(last_vote))
        if found is not None:
            theirs, read = found
    except (BoardFormatError, FileNotFoundError) as exc:
        problem = exc
        context.log.warning(f"published board unusable, the publication shows no comparison: {exc}")
    if path is None:
        context.log.info("no published board configured (set ARENA_PUBLISHED_BOARD): empty comparison tables")
    results = {}
    if theirs is None:
        recorded = {"status": "not configured"} if path is None else {"path": path, "problem": str(problem)}
        summary = pl.DataFrame(schema=EXTERNAL_COMPARISON_SCHEMA)
        per_model = pl.DataFrame(schema=EXTERNAL_COMPARISON_MODELS_SCHEMA)
    else:
        summary, per_model, results = compare_leaderboard(leaderboard, theirs, aliases, path)
        recorded = {"path": path, **read}
        if leaderboard.is_empty():
            recorded["status"] = "the leaderboard is empty: nothing to compare"
    # the alias table inside the record: a comparison never blocks the publication over it (the
    # gate refuses tables made with different top-level settings)
    recorded["aliases_sha256"] = table_sha256(aliases)
    settings = {"published_board": recorded}
    if context.selected_asset_check_keys and path is not None:
        yield (dg.AssetCheckResult(check_name=BOARD_CHECK, passed=True, metadata={"board": path, "rows": theirs.height})
               if problem is None else
               dg.AssetCheckResult(check_name=BOARD_CHECK, passed=False, severity=dg.AssetCheckSeverity.ERROR,
                                   description=f"published board unusable: {problem}",
                                   metadata={"board": path, "problem": str(problem)}))
    common = {"published_board": dg.MetadataValue.json(recorded)}
    selected = context.selected_asset_keys
    if EXTERNAL_COMPARISON in selected:
        headline = summary.filter(pl.col("method") == PRIMARY_METHOD).select(
            "category", "n_matched", "spearman", "kendall", "mean_abs_diff", "max_abs_diff", "slope",
            "rms_residual", "median_shift")
        yield dg.Output(Versioned(summary, settings), output_name=EXTERNAL_COMPARISON_TABLE,
                        metadata={**common, "bt_vs_published": dg.MetadataValue.md(frame_markdown(headline)),
                                  "comparison": dg.MetadataValue.json({m: r.to_metadata() for m, r in results.items()})})
    if EXTERNAL_COMPARISON_MODELS in selected:
        yield dg.Output(Versioned(per_model, settings), output_name=EXTERNAL_COMPARISON_MODELS_TABLE, metadata=common)
