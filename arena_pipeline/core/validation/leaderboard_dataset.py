"""LMArena's published ratings history, the Hub dataset ``lmarena-ai/leaderboard-dataset``, read as a published board.

The dataset (CC-BY-4.0) holds every leaderboard LMArena published, one subset per arena and two splits: ``latest``
(the last publication) and ``full`` (every publication). A subset's split is one parquet file,
``<subset>/<split>-00000-of-00001.parquet``, with one row per (publication, category, model)::

    model_name, organization, license: string
    rating, rating_lower, rating_upper, variance: double
    vote_count, rank: int64
    category: string                      e.g. the overall board and LMArena's per-category boards
    leaderboard_publish_date: string      ISO date, e.g. "2025-11-05" (an ISO timestamp, a date or a timestamp
                                          column is read too)

Two subsets are read: ``text`` (plain Bradley-Terry, our ``bt``) and ``text_style_control`` (our ``bt_style``): the
subset, not the category key, says which method a row compares with. Category values go through the category map
(``arena_pipeline/data/category_map.csv``) as the JSON's keys do; a value it does not know is kept and reported.
``rating_lower``/``rating_upper`` are the published 95% interval.

One publication per subset is read: the one of ``publish_date`` when given (it must be in the file), else the one
nearest ``near`` (the dump's last vote; an equal distance takes the earlier), else the last one. Where each row
came from (the file, the Hub commit, the date chosen and why) is returned with the board, so the comparison and the
alignment record it.

Only the layout above was checked, offline, on a constructed file (``arena_pipeline_tests/data/external/``): the
Hub is not reachable from the machines this was written on.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from arena_pipeline.core.labels import PRIMARY_METHOD, STYLE_METHODS
from arena_pipeline.core.validation.benchmarks import hub_location
from arena_pipeline.core.validation.external import BoardFormatError, board_frame, board_sha256, read_published_board

#: The dataset on the Hub.
REPO_ID = "lmarena-ai/leaderboard-dataset"
#: The subsets read, and the method of ours each one is compared with.
SUBSETS: dict[str, str] = {"text": PRIMARY_METHOD, "text_style_control": STYLE_METHODS[0]}
#: The split read from the Hub: every publication (``latest`` holds only the last one).
SPLIT = "full"
#: Columns a file must have, and the type each is read as.
REQUIRED: dict[str, pl.DataType] = {
    "model_name": pl.String(),
    "rating": pl.Float64(),
    "category": pl.String(),
    "leaderboard_publish_date": pl.Date(),
}
_COMMIT = re.compile(r"[0-9a-f]{40}")
#: Columns read when present (null otherwise).
OPTIONAL: dict[str, pl.DataType] = {"rating_lower": pl.Float64(), "rating_upper": pl.Float64()}


@dataclass(frozen=True)
class PublishedHistory:
    """One publication per subset of the ratings history, as a published board (``external.BOARD_SCHEMA``)."""

    board: pl.DataFrame
    #: per subset read: ``file``, ``publish_date`` (ISO), ``chosen`` (how), ``dates`` (how many the file holds)
    subsets: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the Hub commit the files came from (None for local files)
    revision: str | None = None

    def publish_date(self) -> str | None:
        """The publication date read (the ``text`` subset's, else the first subset's)."""
        chosen = self.subsets.get("text") or next(iter(self.subsets.values()), None)
        return None if chosen is None else chosen["publish_date"]

    def sha256(self) -> str:
        """SHA-256 of the board read (its rows as CSV): the same publication gives the same hash, from any file."""
        return hashlib.sha256(self.board.write_csv().encode("utf-8")).hexdigest()

    def record(self) -> dict[str, Any]:
        """What the comparison and the alignment keep about it (plain, JSON-serialisable)."""
        return {"dataset": REPO_ID, "revision": self.revision, "subsets": self.subsets}


def subset_of(path: Path) -> str | None:
    """The subset a parquet file holds, from its folder's name (``text_style_control/full-...parquet``), or None."""
    return path.parent.name if path.parent.name in SUBSETS else None


def is_history_location(location: str | Path) -> bool:
    """Whether a local ``location`` is a ratings-history parquet file or a folder of subset folders."""
    path = Path(location)
    if path.is_file():
        return path.suffix.lower() == ".parquet"
    return path.is_dir() and any((path / subset).is_dir() for subset in SUBSETS)


def local_files(location: str | Path, split: str = SPLIT) -> dict[str, Path]:
    """The parquet file of each subset at a local ``location``.

    A file is the subset its folder names (``text`` when the folder is no subset's); a folder holds the dataset's
    layout, ``<subset>/<split>-*.parquet`` (the first such file of each subset; ``latest`` when it has no ``split``).
    """
    path = Path(location)
    if path.is_file():
        return {subset_of(path) or "text": path}
    found = {}
    for subset in SUBSETS:
        for name in (split, "latest"):
            files = sorted((path / subset).glob(f"{name}-*.parquet"))
            if files:
                found[subset] = files[0]
                break
    if not found:
        raise BoardFormatError(path, f"no {'/'.join(SUBSETS)} subset folder with a {split}-*.parquet file")
    return found


def _scan_file(path: Path, subset: str) -> pl.LazyFrame:
    """``source_category``, ``model``, ``rating``, ``ci_lower``, ``ci_upper``, ``method``, ``publish_date`` (lazy)."""
    try:
        schema = pl.read_parquet_schema(path)
    except Exception as exc:  # polars raises several types for a file that is not parquet
        raise BoardFormatError(path, f"not a readable parquet file ({type(exc).__name__}: {exc})") from exc
    missing = [c for c in REQUIRED if c not in schema]
    if missing:
        raise BoardFormatError(path, f"missing column(s) {missing} of {REPO_ID}'s layout; got {list(schema)}")
    date = pl.col("leaderboard_publish_date")
    if schema["leaderboard_publish_date"] == pl.String:
        date = date.str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False)  # "2025-11-05" or "2025-11-05T00:00:00"
    columns = [pl.col(c).cast(t, strict=False) if c in schema else pl.lit(None, t) for c, t in OPTIONAL.items()]
    return pl.scan_parquet(path).select(
        pl.col("category").cast(pl.String).alias("source_category"),
        pl.col("model_name").cast(pl.String).alias("model"),
        pl.col("rating").cast(pl.Float64, strict=False).alias("rating"),
        *[c.alias(name) for c, name in zip(columns, ("ci_lower", "ci_upper"), strict=True)],
        pl.lit(SUBSETS[subset]).alias("method"),
        date.cast(pl.Date).alias("publish_date"),
    )


def _publication(path: Path, subset: str, publish_date: dt.date | None,
                 near: dt.date | None) -> tuple[pl.DataFrame, dt.date, str, int]:
    """The rows of the publication chosen in one subset's file (only its rows are held), the date, how, and the
    number of publications the file holds."""
    scan = _scan_file(path, subset)
    try:
        found = scan.select(pl.col("publish_date").unique().sort()).collect().get_column("publish_date")
    except pl.exceptions.PolarsError as exc:
        raise BoardFormatError(path, f"not readable in {REPO_ID}'s layout ({type(exc).__name__}: {exc})") from exc
    if found.null_count():
        raise BoardFormatError(path, "a row's leaderboard_publish_date is not a date (YYYY-MM-DD)")
    dates = found.to_list()
    if not dates:
        raise BoardFormatError(path, "the file holds no rows")
    try:
        chosen, how = choose_date(dates, publish_date, near)
    except ValueError as exc:
        raise BoardFormatError(path, str(exc)) from None
    rows = scan.filter(pl.col("publish_date") == chosen).drop("publish_date").collect()
    for column, problem in (("model", "an empty model_name"), ("source_category", "an empty category")):
        if rows.get_column(column).null_count():
            raise BoardFormatError(path, f"the {chosen.isoformat()} publication has a row with {problem}")
    repeated = rows.filter(pl.struct("source_category", "model").is_duplicated())
    if repeated.height:
        row = repeated.row(0, named=True)
        raise BoardFormatError(path, f"model {row['model']!r} appears more than once in category "
                               f"{row['source_category']!r} of the {chosen.isoformat()} publication")
    return rows, chosen, how, len(dates)


def choose_date(dates: list[dt.date], publish_date: dt.date | None, near: dt.date | None) -> tuple[dt.date, str]:
    """The publication to read among ``dates`` (sorted, not empty) and how it was chosen.

    Raises ValueError when ``publish_date`` is not one of them (naming the nearest ones).
    """
    if publish_date is not None:
        if publish_date not in dates:
            nearest = sorted(dates, key=lambda d: abs((d - publish_date).days))[:3]
            raise ValueError(f"no publication on {publish_date.isoformat()}; the nearest: "
                             f"{', '.join(d.isoformat() for d in sorted(nearest))}")
        return publish_date, "as configured"
    if near is not None:
        chosen = min(dates, key=lambda d: (abs((d - near).days), d))
        return chosen, f"nearest the dump's last vote ({near.isoformat()})"
    return dates[-1], "the last publication (no vote date to choose by)"


def read_history(files: dict[str, Path], *, publish_date: str | dt.date | None = None,
                 near: dt.date | dt.datetime | None = None, aliases: pl.DataFrame | None = None,
                 category_map: pl.DataFrame | None = None, revision: str | None = None,
                 names: dict[str, str] | None = None) -> PublishedHistory:
    """One publication of each subset's file, as a published board.

    Parameters
    ----------
    files
        The parquet file of each subset (:data:`SUBSETS`).
    publish_date
        The publication to read (an ISO date); None: the one nearest ``near``.
    near
        The dump's last vote.
    aliases, category_map
        As for ``external.read_published_board``.
    revision, names
        The Hub commit and the name to record for each subset's file (default: its path).

    Raises
    ------
    BoardFormatError
        A file that is not parquet, lacks a column of the layout, has a row without date, model or category,
        a duplicated (category, model) in the publication read, a date that is not in it, or the checks of
        ``external.board_frame``.
    """
    if isinstance(publish_date, str):
        try:
            publish_date = dt.date.fromisoformat(publish_date.strip())
        except ValueError:
            raise BoardFormatError(next(iter(files.values())), f"the publish date {publish_date!r} is not a "
                                   "date (YYYY-MM-DD)") from None
    if isinstance(near, dt.datetime):
        near = near.date()
    parts, subsets = [], {}
    for subset, path in files.items():
        rows, chosen, how, n_dates = _publication(path, subset, publish_date, near)
        parts.append(rows)
        subsets[subset] = {"file": (names or {}).get(subset, str(path)), "publish_date": chosen.isoformat(),
                           "chosen": how, "dates": n_dates, "rows": rows.height}
    label = ", ".join(str(p) for p in files.values())
    return PublishedHistory(board_frame(pl.concat(parts), label, aliases, category_map), subsets, revision)


def download(repo_id: str, revision: str | None, cache_dir: str | Path, *, endpoint: str | None = None,
             token: str | bool | None = None, split: str = SPLIT) -> tuple[dict[str, Path], dict[str, str], str]:
    """The parquet file of each subset of ``repo_id`` at ``revision`` (default ``main``), fetched into ``cache_dir``.

    The revision is resolved to its commit first (``core.ingest.hub.resolve_revision``), and the files are read at that
    commit (``huggingface_hub.hf_hub_download``). A full commit sha whose files the cache holds is served from it
    without a request.
    Returns the files, their names in the repository and the commit. Raises ``core.ingest.hub``'s errors
    (``HubNotFound``, ``HubUnavailable``) and BoardFormatError when the commit holds no subset's file.
    """
    from huggingface_hub import HfApi, hf_hub_download

    from arena_pipeline.core.ingest import hub

    hub_cache = Path(cache_dir) / "hub"
    if revision and _COMMIT.fullmatch(revision):
        snapshot = hub_cache / f"datasets--{repo_id.replace('/', '--')}" / "snapshots" / revision
        cached = {subset: sorted(snapshot.glob(f"{subset}/{split}-*.parquet")) for subset in SUBSETS}
        if any(cached.values()):
            return ({s: f[0] for s, f in cached.items() if f},
                    {s: f"hf://datasets/{repo_id}@{revision}/{f[0].relative_to(snapshot).as_posix()}"
                     for s, f in cached.items() if f}, revision)
    sha = hub.resolve_revision(repo_id, revision or "main", endpoint=endpoint, token=token)
    listed = HfApi(endpoint=endpoint.rstrip("/") if endpoint else None, token=token).list_repo_files(
        repo_id, repo_type="dataset", revision=sha)
    names = {}
    for subset in SUBSETS:
        chosen = sorted(f for f in listed if f.startswith(f"{subset}/{split}-") and f.endswith(".parquet"))
        if chosen:
            names[subset] = chosen[0]
    if not names:
        raise BoardFormatError(f"hf://datasets/{repo_id}@{sha}",
                               f"no {'/'.join(f'{s}/{split}-*.parquet' for s in SUBSETS)} file")
    files = {subset: Path(hf_hub_download(repo_id, name, repo_type="dataset", revision=sha,
                                          cache_dir=str(hub_cache), endpoint=endpoint, token=token))
             for subset, name in names.items()}
    return files, {s: f"hf://datasets/{repo_id}@{sha}/{n}" for s, n in names.items()}, sha


def read_board(location: str, aliases: pl.DataFrame, category_map: pl.DataFrame, *, publish_date: str | None = None,
               near: dt.date | dt.datetime | None = None, cache_dir: str | Path = "data/cache",
               endpoint: str | None = None, token: str | bool | None = None) -> tuple[pl.DataFrame, dict[str, Any]]:
    """A published board from any location ``ARENA_PUBLISHED_BOARD`` may name, and what identifies it.

    The ratings history from the Hub (a dataset id, ``hf://datasets/<org>/<name>[@revision]``: :func:`download`) or a
    local copy (:func:`is_history_location`), at ``publish_date``'s publication, else the one nearest ``near``
    (:func:`read_history`); any other location is a JSON or CSV file (``external.read_published_board``).

    Returns
    -------
    tuple
        The board (``external.BOARD_SCHEMA``) and ``{"sha256": ...}`` (of the file, or of the history's rows read),
        for the history also ``board_date`` (the publication read) and ``history`` (:meth:`PublishedHistory.record`).

    Raises
    ------
    BoardFormatError
        A malformed location, file or publication, or a Hub that does not serve it.
    FileNotFoundError
        A local file that does not exist.
    """
    try:
        hub_id = hub_location(location)
    except ValueError as exc:
        raise BoardFormatError(location, str(exc)) from None
    if hub_id is None and not is_history_location(location):
        return (read_published_board(location, aliases=aliases, category_map=category_map),
                {"sha256": board_sha256(location)})
    names, sha = None, None
    if hub_id is None:
        files = local_files(location)
    else:
        from arena_pipeline.core.ingest.hub import HubError

        try:
            files, names, sha = download(hub_id[0], hub_id[1], cache_dir, endpoint=endpoint, token=token)
        except (HubError, OSError) as exc:  # huggingface_hub's HTTP errors are OSErrors
            raise BoardFormatError(location, f"the Hub did not serve it ({type(exc).__name__}: {exc})") from None
    history = read_history(files, publish_date=publish_date, near=near, aliases=aliases, category_map=category_map,
                           revision=sha, names=names)
    return history.board, {"sha256": history.sha256(), "board_date": history.publish_date(), "history": history.record()}
