"""Golden files: each family of user-facing message is pinned once, in ``arena_pipeline_tests/golden/``.

A test hands what a user reads (a refusal, a CLI error, a run's last line) to :meth:`Golden.check` under
its family and a case name; the text is compared with the family's file (``golden/<family>.txt``), so
a wording change is one regeneration, reviewed as one diff, not a hunt through assertions:

    .venv/bin/pytest --regen-golden arena_pipeline_tests/test_cli.py

rewrites the cases the run met and keeps the others. Whole documents (the table catalogue) are pinned
the same way with :meth:`Golden.check_document`. Temporary paths read ``<tmp>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

#: where the golden files live
GOLDEN = Path(__file__).parents[1] / "golden"
#: a case's first line in a family's file
_CASE = "=== "
#: a test's own temporary folder (its name and number depend on the order the tests ran in)
_TEST_FOLDER = re.compile(r"<tmp>/[^/\s'\"]+")


def read_family(path: Path) -> dict[str, str]:
    """The cases of a family's file, by name, in file order."""
    cases: dict[str, list[str]] = {}
    current = None
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        if line.startswith(_CASE):
            current = line[len(_CASE):]
            cases[current] = []
        elif current is not None:
            cases[current].append(line)
    return {name: "\n".join(lines).rstrip("\n") for name, lines in cases.items()}


def render_family(cases: dict[str, str]) -> str:
    """A family's file: each case under its ``=== name`` line, by name."""
    return "".join(f"{_CASE}{name}\n{cases[name]}\n" for name in sorted(cases))


class Golden:
    """Compares texts with the golden files, or (``regen``) records them and rewrites the files at the end."""

    def __init__(self, regen: bool, temporary: Path, folder: Path = GOLDEN):
        self.regen, self.folder = regen, folder
        self._temporary = sorted({str(temporary), str(temporary.resolve())}, key=len, reverse=True)
        self._seen: dict[str, dict[str, str]] = {}
        self._documents: dict[str, str] = {}

    def normalise(self, text: str) -> str:
        """``text`` with a test's temporary folder as ``<tmp>`` and no trailing blanks or newlines."""
        for prefix in self._temporary:
            text = text.replace(prefix, "<tmp>")
            # a message cut short ("...") inside the folder's own path: how far in depends on the path's length
            # (a worker's folder under pytest-xdist is longer), so the cut path reads <tmp> as a cut test folder does
            cut = next((k for k in range(len(prefix) - 1, 4, -1) if f"{prefix[:k]}\u2026" in text), None)
            if cut is not None:
                text = text.replace(f"{prefix[:cut]}\u2026", "<tmp>")
        text = _TEST_FOLDER.sub("<tmp>", text)
        return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())

    def check(self, family: str, case: str, text: str, replace: Mapping[str, str] | None = None) -> None:
        """Assert that ``text`` is the family's golden ``case`` (record it with ``--regen-golden``); ``replace``:
        what varies from run to run (a run id, a time) and the placeholder it reads as, ``{value: "<run>"}``."""
        for value, placeholder in (replace or {}).items():
            text = text.replace(value, placeholder)
        text = self.normalise(text)
        if self.regen:
            seen = self._seen.setdefault(family, {})
            # one case, one text: two tests (or parameters) that say it differently are two cases
            assert seen.setdefault(case, text) == text, f"golden/{family}.txt, case {case!r}, met with two texts"
            return
        stored = read_family(self.folder / f"{family}.txt")
        assert case in stored, f"no golden case {case!r} in golden/{family}.txt: pytest --regen-golden"
        assert text == stored[case], f"golden/{family}.txt, case {case!r}, differs (pytest --regen-golden)"

    def check_document(self, name: str, text: str) -> None:
        """Assert that ``text`` is the golden file ``name`` (a whole document, rewritten with ``--regen-golden``)."""
        text = self.normalise(text) + "\n"
        if self.regen:
            self._documents[name] = text
            return
        path = self.folder / name
        assert path.exists(), f"no golden file golden/{name}: pytest --regen-golden"
        assert text == path.read_text(encoding="utf-8"), f"golden/{name} differs (pytest --regen-golden)"

    def write(self) -> None:
        """Write what a ``--regen-golden`` session recorded (a family keeps the cases the session did not meet)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for family, cases in self._seen.items():
            path = self.folder / f"{family}.txt"
            path.write_text(render_family({**read_family(path), **cases}), encoding="utf-8")
        for name, text in self._documents.items():
            (self.folder / name).write_text(text, encoding="utf-8")
