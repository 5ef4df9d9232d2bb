"""Atomic file writes: a temporary file beside the target, then one rename (readers never see half a file)."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


def make_folder(folder: Path) -> None:
    """Create ``folder`` and its missing parents. Where a file stands in the way, raise
    NotADirectoryError naming that file (``mkdir`` says only "File exists" or "Not a directory")."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        blocking = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
        if blocking is None:
            raise
        raise NotADirectoryError(errno.ENOTDIR, f"{blocking} is a file, not a folder") from exc


def write_text_atomic(path: str | os.PathLike[str], text: str, mode: int = 0o644) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in its folder (created if missing),
    renamed over ``path`` once complete; on any failure ``path`` is unchanged and no temporary is left."""
    out = Path(path)
    make_folder(out.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
