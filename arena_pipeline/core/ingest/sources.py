"""Reading a dump: locating its shards, verifying them against the dataset card, parsing CSV exports."""

from __future__ import annotations

import ast
import codecs
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from arena_pipeline.core.dataset.adapters import (
    ARENA_140K,
    Adapter,
    UnknownFormatError,
    choose_adapter,
    csv_schema,
    nearest_adapter,
)
from arena_pipeline.core.dataset.schema import DATASET_ARROW_SCHEMA, NESTED_COLUMNS, QUARANTINE_SCHEMA


class SourceError(ValueError):
    """A whole file of the dump cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class SourceSpec:
    """Where a dump comes from: ``kind`` is 'hub', 'parquet_dir', 'parquet_file' or 'csv'.

    For the Hub, ``revision`` is the one pinned in ``hf://datasets/org/name@revision`` (else None)
    and ``explicit`` says whether the ``hf://`` form was used (a bare ``org/name`` is a Hub id only
    because no local path of that name exists).
    """

    kind: str
    location: str
    revision: str | None = None
    explicit: bool = False


HUB_PREFIX = "hf://datasets/"
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
#: suffixes that make a missing source a file path rather than a Hub id
DATA_SUFFIXES = frozenset({".parquet", ".csv", ".json", ".jsonl", ".arrow", ".tsv", ".txt", ".gz",
                           ".zip", ".zst"})


def dump_name(kind: str, location: str) -> str:
    """The name a dump's rows carry in ``dump``: a Hub dataset's id, a local file or folder's name."""
    return location if kind == "hub" else Path(location).name


def parse_source(source: str) -> SourceSpec:
    """Classify ``ARENA_SOURCE``: an existing path (dir, .parquet, .csv), or a Hub dataset id.

    ``hf://datasets/org/name[@revision]`` always names the Hub. Otherwise an existing path is read
    locally; a missing one that looks like a path (starts with ``.``, ``~`` or ``/``, has more than
    one separator or a backslash, a data-file suffix, or a first component that exists here, as in
    ``data/mydump``) is an error saying that no such local path exists; a bare ``org/name`` is
    tried as a Hub id (see :func:`hub_not_found_note`).

    Raises
    ------
    SourceError
        A missing path, an unsupported file type, or a malformed ``hf://`` id.
    """
    if source.startswith("hf://"):
        repo_id, _, revision = source[len(HUB_PREFIX):].partition("@")
        if not source.startswith(HUB_PREFIX) or not _HUB_ID.fullmatch(repo_id) or ".." in repo_id \
                or (revision == "" and "@" in source):
            raise SourceError(f"ARENA_SOURCE {source!r}: a Hub source is written "
                              f"{HUB_PREFIX}<org>/<name> or {HUB_PREFIX}<org>/<name>@<revision>")
        return SourceSpec("hub", repo_id, revision or None, explicit=True)
    path = Path(source).expanduser()
    if path.is_dir():
        return SourceSpec("parquet_dir", str(path.resolve()))
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix == ".parquet":
            return SourceSpec("parquet_file", str(path.resolve()))
        if suffix == ".csv":
            return SourceSpec("csv", str(path.resolve()))
        raise SourceError(f"{path}: unsupported source file type {suffix!r} (expected .parquet or .csv)")
    parts = source.split("/")
    looks_like_path = (
        source.startswith((".", "~", "/")) or "\\" in source or len(parts) != 2
        or path.suffix.lower() in DATA_SUFFIXES or Path(parts[0]).exists()
    )
    if looks_like_path or not _HUB_ID.fullmatch(source):
        found = next((p for p in path.absolute().parents if p.exists()), None)
        raise SourceError(
            f"ARENA_SOURCE {source!r}: no such local path ({path.absolute()} does not exist"
            + (f"; the nearest existing folder is {found}" if found else "") + "). "
            f"A Hub dataset is written <org>/<name> or {HUB_PREFIX}<org>/<name>."
        )
    return SourceSpec("hub", source)


def hub_not_found_note(spec: SourceSpec) -> str:
    """What to add when the Hub has no dataset named by a bare ``org/name`` ARENA_SOURCE."""
    if spec.kind != "hub" or spec.explicit:
        return ""
    return (f"; ARENA_SOURCE {spec.location!r} was tried as a Hub id because no local path of "
            f"that name exists either ({Path(spec.location).absolute()})")


def local_shards(directory: Path) -> list[Path]:
    """The parquet shards of a local dump: ``data/train-*.parquet`` if present, else any ``*.parquet``."""
    directory = Path(directory)
    # sorted by the name each file gets in source_file, so load order = duplicate-ranking order
    by_name = lambda p: p.relative_to(directory).as_posix()  # noqa: E731
    shards = sorted(directory.glob("data/train-*.parquet"), key=by_name)
    if not shards:
        shards = sorted((p for p in directory.rglob("*.parquet") if p.is_file()), key=by_name)
    if not shards:
        raise SourceError(f"{directory}: no parquet files found (looked for data/train-*.parquet and **/*.parquet)")
    return shards


# ---------------------------------------------------------------------------
# Schema verification
# ---------------------------------------------------------------------------

@dataclass
class SchemaDiff:
    """Differences between a file's Arrow schema and the dataset card's."""

    missing: list[str] = field(default_factory=list)  # "path (expected TYPE)"
    mismatched: list[str] = field(default_factory=list)  # "path: expected X, found Y"
    extra: list[str] = field(default_factory=list)  # "path (TYPE)": new optional fields, reported only

    @property
    def fatal(self) -> bool:
        return bool(self.missing or self.mismatched)


def _family(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):  # an encoding of its values (the loader decodes it)
        return _family(t.value_type)
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return "list"
    if pa.types.is_null(t):
        return "null"
    return str(t)


def _compare(expected: pa.DataType, actual: pa.DataType, path: str, diff: SchemaDiff) -> None:
    while pa.types.is_dictionary(actual):
        actual = actual.value_type
    fe, fa = _family(expected), _family(actual)
    # an all-null scalar column (e.g. a CSV without values) carries no type to check; an all-null list
    # or struct has none of the fields the flattening reads
    if fa == "null" and fe not in ("struct", "list"):
        return
    if fe != fa:
        diff.mismatched.append(f"{path}: expected {expected}, found {actual}")
        return
    if fe == "struct":
        names = {actual.field(i).name: actual.field(i).type for i in range(actual.num_fields)}
        for i in range(expected.num_fields):
            f = expected.field(i)
            if f.name not in names:
                diff.missing.append(f"{path}.{f.name} (expected {f.type})")
            else:
                _compare(f.type, names.pop(f.name), f"{path}.{f.name}", diff)
        diff.extra += [f"{path}.{n} ({t})" for n, t in names.items()]
    elif fe == "list":
        _compare(expected.value_type, actual.value_type, f"{path}[]", diff)


def compare_schema(actual: pa.Schema, expected: pa.Schema = DATASET_ARROW_SCHEMA) -> SchemaDiff:
    """Compare field by field (recursively); integer widths, string kinds and timestamp units are compatible."""
    diff = SchemaDiff()
    present = {f.name: f.type for f in actual}
    for f in expected:
        if f.name not in present:
            diff.missing.append(f"{f.name} (expected {f.type})")
        else:
            _compare(f.type, present.pop(f.name), f.name, diff)
    diff.extra += [f"{n} ({t})" for n, t in present.items()]
    return diff


def _parquet_schema(path: Path) -> tuple[pa.Schema, int]:
    try:
        meta = pq.ParquetFile(path)
        return meta.schema_arrow, meta.metadata.num_rows
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise SourceError(f"{path}: not a readable parquet file ({type(exc).__name__}: {exc})") from exc


def schema_adapter(schema: pa.Schema, path: Path) -> Adapter:
    """The dump format of a file with ``schema`` (``core/dataset/adapters.py``), checked in full.

    A file with every column of the 140k card is checked field by field against it (nested fields
    included); any other file must match one adapter's documented columns.

    Raises
    ------
    SourceError
        The 140k card's columns with a missing or retyped field, or no known format: the message
        names the problems, the columns found and the nearest known format.
    """
    partial = bool(set(DATASET_ARROW_SCHEMA.names) - set(schema.names))
    if partial:
        try:
            return choose_adapter(schema, str(path))
        except UnknownFormatError as exc:
            if nearest_adapter(schema) is not ARENA_140K:
                raise SourceError(str(exc)) from None
    diff = compare_schema(schema)
    if diff.fatal:
        problems = [f"missing column {m}" for m in diff.missing] + [f"wrong type for {m}" for m in diff.mismatched]
        found = f" (columns found: {', '.join(schema.names)}; nearest known format: {ARENA_140K.name})" \
            if partial else ""
        raise SourceError(f"{path}: does not match the dataset card schema: " + "; ".join(problems) + found)
    return ARENA_140K


def single_format(directory: Path, paths: list[Path]) -> Adapter:
    """The one dump format of a folder's parquet files (read from their footers only).

    Raises
    ------
    SourceError
        The files are of several formats (the message names each format and its files), or one is
        not readable or of no known format (as :func:`verify_shard` says it).
    """
    directory = Path(directory)
    formats: dict[str, tuple[Adapter, list[str]]] = {}
    for path in paths:
        adapter = schema_adapter(_parquet_schema(Path(path))[0], Path(path))
        formats.setdefault(adapter.name, (adapter, []))[1].append(Path(path).relative_to(directory).as_posix())
    if len(formats) > 1:
        def listed(files: list[str]) -> str:
            return ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")

        found = "; ".join(f"{name} ({adapter.card}): {listed(files)}" for name, (adapter, files) in formats.items())
        raise SourceError(
            f"{directory}: its parquet files are of {len(formats)} dump formats, {found}; a dump folder holds "
            "one format: put each in a folder of its own and list the folders in ARENA_DATASETS (comma-separated) "
            "to load them together")
    return next(iter(formats.values()))[0] if formats else ARENA_140K


def verify_shard(path: Path) -> int:
    """Open ``path`` as parquet, check it against its dump format's card; return its row count.

    Raises
    ------
    SourceError
        If the file is not readable parquet, is empty of columns, or misses or retypes a documented
        field (see :func:`schema_adapter`).
    """
    path = Path(path)
    schema, rows = _parquet_schema(path)
    schema_adapter(schema, path)
    return rows


def read_csv_text(path: Path, n_rows: int | None = None) -> pl.DataFrame:
    """A CSV file's cells as strings (``n_rows``: only the first rows; 0: the header alone).

    Raises
    ------
    SourceError
        The file is not parseable as CSV (the message names Polars' reason).
    """
    try:
        return pl.read_csv(path, n_rows=n_rows, infer_schema=False)
    except Exception as exc:  # polars raises ComputeError / NoDataError for broken quoting
        # Polars quotes the whole offending cell (a conversation: thousands of characters, newlines
        # included), then gives advice on schema inference: keep the cell's start and the column
        text = str(exc).strip()
        found = re.search(r"could not parse `(.*?)` (as dtype `\w+` at column '[^']*' \(column number \d+\))",
                          text, re.S)
        if found:
            cell = found.group(1)
            start = cell[:80].replace("\n", "\\n") + ("…" if len(cell) > 80 else "")
            reason = f"could not parse `{start}` ({len(cell):,} characters) {found.group(2)}"
        else:
            reason = text.splitlines()[0][:300] if text else ""
        hint = "; a quoted cell never ends: is the file cut short?" if "not properly escaped" in text else ""
        raise SourceError(f"{path}: not parseable as CSV ({type(exc).__name__}: {reason}){hint}") from exc


def csv_header(path: Path) -> list[str]:
    """The column names of a CSV file (its header row)."""
    return read_csv_text(path, n_rows=0).columns


def csv_adapter(path: Path) -> Adapter | None:
    """The adapter of a CSV file, or None for the 140k CSV export (Python-literal nested cells)."""
    header = csv_header(path)
    if not set(DATASET_ARROW_SCHEMA.names) - set(header):
        return None
    try:
        return choose_adapter(csv_schema(header), str(path))
    except UnknownFormatError as exc:
        if nearest_adapter(csv_schema(header)) is ARENA_140K:
            return None  # a 140k export missing columns: read_csv_export says which, as before
        raise SourceError(str(exc)) from None


def verify_file(path: Path) -> int:
    """:func:`verify_shard` for parquet; for a CSV, its format's columns and its row count."""
    path = Path(path)
    if path.suffix.lower() != ".csv":
        return verify_shard(path)
    csv_adapter(path)
    rows = csv_row_count(path)
    if rows < 0:
        raise SourceError(f"{path}: not parseable as CSV")
    return rows


def new_fields(path: Path) -> list[str]:
    """Columns or struct fields of a file that the dataset card does not document (reported, not fatal)."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        header = csv_header(path)
        adapter = csv_adapter(path)
        known = DATASET_ARROW_SCHEMA.names if adapter is None else [*adapter.columns, *adapter.optional]
        return [f"{name} (csv column)" for name in header if name not in known]
    schema = pq.read_schema(path)
    adapter = schema_adapter(schema, path)
    if adapter is ARENA_140K:
        return compare_schema(schema).extra
    known = {*adapter.columns, *adapter.optional}
    return [f"{f.name} ({f.type})" for f in schema if f.name not in known]


def csv_row_count(path: Path) -> int:
    """Data rows of a CSV export (quoted newlines inside cells included), streamed by Polars.

    Returns -1 when the file cannot be parsed as CSV; the load then fails with the reason.
    """
    try:
        return int(pl.scan_csv(path, infer_schema=False).select(pl.len()).collect().item())
    except (pl.exceptions.PolarsError, OSError):
        return -1


def file_stamp(path: str | Path) -> tuple[int, ...]:
    """(size, mtime_ns, ctime_ns, inode) of a file (a link followed). Any write changes the
    status-change time, which no program can set back: an equal stamp means unchanged content."""
    stat = os.stat(path)
    return (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)


def file_sha256(path: str | Path) -> str:
    """The sha256 hex digest of a file (``hashlib.file_digest``)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


# ---------------------------------------------------------------------------
# CSV exports with Python-literal nested fields
# ---------------------------------------------------------------------------

@dataclass
class CsvRead:
    """A parsed CSV export: the rows that parsed as an Arrow table, and the rest as quarantine rows."""

    table: pa.Table
    quarantine: pl.DataFrame
    rows_read: int


def _literal(text: str | None):
    """Parse one Python-literal cell safely (``ast.literal_eval`` never calls code)."""
    if text is None or text == "":
        return None
    return ast.literal_eval(text)


#: Default per-cell limit of a CSV export (``ARENA_CSV_MAX_CELL_BYTES``): 16 MiB, about four times
#: a 1M-token context as text; the largest cell of the real 100-row sample is 79 kB.
DEFAULT_MAX_CELL_BYTES = 16 * 1024 * 1024

#: Most syntax characters (``, : [ ] { }``, inside strings too) a nested cell may hold: the syntax tree
#: of ``ast.literal_eval`` costs about 1 kB per element, so a 4 MiB cell of ``0,0,0,...`` took 2 GB
#: while 16 MiB of prose takes about 150 MB. Real conversations hold a few thousand (the 100-row
#: sample at most 1,377); a cell over this is quarantined as ``oversized_cell`` without parsing.
MAX_CELL_SYNTAX_CHARS = 262_144
_SYNTAX = r"[,:\[\]{}]"


def check_utf8(path: Path, chunk: int = 1 << 22) -> None:
    """Raise :class:`SourceError` naming byte and line unless ``path`` is UTF-8 (read in 4 MiB chunks)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    lines = 0
    with open(path, "rb") as fh:
        while True:
            block = fh.read(chunk)
            pending = decoder.getstate()[0]  # bytes of a character split across blocks
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                data = pending + block
                line = lines + data[: exc.start].count(b"\n") + 1
                raise SourceError(
                    f"{path}: not valid UTF-8 at byte {offset - len(pending) + exc.start} (line {line}): "
                    f"{data[exc.start:exc.start + 8]!r}"
                ) from exc
            if not block:
                return
            lines += block.count(b"\n")
            offset += len(block)


#: ISO 8601 layouts accepted in a CSV's timestamp column, after :func:`iso_timestamp_expr` has
#: made the date/time separator ``T`` and a ``Z`` suffix ``+00:00``. ``%.f`` also matches no fraction.
_ISO_WITH_OFFSET = ("%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%dT%H:%M%z")
_ISO_NAIVE = ("%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d")


def iso_timestamp_expr(col: str | pl.Expr) -> pl.Expr:
    """ISO 8601 strings to naive UTC ``Datetime("ns")``, each value parsed on its own.

    Accepted: ``T`` or a space between date and time; seconds and a fraction (up to ns) optional;
    an offset ``+05:30``, ``+0530``, ``+05``, ``-02:00`` or ``Z`` converted to UTC; no offset read as UTC
    already (the dump's own timestamps); a date alone as midnight. Anything else gives null.
    Mixed layouts in one column are fine: the first value does not decide the format.
    """
    expr = pl.col(col) if isinstance(col, str) else col
    text = (
        expr.cast(pl.String)
        .str.strip_chars()
        .str.replace(r"^(\d{4}-\d{2}-\d{2})[ tT]", "${1}T")
        .str.replace(r"[zZ]$", "+00:00")
        .str.replace(r"(T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?[+-]\d{2})$", "${1}:00")  # +05: hours only
    )
    candidates = [
        text.str.to_datetime(fmt, time_unit="ns", strict=False, exact=True)
        .dt.convert_time_zone("UTC")
        .dt.replace_time_zone(None)
        for fmt in _ISO_WITH_OFFSET
    ] + [text.str.to_datetime(fmt, time_unit="ns", strict=False, exact=True) for fmt in _ISO_NAIVE]
    return pl.coalesce(candidates)


def read_csv_export(path: Path, max_cell_bytes: int | None = DEFAULT_MAX_CELL_BYTES) -> CsvRead:
    """Parse a CSV export whose nested fields are Python-literal strings.

    Rows whose nested field does not parse as a literal, or does not fit the dataset card's type,
    become quarantine rows (rule ``unparseable_nested_field``), and rows whose ``evaluation_order``,
    ``is_code`` or ``timestamp`` cell is not an integer, true/false or an ISO 8601 time (rule
    ``unparseable_field``, the detail naming the column and the cell); a row with a cell (any column)
    larger than ``max_cell_bytes`` becomes a quarantine row (rule ``oversized_cell``) without its
    cells being parsed, and its ``raw`` holds the cell's size instead of the cell. The file as a
    whole fails with :class:`SourceError` when it is not UTF-8, not parseable CSV, or lacks a
    documented column.

    Memory: the UTF-8 check streams 4 MiB chunks; Polars holds the file's cells once; the parsed
    Python values of all good rows and their Arrow copy follow, so peak memory grows linearly with
    the file, plus the syntax tree of the one cell being parsed, which ``max_cell_bytes`` and
    :data:`MAX_CELL_SYNTAX_CHARS` cap. Measured (``benchmarks/bench_csv_memory.py``): 8-12 times
    the file size, plus at most about 300 MiB for the one cell at either cap; a cell over a cap
    costs nothing beyond its bytes.
    """
    path = Path(path)
    check_utf8(path)
    frame = read_csv_text(path)
    missing = [n for n in DATASET_ARROW_SCHEMA.names if n not in frame.columns]
    if missing:
        raise SourceError(f"{path}: missing column(s) {', '.join(missing)} required by the dataset card")
    frame = frame.select(DATASET_ARROW_SCHEMA.names)

    errors: dict[int, str] = {}
    oversized_rule: dict[int, str] = {}
    scalar_rule: dict[int, str] = {}
    if max_cell_bytes is not None:
        too_big = {c: pl.col(c).str.len_bytes() > max_cell_bytes for c in frame.columns}
        too_deep = {c: pl.col(c).str.count_matches(_SYNTAX) > MAX_CELL_SYNTAX_CHARS for c in NESTED_COLUMNS}
        detail = frame.select(
            pl.concat_str(
                [pl.when(big).then(pl.format(f"{c}: cell of {{}} bytes is over the limit of {max_cell_bytes} "
                                             "bytes (ARENA_CSV_MAX_CELL_BYTES); not parsed",
                                             pl.col(c).str.len_bytes()))
                 for c, big in too_big.items()]
                + [pl.when(deep & ~too_big[c]).then(pl.format(
                    f"{c}: cell of {{}} syntax characters is over the limit of {MAX_CELL_SYNTAX_CHARS}; "
                    "not parsed", pl.col(c).str.count_matches(_SYNTAX)))
                   for c, deep in too_deep.items()],
                separator="; ", ignore_nulls=True,
            ).alias("detail")
        ).to_series()
        too_big = {c: big | too_deep[c] if c in too_deep else big for c, big in too_big.items()}
        for row in frame.select(pl.any_horizontal(too_big.values())).to_series().arg_true().to_list():
            errors[row] = detail[row]
            oversized_rule[row] = "oversized_cell"
        if oversized_rule:  # keep the oversized cells out of every later step
            frame = frame.with_columns(
                pl.when(big).then(pl.format("<{} bytes>", pl.col(c).str.len_bytes())).otherwise(pl.col(c)).alias(c)
                for c, big in too_big.items()
            )

    parsed: dict[str, list] = {name: [] for name in NESTED_COLUMNS}
    # One Python-literal parse per cell is unavoidable: the format is Python syntax, not JSON.
    for name in NESTED_COLUMNS:
        dtype = DATASET_ARROW_SCHEMA.field(name).type
        for row, cell in enumerate(frame.get_column(name).to_list()):
            if row in oversized_rule:
                parsed[name].append(None)
                continue
            try:
                value = _literal(cell)
                pa.array([value], type=dtype)  # rejects values of the wrong shape
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError,
                    pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                errors.setdefault(row, f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
                value = None
            parsed[name].append(value)

    scalars = frame.select(
        pl.col("id", "model_a", "model_b", "winner", "evaluation_session_id", "language"),
        pl.col("evaluation_order").str.strip_chars().cast(pl.Int32, strict=False),
        pl.col("is_code").str.to_lowercase().replace_strict(
            {"true": True, "false": False}, default=None, return_dtype=pl.Boolean),
        iso_timestamp_expr("timestamp").alias("timestamp"),
    )
    # a scalar cell given but not read: the column, what it should be and the cell (cut to 100 characters)
    expected = {"evaluation_order": "not an integer", "is_code": "not true or false",
                "timestamp": "not an ISO 8601 time"}
    scalar_detail = pl.concat_str(
        [pl.when(scalars.get_column(c).is_null() & frame.get_column(c).is_not_null())
         .then(pl.format(f"{c}: {what}: '{{}}'", frame.get_column(c).str.slice(0, 100)))
         for c, what in expected.items()], separator="; ", ignore_nulls=True)
    for row, detail in enumerate(frame.select(scalar_detail).to_series().to_list()):
        if detail and row not in errors:  # concat_str gives "" when no part applies
            errors[row] = detail
            scalar_rule[row] = "unparseable_field"

    good = [i for i in range(frame.height) if i not in errors]
    columns = {}
    for name in DATASET_ARROW_SCHEMA.names:
        dtype = DATASET_ARROW_SCHEMA.field(name).type
        if name in parsed:
            values = [parsed[name][i] for i in good]
            columns[name] = pa.array(values, type=dtype)
        else:
            columns[name] = scalars.get_column(name).gather(good).to_arrow().cast(dtype)
    table = pa.table(columns, schema=DATASET_ARROW_SCHEMA)

    bad = sorted(errors)
    # every cell as read (an oversized one as its size): the malformed cell is the evidence
    raw = [json.dumps(r, default=str) for r in frame.gather(bad).iter_rows(named=True)] if bad else []
    quarantine = pl.DataFrame(
        {
            "id": frame.get_column("id").gather(bad).to_list() if bad else [],
            "source_file": [str(path)] * len(bad),
            "source_row": bad,
            "rule": [oversized_rule.get(i) or scalar_rule.get(i, "unparseable_nested_field") for i in bad],
            "detail": [errors[i] for i in bad],
            "raw": raw,
            "dump": [None] * len(bad),
        },
        schema=QUARANTINE_SCHEMA,
    )
    return CsvRead(table=table, quarantine=quarantine, rows_read=frame.height)
