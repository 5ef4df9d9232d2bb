"""The golden files' keeper (support/golden.py): a changed text fails, a regeneration rewrites only what it met."""

from __future__ import annotations

import pytest

from arena_pipeline_tests.support.golden import Golden, read_family


def test_a_text_is_compared_with_its_case_and_temporary_paths_read_tmp(tmp_path):
    folder = tmp_path / "golden"
    recorder = Golden(True, tmp_path, folder)
    recorder.check("errors", "missing file", f"error: {tmp_path / 'test_a0' / 'x.csv'} does not exist  \n")
    recorder.check("errors", "bad flag", "error: --top takes a number")
    recorder.write()
    assert read_family(folder / "errors.txt") == {"bad flag": "error: --top takes a number",
                                                  "missing file": "error: <tmp>/x.csv does not exist"}
    assert recorder.normalise(f"at {tmp_path / 'test_a0' / 'w.duckdb'}") == "at <tmp>/w.duckdb"
    checker = Golden(False, tmp_path, folder)
    checker.check("errors", "missing file", f"error: {tmp_path / 'test_b1' / 'x.csv'} does not exist")
    with pytest.raises(AssertionError, match="differs"):
        checker.check("errors", "missing file", "error: x.csv is missing")
    checker.check("errors", "bad flag", "error: --top takes 7", {"7": "a number"})
    with pytest.raises(AssertionError, match="no golden case"):
        checker.check("errors", "new case", "anything")


def test_a_case_met_twice_with_two_texts_is_refused(tmp_path):
    recorder = Golden(True, tmp_path, tmp_path / "golden")
    recorder.check("lines", "a", "one")
    recorder.check("lines", "a", "one")  # the same text again: one case
    with pytest.raises(AssertionError, match="two texts"):
        recorder.check("lines", "a", "another")


def test_a_regeneration_keeps_the_cases_it_did_not_meet(tmp_path):
    folder = tmp_path / "golden"
    first = Golden(True, tmp_path, folder)
    first.check("lines", "a", "one")
    first.check("lines", "b", "two")
    first.write()
    second = Golden(True, tmp_path, folder)
    second.check("lines", "b", "two, reworded")
    second.write()
    assert read_family(folder / "lines.txt") == {"a": "one", "b": "two, reworded"}


def test_a_document_is_compared_whole(tmp_path):
    folder = tmp_path / "golden"
    recorder = Golden(True, tmp_path, folder)
    recorder.check_document("catalogue.json", '{"a": 1}')
    recorder.write()
    Golden(False, tmp_path, folder).check_document("catalogue.json", '{"a": 1}')
    with pytest.raises(AssertionError, match="differs"):
        Golden(False, tmp_path, folder).check_document("catalogue.json", '{"a": 2}')
