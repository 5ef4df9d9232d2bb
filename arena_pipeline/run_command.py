"""``arena-pipeline refresh`` / ``rerank``: a job run in ``dagster dev``'s instance, a line per step, the result last.

The run is a run of the instance ``DAGSTER_HOME`` names (the one ``dagster dev`` and the daemon use, so it
shows in the UI); without ``DAGSTER_HOME`` it runs in a throw-away instance, and says so. Dagster's own
console log is off (``--verbose`` turns it back on): a line per finished step, with its time and the step's
last line of its own, comes from the run's events (:class:`Progress`), and the last line says what was
published, or why nothing was. A user error (a path that does not exist, a dump without a column, a bad
alias file, a config key misspelt or out of bounds, JSON that does not parse) is one line
(:class:`RunError`), never a traceback; ``--verbose`` shows the failed step's traceback too.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb

from arena_pipeline.assets.run_config import RANKINGS_OP, RankingRunConfig, check_ranking_run_config, run_config_of
from arena_pipeline.constants import DEFAULT_WAREHOUSE, LEADERBOARD_TABLE, SCHEMA, SETTINGS_TAG
from arena_pipeline.core.publication.gate import LOWER_MIN_BATTLES, RELAX_HINT, SOURCE_CHANGE
from arena_pipeline.core.publication.settings_source import SOURCE_FORMAT
from arena_pipeline.core.store import snapshot
from arena_pipeline.core.store.connections import open_reader
from arena_pipeline.core.store.records import live_publication
from arena_pipeline.core.store.warehouse import quoted
from arena_pipeline.core.text import one_line
from arena_pipeline.refresh import configured_source, for_source, read_live
from arena_pipeline.resources import DumpSource, ReportSettings, Warehouse

EXIT_FAILED = 1  # the run failed (a user error in a step, the gate's refusal)
EXIT_CONFIG = 2  # the run configuration was refused before the run started

#: Dagster's warnings about its own API (an argument in beta, a function superseded): not the user's to act on.
DAGSTER_NOISE = (dg.BetaWarning, dg.PreviewWarning, dg.SupersessionWarning)

#: The exceptions a step raises for what the user gave it (a path, a file, a setting): their message is the line.
#: Any other exception is a fault of the pipeline: its line says so and points at ``--verbose``.
USER_ERRORS = frozenset({
    "SourceError", "FileChangedError", "UnknownFormatError", "AliasTableError", "HubError", "HubUnavailable",
    "HubNotFound", "ShardVerificationError", "NoShardsFound", "WarehouseLockedError", "WarehouseCorruptError",
    "NotAWarehouseError", "StoreMissingError", "ForeignFileError", "WarehouseNameError", "ResourceLimitError", "PublicationError", "NothingBuiltError", "BoardFormatError",
    "BenchmarkFormatError", "SuiteError", "Failure", "ValueError", "FileNotFoundError", "PermissionError",
    "IsADirectoryError", "NotADirectoryError",
})


class RunError(Exception):
    """A run that could not start or did not publish: one line, and the exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------------------------------
# the run configuration
# ---------------------------------------------------------------------------------------------


def parse_config_json(text: str | None) -> dict[str, Any]:
    """``--config-json``: a JSON object (Dagster's run configuration), or a one-line :class:`RunError`."""
    if not text:
        return {}
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise RunError(f"--config-json is not valid JSON: {exc}", EXIT_CONFIG) from None
    if not isinstance(config, dict):
        raise RunError(f"--config-json must be a JSON object (the run configuration), got {type(config).__name__}",
                       EXIT_CONFIG)
    return config


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` laid on it, dict by dict (``over`` wins)."""
    merged = dict(base)
    for key, value in over.items():
        merged[key] = _merge(merged[key], value) if isinstance(value, Mapping) and isinstance(
            merged.get(key), Mapping) else value
    return merged


def run_config(config_json: Mapping[str, Any], rankings: Mapping[str, Any], gate: Mapping[str, Any],
               base_rankings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run configuration: ``base_rankings`` (the live publication's settings, or none), then
    ``--config-json``, then the named flags (``rankings``: the ``rankings`` op's settings, ``gate``: the
    ``publication_gate`` op's), each over the one before."""
    config: dict[str, Any] = {}
    if base_rankings:
        config = {"ops": {RANKINGS_OP: {"config": dict(base_rankings)}}}
    config = _merge(config, config_json)
    flags: dict[str, Any] = {}
    if rankings:
        flags[RANKINGS_OP] = {"config": dict(rankings)}
    if gate:
        flags["publication_gate"] = {"config": dict(gate)}
    return _merge(config, {"ops": flags}) if flags else config


_UNEXPECTED = re.compile(r'Received unexpected config entry "([^"]+)" at path ([^.]+)\. Expected: "(.*)"', re.S)


def config_error_line(exc: dg.DagsterInvalidConfigError) -> str:
    """Dagster's config errors in one line: each error's message without the (long) type it expected; a
    misspelt key gets the closest known key (``did you mean 'bootstrap_rounds'?``)."""
    parts = []
    for error in exc.errors:
        message = " ".join(error.message.split())
        if match := _UNEXPECTED.search(error.message):
            key, path, expected = match.groups()
            known = re.findall(r"(?:^|[{\s])(\w+)\??:", expected)
            close = difflib.get_close_matches(key, known, n=1)
            message = (f"unknown key {key!r} at {path.removeprefix('root:')}"
                       + (f": did you mean {close[0]!r}?" if close else f" (known: {', '.join(dict.fromkeys(known))})"))
        else:
            message = message.split(' Expected: "')[0]
        parts.append(message)
    return "run config refused: " + "; ".join(parts)


def check_run_config(job: dg.JobDefinition, config: Mapping[str, Any]) -> None:
    """The configuration as Dagster types it (keys, types), then the ranking settings' bounds and rules,
    checked before a run is created: a :class:`RunError` of one line."""
    try:
        dg.validate_run_config(job, dict(config))
    except dg.DagsterInvalidConfigError as exc:
        raise RunError(config_error_line(exc), EXIT_CONFIG) from None
    if RANKINGS_OP in (config.get("ops") or {}):
        try:
            check_ranking_run_config(dict(config))
        except ValueError as exc:
            raise RunError(str(exc), EXIT_CONFIG) from None


def _listed(settings: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def starting_settings(warehouse: Warehouse, source: DumpSource | None, *, from_defaults: bool = False,
                      keep_settings: bool = False) -> tuple[dict[str, Any] | None, str | None]:
    """The ranking settings a run starts from and the line that says so (:func:`_starting`)."""
    base, said, _ = _starting(warehouse, source, from_defaults=from_defaults, keep_settings=keep_settings)
    return base, said


def _starting(warehouse: Warehouse, source: DumpSource | None, *, from_defaults: bool = False,
              keep_settings: bool = False) -> tuple[dict[str, Any] | None, str | None, dict[str, str]]:
    """The ranking settings a run starts from, and the line that says so: the live publication's (as the
    sensor ranks), unless ``from_defaults``, or unless ``source`` (a refresh's) differs from the source of
    the live publication's dump (:func:`refresh.for_source`, as the sensor decides): a sample's
    ``display_min_battles=0`` must not travel silently to another dump, so such a refresh starts from the
    defaults and names what ``--keep-settings`` would carry. The third item is the run's tag naming the
    publication whose settings it carries (its gate refuses to publish over another publication with other
    ranking settings, rule 28)."""
    if from_defaults:
        return None, None, {}
    live = read_live(warehouse)
    if live.ranking is None:
        return None, None, {}
    base = run_config_of(live.ranking)
    said = f"ranking settings: publication {live.publication_id}'s (as the sensor ranks)"
    moved = for_source(live, None if keep_settings else source)
    if moved.ranking is not None:
        return base, said, {SETTINGS_TAG: SOURCE_FORMAT.format(live.publication_id)}
    carried = changed_settings(base)
    return None, (f"ranking settings: the defaults, not publication {live.publication_id}'s: its dump came from "
                  f"another source ({live.source!r}; this run loads {configured_source(source)!r})"
                  + (f"; --keep-settings ranks with its {_listed(carried)}" if carried else "")), {}


def changed_settings(rankings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ranking settings of ``rankings`` (the ``rankings`` op's config) that differ from the defaults."""
    defaults = RankingRunConfig().model_dump()
    given = RankingRunConfig(**dict(rankings or {})).model_dump()
    return {k: v for k, v in given.items() if v != defaults[k]}


def settings_line(config: Mapping[str, Any]) -> str | None:
    """``ranking settings used: display_min_battles=0 (default 301), ...`` when the run's ranking settings
    differ from the defaults; None when they are the defaults (or not valid: the check says why)."""
    rankings = ((config.get("ops") or {}).get(RANKINGS_OP) or {}).get("config") or {}
    try:
        changed = changed_settings(rankings)
    except (ValueError, TypeError):
        return None
    if not changed:
        return None
    defaults = RankingRunConfig().model_dump()
    return "ranking settings used: " + ", ".join(f"{k}={v} (default {defaults[k]})" for k, v in changed.items())


def check_environment(environ: Mapping[str, str]) -> None:
    """Before a run: a misspelt ``ARENA_*`` variable (``ARENA_SOUCE``) whose right spelling is unset is a
    :class:`RunError` naming it (the run would quietly use that setting's default: the Hub instead of the
    local dump meant); another unknown one is a warning of the refresh's first step
    (:func:`environment.environment_warnings`). A ``DAGSTER_HOME`` that is no folder is one line."""
    from arena_pipeline.environment import known_variables, typo_lines

    refusals, _ = typo_lines(environ, known_variables())  # the others: warnings of the refresh's first step
    if refusals:
        raise RunError("; ".join(refusals) + "; nothing was run", EXIT_CONFIG)
    home = environ.get("DAGSTER_HOME")
    if home and not Path(home).is_absolute():
        raise RunError(f"DAGSTER_HOME={home} is not an absolute path (Dagster takes only those): set "
                       f"DAGSTER_HOME=$PWD/{home.removeprefix('./')}", EXIT_CONFIG)
    if home and not Path(home).is_dir():
        raise RunError(f"DAGSTER_HOME={home} is not a folder: create it (mkdir -p {home}; the project's is "
                       "dagster_home/, with its dagster.yaml) or unset DAGSTER_HOME for a throw-away instance",
                       EXIT_CONFIG)


def check_new_warehouse(warehouse: Warehouse, *, new: bool, echo: Callable[[str], None]) -> None:
    """Before a refresh into a warehouse path that does not exist: when the default warehouse (or its store)
    exists and is another file, a :class:`RunError` asking for ``--new`` (a misspelt ``ARENA_WAREHOUSE`` must
    not silently start a new history); else the line that a new warehouse starts at that path, or, when that
    path's own store exists (the snapshot moved aside, as refresh.md's recipe for a damaged file does), that
    the store's history goes on into a new snapshot there."""
    path = Path(warehouse.database_path()).absolute()
    if path.exists():
        return
    store = warehouse.store_path().absolute()
    if store.is_dir():
        echo(f"no warehouse at {path}: writing it anew from the pipeline's store {store} (its publications go on)")
        return
    default = Path(DEFAULT_WAREHOUSE).absolute()
    other = next((p for p in (default, snapshot.store_folder(str(default))) if p.exists()), None)
    if other is not None and path != default and not new:
        raise RunError(f"no warehouse at {path} (ARENA_WAREHOUSE), but there is one at {default}: fix "
                       f"ARENA_WAREHOUSE, or pass --new to start a new warehouse at {path}", EXIT_CONFIG)
    echo(f"no warehouse at {path}: starting a new warehouse there")


def prepare_run(job_name: str, *, config_json: Mapping[str, Any], rankings: Mapping[str, Any],
                gate: Mapping[str, Any], from_defaults: bool = False, keep_settings: bool = False,
                new: bool = False, environ: Mapping[str, str] | None = None,
                echo: Callable[[str], None] = print) -> tuple[dict[str, Any], dict[str, str]]:
    """What ``refresh`` / ``rerank`` check and say before the run, and the run configuration: the
    environment (:func:`check_environment`), a new warehouse (refresh), the ranking settings started from
    (:func:`starting_settings`) and, whenever they differ from the defaults, the settings used; with the
    run's tags (the publication whose settings it carries)."""
    check_environment(os.environ if environ is None else environ)
    warehouse = Warehouse()
    refresh = job_name == "refresh_job"
    if refresh:
        check_new_warehouse(warehouse, new=new, echo=echo)
    base, said, tags = _starting(warehouse, DumpSource() if refresh else None, from_defaults=from_defaults,
                                 keep_settings=keep_settings)
    if said:  # the flags laid over carried settings are named here; over the defaults, by the line below
        echo(said + (f", with {_listed(rankings)}" if rankings and base else ""))
    config = run_config(config_json, rankings, gate, base)
    if line := settings_line(config):
        echo(line)
    return config, tags


# ---------------------------------------------------------------------------------------------
# the instance and the run
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def open_instance(echo: Callable[[str], None]) -> Iterator[dg.DagsterInstance]:
    """The instance of ``DAGSTER_HOME`` (the UI's), closed on exit; without it a throw-away one, said so."""
    if os.environ.get("DAGSTER_HOME"):
        with dg.DagsterInstance.get() as instance:
            yield instance
        return
    echo("DAGSTER_HOME is not set: this run is kept nowhere (set DAGSTER_HOME=$PWD/dagster_home to see it "
         "in `dagster dev`)")
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def _seconds(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


class Progress:
    """Prints a line per finished step from the run's events: its state, name and time, and the step's
    last line of its own (``context.log``); a warning a step logs is printed as it comes."""

    MARK = {"STEP_SUCCESS": "done", "STEP_FAILURE": "FAILED", "STEP_SKIPPED": "skipped",
            "STEP_UP_FOR_RETRY": "retry"}

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo
        self.started: dict[str, float] = {}
        self.last: dict[str, str] = {}
        self.steps = 0

    def __call__(self, entry: Any) -> None:
        event, step = entry.dagster_event, entry.step_key
        if event is None:  # a step's own log line
            if step and entry.user_message and not DAGSTER_LINES.search(entry.user_message):
                text = one_line(entry.user_message, 160)
                if entry.level >= 30:
                    self.echo(f"  {step}: warning: {text}")
                else:
                    self.last[step] = text
            return
        kind = event.event_type_value
        if kind == "STEP_START" and step:
            self.started[step] = entry.timestamp
        elif kind in self.MARK and step:
            took = entry.timestamp - self.started.get(step, entry.timestamp)
            self.steps += 1
            said = self.last.get(step)
            self.echo(f"{self.MARK[kind]:>7} {step} ({_seconds(took)})" + (f": {said}" if said else ""))


def run_job(job_name: str, config: Mapping[str, Any], *, verbose: bool = False,
            echo: Callable[[str], None] = print, tags: Mapping[str, str] | None = None) -> str:
    """Run ``job_name`` of the code location in the instance of ``DAGSTER_HOME``, a line per step, and
    return the last line (what was published). Raises :class:`RunError` (one line) when the
    configuration is refused or the run fails."""
    with warnings.catch_warnings():
        for category in DAGSTER_NOISE:
            warnings.simplefilter("ignore", category)
        from arena_pipeline.definitions import defs

        job = defs.resolve_job_def(job_name)
        config = dict(config)
        check_run_config(job, config)
        if not verbose:  # Dagster's console log off: the steps' lines come from the events
            config = _merge(config, {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}})
        with open_instance(echo) as instance:
            run_id = str(uuid.uuid4())
            progress = Progress(echo)
            instance.add_event_listener(run_id, progress)
            echo(f"run {run_id} of {job_name} in {_where(instance)}")
            started = time.monotonic()
            result = job.execute_in_process(run_config=config, instance=instance, run_id=run_id,
                                            raise_on_error=False, tags=dict(tags or {}))
            took = time.monotonic() - started
            if not result.success:
                raise RunError(failure_line(result, verbose))
            echo(f"run {run_id} succeeded in {_seconds(took)} ({progress.steps} steps)")
            return outcome_line(result, Warehouse(), ReportSettings())


def _where(instance: dg.DagsterInstance) -> str:
    return f"the instance at {instance.root_directory}" if instance.is_persistent else "a throw-away instance"


def _error_chain(error: Any) -> list[Any]:
    chain = []
    while error is not None:
        chain.append(error)
        error = error.cause
    return chain


#: The events whose error says why a run failed, in the order they are looked for.
FAILURE_EVENTS = ("STEP_FAILURE", "RESOURCE_INIT_FAILURE", "PIPELINE_FAILURE")

#: The gate's refusal names its run config (what Dagster's own command takes); the CLI's line names its flags.
CLI_RELAX_HINT = "to publish it anyway, pass --allow-degenerate, or raise --max-model-drop / --max-category-drop (up to 1)"
#: The other way out of a source change: keep the new dump apart.
NEW_WAREHOUSE_HINT = "; or give this dump a warehouse of its own: ARENA_WAREHOUSE=data/own.duckdb arena-pipeline refresh --new"

#: Dagster's own lines about steps not run after a failure (the failure's line says it all).
DAGSTER_LINES = re.compile(r"did not yield or return expected outputs|^Dependencies for step ")


def cli_refusal(message: str) -> str:
    """The gate's refusal as the CLI says it: its flags instead of the run config's keys (the gate's and
    ``min_battles``), and, for a dump of another source, a warehouse of its own as the other way out."""
    hint = CLI_RELAX_HINT + (NEW_WAREHOUSE_HINT if SOURCE_CHANGE in message else "")
    return (message.replace(RELAX_HINT, hint).replace(LOWER_MIN_BATTLES, "lower --min-battles")
            .replace(". Nothing was published: ", "; still "))


def failure_line(result: dg.ExecuteInProcessResult, verbose: bool = False) -> str:
    """The failed run in one line: the first failed step (or resource) and what its code raised (the
    gate's refusal: ``nothing published: <why>``). A fault of the pipeline (not one of
    :data:`USER_ERRORS`) says so and points at ``--verbose``."""
    failed = {}
    for event in result.all_events:
        if event.event_type_value in FAILURE_EVENTS and getattr(event.event_specific_data, "error", None):
            failed.setdefault(event.event_type_value, event)
    event = next((failed[kind] for kind in FAILURE_EVENTS if kind in failed), None)
    if event is None:
        return f"nothing published: run {result.run_id} failed (`dagster dev` shows its events)"
    chain = _error_chain(event.event_specific_data.error)
    wrappers = ("DagsterExecutionStepExecutionError", "DagsterResourceFunctionError")
    error = next((e for e in chain if e.cls_name not in wrappers), chain[-1])
    if verbose:
        print("".join(e.to_string() for e in chain), file=sys.stderr)
    message = re.sub(r"^[\w.]+: ", "", error.message.strip(), count=1)
    message = one_line(message, 2000)
    if event.step_key == "publication_gate":
        return "nothing published: " + cli_refusal(message)
    if error.cls_name not in USER_ERRORS:
        message += f" ({error.cls_name}: a fault of the pipeline; --verbose shows the traceback)"
    where = f"step {event.step_key}" if event.step_key else "the run"
    return f"nothing published: {where} failed: {message}"


def outcome_line(result: dg.ExecuteInProcessResult, warehouse: Warehouse, report_settings: ReportSettings) -> str:
    """The run's result: ``published: publication N (revision R), B boards, report at PATH``, or
    ``nothing published: <why>`` (the gate built nothing new, or what it would publish is what the live
    publication shows: ``unchanged``, that publication stays live)."""
    gate = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("publication_gate")]
    report = report_settings.path(warehouse.database_path()).resolve()
    where = f"report at {report}" if report.is_file() else f"no report at {report}"
    if not gate:
        return "nothing published: this run does not run the publication gate"
    metadata = gate[-1].materialization.metadata
    path = Path(warehouse.database_path())
    if "live_publication_id" in metadata:  # the live publication shows this run's tables already (rule 23)
        live = _live(path)
        pid, revision = metadata["live_publication_id"].value, metadata["revision"].value
        boards = f", {live[2]} boards" if live else ""
        return (f"nothing published: unchanged (the same tables, settings and rows as the live publication); "
                f"publication {pid} (revision {revision}) stays live{boards}, {where}")
    if "publication_id" not in metadata:
        live = _live(path)
        return ("nothing published: nothing new (every table of this dump and these settings was reused); "
                + (f"live is publication {live[0]} (revision {live[1]}), {live[2]} boards, {where}" if live
                   else f"nothing is published in {path}"))
    pid, revision = metadata["publication_id"].value, metadata["revision"].value
    live = _live(path)
    boards = f", {live[2]} boards" if live else ""
    return f"published: publication {pid} (revision {revision}){boards}, {where}"


def _live(path: Path) -> tuple[int, str, int] | None:
    """(publication id, revision, boards) of the readers' snapshot at ``path``, or None."""
    if not path.is_file():
        return None
    try:
        con = open_reader(path, timeout_s=10)
        try:
            live = live_publication(con, SCHEMA)
            if live is None:
                return None
            boards = con.execute(f"SELECT count(*) FROM (SELECT DISTINCT category, method FROM "
                                 f"{quoted(SCHEMA, LEADERBOARD_TABLE)})").fetchone()[0]
            return live["publication_id"], live["revision"], boards
        finally:
            con.close()
    except (duckdb.Error, RuntimeError):
        return None
