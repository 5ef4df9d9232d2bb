"""Validation before publication: this run's leaderboard against benchmark scores (ARENA_BENCHMARKS)."""

import dagster as dg
import polars as pl

from arena_pipeline.assets.builds import table_sha256
from arena_pipeline.assets.metadata import table_metadata
from arena_pipeline.assets.rankings import RANKING_KEYS
from arena_pipeline.assets.version_store import VERSION_STORE, Versioned, stored_input
from arena_pipeline.constants import (
    BENCHMARK_AGREEMENT_TABLE,
    BENCHMARK_SCORES_TABLE,
    LEADERBOARD_TABLE,
    SCHEMA,
)
from arena_pipeline.core.ingest.hub import HubError
from arena_pipeline.core.labels import PRIMARY_METHOD
from arena_pipeline.core.store.catalog import TableSpec
from arena_pipeline.core.validation.benchmarks import (
    BENCHMARK_AGREEMENT_SCHEMA,
    BENCHMARK_SCORES_SCHEMA,
    BenchmarkFormatError,
    benchmark_agreement,
    match_scores,
    source_record,
)
from arena_pipeline.presentation.markdown import frame_markdown
from arena_pipeline.resources import DumpSource, ModelCatalog

BENCHMARK_SCORES = dg.AssetKey([SCHEMA, BENCHMARK_SCORES_TABLE])
BENCHMARK_AGREEMENT = dg.AssetKey([SCHEMA, BENCHMARK_AGREEMENT_TABLE])
BENCHMARKS_CHECK = "benchmark_file_valid"
_SPECS = [
    dg.AssetSpec(
        BENCHMARK_SCORES, group_name="validation", kinds={"polars", "duckdb"},
        metadata=table_metadata(TableSpec(exported=True)),
        description="The benchmark scores read from ARENA_BENCHMARKS, each row matched to a model of this "
        "run's leaderboard or not, with the reason and the source file and line; a version of the "
        "publication like every table (empty when no benchmark file is configured or it is unusable: "
        "then benchmark_file_valid fails and the settings say why).",
    ),
    dg.AssetSpec(
        BENCHMARK_AGREEMENT, group_name="validation", kinds={"polars", "duckdb"},
        metadata=table_metadata(TableSpec(exported=True)),
        description="Per (category, method, benchmark): matched models, Spearman and Kendall with seeded "
        "bootstrap intervals over models (none under 5 models, with the reason) and the models whose "
        "two ranks differ most, for this run's leaderboard (empty like benchmark_scores).",
    ),
]


@dg.multi_asset(
    name="benchmark_comparison",
    # outputs the version store keeps, in spec order (the store's last-output line follows the last)
    outs={spec.key.path[-1]: dg.AssetOut.from_spec(spec, is_required=False, io_manager_key=VERSION_STORE)
          for spec in _SPECS},
    ins={"leaderboard": stored_input(RANKING_KEYS[LEADERBOARD_TABLE])},
    check_specs=[dg.AssetCheckSpec(
        BENCHMARKS_CHECK, asset=BENCHMARK_SCORES,
        description="The benchmark scores (ARENA_BENCHMARKS) are readable; a malformed file fails this check "
        "with its file and line, not the run, and its publication shows no comparison. Not executed when "
        "no benchmark file is configured.")],
    can_subset=True,  # the check may be left out; the gate refuses one table without the other
)
def benchmark_comparison(context: dg.AssetExecutionContext, model_catalog: ModelCatalog, dump_source: DumpSource,
                         leaderboard: pl.DataFrame):
    """arena.benchmark_scores and arena.benchmark_agreement: the leaderboard this run publishes against
    automated benchmark scores (ARENA_BENCHMARKS: a long or wide CSV/parquet, the Open LLM Leaderboard's
    layout, or its Hub id), matched through the model-name normalization and aliases.

    Runs before the gate, on the leaderboard the run would publish (its own, or the live one of the same
    dump), and writes versions the gate publishes with it: a publication never shows another board's
    comparison. It never blocks the publication: with no benchmark file configured, or one that cannot
    be read, both versions are empty and their settings say why (``benchmarks.status`` /
    ``benchmarks.problem``); an unreadable file also fails the check ``benchmark_file_valid`` (file and
    line in its description) while the run and its publication stand. The report, rendered by the gate
    step, shows the panel, or says that the file failed its check.
    """
    aliases = model_catalog.aliases()
    location = model_catalog.benchmarks_location()
    problem = read = None
    try:
        read = model_catalog.read_benchmarks(aliases, dump_source.hub_access())
    except (BenchmarkFormatError, FileNotFoundError, HubError, ValueError) as exc:
        problem = exc
        context.log.warning(f"benchmark scores unusable, the publication shows no comparison: {exc}")
    if read is None and problem is None:
        context.log.info("no benchmark scores configured (set ARENA_BENCHMARKS): empty comparison tables")
    if read is None:
        recorded = ({"status": "not configured"} if problem is None
                    else {"location": location, "problem": str(problem)})
        scores, agreement = pl.DataFrame(schema=BENCHMARK_SCORES_SCHEMA), pl.DataFrame(schema=BENCHMARK_AGREEMENT_SCHEMA)
    else:
        scores = match_scores(read, leaderboard.get_column("model").unique())
        agreement = benchmark_agreement(leaderboard, scores)
        recorded = source_record(location, read)
    # the alias table inside the record: a comparison never blocks the publication over it (the
    # gate refuses tables made with different top-level settings)
    recorded["aliases_sha256"] = table_sha256(aliases)
    settings = {"benchmarks": recorded}
    if context.selected_asset_check_keys and (read is not None or problem is not None):
        yield (dg.AssetCheckResult(check_name=BENCHMARKS_CHECK, passed=True,
                                   metadata={"benchmarks": location, "rows": read.height})
               if problem is None else
               dg.AssetCheckResult(check_name=BENCHMARKS_CHECK, passed=False, severity=dg.AssetCheckSeverity.ERROR,
                                   description=f"benchmark scores unusable: {problem}",
                                   metadata={"benchmarks": str(location), "problem": str(problem),
                                             "line": getattr(problem, "line", None)}))
    common = {"benchmarks": dg.MetadataValue.json(recorded)}
    selected = context.selected_asset_keys
    if BENCHMARK_SCORES in selected:
        matched = scores.filter(pl.col("matched"))
        yield dg.Output(Versioned(scores, settings), output_name=BENCHMARK_SCORES_TABLE, metadata={
            **common, "matched_models": matched.get_column("canonical").n_unique(),
            "reasons": dg.MetadataValue.json({r: n for r, n in scores.group_by("reason").len().sort("reason").iter_rows()})})
    if BENCHMARK_AGREEMENT in selected:
        headline = agreement.filter(pl.col("method") == PRIMARY_METHOD).select(
            "category", "benchmark", "n_matched", "spearman", "kendall", "note")
        yield dg.Output(Versioned(agreement, settings), output_name=BENCHMARK_AGREEMENT_TABLE,
                        metadata={**common, "bt_vs_benchmarks": dg.MetadataValue.md(frame_markdown(headline))})
