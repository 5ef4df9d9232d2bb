"""External validation: read a published leaderboard, compare it with ours, optionally align to it.

Alignment (opt-in, :func:`alignment_shifts` / :func:`apply_alignment`): each of our boards is
translated so that its matched shown models' median difference to the published board of the same
category and method is zero; the shifts are recorded (:func:`alignment_record`) with the
publication.

Two file formats are read (local paths only):

* **JSON**, LMArena's shape for its text boards::

      {"full": {"gpt-4.1-2025-04-14": {"rating": 1283.2,
                                       "rating_q025": 1279.0, "rating_q975": 1287.9},
                ...},
       "hard_6": {...}, ...}

  Other fields of a model's entry are ignored; ``rating_q025``/``rating_q975`` may be absent
  or null.
* **CSV** with columns ``model``, ``rating`` and optionally ``ci_lower``, ``ci_upper``,
  ``category`` (a missing column or an empty cell means ``overall``) and ``method``.

LMArena's ratings history (the Hub dataset ``lmarena-ai/leaderboard-dataset``, parquet) is read by
:mod:`arena_pipeline.core.validation.leaderboard_dataset` into the same frame (:func:`board_frame`).

Category keys are mapped to ours through ``arena_pipeline/data/category_map.csv``
(``external, category, method``); our own category names are accepted as they are; any other
key is kept (``category`` = the key, ``category_known`` false) and so shows up in the
comparison instead of disappearing. Model names are matched through
:mod:`arena_pipeline.core.dataset.models` (normalization + alias table).
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from collections import Counter
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
from scipy import stats

from arena_pipeline.core.dataset.categories import CATEGORY_NAMES, ordered_categories
from arena_pipeline.core.dataset.models import canonical_name_expr, load_aliases, read_data_csv
from arena_pipeline.core.ranking.rating_method import RATING_METHODS
from arena_pipeline.core.validation.plausible import MAX_ABS_VALUE, implausible_expr, plausible, range_text

PACKAGED_CATEGORY_MAP = "data/category_map.csv"

#: Columns and types of :func:`load_category_map`.
CATEGORY_MAP_SCHEMA: dict[str, pl.DataType] = {
    "external": pl.String(),
    "category": pl.String(),
    "method": pl.String(),
}

#: Columns and types of :func:`read_published_board`.
BOARD_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),  # ours when known, else their key unchanged
    "source_category": pl.String(),  # their key as written in the file
    "method": pl.String(),  # 'bt' / 'bt_style' from the map or the CSV; null when unknown
    "category_known": pl.Boolean(),
    "model": pl.String(),  # their name, unchanged
    "canonical": pl.String(),
    "rating": pl.Float64(),
    "ci_lower": pl.Float64(),
    "ci_upper": pl.Float64(),
}

#: Columns and types of ``ComparisonResult.summary``.
SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "n_ours": pl.Int64(),
    "n_theirs": pl.Int64(),
    "n_matched": pl.Int64(),
    "unmatched_ours": pl.List(pl.String()),
    "unmatched_theirs": pl.List(pl.String()),
    "ambiguous": pl.List(pl.String()),
    "spearman": pl.Float64(),
    "kendall": pl.Float64(),
    "mean_abs_diff": pl.Float64(),
    "max_abs_diff": pl.Float64(),
    "slope": pl.Float64(),
    "intercept": pl.Float64(),
    "rms_residual": pl.Float64(),
    "median_shift": pl.Float64(),
    "rms_after_shift": pl.Float64(),
}

#: Columns and types of ``ComparisonResult.models``.
COMPARISON_MODELS_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "model": pl.String(),  # canonical name
    "status": pl.String(),  # 'matched' | 'only_ours' | 'only_theirs' | 'ambiguous'
    "our_name": pl.String(),
    "their_name": pl.String(),
    "our_rating": pl.Float64(),
    "our_rank": pl.Int64(),
    "their_rating": pl.Float64(),
    "their_rank": pl.Int64(),
    "our_centred": pl.Float64(),
    "their_centred": pl.Float64(),
    "diff": pl.Float64(),
}

#: Columns and types of ``ComparisonResult.skipped``.
SKIPPED_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "source_category": pl.String(),
    "method": pl.String(),
    "n_models": pl.Int64(),
}

#: Columns and types of ``arena.external_comparison`` (:func:`compare_leaderboard`'s summary).
EXTERNAL_COMPARISON_SCHEMA: dict[str, pl.DataType] = {
    **SUMMARY_SCHEMA, "method": pl.String(), "dump_revision": pl.String(), "board": pl.String()}
#: Columns and types of ``arena.external_comparison_models`` (:func:`compare_leaderboard`'s per-model rows).
EXTERNAL_COMPARISON_MODELS_SCHEMA: dict[str, pl.DataType] = {
    **COMPARISON_MODELS_SCHEMA, "method": pl.String(), "dump_revision": pl.String()}

STATUSES = ("matched", "only_ours", "only_theirs", "ambiguous")
_AGREEMENT = (
    "spearman",
    "kendall",
    "mean_abs_diff",
    "max_abs_diff",
    "slope",
    "intercept",
    "rms_residual",
    "median_shift",
    "rms_after_shift",
)

_JSON_SHAPE = '{category: {model: {"rating": r, "rating_q025": lo, "rating_q975": hi}}}'

#: The largest published board file read (bytes): LMArena's JSON of every text board is about 1 MB.
MAX_BOARD_BYTES = 64 * 2**20
#: The most (category, model) entries a published board may hold: LMArena's text boards hold about
#: 12,000 (some 40 categories of about 300 models).
MAX_BOARD_ENTRIES = 200_000
#: The largest magnitude of a published rating or interval bound (``core.validation.plausible``, the
#: bound of benchmark scores too): an alignment shift of such a board stays finite.
MAX_ABS_RATING = MAX_ABS_VALUE
_CSV_COLUMNS = "model, rating[, ci_lower, ci_upper, category, method]"


class BoardFormatError(ValueError):
    """A published board file that cannot be read; names the file and the problem."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


# ---------------------------------------------------------------------------
# Category map
# ---------------------------------------------------------------------------


def _read_category_csv(data: bytes | Path, label: str) -> pl.DataFrame:
    table = read_data_csv(data, label, ("external", "category"), "method", ValueError).select(
        pl.col("external").str.strip_chars(),
        pl.col("category").str.strip_chars(),
        "method",
        "line",
    )
    bad = table.filter(
        pl.col("external").is_null()
        | (pl.col("external") == "")
        | ~pl.col("category").is_in(list(CATEGORY_NAMES)).fill_null(False)
        | ~(pl.col("method").is_null() | pl.col("method").is_in(list(RATING_METHODS)))
    )
    if bad.height:
        row = bad.row(0, named=True)
        raise ValueError(
            f"{label}: line {row['line']}: need a non-empty external key, a category in "
            f"{list(CATEGORY_NAMES)} and a method in {list(RATING_METHODS)} or empty, got {row}"
        )
    dupes = table.filter(pl.col("external").is_duplicated())
    if dupes.height:
        raise ValueError(
            f"{label}: external key(s) {sorted(set(dupes.get_column('external')))} listed twice"
        )
    return table


def load_category_map(extra_path: str | Path | None = None) -> pl.DataFrame:
    """Their category keys -> ours: the packaged CSV, with an optional user CSV over it.

    Parameters
    ----------
    extra_path
        CSV with ``external``, ``category`` (one of ``categories.CATEGORY_NAMES``) and optionally
        ``method`` (``bt``, ``bt_style``, ``spectral`` or empty); its rows replace packaged
        rows with the same ``external`` key. Other columns (``note``) are ignored.

    Returns
    -------
    pl.DataFrame
        :data:`CATEGORY_MAP_SCHEMA`, one row per external key, user rows first then the
        packaged rows in file order.

    Raises
    ------
    ValueError
        Missing columns, an unknown category or method, a key listed twice in one file.
    """
    packaged = files("arena_pipeline").joinpath(PACKAGED_CATEGORY_MAP).read_bytes()
    tables = [_read_category_csv(packaged, "package")]
    if extra_path is not None:
        path = Path(extra_path)
        if not path.is_file():
            raise FileNotFoundError(f"category map {path} does not exist")
        tables.insert(0, _read_category_csv(path, str(path)))
    return (
        pl.concat(tables)
        .unique("external", keep="first", maintain_order=True)
        .select([pl.col(c).cast(t) for c, t in CATEGORY_MAP_SCHEMA.items()])
    )


# ---------------------------------------------------------------------------
# Reading a published board
# ---------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _describe(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def _too_many(entries: int) -> str:
    return (f"{entries:,} or more (category, model) entries, over the limit of {MAX_BOARD_ENTRIES:,} "
            "(external.MAX_BOARD_ENTRIES): not a published leaderboard")


def _parse_json(path: Path, text: str) -> list[tuple[str, str, float, float | None, float | None]]:
    """Records (category key, model, rating, lower, upper) of an LMArena-shaped JSON board."""

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        data = dict(pairs)
        if len(data) < len(pairs):  # one pass (a count per key was quadratic: minutes at 30k models)
            repeated = sorted(k for k, n in Counter(k for k, _ in pairs).items() if n > 1)
            raise BoardFormatError(path, f"duplicate JSON key(s) {repeated} in one object")
        return data

    def no_constants(name: str) -> Any:
        raise BoardFormatError(path, f"non-finite number {name} is not allowed")

    try:
        data = json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constants)
    except json.JSONDecodeError as exc:
        raise BoardFormatError(
            path, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc
    if not isinstance(data, dict):
        raise BoardFormatError(
            path, f"expected a JSON object shaped {_JSON_SHAPE}, got {type(data).__name__}"
        )
    if not data:
        raise BoardFormatError(path, "the board is empty (no categories)")
    records = []
    for category, models in data.items():
        where = f"category {category!r}"
        if not isinstance(models, dict):
            raise BoardFormatError(
                path, f"{where}: expected an object of models, got {_describe(models)}"
            )
        if not models:
            raise BoardFormatError(path, f"{where} has no models")
        if len(records) + len(models) > MAX_BOARD_ENTRIES:
            raise BoardFormatError(path, _too_many(len(records) + len(models)))
        for model, entry in models.items():
            at = f"{where}, model {model!r}"
            if not model.strip():
                raise BoardFormatError(path, f"{where}: empty model name")
            if not isinstance(entry, dict):
                raise BoardFormatError(
                    path, f"{at}: expected an object with 'rating', got {_describe(entry)}"
                )
            if entry.get("rating") is None:
                raise BoardFormatError(path, f"{at}: missing 'rating'")
            values = []
            for key in ("rating", "rating_q025", "rating_q975"):
                value = entry.get(key)
                if value is None and key != "rating":
                    values.append(None)
                    continue
                if not _is_number(value):
                    raise BoardFormatError(
                        path, f"{at}: {key!r} must be a number, got {_describe(value)}"
                    )
                values.append(float(value))
            records.append((category, model, values[0], values[1], values[2]))
    return records


def _parse_csv(path: Path) -> pl.DataFrame:
    """source_category, model, rating, ci_lower, ci_upper, method (method may be null)."""
    try:
        raw = pl.read_csv(path, infer_schema=False)
    except Exception as exc:  # polars raises several error types for unreadable CSV
        raise BoardFormatError(path, f"not a readable CSV ({exc})") from exc
    raw = raw.rename({c: c.strip().lower() for c in raw.columns})
    missing = [c for c in ("model", "rating") if c not in raw.columns]
    if missing:
        raise BoardFormatError(
            path, f"missing column(s) {missing}; expected columns {_CSV_COLUMNS}, got {raw.columns}"
        )
    if raw.height == 0:
        raise BoardFormatError(path, "the board is empty (no rows)")
    if raw.height > MAX_BOARD_ENTRIES:
        raise BoardFormatError(path, _too_many(raw.height))

    def text(name: str) -> pl.Expr:
        if name not in raw.columns:
            return pl.lit(None, pl.String)
        value = pl.col(name).str.strip_chars()
        return pl.when(value.str.len_chars() > 0).then(value)

    frame = raw.with_row_index("line", offset=2).select(
        pl.col("line").cast(pl.Int64),
        text("category").fill_null("overall").alias("source_category"),
        pl.col("model"),
        text("method").alias("method"),
        *[text(c).alias(f"_{c}") for c in ("rating", "ci_lower", "ci_upper")],
    )

    def lines(mask: pl.Expr) -> list[int]:
        return frame.filter(mask).get_column("line").head(10).to_list()

    empty_model = lines(pl.col("model").is_null() | (pl.col("model").str.strip_chars() == ""))
    if empty_model:
        raise BoardFormatError(path, f"empty model name on line(s) {empty_model}")
    no_rating = lines(pl.col("_rating").is_null())
    if no_rating:
        raise BoardFormatError(path, f"missing rating on line(s) {no_rating}")
    for column in ("rating", "ci_lower", "ci_upper"):
        value = pl.col(f"_{column}").cast(pl.Float64, strict=False)
        bad = frame.filter(
            pl.col(f"_{column}").is_not_null() & (value.is_null() | ~value.is_finite())
        )
        if bad.height:
            row = bad.row(0, named=True)
            raise BoardFormatError(
                path,
                f"{column} must be a finite number: line {row['line']} has {row['_' + column]!r}"
                + (f" ({bad.height} such lines)" if bad.height > 1 else ""),
            )
    bad_method = lines(pl.col("method").is_not_null() & ~pl.col("method").is_in(list(RATING_METHODS)))
    if bad_method:
        raise BoardFormatError(
            path, f"method must be one of {list(RATING_METHODS)} on line(s) {bad_method}"
        )
    repeated = pl.struct("source_category", "model").is_duplicated()
    dupes = frame.filter(repeated)
    if dupes.height:
        row = dupes.row(0, named=True)
        raise BoardFormatError(
            path,
            f"model {row['model']!r} appears more than once in category "
            f"{row['source_category']!r} (lines {lines(repeated)})",
        )
    return frame.select(
        "source_category",
        "model",
        *[pl.col(f"_{c}").cast(pl.Float64).alias(c) for c in ("rating", "ci_lower", "ci_upper")],
        "method",
    )


def read_published_board(
    path: str | Path,
    aliases: pl.DataFrame | None = None,
    category_map: pl.DataFrame | None = None,
    format: Literal["json", "csv"] | None = None,
) -> pl.DataFrame:
    """Read a published leaderboard (LMArena JSON or CSV) into one long frame.

    Parameters
    ----------
    path
        Local file; ``.json`` or ``.csv`` unless ``format`` is given. URLs are refused.
    aliases
        :func:`models.load_aliases` output for the ``canonical`` column; default packaged.
    category_map
        :func:`load_category_map` output; default packaged.
    format
        Force a format instead of going by the suffix.

    Returns
    -------
    pl.DataFrame
        :data:`BOARD_SCHEMA`, one row per (category key, model), ordered by category
        (ours first, in board order (``categories.ordered_categories``)), key, rating descending, model.
        ``category`` is our name for a mapped key or one of ours, else the key itself with
        ``category_known`` false. ``method`` comes from the CSV's ``method`` cell, else from
        the map (null for our own names and unknown keys). ``ci_lower``/``ci_upper`` are
        LMArena's ``rating_q025``/``rating_q975`` (null when absent).

    Raises
    ------
    BoardFormatError
        Empty file or board, invalid JSON, wrong shape, a missing, null or non-numeric
        rating or interval bound, non-finite numbers, a rating or bound beyond
        ``±MAX_ABS_RATING`` (1e6), a duplicated model in a category, ``ci_lower > ci_upper``,
        unknown suffix, a file over :data:`MAX_BOARD_BYTES` or with more than
        :data:`MAX_BOARD_ENTRIES` (category, model) entries. The message starts with the path.
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        ``path`` is a URL.
    """
    text_path = str(path)
    if "://" in text_path:
        raise ValueError(f"{text_path}: only local files are read, not URLs")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"published board {path} does not exist")
    kind = format or path.suffix.lower().lstrip(".")
    if kind not in ("json", "csv"):
        raise BoardFormatError(path, f"unknown format {kind!r}: expected a .json or .csv file")
    size = path.stat().st_size
    if size > MAX_BOARD_BYTES:
        raise BoardFormatError(path, f"{size:,} bytes, over the limit of {MAX_BOARD_BYTES:,} bytes "
                               "(external.MAX_BOARD_BYTES): not a published leaderboard")
    try:
        content = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BoardFormatError(path, f"not UTF-8 text ({exc.reason})") from exc
    if not content.strip():
        raise BoardFormatError(path, "the file is empty")

    if kind == "json":
        records = _parse_json(path, content)
        parsed = pl.DataFrame(
            records,
            schema={
                "source_category": pl.String,
                "model": pl.String,
                "rating": pl.Float64,
                "ci_lower": pl.Float64,
                "ci_upper": pl.Float64,
            },
            orient="row",
        ).with_columns(method=pl.lit(None, pl.String))
    else:
        parsed = _parse_csv(path)
    return board_frame(parsed, path, aliases, category_map)


def board_frame(parsed: pl.DataFrame, path: str | Path, aliases: pl.DataFrame | None = None,
                category_map: pl.DataFrame | None = None) -> pl.DataFrame:
    """Parsed published ratings as :data:`BOARD_SCHEMA`: bounds checked, keys mapped, names made canonical.

    Parameters
    ----------
    parsed
        ``source_category``, ``model``, ``rating``, ``ci_lower``, ``ci_upper``, ``method`` (null: the map's).
    path
        What the rows were read from, for the messages.
    aliases, category_map
        As for :func:`read_published_board`.

    Raises
    ------
    BoardFormatError
        A rating or bound beyond ``±MAX_ABS_RATING``, ``ci_lower > ci_upper``.
    """
    columns = ("rating", "ci_lower", "ci_upper")
    extreme = parsed.filter(pl.any_horizontal(implausible_expr(pl.col(c), MAX_ABS_RATING) for c in columns))
    if extreme.height:
        row = extreme.row(0, named=True)
        column = next(c for c in columns if row[c] is not None and not plausible(row[c], MAX_ABS_RATING))
        raise BoardFormatError(
            path,
            f"category {row['source_category']!r}, model {row['model']!r}: {column} {row[column]:g} is not "
            f"{range_text(MAX_ABS_RATING)}" + (f" ({extreme.height} such entries)" if extreme.height > 1 else ""),
        )
    inverted = parsed.filter(pl.col("ci_lower") > pl.col("ci_upper"))
    if inverted.height:
        row = inverted.row(0, named=True)
        raise BoardFormatError(
            path,
            f"category {row['source_category']!r}, model {row['model']!r}: "
            f"ci_lower {row['ci_lower']} > ci_upper {row['ci_upper']}",
        )

    aliases = load_aliases() if aliases is None else aliases
    category_map = load_category_map() if category_map is None else category_map
    mapped = category_map.select(
        pl.col("external").alias("source_category"),
        pl.col("category").alias("_mapped"),
        pl.col("method").alias("_map_method"),
    )
    board = parsed.join(mapped, on="source_category", how="left").select(
        pl.coalesce("_mapped", "source_category").alias("category"),
        "source_category",
        pl.coalesce("method", "_map_method").alias("method"),
        (
            pl.col("_mapped").is_not_null()
            | pl.col("source_category").is_in(list(CATEGORY_NAMES))
        ).alias("category_known"),
        "model",
        canonical_name_expr("model", aliases).alias("canonical"),
        "rating",
        "ci_lower",
        "ci_upper",
    )
    order = {c: i for i, c in enumerate(ordered_categories(board.get_column("category").to_list()))}
    return board.sort(
        pl.col("category").replace_strict(order, return_dtype=pl.Int32),
        "source_category",
        pl.col("rating"),
        "model",
        descending=[False, False, True, False],
    ).select([pl.col(c).cast(t) for c, t in BOARD_SCHEMA.items()])


def to_lmarena_json(
    board: pl.DataFrame, category_map: pl.DataFrame | None = None
) -> dict[str, dict[str, dict[str, float | None]]]:
    """A leaderboard frame in LMArena's JSON shape (the inverse of :func:`read_published_board`).

    Parameters
    ----------
    board
        Rows with ``category``, ``method``, ``model``, ``rating``, ``ci_lower``, ``ci_upper``
        (e.g. ``RankingOutput.leaderboard``).
    category_map
        :func:`load_category_map` output; the first key listed for a (category, method) is
        used. Default packaged.

    Returns
    -------
    dict
        ``{key: {model: {"rating", "rating_q025", "rating_q975"}}}``, ready for ``json.dump``.

    Raises
    ------
    ValueError
        A (category, method) of ``board`` that no key of the map stands for.
    """
    category_map = load_category_map() if category_map is None else category_map
    keys = category_map.filter(pl.col("method").is_not_null()).unique(
        ["category", "method"], keep="first", maintain_order=True
    )
    joined = board.join(keys, on=["category", "method"], how="left")
    unmapped = joined.filter(pl.col("external").is_null()).select("category", "method").unique()
    if unmapped.height:
        raise ValueError(f"no external key for (category, method) {unmapped.rows()}")
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for key, model, rating, lower, upper in joined.select(
        "external", "model", "rating", "ci_lower", "ci_upper"
    ).iter_rows():
        out.setdefault(key, {})[model] = {
            "rating": rating,
            "rating_q025": lower,
            "rating_q975": upper,
        }
    return out


# ---------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ComparisonResult:
    """Result of :func:`compare_boards`.

    Attributes
    ----------
    summary
        :data:`SUMMARY_SCHEMA`, one row per category present on either side (ours first in
        board order (``categories.ordered_categories``), then the others alphabetically).
    models
        :data:`COMPARISON_MODELS_SCHEMA`, one row per model and category: matched pairs,
        models on one side only, and each of their names in an ambiguous group.
    method
        The method of their rows that was compared (null: every row).
    skipped
        :data:`SKIPPED_SCHEMA`: their (category key, method) groups left out because their
        method differs from ``method``.
    """

    summary: pl.DataFrame
    models: pl.DataFrame
    method: str | None = None
    skipped: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SKIPPED_SCHEMA))

    def to_metadata(self) -> dict[str, Any]:
        """Plain, JSON-serialisable figures per category (for Dagster metadata)."""
        return {
            "method": self.method,
            "categories": {row.pop("category"): row for row in self.summary.to_dicts()},
            "skipped": self.skipped.to_dicts(),
        }


def _scalar(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _agreement(ours: np.ndarray, theirs: np.ndarray) -> dict[str, float | None]:
    """Rank correlations, centred differences, the line ``theirs ~ a + b ours`` and the shift."""
    n = len(ours)
    out: dict[str, float | None] = dict.fromkeys(_AGREEMENT)
    if n == 0:
        return out
    our_c = ours - ours.mean()
    their_c = theirs - theirs.mean()
    diff = np.abs(our_c - their_c)
    out["mean_abs_diff"] = float(diff.mean())
    out["max_abs_diff"] = float(diff.max())
    out["median_shift"] = float(np.median(theirs - ours))
    # the best (least-squares) shift is the mean difference: what is left is the centred diff
    out["rms_after_shift"] = float(np.sqrt(np.mean((their_c - our_c) ** 2)))
    if n >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # constant input: NaN, reported as null
            out["spearman"] = _scalar(stats.spearmanr(ours, theirs).statistic)
            out["kendall"] = _scalar(stats.kendalltau(ours, theirs).statistic)
        denom = float(our_c @ our_c)
        if denom > 0:
            slope = float(our_c @ their_c) / denom
            out["slope"] = slope
            out["intercept"] = float(theirs.mean() - slope * ours.mean())
            out["rms_residual"] = float(np.sqrt(np.mean((their_c - slope * our_c) ** 2)))
    return out


def compare_boards(
    ours: pl.DataFrame,
    theirs: pl.DataFrame,
    aliases: pl.DataFrame | None = None,
    their_method: str | None = "auto",
) -> ComparisonResult:
    """Compare our leaderboard with a published one, category by category.

    Parameters
    ----------
    ours
        ``LEADERBOARD_SCHEMA`` rows of one method (``category``, ``model``, ``rating``; a
        ``method`` column, if present, must hold one value). Names are canonicalized again
        (a no-op for canonical names); two rows of one category with one canonical name
        are an error.
    theirs
        :func:`read_published_board` output (``category``, ``model``, ``rating``; optional
        ``method``). Their names are canonicalized with ``aliases`` (the ``canonical``
        column is recomputed).
    aliases
        :func:`models.load_aliases` output; default packaged.
    their_method
        Which of their rows to compare: ``"auto"`` (default) keeps rows whose ``method`` is
        null or equals ours; a method name keeps null or that method; None keeps every row.
        Left-out rows are counted in ``ComparisonResult.skipped``.

    Returns
    -------
    ComparisonResult
        Matching is by (category, canonical name). When two or more of their names in a
        category share a canonical name, the group is *ambiguous*: listed in
        ``summary.ambiguous`` and as ``status='ambiguous'`` rows, and not matched. Every
        other name is matched or listed as ``unmatched_ours``/``unmatched_theirs``.
        Over the matched models of a category: ranks are recomputed (1 + number of matched
        models with a strictly higher rating), each board is centred on its mean,
        ``diff = our_centred - their_centred``; ``spearman`` and ``kendall`` (tau-b) are
        ``scipy.stats.spearmanr``/``kendalltau`` of the ratings (null under 2 models or
        constant ratings); ``mean_abs_diff``/``max_abs_diff`` of ``|diff|`` (null with no
        match); ``slope`` and ``intercept`` the least-squares line ``theirs ~ intercept +
        slope * ours`` of the ratings (slope 1 when the scales agree; null under 2 models or
        constant ratings of ours) and ``rms_residual`` the root mean square of its residuals;
        ``median_shift`` the median of ``theirs - ours`` (what :func:`alignment_shifts` adds,
        there over the shown models only) and ``rms_after_shift`` the root mean square of
        ``theirs - ours`` after the best (least-squares, i.e. mean) shift, ``sqrt(mean(diff^2))``:
        0 when their board is ours translated.

    Raises
    ------
    ValueError
        Missing columns, several methods in ``ours``, a null or duplicated name in ``ours``.
    """
    for name, frame in (("ours", ours), ("theirs", theirs)):
        missing = [c for c in ("category", "model", "rating") if c not in frame.columns]
        if missing:
            raise ValueError(f"{name} lacks columns {missing}")
    our_methods = (
        ours.get_column("method").drop_nulls().unique().sort().to_list()
        if "method" in ours.columns
        else []
    )
    if len(our_methods) > 1:
        raise ValueError(f"ours holds several methods {our_methods}; pass one method's rows")
    if their_method == "auto":
        their_method = our_methods[0] if our_methods else None
    aliases = load_aliases() if aliases is None else aliases

    skipped = pl.DataFrame(schema=SKIPPED_SCHEMA)
    if their_method is not None and "method" in theirs.columns:
        other = pl.col("method").is_not_null() & (pl.col("method") != their_method)
        source = "source_category" if "source_category" in theirs.columns else "category"
        skipped = (
            theirs.filter(other)
            .group_by("category", pl.col(source).alias("source_category"), "method")
            .agg(pl.len().cast(pl.Int64).alias("n_models"))
            .sort("category", "source_category", "method")
            .select([pl.col(c).cast(t) for c, t in SKIPPED_SCHEMA.items()])
        )
        theirs = theirs.filter(~other)

    our = ours.select(
        pl.col("category").cast(pl.String),
        canonical_name_expr("model", aliases).alias("model"),
        pl.col("model").cast(pl.String).alias("our_name"),
        pl.col("rating").cast(pl.Float64).alias("our_rating"),
    )
    if our.get_column("model").null_count():
        raise ValueError("ours has a null or empty model name")
    dupes = our.filter(pl.struct("category", "model").is_duplicated())
    if dupes.height:
        raise ValueError(
            f"ours has several rows per (category, canonical model): "
            f"{dupes.select('category', 'model', 'our_name').rows()[:6]}"
        )
    their = theirs.select(
        pl.col("category").cast(pl.String),
        canonical_name_expr("model", aliases).alias("model"),
        pl.col("model").cast(pl.String).alias("their_name"),
        pl.col("rating").cast(pl.Float64).alias("their_rating"),
    )
    their = their.with_columns(
        (pl.len().over("category", "model") > 1).alias("_ambiguous")
    )
    keys = ["category", "model"]
    unique_theirs = their.filter(~pl.col("_ambiguous")).drop("_ambiguous")

    matched = our.join(unique_theirs, on=keys, how="inner").with_columns(
        pl.lit("matched").alias("status"),
        pl.col("our_rating").rank("min", descending=True).over("category").alias("our_rank"),
        pl.col("their_rating").rank("min", descending=True).over("category").alias("their_rank"),
        (pl.col("our_rating") - pl.col("our_rating").mean().over("category")).alias("our_centred"),
        (pl.col("their_rating") - pl.col("their_rating").mean().over("category")).alias(
            "their_centred"
        ),
    ).with_columns((pl.col("our_centred") - pl.col("their_centred")).alias("diff"))
    only_ours = our.join(their, on=keys, how="anti").with_columns(
        pl.lit("only_ours").alias("status")
    )
    only_theirs = unique_theirs.join(our, on=keys, how="anti").with_columns(
        pl.lit("only_theirs").alias("status")
    )
    ambiguous = (
        their.filter(pl.col("_ambiguous"))
        .drop("_ambiguous")
        .join(our, on=keys, how="left")
        .with_columns(pl.lit("ambiguous").alias("status"))
    )
    models = pl.concat(
        [matched, only_ours, only_theirs, ambiguous], how="diagonal_relaxed"
    ).select([pl.col(c).cast(t) for c, t in COMPARISON_MODELS_SCHEMA.items()])
    order = ordered_categories(
        our.get_column("category").to_list() + their.get_column("category").to_list()
    )
    rank = {c: i for i, c in enumerate(order)}
    status_rank = {s: i for i, s in enumerate(STATUSES)}
    models = models.sort(
        pl.col("category").replace_strict(rank, return_dtype=pl.Int32),
        pl.col("status").replace_strict(status_rank, return_dtype=pl.Int32),
        pl.col("our_rank"),
        pl.col("model"),
        pl.col("their_name"),
        nulls_last=True,
    )

    lists = models.group_by("category").agg(
        pl.col("our_name").filter(pl.col("status") == "only_ours").sort().alias("unmatched_ours"),
        pl.col("their_name")
        .filter(pl.col("status") == "only_theirs")
        .sort()
        .alias("unmatched_theirs"),
        pl.col("their_name").filter(pl.col("status") == "ambiguous").sort().alias("ambiguous"),
        (pl.col("status") == "matched").sum().cast(pl.Int64).alias("n_matched"),
    )
    counts_ours = our.group_by("category").agg(pl.len().cast(pl.Int64).alias("n_ours"))
    counts_theirs = their.group_by("category").agg(pl.len().cast(pl.Int64).alias("n_theirs"))
    figures = []
    for category in order:  # a handful of categories; scipy per category
        part = matched.filter(pl.col("category") == category)
        figures.append(
            {
                "category": category,
                **_agreement(
                    part.get_column("our_rating").to_numpy(),
                    part.get_column("their_rating").to_numpy(),
                ),
            }
        )
    summary = (
        pl.DataFrame({"category": order}, schema={"category": pl.String})
        .join(counts_ours, on="category", how="left")
        .join(counts_theirs, on="category", how="left")
        .join(lists, on="category", how="left")
        .join(
            pl.DataFrame(
                figures,
                schema={"category": pl.String, **{k: pl.Float64 for k in _AGREEMENT}},
            ),
            on="category",
            how="left",
        )
        .with_columns(pl.col("n_ours", "n_theirs", "n_matched").fill_null(0))
        .select([pl.col(c).cast(t) for c, t in SUMMARY_SCHEMA.items()])
    )
    return ComparisonResult(summary=summary, models=models, method=their_method, skipped=skipped)


def compare_leaderboard(
    ours: pl.DataFrame, theirs: pl.DataFrame, aliases: pl.DataFrame | None, board: str | None,
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, ComparisonResult]]:
    """Every method's boards of ``ours`` against ``theirs`` (:func:`compare_boards` per method).

    Parameters
    ----------
    ours
        ``arena.leaderboard`` rows (every method; ``dump_revision`` is carried over).
    theirs, aliases
        As for :func:`compare_boards`.
    board
        The published board's path, recorded on every summary row.

    Returns
    -------
    tuple
        (:data:`EXTERNAL_COMPARISON_SCHEMA` rows, :data:`EXTERNAL_COMPARISON_MODELS_SCHEMA` rows, the
        :class:`ComparisonResult` of each method); both tables empty when ``ours`` is.
    """
    revisions = ours.get_column("dump_revision").drop_nulls().unique().to_list() if "dump_revision" in ours.columns else []
    revision = pl.lit(revisions[0] if len(revisions) == 1 else None, pl.String)
    results = {method: compare_boards(ours.filter(pl.col("method") == method), theirs, aliases)
               for method in ours.get_column("method").unique().sort().to_list()}
    summary = pl.concat(
        [pl.DataFrame(schema=SUMMARY_SCHEMA)]
        + [r.summary.with_columns(method=pl.lit(m)) for m, r in results.items()], how="diagonal_relaxed",
    ).with_columns(dump_revision=revision, board=pl.lit(board, pl.String))
    per_model = pl.concat(
        [pl.DataFrame(schema=COMPARISON_MODELS_SCHEMA)]
        + [r.models.with_columns(method=pl.lit(m)) for m, r in results.items()], how="diagonal_relaxed",
    ).with_columns(dump_revision=revision)
    return (summary.select([pl.col(c).cast(t) for c, t in EXTERNAL_COMPARISON_SCHEMA.items()]),
            per_model.select([pl.col(c).cast(t) for c, t in EXTERNAL_COMPARISON_MODELS_SCHEMA.items()]),
            results)


# ---------------------------------------------------------------------------
# Alignment to a published board's scale (opt-in)
# ---------------------------------------------------------------------------

#: Fewest matched shown models from which a board's shift is estimated; a board with fewer
#: stays on our own scale (and the record says why).
ALIGN_MIN_MODELS = 3

#: The largest magnitude of a shift applied (the published ratings are within ``MAX_ABS_RATING``, ours
#: near the reference rating: a larger or non-finite shift comes from a board out of all proportion).
MAX_ABS_SHIFT = MAX_ABS_RATING

#: How the shift of a board is estimated (recorded with it).
ALIGN_ESTIMATOR = (
    "median over the matched shown models of (published rating - our rating), same category "
    "and method; every rating and interval bound of the board moved by it"
)

#: Columns and types of :func:`alignment_shifts`.
ALIGNMENT_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "method": pl.String(),
    "published_board": pl.String(),  # their key(s) matched, e.g. 'full'; null when none
    "n_matched": pl.Int64(),  # our shown models matched on that board
    "shift": pl.Float64(),  # points added to the board; null: not aligned
    "aligned": pl.Boolean(),
    "reason": pl.String(),  # why not aligned; null when aligned
}


def rating_columns(columns: list[str]) -> list[str]:
    """The columns of a leaderboard frame on the rating scale: ``rating`` and every interval bound."""
    return [c for c in columns if c == "rating" or c.endswith(("_lower", "_upper"))]


def alignment_shifts(
    ours: pl.DataFrame,
    theirs: pl.DataFrame,
    aliases: pl.DataFrame | None = None,
    min_models: int = ALIGN_MIN_MODELS,
) -> pl.DataFrame:
    """Per board of ours, the shift that puts it on a published board's scale.

    The shift of our (category, method) board is the median of ``their rating - our rating``
    over our shown (non-provisional) models matched on their board of the same category and
    method (matching as :func:`compare_boards`, ``their_method="auto"``: their rows of that
    method or of no stated method). So after shifting, the matched shown models' median
    difference to the published board is zero. The median, not the mean, so that a few models
    whose published rating moved since (or that the alias table pairs wrongly) do not drag the
    whole board.

    Parameters
    ----------
    ours
        ``LEADERBOARD_SCHEMA`` rows (``category``, ``method``, ``model``, ``rating``,
        ``provisional``), any number of methods.
    theirs
        :func:`read_published_board` output.
    aliases
        :func:`models.load_aliases` output; default packaged.
    min_models
        Fewest matched shown models to estimate a shift from.

    Returns
    -------
    pl.DataFrame
        :data:`ALIGNMENT_SCHEMA`, one row per (category, method) of ``ours``, in the order of
        ``ours``. A board with fewer than ``min_models`` matched shown models, or whose shift
        would be non-finite or beyond ``±MAX_ABS_SHIFT`` points, is not aligned (``shift``
        null, ``aligned`` false, ``reason`` says why).
    """
    aliases = load_aliases() if aliases is None else aliases
    boards = ours.select("category", "method").unique(maintain_order=True)
    shown = ours.filter(~pl.col("provisional").fill_null(False)) if "provisional" in ours.columns else ours
    source = "source_category" if "source_category" in theirs.columns else "category"
    their_method = pl.col("method") if "method" in theirs.columns else pl.lit(None, pl.String)
    rows = []
    for category, method in boards.iter_rows():  # a few dozen boards
        theirs_here = theirs.filter(
            (pl.col("category") == category) & (their_method.is_null() | (their_method == method))
        )
        keys = sorted(set(theirs_here.get_column(source).to_list()))
        mine = shown.filter((pl.col("category") == category) & (pl.col("method") == method))
        matched = (
            compare_boards(mine, theirs_here, aliases).models.filter(pl.col("status") == "matched")
            if mine.height and theirs_here.height
            else pl.DataFrame(schema=COMPARISON_MODELS_SCHEMA)
        )
        n = matched.height
        row = {
            "category": category,
            "method": method,
            "published_board": ", ".join(keys) or None,
            "n_matched": n,
            "shift": None,
            "aligned": False,
            "reason": None,
        }
        if not keys:
            row["reason"] = f"the published board has no {category} board for method {method}"
        elif not mine.height:
            row["reason"] = "no shown model on our board"
        elif n < min_models:
            row["reason"] = f"{n} matched shown model(s), fewer than the {min_models} needed"
        else:
            diff = matched.get_column("their_rating") - matched.get_column("our_rating")
            shift = float(diff.median())
            if plausible(shift, MAX_ABS_SHIFT):
                row.update(shift=shift, aligned=True)
            else:  # a rating would leave the float range (or the charts'): our own scale, and why
                row["reason"] = (f"the shift {shift:g} is not a plausible shift (a finite number "
                                 f"{range_text(MAX_ABS_SHIFT)} points)")
        rows.append(row)
    return pl.DataFrame(rows, schema=ALIGNMENT_SCHEMA)


def apply_alignment(leaderboard: pl.DataFrame, shifts: pl.DataFrame) -> pl.DataFrame:
    """Move every rating and interval bound of each aligned board by its shift.

    Parameters
    ----------
    leaderboard
        ``LEADERBOARD_SCHEMA`` rows.
    shifts
        :func:`alignment_shifts` output; boards not listed or not aligned are left as they are.

    Returns
    -------
    pl.DataFrame
        ``leaderboard`` with :func:`rating_columns` shifted, same columns and row order. Ranks,
        ``rank_ub`` and counts do not change (a translation keeps every comparison).
    """
    add = shifts.filter(pl.col("aligned")).select("category", "method", pl.col("shift").alias("_shift"))
    moved = leaderboard.join(add, on=["category", "method"], how="left", maintain_order="left")
    return moved.with_columns(
        (pl.col(c) + pl.col("_shift").fill_null(0.0)).alias(c) for c in rating_columns(leaderboard.columns)
    ).select(leaderboard.columns)


def alignment_record(
    shifts: pl.DataFrame,
    board: str,
    board_sha256: str | None = None,
    board_date: str | None = None,
    anchor_rating: float | None = None,
) -> dict[str, Any]:
    """What the publication's settings keep about an alignment (plain, JSON-serialisable).

    Parameters
    ----------
    shifts
        :func:`alignment_shifts` output.
    board
        The published board file as configured (``ARENA_PUBLISHED_BOARD``).
    board_sha256
        Its content's SHA-256 (so a changed file is a changed setting).
    board_date
        The date the published board was taken, as configured (free text), or None.
    anchor_rating
        Our boards' reference rating before the shift (the reference now sits at
        ``anchor_rating + shift``).

    Returns
    -------
    dict
        ``requested`` (true), ``board``, ``board_name`` (file name), ``board_sha256``,
        ``board_date``, ``estimator`` (:data:`ALIGN_ESTIMATOR`), ``min_models``,
        ``anchor_rating``, ``boards``: one entry per (category, method) as :data:`ALIGNMENT_SCHEMA`.
    """
    entries = shifts.to_dicts()
    return {
        "requested": True,
        "board": board,
        "board_name": Path(board).name,
        "board_sha256": board_sha256,
        "board_date": board_date,
        "estimator": ALIGN_ESTIMATOR,
        "min_models": ALIGN_MIN_MODELS,
        "anchor_rating": anchor_rating,
        "boards": entries,
    }


def unaligned_record(board: str | None, reason: str, board_date: str | None = None) -> dict[str, Any]:
    """The record of an alignment that was asked for and could not be made (no board, unreadable)."""
    return {
        "requested": True,
        "board": board,
        "board_name": Path(board).name if board else None,
        "board_date": board_date,
        "estimator": ALIGN_ESTIMATOR,
        "problem": reason,
        "boards": [],
    }


def board_sha256(path: str | Path) -> str:
    """SHA-256 of a published board file's bytes (recorded with an alignment)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
