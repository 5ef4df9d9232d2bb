"""Peak memory of the ranking step's fit, part by part, on a warehouse a refresh has published.

Run (on a warehouse kept by ``bench_scale.py --keep``, e.g. the 10x one)::

    nice -n 5 .venv/bin/python benchmarks/bench_fit_memory.py SCRATCH/run/warehouse.duckdb [--bootstrap 100]

It opens the warehouse's published snapshot read-only and runs what the ``rankings`` step runs when it
fits every table, through the step's own :class:`~arena_pipeline.assets.rankings.Fit` (the votes read by
:func:`~arena_pipeline.assets.rankings.read_votes`, as the step reads them), one part after the other:
the read of the votes, the boards of every category (``compute_rankings``), each dump's own boards
(``per_dump_leaderboards``) and the held-out model fit (``compute_model_fit``). A sampler thread reads the
process's RSS (psutil) every 50 ms; after each part it prints the part's seconds, the peak RSS during it,
the RSS at its end, and its peak's rise over the RSS the fit started with. Each category's board is a part
of its own. With ``--json`` the same figures, and a checksum of the leaderboard (to compare code versions
on the same warehouse; and an exact one of every table of the fit, the leaderboard before any alignment),
are written to a file. Prints figures only; it is not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import psutil

from arena_pipeline.assets.rankings import FIT_TABLES, Fit, read_votes
from arena_pipeline.assets.run_config import RankingRunConfig
from arena_pipeline.core.ranking import leaderboard as leaderboard_module
from arena_pipeline.core.ranking import model_fit as model_fit_module
from arena_pipeline.core.store.warehouse import connect as connect_warehouse

MIB = 2**20
SAMPLE_SECONDS = 0.05


class Sampler(threading.Thread):
    """The process's RSS every ``SAMPLE_SECONDS``; ``mark()`` starts a new part and returns the last's peak."""

    def __init__(self):
        super().__init__(daemon=True)
        self.process = psutil.Process()
        self.peak = self.process.memory_info().rss
        self._stop_event = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self._stop_event.wait(SAMPLE_SECONDS):
            rss = self.process.memory_info().rss
            with self._lock:
                self.peak = max(self.peak, rss)

    def mark(self) -> tuple[int, int]:
        """(peak since the last mark, RSS now); the next part's peak starts at the RSS now."""
        rss = self.process.memory_info().rss
        with self._lock:
            peak, self.peak = max(self.peak, rss), rss
        return peak, rss

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


class Parts:
    """The figures of every part, printed as they come."""

    def __init__(self, sampler: Sampler):
        self.sampler, self.rows = sampler, []
        self.start_rss, self.last = sampler.mark()[1], time.perf_counter()
        print(f"{'part':<36} {'seconds':>8} {'peak MiB':>9} {'end MiB':>8} {'+MiB':>6}")

    @contextmanager
    def part(self, name: str):
        """The code inside the block as a part."""
        self.sampler.mark()
        self.last = time.perf_counter()
        yield
        self.close(name)

    def close(self, name: str) -> None:
        """What ran since the last part ended (or began) as a part."""
        seconds = time.perf_counter() - self.last
        peak, end = self.sampler.mark()
        self.last = time.perf_counter()
        row = {"part": name, "seconds": round(seconds, 2), "peak_mib": round(peak / MIB),
               "end_mib": round(end / MIB), "rise_mib": round((peak - self.start_rss) / MIB)}
        self.rows.append(row)
        print(f"{name:<36} {seconds:8.1f} {row['peak_mib']:9,} {row['end_mib']:8,} {row['rise_mib']:+6,}", flush=True)


def leaderboard_checksum(board: pl.DataFrame) -> str:
    """sha256 of the board's ratings, intervals and ranks, floats rounded to 6 decimals (as bench_scale.py)."""
    columns = ["category", "method", "model", "rating", "ci_lower", "ci_upper", "rank"]
    frame = board.select(columns).with_columns(pl.col(pl.Float64).round(6)).sort("category", "method", "model")
    return hashlib.sha256(frame.write_csv().encode()).hexdigest()[:16]


def exact_checksum(frame: pl.DataFrame) -> str:
    """sha256 of every row and column of ``frame`` as it is (floats in full), in its order."""
    return hashlib.sha256(frame.write_csv(float_precision=17).encode()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("warehouse", type=Path, help="the warehouse file a refresh published (its snapshot is read)")
    parser.add_argument("--bootstrap", type=int, default=100, help="bootstrap rounds (default 100, the pipeline's)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the figures to this JSON file")
    args = parser.parse_args()

    sampler = Sampler()
    sampler.start()
    parts = Parts(sampler)
    config = RankingRunConfig(bootstrap_rounds=args.bootstrap)

    def votes(ranking):  # as the step reads them: on a connection of their own, closed after
        with parts.part("read the votes"), connect_warehouse(str(args.warehouse), read_only=True) as con:
            return read_votes(con, "arena.battles", "arena.battle_categories", ranking)

    with connect_warehouse(str(args.warehouse), read_only=True) as con:
        quarantine = con.execute("SELECT rule, raw FROM arena.quarantine").pl()
    context = SimpleNamespace(log=logging.getLogger("bench_fit_memory"))
    fit = Fit(context, config, None, None, votes, quarantine)
    originals = {}

    def marked(module, name, label):  # a function of core a part of its own while the fit calls it
        function = originals[(module, name)] = getattr(module, name)

        def wrapper(*args, **kwargs):
            with parts.part(label(*args)):
                return function(*args, **kwargs)
        setattr(module, name, wrapper)

    marked(leaderboard_module, "_prepare", lambda *_: "boards: prepare")
    marked(leaderboard_module, "_category_rows", lambda *_: "boards: category rows")
    marked(leaderboard_module, "_rank_category", lambda category, *_: f"board {category}")
    marked(model_fit_module, "board_battles", lambda *_: "model fit: its battles")
    try:
        fit.battles  # noqa: B018 - the read, a part of its own
        output = fit.output
        parts.close("boards: gathered")
        with parts.part("per-dump boards"):
            fit.dump_boards  # noqa: B018
        fit.model_fit  # noqa: B018
        parts.close("model fit: its boards")
    finally:
        for (module, name), function in originals.items():
            setattr(module, name, function)
    sampler.stop()
    total = max(row["peak_mib"] for row in parts.rows)
    checksum = leaderboard_checksum(output.leaderboard)
    print(f"peak {total:,} MiB ({total * MIB / 1e9:.2f} GB); {fit.battles.height:,} votes; leaderboard {checksum}")
    tables = {table.name: exact_checksum(table.frame(fit)) for table in FIT_TABLES if table.name != "leaderboard"}
    tables["leaderboard"] = exact_checksum(output.leaderboard)
    print("every table of the fit, exactly: " + ", ".join(f"{name} {digest}" for name, digest in tables.items()))
    if args.json:
        args.json.write_text(json.dumps({"parts": parts.rows, "peak_mib": total, "votes": fit.battles.height,
                                         "leaderboard_sha256": checksum, "tables_sha256": tables}, indent=1))


if __name__ == "__main__":
    main()
