"""``arena-pipeline``: read the published leaderboards from the warehouse.

Subcommands::

    arena-pipeline leaderboard [--category C] [--method bt|bt_style|spectral] [--top N]
    arena-pipeline export [--format parquet|csv] OUT_DIR
    arena-pipeline report [OUT]

Every subcommand takes ``--warehouse PATH`` (else ``$ARENA_WAREHOUSE``, read when the command
runs, else ``data/warehouse.duckdb``) and ``--timeout SECONDS`` (how long to wait while a
pipeline run holds the file's lock). The warehouse is opened read-only, once, for the duration
of the command. Exit codes: 0 success; 1 no warehouse, no published leaderboard, no board for a known category,
or an unreadable file; 2 bad usage, including an unknown category or method (the valid ones are
listed); 3 the warehouse stayed locked by a running pipeline.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import duckdb
import polars as pl

from arena_pipeline.constants import DEFAULT_WAREHOUSE, LEADERBOARD_TABLE, SCHEMA
from arena_pipeline.core.categories import CATEGORY_NAMES, category_label
from arena_pipeline.core.ranking import METHODS
from arena_pipeline.core.warehouse import (
    WarehouseCorruptError,
    WarehouseLockedError,
    connect,
    corruption_error,
    quoted,
    relation_exists,
)
from arena_pipeline.export import EXPORT_TABLES, export_folder_problem, export_tables
from arena_pipeline.presentation.read import METHOD_LABELS, Published, read_published
from arena_pipeline.presentation.report import DEFAULT_REPORT_PATH, render_report

PROG = "arena-pipeline"
EXIT_OK = 0
EXIT_NO_DATA = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3

MATERIALIZE_HINT = ("materialize the pipeline first, e.g. "
                    "`dagster asset materialize -m arena_pipeline.definitions --select '*'`")


class CliError(Exception):
    """A user-facing failure: printed as one message, no traceback."""

    def __init__(self, message: str, code: int = EXIT_NO_DATA) -> None:
        super().__init__(message)
        self.code = code


def warehouse_path(cli_value: str | None) -> Path:
    """``--warehouse``, else ``$ARENA_WAREHOUSE``, else ``constants.DEFAULT_WAREHOUSE``."""
    return Path(cli_value or os.environ.get("ARENA_WAREHOUSE") or DEFAULT_WAREHOUSE)


@contextlib.contextmanager
def open_warehouse(path: Path, timeout_s: float) -> Iterator[duckdb.DuckDBPyConnection]:
    """A short read-only connection, with a clear error when the file is missing or locked."""
    if not path.is_file():
        raise CliError(f"no warehouse at {path} (set --warehouse or ARENA_WAREHOUSE); {MATERIALIZE_HINT}")
    try:
        con = connect(str(path), read_only=True, timeout_s=timeout_s)
    except WarehouseLockedError as exc:
        raise CliError(f"the warehouse {path} is locked by a running pipeline (waited {timeout_s:g} s); "
                       "try again when the run has finished, or pass a longer --timeout", EXIT_LOCKED) from exc
    except WarehouseCorruptError as exc:
        raise CliError(str(exc)) from exc
    except duckdb.Error as exc:
        raise CliError(f"cannot open {path} as a DuckDB warehouse: {exc}") from exc
    try:
        yield con
    finally:
        con.close()


def _require_leaderboard(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    if not relation_exists(con, SCHEMA, LEADERBOARD_TABLE):
        raise CliError(f"{path} has no published leaderboard ({SCHEMA}.leaderboard); {MATERIALIZE_HINT}")
    try:
        rows = con.execute(f"SELECT count(*) FROM {quoted(SCHEMA, LEADERBOARD_TABLE)}").fetchone()[0]
    except duckdb.Error as exc:
        raise CliError(f"{SCHEMA}.leaderboard in {path} cannot be read: {exc}") from exc
    if rows == 0:
        raise CliError(f"{SCHEMA}.leaderboard in {path} is empty; {MATERIALIZE_HINT}")


#: Characters a terminal would act on instead of showing: C0 controls (ESC, BEL, CR, ...), DEL,
#: C1 controls, and the bidirectional controls that reorder what follows (U+202E and friends).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: object) -> str:
    """``text`` with terminal control characters shown as escapes (``\\x1b``, ``\\u202e``)."""
    return _CONTROL.sub(lambda m: ascii(m.group())[1:-1], str(text))


def _read(con: duckdb.DuckDBPyConnection, path: Path, *, style: bool = False) -> Published:
    try:
        return read_published(con, SCHEMA, style=style)
    except duckdb.Error as exc:
        raise CliError(f"cannot read the published tables of {path}: {exc}") from exc


def _columns(header: Sequence[str], rows: list[tuple[str, ...]], right: set[int]) -> str:
    """A plain-text table (``right``: right-aligned columns), control characters escaped."""
    rows = [tuple(terminal_safe(c) for c in row) for row in rows]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *(fmt(row) for row in rows)])


def _models(n: int) -> str:
    return f"{n} model{'' if n == 1 else 's'}"


def format_board(board: pl.DataFrame) -> str:
    """A plain-text table: rank, rank upper bound, model, rating, 95% CI, battles."""
    def dash(value: object, spec: str = "") -> str:
        return "-" if value is None else format(value, spec)

    rows = [(str(r["rank"]), dash(r.get("rank_ub")), r["model"], dash(r.get("rating"), ".1f"),
             f"[{r['ci_lower']:.1f}, {r['ci_upper']:.1f}]" if r.get("ci_lower") is not None
             and r.get("ci_upper") is not None else "-", dash(r.get("n_battles"), ","))
            for r in board.iter_rows(named=True)]
    return _columns(("Rank", "UB", "Model", "Rating", "95% CI", "Battles"), rows, {0, 1, 3, 5})


def cmd_leaderboard(args: argparse.Namespace) -> int:
    path = warehouse_path(args.warehouse)
    with open_warehouse(path, args.timeout) as con:
        _require_leaderboard(con, path)
        pub = _read(con, path)
    categories = pub.categories()
    if args.category not in categories:
        status = pub.board_status.filter(pl.col("category") == args.category)
        if args.category in CATEGORY_NAMES or status.height:
            why = f" ({status.get_column('reason')[0]})" if status.height and status.get_column("reason")[0] else \
                " (too few battles?)"
            raise CliError(f"category {args.category!r} has no leaderboard in the published dump{why}; "
                           f"categories with a leaderboard: {', '.join(categories)}")
        raise CliError(f"unknown category {args.category!r}; valid categories: {', '.join(categories)}",
                       EXIT_USAGE)
    if args.method not in (methods := pub.methods(args.category)):
        raise CliError(f"unknown method {args.method!r} for category {args.category!r}; valid methods: "
                       f"{', '.join(methods)}", EXIT_USAGE)
    board = pub.board(args.category, args.method)
    provisional, board = board.filter("provisional"), board.filter(~pl.col("provisional"))
    total, shown = board.height + provisional.height, board.height
    board = board.head(args.top) if args.top > 0 else board
    label = METHOD_LABELS.get(args.method, args.method)
    if f"({args.method})" not in label and label != args.method:  # "Rank Centrality (spectral)"
        label = f"{label} ({args.method})"
    print(terminal_safe(f"{category_label(args.category)} - {label}; {total} models"
                        + (f", top {board.height} shown" if board.height < shown else "")
                        + (f"; dump {pub.revision}" if pub.revision else "")))
    print()
    print(format_board(board) if board.height else "No model reaches the display threshold.")
    if provisional.height:
        listed = provisional.head(args.top) if args.top > 0 else provisional
        print(f"\nProvisional ({_models(provisional.height)}, not ranked among those above"
              + (f", top {listed.height} shown" if listed.height < provisional.height else "")
              + f"): {provisional.get_column('provisional_reason')[0]}")
        print(format_board(listed))
    unrated = pub.unrated(args.category)
    if unrated.height:
        print(f"\nUnrated ({_models(unrated.height)} with battles here but no rating):")
        print(_columns(("Model", "Battles", "W/L/T", "Reason"), [
            (r["model"], f"{r['battles']:,}", f"{r['wins']}/{r['losses']}/{r['ties']}", r["reason"])
            for r in unrated.iter_rows(named=True)], {1}))
    if "ci_method" in board.columns and board.height:
        print(f"\n95% CI: {board.get_column('ci_method')[0]} interval. UB: best rank the interval allows.")
    missing = pub.no_board()
    if missing.height:
        print(f"\nCategories without a board ({missing.height}):")
        print(_columns(("Category", "Status", "Reason"), [
            (r["category"], r["status"], r["reason"] or "") for r in missing.iter_rows(named=True)], set()))
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    path, out_dir = warehouse_path(args.warehouse), Path(args.out_dir)
    problem = export_folder_problem(out_dir)
    if problem:
        raise CliError(problem)
    with open_warehouse(path, args.timeout) as con:
        _require_leaderboard(con, path)
        try:
            written, skipped, revision = export_tables(con, out_dir, args.format, str(path))
        except (OSError, duckdb.Error) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
            raise CliError(f"cannot write the export to {out_dir}: {reason}; {out_dir} is unchanged") from exc
    for table, info in written.items():
        print(f"{out_dir / str(info['file'])}: {info['rows']:,} rows")
    if skipped:
        print(f"not in the warehouse (skipped): {', '.join(skipped)}")
    print(f"{out_dir / 'manifest.json'}: revision {terminal_safe(revision or 'unknown')}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    path = warehouse_path(args.warehouse)
    if Path(args.out).is_dir():
        raise CliError(f"{args.out} is a folder; give the report's file path, e.g. "
                       f"{Path(args.out) / 'leaderboards.html'}")
    with open_warehouse(path, args.timeout) as con:
        _require_leaderboard(con, path)
        pub = _read(con, path, style=True)
    try:
        out = render_report(pub, args.out, title=args.title, heatmap_models=args.heatmap_models)
    except OSError as exc:  # a full disk, a read-only folder, a file where a folder should be
        raise CliError(f"cannot write the report to {args.out}: {exc.strerror or exc}") from exc
    n = len(pub.categories())
    print(f"wrote {out} ({n} {'category' if n == 1 else 'categories'}; dump {pub.revision or 'unknown'})")
    return EXIT_OK


def _count(text: str) -> int:
    """A whole number, 0 or more (argparse shows the message, not this function's name)."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number (0 or more), got {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    """A finite number of seconds, 0 or more (``nan`` and ``inf`` would wait forever)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds (0 or more), got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--warehouse", metavar="PATH",
                        help=f"DuckDB file (default: $ARENA_WAREHOUSE, else {DEFAULT_WAREHOUSE})")
    common.add_argument("--timeout", type=_seconds, default=10.0, metavar="SECONDS",
                        help="how long to wait while a pipeline run holds the warehouse lock (default: 10)")
    parser = argparse.ArgumentParser(
        prog=PROG, description="Read the LMArena leaderboards published by arena_pipeline.",
        epilog="Exit codes: 0 ok; 1 no warehouse or no published leaderboard; "
        "2 bad usage (unknown category or method); 3 warehouse locked.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("leaderboard", parents=[common], help="print one leaderboard as a table",
                       description="Print one published leaderboard (rank, rank upper bound, model, rating, "
                       "95% CI, battles), its provisional and unrated models, and the categories without a board.")
    p.add_argument("--category", default="overall", help="category (default: overall)")
    p.add_argument("--method", default="bt", help=f"ranking method: {', '.join(METHODS)} (default: bt)")
    p.add_argument("--top", type=_count, default=20, metavar="N", help="rows shown, 0 for all (default: 20)")
    p.set_defaults(func=cmd_leaderboard)

    p = sub.add_parser("export", parents=[common], help="write the leaderboard tables to files",
                       description="Write the published leaderboard tables (" + ", ".join(EXPORT_TABLES)
                       + ", when present) to OUT_DIR as <table>.parquet or <table>.csv, plus manifest.json.")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="default: parquet")
    p.add_argument("out_dir", metavar="OUT_DIR")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("report", parents=[common], help="render the static HTML report",
                       description="Render the published leaderboards as one self-contained HTML file.")
    p.add_argument("out", nargs="?", default=str(DEFAULT_REPORT_PATH), metavar="OUT",
                   help=f"output file (default: {DEFAULT_REPORT_PATH})")
    p.add_argument("--title", default="LMArena leaderboards", help="page title")
    p.add_argument("--heatmap-models", type=_count, default=20, metavar="N",
                   help="models in each pairwise heatmap (default: 20)")
    p.set_defaults(func=cmd_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (argparse's own exits are returned, not raised)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed by argparse
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return args.func(args)
    except CliError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.code
    except duckdb.Error as exc:  # a damaged block found after opening: same one-line advice
        damaged = corruption_error(str(warehouse_path(args.warehouse)), exc)
        if damaged is None:
            raise
        print(f"{PROG}: error: {damaged}", file=sys.stderr)
        return EXIT_NO_DATA
    except BrokenPipeError:  # e.g. `arena-pipeline leaderboard | head`
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
