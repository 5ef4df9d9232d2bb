"""The publication gate's rules (numbered in docs/publication-rules.md): table rules 5-10, board rules 11-17."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import duckdb
import polars as pl

from arena_pipeline.constants import VERSIONS_SCHEMA
from arena_pipeline.core.labels import PRIMARY_METHOD
from arena_pipeline.core.publication.policy import GatePolicy
from arena_pipeline.core.store.records import VERSIONS, live_publication
from arena_pipeline.core.store.versions import Build, PublicationError
from arena_pipeline.core.store.warehouse import quoted

#: the method whose boards the gate compares, the primary one (every method is fitted on the same battles)
GATE_METHOD = PRIMARY_METHOD


def _rated(board: pl.DataFrame) -> pl.DataFrame:
    """The rated models of the gate's method, provisional ones included."""
    return board.filter(pl.col("method") == GATE_METHOD)


def _shown(board: pl.DataFrame) -> pl.DataFrame:
    """The rated models of the gate's method that a board shows: not provisional (a board from
    before the display threshold has no ``provisional`` column: all of them)."""
    rated = _rated(board)
    return rated.filter(~pl.col("provisional").fill_null(False)) if "provisional" in rated.columns else rated


def _overall(board: pl.DataFrame) -> set[str]:
    return set(board.filter(pl.col("category") == "overall").get_column("model").to_list())


def _names(values: list[str], limit: int = 8) -> str:
    shown = ", ".join(sorted(values)[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def _dropped(lost: list[str], whole: set[str], now_provisional: set[str], what: str, setting: str,
             limit: float) -> str | None:
    """The problem when more than ``limit`` of ``whole`` is ``lost`` (``what`` says of what), else None."""
    if not whole or len(lost) / len(whole) <= limit:
        return None
    provisional = len(now_provisional.intersection(lost))
    hint = (f", {provisional} of them only provisional now: was the live board ranked with a lower "
            "display_min_battles?" if provisional else "")
    return f"{len(lost)} of the {len(whole)} {what} ({len(lost) / len(whole):.0%} > {setting} {limit:.0%}{hint}): " \
        f"{_names(lost)}"


#: How a :func:`non_finite_problem` starts: the one rule ``allow_degenerate`` does not lift.
NON_FINITE = "the new leaderboard has ratings or interval bounds that are not finite numbers"


def non_finite_problem(candidate: pl.DataFrame) -> str | None:
    """The problem of a leaderboard frame with a rating or interval bound that is not a number, else None
    (publication rule 16: no setting lifts it).

    Every method's rows are read. A rating must be a finite number; an interval bound (any
    ``*_lower`` / ``*_upper`` column) may be missing (the reference model, an interval not computed)
    or infinite in its own direction only (``-inf`` lower, ``inf`` upper: the clustered interval of a
    model seen in one session, shown as "unbounded"); NaN, an ``inf`` lower or a ``-inf`` upper bound
    is an overflow upstream (a rating of 1.7e308 moved by an alignment shift) and never published.
    """
    lower = [c for c in candidate.columns if c.endswith("_lower")]
    upper = [c for c in candidate.columns if c.endswith("_upper")]
    checks = {"rating": pl.col("rating").is_null() | ~pl.col("rating").is_finite()} if "rating" in candidate.columns else {}
    checks |= {c: pl.col(c).is_nan() | (pl.col(c) == float("inf")) for c in lower}
    checks |= {c: pl.col(c).is_nan() | (pl.col(c) == float("-inf")) for c in upper}
    if not checks:
        return None
    flags = candidate.select(**{c: e.fill_null(False) for c, e in checks.items()})
    bad_rows = candidate.filter(pl.any_horizontal(flags))
    if bad_rows.is_empty():
        return None
    bad = flags.filter(pl.any_horizontal(flags))
    examples = [f"{row['category']}/{row['method']} {row['model']!r} "
                + ", ".join(f"{c}={row[c]}" for c in checks if hit[c])
                for row, hit in zip(bad_rows.head(3).iter_rows(named=True), bad.head(3).iter_rows(named=True),
                                    strict=True)]
    return (f"{NON_FINITE} ({bad_rows.height} row{'s' if bad_rows.height > 1 else ''}: {'; '.join(examples)}"
            f"{'; ...' if bad_rows.height > 3 else ''}); allow_degenerate does not lift this rule")


def board_problems(candidate: pl.DataFrame, live: pl.DataFrame | None, policy: GatePolicy) -> list[str]:
    """Why ``candidate`` (a leaderboard frame) must not replace ``live``; empty when it may (publication
    rules 11 to 16).

    Rules: the overall board must rate at least one model (provisional ones count: a small dump's
    first board may be all provisional). Against the live board, what users see must not shrink
    too far: of the models *shown* on its overall board (not provisional), the share the new one no
    longer shows (unrated, or now provisional) must not exceed ``max_model_drop``; of its categories
    showing a model, the share showing none in the new one must not exceed ``max_category_drop``.
    So a re-run that forgets the live run's ``display_min_battles`` cannot hide the boards.
    ``allow_degenerate`` lifts every rule but one: no rating or interval bound of any method may be
    a non-finite number beyond what an interval means (:func:`non_finite_problem`).
    """
    problems = [non_finite_problem(candidate)]
    if policy.allow_degenerate:
        return [p for p in problems if p]
    rated = _rated(candidate)
    rated_overall = _overall(rated)
    if not rated_overall:
        problems.append(f"the new overall leaderboard is empty (no model has a rating; {LOWER_MIN_BATTLES} if the "
                        "dump is small)")
    if live is None or live.is_empty():
        return [p for p in problems if p]
    new, old = _shown(candidate), _shown(live)
    old_overall = _overall(old)
    if rated_overall:  # an empty board is refused above already
        problems.append(_dropped(sorted(old_overall - _overall(new)), old_overall, rated_overall,
                                 "models shown on the live overall board would no longer be shown",
                                 "max_model_drop", policy.max_model_drop))
    old_categories = set(old.get_column("category").to_list())
    problems.append(_dropped(sorted(old_categories - set(new.get_column("category").to_list())), old_categories,
                             set(rated.get_column("category").to_list()),
                             "live categories would lose their board or show only provisional models",
                             "max_category_drop", policy.max_category_drop))
    return [p for p in problems if p]


#: The advice for an empty board (run config words; the CLI says its flag instead).
LOWER_MIN_BATTLES = "lower the rankings config min_battles"
#: What the refusal says of a run whose dump is of another source than the live boards'.
SOURCE_CHANGE = "another dump, not a new revision of the live one"
RELAX_HINT = ("to publish it anyway, set the publication_gate run config allow_degenerate=true, or raise "
              "max_model_drop / max_category_drop")


def refusal_message(problems: list[str], sources: tuple[str | None, str | None] | None = None) -> str:
    """The gate's one-paragraph refusal: what changed, then which setting relaxes it (publication rule 17).

    ``sources`` (live, this run's), when they differ, adds that the run is of another source (a
    different dump, not a new revision of the live one): its board is judged against the live one
    all the same, so moving to another dump is a deliberate act with the settings named.
    """
    text = "publication refused, nothing changed: " + "; ".join(problems)
    if sources is not None and sources[0] != sources[1]:
        text += (f". The live boards are of source {sources[0]!r} and this run's of {sources[1]!r}: {SOURCE_CHANGE}. "
                 "Replacing the live boards by another dump's is a deliberate "
                 "act; if it is meant")
    if all(p.startswith(NON_FINITE) for p in problems):  # no setting relaxes it
        return text
    return text + f" ({RELAX_HINT})"


class NothingBuiltError(PublicationError):
    """The run wrote no table version: there is nothing new to publish (not a failure of the gate;
    publication rule 10)."""



def plan_tables(con: duckdb.DuckDBPyConnection, schema: str, build: Build, tables: Iterable[str],
                *, derived_from: Mapping[str, tuple[str, ...]], built_together: Iterable[tuple[str, ...]],
                checked: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """Which version of each table a publication of ``build`` would show, and which it rebuilt.

    The table rules of the gate, numbered in docs/publication-rules.md (the one place they are
    written): this run's versions, the live publication's for the rest (publication rule 3); refused
    when one is missing (rule 5), would be shown beside a rebuilt input (``derived_from``, rule 6),
    comes from another run than the tables built with it (``built_together``, rule 7) or another
    alias table (rule 8), or failed its blocking checks (``checked``, rule 9).

    Raises
    ------
    PublicationError
        If a table is missing, would mix builds, or its blocking checks did not pass.
    """
    tables = list(tables)
    own = dict(con.execute(
        f"SELECT table_name, version FROM {VERSIONS} WHERE build_id = ? AND revision = ?",
        [build.build_id, build.revision]).fetchall())
    if not own:
        raise NothingBuiltError(f"run {build.build_id} built no table: nothing new to publish")
    live = live_publication(con, schema)
    live_tables = live["tables"] if live is not None and live["revision"] == build.revision else {}
    chosen, rebuilt, problems = {}, [], []
    for table in tables:
        if table in own:
            chosen[table] = own[table]
            rebuilt.append(table)
        elif table in live_tables:
            chosen[table] = live_tables[table]
        else:
            problems.append(f"{schema}.{table} was not built for revision {build.revision}")
    for table in tables:
        if table in own:
            continue
        stale = [up for up in derived_from.get(table, ()) if up in own]
        if stale:
            problems.append(f"{schema}.{table} is computed from {', '.join(stale)}, which this run rebuilt, "
                            f"but was not rebuilt itself (include {schema}/{table} in the selection)")
    for group in built_together:
        mine = [t for t in group if t in own]
        if mine and len(mine) < len(group):
            problems.append(f"{', '.join(group)} are computed together; this run built only {', '.join(mine)}")
    checks = dict(con.execute(
        f"SELECT version, checks_passed FROM {VERSIONS} WHERE version IN (SELECT unnest(?))",
        [[chosen[t] for t in checked if t in chosen]]).fetchall())
    for table in checked:
        if table in chosen and checks.get(chosen[table]) is not True:
            state = "failed" if checks.get(chosen[table]) is False else "were not run"
            problems.append(f"the blocking checks of {schema}.{table} ({chosen[table]}) {state}")
    problems += _settings_conflicts(schema, publication_settings(con, chosen))
    if problems:
        raise PublicationError("publication refused, nothing changed: " + "; ".join(problems))
    return chosen, rebuilt



#: settings that may differ between the tables of one publication (they do not change the data)
UNCOMPARED_SETTINGS = frozenset({"package_version", "source"})



def _settings_conflicts(schema: str, settings: Mapping[str, Mapping]) -> list[str]:
    """Settings recorded with the chosen versions (``publication_settings``) that disagree (say, two
    alias tables: publication rule 8); check outcomes are not settings."""
    seen: dict[str, dict[str, list[str]]] = {}
    for table, recorded in settings.items():
        for key, value in recorded.items():
            if key not in UNCOMPARED_SETTINGS and key != "checks":
                seen.setdefault(key, {}).setdefault(json.dumps(value, sort_keys=True), []).append(table)
    return [
        f"the tables were made with different {key}: "
        + " vs ".join(f"{', '.join(f'{schema}.{t}' for t in sorted(tables))}" for tables in values.values())
        + " (rebuild them together)"
        for key, values in sorted(seen.items()) if len(values) > 1
    ]



def publication_settings(con: duckdb.DuckDBPyConnection, chosen: Mapping[str, str]) -> dict:
    """The settings recorded with the chosen versions, per table (what the publication row keeps)."""
    rows = con.execute(f"SELECT table_name, settings, checks FROM {VERSIONS} WHERE version IN (SELECT unnest(?))",
                       [list(chosen.values())]).fetchall()
    out: dict = {}
    for table, settings, checks in rows:
        out[table] = json.loads(settings) if settings else {}
        if checks:
            out[table]["checks"] = json.loads(checks)
    return out


def unchanged_publication(con: duckdb.DuckDBPyConnection, schema: str, build: Build, chosen: Mapping[str, str], *,
                          by_version: Iterable[str] = (), ignore: Iterable[str] = ()) -> int | None:
    """The live publication's id when a publication of ``chosen`` would show readers what it shows, else None
    (publication rule 23: such a run publishes nothing, and that publication stays live).

    It shows the same when it is of the same dump revision and has the same tables (but ``ignore``: what is
    computed against the live publication itself), each made with the same settings (the package version and
    the checks' records aside) and holding the same rows: the same version (itself, or a view of it: a reused
    version), or, for a table not in ``by_version`` (the vote tables, compared by version only), rows equal
    to the live version's, as a multiset.
    """
    live = live_publication(con, schema)
    if live is None or live["revision"] != build.revision:
        return None
    ignored = set(ignore)
    theirs = {t: v for t, v in live["tables"].items() if t not in ignored}
    if set(theirs) != set(chosen) - ignored:
        return None
    names = [*chosen.values(), *theirs.values()]
    base = dict(con.execute(f"SELECT version, coalesce(same_as, version) FROM {VERSIONS} "
                            "WHERE version IN (SELECT unnest(?))", [names]).fetchall())
    keyed = [publication_settings(con, {t: tables[t] for t in theirs}) for tables in (chosen, theirs)]
    for recorded in keyed:
        for settings in recorded.values():
            for unkeyed in ("package_version", "checks"):
                settings.pop(unkeyed, None)
    if keyed[0] != keyed[1]:
        return None
    versions = set(by_version)
    for table, version in theirs.items():
        mine = chosen[table]
        if base.get(mine, mine) == base.get(version, version):
            continue
        if table in versions or not _same_rows(con, quoted(VERSIONS_SCHEMA, mine), quoted(VERSIONS_SCHEMA, version)):
            return None
    return live["publication_id"]


def _same_rows(con: duckdb.DuckDBPyConnection, a: str, b: str) -> bool:
    """Whether relations ``a`` and ``b`` have the same columns (names and types, in order) and the same rows,
    as multisets (a null equals a null)."""
    columns = [[(d[0], d[1]) for d in con.execute(f"SELECT * FROM {name} LIMIT 0").description] for name in (a, b)]
    if columns[0] != columns[1]:
        return False
    return not con.execute(f"SELECT count(*) FROM ((SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}) UNION ALL "
                           f"(SELECT * FROM {b} EXCEPT ALL SELECT * FROM {a}))").fetchone()[0]
