"""The ranking settings a publication records, and two writers, one outcome: a run that ranked with one
publication's settings is refused at the gate when another publication with other ranking settings went live
meanwhile (publishing would silently undo them)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

import duckdb

from arena_pipeline.constants import LEADERBOARD_TABLE
from arena_pipeline.core.ranking import RankingConfig
from arena_pipeline.core.store.records import live_publication, publication

#: How a run names the publication whose ranking settings it ranks with (its tag's value).
SOURCE_FORMAT = "publication {}"


def ranking_settings(publication: Mapping | None) -> RankingConfig | None:
    """The ranking settings a publication's leaderboard was made with (``settings.tables.leaderboard.ranking``
    of its ``publications`` row, read by ``RankingConfig.from_settings``: an earlier record's missing
    settings are the defaults), or None when not recorded or not valid settings of this version."""
    recorded = ((publication or {}).get("settings") or {}).get("tables", {}).get(LEADERBOARD_TABLE, {}).get("ranking")
    try:
        return RankingConfig.from_settings(recorded) if recorded else None
    except ValueError:
        return None


def alignment_settings(publication: Mapping | None) -> dict | None:
    """The alignment a publication's leaderboard was made with (``settings.tables.leaderboard.alignment``),
    None when its boards were not aligned."""
    return ((publication or {}).get("settings") or {}).get("tables", {}).get(LEADERBOARD_TABLE, {}).get("alignment")


def source_publication(tag: str | None) -> int | None:
    """The publication id of a run's ``arena/ranking_settings_of`` tag (``"publication 3"``), else None."""
    found = re.fullmatch(r"publication (\d+)", (tag or "").strip())
    return int(found.group(1)) if found else None


def stale_settings(con: duckdb.DuckDBPyConnection, schema: str, source_id: int | None) -> str | None:
    """Why a run that ranked with publication ``source_id``'s ranking settings may not publish: another
    publication is live now, with other ranking settings (named, with what differs); None when it may
    (no source, the source is live, or the live settings are the same)."""
    if source_id is None:
        return None
    live = live_publication(con, schema)
    if live is None or live["publication_id"] == source_id:
        return None
    before, now = ranking_settings(publication(con, schema, source_id)), ranking_settings(live)
    if before is None or now is None or before == now:
        return None
    old, new = dataclasses.asdict(before), dataclasses.asdict(now)
    differ = ", ".join(f"{key} {old[key]!r} -> {new[key]!r}" for key in new if old.get(key) != new[key])
    return (f"this run ranked with publication {source_id}'s ranking settings, but publication "
            f"{live['publication_id']} (run {live['run_id']}) went live meanwhile with other ones ({differ}): "
            f"publishing would undo them. Run it again to rank with publication {live['publication_id']}'s "
            "settings")
