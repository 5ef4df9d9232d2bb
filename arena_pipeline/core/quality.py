"""Validate flat tables against the Great Expectations suites in ``expectations/``.

This is the only module that imports ``great_expectations`` (GX 1.x). It imports it lazily, on
the first validation, so that loading the Dagster definitions does not pay GX's import time.

A suite is a plain GX 1.x JSON file, one per checked table (``expectations/<table>.json``; see
``expectations/README.md``). Every expectation carries ``meta.severity``:

- ``"error"``: the failure would corrupt a ranking; :attr:`QualityReport.passed_errors` turns
  False and the (blocking) check should stop the run;
- ``"warning"``: reported, never blocking.

Validation runs in an ephemeral GX context over a pandas copy of the Polars frame (see
:func:`to_pandas`), with progress bars and analytics off. The outcome is a
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

if TYPE_CHECKING:  # pragma: no cover
    import great_expectations as gx
    import pandas as pd

#: Folder holding the suites: ``<repository>/expectations``.
EXPECTATIONS_DIR: Path = Path(__file__).resolve().parents[2] / "expectations"

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
        Folder of named suites; defaults to :data:`EXPECTATIONS_DIR`.
    """
    path = Path(name_or_path)
    if path.suffix == ".json":
        return path
    return Path(directory or EXPECTATIONS_DIR) / f"{name_or_path}.json"


def read_suite(name_or_path: str | Path, directory: str | Path | None = None) -> dict[str, Any]:
    """The suite's JSON as a dict, after checking every expectation's ``id`` and severity.

    Raises
    ------
    SuiteError
        When the file is missing or not JSON, an expectation has no unique ``id``, or its
        ``meta.severity`` is not one of :data:`SEVERITIES`.
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
    data.setdefault("name", path.stem)
    return data


def load_suite(name_or_path: str | Path, directory: str | Path | None = None) -> gx.ExpectationSuite:
    """A GX 1.x ``ExpectationSuite`` built from ``expectations/<name>.json`` (or a path).

    GX's own ``severity`` field is set from ``meta.severity`` (error -> critical,
    warning -> warning). See :func:`read_suite` for the checks made.
    """
    import great_expectations as gx

    data = read_suite(name_or_path, directory)
    expectations = []
    for exp in data["expectations"]:
        exp = dict(exp)
        exp["severity"] = _GX_SEVERITY[exp["meta"]["severity"]]
        expectations.append(exp)
    suite = gx.ExpectationSuite(
        name=data["name"],
        expectations=expectations,
        meta=data.get("meta"),
        notes=data.get("notes"),
    )
    if len(suite.expectations) != len(expectations):  # GX logs and skips invalid ones
        kept = {e.id for e in suite.expectations}
        bad = [e["id"] for e in expectations if e["id"] not in kept]
        raise SuiteError(f"suite {data['name']!r}: GX rejected expectations {bad}")
    return suite


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


def _pandas_type(arrow_type: pa.DataType) -> Any:
    """Nullable pandas dtypes, so that Int32 stays Int32 even with nulls."""
    import pandas as pd

    if pa.types.is_integer(arrow_type):
        return {
            pa.int8(): pd.Int8Dtype(),
            pa.int16(): pd.Int16Dtype(),
            pa.int32(): pd.Int32Dtype(),
            pa.int64(): pd.Int64Dtype(),
            pa.uint8(): pd.UInt8Dtype(),
            pa.uint16(): pd.UInt16Dtype(),
            pa.uint32(): pd.UInt32Dtype(),
            pa.uint64(): pd.UInt64Dtype(),
        }[arrow_type]
    if pa.types.is_boolean(arrow_type):
        return pd.BooleanDtype()
    if pa.types.is_floating(arrow_type):
        return pd.Float32Dtype() if arrow_type == pa.float32() else pd.Float64Dtype()
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or (
        hasattr(pa.types, "is_string_view") and pa.types.is_string_view(arrow_type)
    ):
        return pd.StringDtype("pyarrow")
    return None  # timestamps -> datetime64[unit], lists -> object


def to_pandas(df: pl.DataFrame) -> pd.DataFrame:
    """The pandas copy GX validates, with dtypes that keep the Polars types apart.

    ========================  ============================
    Polars                    pandas dtype (suite ``type_``)
    ========================  ============================
    String                    ``string`` (pyarrow storage, ``pd.NA``)
    Int32 / Int64 / ...       ``Int32`` / ``Int64`` / ... (nullable)
    Boolean                   ``boolean`` (nullable)
    Float64                   ``Float64`` (nullable)
    Datetime("us")            ``datetime64[us]``
    List(...)                 ``object``
    ========================  ============================
    """
    return df.to_arrow().to_pandas(types_mapper=_pandas_type)


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


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
    """The whole-dataframe batch definition of ``asset_name`` in the shared pandas datasource."""
    context = _context()
    with _LOCK:
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


def validate_frame(
    df: pl.DataFrame,
    suite_name: str | Path,
    id_column: str | None = None,
    sample_size: int = 10,
    *,
    parameters: Mapping[str, Any] | None = None,
    directory: str | Path | None = None,
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
        Folder of named suites; defaults to :data:`EXPECTATIONS_DIR`.

    Returns
    -------
    QualityReport
        ``results`` in suite order; ``passed_errors`` False when any error-severity expectation
        failed or could not run (e.g. its column is missing).
    """
    start = time.perf_counter()
    suite = load_suite(suite_name, directory)
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

    batch = _batch_definition(suite.name).get_batch(batch_parameters={"dataframe": to_pandas(df)})
    validation = batch.validate(suite, result_format=result_format, expectation_parameters=params)

    by_id = {res.expectation_config.id: res for res in validation.results}
    rows = [
        _result_row(suite.name, by_id[exp.id].expectation_config, by_id[exp.id], id_column)
        for exp in suite.expectations
    ]
    results = pl.DataFrame(rows, schema=REPORT_SCHEMA)
    return QualityReport(
        suite=suite.name,
        table=meta.get("table"),
        row_count=df.height,
        results=results,
        duration_s=time.perf_counter() - start,
    )
