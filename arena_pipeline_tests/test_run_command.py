"""``arena-pipeline refresh`` / ``rerank`` (``run_command.py``): runs in DAGSTER_HOME's instance, a line per
step, the result last; every user error one line and a non-zero exit, no traceback."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import dagster as dg
import pytest

from arena_pipeline.cli import EXIT_OK, EXIT_USAGE, main
from arena_pipeline.run_command import EXIT_FAILED, run_config
from arena_pipeline_tests.support.bad_inputs import REAL_CSV, read_real_csv, write_csv

#: The project's DAGSTER_HOME (its dagster.yaml: telemetry off, one run at a time).
PROJECT_HOME = Path(__file__).parents[1] / "dagster_home"

#: The sample's settings, as the tests' sample run ranks it (every model shown).
SAMPLE_FLAGS = ["--min-battles", "3", "--bootstrap-rounds", "5", "--display-min-battles", "0"]


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A DAGSTER_HOME, warehouse and report of the test's own, the sample as the source."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    (tmp_path / "dagster_home").mkdir()
    shutil.copy(PROJECT_HOME / "dagster.yaml", tmp_path / "dagster_home")  # the project's instance settings
    monkeypatch.setenv("ARENA_WAREHOUSE", str(tmp_path / "warehouse.duckdb"))
    monkeypatch.setenv("ARENA_REPORT", str(tmp_path / "report" / "index.html"))
    monkeypatch.setenv("ARENA_SOURCE", str(REAL_CSV))
    return tmp_path


def _one_error_line(capsys) -> tuple[str, str]:
    """(stdout, the error line): stderr holds exactly one line, the project's, and no traceback anywhere."""
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("arena-pipeline: error: ")
    return captured.out, lines[0]


def test_flags_are_laid_over_config_json_over_the_live_settings():
    config = run_config({"ops": {"rankings": {"config": {"ties": "drop", "seed": 7}}, "raw_dump": {"config": {}}}},
                        {"ties": "half", "bootstrap_rounds": 200}, {"max_model_drop": 1.0},
                        base_rankings={"ties": "drop", "display_min_battles": 0, "seed": 1})
    assert config == {"ops": {
        "rankings": {"config": {"ties": "half", "display_min_battles": 0, "seed": 7, "bootstrap_rounds": 200}},
        "raw_dump": {"config": {}},
        "publication_gate": {"config": {"max_model_drop": 1.0}}}}


def test_every_flag_is_a_key_the_jobs_take(home, monkeypatch):
    """Each named flag lands on a run config key both jobs accept (Dagster's own validation, then the bounds)."""
    import arena_pipeline.run_command as run_command
    from arena_pipeline.definitions import defs

    seen = {}
    monkeypatch.setattr(run_command, "run_job", lambda job, config, **_: seen.setdefault(job, config) and "ran")
    flags = ["--ties", "drop", "--bootstrap-rounds", "200", "--min-battles", "2", "--display-min-battles", "0",
             "--primary-interval", "bootstrap", "--seed", "7", "--style-method", "unweighted", "--style-reg", "0.01",
             "--max-model-drop", "1.0", "--allow-degenerate", "--from-defaults"]
    for command, job in (("refresh", "refresh_job"), ("rerank", "rerank_job")):
        assert main([command, *flags]) == EXIT_OK
        assert seen[job]["ops"]["rankings"]["config"] == {
            "ties": "drop", "bootstrap_rounds": 200, "min_battles": 2, "display_min_battles": 0,
            "primary_interval": "bootstrap", "seed": 7, "style_method": "unweighted", "style_reg": 0.01}
        assert seen[job]["ops"]["publication_gate"]["config"] == {"allow_degenerate": True, "max_model_drop": 1.0}
        run_command.check_run_config(defs.resolve_job_def(job), seen[job])  # raises RunError when refused


# ---------------------------------------------------------------------------------------------
# user errors: one line, a non-zero exit (a test per error; those that start a run, but one, are slow)
# ---------------------------------------------------------------------------------------------


def test_a_source_path_that_does_not_exist(home, monkeypatch, capsys):
    monkeypatch.setenv("ARENA_SOURCE", str(home / "no" / "such.csv"))
    assert main(["refresh", *SAMPLE_FLAGS]) == EXIT_FAILED
    out, line = _one_error_line(capsys)
    assert "step raw_dump failed" in line and "no such local path" in line and str(home / "no" / "such.csv") in line
    assert " FAILED raw_dump (" in out  # the step's line
    with dg.DagsterInstance.get() as instance:  # the run is in DAGSTER_HOME's instance (the UI's)
        runs = instance.get_runs()
        assert [(r.job_name, r.status) for r in runs] == [("refresh_job", dg.DagsterRunStatus.FAILURE)]


@pytest.mark.slow
def test_an_empty_folder(home, monkeypatch, capsys):
    (home / "empty").mkdir()
    monkeypatch.setenv("ARENA_SOURCE", str(home / "empty"))
    assert main(["refresh", *SAMPLE_FLAGS]) == EXIT_FAILED
    _, line = _one_error_line(capsys)
    assert "step raw_dump failed" in line and "no parquet files found" in line


@pytest.mark.slow
def test_a_dump_without_a_column(home, monkeypatch, capsys):
    header, records = read_real_csv()
    drop = header.index("winner")
    path = write_csv(home / "no_winner.csv", [h for i, h in enumerate(header) if i != drop],
                     [[v for i, v in enumerate(r) if i != drop] for r in records])
    monkeypatch.setenv("ARENA_SOURCE", str(path))
    assert main(["refresh", *SAMPLE_FLAGS]) == EXIT_FAILED
    _, line = _one_error_line(capsys)
    assert "winner" in line and "failed" in line and "fault of the pipeline" not in line


@pytest.mark.slow
def test_a_bad_alias_file(home, monkeypatch, capsys):
    aliases = home / "aliases.csv"
    aliases.write_text("alias\nfoo\n")
    monkeypatch.setenv("ARENA_MODEL_ALIASES", str(aliases))
    assert main(["refresh", *SAMPLE_FLAGS]) == EXIT_FAILED
    _, line = _one_error_line(capsys)
    assert "ARENA_MODEL_ALIASES" in line and "missing column(s) ['canonical']" in line


def test_malformed_config_json(home, capsys):
    assert main(["refresh", "--config-json", '{"ops": ']) == EXIT_USAGE
    _, line = _one_error_line(capsys)
    assert line.startswith("arena-pipeline: error: --config-json is not valid JSON: ")


def test_a_misspelt_config_key_names_the_closest(home, capsys):
    config = '{"ops": {"rankings": {"config": {"bootstrap_round": 200}}}}'
    assert main(["rerank", "--config-json", config]) == EXIT_USAGE
    _, line = _one_error_line(capsys)
    assert line.endswith("unknown key 'bootstrap_round' at ops:rankings:config: did you mean 'bootstrap_rounds'?")
    with dg.DagsterInstance.get() as instance:
        assert not instance.get_runs()  # refused before a run is made


def test_a_bound_exceeded(home, capsys):
    assert main(["rerank", "--bootstrap-rounds", "1000000"]) == EXIT_USAGE
    _, line = _one_error_line(capsys)
    assert "bootstrap_rounds" in line and "at most 2,000" in line


@pytest.mark.slow
def test_verbose_shows_dagsters_log_and_the_stack(home, monkeypatch, capsys):
    monkeypatch.setenv("ARENA_SOURCE", str(home / "no" / "such.csv"))
    assert main(["refresh", "--verbose", *SAMPLE_FLAGS]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "STEP_FAILURE" in err  # Dagster's own log
    assert 'File "' in err and "SourceError" in err  # the step's stack
    assert err.strip().splitlines()[-1].startswith("arena-pipeline: error: nothing published: step raw_dump")


# ---------------------------------------------------------------------------------------------
# a refresh and a re-rank of the sample
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_refresh_then_rerank_publish_with_a_line_per_step_and_the_result_last(home, capsys):
    assert main(["refresh", *SAMPLE_FLAGS]) == EXIT_OK
    out = capsys.readouterr().out.strip().splitlines()
    steps = [line for line in out if re.match(r"^ +done \S+ \(\d", line)]
    assert {line.split()[1] for line in steps} >= {"raw_dump", "flat_tables", "rankings", "publication_gate"}
    report = home / "report" / "index.html"
    assert re.fullmatch(rf"published: publication 1 \(revision local-[0-9a-f]{{16}}\), \d+ boards, report at "
                        rf"{re.escape(str(report.resolve()))}", out[-1]), out[-1]
    assert report.is_file()
    # rerank: the live publication's settings (display_min_battles 0) with the flag over them
    assert main(["rerank", "--bootstrap-rounds", "10"]) == EXIT_OK
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == "ranking settings: publication 1's (as the sensor ranks), with bootstrap_rounds=10"
    assert out[-1].startswith("published: publication 2 (revision local-")
    assert not any("done raw_dump" in line for line in out)  # rerank_job: no fetch, no load
    # the gate's refusal is the last line: nothing published, why, and what is still live
    assert main(["rerank", "--ties", "drop", "--display-min-battles", "301"]) == EXIT_FAILED
    out, line = _one_error_line(capsys)
    assert line.startswith("arena-pipeline: error: nothing published: publication refused, nothing changed: ")
    assert "still live is publication 2" in line
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        assert [(r.job_name, r.status.value) for r in reversed(runs)] == [
            ("refresh_job", "SUCCESS"), ("rerank_job", "SUCCESS"), ("rerank_job", "FAILURE")]
