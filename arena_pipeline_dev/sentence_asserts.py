"""Count the test assertions that pin an English sentence (issue 46 item 4): ``python -m arena_pipeline_dev.sentence_asserts``.

An assertion counts when its test (or a ``match=`` argument, as ``pytest.raises`` takes) holds a string literal,
f-strings included, of at least ``--min`` characters (default 40) with five words or more, that is not SQL. A word is
a blank-separated token of letters (an apostrophe or hyphen inside, punctuation around it): an identifier, a path, a flag,
an HTML tag or a ``key=value`` is no English word, so markup, commands and data listings do not count. Messages belong in
the golden files (``arena_pipeline_tests/golden/``, compared once per family); the rest of the tests assert on
structured results. Prints the count per file, most first, and the total.
"""

from __future__ import annotations

import argparse
import ast
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).parents[1] / "arena_pipeline_tests"
#: a word: letters, an apostrophe or hyphen inside; two letters at least
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]")
#: what may stand around a word in a sentence (quotes, brackets, punctuation; a regex's backslash)
_AROUND = "\"'`()[]{}<>,.;:!?*\\"
#: SQL is no sentence (a query the test runs, not a message it pins)
_SQL = re.compile(r"^\s*(SELECT|WITH|CREATE|INSERT|UPDATE|DELETE|DROP|ALTER|COPY|ATTACH|PRAGMA|SET|BEGIN)\b", re.IGNORECASE)


def _strings(node: ast.AST) -> Iterator[str]:
    for child in ast.walk(node):
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            yield child.value
        elif isinstance(child, ast.JoinedStr):
            yield "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in child.values)


def words(text: str) -> list[str]:
    """The English words of ``text``: its blank-separated tokens that are letters once the punctuation around is off."""
    return [token for token in (part.strip(_AROUND) for part in text.split()) if _WORD.fullmatch(token)]


def is_sentence(text: str, least: int = 40) -> bool:
    """Whether ``text`` reads as an English sentence: ``least`` characters or more, five words, no SQL."""
    return len(text) >= least and len(words(text)) >= 5 and not _SQL.match(text)


def sentence_asserts(source: str, least: int = 40) -> list[int]:
    """The lines of the assertions of ``source`` that pin a sentence."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assert):
            pinned = [node.test]
        elif isinstance(node, ast.Call):
            pinned = [k.value for k in node.keywords if k.arg == "match"]
        else:
            continue
        if any(is_sentence(text, least) for value in pinned for text in _strings(value)):
            lines.append(node.lineno)
    return sorted(lines)


def count(root: Path = TESTS, least: int = 40) -> Counter:
    """Sentence assertions per test file (path relative to ``root``'s parent)."""
    found = Counter()
    for path in sorted(root.rglob("*.py")):
        if hits := sentence_asserts(path.read_text(encoding="utf-8"), least):
            found[path.relative_to(root.parent).as_posix()] = len(hits)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=TESTS, help="the tests' folder (default: the repository's)")
    parser.add_argument("--min", type=int, default=40, dest="least", help="the shortest sentence counted")
    args = parser.parse_args(argv)
    found = count(args.root, args.least)
    for path, n in found.most_common():
        print(f"{n:4d}  {path}")
    print(f"{sum(found.values()):4d}  total")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
