"""The load's tables, declared once: names, columns, what each table is, descriptions and how its rows are made."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import polars as pl

from arena_pipeline.constants import (
    BATTLES_TABLE,
    CONTEXT_MESSAGES_TABLE,
    MESSAGES_TABLE,
    PREFERENCE_PAIRS_TABLE,
    QUARANTINE_TABLE,
)
from arena_pipeline.core.dataset.schema import (
    BATTLES_SCHEMA,
    CONTEXT_MESSAGES_SCHEMA,
    MESSAGES_SCHEMA,
    QUARANTINE_SCHEMA,
)
from arena_pipeline.core.ingest.flatten import flatten_context_messages, flatten_messages
from arena_pipeline.core.ingest.pairs import PAIR_ROWS_SCHEMA, pair_rows
from arena_pipeline.core.store.catalog import TableSpec


@dataclass(frozen=True)
class Batch:
    """One batch of kept votes as the load holds it: the nested rows and their flat battles (row-aligned),
    the dump they come from and the revision loaded."""

    frame: pl.DataFrame
    battles: pl.DataFrame
    dump: str
    revision: str


@dataclass(frozen=True)
class Screened:
    """Every vote of a load once screened: the kept battles and the quarantine rows."""

    battles: pl.DataFrame
    quarantine: pl.DataFrame


@dataclass(frozen=True)
class LoadTable:
    """One table of the load, declared once: the multi-asset's output, its key, its columns, what it is (its
    :class:`TableSpec`, read by the catalogue and the asset checks), its asset group and description, and
    the loader's target (a part folder in these columns) all come from here.

    A table made batch by batch (``batch``) is keyed by ``battle_id``: its part files are written as the
    batches are flattened, and rows of a vote another dump holds by content are deleted from them by
    battle id. A table made once every vote is screened (``screened``: battles, quarantine) is written
    last. Both are module-level functions: the load's worker processes get them by name (a pickle).
    ``LoadReport.rows`` counts each table's rows by its name."""

    name: str
    columns: Mapping[str, pl.DataType]
    spec: TableSpec
    group: str
    description: str
    batch: Callable[[Batch], pl.DataFrame] | None = None
    screened: Callable[[Screened], pl.DataFrame] | None = None

    def __post_init__(self) -> None:
        if (self.batch is None) == (self.screened is None):
            raise ValueError(f"{self.name}: a load table is made either batch by batch or once screened")

    @property
    def keyed_by_battle(self) -> bool:
        """Whether its rows are written per batch and deleted by ``battle_id`` (see the class)."""
        return self.batch is not None


def kept_battles(done: Screened) -> pl.DataFrame:
    """arena.battles: the votes kept."""
    return done.battles


def quarantined(done: Screened) -> pl.DataFrame:
    """arena.quarantine: the input rows kept out."""
    return done.quarantine


def messages(batch: Batch) -> pl.DataFrame:
    """arena.messages of a batch."""
    return flatten_messages(batch.frame, batch.dump)


def context_messages(batch: Batch) -> pl.DataFrame:
    """arena.context_messages of a batch."""
    return flatten_context_messages(batch.frame, batch.dump)


def preference_pairs(batch: Batch) -> pl.DataFrame:
    """arena.preference_pairs of a batch."""
    return pair_rows(batch.frame, batch.battles, batch.revision)


#: The load's tables, in output order (battles first: the store's last-output line follows the last). A new
#: table of the load is one entry here (and its computation); the message tables never load into Python;
#: battles and messages publish only after their blocking expectation suites passed (checks.py)
LOAD_TABLES = (
    LoadTable(BATTLES_TABLE, BATTLES_SCHEMA, TableSpec(file_view=True, checked=True), "ingest",
              "arena.battles: one row per vote with every scalar, conv_metadata and category_tag field as a column.",
              screened=kept_battles),
    LoadTable(MESSAGES_TABLE, MESSAGES_SCHEMA, TableSpec(heavy=True, file_view=True, checked=True), "ingest",
              "arena.messages: one row per message of conversation_a and conversation_b.",
              batch=messages),
    LoadTable(CONTEXT_MESSAGES_TABLE, CONTEXT_MESSAGES_SCHEMA, TableSpec(heavy=True, file_view=True), "ingest",
              "arena.context_messages: the full_conversation turns of earlier evaluation orders that precede "
              "each vote (not repeated in arena.messages).",
              batch=context_messages),
    LoadTable(QUARANTINE_TABLE, QUARANTINE_SCHEMA, TableSpec(file_view=True), "quality",
              "arena.quarantine: input rows kept out of arena.battles, with the rule broken.",
              screened=quarantined),
    # the message lists of PREFERENCE_PAIRS_SCHEMA are not stored (they would store every text twice)
    LoadTable(PREFERENCE_PAIRS_TABLE, PAIR_ROWS_SCHEMA, TableSpec(heavy=True, file_view=True), "reports",
              "arena.preference_pairs: prompt, chosen and rejected responses of every decisive vote (ties and "
              "both_bad excluded), for reward-model training. The prompt is the first user message; the rest of "
              "each side's conversation is its response (multi-turn sides differ after the first turn); "
              "categories as in arena.battle_categories. Made by the load from each batch's conversations "
              "(core/ingest/pairs.py).",
              batch=preference_pairs),
)
