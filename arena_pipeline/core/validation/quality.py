"""Validate flat tables against the Great Expectations suites in ``expectations/``, in bounded batches.

This is the only module that imports ``great_expectations`` (GX 1.x). It imports it lazily, on
the first validation, so that loading the Dagster definitions does not pay GX's import time.

A suite is a plain GX 1.x JSON file, one per checked table (``expectations/<table>.json``; see
``expectations/README.md``). Every expectation carries ``meta.severity``:

- ``"error"``: the failure would corrupt a ranking; :attr:`QualityReport.passed_errors` turns
  False and the (blocking) check should stop the run;
- ``"warning"``: reported, never blocking.

Validation runs in one ephemeral GX context per process (pandas datasource, whole-dataframe
batch definitions, progress bars, analytics and batch fingerprints off) over pandas copies of Polars frames: the
schema expectations see exact dtypes (:func:`to_pandas`), the value expectations a numpy-backed
copy GX vectorises (:func:`to_pandas_values`). :func:`validate_frame` checks a frame held in
memory in one GX validation.

:func:`validate_relation` checks a DuckDB table (what the asset checks do) without ever holding
it whole: it reads the suite's columns in batches of about ``batch_rows`` rows (by default
:data:`DEFAULT_BATCH_CELLS` values: fewer rows for a wide read), validates each with GX and merges
the results, so memory follows the batch, not the table (:func:`plan_batches` says which expectations run where):

- the schema expectations run once, on an empty frame with the table's schema;
- the row-count expectations run once, on the table's count;
- the row-wise expectations (:data:`ROW_EXPECTATION_TYPES`) run on consecutive batches of one
  streamed scan;
- an expectation that compares rows (:data:`KEY_EXPECTATION_TYPES`: uniqueness) runs on a
  partition of the rows by a hash of its own key columns, reading only those (and the id), so
  that every copy of a key is in one batch; other key columns get their own partitioning;
- an expectation naming a column some dump's format lacks reads only the other dumps' rows
  (``WHERE dump NOT IN (...)``, :func:`unavailable_in`).

The batch results are merged per expectation (:func:`merge_batch_results`) into exactly what one
whole-table validation gives. Any other expectation type (an aggregate such as a column mean)
has no such merge: :func:`validate_relation` rejects it with :class:`SuiteError`.

The outcome is a :class:`QualityReport` whose ``results`` frame has one row per expectation
(:data:`REPORT_SCHEMA`), with unexpected counts and a sample of offending ids.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import re
import sys
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl
import pyarrow as pa

from arena_pipeline.core.dataset.adapters import ADAPTABLE_COLUMNS
from arena_pipeline.core.dataset.dumps import unavailable_columns
from arena_pipeline.core.store.warehouse import read_frame, stream_frames

if TYPE_CHECKING:  # pragma: no cover
    import great_expectations as gx
    import pandas as pd

#: The package holding the suites. Their source is ``expectations/`` at the repository root; the
#: build maps that folder to this package (pyproject.toml), so a wheel ships them.
EXPECTATIONS_PACKAGE = "arena_pipeline.expectations"


def expectations_dir() -> Path:
    """The folder of the installed suites, found with ``importlib.resources`` when first asked."""
    return Path(str(files(EXPECTATIONS_PACKAGE)))

SEVERITIES: tuple[str, ...] = ("error", "warning")


#: One row per expectation of a validated suite.
REPORT_SCHEMA: dict[str, pl.DataType] = {
    "suite": pl.String(),
    "expectation_id": pl.String(),  # the expectation's ``id`` in the JSON, stable across runs
    "expectation_type": pl.String(),  # e.g. expect_column_values_to_be_between
    "column": pl.String(),  # the column, or the columns joined by ','; null for table-level
    "severity": pl.String(),  # 'error' or 'warning'
    "success": pl.Boolean(),
    "element_count": pl.Int64(),  # rows looked at; null for table-level expectations
    "unexpected_count": pl.Int64(),  # offending rows; null for table-level expectations
    "unexpected_percent": pl.Float64(),  # GX's figure: share of the non-null values, in %
    "missing_count": pl.Int64(),  # null values skipped by the expectation
    "observed_value": pl.String(),  # JSON, for table-level / aggregate expectations
    "details": pl.String(),  # JSON, GX's details when given (e.g. missing/unexpected columns)
    "sample_ids": pl.List(pl.String()),  # ids of offending rows (first `sample_size`)
    "sample_values": pl.List(pl.String()),  # offending values as JSON (first `sample_size`)
    "exception": pl.String(),  # GX's message when the expectation could not run
}

_LOCK = threading.Lock()


class SuiteError(ValueError):
    """A suite file is missing, malformed, or has an expectation without a valid severity."""


# ---------------------------------------------------------------------------
# Suites
# ---------------------------------------------------------------------------


def suite_path(name_or_path: str | Path, directory: str | Path | None = None) -> Path:
    """Where a suite lives: a ``.json`` path as given, or ``<directory>/<name>.json``.

    Parameters
    ----------
    name_or_path
        A suite name such as ``"battles"``, or a path to a JSON file.
    directory
        Folder of named suites; defaults to :func:`expectations_dir`.
    """
    path = Path(name_or_path)
    if path.suffix == ".json":
        return path
    return Path(directory or expectations_dir()) / f"{name_or_path}.json"


def read_suite(name_or_path: str | Path, directory: str | Path | None = None) -> dict[str, Any]:
    """The suite's JSON as a dict, after checking every expectation's ``id`` and severity.

    Raises
    ------
    SuiteError
        When the file is missing or not JSON, an expectation has no unique ``id``, or its
        ``meta.severity`` is not one of :data:`SEVERITIES`, or ``meta.derived_columns`` is not a
        mapping of names to SQL expressions.
    """
    path = suite_path(name_or_path, directory)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise SuiteError(f"no suite at {path}") from e
    except json.JSONDecodeError as e:
        raise SuiteError(f"{path} is not JSON: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("expectations"), list):
        raise SuiteError(f"{path}: expected an object with an 'expectations' list")
    seen: set[str] = set()
    for i, exp in enumerate(data["expectations"]):
        exp_id = exp.get("id")
        if not exp_id or exp_id in seen:
            raise SuiteError(f"{path}: expectation #{i} needs a unique 'id' (got {exp_id!r})")
        seen.add(exp_id)
        severity = (exp.get("meta") or {}).get("severity")
        if severity not in SEVERITIES:
            raise SuiteError(
                f"{path}: expectation {exp_id!r} has meta.severity={severity!r}, "
                f"expected one of {SEVERITIES}"
            )
        if "severity" in exp:  # one severity field: meta.severity (GX's own is not used)
            raise SuiteError(
                f"{path}: expectation {exp_id!r} has a top-level severity={exp['severity']!r}; the severity "
                "is meta.severity alone: drop the top-level field"
            )
    derived = (data.get("meta") or {}).get("derived_columns", {})
    if not isinstance(derived, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in derived.items()
    ):
        raise SuiteError(f"{path}: meta.derived_columns must map names to SQL expressions")
    data.setdefault("name", path.stem)
    return data


def load_suite(
    name_or_path: str | Path, directory: str | Path | None = None
) -> gx.ExpectationSuite:
    """A GX 1.x ``ExpectationSuite`` built from ``expectations/<name>.json`` (or a path).

    The severity is ``meta.severity`` alone (GX's own ``severity`` field is left unset: nothing reads
    it). See :func:`read_suite` for the checks made.
    """
    import great_expectations as gx
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )

    data = read_suite(name_or_path, directory)
    expectations = []
    for exp in data["expectations"]:
        exp = dict(exp)
        try:
            config = ExpectationConfiguration(**exp)
            config.to_domain_obj()  # raises on an unknown type or bad kwargs
        except Exception as e:  # GX raises several types for unknown types / bad kwargs
            raise SuiteError(f"suite {data['name']!r}, expectation {exp['id']!r}: {e}") from e
        expectations.append(config)
    return gx.ExpectationSuite(
        name=data["name"],
        expectations=expectations,
        meta=data.get("meta"),
        notes=data.get("notes"),
    )


def default_parameters(now: dt.datetime | None = None) -> dict[str, Any]:
    """Values for the suites' ``{"$PARAMETER": ...}`` placeholders.

    ``max_timestamp``: ``now`` (default: the current UTC time, naive like the battles'
    timestamps) plus one day, ISO-formatted.
    """
    now = now or dt.datetime.now(dt.UTC).replace(tzinfo=None)
    return {"max_timestamp": (now + dt.timedelta(days=1)).isoformat()}


# ---------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------

#: Expectations about the table's shape. They run on an empty copy of the frame with exact
#: dtypes (:func:`to_pandas`); every other expectation runs on :func:`to_pandas_values`.
SCHEMA_EXPECTATION_TYPES: frozenset[str] = frozenset(
    {
        "expect_column_type_to_be",
        "expect_column_values_to_be_of_type",
        "expect_column_values_to_be_in_type_list",
        "expect_column_to_exist",
        "expect_table_columns_to_match_set",
        "expect_table_columns_to_match_ordered_list",
        "expect_table_column_count_to_equal",
        "expect_table_column_count_to_be_between",
    }
)

_INT_TYPES = {
    pa.int8(): "Int8",
    pa.int16(): "Int16",
    pa.int32(): "Int32",
    pa.int64(): "Int64",
    pa.uint8(): "UInt8",
    pa.uint16(): "UInt16",
    pa.uint32(): "UInt32",
    pa.uint64(): "UInt64",
}


def _pandas_type(arrow_type: pa.DataType) -> Any:
    """Nullable pandas dtypes, so that Int32 stays Int32 even with nulls."""
    import pandas as pd

    if arrow_type in _INT_TYPES:
        return pd.api.types.pandas_dtype(_INT_TYPES[arrow_type])
    if pa.types.is_boolean(arrow_type):
        return pd.BooleanDtype()
    if pa.types.is_floating(arrow_type):
        return pd.Float32Dtype() if arrow_type == pa.float32() else pd.Float64Dtype()
    if (
        pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_string_view(arrow_type)
    ):
        return pd.StringDtype("pyarrow")
    return None  # timestamps -> datetime64[unit], lists -> object


def to_pandas(df: pl.DataFrame) -> pd.DataFrame:
    """A pandas copy whose dtypes keep the Polars types apart (for the schema expectations).

    ========================  ==============================
    Polars                    pandas dtype (suite ``type_``)
    ========================  ==============================
    String                    ``string`` (pyarrow storage)
    Int32 / Int64 / ...       ``Int32`` / ``Int64`` / ... (nullable)
    Boolean                   ``boolean`` (nullable)
    Float64                   ``Float64`` (nullable)
    Datetime("us")            ``datetime64[us]``
    List(...)                 ``object``
    ========================  ==============================
    """
    return df.to_arrow().to_pandas(types_mapper=_pandas_type)


_NS_MIN = dt.datetime(1677, 9, 22)
_NS_MAX = dt.datetime(2262, 4, 11)


def to_pandas_values(df: pl.DataFrame, nulls: Mapping[str, bool] | None = None) -> pd.DataFrame:
    """A pandas copy GX's pandas engine checks quickly (for the value expectations).

    GX vectorises ``expect_column_values_to_be_between`` only for numpy ``int64`` / ``float64``
    and ``datetime64[ns]`` columns (other dtypes go through a Python call per value). So
    integers become ``int64`` (``float64`` with NaN when the column has nulls) and datetimes
    ``datetime64[ns]``, clipped to its range (1677-09-22 .. 2262-04-11: a value beyond that is
    still outside any plausible range). Strings, booleans and lists are Polars' default
    conversion.

    Parameters
    ----------
    df
        The frame, or one batch of a larger table.
    nulls
        Integer column -> whether it has nulls in the whole table ``df`` is a batch of, so that
        every batch converts it alike (a sampled ``-4`` stays ``-4``, not ``-4.0`` in one batch
        only); a column not listed is decided on ``df`` itself.
    """
    known = nulls or {}
    casts = []
    for name, dtype in df.schema.items():
        if dtype.is_integer():
            has_nulls = known[name] if name in known else df.get_column(name).null_count() > 0
            target = pl.Float64 if has_nulls else pl.Int64
            casts.append(pl.col(name).cast(target))
        elif isinstance(dtype, pl.Datetime):
            col = pl.col(name)
            if dtype.time_zone is not None:
                col = col.dt.replace_time_zone(None)
            casts.append(
                col.dt.cast_time_unit("us")
                .clip(pl.lit(_NS_MIN), pl.lit(_NS_MAX))
                .cast(pl.Datetime("ns"))
                .alias(name)
            )
    return (df.with_columns(casts) if casts else df).to_pandas()


def add_derived_columns(df: pl.DataFrame, derived: Mapping[str, str]) -> pl.DataFrame:
    """``df`` plus the suite's ``meta.derived_columns``: name -> Polars SQL expression.

    They let a built-in expectation check a row-wise condition GX's pandas engine only offers
    row by row (e.g. ``model_a <> model_b``).
    """
    clash = sorted(set(derived) & set(df.columns))
    if clash:
        raise SuiteError(f"derived columns {clash} would overwrite columns of the frame")
    if not derived:
        return df
    return df.with_columns([pl.sql_expr(sql).alias(name) for name, sql in derived.items()])


def import_in_background() -> threading.Thread | None:
    """Start importing Great Expectations in a daemon thread; None when it is imported already.

    The import costs ~2 s of Python, paid by the first validation of the process. A caller that knows
    validations come next and leaves a core idle meanwhile starts it early: the flat_tables asset while DuckDB
    commits the load (``load_dump(when_read=...)``), before the asset checks of the flat tables. The first
    validation then finds GX imported, or waits for the import to finish (Python's import lock); an
    import that fails here is left to fail again, and be reported, there.
    """
    if "great_expectations" in sys.modules:
        return None
    thread = threading.Thread(target=_import_gx, name="import-great-expectations", daemon=True)
    thread.start()
    return thread


def _import_gx() -> None:
    try:
        import great_expectations  # noqa: F401
    except Exception:  # noqa: BLE001 - the first validation imports it again and raises there
        pass


#: GX's pandas engine hashes every row of a batch smaller than its ``HASH_THRESHOLD`` (1 GB) for a fingerprint that
#: only marks the batch (``batch_markers``, which no report reads): a third of the messages check's CPU at 1x.
#: :func:`_context` sets the threshold to this, so no batch is fingerprinted.
FINGERPRINT_BELOW_BYTES = 0


@functools.cache
def _context() -> Any:
    """One ephemeral GX context per process (created on first use, never at import)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )
    from great_expectations.execution_engine import pandas_execution_engine

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
    )
    # GX fingerprints every pandas batch under HASH_THRESHOLD bytes (a hash of each of its rows) only to mark
    # the batch; no validation result depends on it: never computed
    pandas_execution_engine.HASH_THRESHOLD = FINGERPRINT_BELOW_BYTES
    return gx.get_context(mode="ephemeral", project_config=config)


def _batch_definition(asset_name: str) -> Any:
    """The whole-dataframe batch definition of ``asset_name`` in the shared pandas datasource.

    Callers hold ``_LOCK``.
    """
    context = _context()
    try:
        source = context.data_sources.get("arena_pipeline")
    except (KeyError, ValueError, LookupError):
        source = context.data_sources.add_pandas("arena_pipeline")
    try:
        asset = source.get_asset(asset_name)
    except LookupError:
        asset = source.add_dataframe_asset(asset_name)
    try:
        return asset.get_batch_definition("whole_dataframe")
    except (KeyError, ValueError, LookupError):
        return asset.add_batch_definition_whole_dataframe("whole_dataframe")


def _plain(value: Any) -> Any:
    """A JSON-friendly version of a value GX returned (numpy scalars, pd.NA, tuples...)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # numpy scalar
        try:
            value = value.item()
        except (ValueError, TypeError):
            pass
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str | int | float | bool):
        return value
    try:
        import pandas as pd

        if value is pd.NA or value is pd.NaT:
            return None
    except ImportError:  # pragma: no cover
        pass
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return str(value)


def _json(value: Any) -> str | None:
    value = _plain(value)
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def _columns_of(kwargs: Mapping[str, Any]) -> str | None:
    if "column" in kwargs:
        return kwargs["column"]
    if "column_A" in kwargs:
        return f"{kwargs['column_A']},{kwargs['column_B']}"
    if "column_list" in kwargs:
        return ",".join(kwargs["column_list"])
    return None


def _sample_positions(res: Any, column: str) -> list[int] | None:
    """The ``column`` values (row positions) of GX's sampled offending rows, in sample order."""
    entries = (res.result or {}).get("partial_unexpected_index_list") or []
    positions = [_plain(e.get(column)) for e in entries if isinstance(e, dict)]
    if len(positions) != len(entries) or not all(isinstance(p, int) for p in positions):
        return None
    return positions


def _result_row(suite: str, config: Any, res: Any, id_column: str | None) -> dict[str, Any]:
    result = res.result or {}
    exc = res.exception_info or {}
    message = None
    if isinstance(exc, dict):
        if exc.get("raised_exception"):
            message = exc.get("exception_message")
        else:  # a dict of metric id -> exception info
            messages = [
                v.get("exception_message")
                for v in exc.values()
                if isinstance(v, dict) and v.get("raised_exception")
            ]
            message = "; ".join(m for m in messages if m) or None
    sample_ids: list[str | None] = []
    if id_column:
        for entry in result.get("partial_unexpected_index_list") or []:
            if isinstance(entry, dict) and id_column in entry:
                value = _plain(entry[id_column])
                sample_ids.append(None if value is None else str(value))
    sample_values = [_json(v) or "null" for v in result.get("partial_unexpected_list") or []]
    meta = config.meta or {}
    return {
        "suite": suite,
        "expectation_id": config.id,
        "expectation_type": config.type,
        "column": _columns_of(config.kwargs),
        "severity": meta.get("severity"),
        "success": bool(res.success),
        "element_count": result.get("element_count"),
        "unexpected_count": result.get("unexpected_count"),
        "unexpected_percent": result.get("unexpected_percent"),
        "missing_count": result.get("missing_count"),
        "observed_value": _json(result.get("observed_value")),
        "details": _json(result.get("details")),
        "sample_ids": sample_ids,
        "sample_values": sample_values,
        "exception": message,
    }


@dataclass(frozen=True)
class QualityReport:
    """The outcome of validating one frame against one suite.

    Attributes
    ----------
    suite
        The suite's name (``battles``, ``messages``...).
    table
        ``meta.table`` of the suite.
    row_count
        Rows validated.
    results
        One row per expectation, in suite order, with :data:`REPORT_SCHEMA`.
    duration_s
        Wall time of the validation (conversion to pandas included).
    """

    suite: str
    table: str | None
    row_count: int
    results: pl.DataFrame
    duration_s: float = field(default=0.0)

    @property
    def passed(self) -> bool:
        """Every expectation succeeded, warnings included."""
        return bool(self.results["success"].all())

    @property
    def passed_errors(self) -> bool:
        """Every ``error`` expectation succeeded: warnings never flip this."""
        return self.failures("error").is_empty()

    def failures(self, severity: str | None = None) -> pl.DataFrame:
        """The failed expectations' rows, optionally of one severity."""
        failed = self.results.filter(~pl.col("success"))
        if severity is not None:
            if severity not in SEVERITIES:
                raise ValueError(f"severity must be one of {SEVERITIES}, got {severity!r}")
            failed = failed.filter(pl.col("severity") == severity)
        return failed

    def summary_line(self) -> str:
        """The run log's line: rows, expectations, failures by severity, time."""
        return (f"{self.suite}: {self.row_count:,} rows, {self.results.height} expectations, "
                f"{self.failures('error').height} failed errors, {self.failures('warning').height} failed warnings "
                f"({self.duration_s:.1f} s)")

    def failure_lines(self) -> list[str]:
        """One line per failed expectation, naming it: its severity, id, column and unexpected rows (the
        run log says which expectation failed, not only the report)."""
        return [f"{self.suite}: {r['severity']} expectation {r['expectation_id']} failed"
                + (f" on {r['column']}" if r["column"] else "")
                + (f": {r['unexpected_count']:,} unexpected row(s)" if r["unexpected_count"] else "")
                + (f" ({r['exception']})" if r["exception"] else "")
                for r in self.failures().iter_rows(named=True)]

    def summary(self) -> dict[str, Any]:
        """Plain counts for check metadata: rows, expectations, failures by severity."""
        return {
            "suite": self.suite,
            "row_count": self.row_count,
            "expectations": self.results.height,
            "failed_errors": self.failures("error").height,
            "failed_warnings": self.failures("warning").height,
            "passed_errors": self.passed_errors,
            "duration_s": round(self.duration_s, 3),
        }


def _kwargs_columns(kwargs: Mapping[str, Any]) -> list[str]:
    """Columns an expectation's kwargs name (``column``, ``column_A``/``column_B``, ``column_list``)."""
    names = [kwargs[k] for k in ("column", "column_A", "column_B") if isinstance(kwargs.get(k), str)]
    return names + list(kwargs.get("column_list") or [])


def _referenced_columns(configs: list[Any]) -> list[str]:
    """Columns named by the expectations' kwargs, in first-mention order."""
    return list(dict.fromkeys(c for config in configs for c in _kwargs_columns(config.kwargs)))


def suite_columns(name_or_path: str | Path, directory: str | Path | None = None) -> list[str]:
    """The table columns :func:`validate_frame` reads values of for this suite, in first-mention order.

    The columns the value expectations name, those the suite's ``meta.derived_columns`` are
    computed from (instead of the derived names) and ``meta.id_column``. A frame of just these
    columns, with the table's full schema passed as ``schema=``, validates exactly like the whole
    table: the schema expectations only need the column names and types, not the values. For the
    messages suite this leaves out ``text``, the bulk of the table.
    """
    data = read_suite(name_or_path, directory)
    meta = data.get("meta") or {}
    named = [c for exp in data["expectations"] if exp.get("type") not in SCHEMA_EXPECTATION_TYPES
             for c in _kwargs_columns(exp.get("kwargs") or {})]
    columns = _source_columns(named, meta)
    return list(dict.fromkeys([*columns, *([meta["id_column"]] if meta.get("id_column") else [])]))


def _source_columns(named: list[str], meta: Mapping[str, Any]) -> list[str]:
    """The table columns behind ``named``, a derived column (``meta.derived_columns``) replaced by its sources."""
    derived = {name: pl.sql_expr(sql).meta.root_names()
               for name, sql in (meta.get("derived_columns") or {}).items()}
    return list(dict.fromkeys(source for c in named for source in derived.get(c, [c])))


def _sub_suite(suite: gx.ExpectationSuite, name: str, configs: list[Any]) -> gx.ExpectationSuite:
    import great_expectations as gx

    return gx.ExpectationSuite(name=name, expectations=configs, meta=suite.meta)


@dataclass(frozen=True)
class _Run:
    """What the GX validations of one suite share: the (sub-)suite, the sampled columns, the options."""

    suite: Any
    meta: dict[str, Any]
    id_column: str | None
    order_column: str | None
    result_format: dict[str, Any]
    parameters: dict[str, Any]


def _prepare(
    suite_name: str | Path,
    columns: Collection[str],
    id_column: str | None,
    sample_size: int,
    parameters: Mapping[str, Any] | None,
    directory: str | Path | None,
    only: Collection[str] | None,
    order_column: str | None = None,
) -> _Run:
    """The suite (only the ``only`` ids when given) and the options of :func:`validate_frame`.

    ``columns`` are those of the data: ``id_column`` (default ``meta.id_column``) is dropped when
    absent. ``order_column``, a column giving each row's position in the table, is sampled with
    the ids so that samples of several batches can be put back in table order.
    """
    suite = load_suite(suite_name, directory)
    if only is not None:
        wanted = set(only)
        suite = _sub_suite(suite, suite.name, [e.configuration for e in suite.expectations if e.id in wanted])
    meta = suite.meta or {}
    if id_column is None:
        id_column = meta.get("id_column")
    if id_column is not None and id_column not in columns:
        id_column = None
    result_format: dict[str, Any] = {
        "result_format": "SUMMARY",
        "partial_unexpected_count": sample_size,
    }
    index = [c for c in (id_column, order_column) if c]
    if index:
        result_format["unexpected_index_column_names"] = index
    params = default_parameters()
    params.update(parameters or {})
    return _Run(suite, meta, id_column, order_column, result_format, params)


def _gx_results(run: _Run, part: str, frame: pd.DataFrame, configs: list[Any]) -> dict[str, Any]:
    """GX's results of ``configs`` on one pandas frame, by expectation id."""
    name = f"{run.suite.name}.{part}"
    with _LOCK:
        try:
            batch = _batch_definition(name).get_batch(batch_parameters={"dataframe": frame})
            validation = batch.validate(
                _sub_suite(run.suite, name, configs),
                result_format=run.result_format,
                expectation_parameters=run.parameters,
            )
        finally:
            _release_batches()
    return {res.expectation_config.id: res for res in validation.results}


def _release_batches() -> None:
    """Make GX let go of the frames it validated.

    The pandas datasource's execution engine keeps the last batch (its data and its Batch) until
    the next validation replaces it: the frame would outlive the check, and in
    :func:`validate_relation` two batches would be alive at once. Callers hold ``_LOCK``.
    """
    try:
        source = _context().data_sources.get("arena_pipeline")
    except (KeyError, ValueError, LookupError):  # never created: nothing to let go of
        return
    manager = source.get_execution_engine().batch_manager
    manager.batch_data_cache.clear()
    manager.reset_batch_cache()


def _values_frame(df: pl.DataFrame, run: _Run, configs: list[Any]) -> pl.DataFrame:
    """``df`` with the derived columns ``configs`` read, cut to what they read (and the sampled columns).

    GX fingerprints the whole pandas frame, pickling it when a column is unhashable (lists),
    which costs seconds: the frame holds nothing else.
    """
    named = _referenced_columns(configs)
    derived = {k: v for k, v in (run.meta.get("derived_columns") or {}).items() if k in named}
    values = add_derived_columns(df, derived)
    keep = [c for c in [*named, run.id_column, run.order_column] if c]
    return values.select([c for c in dict.fromkeys(keep) if c in values.columns])


def _split(configs: list[Any]) -> tuple[list[Any], list[Any]]:
    """The schema expectations' configurations, and the others'."""
    schema = [c for c in configs if c.type in SCHEMA_EXPECTATION_TYPES]
    return schema, [c for c in configs if c.type not in SCHEMA_EXPECTATION_TYPES]


def validate_frame(
    df: pl.DataFrame,
    suite_name: str | Path,
    id_column: str | None = None,
    sample_size: int = 10,
    *,
    parameters: Mapping[str, Any] | None = None,
    directory: str | Path | None = None,
    schema: Mapping[str, pl.DataType] | None = None,
    only: Collection[str] | None = None,
) -> QualityReport:
    """Validate a Polars frame against a suite and report every expectation.

    Parameters
    ----------
    df
        The table to check, e.g. a frame with ``schema.BATTLES_SCHEMA``.
    suite_name
        ``"battles"``, ``"messages"`` (a file in ``directory``) or a path to a suite JSON.
    id_column
        Column whose values identify offending rows in ``sample_ids``. Default: the suite's
        ``meta.id_column`` (``id`` for battles, ``battle_id`` for messages). No ids are sampled
        when the column is absent from ``df``.
    sample_size
        How many offending values and ids to keep per expectation.
    parameters
        Values for ``$PARAMETER`` placeholders, merged over :func:`default_parameters`.
    directory
        Folder of named suites; defaults to :func:`expectations_dir`.
    schema
        The table's full schema, for the schema expectations, when ``df`` holds only some of its
        columns (e.g. :func:`suite_columns`); default ``df.schema``.
    only
        Run only these expectation ids (default: all); ``results`` then lists only them.

    Returns
    -------
    QualityReport
        ``results`` in suite order; ``passed_errors`` False when any error-severity expectation
        failed or could not run (e.g. its column is missing).

    Notes
    -----
    Two GX validations run in the process-wide ephemeral context: the schema expectations
    (:data:`SCHEMA_EXPECTATION_TYPES`) on an empty :func:`to_pandas` copy, which has the exact
    dtypes, and the others on :func:`to_pandas_values` of the columns they name (and the id
    column), with the suite's ``meta.derived_columns`` added. The whole frame is converted at
    once: for a table larger than memory use :func:`validate_relation`.
    """
    start = time.perf_counter()
    run = _prepare(suite_name, df.columns, id_column, sample_size, parameters, directory, only)
    schema_configs, value_configs = _split([e.configuration for e in run.suite.expectations])
    by_id: dict[str, Any] = {}
    if schema_configs:
        shape = df.head(0) if schema is None else pl.DataFrame(schema=dict(schema))
        by_id.update(_gx_results(run, "schema", to_pandas(shape), schema_configs))
    if value_configs:
        values = to_pandas_values(_values_frame(df, run, value_configs))
        by_id.update(_gx_results(run, "values", values, value_configs))
    rows = [
        _result_row(run.suite.name, by_id[exp.id].expectation_config, by_id[exp.id], run.id_column)
        for exp in run.suite.expectations
    ]
    return QualityReport(
        suite=run.suite.name,
        table=run.meta.get("table"),
        row_count=df.height,
        results=pl.DataFrame(rows, schema=REPORT_SCHEMA),
        duration_s=time.perf_counter() - start,
    )


# ---------------------------------------------------------------------------
# A DuckDB table, validated in batches
# ---------------------------------------------------------------------------

#: Values (rows x columns read, the row position included) per batch of :func:`validate_relation`
#: when no ``batch_rows`` is given: memory against speed. Memory follows the values read: a batch
#: costs ~1.6 KB a row for the battles suite's 57 columns (Polars, its casts, the pandas copy), ~0.5 KB
#: for the messages suite's 9, so at most ~350 MB (battles) and ~650 MB (messages) at this size. GX
#: costs ~10 ms per expectation and batch on top of ~1 s per million rows, so fewer batches are
#: faster: the full dump's 135k battles (210k rows a batch) and its 743k messages (1.3M) are one
#: batch each (the messages were 4 batches of :data:`DEFAULT_BATCH_ROWS` before: ~0.5 s more).
DEFAULT_BATCH_CELLS = 12_000_000

#: The rows per batch of :func:`read_batches` when none is given, and the size the cells budget
#: above gives the battles suite (12,000,000 / 57 columns read ~ 210,000 rows).
DEFAULT_BATCH_ROWS = 200_000


def rows_per_batch(columns: int, batch_rows: int | None = None) -> int:
    """``batch_rows`` when given, else the rows of :data:`DEFAULT_BATCH_CELLS` values of ``columns`` columns.

    ``columns`` counts the columns a batch reads, the row position included.
    """
    if batch_rows is not None:
        return batch_rows
    return max(1, DEFAULT_BATCH_CELLS // max(1, columns))

#: Expectations that compare rows with each other. Each runs on a partition of the rows by a hash
#: of the columns its kwargs name, so that every copy of a key is in the same batch: the counts of
#: the batches then add up to the whole table's.
KEY_EXPECTATION_TYPES: frozenset[str] = frozenset(
    {"expect_column_values_to_be_unique", "expect_compound_columns_to_be_unique"}
)

#: Expectations decided on each row alone (GX's map expectations): any batching gives the whole
#: table's counts once summed.
ROW_EXPECTATION_TYPES: frozenset[str] = frozenset(
    {
        "expect_column_values_to_not_be_null",
        "expect_column_values_to_be_null",
        "expect_column_values_to_be_between",
        "expect_column_values_to_be_in_set",
        "expect_column_values_to_not_be_in_set",
        "expect_column_values_to_match_regex",
        "expect_column_values_to_not_match_regex",
        "expect_column_value_lengths_to_be_between",
        "expect_column_value_lengths_to_equal",
        "expect_column_pair_values_to_be_equal",
        "expect_column_pair_values_a_to_be_greater_than_b",
        "expect_column_pair_values_to_be_in_set",
        "expect_select_column_values_to_be_unique_within_record",
        "expect_multicolumn_sum_to_equal",
    }
)

#: Expectations about the number of rows: run once, on the table's count.
ROW_COUNT_EXPECTATION_TYPES: frozenset[str] = frozenset(
    {"expect_table_row_count_to_be_between", "expect_table_row_count_to_equal"}
)

#: The column of a partitioned read holding each row's partition (:func:`read_batches` with a ``key``).
BUCKET_COLUMN = "__arena_partition"

#: A partitioned read streams its sorted rows in slices of a batch's rows over this: what it holds beyond a batch.
PARTITION_SLICES = 8

#: The column of a batch holding each row's position in the relation (DuckDB's ``rowid``), sampled
#: with the ids so that the merged samples are the first offending rows in table order.
POSITION_COLUMN = "__arena_row_position"


def _ident(name: str) -> str:
    """A quoted DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class BatchPass:
    """One partitioning of a relation's rows, and the expectations validated on each of its batches.

    Attributes
    ----------
    key
        The columns whose hash decides a row's batch; ``()`` for consecutive batches in table order.
    lacking
        Dumps whose rows are left out: their format lacks a column the expectations name.
    ids
        The expectations validated on every batch, in suite order.
    """

    key: tuple[str, ...]
    lacking: tuple[str, ...]
    ids: tuple[str, ...]


@dataclass(frozen=True)
class BatchPlan:
    """Where :func:`validate_relation` runs each expectation of a suite.

    Attributes
    ----------
    schema_ids
        :data:`SCHEMA_EXPECTATION_TYPES`: once, on an empty frame with the table's schema.
    count_ids
        :data:`ROW_COUNT_EXPECTATION_TYPES`: once, on the table's row count.
    passes
        The others, on the batches of each pass.
    """

    schema_ids: tuple[str, ...]
    count_ids: tuple[str, ...]
    passes: tuple[BatchPass, ...]


def plan_batches(data: Mapping[str, Any], unavailable: Mapping[str, Collection[str]]) -> BatchPlan:
    """Which expectations of a suite run where when it is validated in batches.

    The row-wise expectations (:data:`ROW_EXPECTATION_TYPES`) with the same ``lacking`` dumps
    share a pass of consecutive batches (one streamed scan of the columns they read). An
    expectation of :data:`KEY_EXPECTATION_TYPES` gets a pass partitioned by a hash of its own
    columns, shared with those of the same columns and ``lacking`` dumps: it reads only its key
    (and the id), so it is narrow, and running it apart costs GX little (GX's overhead is per
    expectation and batch, not per validation). ``lacking``: the
    dumps whose format lacks a column the expectation names (``unavailable``, as given by
    :func:`unavailable_in`).

    Parameters
    ----------
    data
        The suite, as :func:`read_suite` returns it.
    unavailable
        Dump -> the columns its format lacks.

    Raises
    ------
    SuiteError
        For an expectation no batching can validate exactly: an aggregate over the whole column
        (mean, distinct values, ...), or a ``mostly`` below 1 (its threshold applies to the whole
        table, and GX's denominators differ by expectation family).
    """
    gaps = {c for cols in unavailable.values() for c in cols}
    schema_ids: list[str] = []
    count_ids: list[str] = []
    keyed: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
    rowwise: dict[tuple[str, ...], list[str]] = {}
    for exp in data["expectations"]:
        kind, kwargs, exp_id = exp.get("type"), exp.get("kwargs") or {}, exp["id"]
        if kind in SCHEMA_EXPECTATION_TYPES:
            schema_ids.append(exp_id)
            continue
        if kind in ROW_COUNT_EXPECTATION_TYPES:
            count_ids.append(exp_id)
            continue
        if kwargs.get("mostly", 1) != 1:
            raise SuiteError(f"expectation {exp_id!r}: 'mostly' cannot be validated in batches")
        named = set(_kwargs_columns(kwargs)) & gaps
        lacking = tuple(sorted(d for d, cols in unavailable.items() if named & set(cols)))
        if kind in KEY_EXPECTATION_TYPES:
            keyed.setdefault((tuple(_kwargs_columns(kwargs)), lacking), []).append(exp_id)
        elif kind in ROW_EXPECTATION_TYPES:
            rowwise.setdefault(lacking, []).append(exp_id)
        else:
            raise SuiteError(
                f"expectation {exp_id!r}: {kind} has no rule to merge batches; add it to "
                "ROW_EXPECTATION_TYPES or KEY_EXPECTATION_TYPES if it is decided per row or per key"
            )
    passes = [BatchPass((), lacking, tuple(ids)) for lacking, ids in rowwise.items()]
    passes += [BatchPass(key, lacking, tuple(ids)) for (key, lacking), ids in keyed.items()]
    return BatchPlan(tuple(schema_ids), tuple(count_ids), tuple(passes))


def unavailable_in(
    con: duckdb.DuckDBPyConnection,
    relation: str,
    columns: Collection[str] | None = None,
    *,
    dump_column: str = "dump",
) -> dict[str, list[str]]:
    """:func:`~arena_pipeline.core.dataset.dumps.unavailable_columns` of a DuckDB relation, aggregated in DuckDB.

    One row per dump comes back to Python: for each adaptable column, one of its values in that
    dump's rows (``any_value``, null exactly when all are null), and ``unavailable_columns`` reads
    that small frame. The table itself is never read into Python.

    Parameters
    ----------
    con
        The DuckDB connection.
    relation
        A quoted, schema-qualified table or view name.
    columns
        The columns to consider (default: all of the relation's); only adaptable ones can be
        unavailable.
    dump_column
        The column naming each row's dump.
    """
    present = read_frame(con, f"SELECT * FROM {relation} LIMIT 0").columns
    if dump_column not in present:
        return {}
    wanted = [c for c in dict.fromkeys(columns if columns is not None else present)
              if c in ADAPTABLE_COLUMNS and c in present and c != dump_column]
    if not wanted:
        return {}
    values = ", ".join(f"any_value({_ident(c)}) AS {_ident(c)}" for c in wanted)
    per_dump = read_frame(con, f"SELECT {_ident(dump_column)} AS dump, {values} FROM {relation} GROUP BY 1")
    return unavailable_columns(per_dump, wanted)


#: A view that is a plain scan of Parquet files (a vote table's version), or of another relation (a reuse).
_PARQUET_VIEW = re.compile(r"^CREATE VIEW .+? AS SELECT \* FROM (read_parquet\('[^']*'\));?\s*$", re.S)
_ALIAS_VIEW = re.compile(r"^CREATE VIEW .+? AS SELECT \* FROM ([\w\".]+);?\s*$", re.S)


def _position(con: duckdb.DuckDBPyConnection, relation: str) -> tuple[str, str]:
    """(what to read, SQL for a row's position in it) for ``relation``: a table and ``rowid``; for a view
    over Parquet files (a vote table's version, perhaps through the views of its reuses) its scan and
    the row's place in the files (file, then row: the order they were written in); any other view, and
    the row's number."""
    try:
        con.execute(f"SELECT rowid FROM {relation} LIMIT 0")
        return relation, "rowid"
    except duckdb.BinderException:
        pass
    seen = relation
    for _ in range(8):  # a reuse of a reuse ... of the files: a short chain
        found = con.execute("SELECT sql FROM duckdb_views() WHERE '\"' || schema_name || '\".\"' || view_name || '\"' "
                            "= ? OR schema_name || '.' || view_name = ?", [seen, seen]).fetchone()
        if found is None:
            break
        scan, alias = _PARQUET_VIEW.match(found[0]), _ALIAS_VIEW.match(found[0])
        if scan:
            return scan.group(1), "(file_index::BIGINT << 40) + file_row_number"
        if not alias:
            break
        seen = alias.group(1)
    return relation, "row_number() OVER ()"


def read_batches(
    con: duckdb.DuckDBPyConnection,
    relation: str,
    columns: Sequence[str],
    *,
    key: Sequence[str] = (),
    rows: int | None = None,
    where: str = "",
    params: Sequence[Any] = (),
    batch_rows: int = DEFAULT_BATCH_ROWS,
    position: str = "rowid",
) -> Iterator[pl.DataFrame]:
    """The rows of ``relation`` in batches of about ``batch_rows``, each ordered by row position.

    Without ``key``, one streamed query (on a cursor of ``con``) cut into consecutive batches of
    at most ``batch_rows`` rows. With ``key``, ``n = ceil(rows / batch_rows)`` batches, batch ``i``
    holding the rows whose ``hash(key) % n`` is ``i``: every copy of a key is in one batch. Such a
    batch holds about ``batch_rows`` rows (hash partitions of ``r`` rows differ by a few
    ``sqrt(r)``; a key repeated more often makes its batch larger). They come from one query that
    scans the relation's ``columns`` once, sorted by partition inside DuckDB (which spills beyond
    its memory limit), streamed in slices of :data:`PARTITION_SLICES` per batch, cut where the
    partition changes and sorted by position in Polars: the cost is linear in the rows (a query
    per partition would read every row ``n`` times). Either way nothing larger than a batch is held
    in Python (a partition twice while Polars sorts it, and one slice); a relation without rows
    gives one empty batch, and empty hash partitions are skipped.

    Parameters
    ----------
    con
        The DuckDB connection.
    relation
        A quoted, schema-qualified table or view name.
    columns
        The columns to read; :data:`POSITION_COLUMN` comes first.
    key
        The columns whose equal values must share a batch.
    rows
        How many rows ``where`` keeps (decides the number of hash partitions; counted when
        omitted).
    where
        A ``WHERE`` clause, with ``?`` for ``params``.
    params
        The values of ``where``'s placeholders.
    batch_rows
        The rows wanted per batch.
    position
        SQL for the row's position (``rowid``; ``row_number() OVER ()`` for a view).
    """
    selected = "".join(f", {_ident(c)}" for c in columns)
    inner = f"SELECT {position} AS {_ident(POSITION_COLUMN)}{selected} FROM {relation} {where}"
    if not key:
        yield from _streamed(con, inner, params, batch_rows)
        return
    if rows is None:
        rows = con.execute(f"SELECT count(*) FROM {relation} {where}", list(params)).fetchone()[0]
    parts = max(1, math.ceil(rows / batch_rows))
    bucket = f"hash({', '.join(_ident(c) for c in key)}) % {parts}"
    if parts == 1:  # sorted by Polars: DuckDB's ORDER BY moves every column's values (~2x the read's CPU)
        yield read_frame(con, inner, list(params)).sort(POSITION_COLUMN)
        return
    # one scan sorted by partition (DuckDB's sort spills to disk beyond its memory limit), cut where the partition
    # changes, each partition then sorted by row position: linear in the rows, where a query per partition would
    # read them all each time
    ordered = f"SELECT {bucket} AS {_ident(BUCKET_COLUMN)}, * FROM ({inner}) ORDER BY 1"
    pending: list[pl.DataFrame] = []
    for chunk in _streamed(con, ordered, params, max(1, batch_rows // PARTITION_SLICES), sort=False):
        for part in chunk.partition_by(BUCKET_COLUMN, maintain_order=True):
            if pending and pending[0][BUCKET_COLUMN][0] != part[BUCKET_COLUMN][0]:
                yield pl.concat(pending, rechunk=False).drop(BUCKET_COLUMN).sort(POSITION_COLUMN)
                pending.clear()
            pending.append(part)
        del chunk
    if pending:
        yield pl.concat(pending, rechunk=False).drop(BUCKET_COLUMN).sort(POSITION_COLUMN)


def _streamed(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any], batch_rows: int,
              *, sort: bool = True) -> Iterator[pl.DataFrame]:
    """The rows of ``sql`` in consecutive frames of at most ``batch_rows`` rows (``warehouse.stream_frames``:
    one empty frame when there are none); each sorted by row position when ``sort``."""
    cursor = con.cursor()  # its own connection: the stream survives other queries on `con`
    try:
        for frame in stream_frames(cursor, sql, params, batch_rows):
            # insertion order already, unless preserve_insertion_order is off
            yield frame.sort(POSITION_COLUMN) if sort else frame
    finally:
        cursor.close()


def _unexpected_percent(element: int | None, unexpected: int | None, missing: int | None) -> float | None:
    """GX's ``unexpected_percent`` (``_format_map_output``) from whole-table counts.

    Of the non-null values; of all values when the expectation counts no missing ones
    (``expect_column_values_to_not_be_null``); None without values, or without non-null ones.
    """
    if unexpected is None or not element:
        return None
    if missing is None:
        return unexpected / element * 100
    nonnull = element - missing
    return unexpected / nonnull * 100 if nonnull > 0 else None


def merge_batch_results(
    rows: Sequence[Mapping[str, Any]],
    positions: Sequence[Sequence[int] | None],
    sample_size: int,
) -> dict[str, Any]:
    """One expectation's result row (:data:`REPORT_SCHEMA`) from its rows on disjoint batches.

    ``success`` when every batch succeeded (no ``mostly``: no offending row anywhere);
    ``element_count``, ``unexpected_count`` and ``missing_count`` summed; ``unexpected_percent``
    recomputed from the sums as GX does (:func:`_unexpected_percent`); ``observed_value``,
    ``details`` and ``exception`` the first batch's that has one; ``sample_ids`` and
    ``sample_values`` the first ``sample_size`` by row position (each batch samples its first
    offending rows in position order, so these are the whole table's first), or in batch order
    when GX gave no positions.

    Parameters
    ----------
    rows
        The expectation's row of each batch, as ``validate_frame`` builds them.
    positions
        Per batch, the positions of its sampled rows (``None`` when unknown).
    sample_size
        How many sample ids and values to keep.
    """

    def total(name: str) -> int | None:
        values = [r[name] for r in rows if r[name] is not None]
        return sum(values) if values else None

    def first(name: str) -> Any:
        return next((r[name] for r in rows if r[name] is not None), None)

    def samples(name: str) -> list[Any]:
        per_batch = list(zip((r[name] for r in rows), positions, strict=True))
        if all(not got or (at is not None and len(at) == len(got)) for got, at in per_batch):
            entries = [e for got, at in per_batch if got for e in zip(at, got, strict=True)]
            entries.sort(key=lambda e: e[0])  # stable: ties (none in one table) keep batch order
            return [v for _, v in entries][:sample_size]
        return [v for got, _ in per_batch for v in got][:sample_size]

    element, unexpected, missing = total("element_count"), total("unexpected_count"), total("missing_count")
    return {
        **rows[0],
        "success": all(r["success"] for r in rows),
        "element_count": element,
        "unexpected_count": unexpected,
        "unexpected_percent": _unexpected_percent(element, unexpected, missing),
        "missing_count": missing,
        "observed_value": first("observed_value"),
        "details": first("details"),
        "sample_ids": samples("sample_ids"),
        "sample_values": samples("sample_values"),
        "exception": first("exception"),
    }


def _one_pass_per_rows(passes: Sequence[BatchPass]) -> tuple[BatchPass, ...]:
    """The passes of a table that fits in one batch, merged by the rows they read (their ``lacking``).

    Partitioning by a key only matters when the rows are split into batches; with one batch every
    pass reads the whole table, so the expectations of the passes over the same rows run in one
    GX validation (GX's cost is mostly per validation and expectation, not per row).
    """
    merged: dict[tuple[str, ...], list[str]] = {}
    for step in passes:
        merged.setdefault(step.lacking, []).extend(step.ids)
    return tuple(BatchPass((), lacking, tuple(ids)) for lacking, ids in merged.items())


def validate_relation(
    con: duckdb.DuckDBPyConnection,
    relation: str,
    suite_name: str | Path,
    *,
    unavailable: Mapping[str, Collection[str]] | None = None,
    schema: Mapping[str, pl.DataType] | None = None,
    batch_rows: int | None = None,
    sample_size: int = 10,
    id_column: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    directory: str | Path | None = None,
    dump_column: str = "dump",
) -> QualityReport:
    """Validate a DuckDB table against a suite in bounded batches: what :func:`validate_frame` gives on it whole.

    Only the columns the expectations read are fetched, one batch of about ``batch_rows`` rows
    at a time (:func:`read_batches`); :func:`plan_batches` decides the passes, and
    :func:`merge_batch_results` merges each expectation's batches. The report is the one
    :func:`validate_frame` gives on the whole table read into a frame (each expectation on the rows of
    the dumps that have its columns), sample ids included.

    Parameters
    ----------
    con
        The DuckDB connection.
    relation
        A quoted, schema-qualified table or view name, e.g. ``'"versions"."battles__v1"'``.
    suite_name
        ``"battles"``, ``"messages"`` (a file in ``directory``) or a path to a suite JSON.
    unavailable
        Dump -> the columns its format lacks: an expectation naming one runs on the other dumps'
        rows only. Default: :func:`unavailable_in` of the suite's columns (``{}``: none).
    schema
        The table's schema, for the schema expectations; default: read from ``relation``.
    batch_rows
        About how many rows each GX validation sees; default: :data:`DEFAULT_BATCH_CELLS` values, so
        a pass reading fewer columns reads more rows at a time (:func:`rows_per_batch`).
    sample_size, id_column, parameters, directory
        As for :func:`validate_frame`.
    dump_column
        The column naming each row's dump.

    Returns
    -------
    QualityReport
        ``results`` in suite order, ``row_count`` the relation's rows.

    Raises
    ------
    SuiteError
        When the suite has an expectation that cannot be validated in batches
        (:func:`plan_batches`).

    Notes
    -----
    Samples are the first offending rows by position (``rowid``, the table's insertion order;
    a view's scan order), as one validation of ``SELECT ... FROM relation`` gives them. Integer
    columns are converted alike in every batch (:func:`to_pandas_values`' ``nulls``), from one
    aggregate per pass. The row-count expectations run on an index-only pandas frame of the
    table's length (no column; GX's fingerprint of its index takes a few dozen bytes a row, briefly).
    """
    import pandas as pd

    start = time.perf_counter()
    if batch_rows is not None and batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    if schema is None:
        schema = read_frame(con, f"SELECT * FROM {relation} LIMIT 0").schema
    schema = dict(schema)
    if POSITION_COLUMN in schema:
        raise ValueError(f"{relation} has a column named {POSITION_COLUMN}, which batches use for row positions")
    data = read_suite(suite_name, directory)
    if unavailable is None:
        unavailable = unavailable_in(con, relation, suite_columns(suite_name, directory), dump_column=dump_column)
    plan = plan_batches(data, unavailable)
    run = _prepare(suite_name, schema, id_column, sample_size, parameters, directory, None, POSITION_COLUMN)
    # table-level expectations sample no rows: no index columns (the frames below have none)
    whole = replace(run, order_column=None, result_format={
        k: v for k, v in run.result_format.items() if k != "unexpected_index_column_names"})
    configs = {e.id: e.configuration for e in run.suite.expectations}
    total = con.execute(f"SELECT count(*) FROM {relation}").fetchone()[0]

    def read_columns(step: BatchPass) -> list[str]:
        step_configs = [configs[i] for i in step.ids]
        return [c for c in dict.fromkeys([*_source_columns(_referenced_columns(step_configs), run.meta),
                                          *step.key, run.id_column]) if c in schema]

    merged = _one_pass_per_rows(plan.passes)
    widest = max((len(read_columns(step)) for step in merged), default=0)
    if total <= rows_per_batch(widest + 1, batch_rows):
        # one batch holds the table: one validation per set of rows, not per partitioning
        plan = replace(plan, passes=merged)

    once: dict[str, Any] = {}
    if plan.schema_ids:
        shape = to_pandas(pl.DataFrame(schema=schema))
        once.update(_gx_results(whole, "schema", shape, [configs[i] for i in plan.schema_ids]))
    if plan.count_ids:  # GX counts the frame's rows: an index holds them without any column
        rows_only = pd.DataFrame(index=pd.RangeIndex(total))
        once.update(_gx_results(whole, "row_count", rows_only, [configs[i] for i in plan.count_ids]))

    scan, position = _position(con, relation)
    batches: dict[str, list[tuple[dict[str, Any], list[int] | None]]] = {}
    for step in plan.passes:
        step_configs = [configs[i] for i in step.ids]
        read = read_columns(step)
        dumps = [d for d in step.lacking if d is not None]
        where = f"WHERE {_ident(dump_column)} NOT IN ({', '.join('?' for _ in dumps)})" if dumps else ""
        ints = [c for c in read if schema[c].is_integer()]
        counts = con.execute(
            f"SELECT count(*){''.join(f', bool_or({_ident(c)} IS NULL)' for c in ints)} FROM {relation} {where}",
            dumps,
        ).fetchone()
        nulls = {c: bool(v) for c, v in zip(ints, counts[1:], strict=True)}
        key = [c for c in step.key if c in schema]  # GX reports a missing key column itself
        for frame in read_batches(con, scan, read, key=key, rows=counts[0], where=where, params=dumps,
                                  batch_rows=rows_per_batch(len(read) + 1, batch_rows), position=position):
            values = to_pandas_values(_values_frame(frame, run, step_configs), nulls)
            del frame
            for exp_id, res in _gx_results(run, "values", values, step_configs).items():
                row = _result_row(run.suite.name, res.expectation_config, res, run.id_column)
                batches.setdefault(exp_id, []).append((row, _sample_positions(res, POSITION_COLUMN)))
            del values

    results = []
    for exp in run.suite.expectations:
        if exp.id in once:
            results.append(_result_row(run.suite.name, once[exp.id].expectation_config, once[exp.id], run.id_column))
        else:
            rows, positions = zip(*batches[exp.id], strict=True)
            results.append(merge_batch_results(rows, positions, sample_size))
    return QualityReport(
        suite=run.suite.name,
        table=run.meta.get("table"),
        row_count=total,
        results=pl.DataFrame(results, schema=REPORT_SCHEMA),
        duration_s=time.perf_counter() - start,
    )
