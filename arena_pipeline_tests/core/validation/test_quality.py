"""Golden cases for core.quality: suites load, good frames pass, each bad value fails exactly
its expectation with the right count and sample ids, warnings never block; a DuckDB table
validated in small batches gives the whole-table report."""

from __future__ import annotations

import datetime as dt
import gc
import json
import re
import weakref
from pathlib import Path

import duckdb
import polars as pl
import pytest

from arena_pipeline.core.dataset.dumps import unavailable_columns
from arena_pipeline.core.dataset.schema import BATTLES_SCHEMA, MESSAGES_SCHEMA
from arena_pipeline.core.validation import quality
from arena_pipeline_dev.quality_reference import validate_dumps
from arena_pipeline_tests.support.battle_frames import make_battles, make_messages, with_values

#: The 29 real votes with quirky category-tag scores (provenance: arena_pipeline_tests/data/README.md).
REAL_QUIRKY_VOTES = Path(__file__).parents[2] / "data" / "real_quirky_scores.parquet"

# A fixed clock, so that the timestamp cases do not depend on today's date.
NOW = dt.datetime(2025, 8, 1)
PARAMS = quality.default_parameters(NOW)


def validate(df: pl.DataFrame, suite: str = "battles", **kwargs) -> quality.QualityReport:
    kwargs.setdefault("parameters", PARAMS)
    return quality.validate_frame(df, suite, **kwargs)


def failed(report: quality.QualityReport) -> set[str]:
    return set(report.failures()["expectation_id"])


def row_of(report: quality.QualityReport, expectation_id: str) -> dict:
    rows = report.results.filter(pl.col("expectation_id") == expectation_id).to_dicts()
    assert len(rows) == 1, expectation_id
    return rows[0]


# ---------------------------------------------------------------------------
# Suites
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["battles", "messages"])
def test_suites_load_from_expectations_dir(name):
    suite = quality.load_suite(name)
    assert suite.name == name
    assert quality.suite_path(name) == quality.expectations_dir() / f"{name}.json"
    raw = json.loads(quality.suite_path(name).read_text())
    assert len(suite.expectations) == len(raw["expectations"])
    for exp in suite.expectations:
        assert exp.meta["severity"] in quality.SEVERITIES
    ids = [e.id for e in suite.expectations]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    ("name", "schema"), [("battles", BATTLES_SCHEMA), ("messages", MESSAGES_SCHEMA)]
)
def test_suite_schema_matches_core_schema(name, schema):
    """The column set and the types in the JSON are those of core.schema, column for column."""
    data = quality.read_suite(name)
    by_id = {e["id"]: e for e in data["expectations"]}
    assert by_id["columns.match_schema"]["kwargs"]["column_set"] == list(schema)
    assert by_id["columns.match_schema"]["meta"]["severity"] == "error"
    dtypes = quality.to_pandas(pl.DataFrame(schema=schema)).dtypes
    for column in schema:
        exp = by_id[f"{column}.type"]
        assert exp["type"] == "expect_column_type_to_be"
        assert exp["kwargs"] == {"column": column, "type_": str(dtypes[column])}
        assert exp["meta"]["severity"] == "error"


def _write(tmp_path: Path, expectations: list[dict], **top) -> Path:
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"name": "t", "expectations": expectations, **top}))
    return path


_NOT_NULL = {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}}


@pytest.mark.parametrize(
    ("expectations", "top", "message"),
    [
        ([{**_NOT_NULL, "id": "x"}], {}, "meta.severity=None"),
        ([{**_NOT_NULL, "id": "x", "meta": {"severity": "fatal"}}], {}, "'fatal'"),
        ([{**_NOT_NULL, "meta": {"severity": "error"}}], {}, "unique 'id'"),
        (
            [{**_NOT_NULL, "id": "x", "meta": {"severity": "error"}}] * 2,
            {},
            "unique 'id'",
        ),
        (
            [{**_NOT_NULL, "id": "x", "meta": {"severity": "error"}, "severity": "critical"}],
            {},
            "drop the top-level field",
        ),
        (
            [{**_NOT_NULL, "id": "x", "meta": {"severity": "error"}}],
            {"meta": {"derived_columns": ["a"]}},
            "derived_columns",
        ),
    ],
)
def test_bad_suites_are_rejected(tmp_path, expectations, top, message):
    with pytest.raises(quality.SuiteError, match=message):
        quality.load_suite(_write(tmp_path, expectations, **top))


def test_missing_suite_is_rejected(tmp_path):
    with pytest.raises(quality.SuiteError, match="no suite"):
        quality.load_suite("nope", directory=tmp_path)


def test_unknown_expectation_type_is_rejected(tmp_path):
    path = _write(
        tmp_path,
        [{"id": "x", "type": "expect_nothing", "kwargs": {}, "meta": {"severity": "error"}}],
    )
    with pytest.raises(quality.SuiteError, match="expect_nothing"):
        quality.load_suite(path)


# ---------------------------------------------------------------------------
# Good frames
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good() -> pl.DataFrame:
    return make_battles(16)


@pytest.fixture(scope="module")
def good_report(good) -> quality.QualityReport:
    return validate(good)


def test_good_battles_pass(good, good_report):
    assert good.schema == pl.Schema(BATTLES_SCHEMA)
    assert good_report.failures().is_empty(), good_report.failures()
    assert good_report.passed and good_report.passed_errors
    assert good_report.row_count == 16
    assert good_report.table == "battles"


def test_report_shape(good_report):
    results = good_report.results
    assert results.schema == pl.Schema(quality.REPORT_SCHEMA)
    suite_ids = [e.id for e in quality.load_suite("battles").expectations]
    assert results["expectation_id"].to_list() == suite_ids  # suite order
    assert results["suite"].unique().to_list() == ["battles"]
    between = row_of(good_report, "turns.at_least_1")
    assert between["column"] == "turns"
    assert between["element_count"] == 16
    assert between["unexpected_count"] == 0
    assert between["unexpected_percent"] == 0.0
    assert between["sample_ids"] == []
    pair = row_of(good_report, "turns.equals_user_messages_a")
    assert pair["column"] == "turns,n_user_messages_a"
    assert row_of(good_report, "source.unique")["column"] == "source_file,source_row"
    typed = row_of(good_report, "turns.type")
    assert typed["observed_value"] == '"Int32"'
    assert typed["element_count"] is None
    summary = good_report.summary()
    assert summary["failed_errors"] == 0 and summary["failed_warnings"] == 0
    assert summary["expectations"] == results.height
    assert summary["passed_errors"] is True


def test_good_messages_pass(good):
    messages = make_messages(good)
    report = validate(messages, "messages")
    assert report.failures().is_empty(), report.failures()
    assert report.results.height == len(quality.load_suite("messages").expectations)


# ---------------------------------------------------------------------------
# Golden bad values: one frame, each case on its own row, one validation
# ---------------------------------------------------------------------------

# (case, row, new values, {expectation id: offending rows in the whole frame}); every case has
# its own row, so an expectation's sample ids are the ids of the cases that list it (plus the
# other copy for the uniqueness cases).
CASES = [
    ("unknown winner", 16, {"winner": "draw"}, {"winner.in_set": 1}),
    ("null winner", 17, {"winner": None}, {"winner.not_null": 1}),
    ("null id", 18, {"id": None}, {"id.not_null": 1}),
    ("duplicate id", 19, {"id": "id-0020"}, {"id.unique": 2}),  # row 20 keeps its id
    ("null model_a", 21, {"model_a": None}, {"model_a.not_null": 1}),
    ("null model_b", 22, {"model_b": None}, {"model_b.not_null": 1}),
    ("same model", 23, {"model_b": "deepseek-v3-0324"}, {"models.differ": 1}),
    (
        "turns 0",
        24,
        {"turns": 0, "n_user_messages_a": 0, "n_user_messages_b": 0},
        {"turns.at_least_1": 1},
    ),
    ("null turns", 25, {"turns": None}, {"turns.not_null": 1}),
    ("turns vs side a", 26, {"n_user_messages_a": 3}, {"turns.equals_user_messages_a": 1}),
    ("turns vs side b", 27, {"n_user_messages_b": 0}, {"turns.equals_user_messages_b": 1}),
    ("null user count", 28, {"n_user_messages_b": None}, {"n_user_messages_b.not_null": 1}),
    ("empty conversation a", 29, {"n_messages_a": 0}, {"n_messages_a.at_least_1": 1}),
    ("null message count", 30, {"n_messages_b": None}, {"n_messages_b.not_null": 1}),
    ("negative user tokens", 31, {"sum_user_tokens": -4}, {
        "sum_user_tokens.non_negative": 1, "sum_user_tokens.positive": 2}),
    ("zero user tokens", 32, {"sum_user_tokens": 0}, {"sum_user_tokens.positive": 2}),
    ("negative assistant tokens", 33, {"sum_assistant_b_tokens": -1}, {
        "sum_assistant_b_tokens.non_negative": 1}),
    ("null assistant tokens", 34, {"sum_assistant_a_tokens": None}, {
        "sum_assistant_a_tokens.not_null": 1}),
    ("negative context tokens", 35, {"context_a_tokens": -7}, {"context_a_tokens.non_negative": 1}),
    ("null context tokens", 36, {"context_b_tokens": None}, {"context_b_tokens.not_null": 1}),
    ("negative markdown count", 37, {"bold_count_b_underscore": -2}, {
        "bold_count_b_underscore.non_negative": 1}),
    ("null markdown count", 38, {"header_count_a_h3": None}, {"header_count_a_h3.not_null": 1}),
    ("null category flag", 39, {"criteria_complexity": None}, {"criteria_complexity.not_null": 1}),
    ("null is_code", 40, {"is_code": None}, {"is_code.not_null": 1}),
    ("malformed creative score", 41, {"creative_writing_score": "nononoyesyes"}, {
        "creative_writing_score.in_set": 1}),
    ("null creative score", 42, {"creative_writing_score": None}, {
        "creative_writing_score.not_null": 1}),
    ("if score above 5", 43, {"instruction_following_score": 6}, {
        "instruction_following_score.in_range": 1}),
    ("null if score", 44, {"instruction_following_score": None}, {
        "instruction_following_score.not_null": 1}),
    ("evaluation order 0", 45, {"evaluation_order": 0}, {"evaluation_order.at_least_1": 1}),
    ("null session", 46, {"evaluation_session_id": None}, {"evaluation_session_id.not_null": 1}),
    ("null language", 47, {"language": None}, {"language.not_null": 1}),
    ("timestamp too old", 48, {"timestamp": dt.datetime(2022, 12, 31)}, {"timestamp.in_range": 2}),
    ("timestamp in future", 49, {"timestamp": NOW + dt.timedelta(days=2)}, {
        "timestamp.in_range": 2}),
    ("null timestamp", 50, {"timestamp": None}, {"timestamp.not_null": 1}),
    ("short full conversation", 51, {"full_conversation_turns": 0}, {
        "full_conversation_turns.covers_turns": 1}),
    ("null source row", 52, {"source_row": None}, {"source_row.not_null": 1}),
    ("repeated source row", 53, {"source_row": 54}, {"source.unique": 2}),
]
BAD_ROWS = 56


def _expected() -> dict[str, set[str | None]]:
    """Expectation id -> ids of the rows that should offend it."""
    out: dict[str, set[str | None]] = {}
    frame = _bad_frame()
    for _case, row, _values, counts in CASES:
        for exp_id in counts:
            ids = out.setdefault(exp_id, set())
            ids.add(frame["id"][row])
    out["id.unique"].add("id-0020")  # the other copy
    out["source.unique"].add("id-0054")
    return out


def _bad_frame() -> pl.DataFrame:
    frame = make_battles(BAD_ROWS)
    for _case, row, values, _counts in CASES:
        frame = with_values(frame, row, **values)
    return frame


@pytest.fixture(scope="module")
def bad_report() -> quality.QualityReport:
    return validate(_bad_frame())


def test_bad_values_fail_exactly_their_expectations(bad_report):
    expected = _expected()
    assert failed(bad_report) == set(expected)


@pytest.mark.parametrize(("case", "row", "values", "counts"), CASES, ids=[c[0] for c in CASES])
def test_bad_value_golden(bad_report, case, row, values, counts):
    expected = _expected()
    for exp_id, count in counts.items():
        result = row_of(bad_report, exp_id)
        assert result["success"] is False, case
        assert result["unexpected_count"] == count, case
        assert set(result["sample_ids"]) == expected[exp_id], case
        assert len(result["sample_ids"]) == count
        nonmissing = BAD_ROWS - (result["missing_count"] or 0)
        if exp_id.endswith(".not_null"):
            nonmissing = BAD_ROWS
        assert result["unexpected_percent"] == pytest.approx(100 * count / nonmissing), case


def test_sample_values_name_the_offending_values(bad_report):
    assert row_of(bad_report, "winner.in_set")["sample_values"] == ['"draw"']
    assert row_of(bad_report, "models.differ")["sample_values"] == ['"deepseek-v3-0324"']
    assert row_of(bad_report, "creative_writing_score.in_set")["sample_values"] == [
        '"nononoyesyes"'
    ]
    assert row_of(bad_report, "sum_user_tokens.non_negative")["sample_values"] == ["-4"]
    assert row_of(bad_report, "id.not_null")["sample_ids"] == [None]


def test_severities_decide_passed_errors(bad_report):
    assert not bad_report.passed_errors
    errors = set(bad_report.failures("error")["expectation_id"])
    warnings = set(bad_report.failures("warning")["expectation_id"])
    assert "winner.in_set" in errors and "models.differ" in errors
    assert "creative_writing_score.in_set" in warnings and "timestamp.in_range" in warnings
    assert errors.isdisjoint(warnings)
    with pytest.raises(ValueError):
        bad_report.failures("fatal")


def test_the_run_log_names_each_failed_expectation(bad_report, good_report, golden):
    """Issue 37: a failed warning is named in the run log (checks.py logs these lines), not only in the report."""
    lines = bad_report.failure_lines()
    assert len(lines) == bad_report.failures().height
    named = [re.match(r"(\w+): (\w+) expectation (\S+) failed on (\w+)", line).groups() for line in lines]
    assert ("battles", "warning", "timestamp.in_range", "timestamp") in named
    assert ("battles", "error", "winner.in_set", "winner") in named
    golden.check("checks", "a failed expectation's run log line",
                 next(line for line in lines if " winner.in_set " in line))
    assert good_report.failure_lines() == []
    assert good_report.summary_line().startswith(f"battles: {good_report.row_count:,} rows, ")
    assert "0 failed errors, 0 failed warnings" in good_report.summary_line()


def test_warnings_do_not_flip_passed_errors(good):
    """The real dump's quirks (null / malformed creative writing and IF scores) only warn."""
    frame = good
    for row, values in {
        1: {"creative_writing_score": "nononoyesyes"},
        2: {"creative_writing_score": "tie"},
        3: {"creative_writing_score": None},
        4: {"instruction_following_score": None},
        5: {"sum_user_tokens": 0, "evaluation_order": 0, "language": None},
    }.items():
        frame = with_values(frame, row, **values)
    report = validate(frame)
    assert report.passed_errors
    assert not report.passed
    assert report.failures("error").is_empty()
    assert row_of(report, "creative_writing_score.in_set")["unexpected_count"] == 2
    assert set(report.failures("warning")["expectation_id"]) == {
        "creative_writing_score.in_set",
        "creative_writing_score.not_null",
        "instruction_following_score.not_null",
        "sum_user_tokens.positive",
        "evaluation_order.at_least_1",
        "language.not_null",
    }


def test_real_dump_quirks_are_warnings(good):
    """The real dump's quirky scores, on otherwise valid battles: warnings only."""
    votes = pl.read_parquet(REAL_QUIRKY_VOTES)
    cw, ifs = "category_tag.creative_writing_v0.1.score", "category_tag.if_v0.1.score"
    quirky = votes.filter(
        pl.col(cw).is_null() | ~pl.col(cw).is_in(["yes", "no"]) | pl.col(ifs).is_null()
    )
    assert quirky.height == 29  # one row has both scores null
    frame = make_battles(quirky.height).with_columns(
        quirky.select(
            "id",
            pl.col(cw).alias("creative_writing_score"),
            pl.col(ifs).cast(pl.Int32).alias("instruction_following_score"),
        )
    )
    report = validate(frame)
    assert report.passed_errors
    assert {r: row_of(report, r)["unexpected_count"] for r in failed(report)} == {
        "creative_writing_score.not_null": 15,
        "creative_writing_score.in_set": 13,
        "instruction_following_score.not_null": 2,
    }
    sample = row_of(report, "creative_writing_score.in_set")["sample_ids"]
    assert set(sample) <= set(quirky["id"]) and len(sample) == 10


def test_sample_size_and_parameters(good):
    """sample_size bounds the samples, not the counts; $PARAMETER values can be overridden."""
    frame = good.with_columns(pl.lit("draw").alias("winner"))
    report = validate(frame, sample_size=3, parameters={"max_timestamp": "2025-05-01T12:05:30"})
    result = row_of(report, "winner.in_set")
    assert result["unexpected_count"] == 16
    assert result["sample_ids"] == ["id-0000", "id-0001", "id-0002"]
    assert len(result["sample_values"]) == 3
    late = row_of(report, "timestamp.in_range")
    assert late["unexpected_count"] == 10  # minutes 6..15 after 12:00
    assert late["sample_ids"] == ["id-0006", "id-0007", "id-0008"]
    assert failed(report) == {"winner.in_set", "timestamp.in_range"}


def test_default_max_timestamp_is_tomorrow():
    params = quality.default_parameters(dt.datetime(2025, 12, 31, 6))
    assert params == {"max_timestamp": "2026-01-01T06:00:00"}


# ---------------------------------------------------------------------------
# Schema problems
# ---------------------------------------------------------------------------


def test_schema_problems_fail_without_crashing(good):
    """Missing column, extra column, wrong type, no rows: reported, never raised."""
    frame = (
        good.drop("math")
        .with_columns(pl.col("turns").cast(pl.Int64), pl.lit(1).alias("extra"))
        .head(0)
    )
    report = validate(frame)
    assert failed(report) == {
        "columns.match_schema",
        "math.type",
        "math.not_null",
        "turns.type",
        "row_count.at_least_1",
    }
    details = row_of(report, "columns.match_schema")["details"]
    assert "math" in details and "extra" in details
    assert "math" in row_of(report, "math.not_null")["exception"]
    assert row_of(report, "turns.type")["observed_value"] == '"Int64"'
    assert not report.passed_errors


def test_messages_golden(good):
    messages = make_messages(good.head(4))
    rows = {
        0: {"side": "c"},
        1: {"turn": 0},
        2: {"position": -1},
        3: {"battle_id": None},
        4: {"role": "system"},
        5: {"num_tokens": -3},
        6: {"n_parts": 0},
    }
    for row, values in rows.items():
        messages = with_values(messages, row, **values)
    report = validate(messages, "messages")
    assert {r: row_of(report, r)["unexpected_count"] for r in failed(report)} == {
        "side.in_set": 1,
        "turn.at_least_1": 1,
        "position.non_negative": 1,
        "battle_id.not_null": 1,
        "role.in_set": 1,
        "num_tokens.non_negative": 1,
        "n_parts.at_least_1": 1,
    }
    assert row_of(report, "side.in_set")["sample_ids"] == [messages["battle_id"][0]]
    assert set(report.failures("warning")["expectation_id"]) == {
        "role.in_set", "num_tokens.non_negative", "n_parts.at_least_1"
    }


def test_derived_columns_must_not_overwrite(good):
    with pytest.raises(quality.SuiteError, match="_same_model"):
        quality.add_derived_columns(good.with_columns(pl.lit(1).alias("_same_model")),
                                    {"_same_model": "model_a"})


def test_suite_columns_name_what_the_value_expectations_read(good):
    messages = quality.suite_columns("messages")
    assert messages[0] == "battle_id" and "text" not in messages and "images" not in messages
    assert set(messages) <= set(MESSAGES_SCHEMA)
    battles = quality.suite_columns("battles")
    assert "_same_model" not in battles and {"model_a", "model_b", "id"} <= set(battles)
    assert set(battles) <= set(BATTLES_SCHEMA)


@pytest.mark.parametrize("suite", ["battles", "messages"])
def test_validating_only_the_suite_columns_gives_the_same_report(good, suite):
    if suite == "battles":
        frame = _bad_frame()
    else:  # a few broken values, so that failures and sample ids are compared too
        frame = with_values(with_values(make_messages(good.head(4)), 0, side="c"), 3, battle_id=None)
    whole = validate(frame, suite)
    narrow = validate(frame.select(quality.suite_columns(suite)), suite, schema=frame.schema)
    assert not whole.passed
    assert narrow.results.equals(whole.results) and narrow.row_count == whole.row_count
    if suite == "messages":  # without the schema, the narrow frame fails the column-set check
        assert "columns.match_schema" in failed(validate(frame.select(quality.suite_columns(suite)), suite))


# ---------------------------------------------------------------------------
# validate_relation: a DuckDB table in bounded batches, the whole-table report
# ---------------------------------------------------------------------------

#: So small that every test below validates many batches.
BATCH = 7


def _duckdb_with(**tables: pl.DataFrame) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding each frame as table ``s.<name>``, rows in frame order."""
    con = duckdb.connect()
    con.execute("CREATE SCHEMA s")
    for name, frame in tables.items():
        arrow = frame.to_arrow()  # noqa: F841 - read by DuckDB below
        con.execute(f"CREATE TABLE s.{name} AS SELECT * FROM arrow")
    return con


def _far_apart_battles() -> pl.DataFrame:
    """The golden bad frame plus failures whose rows sit in different batches of BATCH rows."""
    frame = _bad_frame()
    frame = with_values(frame, 3, id="id-0055")  # a copy of the last row's id
    frame = with_values(frame, 5, source_row=50)  # a copy of row 50's (source_file, source_row)
    frame = with_values(frame, 54, sum_user_tokens=None)  # the -4 of row 31 becomes -4.0 in pandas
    for row in (2, 9, 16, 23, 30, 37):  # more offenders than the sample holds, one per batch
        frame = with_values(frame, row, language=None)
    return frame


@pytest.mark.slow
def test_batches_give_the_whole_table_report_battles():
    frame = _far_apart_battles()
    assert 3 // BATCH != 55 // BATCH and 5 // BATCH != 50 // BATCH  # consecutive batches would miss them
    con = _duckdb_with(battles=frame)
    whole = validate(frame, sample_size=4)
    batched = quality.validate_relation(con, '"s"."battles"', "battles", parameters=PARAMS, sample_size=4,
                                        batch_rows=BATCH)
    assert batched.results.equals(whole.results)  # every column of every expectation, samples in order
    assert (batched.row_count, batched.suite, batched.table) == (56, "battles", "battles")
    unique = row_of(batched, "id.unique")
    assert (unique["unexpected_count"], unique["element_count"], unique["missing_count"]) == (4, 56, 1)
    assert set(unique["sample_ids"]) == {"id-0020", "id-0055"}
    assert row_of(batched, "source.unique")["unexpected_count"] == 4  # rows 5, 50 and 53, 54
    # the first 4 offenders in table order, although each batch holds one of them
    assert row_of(batched, "language.not_null")["sample_ids"] == ["id-0002", "id-0009", "id-0016", "id-0023"]
    # an integer column with a null anywhere is converted alike in every batch
    assert row_of(batched, "sum_user_tokens.non_negative")["sample_values"] == ["-4.0"]
    assert row_of(batched, "row_count.at_least_1")["observed_value"] == "56"


def _bad_messages() -> pl.DataFrame:
    messages = make_messages(make_battles(8))
    last = messages.row(-1, named=True)
    messages = with_values(messages, 1, **{k: last[k] for k in ("battle_id", "side", "position")})
    for row, values in {0: {"side": "c"}, 9: {"battle_id": None}, 17: {"num_tokens": -3},
                        20: {"role": "system"}, 30: {"n_parts": 0}}.items():
        messages = with_values(messages, row, **values)
    return messages


@pytest.mark.parametrize("kind", ["TABLE", "VIEW", "PARQUET"])
def test_batches_give_the_whole_table_report_messages(kind, tmp_path):
    """The duplicate key sits in the first and the last batch; a view has no rowid (row_number() instead);
    a view over part files (a vote table's version, through a reuse's view) gives the rows' place in them."""
    messages = _bad_messages()
    con = _duckdb_with(messages=messages)
    if kind == "VIEW":
        con.execute("CREATE VIEW s.messages_view AS SELECT * FROM s.messages")
    if kind == "PARQUET":  # three part files, read in their order: the samples are the table's first rows
        for n, part in enumerate(messages.iter_slices(messages.height // 3 + 1)):
            part.write_parquet(tmp_path / f"part-{n:06d}.parquet")
        con.execute(f"CREATE VIEW s.files AS SELECT * FROM read_parquet('{tmp_path}/part-*.parquet')")
        con.execute('CREATE VIEW s.messages_view AS SELECT * FROM "s"."files"')
        assert quality._position(con, '"s"."messages_view"')[1].endswith("file_row_number")
    relation = '"s"."messages"' if kind == "TABLE" else '"s"."messages_view"'
    whole = validate(messages, "messages")
    batched = quality.validate_relation(con, relation, "messages", parameters=PARAMS, batch_rows=BATCH)
    assert batched.results.equals(whole.results)
    assert messages.height > 4 * BATCH
    key = row_of(batched, "key.unique")
    assert key["unexpected_count"] == 2 and key["sample_ids"] == [messages["battle_id"][1]] * 2
    assert failed(batched) == {"key.unique", "side.in_set", "battle_id.not_null", "num_tokens.non_negative",
                               "role.in_set", "n_parts.at_least_1"}


@pytest.mark.slow
def test_batches_skip_the_columns_a_dump_lacks():
    """Rows 20..39 come from a dump whose format lacks is_code and sum_user_tokens (null in all its rows)."""
    old = "lmarena-ai/old-dump"
    frame = make_battles(40).with_columns(
        dump=pl.when(pl.int_range(pl.len()) >= 20).then(pl.lit(old)).otherwise(pl.col("dump")))
    lacking = pl.col("dump") == old
    frame = frame.with_columns(
        is_code=pl.when(lacking).then(None).otherwise(pl.col("is_code")),
        sum_user_tokens=pl.when(lacking).then(None).otherwise(pl.col("sum_user_tokens")))
    frame = with_values(with_values(frame, 5, sum_user_tokens=-1), 25, language=None)
    con = _duckdb_with(battles=frame)
    gaps = unavailable_columns(frame)
    assert gaps == {old: ["is_code", "sum_user_tokens"]}
    assert quality.unavailable_in(con, '"s"."battles"') == gaps  # aggregated in DuckDB
    assert quality.unavailable_in(con, '"s"."battles"', ["is_code", "id"]) == {old: ["is_code"]}

    whole = validate_dumps(frame, "battles", gaps, parameters=PARAMS)
    batched = quality.validate_relation(con, '"s"."battles"', "battles", parameters=PARAMS, batch_rows=BATCH)
    assert batched.results.equals(whole.results)
    assert failed(batched) == {"sum_user_tokens.non_negative", "sum_user_tokens.positive", "language.not_null"}
    assert row_of(batched, "is_code.not_null")["element_count"] == 20  # the other dump's rows only
    assert row_of(batched, "sum_user_tokens.non_negative")["sample_ids"] == ["id-0005"]
    assert row_of(batched, "language.not_null")["element_count"] == 40  # language is available in both
    # checked on every row, the lacking dump's nulls would fail
    assert "is_code.not_null" in failed(quality.validate_relation(
        con, '"s"."battles"', "battles", unavailable={}, parameters=PARAMS, batch_rows=20))


class _Reads:
    """A DuckDB connection that records how many rows each read brings into Python."""

    def __init__(self, con, log: list[tuple[str, int]]):
        self._con, self.log = con, log

    def execute(self, sql: str, params=None):
        self._con.execute(sql, params or [])
        return _Result(self._con, sql, self.log)

    def cursor(self):
        return _Reads(self._con.cursor(), self.log)

    def close(self):
        self._con.close()


class _Result:
    def __init__(self, con, sql: str, log: list[tuple[str, int]]):
        self._con, self._sql, self._log = con, sql, log

    def pl(self) -> pl.DataFrame:
        frame = self._con.pl()
        self._log.append((self._sql, frame.height))
        return frame

    def fetchone(self):
        self._log.append((self._sql, 1))
        return self._con.fetchone()

    def to_arrow_reader(self, batch_size: int):
        reader = self._con.to_arrow_reader(batch_size)
        log, sql = self._log, self._sql

        class Reader:
            schema = reader.schema

            def __iter__(self):
                for batch in reader:
                    log.append((sql, batch.num_rows))
                    yield batch

        return Reader()


def test_batches_read_no_more_than_about_batch_rows():
    """Every read brings at most ~batch_rows rows into Python, and each pass reads each row once."""
    messages = make_messages(make_battles(60))
    batch_rows = 40
    log: list[tuple[str, int]] = []
    con = _Reads(_duckdb_with(messages=messages), log)
    report = quality.validate_relation(con, '"s"."messages"', "messages", parameters=PARAMS, batch_rows=batch_rows)
    assert report.results.equals(validate(messages, "messages").results)
    streamed = [n for sql, n in log if "hash(" not in sql and quality.POSITION_COLUMN in sql]
    partitioned = [n for sql, n in log if "hash(" in sql]
    assert max(streamed) <= batch_rows and sum(streamed) == messages.height == 320
    # the hash partitions: one query, its rows read once, in slices of a batch's rows / PARTITION_SLICES
    assert len({sql for sql, _ in log if "hash(" in sql}) == 1 and sum(partitioned) == messages.height
    assert max(partitioned) <= batch_rows // quality.PARTITION_SLICES
    key = ["battle_id", "side", "position"]
    parts = list(quality.read_batches(_duckdb_with(messages=messages), '"s"."messages"', key, key=key,
                                      batch_rows=batch_rows))
    assert len(parts) == 8 and max(p.height for p in parts) <= 1.5 * batch_rows  # about batch_rows each
    assert sum(p.height for p in parts) == 320 and all(p.columns == [quality.POSITION_COLUMN, *key] for p in parts)
    assert all(p[quality.POSITION_COLUMN].is_sorted() for p in parts)  # each in table order
    # every copy of a key in one batch: the keys of two batches never meet
    keys = [set(p.select(key).iter_rows()) for p in parts]
    assert sum(len(k) for k in keys) == len(set().union(*keys))
    others = [n for sql, n in log if quality.POSITION_COLUMN not in sql]
    assert max(others) <= 1  # counts, the schema (LIMIT 0) and one row per dump


def test_default_batches_hold_a_budget_of_values_not_of_rows(monkeypatch):
    """Without batch_rows a pass reads DEFAULT_BATCH_CELLS values at a time: a narrow pass more rows
    than a wide one, and a table whose widest read fits in one batch is one validation."""
    messages = make_messages(make_battles(60))  # 320 rows; the rowwise pass reads 8 columns + the position
    expected = validate(messages, "messages").results
    monkeypatch.setattr(quality, "DEFAULT_BATCH_CELLS", 9 * 50)  # 50 rows of the rowwise pass, 112 of the key's
    log: list[tuple[str, int]] = []
    report = quality.validate_relation(_Reads(_duckdb_with(messages=messages), log), '"s"."messages"',
                                       "messages", parameters=PARAMS)
    assert report.results.equals(expected)
    streamed = [n for sql, n in log if "hash(" not in sql and quality.POSITION_COLUMN in sql]
    partitioned = [n for sql, n in log if "hash(" in sql]
    assert max(streamed) == 50 and sum(streamed) == 320
    # battle_id, side, position + the position: 4 columns, 112 rows a batch: 3 partitions of one sorted query
    assert len({sql for sql, _ in log if "hash(" in sql}) == 1 and sum(partitioned) == 320
    assert "% 3" in next(sql for sql, _ in log if "hash(" in sql)
    monkeypatch.setattr(quality, "DEFAULT_BATCH_CELLS", 9 * 320)  # the whole table in one batch
    log.clear()
    report = quality.validate_relation(_Reads(_duckdb_with(messages=messages), log), '"s"."messages"',
                                       "messages", parameters=PARAMS)
    assert report.results.equals(expected)
    assert [n for sql, n in log if quality.POSITION_COLUMN in sql] == [320]  # one read, no hash partition
    assert quality.rows_per_batch(57) == quality.DEFAULT_BATCH_CELLS // 57
    assert quality.rows_per_batch(57, batch_rows=7) == 7


def test_an_empty_table_gives_the_empty_frame_report(good):
    empty = good.head(0)
    batched = quality.validate_relation(_duckdb_with(battles=empty), '"s"."battles"', "battles",
                                        parameters=PARAMS, batch_rows=BATCH)
    assert batched.results.equals(validate(empty).results)
    assert failed(batched) == {"row_count.at_least_1"} and batched.row_count == 0


def test_plan_batches_of_the_shipped_suites():
    battles = quality.read_suite("battles")
    plan = quality.plan_batches(battles, {})
    types = {e["id"]: e["type"] for e in battles["expectations"]}
    assert {types[i] for i in plan.schema_ids} <= quality.SCHEMA_EXPECTATION_TYPES
    assert plan.count_ids == ("row_count.at_least_1",)
    rowwise, *keyed = plan.passes
    assert (rowwise.key, rowwise.lacking) == ((), ())
    assert {types[i] for i in rowwise.ids} <= quality.ROW_EXPECTATION_TYPES
    assert [(p.key, p.lacking, p.ids) for p in keyed] == [
        (("id",), (), ("id.unique",)), (("source_file", "source_row"), (), ("source.unique",))]
    placed = [*plan.schema_ids, *plan.count_ids, *(i for p in plan.passes for i in p.ids)]
    assert sorted(placed) == sorted(types)  # each expectation exactly once

    messages = quality.plan_batches(quality.read_suite("messages"), {})
    assert [(p.key, p.ids) for p in messages.passes[1:]] == [(("battle_id", "side", "position"), ("key.unique",))]

    lacking = quality.plan_batches(battles, {"d": ["is_code", "math"]})
    assert [(p.lacking, p.ids) for p in lacking.passes if p.lacking] == [
        (("d",), ("is_code.not_null", "math.not_null"))]


@pytest.mark.parametrize(("expectation", "message"), [
    ({"type": "expect_column_mean_to_be_between", "kwargs": {"column": "turns", "min_value": 1}}, "no rule"),
    ({"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id", "mostly": 0.9}}, "mostly"),
])
def test_plan_batches_rejects_what_batches_cannot_merge(expectation, message):
    suite = {"expectations": [{"id": "x", "meta": {"severity": "error"}, **expectation}]}
    with pytest.raises(quality.SuiteError, match=message):
        quality.plan_batches(suite, {})


def _batch_row(**values) -> dict:
    row = {"success": True, "element_count": 0, "unexpected_count": 0, "missing_count": 0,
           "observed_value": None, "details": None, "sample_ids": [], "sample_values": [], "exception": None}
    return {**row, **values}


def test_merge_batch_results_sums_counts_and_keeps_the_first_samples_by_position():
    rows = [
        _batch_row(success=False, element_count=10, unexpected_count=2, missing_count=2,
                   sample_ids=["c", "e"], sample_values=["3", "5"]),
        _batch_row(element_count=5, unexpected_count=0, missing_count=0),
        _batch_row(success=False, element_count=6, unexpected_count=3, missing_count=1,
                   sample_ids=["a", "d", "f"], sample_values=["1", "4", "6"]),
    ]
    merged = quality.merge_batch_results(rows, [[3, 5], [], [1, 4, 6]], sample_size=3)
    assert merged["success"] is False
    assert (merged["element_count"], merged["unexpected_count"], merged["missing_count"]) == (21, 5, 3)
    assert merged["unexpected_percent"] == 5 / 18 * 100  # of the non-null values, as GX
    assert merged["sample_ids"] == ["a", "c", "d"] and merged["sample_values"] == ["1", "3", "4"]
    # not_null counts no missing values: the share of all values; no positions: batch order
    not_null = [_batch_row(element_count=4, unexpected_count=1, missing_count=None, sample_ids=["x"]),
                _batch_row(element_count=4, unexpected_count=1, missing_count=None, sample_ids=["y"])]
    merged = quality.merge_batch_results(not_null, [None, None], sample_size=10)
    assert merged["unexpected_percent"] == 25.0 and merged["sample_ids"] == ["x", "y"]
    assert merged["missing_count"] is None
    # no value anywhere: no percentage, as GX
    assert quality.merge_batch_results([_batch_row()], [[]], 10)["unexpected_percent"] is None


def test_gx_lets_go_of_the_validated_frames(good, monkeypatch):
    """Otherwise a batch would stay alive while the next is read, and a frame outlive its check."""
    converted = []
    to_pandas_values = quality.to_pandas_values

    def keep_a_weak_reference(*args, **kwargs):
        frame = to_pandas_values(*args, **kwargs)
        converted.append(weakref.ref(frame))
        return frame

    monkeypatch.setattr(quality, "to_pandas_values", keep_a_weak_reference)
    validate(make_messages(good.head(4)), "messages")
    quality.validate_relation(_duckdb_with(messages=make_messages(good)), '"s"."messages"', "messages",
                              parameters=PARAMS, batch_rows=BATCH)
    gc.collect()
    assert len(converted) > 2 and all(ref() is None for ref in converted)


def test_gx_fingerprints_no_batch(good, monkeypatch):
    """GX's pandas engine would hash every row of each batch for a fingerprint no report reads (a third of the
    messages check's CPU): the report is the same without it. Fails if a GX upgrade renames the threshold."""
    from great_expectations.execution_engine import pandas_execution_engine

    fingerprinted = []
    real = pandas_execution_engine.hash_pandas_dataframe
    monkeypatch.setattr(pandas_execution_engine, "hash_pandas_dataframe",
                        lambda df: fingerprinted.append(len(df)) or real(df))
    report = validate(good)
    batched = quality.validate_relation(_duckdb_with(messages=make_messages(good)), '"s"."messages"', "messages",
                                        parameters=PARAMS, batch_rows=BATCH)
    assert fingerprinted == [] and report.passed_errors and batched.row_count > BATCH
    monkeypatch.setattr(pandas_execution_engine, "HASH_THRESHOLD", 1e9)  # GX's own: every batch hashed
    fingerprinted_report = validate(good)
    assert fingerprinted and fingerprinted_report.results.equals(report.results)
