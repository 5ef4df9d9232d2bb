"""The package's Python sources, for the tests that check its structure by reading them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import arena_pipeline

PACKAGE = Path(arena_pipeline.__file__).parent


def package_sources(skip: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """``(path relative to the package, source)`` of every module, in path order, but those whose relative
    path starts with one of ``skip``."""
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if not relative.startswith(skip):
            yield relative, path.read_text(encoding="utf-8")
