"""The values of a file's own batch no later step may touch (issue 38, items 1 and 5): found at any depth,
made null, their rows named; other rows and columns untouched."""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from arena_pipeline.core.dataset.raw_values import decoded, merge_screens, screen_raw


def _text(values: list[bytes]) -> pa.Array:
    """A string array holding ``values`` as they are (no UTF-8 validation: what pyarrow's reader returns)."""
    return pa.array(values, pa.binary()).view(pa.string())


def _batch() -> pa.Table:
    parts = pa.StructArray.from_arrays([_text([b"hi", b"x", b"gpt\xff\xfe", b"y", b"z"])], ["text"])
    messages = pa.ListArray.from_arrays(pa.array([0, 1, 2, 4, 5], pa.int32()), parts)
    return pa.table({
        "model_a": _text([b"a", b"b\xc3", b"c", b"d"]),
        "messages": messages,
        "turn": pa.array([1, 2**63 + 5, 3, 2**64 - 1], pa.uint64()),
        "meta": pa.StructArray.from_arrays([pa.array([1, 2, 3, 2**63], pa.uint64())], ["tokens"]),
        "ok": pa.array(["p", "q", "r", "s"]),
    })


def test_bad_values_are_null_and_their_rows_named(golden):
    table, screen = screen_raw(_batch())
    table.validate(full=True)  # every text left is UTF-8
    assert screen.get_column("rule").to_list() == [None, "invalid_utf8,count_out_of_range", "invalid_utf8",
                                                   "count_out_of_range"]
    details = screen.get_column("detail").to_list()
    assert details[0] is None
    # each detail names the column, its value and its stored type (turn, then meta.tokens: file order)
    assert "b'b\\xc3'" in details[1] and "turn=9223372036854775813 " in details[1]
    assert details[3].index("turn=18446744073709551615 ") < details[3].index("meta.tokens=9223372036854775808 ")
    golden.check("quarantine", "raw values: invalid UTF-8 and counts out of range", "\n".join(details[1:]))
    assert table.to_pylist() == [
        {"model_a": "a", "messages": [{"text": "hi"}], "turn": 1, "meta": {"tokens": 1}, "ok": "p"},
        {"model_a": None, "messages": [{"text": "x"}], "turn": None, "meta": {"tokens": 2}, "ok": "q"},
        {"model_a": "c", "messages": [{"text": None}, {"text": "y"}], "turn": 3, "meta": {"tokens": 3}, "ok": "r"},
        {"model_a": "d", "messages": [{"text": "z"}], "turn": None, "meta": {"tokens": None}, "ok": "s"},
    ]
    assert table.column("ok").chunk(0).buffers() == _batch().column("ok").chunk(0).buffers()  # untouched


def test_a_slice_is_screened_on_its_own_rows():
    """A batch may be a slice of a larger array (list offsets not starting at 0)."""
    table, screen = screen_raw(_batch().slice(2, 2))
    table.validate(full=True)
    assert screen.get_column("rule").to_list() == ["invalid_utf8", "count_out_of_range"]
    assert table.column("messages").to_pylist() == [[{"text": None}, {"text": "y"}], [{"text": "z"}]]
    clean, screen = screen_raw(_batch().slice(0, 1))
    assert screen.get_column("rule").to_list() == [None] and clean.equals(_batch().slice(0, 1))


def test_text_is_not_validated_again_when_the_reader_did():
    table, screen = screen_raw(_batch().select(["model_a"]), utf8=False)
    assert screen.get_column("rule").to_list() == [None] * 4 and table.column("model_a").chunk(0).buffers() == \
        _batch().column("model_a").chunk(0).buffers()


def test_screens_merge_in_order_and_dictionaries_decode():
    first = screen_raw(_batch())[1]
    other = pl.DataFrame({"rule": ["not_anonymous", None, None, None], "detail": ["anony is false", None, None, None]},
                         schema={"rule": pl.String, "detail": pl.String})
    merged = merge_screens(first, other)
    assert merged.get_column("rule").to_list() == ["not_anonymous", "invalid_utf8,count_out_of_range",
                                                   "invalid_utf8", "count_out_of_range"]
    assert merged.get_column("detail")[0] == "anony is false"
    encoded = pa.table({"m": pa.array(["a", "b", "a"]).dictionary_encode(),
                        "s": pa.StructArray.from_arrays([pa.array(["x", "y", "x"]).dictionary_encode()], ["t"])})
    plain = decoded(encoded)
    assert plain.schema == pa.schema([("m", pa.string()), ("s", pa.struct([("t", pa.string())]))])
    assert plain.to_pylist() == encoded.to_pylist()



def test_without_validation_counts_are_still_found_at_any_depth():
    """A batch whose text its reader validated is screened for counts only, nested ones included; its text
    columns are left as they are (not walked)."""
    counts = pa.StructArray.from_arrays([pa.array([[1], [2**63]], pa.list_(pa.uint64()))], ["tokens"])
    table = pa.table({"meta": counts, "messages": _batch().column("messages").chunk(0).slice(0, 2)})
    screened, screen = screen_raw(table, utf8=False)
    assert screen.get_column("rule").to_list() == [None, "count_out_of_range"]
    assert "meta.tokens[]=9223372036854775808 " in screen.get_column("detail")[1]
    assert screened.column("meta").to_pylist() == [{"tokens": [1]}, {"tokens": [None]}]
    assert screened.column("messages").chunk(0).buffers() == table.column("messages").chunk(0).buffers()
