"""arena.publication_changes: the boards this run would publish against the live publication's, before the gate."""

import dagster as dg

from arena_pipeline.assets.ingest import TABLE_KEYS
from arena_pipeline.assets.metadata import table_metadata
from arena_pipeline.assets.rankings import BATTLE_CATEGORIES, RANKING_KEYS
from arena_pipeline.assets.version_store import VERSION_STORE, TableRef, Versioned, stored_input
from arena_pipeline.constants import (
    BATTLES_TABLE,
    LEADERBOARD_TABLE,
    PUBLICATION_CHANGES_TABLE,
    SCHEMA,
)
from arena_pipeline.core.changes.changes import changes_against_live, summary
from arena_pipeline.core.store.catalog import TableSpec
from arena_pipeline.core.store.records import live_publication
from arena_pipeline.resources import Warehouse

PUBLICATION_CHANGES = dg.AssetKey([SCHEMA, PUBLICATION_CHANGES_TABLE])


@dg.asset(
    key=PUBLICATION_CHANGES,
    group_name="publish",
    kinds={"polars", "duckdb"},
    io_manager_key=VERSION_STORE,
    metadata=table_metadata(TableSpec(exported=True)),
    ins={"leaderboard": stored_input(RANKING_KEYS[LEADERBOARD_TABLE]),
         "battles": stored_input(TABLE_KEYS[BATTLES_TABLE]),
         "battle_categories": stored_input(BATTLE_CATEGORIES)},
)
def publication_changes(context: dg.AssetExecutionContext, warehouse: Warehouse, leaderboard: TableRef,
                        battles: TableRef, battle_categories: TableRef) -> Versioned:
    """arena.publication_changes: the leaderboard this run would publish against the live publication's,
    one row per category, method and model on either board (new, gone, rating and rank moves with an
    interval; ``core/changes/changes.py``; no rows before the first publication).

    Computed before the gate, from the versions the publication would show (this run's, else the live
    ones of the same dump) and the live publication; its settings name that publication and those
    versions. The gate publishes it like any table, and recomputes it in its own transaction when they
    no longer hold (another run published in between, or the run did not rebuild this table):
    publication rule 18.
    """
    # the versions read, by the table of each input (the asset's ins)
    refs = {"leaderboard": leaderboard, "battles": battles, "battle_categories": battle_categories}
    chosen = {context.assets_def.keys_by_input_name[name].path[-1]: ref.version for name, ref in refs.items()}
    with warehouse.connection() as con:
        live = live_publication(con, SCHEMA)
        frame, settings = changes_against_live(con, live, chosen)
    since = settings["since_publication"]
    context.add_output_metadata({"since_publication": since if since is not None else "none (first publication)",
                                 "data_relation": settings["data_relation"] or "", **summary(frame)})
    return Versioned(frame, settings)
