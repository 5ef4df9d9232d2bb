"""Validate flat tables against the Great Expectations suites in ``expectations/``.

This is the only module that imports ``great_expectations`` (GX 1.x). It imports it lazily, on
the first validation, so that loading the Dagster definitions does not pay GX's import time.

A suite is a plain GX 1.x JSON file, one per checked table (``expectations/<table>.json``; see
``expectations/README.md``). Every expectation carries ``meta.severity``:

- ``"error"``: the failure would corrupt a ranking; :attr:`QualityReport.passed_errors` turns
  False and the (blocking) check should stop the run;
- ``"warning"``: reported, never blocking.

Validation runs in one ephemeral GX context per process (pandas datasource, whole-dataframe
batch definitions, progress bars and analytics off) over pandas copies of the Polars frame:
the schema expectations see exact dtypes (:func:`to_pandas`), the value expectations a
numpy-backed copy GX vectorises (:func:`to_pandas_values`). The outcome is a
:class:`QualityReport` whose ``results`` frame has one row per expectation
(:data:`REPORT_SCHEMA`), with unexpected counts and a sample of offending ids.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

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

#: GX's own ``severity`` field, kept in step with ``meta.severity``.
_GX_SEVERITY = {"error": "critical", "warning": "warning"}

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
    schema
        The table's full schema, for the schema expectations, when ``df`` holds only some of its
        columns (e.g. :func:`suite_columns`); default ``df.schema``.
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
        native = exp.get("severity")
        if native is not None and native != _GX_SEVERITY[severity]:
            raise SuiteError(
                f"{path}: expectation {exp_id!r} has severity={native!r} but "
                f"meta.severity={severity!r}; drop the top-level field"
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

    GX's own ``severity`` field is set from ``meta.severity`` (error -> critical,
    warning -> warning). See :func:`read_suite` for the checks made.
    """
    import great_expectations as gx
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )

    data = read_suite(name_or_path, directory)
    expectations = []
    for exp in data["expectations"]:
        exp = dict(exp)
        exp["severity"] = _GX_SEVERITY[exp["meta"]["severity"]]
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


def to_pandas_values(df: pl.DataFrame) -> pd.DataFrame:
    """A pandas copy GX's pandas engine checks quickly (for the value expectations).

    GX vectorises ``expect_column_values_to_be_between`` only for numpy ``int64`` / ``float64``
    and ``datetime64[ns]`` columns (other dtypes go through a Python call per value). So
    integers become ``int64`` (``float64`` with NaN when the column has nulls) and datetimes
    ``datetime64[ns]``, clipped to its range (1677-09-22 .. 2262-04-11: a value beyond that is
    still outside any plausible range). Strings, booleans and lists are Polars' default
    conversion.
    """
    casts = []
    for name, dtype in df.schema.items():
        if dtype.is_integer():
            target = pl.Int64 if df.get_column(name).null_count() == 0 else pl.Float64
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


@functools.cache
def _context() -> Any:
    """One ephemeral GX context per process (created on first use, never at import)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
    )
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
    derived = {name: pl.sql_expr(sql).meta.root_names()
               for name, sql in (meta.get("derived_columns") or {}).items()}
    named = [c for exp in data["expectations"] if exp.get("type") not in SCHEMA_EXPECTATION_TYPES
             for c in _kwargs_columns(exp.get("kwargs") or {})]
    columns = [source for c in named for source in derived.get(c, [c])]
    return list(dict.fromkeys([*columns, *([meta["id_column"]] if meta.get("id_column") else [])]))


def _sub_suite(suite: gx.ExpectationSuite, name: str, configs: list[Any]) -> gx.ExpectationSuite:
    import great_expectations as gx

    return gx.ExpectationSuite(name=name, expectations=configs, meta=suite.meta)


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
    column), with the suite's ``meta.derived_columns`` added.
    """
    start = time.perf_counter()
    suite = load_suite(suite_name, directory)
    if only is not None:
        wanted = set(only)
        suite = _sub_suite(suite, suite.name, [e.configuration for e in suite.expectations if e.id in wanted])
    meta = suite.meta or {}
    if id_column is None:
        id_column = meta.get("id_column")
    if id_column is not None and id_column not in df.columns:
        id_column = None
    result_format: dict[str, Any] = {
        "result_format": "SUMMARY",
        "partial_unexpected_count": sample_size,
    }
    if id_column:
        result_format["unexpected_index_column_names"] = [id_column]
    params = default_parameters()
    params.update(parameters or {})

    schema_configs = [e.configuration for e in suite.expectations if e.expectation_type in
                      SCHEMA_EXPECTATION_TYPES]
    value_configs = [e.configuration for e in suite.expectations if e.expectation_type not in
                     SCHEMA_EXPECTATION_TYPES]
    jobs = []
    if schema_configs:
        shape = df.head(0) if schema is None else pl.DataFrame(schema=dict(schema))
        jobs.append(("schema", shape, to_pandas, schema_configs))
    if value_configs:
        values = add_derived_columns(df, meta.get("derived_columns") or {})
        # Only the columns the expectations read (and the id): GX fingerprints the whole pandas
        # frame, pickling it when a column is unhashable (lists), which costs seconds.
        keep = [c for c in [*_referenced_columns(value_configs), id_column] if c]
        values = values.select([c for c in dict.fromkeys(keep) if c in values.columns])
        jobs.append(("values", values, to_pandas_values, value_configs))

    by_id: dict[str, Any] = {}
    with _LOCK:
        for part, frame, convert, configs in jobs:
            batch = _batch_definition(f"{suite.name}.{part}").get_batch(
                batch_parameters={"dataframe": convert(frame)}
            )
            validation = batch.validate(
                _sub_suite(suite, f"{suite.name}.{part}", configs),
                result_format=result_format,
                expectation_parameters=params,
            )
            by_id.update((res.expectation_config.id, res) for res in validation.results)

    rows = [
        _result_row(suite.name, by_id[exp.id].expectation_config, by_id[exp.id], id_column)
        for exp in suite.expectations
    ]
    return QualityReport(
        suite=suite.name,
        table=meta.get("table"),
        row_count=df.height,
        results=pl.DataFrame(rows, schema=REPORT_SCHEMA),
        duration_s=time.perf_counter() - start,
    )


def validate_dumps(
    df: pl.DataFrame,
    suite_name: str | Path,
    unavailable: Mapping[str, Collection[str]],
    *,
    dump_column: str = "dump",
    **kwargs: Any,
) -> QualityReport:
    """:func:`validate_frame` on a table of several dumps, some lacking some columns.

    ``unavailable`` maps a dump to the columns its format does not have (``core/dumps.py``).
    Every expectation that names none of those columns runs once on the whole frame (``id.unique``
    stays a check across dumps); one that names some runs on the rows of the dumps that have them
    (on no rows, and so passing, when no dump has them). Without ``unavailable`` this is
    :func:`validate_frame`. ``kwargs`` are :func:`validate_frame`'s.
    """
    if not any(unavailable.values()):
        return validate_frame(df, suite_name, **kwargs)
    start = time.perf_counter()
    data = read_suite(suite_name, kwargs.get("directory"))
    gaps = {c for cols in unavailable.values() for c in cols}
    groups: dict[tuple[str, ...], list[str]] = {}
    everywhere = []
    for exp in data["expectations"]:
        named = set(_kwargs_columns(exp.get("kwargs") or {})) & gaps
        if not named or exp.get("type") in SCHEMA_EXPECTATION_TYPES:
            everywhere.append(exp["id"])
            continue
        lacking = tuple(sorted(d for d, cols in unavailable.items() if named & set(cols)))
        groups.setdefault(lacking, []).append(exp["id"])
    schema = kwargs.pop("schema", None) or df.schema
    reports = [validate_frame(df, suite_name, only=everywhere, schema=schema, **kwargs)]
    for lacking, ids in groups.items():
        part = df.filter(~pl.col(dump_column).is_in(list(lacking)))
        reports.append(validate_frame(part, suite_name, only=ids, schema=schema, **kwargs))
    order = {e["id"]: i for i, e in enumerate(data["expectations"])}
    results = pl.concat([r.results for r in reports]).sort(
        pl.col("expectation_id").replace_strict(order, return_dtype=pl.Int64))
    first = reports[0]
    return QualityReport(suite=first.suite, table=first.table, row_count=df.height, results=results,
                         duration_s=time.perf_counter() - start)
