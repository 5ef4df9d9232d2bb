"""The polling reader of ``bench_readers.py`` and ``bench_lake.py``: counts failed and mixed reads of a publication."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import duckdb

#: the tables each read counts, against the row counts ``arena.publications.rows`` records
TABLES = ("leaderboard", "battles", "pairwise")


def read_publication(con: duckdb.DuckDBPyConnection) -> tuple[int, bool, int]:
    """(the newest publication's id, whether ``TABLES`` have the row counts it records, a hash of its
    leaderboard), read in one transaction."""
    con.execute("BEGIN TRANSACTION")
    pid, rows = con.execute("SELECT publication_id, rows FROM arena.publications "
                            "ORDER BY publication_id DESC LIMIT 1").fetchone()
    rows = json.loads(rows)
    counts = {t: con.execute(f"SELECT count(*) FROM arena.{t}").fetchone()[0] for t in TABLES}
    board = con.execute("SELECT sum(hash(model, rating)) FROM arena.leaderboard").fetchone()[0]
    con.execute("COMMIT")
    return pid, all(rows.get(t) == n for t, n in counts.items()), board


def poll(connect: Callable[[], duckdb.DuckDBPyConnection], stop: str | os.PathLike[str],
         out: str | os.PathLike[str], *, hold: bool = False, interval_s: float = 0.2) -> dict:
    """Read the newest publication every ``interval_s`` until the file ``stop`` exists, with a new
    ``connect()`` per read, or one for every read (``hold``); prints ``ready`` once it may start.

    A read is *mixed* when its tables' row counts are not the ones its publication records, or its
    leaderboard is not the one first read for that publication. The figures (reads attempted, failed
    and mixed, the longest time between two good reads, the publications seen, the errors by kind)
    are written to ``out`` as JSON and returned.
    """
    attempted = failed = mixed = 0
    errors: dict[str, int] = {}
    seen: dict[int, int] = {}
    last_good, longest = None, 0.0
    held = connect() if hold else None
    print("ready", flush=True)
    while not os.path.exists(stop):
        attempted += 1
        now = time.monotonic()
        try:
            con = held or connect()
            try:
                pid, counts_match, board = read_publication(con)
            finally:
                if held is None:
                    con.close()
            mixed += not counts_match or seen.setdefault(pid, board) != board
            longest = max(longest, now - last_good) if last_good is not None else longest
            last_good = now
        except Exception as exc:  # a reader counts whatever fails, by kind
            failed += 1
            key = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:100]}"
            errors[key] = errors.get(key, 0) + 1
        time.sleep(interval_s)
    if held is not None:
        held.close()
    if last_good is not None:  # the gap after the last good read counts too
        longest = max(longest, time.monotonic() - last_good)
    figures = {"attempted": attempted, "failed": failed, "mixed": mixed, "longest_gap_s": longest,
               "publications_seen": sorted(seen), "errors": errors}
    with open(out, "w", encoding="utf-8") as sink:
        json.dump(figures, sink)
    return figures
