"""Tests of arena_pipeline.core.text."""

from arena_pipeline.core.text import one_line, short_revision


def test_a_commit_sha_is_cut_to_12_characters_and_a_local_revision_kept():
    assert short_revision("0123456789abcdef0123456789abcdef01234567") == "0123456789ab"
    assert short_revision("local-3f2a") == "local-3f2a"
    assert short_revision("0123456789ABCDEF0123456789abcdef01234567") == "0123456789ABCDEF0123456789abcdef01234567"


def test_one_line_flattens_whitespace_and_cuts_with_an_ellipsis():
    assert one_line("a\n  b\tc ") == "a b c"
    assert one_line("abcdef", 4) == "abc…" and one_line("abcd", 4) == "abcd" and one_line("abcdef") == "abcdef"
