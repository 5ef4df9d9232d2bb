"""The static report: ``templates/report.html.j2`` rendered with its CSS and JS inlined (one offline file)."""

from __future__ import annotations

import datetime as dt
import errno
import html
import json
import os
import re
from importlib.resources import files
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
from markupsafe import Markup

from arena_pipeline.constants import DEFAULT_REPORT_PATH as _DEFAULT
from arena_pipeline.constants import LEADERBOARD_TABLE, SCHEMA, report_beside
from arena_pipeline.core.dataset.categories import RULES_BY_NAME
from arena_pipeline.core.store.atomic import write_text_atomic
from arena_pipeline.core.store.records import live_publication
from arena_pipeline.core.validation.benchmarks import MIN_MODELS
from arena_pipeline.presentation.charts import (
    benchmark_scatter_svg,
    calibration_chart_svg,
    heatmap_svg,
    profile_chart_svg,
    rating_chart_svg,
)
from arena_pipeline.presentation.read import PublicationView, read_published
from arena_pipeline.presentation.templating import environment, interval

DEFAULT_REPORT_PATH = Path(_DEFAULT)

#: What marks a page this project wrote: the generator tag in the head of ``templates/report.html.j2``.
#: An existing file without it in its first :data:`MARKER_WITHIN` bytes is never replaced.
REPORT_MARKER = b'<meta name="generator" content="arena_pipeline'
MARKER_WITHIN = 64 * 1024
#: The tag that carries the id of the publication a page shows (in the head of ``templates/report.html.j2``).
PUBLICATION_TAG = re.compile(rb'<meta name="arena-publication" content="(\d+)">')
#: The tag that carries the warehouse file a page was rendered from (its absolute path, HTML-escaped).
WAREHOUSE_TAG = re.compile(rb'<meta name="arena-warehouse" content="([^"]*)">')


class NotAReportError(FileExistsError):
    """The report's path holds a file this project did not write (say, the warehouse): not replaced."""

    def __init__(self, path: Path) -> None:
        super().__init__(errno.EEXIST, f"{path} exists and is not a report arena_pipeline wrote (no "
                         f"{REPORT_MARKER.decode()}\"> tag): not replaced; give the report another path "
                         "(ARENA_REPORT, or the report command's OUT)", str(path))


class OtherWarehouseReport(NotAReportError):
    """The report's path holds the report of another warehouse (its ``arena-warehouse`` tag): not replaced."""

    def __init__(self, path: Path, other: str) -> None:
        FileExistsError.__init__(self, errno.EEXIST, f"{path} is the report of another warehouse ({other}): not "
                                 "replaced; give this warehouse's report another path (ARENA_REPORT, or the report "
                                 "command's OUT), or remove that page", str(path))


def page_warehouse(head: bytes) -> str | None:
    """The warehouse a page's head names (its ``arena-warehouse`` tag), or None (a page from before the tag)."""
    found = WAREHOUSE_TAG.search(head)
    return html.unescape(found.group(1).decode("utf-8", "replace")) if found else None


def refuse_foreign_file(path: str | os.PathLike[str], warehouse: str | os.PathLike[str] | None = None) -> None:
    """Raise :class:`NotAReportError` when ``path`` is an existing file other than a report of this project,
    and :class:`OtherWarehouseReport` when it is the report of another warehouse than ``warehouse`` (one
    that still exists, the page not in ``warehouse``'s own place: :func:`_another`).

    A missing path, or a report written before (its :data:`REPORT_MARKER` in its first
    :data:`MARKER_WITHIN` bytes) of the same warehouse, of none named or of one gone, may be replaced.
    """
    path = Path(path)
    if not path.is_file():
        return
    with open(path, "rb") as fh:
        head = fh.read(MARKER_WITHIN)
    if REPORT_MARKER not in head:
        raise NotAReportError(path)
    if warehouse is not None and (other := page_warehouse(head)) is not None and _another(path, other, warehouse):
        raise OtherWarehouseReport(path, other)


def _another(page: Path, named: str, warehouse: str | os.PathLike[str]) -> bool:
    """Whether a page naming the warehouse ``named`` belongs to another warehouse than ``warehouse``: that
    one still exists and is another file, and the page is not in ``warehouse``'s own place (``report/``
    beside it, which a copied or moved warehouse brings along with its page)."""
    ours = Path(warehouse).resolve()
    if named == str(ours) or page.resolve() == report_beside(ours).resolve() or not Path(named).is_file():
        return False
    return not (ours.is_file() and Path(named).samefile(ours))


def _head(path: Path) -> bytes | None:
    """The first :data:`MARKER_WITHIN` bytes of ``path``; None when it is not a file (or cannot be read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(MARKER_WITHIN)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return None


def page_publication(path: str | os.PathLike[str]) -> int | None:
    """The id of the publication the report page at ``path`` shows (its ``arena-publication`` tag).

    None when there is no page, the file is not a report of this project, or the page was written
    before pages carried the id.
    """
    head = _head(Path(path))
    if head is None or REPORT_MARKER not in head:
        return None
    found = PUBLICATION_TAG.search(head)
    return int(found.group(1)) if found else None


def _leaderboard_rows(live: dict) -> int | None:
    """The leaderboard's row count recorded with a publication (``arena.publications.rows``), None if unknown."""
    rows = live.get("rows")
    try:
        rows = json.loads(rows) if isinstance(rows, str) else rows
    except ValueError:
        return None
    count = rows.get(LEADERBOARD_TABLE) if isinstance(rows, dict) else None
    return count if isinstance(count, int) else None


def report_lag(path: str | os.PathLike[str], live: dict | None) -> str | None:
    """Why the report page at ``path`` is behind the live publication (``live``: its ``arena.publications``
    row), in words; None when the page shows it, or when there is nothing to show.

    Behind means: no page (or a page without the publication's id) while a publication with a board is
    live, a page of another publication, or a page left while the live publication's leaderboard is empty
    (published on purpose: the gate removes the page then). A file that is not a report of this project
    is never behind: it is not replaced (:func:`refuse_foreign_file`).
    """
    if live is None:
        return None
    path = Path(path)
    head = _head(path)
    if head is not None and REPORT_MARKER not in head:
        return None
    live_id = int(live["publication_id"])
    if _leaderboard_rows(live) == 0:
        return None if head is None else f"publication {live_id} has an empty leaderboard, the page shows an older board"
    shown = page_publication(path)
    if shown == live_id:
        return None
    if head is None:
        return f"no page while publication {live_id} is live"
    return f"the page shows {'an unknown publication' if shown is None else f'publication {shown}'}, " \
           f"publication {live_id} is live"


def write_live_report(pub: PublicationView, out_path: str | os.PathLike[str], **options: Any) -> Path | None:
    """Write the report of ``pub`` (the live publication) with :func:`render_report` and return its path;
    with an empty leaderboard (published on purpose) remove a previous page instead (its board is no
    longer live) and return None. The one writer of the report file (the gate's step, the freshness
    sensor, the ``report`` command).

    Raises
    ------
    NotAReportError
        ``out_path`` holds a file this project did not write: nothing is written or removed.
    OSError
        The page cannot be written (a read-only folder, a full disk).
    """
    if pub.leaderboard.is_empty():
        refuse_foreign_file(out_path, options.get("warehouse"))  # never delete what is not a report (say, the warehouse itself)
        Path(out_path).unlink(missing_ok=True)
        return None
    return render_report(pub, out_path, **options)


def why_not_written(exc: BaseException) -> str:
    """Why a page was not written, in words: an OS error's own text with its path (a read-only folder,
    a full disk, a file where the folder should be, a file that is not a report), else the error."""
    if isinstance(exc, OSError) and exc.strerror:
        path = exc.filename
        return exc.strerror if path is None or str(path) in exc.strerror else f"{exc.strerror}: {path}"
    return f"{type(exc).__name__}: {exc}"


def catch_up_report(con: duckdb.DuckDBPyConnection, out_path: str | os.PathLike[str],
                    schema: str = SCHEMA, warehouse: str | os.PathLike[str] | None = None) -> str | None:
    """Re-render the report page at ``out_path`` when it is behind the live publication of ``con`` (read
    once, in one snapshot); return what was done in one line, or None when the page was up to date.

    Cheap when nothing is to be done: one row of ``schema.publications`` and the page's first
    :data:`MARKER_WITHIN` bytes (see :func:`report_lag`).

    Raises
    ------
    NotAReportError, OSError, duckdb.Error, LookupError
        The page could not be brought up to date (it is left as it was).
    """
    lag = report_lag(out_path, live_publication(con, schema))
    if lag is None:
        return None
    written = write_live_report(read_published(con, schema), out_path, warehouse=warehouse)
    done = f"re-rendered {written}" if written is not None else f"removed {out_path}"
    return f"report {done} ({lag})"


def _file_count(files: Any) -> int | None:
    """How many files a dumps row lists (its ``files``: JSON text or a list), None when unknown."""
    try:
        files = json.loads(files) if isinstance(files, str) else files
    except ValueError:
        return None
    return len(files) if isinstance(files, list) else None


def _svg(function):
    return lambda *args, **kwargs: Markup(function(*args, **kwargs))


#: What the report's template calls besides its filters: the charts and a few helpers.
_GLOBALS = dict(
    rating_chart=_svg(rating_chart_svg), heatmap=_svg(heatmap_svg), profile_chart=_svg(profile_chart_svg),
    benchmark_scatter=_svg(benchmark_scatter_svg), col=pl.col, rules=RULES_BY_NAME, interval=interval,
    min_models=MIN_MODELS, calibration_chart=_svg(calibration_chart_svg),
)


def _static(name: str) -> Markup:
    return Markup((files("arena_pipeline.presentation") / "templates" / name).read_text(encoding="utf-8"))


def build_report_html(pub: PublicationView, *, title: str = "LMArena leaderboards", heatmap_models: int = 20,
                      generated_at: dt.datetime | None = None, warehouse: str | os.PathLike[str] | None = None) -> str:
    """The report page as a string; see :func:`render_report`."""
    if pub.leaderboard.height == 0:
        raise ValueError("the leaderboard is empty: nothing to report")
    dump = dict(pub.dump or {})
    model_ids = {m: f"model-{i}" for i, m in enumerate(pub.models())}
    return environment().get_template("report.html.j2").render(
        **_GLOBALS, pub=pub, title=title, heatmap_models=heatmap_models, categories=pub.categories(), dump=dump,
        file_count=_file_count(dump.get("files")), no_board=pub.no_board(),
        model_ids=model_ids,
        generated=(generated_at or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        css=_static("report.css"), js=_static("report.js"),
        warehouse=None if warehouse is None else str(Path(warehouse).resolve()),
    )


def render_report(pub: PublicationView, out_path: str | os.PathLike[str] = DEFAULT_REPORT_PATH, **options: Any) -> Path:
    """Write the published leaderboards as one self-contained, offline HTML file.

    Per category (a tab each, board order): the primary board (``bt``) with provisional models in a
    table of their own, the other boards collapsed, a rating chart with 95% intervals (``bt`` and
    ``bt_style``), raw vs style-controlled ranks with the style coefficients, and the pairwise
    win-rate heatmap. Then the categories without a board and why (``arena.board_status``), the models
    with battles but no rating and why (``arena.unrated_models``), one panel per model (opened from
    its name on any board: rating per category, record against each opponent, style against the
    field), the benchmark comparison when it describes the live publication (per category: the
    agreement with each benchmark and a scatter of rating against score; ``pub.benchmarks``), the
    data-quality summary and the dump. ``options``: ``title``, ``heatmap_models``,
    ``generated_at``, ``warehouse`` (the file ``pub`` was read from, named in the page so that a report of
    another warehouse is never written over) of :func:`build_report_html`. Written atomically (temporary file, then rename),
    and only over a missing file or a report this project wrote (:func:`refuse_foreign_file`).
    With ``arena.model_fit`` published, a section after the models without a rating shows each board's
    held-out goodness of fit: a table and a calibration chart per board.

    Raises
    ------
    ValueError
        The leaderboard is empty (nothing is written).
    NotAReportError
        ``out_path`` is an existing file that is not a report of this project (a warehouse given as
        the report's path, say): nothing is written.
    """
    refuse_foreign_file(out_path, options.get("warehouse"))
    page = build_report_html(pub, **options)
    refuse_foreign_file(out_path, options.get("warehouse"))  # again: the page took a while, a file may have come
    return write_text_atomic(out_path, page)
