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


def test_the_sentence_count_takes_words_not_markup_commands_or_data():
    """``arena_pipeline_dev.sentence_asserts``: a message counts; markup, a command line, a DSN and a ``key=value``
    listing of the same length do not (an identifier, a path or a tag is no English word)."""
    from arena_pipeline_dev.sentence_asserts import is_sentence, sentence_asserts

    messages = ["publication refused, nothing changed: the new overall board",
                r"no publication on 2025-06-03; the nearest: 2025-06-02 \(a regex\)"]
    assert all(is_sentence(text) for text in messages)
    assert not is_sentence("publication refused, nothing changed")  # under 40 characters
    for text in ('<td class="num" data-value="{}">{}</td><td class="num">{}</td>',
                 "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/pytest",
                 "ducklake:postgres:dbname=arena host=db.example.org user=arena",
                 "winner_model_a=1, winner_model_b=1, winner_tie=0",
                 "SELECT count(*) FROM arena.leaderboard WHERE category = 'overall' AND rank = 1"):
        assert not is_sentence(text), text
    source = ('assert x == "the run failed because the file was missing"\n'
              'assert y == "<a href=\\"docs/refresh.md\\">docs/refresh.md</a> <code>x</code>"\n')
    assert sentence_asserts(source) == [1]
