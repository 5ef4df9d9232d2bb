"""Automated benchmark scores: read (long, wide, Open LLM Leaderboard), matched to our models, compared.

Three layouts are read, from CSV or parquet (the layout is told by the header):

* **long**: columns ``model``, ``benchmark``, ``score`` (any others, e.g. ``note``, ignored);
* **wide**: ``model`` plus one column per benchmark (every other column is a benchmark; an empty
  cell is "no score");
* **Open LLM Leaderboard** (the ``open-llm-leaderboard/contents`` dataset, v2): one row per
  evaluation, the Hub repo in ``fullname`` and the normalized scores in ``IFEval``, ``BBH``,
  ``MATH Lvl 5``, ``GPQA``, ``MUSR``, ``MMLU-PRO`` and ``Average ⬆️`` (:data:`OLL_BENCHMARKS`);
  its other columns (``eval_name``, ``Precision``, the ``... Raw`` fractions, ...) are ignored.

A location is a local file, or a Hub dataset (``org/name`` when no such local path exists, or
``hf://datasets/org/name[@revision]``) whose parquet files are fetched with huggingface_hub
(:func:`arena_pipeline.core.ingest.hub.download_dump`, honouring ``HF_ENDPOINT``) and read as the Open
LLM Leaderboard layout.

A file that cannot be read raises :class:`BenchmarkFormatError` naming the file and the line
(CSV: the physical line, the header being line 1; parquet: the 1-based row); so does a score that is
not a finite number within ``±MAX_ABS_SCORE`` (1e6), the range the report's charts can draw. Model
names go through :func:`arena_pipeline.core.dataset.models.canonical_name_expr` (normalization + alias table), as
every external board does; a name that several rows of one benchmark share after that, or a row
without a score, is kept and reported, never silently used or dropped.

Agreement (:func:`benchmark_agreement`) is computed per (category, method, benchmark) over the
models both sides have: Spearman and Kendall tau-b (``scipy.stats``) with a seeded percentile
bootstrap over models, and the models whose two ranks differ most. Under
:data:`MIN_MODELS` matched models no coefficient is given and the row says why.

``scipy.stats`` is imported by the two agreement functions that use it, not at the top: the CLI and
the report read this module's schemas (through ``core.readside.derived`` and ``presentation.read``) and
must start without loading scipy (~0.5 s).
"""

from __future__ import annotations

import csv
import hashlib
import math
import re
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from arena_pipeline.constants import CATEGORIES
from arena_pipeline.core.dataset.models import canonical_name_expr, load_aliases, normalize_name_expr
from arena_pipeline.core.labels import PRIMARY_METHOD
from arena_pipeline.core.validation.plausible import MAX_ABS_VALUE, implausible_expr, range_text

#: The Open LLM Leaderboard's model column (the Hub repo id, e.g. ``meta-llama/Llama-3.3-70B-Instruct``).
OLL_MODEL_COLUMN = "fullname"
#: Its score columns (normalized scores, 0-100, as the leaderboard shows them) -> benchmark name.
OLL_BENCHMARKS: dict[str, str] = {
    "IFEval": "IFEval",
    "BBH": "BBH",
    "MATH Lvl 5": "MATH Lvl 5",
    "GPQA": "GPQA",
    "MUSR": "MUSR",
    "MMLU-PRO": "MMLU-PRO",
    "Average \u2b06\ufe0f": "Average",
}

Layout = Literal["long", "wide", "open_llm_leaderboard"]
LAYOUTS: tuple[str, ...] = ("long", "wide", "open_llm_leaderboard")

#: The largest magnitude a score may have (``core.validation.plausible.MAX_ABS_VALUE``, the bound of a
#: published board's ratings too): a score outside ``[-MAX_ABS_SCORE, MAX_ABS_SCORE]`` makes the
#: file invalid. Benchmark scales (fractions, percentages, Elo-style ratings, counts of problems) stay far
#: below it, and every score within it can be drawn: the report's scatter widens a range of equal scores
#: by a step of 2e-10, which is lost in rounding above ~2e6 (floats there lie more than 4e-10 apart: an axis
#: of zero length), and scores near 1.7e308 overflow its arithmetic. Rescale a file in other units.
MAX_ABS_SCORE = MAX_ABS_VALUE
#: Fewer matched models than this give no coefficient.
MIN_MODELS = 5
#: Bootstrap resamples over models per (category, method, benchmark), and the base seed.
BOOTSTRAP_ROUNDS = 1000
BOOTSTRAP_SEED = 0
#: How many most-disagreeing models each agreement row lists.
TOP_DISAGREEMENTS = 3

#: Columns and types of :func:`read_benchmarks` (what was read, before matching).
READ_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),  # their name, unchanged
    "canonical": pl.String(),
    "benchmark": pl.String(),
    "score": pl.Float64(),  # null: the file has no score there
    "source": pl.String(),  # the file (or hf://datasets/<repo>@<sha>/<path>)
    "line": pl.Int64(),  # CSV line (header = 1) or parquet row (1-based)
}

#: Columns and types of :func:`match_scores` (``arena.benchmark_scores``).
BENCHMARK_SCORES_SCHEMA: dict[str, pl.DataType] = {
    **READ_SCHEMA,
    "matched": pl.Boolean(),
    "reason": pl.String(),
}

DISAGREEMENT_TYPE = pl.List(
    pl.Struct(
        {
            "model": pl.String(),
            "our_rank": pl.Int64(),
            "benchmark_rank": pl.Int64(),
            "rank_difference": pl.Int64(),
        }
    )
)

#: Columns and types of :func:`benchmark_agreement` (``arena.benchmark_agreement``).
BENCHMARK_AGREEMENT_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "method": pl.String(),
    "benchmark": pl.String(),
    "n_matched": pl.Int64(),
    "small_set": pl.Boolean(),
    "note": pl.String(),
    "spearman": pl.Float64(),
    "spearman_lower": pl.Float64(),
    "spearman_upper": pl.Float64(),
    "kendall": pl.Float64(),
    "kendall_lower": pl.Float64(),
    "kendall_upper": pl.Float64(),
    "bootstrap_rounds": pl.Int64(),
    "disagreements": DISAGREEMENT_TYPE,
}

#: Columns and types of ``BenchmarkPanel.points``.
PANEL_POINTS_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "method": pl.String(),
    "benchmark": pl.String(),
    "model": pl.String(),
    "rating": pl.Float64(),
    "ci_lower": pl.Float64(),
    "ci_upper": pl.Float64(),
    "score": pl.Float64(),
    "our_rank": pl.Int64(),
    "benchmark_rank": pl.Int64(),
}

_HUB_PREFIX = "hf://datasets/"
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


class BenchmarkFormatError(ValueError):
    """A benchmark file that cannot be read; the message names the file and, when known, the line."""

    def __init__(self, path: str | Path, problem: str, line: int | None = None,
                 unit: str = "line") -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{path}: {unit} {line}: " if line is not None else f"{path}: "
        super().__init__(where + problem)


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


def _read_csv_rows(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """Header, rows and their physical line numbers; ragged rows and bad quoting raise with the line.

    Read with the standard ``csv`` module rather than Polars so that every problem has its line
    (a benchmark table is small: thousands of rows at most).
    """
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle, strict=True)
            try:
                header = next(reader, None)
                if header is None or not any(c.strip() for c in header):
                    raise BenchmarkFormatError(path, "the file is empty (no header)")
                rows, lines = [], []
                for row in reader:
                    if not any(c.strip() for c in row):
                        continue  # a blank line
                    if len(row) != len(header):
                        raise BenchmarkFormatError(
                            path, f"{len(row)} fields, but the header has {len(header)}",
                            reader.line_num)
                    rows.append(row)
                    lines.append(reader.line_num)
            except csv.Error as exc:
                raise BenchmarkFormatError(path, f"malformed CSV ({exc})", reader.line_num) from exc
    except UnicodeDecodeError as exc:
        raise BenchmarkFormatError(path, f"not UTF-8 text ({exc.reason})") from exc
    return [c.strip() for c in header], rows, lines


def _read_table(path: Path) -> tuple[pl.DataFrame, str]:
    """The file as a frame with a ``_line`` column, and the unit of ``_line`` ('line' or 'row')."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        header, rows, lines = _read_csv_rows(path)
        blank = [i + 1 for i, c in enumerate(header) if not c]
        if blank:
            raise BenchmarkFormatError(path, f"empty column name(s) at position(s) {blank}", 1)
        repeated = sorted({c for c in header if header.count(c) > 1})
        if repeated:
            raise BenchmarkFormatError(path, f"column(s) {repeated} appear more than once", 1)
        frame = pl.DataFrame(rows, schema={c: pl.String for c in header}, orient="row")
        return frame.with_columns(pl.Series("_line", lines, dtype=pl.Int64)), "line"
    if suffix == ".parquet":
        try:
            frame = pl.read_parquet(path)
        except Exception as exc:  # polars raises several types for a damaged file
            raise BenchmarkFormatError(path, f"not a readable parquet file ({exc})") from exc
        indexed = frame.with_row_index("_line", offset=1)
        return indexed.with_columns(pl.col("_line").cast(pl.Int64)), "row"
    raise BenchmarkFormatError(path, f"unknown file type {suffix!r}: expected .csv or .parquet")


def _detect_layout(columns: list[str], path: Path) -> Layout:
    lower = {c.lower() for c in columns}
    if OLL_MODEL_COLUMN in lower and any(c in columns for c in OLL_BENCHMARKS):
        return "open_llm_leaderboard"
    if {"model", "benchmark", "score"} <= lower:
        return "long"
    if "model" in lower and len(lower - {"model", "_line"}) >= 1:
        return "wide"
    raise BenchmarkFormatError(
        path,
        "cannot tell the layout: expected 'model, benchmark, score' (long), 'model' plus one column "
        f"per benchmark (wide), or the Open LLM Leaderboard's '{OLL_MODEL_COLUMN}' with "
        f"{list(OLL_BENCHMARKS)}; got columns {[c for c in columns if c != '_line']}",
        1,
    )


def _column(frame: pl.DataFrame, name: str) -> str:
    """The frame's column named ``name`` case-insensitively."""
    return next(c for c in frame.columns if c.lower() == name)


def _to_long(frame: pl.DataFrame, layout: Layout) -> pl.DataFrame:
    """(model, benchmark, value, _line): one row per model and benchmark, value as text or number."""
    if layout == "long":
        return frame.select(
            pl.col(_column(frame, "model")).cast(pl.String).alias("model"),
            pl.col(_column(frame, "benchmark")).cast(pl.String).str.strip_chars().alias("benchmark"),
            pl.col(_column(frame, "score")).alias("value"),
            "_line",
        )
    if layout == "wide":
        model = _column(frame, "model")
        benchmarks = [c for c in frame.columns if c not in (model, "_line")]
        mapping = {c: c for c in benchmarks}
    else:
        model = _column(frame, OLL_MODEL_COLUMN)
        mapping = {c: OLL_BENCHMARKS[c] for c in frame.columns if c in OLL_BENCHMARKS}
    # one dtype for every score column before unpivoting (a parquet may mix ints and floats)
    numeric = all(frame.schema[c].is_numeric() for c in mapping)
    value_type = pl.Float64 if numeric else pl.String
    return (
        frame.select(
            pl.col(model).cast(pl.String).alias("model"),
            "_line",
            *[pl.col(c).cast(value_type).alias(name) for c, name in mapping.items()],
        )
        .unpivot(index=["model", "_line"], variable_name="benchmark", value_name="value")
        .select("model", "benchmark", "value", "_line")
    )


def _check_scores(long: pl.DataFrame, path: Path, unit: str, layout: Layout) -> pl.DataFrame:
    """Validate names and scores; return (model, benchmark, score, line)."""
    def first(mask: pl.Expr) -> dict | None:
        bad = long.filter(mask).sort("_line")
        return bad.row(0, named=True) if bad.height else None

    value = pl.col("value")
    text = value.cast(pl.String).str.strip_chars()
    present = value.is_not_null() & (text.str.len_chars() > 0)
    if long.schema["value"] != pl.String:
        # a parquet's NaN is how pandas writes a missing number: no score, like an empty cell
        present = present & ~value.cast(pl.Float64).is_nan()
        number = value.cast(pl.Float64, strict=False)
    else:
        number = text.cast(pl.Float64, strict=False)

    row = first(present & (pl.col("model").is_null() | (pl.col("model").str.strip_chars() == "")))
    if row:
        raise BenchmarkFormatError(path, "empty model name", row["_line"], unit)
    if layout == "long":
        row = first(pl.col("benchmark").is_null() | (pl.col("benchmark") == ""))
        if row:
            raise BenchmarkFormatError(path, "empty benchmark name", row["_line"], unit)
    row = first(present & (number.is_null() | ~number.is_finite()))
    if row:
        raise BenchmarkFormatError(
            path, f"score for {row['benchmark']!r} must be a finite number, got {row['value']!r}",
            row["_line"], unit)
    row = first(present & implausible_expr(number, MAX_ABS_SCORE))
    if row:
        raise BenchmarkFormatError(
            path, f"score for {row['benchmark']!r} must be {range_text(MAX_ABS_SCORE)}, got {row['value']!r}",
            row["_line"], unit)
    named = pl.col("model").is_not_null() & (pl.col("model").str.strip_chars() != "")
    checked = long.filter(named).select(
        "model", "benchmark", pl.when(present).then(number).alias("score"),
        pl.col("_line").alias("line"))
    if layout != "open_llm_leaderboard":
        # one file naming one model twice for one benchmark is a mistake, not a second opinion
        dupes = checked.filter(pl.struct("model", "benchmark").is_duplicated()).sort("line")
        if dupes.height:
            row = dupes.row(0, named=True)
            lines = dupes.filter(pl.col("model") == row["model"],
                                 pl.col("benchmark") == row["benchmark"])
            raise BenchmarkFormatError(
                path, f"model {row['model']!r} has more than one {row['benchmark']!r} score "
                f"({unit}s {lines.get_column('line').to_list()})", lines.get_column("line")[1], unit)
    return checked


def read_benchmark_file(path: str | Path, aliases: pl.DataFrame | None = None,
                        layout: Layout | None = None, source: str | None = None) -> pl.DataFrame:
    """Read one local benchmark file (CSV or parquet) in any of the three layouts.

    Parameters
    ----------
    path
        The file (``.csv`` or ``.parquet``).
    aliases
        :func:`arena_pipeline.core.dataset.models.load_aliases` output; default the packaged table.
    layout
        ``"long"``, ``"wide"`` or ``"open_llm_leaderboard"``; default told from the columns (the
        Open LLM Leaderboard's ``fullname`` + score columns, else ``model, benchmark, score``,
        else ``model`` + benchmark columns).
    source
        What to record as the ``source`` column (default the path as given).

    Returns
    -------
    pl.DataFrame
        :data:`READ_SCHEMA`: one row per (row of the file, benchmark), in file order; ``score``
        null where the file has none (an empty wide cell, an Open LLM Leaderboard null).

    Raises
    ------
    BenchmarkFormatError
        Unreadable or ragged CSV, non-UTF-8 text, unreadable parquet, an unknown layout, an empty
        model or benchmark name, a score that is not a finite number or is larger in magnitude than
        :data:`MAX_ABS_SCORE`, a model scored twice for one benchmark (long and wide layouts); the
        message gives the file and line (or row).
    FileNotFoundError
        ``path`` does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"benchmark file {path} does not exist")
    frame, unit = _read_table(path)
    chosen = layout or _detect_layout(frame.columns, path)
    if chosen not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {chosen!r}")
    if frame.height == 0:
        raise BenchmarkFormatError(path, "no rows under the header")
    long = _to_long(frame, chosen)
    checked = _check_scores(long, path, unit, chosen)
    aliases = load_aliases() if aliases is None else aliases
    return checked.select(
        "model",
        canonical_name_expr("model", aliases).alias("canonical"),
        "benchmark",
        "score",
        pl.lit(source or str(path)).alias("source"),
        "line",
    ).sort("line", maintain_order=True).select([pl.col(c).cast(t) for c, t in READ_SCHEMA.items()])


def _parquet_rows(path: Path) -> int:
    """The ``verify`` of a downloaded file: readable parquet; its row count."""
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise BenchmarkFormatError(
            path, f"not a readable parquet file ({type(exc).__name__}: {exc})") from exc


def hub_location(location: str) -> tuple[str, str | None] | None:
    """``(repo_id, revision)`` when ``location`` names a Hub dataset, else None (a local path).

    ``hf://datasets/org/name[@revision]`` always names the Hub; a bare ``org/name`` does when no
    such local path exists and it has no file suffix.
    """
    if location.startswith(_HUB_PREFIX):
        repo_id, _, revision = location[len(_HUB_PREFIX):].partition("@")
        if not _HUB_ID.fullmatch(repo_id) or ".." in repo_id or ("@" in location and not revision):
            raise ValueError(
                f"{location!r}: a Hub dataset is written {_HUB_PREFIX}<org>/<name>[@<revision>]")
        return repo_id, revision or None
    if Path(location).expanduser().exists():
        return None
    if _HUB_ID.fullmatch(location) and not Path(location).suffix and ".." not in location:
        return location, None
    return None


def read_benchmarks(location: str | Path, aliases: pl.DataFrame | None = None, *,
                    cache_dir: str | Path = "data/cache", endpoint: str | None = None,
                    token: str | None = None, layout: Layout | None = None) -> pl.DataFrame:
    """Benchmark scores from a local file or a Hub dataset (see :func:`hub_location`).

    A Hub dataset's parquet files (``data/train-*.parquet``, else any ``*.parquet``) are fetched
    into ``cache_dir`` by :func:`arena_pipeline.core.ingest.hub.download_dump` (``endpoint`` None: the
    ``HF_ENDPOINT`` huggingface_hub reads; a cached commit needs no request) and read as the
    Open LLM Leaderboard layout unless ``layout`` says otherwise; ``source`` is
    ``hf://datasets/<repo>@<sha>/<path>``. Returns :data:`READ_SCHEMA`.

    Raises :class:`BenchmarkFormatError`, ``FileNotFoundError`` (a missing local file) and the
    Hub errors of :mod:`arena_pipeline.core.ingest.hub` (``HubNotFound``, ``HubUnavailable``).
    """
    hub_id = hub_location(str(location))
    if hub_id is None:
        return read_benchmark_file(location, aliases, layout)
    from arena_pipeline.core.ingest import hub  # huggingface_hub only when the Hub is used

    repo_id, revision = hub_id
    manifest = hub.download_dump(repo_id, revision or "main", cache_dir, endpoint=endpoint, token=token,
                                 verify=_parquet_rows)
    aliases = load_aliases() if aliases is None else aliases
    frames = [
        read_benchmark_file(f.path, aliases, layout or "open_llm_leaderboard",
                            source=f"{_HUB_PREFIX}{repo_id}@{manifest.revision}/{f.name}")
        for f in manifest.files
    ]
    return pl.concat(frames)


def source_record(location: str, scores: pl.DataFrame) -> dict[str, object]:
    """What a comparison was made from, for its versions' settings: the location as configured and
    each file read (``source`` of :func:`read_benchmarks`) with the sha256 of its bytes when it is a
    local file (a Hub file's source names its commit already)."""
    sources = scores.get_column("source").drop_nulls().unique(maintain_order=True).to_list()
    return {"location": location,
            "files": {s: hashlib.sha256(Path(s).read_bytes()).hexdigest() if Path(s).is_file() else None
                      for s in sources}}


# ---------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------


def match_scores(scores: pl.DataFrame, our_models: list[str] | pl.Series) -> pl.DataFrame:
    """Mark each read score as matched to one of our models or not, with the reason.

    Parameters
    ----------
    scores
        :func:`read_benchmarks` output.
    our_models
        Canonical names on our leaderboard (any category): the one the scores' publication shows.

    Returns
    -------
    pl.DataFrame
        :data:`BENCHMARK_SCORES_SCHEMA`, in the order read. ``reason`` is one of: ``matched by
        name``, ``matched through the alias table`` (its normalized name is not the canonical
        one), ``no score``, ``ambiguous: N rows name <canonical> for this benchmark (lines ...)``
        (none of them is used), ``not on our published leaderboard``.
    """
    ours = pl.Series("canonical", list(our_models), dtype=pl.String).unique().to_list()
    scored = pl.col("score").is_not_null()
    group = ["canonical", "benchmark"]
    marked = scores.with_columns(
        pl.col("line").filter(scored).over(group, mapping_strategy="join").alias("_lines"),
    ).with_columns(
        pl.when(~scored).then(pl.lit("no score"))
        .when(pl.col("_lines").list.len() > 1).then(
            pl.format("ambiguous: {} rows name {} for this benchmark (lines {})",
                      pl.col("_lines").list.len(), pl.col("canonical"),
                      pl.col("_lines").list.sort().cast(pl.List(pl.String)).list.join(", ")))
        .when(~pl.col("canonical").is_in(ours)).then(pl.lit("not on our published leaderboard"))
        .when(normalize_name_expr("model") != pl.col("canonical"))
        .then(pl.lit("matched through the alias table"))
        .otherwise(pl.lit("matched by name"))
        .alias("reason")
    )
    return marked.with_columns(
        pl.col("reason").str.starts_with("matched").alias("matched"),
    ).select([pl.col(c).cast(t) for c, t in BENCHMARK_SCORES_SCHEMA.items()])


# ---------------------------------------------------------------------------
# Agreement
# ---------------------------------------------------------------------------


def _rowwise_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    den = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (a * b).sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)


def resampled_coefficients(x: np.ndarray, y: np.ndarray,
                           index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spearman and Kendall tau-b of ``(x[i], y[i])`` for each row ``i`` of ``index``, vectorised.

    Spearman is the Pearson correlation of average ranks (``scipy.stats.rankdata``); Kendall
    tau-b is ``sum(sign dx * sign dy) / sqrt(sum(sign dx ** 2) * sum(sign dy ** 2))`` over all
    ordered pairs, which is ``scipy.stats.kendalltau``'s tau-b (ties, including a model drawn
    twice, count as in scipy). A resample with a constant side gives NaN.
    """
    from scipy import stats  # only the agreement loads scipy (see the module's docstring)

    xs, ys = x[index], y[index]
    spearman = _rowwise_pearson(stats.rankdata(xs, axis=1), stats.rankdata(ys, axis=1))
    n = index.shape[1]
    chunk = max(1, int(4_000_000 // max(n * n, 1)))  # bounded memory for large matched sets
    kendall = np.empty(index.shape[0])
    for start in range(0, index.shape[0], chunk):
        sx = np.sign(xs[start:start + chunk, :, None] - xs[start:start + chunk, None, :])
        sy = np.sign(ys[start:start + chunk, :, None] - ys[start:start + chunk, None, :])
        den = np.sqrt((sx * sx).sum(axis=(1, 2)) * (sy * sy).sum(axis=(1, 2)))
        with np.errstate(invalid="ignore", divide="ignore"):
            kendall[start:start + chunk] = np.where(
                den > 0, (sx * sy).sum(axis=(1, 2)) / np.where(den > 0, den, 1.0), np.nan)
    return spearman, kendall


def _finite(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _interval(values: np.ndarray) -> tuple[float | None, float | None]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None, None
    lower, upper = np.percentile(finite, [2.5, 97.5])
    return float(lower), float(upper)


def _coefficients(x: np.ndarray, y: np.ndarray, rounds: int, rng: np.random.Generator) -> dict:
    from scipy import stats  # only the agreement loads scipy (see the module's docstring)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant side: NaN, reported as null
        out = {
            "spearman": _finite(stats.spearmanr(x, y).statistic),
            "kendall": _finite(stats.kendalltau(x, y).statistic),
        }
    index = rng.integers(0, len(x), size=(rounds, len(x)))
    spearman, kendall = resampled_coefficients(x, y, index)
    out["spearman_lower"], out["spearman_upper"] = _interval(spearman)
    out["kendall_lower"], out["kendall_upper"] = _interval(kendall)
    return out


def matched_points(leaderboard: pl.DataFrame, scores: pl.DataFrame) -> pl.DataFrame:
    """Our rating beside the benchmark score of each model both have, per (category, method, benchmark).

    Parameters
    ----------
    leaderboard
        ``arena.leaderboard`` rows (``category``, ``method``, ``model``, ``rating``, ``ci_lower``,
        ``ci_upper``).
    scores
        :func:`match_scores` output (only ``matched`` rows are used).

    Returns
    -------
    pl.DataFrame
        :data:`PANEL_POINTS_SCHEMA`; ranks among the matched models of the group, 1 = best
        (``min`` ranking on ties), ours by rating, theirs by score, both descending.
    """
    used = scores.filter(pl.col("matched")).select(
        pl.col("canonical").alias("model"), "benchmark", "score")
    group = ["category", "method", "benchmark"]
    return (
        leaderboard.select("category", "method", "model", "rating", "ci_lower", "ci_upper")
        .join(used, on="model", how="inner")
        .with_columns(
            pl.col("rating").rank("min", descending=True).over(group).cast(pl.Int64).alias("our_rank"),
            pl.col("score").rank("min", descending=True).over(group).cast(pl.Int64)
            .alias("benchmark_rank"),
        )
        .select([pl.col(c).cast(t) for c, t in PANEL_POINTS_SCHEMA.items()])
        .sort(*group, "our_rank", "model")
    )


def _order(frame: pl.DataFrame, benchmarks: list[str]) -> pl.DataFrame:
    """Categories in ``constants.CATEGORIES`` order (others after, alphabetically), then method,
    then benchmarks in the order read."""
    categories = frame.get_column("category").unique().to_list()
    order = [c for c in CATEGORIES if c in categories] + sorted(set(categories) - set(CATEGORIES))
    return frame.sort(
        pl.col("category").replace_strict({c: i for i, c in enumerate(order)}, return_dtype=pl.Int32),
        "method",
        pl.col("benchmark").replace_strict({b: i for i, b in enumerate(benchmarks)},
                                           return_dtype=pl.Int32),
    )


def benchmark_agreement(leaderboard: pl.DataFrame, scores: pl.DataFrame, *, rounds: int = BOOTSTRAP_ROUNDS,
                        seed: int = BOOTSTRAP_SEED, min_models: int = MIN_MODELS,
                        top: int = TOP_DISAGREEMENTS) -> pl.DataFrame:
    """Agreement of each published board with each benchmark, over the models both have.

    Parameters
    ----------
    leaderboard
        ``arena.leaderboard`` rows (every category and method present gets rows).
    scores
        :func:`match_scores` output; every benchmark in it gets rows, even with no match.
    rounds, seed
        Bootstrap resamples of the matched models, and the base seed; each row's stream is
        seeded by ``seed`` and the CRC32 of ``category|method|benchmark``, so a row's interval
        does not depend on which other rows are computed.
    min_models
        Fewer matched models give no coefficient (``small_set`` true, ``note`` says why).
    top
        How many models to list in ``disagreements``.

    Returns
    -------
    pl.DataFrame
        :data:`BENCHMARK_AGREEMENT_SCHEMA`, one row per (category, method, benchmark).
        ``spearman``/``kendall`` are ``scipy.stats.spearmanr``/``kendalltau`` (tau-b) of our
        ratings against the scores; ``*_lower``/``*_upper`` the 2.5 and 97.5 percentiles of
        the statistic over ``rounds`` resamples of the matched models with replacement
        (resamples where one side is constant are left out); null when a side is constant.
        ``disagreements``: the ``top`` models with the largest non-zero
        ``|our_rank - benchmark_rank|`` (ranks among the matched models, 1 = best; ties broken
        by name), listed whenever two or more models match (empty when the orders agree).
    """
    points = matched_points(leaderboard, scores)
    benchmarks = scores.get_column("benchmark").unique(maintain_order=True).to_list()
    groups = leaderboard.select("category", "method").unique().join(
        pl.DataFrame({"benchmark": benchmarks}, schema={"benchmark": pl.String}), how="cross")
    rows = []
    for category, method, benchmark in _order(groups, benchmarks).iter_rows():  # tens of groups
        part = points.filter((pl.col("category") == category) & (pl.col("method") == method)
                             & (pl.col("benchmark") == benchmark))
        n = part.height
        row: dict = {"category": category, "method": method, "benchmark": benchmark, "n_matched": n,
                     "small_set": n < min_models, "bootstrap_rounds": None, "disagreements": []}
        if n < min_models:
            row["note"] = ("no matched model: no coefficient" if n == 0 else
                           f"fewer than {min_models} matched models ({n}): no coefficient")
        else:
            key = zlib.crc32(f"{category}|{method}|{benchmark}".encode())
            rng = np.random.default_rng([seed, key])
            row.update(_coefficients(part.get_column("rating").to_numpy(),
                                     part.get_column("score").to_numpy(), rounds, rng))
            row["bootstrap_rounds"] = rounds
            if row["spearman"] is None:
                row["note"] = "a side is constant over the matched models: no coefficient"
        if n >= 2:
            row["disagreements"] = (
                part.with_columns(
                    (pl.col("our_rank") - pl.col("benchmark_rank")).alias("rank_difference"))
                .filter(pl.col("rank_difference") != 0)
                .sort(pl.col("rank_difference").abs(), "model", descending=[True, False])
                .head(top)
                .select("model", "our_rank", "benchmark_rank", "rank_difference")
                .to_dicts()
            )
        rows.append(row)
    return pl.DataFrame(rows, schema=BENCHMARK_AGREEMENT_SCHEMA)


@dataclass(frozen=True)
class BenchmarkPanel:
    """The report panel's data (see :func:`benchmark_panel`).

    Attributes
    ----------
    points
        :data:`PANEL_POINTS_SCHEMA`: per (category, method, benchmark), each matched model's
        rating with its interval and its benchmark score (a scatter with error bars).
    agreement
        :data:`BENCHMARK_AGREEMENT_SCHEMA` rows: the figures per category (small sets included,
        with their ``note``).
    """

    points: pl.DataFrame
    agreement: pl.DataFrame


def benchmark_panel(leaderboard: pl.DataFrame, scores: pl.DataFrame,
                    agreement: pl.DataFrame | None = None, method: str | None = PRIMARY_METHOD) -> BenchmarkPanel:
    """The data of the report's benchmark panel, as Polars frames (no HTML here).

    Parameters
    ----------
    leaderboard
        ``arena.leaderboard`` (the live publication).
    scores
        ``arena.benchmark_scores`` (or :func:`match_scores` output).
    agreement
        ``arena.benchmark_agreement``; default computed with :func:`benchmark_agreement`.
    method
        Keep this method's rows only (None: every method).

    Returns
    -------
    BenchmarkPanel
        ``points`` sorted by category, method, benchmark, our rank; ``agreement`` in table order.
    """
    agreement = benchmark_agreement(leaderboard, scores) if agreement is None else agreement
    points = matched_points(leaderboard, scores)
    if method is not None:
        points = points.filter(pl.col("method") == method)
        agreement = agreement.filter(pl.col("method") == method)
    return BenchmarkPanel(points=points, agreement=agreement)
