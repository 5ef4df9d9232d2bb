"""Text as shown in one line (a log line, a run tag, a check's description): flattened, cut, a revision shortened."""

from __future__ import annotations

import re


def short_revision(revision: str) -> str:
    """A revision as shown in one line: 12 characters of a commit sha, a local revision as it is."""
    return revision[:12] if re.fullmatch(r"[0-9a-f]{40}", revision) else revision


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` with its whitespace runs (newlines included) made single spaces, cut at ``limit``."""
    flat = " ".join(text.split())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"
