"""The public way to read the leaderboards: ``from arena_pipeline.reader import connect``."""

from __future__ import annotations

import os

from arena_pipeline.constants import DEFAULT_WAREHOUSE
from arena_pipeline.core.store.connections import ReaderConnection, open_reader
from arena_pipeline.core.store.reader import ALIAS, files_gone_message, held_publication

__all__ = ["ALIAS", "connect", "files_gone_message", "held_publication"]


def connect(path: str | os.PathLike[str] | None = None, *, timeout_s: float = 0.0,
            memory_limit: str | None = None) -> ReaderConnection:
    """A read-only connection to the newest publication of the warehouse ``path`` (default
    ``$ARENA_WAREHOUSE``, read now, else ``data/warehouse.duckdb``).

    Each call opens the file as it is now, even in a process that holds older connections to it (a
    plain ``duckdb.connect(path)`` would then share their database and read their publication). The
    connection keeps reading the publication it opened until it is closed: call ``connect`` again for
    the next one. ``arena.leaderboard`` and every other ``arena.*`` view resolve as usual. It reads
    and never writes: a statement that would write raises ``ReaderWriteError`` (``core/store/store.py``).
    """
    where = path if path not in (None, "") else (os.environ.get("ARENA_WAREHOUSE") or DEFAULT_WAREHOUSE)
    return open_reader(os.fspath(where), timeout_s=timeout_s, memory_limit=memory_limit)
