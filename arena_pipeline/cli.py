"""``arena-pipeline``: run the pipeline's jobs and read the published leaderboards (``--help`` lists the commands).

The commands start fast: this module imports what reading the warehouse needs (DuckDB) and nothing of
the pipeline (no Dagster, no scipy: ``test_cli.py`` checks ``sys.modules``); ``refresh`` and ``rerank``
import Dagster and the pipeline when they run (``run_command.py``). ``leaderboard`` reads one
board as DuckDB's rows (``presentation.read_board``: no Polars frame, so no NumPy, Arrow or pydantic);
what only the other commands need (the read API's frames, the export, the report's renderer) is
imported by those commands.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import duckdb

from arena_pipeline.constants import (
    DEFAULT_REPORT_PATH,
    DEFAULT_WAREHOUSE,
    LEADERBOARD_TABLE,
    PUBLICATION_CHANGES_TABLE,
    SCHEMA,
    report_beside,
)
from arena_pipeline.core.labels import (
    METHODS,
    PRIMARY_METHOD,
    PROVISIONAL_RANK,
    RANK_SETS,
    category_label,
    method_label,
    method_note,
    rank_label,
    rank_set_label,
)
from arena_pipeline.core.publication.policy import policy_fields
from arena_pipeline.core.store.connections import open_reader
from arena_pipeline.core.store.guard import lock_holder
from arena_pipeline.core.store.reader import files_gone_message
from arena_pipeline.core.store.warehouse import (
    WarehouseCorruptError,
    WarehouseLockedError,
    corruption_error,
    quoted,
    relation_exists,
    sql_string,
)
from arena_pipeline.export import export_files, export_folder_problem, export_tables, exported_by_publication
from arena_pipeline.presentation.read_board import NoBoard, did_you_mean, read_board
from arena_pipeline.presentation.tables import frame_table, rows_table

if TYPE_CHECKING:
    import polars as pl

PROG = "arena-pipeline"
EXIT_OK = 0
EXIT_NO_DATA = 1  # no warehouse, no published leaderboard, no board for a known category, an unreadable file
EXIT_USAGE = 2  # bad usage, including an unknown category or method (the valid ones are listed)
EXIT_LOCKED = 3  # the warehouse stayed locked (a process opened it read-write) for --timeout seconds

MATERIALIZE_HINT = ("publish one first: `arena-pipeline refresh` (with DAGSTER_HOME=$PWD/dagster_home; "
                    "docs/getting-started.md)")


class CliError(Exception):
    """A user-facing failure: printed as one message, no traceback."""

    def __init__(self, message: str, code: int = EXIT_NO_DATA) -> None:
        super().__init__(message)
        self.code = code


def misspelt_warehouse_variable(path: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """When the default warehouse is read while ARENA_WAREHOUSE is unset and a variable close to it is set
    (``ARENA_WAREHOUS``), the note that says so (the reader commands import no Dagster, so not
    ``environment.typo_lines``); else None."""
    import difflib

    environ = os.environ if environ is None else environ
    if path != Path(DEFAULT_WAREHOUSE) or environ.get("ARENA_WAREHOUSE"):
        return None
    close = difflib.get_close_matches("ARENA_WAREHOUSE", [n for n in environ if n.startswith("ARENA_")], n=1,
                                      cutoff=0.8)
    return (f"note: {close[0]} is set, but arena_pipeline reads no such variable: did you mean ARENA_WAREHOUSE? "
            f"(unset, so this reads the default {DEFAULT_WAREHOUSE})") if close else None


@contextlib.contextmanager
def open_warehouse(path: Path, timeout_s: float) -> Iterator[duckdb.DuckDBPyConnection]:
    """A short read-only connection to the newest publication of a warehouse with a published leaderboard
    (:func:`core.store.connections.open_reader`). Every failure is a one-line CliError: no file, locked (exit 3:
    a process opened the snapshot read-write), damaged (also when found while reading: the advice to
    rebuild), unreadable, its publication's files deleted meanwhile, or no leaderboard published yet. A
    misspelt ARENA_WAREHOUSE is named first (:func:`misspelt_warehouse_variable`).

    With ``ARENA_DUCKLAKE`` set (read when the command runs), the DuckLake it names is read instead of
    the file, attached read-only (``core/store/lake.py``; docs/reading.md)."""
    if attach := os.environ.get("ARENA_DUCKLAKE"):
        yield from _open_lake(attach)
        return
    if note := misspelt_warehouse_variable(path):
        click.echo(note, err=True)
    if not path.is_file():
        raise CliError(f"no warehouse at {path} (set --warehouse or ARENA_WAREHOUSE); {MATERIALIZE_HINT}")
    try:
        con = open_reader(path, timeout_s=timeout_s)
    except WarehouseLockedError as exc:
        # the pipeline never opens the readers' snapshot read-write: a reader did (DuckDB's default)
        raise CliError(f"the warehouse {path} is open read-write by {lock_holder(exc.__cause__ or exc)} (waited "
                       f"{timeout_s:g} s): the pipeline never holds it so, and readers must open it read-only "
                       "(duckdb.connect(path, read_only=True), or arena_pipeline.reader.connect); close that "
                       "connection and try again, or pass a longer --timeout", EXIT_LOCKED) from exc
    except WarehouseCorruptError as exc:
        raise CliError(str(exc)) from exc
    except duckdb.Error as exc:
        raise CliError(f"cannot open {path} as a DuckDB warehouse: {exc}") from exc
    try:
        if not relation_exists(con, SCHEMA, LEADERBOARD_TABLE):
            raise CliError(f"{path} has no published leaderboard ({SCHEMA}.leaderboard); {MATERIALIZE_HINT}")
        if not con.execute(f"SELECT count(*) FROM {quoted(SCHEMA, LEADERBOARD_TABLE)}").fetchone()[0]:
            raise CliError(f"{SCHEMA}.leaderboard in {path} is empty; {MATERIALIZE_HINT}")
        yield con
    except duckdb.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CliError(str(corruption_error(str(path), exc) or files_gone_message(con, exc, str(path)) or
                           f"cannot read the published tables of {path}: {reason}")) from exc
    finally:
        con.close()


def _open_lake(attach: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to the DuckLake ``attach`` names, its published leaderboard checked."""
    from arena_pipeline.core.store.lake import LakeError

    try:
        con = open_reader(None, ducklake=attach)
    except LakeError as exc:
        raise CliError(f"{exc} (ARENA_DUCKLAKE)") from exc
    try:
        if not relation_exists(con, SCHEMA, LEADERBOARD_TABLE):
            raise CliError(f"the DuckLake of ARENA_DUCKLAKE has no published leaderboard ({SCHEMA}.leaderboard); "
                           f"{MATERIALIZE_HINT}")
        yield con
    except duckdb.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CliError(f"cannot read the published tables of the DuckLake of ARENA_DUCKLAKE: {reason}") from exc
    finally:
        con.close()


#: Characters a terminal would act on instead of showing: C0 controls (ESC, BEL, CR, ...), DEL,
#: C1 controls, and the bidirectional controls that reorder what follows (U+202E and friends).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: object) -> str:
    """``text`` with terminal control characters shown as escapes (``\\x1b``, ``\\u202e``)."""
    return _CONTROL.sub(lambda m: ascii(m.group())[1:-1], str(text))


def text_table(frame: pl.DataFrame, **formats: object) -> str:
    """``frame`` as a plain-text table (the column names, a rule of dashes, the rows; missing: ``-``),
    text escaped by :func:`terminal_safe`; ``formats``: tabulate's ``floatfmt``, ``intfmt``."""
    return frame_table(frame, "simple", terminal_safe, missingval="-", **formats)


def plain_table(columns: Sequence[str], rows: Sequence[Sequence[object]], text: Sequence[int],
                **formats: object) -> str:
    """:func:`text_table` of rows: ``text``, the indices of the text columns (the others are numbers)."""
    return rows_table(columns, rows, text, "simple", terminal_safe, missingval="-", **formats)


def _interval(row: Mapping[str, Any]) -> str | None:
    # both bounds missing on a board with an interval method: its reference model (the anchor, whose
    # rating is pinned: an interval is of a rating's difference from it); an infinite bound: a
    # clustered interval of a model seen in one session only (presentation.templating.interval_note)
    lo, hi = row["ci_lower"], row["ci_upper"]
    if lo is None or hi is None:
        return "reference" if row.get("ci_method") not in (None, "none") else None
    return "unbounded" if math.isinf(lo) or math.isinf(hi) else f"[{lo:.1f}, {hi:.1f}]"


def format_board(board: Sequence[Mapping[str, Any]]) -> str:
    """A plain-text table of board rows: rank (a provisional model's marked, :func:`rank_label`), the rank
    spread (for this model: rank_ub-rank_lb) and the rank set for every model at once (the simultaneous
    bounds; :func:`rank_set_label`, - on a board published before them), model, rating, 95% CI, how many
    models it is significantly above (a board published before that column: -), battles."""
    rows = [(rank_label(r["rank"], r.get("provisional")), rank_set_label(r["rank_ub"], r.get("rank_lb")),
             rank_set_label(r.get("rank_ub_simultaneous"), r.get("rank_lb_simultaneous")), r["model"], r["rating"],
             _interval(r), r.get("significantly_above"), r["n_battles"]) for r in board]
    return plain_table(("Rank", "Spread", "All-at-once", "Model", "Rating", "95% CI", "Above", "Battles"), rows,
                       (1, 2, 3, 5), floatfmt=".1f", intfmt=("", "", "", "", "", "", "", ","))


def _models(n: int) -> str:
    return f"{n} model{'' if n == 1 else 's'}"


def _name(ctx: click.Context, param: click.Parameter, text: str) -> str:
    """A category or method as typed or as printed: ``Math``, ``Instruction following`` -> the name."""
    return re.sub(r"[\s-]+", "_", text.strip()).lower()


def _seconds(ctx: click.Context, param: click.Parameter, text: str) -> float:
    """``--timeout``: a finite number of seconds, 0 or more (``nan`` and ``inf`` would wait forever)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise click.BadParameter(f"expected a finite number of seconds (0 or more), got {text!r}")
    return value


def _count(ctx: click.Context, param: click.Parameter, text: str | int) -> int:
    """``--top``, ``--heatmap-models``: a whole number, 0 or more."""
    if not str(text).strip().isdecimal():
        raise click.BadParameter(f"expected a whole number (0 or more), got {text!r}")
    return int(text)


def reads_warehouse(command: Callable[..., int]) -> Callable[..., int]:
    """The options every subcommand shares: which warehouse (``$ARENA_WAREHOUSE`` is read when the
    command runs), and how long to wait for its lock. The warehouse is only ever opened read-only."""
    command = click.option("--timeout", default="10", callback=_seconds, metavar="SECONDS", help=(
        "how long to wait while another process holds the warehouse file open read-write (say, a notebook "
        "that opened it without read_only=True; pipeline runs never do) (default: 10)"))(command)
    return click.option("--warehouse", envvar="ARENA_WAREHOUSE", default=DEFAULT_WAREHOUSE, metavar="PATH",
                        type=click.Path(path_type=Path),
                        help=f"DuckDB file (default: $ARENA_WAREHOUSE, else {DEFAULT_WAREHOUSE})")(command)


@click.group(name=PROG, epilog="Exit codes: 0 ok; 1 no warehouse or no published leaderboard, or a refresh/rerank "
             "whose run failed or was refused by the gate; 2 bad usage (unknown category or method, a run config "
             "refused); 3 warehouse locked.")
def cli() -> None:
    """Run the arena_pipeline (refresh, rerank) and read the LMArena leaderboards it publishes."""


@cli.command(short_help="print one leaderboard as a table")
@click.option("--category", default="overall", show_default=True, callback=_name,
              help="category name, or its label as printed ('Math', 'Instruction following'); any case")
@click.option("--method", default=PRIMARY_METHOD, show_default=True, callback=_name,
              help=f"ranking method: {', '.join(METHODS)}; any case")
@click.option("--top", type=str, callback=_count, default=20, show_default=True, metavar="N",
              help="rows shown, 0 for all")
@click.option("--dump", metavar="NAME", help="one loaded dump's own board (arena.dump_leaderboard), not the combined one")
@reads_warehouse
def leaderboard(category: str, method: str, top: int, dump: str | None, warehouse: Path, timeout: float) -> int:
    """Print one published leaderboard (rank, rank sets, model, rating, 95% CI, battles), its
    provisional and unrated models, and the categories without a board."""
    try:
        with open_warehouse(warehouse, timeout) as con:
            pub = read_board(con, category, method, SCHEMA, dump)
    except NoBoard as exc:  # a dump's own boards come without the reasons of the combined ones
        raise CliError(str(exc) if dump is None else (
            f"category {category!r} has no leaderboard on the boards of dump {dump!r} alone (they are: "
            f"{', '.join(exc.categories)}); leave out --dump for the combined boards")) from None
    except LookupError as exc:
        raise CliError(str(exc)) from None
    except ValueError as exc:  # a typo: usage
        raise CliError(str(exc), EXIT_USAGE) from None
    board, provisional = pub.ranked, pub.provisional
    shown = board[:top or len(board)]  # --top 0: all
    label = method_label(method)
    if f"({method})" not in label and label != method:  # named once: "Rank Centrality cross-check (spectral)"
        label = f"{label} ({method})"
    print(terminal_safe(f"{category_label(category)} - {label}; {len(board) + len(provisional)} models"
                        + (f", top {len(shown)} shown" if len(shown) < len(board) else "")
                        + (f"; dump {dump or pub.revision}" if dump or pub.revision else "")))
    print()
    print(format_board(shown) if shown else "No model reaches the display threshold.")
    if provisional:
        listed = provisional[:top or len(provisional)]
        print(f"\nProvisional ({_models(len(provisional))}, "
              + ("not ranked among those above" if board else "ranked among themselves")
              + (f", top {len(listed)} shown" if len(listed) < len(provisional) else "")
              + f"): {provisional[0]['provisional_reason']}"
              + (f". '{PROVISIONAL_RANK.format(rank='N')}': rank N among every model of the board, not a "
                 "place in the ranking above" if board else ""))
        print(format_board(listed))
    if pub.unrated:
        print(f"\nUnrated ({_models(len(pub.unrated))} with battles here but no rating):")
        wlt = [(m, n, None if None in (w, lo, t) else f"{w}/{lo}/{t}", why) for m, n, w, lo, t, why in pub.unrated]
        print(plain_table(("Model", "Battles", "W/L/T", "Reason"), wlt, (0, 2, 3), intfmt=","))
    if shown and "ci_method" in pub.columns:
        print(f"\n95% CI: {shown[0]['ci_method']} interval of the rating's difference from the board's "
              "reference model (rating 1000, no interval). Above: significantly above N models (the 95% "
              "interval of the rating difference lies above 0, arena.pairwise_significance). "
              f"{RANK_SETS['per_model']}. {RANK_SETS['simultaneous']}.")
    if note := method_note(method):
        print(f"\n{note}")
    if pub.no_board:
        print(f"\nCategories without a board ({len(pub.no_board)}):")
        print(plain_table(("Category", "Status", "Reason"), pub.no_board, (0, 1, 2)))
    return EXIT_OK


def _earlier_export(out_dir: Path) -> tuple[str, int] | None:
    """(format, files) of the earlier export ``out_dir`` holds (its manifest's format, else its files'), or None."""
    if not out_dir.is_dir() or not (files := [p for p in out_dir.iterdir() if p.name != "manifest.json"]):
        return None
    import json

    try:
        fmt = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))["format"]
    except (OSError, ValueError, KeyError, TypeError):
        fmt = files[0].suffix.lstrip(".")
    return str(fmt), len(files)


@cli.command(short_help="write the leaderboard tables to files", help=(
    "Write the published tables their assets declare exported (the leaderboards and their history, "
    "pairwise tables, models, model fit, validation tables, publication changes, quality results and dumps; "
    "when present) to OUT_DIR as <table>.parquet or <table>.csv, plus manifest.json: from one snapshot, "
    "all or nothing."))
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True)
@click.argument("out_dir", metavar="OUT_DIR", type=click.Path(path_type=Path))
@reads_warehouse
def export(fmt: str, out_dir: Path, warehouse: Path, timeout: float) -> int:
    earlier = _earlier_export(out_dir)
    with open_warehouse(warehouse, timeout) as con:
        # which tables: declared on their assets; the live publication records the list, else (a warehouse
        # from before) the pipeline's definitions say it (Dagster is imported then, by this command only)
        tables = exported_by_publication(con)
        if tables is None:
            from arena_pipeline.definitions import CATALOG

            tables = CATALOG.exported
        if problem := export_folder_problem(out_dir, export_files(tables)):
            raise CliError(problem)
        try:
            written, skipped, revision = export_tables(con, out_dir, fmt, str(warehouse), tables)
        except (OSError, duckdb.Error) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
            raise CliError(f"cannot write the export to {out_dir}: {reason}; {out_dir} is unchanged") from exc
    for info in written.values():
        print(f"{out_dir / str(info['file'])}: {info['rows']:,} rows")
    if skipped:
        print(f"not in the warehouse (skipped): {', '.join(skipped)}")
    print(f"{out_dir / 'manifest.json'}: revision {terminal_safe(revision or 'unknown')}")
    if earlier:  # an export replaces the folder whole: said, above all when the earlier one was of the other format
        was, files = earlier
        print(f"replaced the earlier {was} export in {out_dir} ({files} files)"
              + (f": its {was} files are gone, the folder holds the {fmt} export only" if was != fmt else ""))
    return EXIT_OK


@cli.command(short_help="render the static HTML report", help=(
    f"Render the published leaderboards as one self-contained HTML file, OUT (default: $ARENA_REPORT, else "
    f"beside the warehouse: report/index.html for warehouse.duckdb, {DEFAULT_REPORT_PATH} for the default one, "
    "report/<name>.html for <name>.duckdb). The report of another "
    "warehouse is never written over."))
@click.argument("out", metavar="[OUT]", required=False, envvar="ARENA_REPORT", type=click.Path(path_type=Path))
@click.option("--title", default="LMArena leaderboards", show_default=True, help="page title")
@click.option("--heatmap-models", type=str, callback=_count, default=20, show_default=True, metavar="N",
              help="models in each pairwise heatmap, 0 for all")
@reads_warehouse
def report(out: Path | None, title: str, heatmap_models: int, warehouse: Path, timeout: float) -> int:
    out = report_beside(warehouse) if out is None else out
    if out.is_dir():
        raise CliError(f"{out} is a folder; give the report's file path, e.g. {out / 'leaderboards.html'}")
    if out.is_file() and warehouse.is_file() and out.resolve() == warehouse.resolve():
        raise CliError(f"{out} is the warehouse: the report is not written over it; give the report another path")
    # Polars frames, Jinja2 and the charts: this command only, not at the CLI's start
    from arena_pipeline.presentation.read import read_published
    from arena_pipeline.presentation.report import NotAReportError, page_publication, refuse_foreign_file, render_report

    try:
        refuse_foreign_file(out, warehouse)  # before reading the warehouse: nothing would be written
    except NotAReportError as exc:
        raise CliError(exc.strerror) from None
    shown = page_publication(out)  # a page behind the live publication is said to be (issue 38, item 3)
    with open_warehouse(warehouse, timeout) as con:
        pub = read_published(con, SCHEMA, style=True)
    try:
        written = render_report(pub, out, title=title, heatmap_models=heatmap_models, warehouse=warehouse)
    except NotAReportError as exc:
        raise CliError(exc.strerror) from None
    except OSError as exc:  # a full disk, a read-only folder, a file where a folder should be
        raise CliError(f"cannot write the report to {out}: {exc.strerror or exc}") from exc
    n = len(pub.categories())
    print(f"wrote {written} ({n} {'category' if n == 1 else 'categories'}; dump {pub.revision or 'unknown'})")
    if pub.publication_id is not None and shown is not None and shown != pub.publication_id:
        print(f"the page showed publication {shown}; it now shows the live publication, {pub.publication_id}")
    return EXIT_OK


def _signed(value: float | int | None, digits: int = 1) -> str | None:
    return None if value is None else f"{value:+,.{digits}f}" if isinstance(value, float) else f"{value:+d}"


def format_changes(rows: pl.DataFrame) -> str:
    """A plain-text table of ``arena.publication_changes`` rows: model, status, rating before and
    after, change with its 95% interval and whether the move is beyond it, rank and rank UB moves."""
    import polars as pl  # the changes' frames: not at the CLI's start

    ci = [None if lo is None or hi is None else "unbounded" if math.isinf(lo) or math.isinf(hi)
          else f"[{lo:+.1f}, {hi:+.1f}]" for lo, hi in rows.select("change_ci_lower", "change_ci_upper").iter_rows()]
    beyond = ["yes" if b else "no" if b is not None else None for b in rows.get_column("beyond_interval")]
    table = rows.select(
        Model="model", Status="status", Before="rating_before", After="rating_after",
        Change=pl.Series([_signed(v) for v in rows.get_column("rating_change")], dtype=pl.String),
        **{"95% CI of change": pl.Series(ci, dtype=pl.String), "Beyond": pl.Series(beyond, dtype=pl.String)},
        Rank=pl.format("{} -> {}", *(pl.col(c).cast(pl.String).fill_null("-") for c in ("rank_before", "rank_after"))),
        UB=pl.format("{} -> {}", *(pl.col(c).cast(pl.String).fill_null("-") for c in ("rank_ub_before", "rank_ub_after"))))
    return text_table(table, floatfmt=".1f")


def _moved(kept: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """The kept models that moved (rating, rank or rank UB), largest rating move first, then largest rank
    move, then by rank; and how many did not move (a re-rank that changed only, say, the display threshold
    or the bootstrap rounds leaves most ratings as they were: those are counted, not listed)."""
    import polars as pl

    rank_move = (pl.col("rank_after").cast(pl.Int64) - pl.col("rank_before").cast(pl.Int64)).abs()
    still = ((pl.col("rating_change").abs() < 0.05).fill_null(False)
             & pl.col("rank_before").eq_missing(pl.col("rank_after"))
             & pl.col("rank_ub_before").eq_missing(pl.col("rank_ub_after")))
    moved = (kept.filter(~still)
             .sort([pl.col("rating_change").abs(), rank_move, pl.col("rank_after")], descending=[True, True, False],
                   nulls_last=True, maintain_order=True))
    return moved, kept.height - moved.height


def format_shift(shift: Mapping[str, float]) -> str:
    """The line under an aligned board's changes: the shift's own move (``core.changes.changes.board_shift``),
    which Change leaves out."""
    return (f"Aligned to lmarena.ai's scale: the shift moved {_signed(float(shift['change']))} points "
            f"({_signed(float(shift['before']))} -> {_signed(float(shift['after']))}). Change and its interval leave "
            "it out (the ratings on our own scale), so After - Before = Change + the shift's move.")


def _source_change(con: duckdb.DuckDBPyConnection, before: str | None, after: str | None) -> str | None:
    """``another source ('a' -> 'b')`` when the two revisions were loaded from two sources (``arena.dumps``), as
    the gate says when it judges one source's boards against another's; else None."""
    if not before or not after or before == after or not relation_exists(con, SCHEMA, "dumps"):
        return None
    found = dict(con.execute(f"SELECT revision, source FROM {quoted(SCHEMA, 'dumps')} "
                             f"WHERE revision IN ({sql_string(before)}, {sql_string(after)})").fetchall())
    old, new = found.get(before), found.get(after)
    return f"another source ({old!r} -> {new!r})" if old and new and old != new else None


@cli.command(short_help="what changed since the previous (or an earlier) publication")
@click.option("--since", type=int, metavar="ID", help=(
    "compare with this earlier publication (its boards must still be kept in arena.leaderboard_history); "
    "default: the previous one, as published in arena.publication_changes"))
@click.option("--category", callback=lambda ctx, param, text: None if text is None else _name(ctx, param, text),
              help="one category (name or label, any case); default: every category")
@click.option("--method", default=PRIMARY_METHOD, show_default=True, callback=_name,
              help=f"ranking method: {', '.join(METHODS)}; any case")
@click.option("--top", type=str, callback=_count, default=20, show_default=True, metavar="N",
              help="kept models shown per board, largest moves first, 0 for all (new and gone: all)")
@reads_warehouse
def changes(since: int | None, category: str | None, method: str, top: int, warehouse: Path,
            timeout: float) -> int:
    """Print, per category, how the live boards moved since the previous publication (or --since
    ID): new and gone models, each rating's change with a 95% interval for the change (how the two
    fits' votes relate decides it: docs/rankings.md, Changes between publications), rank and rank UB moves."""
    import polars as pl  # the changes' frames: not at the CLI's start

    from arena_pipeline.core.changes.changes import board_shift, changes_between, summary
    from arena_pipeline.core.store.records import live_publication
    from arena_pipeline.core.store.warehouse import read_frame

    with open_warehouse(warehouse, timeout) as con:
        live = live_publication(con, SCHEMA)
        if live is None:
            raise CliError(f"{warehouse} records no publication; {MATERIALIZE_HINT}")
        if since == live["publication_id"]:  # not a comparison of the live boards with themselves
            print(f"publication {since} is the live publication: nothing to compare it with; --since takes an "
                  "earlier publication's id")
            return EXIT_OK
        try:
            if since is not None:
                rows = changes_between(con, SCHEMA, since, live["publication_id"])
            elif relation_exists(con, SCHEMA, PUBLICATION_CHANGES_TABLE):
                rows = read_frame(con, f"SELECT * FROM {quoted(SCHEMA, PUBLICATION_CHANGES_TABLE)}")
            else:
                raise CliError(f"publication {live['publication_id']} has no {SCHEMA}.{PUBLICATION_CHANGES_TABLE} "
                               "(published before the table existed): compare with --since ID")
        except LookupError as exc:
            raise CliError(str(exc)) from None
        moved = None if rows.is_empty() else _source_change(con, rows.item(0, "since_revision"), live["revision"])
    if rows.is_empty():
        print(f"publication {live['publication_id']} is the first: nothing to compare it with")
        return EXIT_OK
    present = rows.get_column("category").unique(maintain_order=True).to_list()
    if category is not None and category not in present:
        raise CliError(f"unknown category {category!r}; {did_you_mean(category, present)}categories on either board: "
                       f"{', '.join(present)}", EXIT_USAGE)
    if method not in (methods := rows.get_column("method").unique(maintain_order=True).to_list()):
        raise CliError(f"unknown method {method!r}; {did_you_mean(method, methods)}methods on either board: "
                       f"{', '.join(methods)}", EXIT_USAGE)
    first = rows.row(0, named=True)
    since_at = first["since_published_at"]
    # the votes' relation is decided per board (issue 36): one in the title when every board shares it
    relations = rows.get_column("data_relation").unique(maintain_order=True).to_list()
    relation = relations[0] if len(relations) == 1 else "each board's votes related as its line says"
    print(terminal_safe(f"Changes of publication {live['publication_id']} ({live['revision']}) since publication "
                        f"{first['since_publication']} ({first['since_revision']}"
                         + (f", {since_at:%Y-%m-%d %H:%M} UTC" if since_at else "") + "): "
                         + (f"{moved}, " if moved else "") + relation
                        + {True: ", other ranking settings", False: ", the same ranking settings"}.get(
                            first["settings_changed"], "")))
    for c in [category] if category else present:
        board = rows.filter((pl.col("category") == c) & (pl.col("method") == method))
        if board.is_empty():
            continue
        n = summary(board)
        kept, still = _moved(board.filter(pl.col("status") == "kept"))
        shown = pl.concat([kept.head(top or kept.height), board.filter(pl.col("status") != "kept")])
        print()
        print(terminal_safe(f"{category_label(c)} - {method_label(method)}: {_models(n['kept'])} kept "
                            f"({n['beyond']} moved beyond the interval), {n['new']} new, {n['gone']} gone"
                            + (f"; {board.row(0, named=True)['data_relation']}" if len(relations) > 1 else "")
                            + (f"; top {top} moves shown" if top and kept.height > top else "")))
        if still:
            print(f"{_models(still)} kept did not move (the same rating, rank and UB): not listed")
        if not shown.is_empty():
            print(format_changes(shown))
        if shift := board_shift(board):
            print(format_shift(shift))
    print(f"\nChange: rating after minus before; 95% CI of change: its interval given how the votes relate "
          f"({relation}); Beyond: the move is larger than the interval allows. Rank: before -> after.")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# refresh / rerank: the pipeline's jobs (arena_pipeline.run_command, imported by these commands only)
# ---------------------------------------------------------------------------------------------


def _gate_options() -> list[Callable[[Callable[..., int]], Callable[..., int]]]:
    """A flag per gate policy, read from where the policies are declared (``core.publication.policy``):
    ``--allow-degenerate``, ``--max-model-drop SHARE``, ``--max-category-drop SHARE``, ..."""
    options = []
    for name, (kind, default, text) in policy_fields().items():
        flag = "--" + name.replace("_", "-")
        if kind is bool:
            options.append(click.option(flag, is_flag=True, default=None, help=f"{text} (publication_gate)"))
        else:
            options.append(click.option(flag, type=click.FloatRange(0.0, 1.0), metavar="SHARE",
                                        help=f"{text} (publication_gate; {default:g})"))
    return options


def runs_job(command: Callable[..., int]) -> Callable[..., int]:
    """The options of the commands that run a job: the ranking settings by name, the gate's, Dagster's
    ``--config-json``, and ``--verbose``."""
    options = [
        click.option("--verbose", is_flag=True, help="Dagster's own log and, on a failure, the traceback"),
        click.option("--config-json", metavar="JSON", help=(
            "Dagster's run configuration, as `dagster asset materialize --config-json` takes it; the flags "
            "above are laid over it")),
        click.option("--from-defaults", is_flag=True, help=(
            "rank with the defaults (and the flags), not with the live publication's ranking settings")),
        *_gate_options(),
        click.option("--style-method", type=click.Choice(["lmarena", "unweighted"]),
                     help="style control: LMArena's current (lmarena) or the earlier unweighted variant"),
        click.option("--style-reg", type=float, metavar="REG",
                     help="style control's penalty on the mean loss (1.0: LMArena's; 0: unpenalised)"),
        click.option("--seed", type=int, help="bootstrap seed (42)"),
        click.option("--primary-interval", type=click.Choice(
            ["sandwich", "bootstrap", "cluster_sandwich", "cluster_bootstrap"]), help="interval in ci_lower/ci_upper"),
        click.option("--display-min-battles", type=int, metavar="N",
                     help="models with fewer battles are provisional (301: LMArena's threshold)"),
        click.option("--min-battles", type=int, metavar="N", help="models with fewer battles are left out of the fit (1)"),
        click.option("--bootstrap-rounds", type=int, metavar="N", help="bootstrap rounds per board (100, at most 2000)"),
        click.option("--ties", type=click.Choice(["half", "drop"]), help="ties as half a win each (half) or dropped"),
    ]
    for option in options:
        command = option(command)
    return command


def _run(job: str, flags: dict[str, Any]) -> int:
    from arena_pipeline import run_command  # Dagster and the pipeline: these commands only

    verbose = flags.pop("verbose")
    try:
        config_json = run_command.parse_config_json(flags.pop("config_json"))
        choices = {k: flags.pop(k, False) for k in ("from_defaults", "keep_settings", "new")}
        gate = {k: flags.pop(k) for k in policy_fields() if flags.get(k) is not None}
        rankings = {k: v for k, v in flags.items() if v is not None}
        config, tags = run_command.prepare_run(job, config_json=config_json, rankings=rankings, gate=gate,
                                               **choices)
        print(run_command.run_job(job, config, verbose=verbose, tags=tags))
    except run_command.RunError as exc:
        raise CliError(str(exc), exc.code) from None
    return EXIT_OK


@cli.command(short_help="run the whole pipeline (refresh_job) and publish")
@click.option("--new", is_flag=True, help=(
    "start a new warehouse at ARENA_WAREHOUSE even though the default one exists (without it such a refresh "
    "is refused: a misspelt path must not start a new history)"))
@click.option("--keep-settings", is_flag=True, help=(
    "rank with the live publication's settings even when this run loads a dump from another source (by "
    "default such a refresh starts from the defaults)"))
@runs_job
def refresh(**flags: Any) -> int:
    """Fetch the dump (ARENA_SOURCE), rebuild what changed, rank, check and publish through the gate, then
    render the report: Dagster's refresh_job, run in the instance of DAGSTER_HOME (the runs show in
    `dagster dev`). A line per step, then what was published. Ranks with the live publication's ranking
    settings (as the sensor does) when the dump comes from the live one's source, else with the defaults
    (--keep-settings carries them); the flags and --config-json go over them, and the settings used are
    printed whenever they differ from the defaults."""
    return _run("refresh_job", flags)


@cli.command(short_help="re-rank the live dump with other settings (rerank_job) and publish")
@runs_job
def rerank(**flags: Any) -> int:
    """Re-fit the leaderboards of the live dump with other ranking settings (the flags, over the live
    publication's settings) and publish them through the gate, then render the report: Dagster's
    rerank_job (the flat tables are reused). E.g. `arena-pipeline rerank --ties drop --bootstrap-rounds 200`."""
    return _run("rerank_job", flags)


#: The project folder's settings file, which `dagster dev` loads too: one configuration for both.
DOTENV = ".env"


def load_dotenv(folder: Path | None = None) -> list[str]:
    """The variables of ``.env`` in ``folder`` (the current one) put in the environment, as `dagster dev`
    loads them; a variable already set wins. Returns the names set."""
    path = (folder or Path.cwd()) / DOTENV
    if not path.is_file():
        return []
    from dotenv import dotenv_values  # python-dotenv: Dagster's own .env reader

    added = {k: v for k, v in dotenv_values(path).items() if v is not None and k not in os.environ}
    os.environ.update(added)
    return list(added)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (``--help`` and usage errors are returned, not raised); the
    current folder's ``.env`` is loaded first (:func:`load_dotenv`)."""
    load_dotenv()
    try:
        with cli.make_context(PROG, list(sys.argv[1:] if argv is None else argv)) as ctx:
            return cli.invoke(ctx)
    except click.exceptions.Exit as exc:  # --help
        return exc.exit_code
    except click.ClickException as exc:  # a usage error: click prints the usage line and the message
        exc.show()
        return exc.exit_code
    except CliError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:  # e.g. `arena-pipeline leaderboard | head`
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
