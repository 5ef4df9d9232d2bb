"""write_text_atomic: the target is the old file or the whole new one, never half, and no temporary is left."""

from __future__ import annotations

import pytest

from arena_pipeline.core.store.atomic import write_text_atomic


def test_write_creates_the_folder_and_replaces_the_file(tmp_path):
    target = tmp_path / "new" / "index.html"
    assert write_text_atomic(target, "first") == target
    write_text_atomic(target, "second ✓")
    assert target.read_text(encoding="utf-8") == "second ✓"
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    assert [p.name for p in target.parent.iterdir()] == ["index.html"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "index.html"
    write_text_atomic(target, "old")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(target, "half \ud800 written")  # a lone surrogate cannot be encoded
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["index.html"]
