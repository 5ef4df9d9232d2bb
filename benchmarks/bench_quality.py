"""Wall time of the quality suites and the quarantine split on a full-size battles table.

Run::

    .venv/bin/python benchmarks/bench_quality.py [--votes PATH] [--repeat N]

The battles frame has the real dump's 135,634 rows: ``id``, ``model_a``, ``model_b``,
``winner`` and the 12 ``category_tag`` fields come from the real vote table
(``../shared/data/real/arena_hp140k_votes_with_category_tag.parquet`` from the repository root); the columns that file
lacks (session, order, language, is_code, timestamp, every conv_metadata count, the message
counts and provenance) are SYNTHETIC, drawn from a seeded generator with plausible
distributions (90% one-turn votes, 7% two, 3% three: close to the real 100-row sample). Every
row's ``dump`` is the real dump's id (``constants.DATASET_ID``) and ``also_in_dumps`` is null,
as the loader writes a vote of one dump. The messages frame is synthetic too: per battle and
side, one user and one assistant message per turn (~4.5 rows per battle), with its battle's
``dump``.

It prints the time to import GX and create its context (paid once per process), then the
validation wall time of each suite (pandas conversion included) and of ``split_quarantine``.

The asset checks' path (a table in DuckDB, validated as ``checks._suite_checks`` does) is measured
in two steps, so that each method's peak RSS is its own process's::

    .venv/bin/python benchmarks/bench_quality.py --write-db q.duckdb [--scale 4]
    .venv/bin/python benchmarks/bench_quality.py --db q.duckdb --method batched [--batch-rows N]
    .venv/bin/python benchmarks/bench_quality.py --db q.duckdb --method whole

``--write-db`` stores the two frames above as ``bench.battles`` / ``bench.messages`` (``--scale N``:
N copies, ids suffixed, built inside DuckDB). ``--method whole`` is the check before batching: the
suite's columns read into one Polars frame, ``dumps.unavailable_columns``, ``validate_dumps`` (kept in
``arena_pipeline_dev/quality_reference.py`` as the tests' reference for the batched validation);
``batched`` is ``validate_relation``. Each prints per suite the wall time and the process's peak
RSS (``ru_maxrss``) after it, next to the RSS before the first suite (imports + GX context).

The checks as a refresh runs them, on the versions a refresh checked (``bench_scale.py --keep`` keeps its
warehouse under ``<workdir>/bench_scale_<size>_*/run/``)::

    .venv/bin/python benchmarks/bench_quality.py --warehouse <kept>/run/warehouse.duckdb [--suites messages]

It prints per suite the rows, wall and CPU seconds of ``validate_relation`` on the checked version (the last by name)
(CPU: the process's, DuckDB's threads included; compare CPU on a shared machine), the peak RSS so far and a
sha256 of the report's rows, to compare two code versions on the same warehouse.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
from real_votes import REAL_COLUMNS, REAL_VOTES, load_real_votes  # noqa: E402  (benchmarks/ is on sys.path)

from arena_pipeline.constants import DATASET_ID
from arena_pipeline.core.dataset.schema import BATTLES_SCHEMA, MESSAGES_SCHEMA
from arena_pipeline.core.store.warehouse import connect as connect_warehouse

SEED = 20250529


def real_battles(path: Path = REAL_VOTES, seed: int = SEED) -> pl.DataFrame:
    """The real votes mapped to battles columns, padded with synthetic values (see module doc)."""
    frame = load_real_votes(path).select("id", "model_a", "model_b", "winner", *REAL_COLUMNS.values())
    frame = frame.with_columns(model_a_canonical=pl.col("model_a"), model_b_canonical=pl.col("model_b"))
    n = frame.height
    rng = np.random.default_rng(seed)
    turns = rng.choice([1, 2, 3], n, p=[0.9, 0.07, 0.03])
    order = rng.integers(1, 4, n)
    synthetic: dict[str, np.ndarray | list] = {
        "evaluation_session_id": [f"session-{i // 2:06d}" for i in range(n)],
        "evaluation_order": order,
        "language": rng.choice(["en", "pl", "de", "ru", "zh", "und"], n),
        "is_code": rng.random(n) < 0.3,
        "timestamp": np.datetime64("2025-04-17T00:00:00", "us")
        + rng.integers(0, 100 * 86_400, n).astype("timedelta64[s]"),
        "sum_user_tokens": rng.integers(1, 2000, n),
        "turns": turns,
        "n_messages_a": 2 * turns,
        "n_messages_b": 2 * turns,
        "n_user_messages_a": turns,
        "n_user_messages_b": turns,
        "full_conversation_turns": turns + order - 1,
        "source_file": ["data/train-00000-of-00007.parquet"] * n,
        "source_row": np.arange(n),
    }
    for side in ("a", "b"):
        synthetic[f"sum_assistant_{side}_tokens"] = rng.integers(1, 4000, n)
        synthetic[f"context_{side}_tokens"] = rng.integers(0, 500, n)
        for h in range(1, 7):
            synthetic[f"header_count_{side}_h{h}"] = rng.poisson(0.5, n)
        for kind in ("ordered", "unordered"):
            synthetic[f"list_count_{side}_{kind}"] = rng.poisson(3, n)
        synthetic[f"bold_count_{side}_asterisk"] = rng.poisson(6, n)
        synthetic[f"bold_count_{side}_underscore"] = rng.poisson(0.1, n)
    frame = frame.with_columns(pl.DataFrame(synthetic), dump=pl.lit(DATASET_ID),
                               also_in_dumps=pl.lit(None, pl.String))
    return frame.select([pl.col(name).cast(dtype) for name, dtype in BATTLES_SCHEMA.items()])


def synthetic_messages(battles: pl.DataFrame) -> pl.DataFrame:
    """Per battle and side, (user, assistant) x turns messages with short synthetic texts."""
    frame = (
        battles.select(pl.col("id").alias("battle_id"), "turns", "dump", pl.lit(["a", "b"]).alias("side"))
        .explode("side")
        .with_columns(pl.int_ranges(0, 2 * pl.col("turns")).alias("position"))
        .explode("position")
    )
    return frame.select(
        "battle_id",
        "side",
        (pl.col("position") // 2 + 1).alias("turn"),
        "position",
        pl.when(pl.col("position") % 2 == 0).then(pl.lit("user")).otherwise(pl.lit("assistant"))
        .alias("role"),
        pl.lit("text").alias("content_type"),
        pl.format("synthetic message {} of battle {}", "position", "battle_id").alias("text"),
        pl.lit(1).alias("n_parts"),
        pl.lit([], dtype=pl.List(pl.String)).alias("images"),
        pl.when(pl.col("side") == "b").then(pl.col("position") * 7 + 3).alias("num_tokens"),
        "dump",
    ).select([pl.col(name).cast(dtype) for name, dtype in MESSAGES_SCHEMA.items()])


def _rss_mb() -> float:
    """The process's peak RSS so far, in MB (Linux reports ru_maxrss in KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def write_db(path: Path, votes: Path, scale: int) -> None:
    """``bench.battles`` and ``bench.messages`` in a DuckDB file, ``scale`` copies of each frame."""
    import duckdb

    battles = real_battles(votes)
    messages = synthetic_messages(battles)
    path.unlink(missing_ok=True)
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA bench")
    for name, frame in (("battles", battles), ("messages", messages)):
        arrow = frame.to_arrow()  # noqa: F841 - read by DuckDB below
        con.execute(f"CREATE TABLE bench.{name} AS SELECT * FROM arrow")
    del battles, messages
    if scale > 1:  # copies 1..scale-1: new ids, new source rows
        n = con.execute("SELECT count(*) FROM bench.battles").fetchone()[0]
        con.execute(f"""INSERT INTO bench.battles SELECT b.* REPLACE (id || '-' || k AS id,
                        source_row + k * {n} AS source_row) FROM bench.battles b, range(1, {scale}) r(k)""")
        con.execute(f"""INSERT INTO bench.messages SELECT m.* REPLACE (battle_id || '-' || k AS battle_id)
                        FROM bench.messages m, range(1, {scale}) r(k)""")
    for name in ("battles", "messages"):
        print(f"bench.{name}: {con.execute(f'SELECT count(*) FROM bench.{name}').fetchone()[0]} rows")
    con.close()


def check_db(path: Path, method: str, batch_rows: int | None) -> None:
    """Validate both tables of ``path`` as the asset checks do, with ``method``; print time and RSS."""

    from arena_pipeline.core.dataset.dumps import unavailable_columns
    from arena_pipeline.core.validation import quality

    if method == "whole":  # the reference lives with the tests, at the repository root
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from arena_pipeline_dev.quality_reference import validate_dumps
    quality._context()
    con = connect_warehouse(str(path), read_only=True)
    print(f"{method}: RSS {_current_rss_mb():.0f} MB after imports + GX context")
    for name in ("battles", "messages"):
        relation = f'"bench"."{name}"'
        t0 = time.perf_counter()
        if method == "whole":  # checks._suite_checks before batching
            schema = con.execute(f"SELECT * FROM {relation} LIMIT 0").pl().schema
            columns = ", ".join(f'"{c}"' for c in dict.fromkeys([*quality.suite_columns(name), "dump"]))
            frame = con.execute(f"SELECT {columns} FROM {relation}").pl()
            report = validate_dumps(frame, name, unavailable_columns(frame), sample_size=10, schema=schema)
            del frame
        else:
            kwargs = {} if batch_rows is None else {"batch_rows": batch_rows}
            report = quality.validate_relation(con, relation, name, sample_size=10, **kwargs)
        seconds = time.perf_counter() - t0
        failed = report.failures().select("expectation_id", "unexpected_count").rows()
        print(f"  {name:<9} {report.row_count:>9} rows: {seconds:6.2f} s, peak RSS so far {_rss_mb():6.0f} MB; "
              f"failed {failed}")
    con.close()


def check_warehouse(path: Path, suites: list[str]) -> None:
    """Validate the checked version (the last by name) of each suite's table in a refresh's warehouse; print time, CPU, RSS
    and the report's hash."""
    import hashlib

    from arena_pipeline.core.store.warehouse import quoted
    from arena_pipeline.core.validation import quality
    from arena_pipeline.resources import Warehouse

    quality._context()
    with Warehouse(database=str(path)).connection() as con:
        print(f"RSS {_current_rss_mb():.0f} MB after imports + GX context")
        for name in suites:
            found = con.execute("SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal AND "
                                "starts_with(view_name, ?) AND schema_name <> 'arena' ORDER BY view_name DESC LIMIT 1",
                                [f"{name}__"]).fetchone()
            if found is None:
                raise SystemExit(f"no checked version of {name} in {path}")
            relation = quoted(*found)
            cpu, t0 = time.process_time(), time.perf_counter()
            report = quality.validate_relation(con, relation, name, sample_size=10)
            seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu
            digest = hashlib.sha256(repr(report.results.rows()).encode()).hexdigest()[:16]
            print(f"  {name:<9} {report.row_count:>10,} rows: {seconds:6.2f} s wall, {cpu:6.2f} s CPU, peak RSS so far "
                  f"{_rss_mb():6.0f} MB; {report.failures().height} failed; report {digest}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=Path, default=REAL_VOTES)
    parser.add_argument("--repeat", type=int, default=3, help="validations per suite")
    parser.add_argument("--write-db", type=Path, help="write the tables to this DuckDB file and stop")
    parser.add_argument("--scale", type=int, default=1, help="copies of the tables written by --write-db")
    parser.add_argument("--db", type=Path, help="validate the tables of this DuckDB file (see --method)")
    parser.add_argument("--method", choices=("batched", "whole"), default="batched")
    parser.add_argument("--batch-rows", type=int, help="validate_relation's batch_rows (default: its own)")
    parser.add_argument("--warehouse", type=Path, help="validate the checked versions of this refresh's warehouse")
    parser.add_argument("--suites", default="battles,messages", help="with --warehouse: the suites, comma-separated")
    args = parser.parse_args()
    if args.warehouse:
        check_warehouse(args.warehouse, [s for s in args.suites.split(",") if s])
        return
    if args.write_db:
        write_db(args.write_db, args.votes, args.scale)
        return
    if args.db:
        check_db(args.db, args.method, args.batch_rows)
        return

    t0 = time.perf_counter()
    battles = real_battles(args.votes)
    messages = synthetic_messages(battles)
    print(
        f"frames built in {time.perf_counter() - t0:.2f} s: battles {battles.shape}, "
        f"messages {messages.shape}"
    )

    from arena_pipeline.core.dataset import quarantine
    from arena_pipeline.core.validation import quality

    t0 = time.perf_counter()
    quality._context()  # GX import + ephemeral context: once per process
    setup = time.perf_counter() - t0
    print(f"GX import + context: {setup:.2f} s (once per process)")

    t0 = time.perf_counter()
    clean, quarantined = quarantine.split_quarantine(battles)
    print(
        f"split_quarantine: {time.perf_counter() - t0:.2f} s "
        f"({clean.height} clean, {quarantined.height} quarantined: "
        f"{dict(quarantine.count_by_rule(quarantined).iter_rows())})"
    )

    total = 0.0
    for name, frame in (("battles", battles), ("messages", messages)):
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            report = quality.validate_frame(frame, name)
            times.append(time.perf_counter() - t0)
        best, worst = min(times), max(times)
        total += best
        failed = report.failures()
        print(
            f"suite {name:<9} {frame.height:>8} rows x {frame.width} cols, "
            f"{report.results.height:>3} expectations: best {best:.2f} s, worst {worst:.2f} s; "
            f"failed: {failed.select('expectation_id', 'severity', 'unexpected_count').rows()}"
        )
    print(
        f"all suites (best of each): {total:.2f} s; "
        f"with GX import + context: {total + setup:.2f} s"
    )


if __name__ == "__main__":
    main()
