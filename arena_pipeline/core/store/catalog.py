"""What each stored table is (published, exported, heavy, ...) and the lineage the gate checks, as plain data.

A table says what it is once, on its asset (a :class:`TableSpec` in the asset's metadata,
``assets/metadata.py``); the Dagster layer derives a :class:`TableCatalog` from the asset graph
(``assets/catalog.py``) and hands it to the gate, the snapshot and the export. Nothing here imports
Dagster, and no list of table names is written anywhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TableSpec:
    """What one table of the warehouse is.

    published: the gate shows it as a view ``arena.<table>`` (and refuses a run that would show it
        stale, beside a rebuilt input);
    exported: ``arena-pipeline export`` writes it;
    heavy: its rows never enter Python: an asset reads it only as a ``TableRef`` (inside DuckDB);
    file_view: the readers' snapshot shows its versions as views over Parquet files, written once per
        version (the vote tables), instead of copying them into every snapshot;
    checked: its blocking expectation suite must have passed on the very version published;
    history: earlier publications stay queryable through ``arena.<table>_history`` (exported with it).
    """

    published: bool = True
    exported: bool = False
    heavy: bool = False
    file_view: bool = False
    checked: bool = False
    history: bool = False


@dataclass(frozen=True)
class TableCatalog:
    """Every table the run versions, with what is derived from the asset graph.

    ``specs`` is in the graph's order (upstream first); ``derived_from`` maps a published table to the
    published tables it is computed from, directly or through others; ``built_together`` holds the
    published tables of one step (a multi-asset) that a publication takes from one run. ``extra``
    are tables the pipeline writes besides the assets' (the gate's own, the records), by name.
    """

    specs: Mapping[str, TableSpec]
    derived_from: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    built_together: tuple[tuple[str, ...], ...] = ()
    extra: Mapping[str, TableSpec] = field(default_factory=dict)

    def _where(self, flag: str) -> tuple[str, ...]:
        return tuple(name for name, spec in self.specs.items() if getattr(spec, flag))

    @property
    def published(self) -> tuple[str, ...]:
        """The tables the gate publishes from the assets' versions."""
        return self._where("published")

    @property
    def heavy(self) -> frozenset[str]:
        return frozenset(self._where("heavy"))

    @property
    def file_tables(self) -> frozenset[str]:
        """Published tables the readers' snapshot shows as views over Parquet files."""
        return frozenset(name for name, spec in self.specs.items() if spec.file_view and spec.published)

    @property
    def checked(self) -> tuple[str, ...]:
        return self._where("checked")

    @property
    def history(self) -> tuple[str, ...]:
        return self._where("history")

    @property
    def exported(self) -> tuple[str, ...]:
        """What ``arena-pipeline export`` writes, in order: the assets' tables (each followed by its
        history view), then the other tables marked exported."""
        names: list[str] = []
        for name, spec in self.specs.items():
            if spec.exported:
                names += [name, f"{name}_history"] if spec.history else [name]
        return (*names, *(name for name, spec in self.extra.items() if spec.exported))
