"""Writes ``core.method_catalogue``: the built-in rating methods' names, labels, notes and roles, from their classes.

``python -m arena_pipeline.core.ranking.catalogue`` regenerates the file after a method is added or
relabelled; ``arena_pipeline_tests/core/ranking/test_methods.py`` holds it equal to :func:`catalogue_text`.
"""

from __future__ import annotations

import pathlib
import pprint

from arena_pipeline.core import method_catalogue
from arena_pipeline.core.ranking import methods as _methods  # noqa: F401 - registers the built-in methods
from arena_pipeline.core.ranking.rating_method import RATING_METHODS

#: Where the generated module lives.
CATALOGUE_PATH = pathlib.Path(method_catalogue.__file__)


def catalogue_text() -> str:
    """The source of ``core.method_catalogue`` for the registered methods (in registration order)."""
    methods = list(RATING_METHODS.values())
    roles: dict[str, tuple[str, ...]] = {}
    for m in methods:
        if m.role is not None:
            roles[m.role] = (*roles.get(m.role, ()), m.name)

    def value(obj: object) -> str:
        return pprint.pformat(obj, width=110, sort_dicts=False)

    return "\n".join([
        '"""The rating methods\' names, labels, notes and roles, for readers that load no ranking code (generated).',
        "",
        "Written by ``python -m arena_pipeline.core.ranking.catalogue`` from the methods' classes",
        "(``core.ranking.methods``); do not edit. ``core.labels`` reads it.",
        '"""',
        "",
        "#: The built-in methods, in board order.",
        f"METHODS: tuple[str, ...] = {value(tuple(m.name for m in methods))}",
        "#: Their people-facing names.",
        f"LABELS: dict[str, str] = {value({m.name: m.label for m in methods})}",
        "#: What a reader must know before reading a method's ratings.",
        f"NOTES: dict[str, str] = {value({m.name: m.note for m in methods if m.note})}",
        "#: The methods of each role (``RatingMethod.role``).",
        f"ROLES: dict[str, tuple[str, ...]] = {value(roles)}",
        "",
    ])


def main() -> None:
    """Write the catalogue."""
    CATALOGUE_PATH.write_text(catalogue_text())


if __name__ == "__main__":
    main()
