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


def test_malformed_config_json(home, capsys, golden):
    assert main(["refresh", "--config-json", '{"ops": ']) == EXIT_USAGE
    _, line = _one_error_line(capsys)
    golden.check("cli", "--config-json: not valid JSON", line)


def test_a_misspelt_config_key_names_the_closest(home, capsys, golden):
    config = '{"ops": {"rankings": {"config": {"bootstrap_round": 200}}}}'
    assert main(["rerank", "--config-json", config]) == EXIT_USAGE
    _, line = _one_error_line(capsys)
    assert "'bootstrap_rounds'" in line
    golden.check("cli", "--config-json: a misspelt key", line)
    with dg.DagsterInstance.get() as instance:
        assert not instance.get_runs()  # refused before a run is made


def test_a_bound_exceeded(home, capsys):
    assert main(["rerank", "--bootstrap-rounds", "1000000"]) == EXIT_USAGE
    _, line = _one_error_line(capsys)
    assert "bootstrap_rounds" in line and "at most 2,000" in line


@pytest.mark.slow
def test_verbose_shows_dagsters_log_and_the_stack(home, monkeypatch, capsys, golden):
    monkeypatch.setenv("ARENA_SOURCE", str(home / "no" / "such.csv"))
    assert main(["refresh", "--verbose", *SAMPLE_FLAGS]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "STEP_FAILURE" in err  # Dagster's own log
    assert 'File "' in err and "SourceError" in err  # the step's stack
    golden.check("cli", "refresh --verbose: the last line", err.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# a refresh and a re-rank of the sample
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_refresh_then_rerank_publish_with_a_line_per_step_and_the_result_last(home, monkeypatch, capsys, golden):
    monkeypatch.setenv("ARENA_REPORTT", "x")  # a typo of a variable that is set: the run goes on, and says so
    assert main(["refresh", *SAMPLE_FLAGS]) == EXIT_OK
    out = capsys.readouterr().out.strip().splitlines()
    warned = [line for line in out if "ARENA_REPORTT" in line]
    assert len(warned) == 1 and warned[0].startswith("  raw_dump: warning: ")
    golden.check("cli", "refresh: a misspelt variable beside the one set", warned[0])
    steps = [line for line in out if re.match(r"^ +done \S+ \(\d", line)]
    assert {line.split()[1] for line in steps} >= {"raw_dump", "flat_tables", "rankings", "publication_gate"}
    report = home / "report" / "index.html"
    revision = re.search(r"local-[0-9a-f]{16}", out[-1])
    assert revision and str(report.resolve()) in out[-1], out[-1]
    golden.check("cli", "refresh: published", out[-1], {revision[0]: "<revision>"})
    assert report.is_file()
    # rerank: the live publication's settings (display_min_battles 0) with the flag over them
    assert main(["rerank", "--bootstrap-rounds", "10"]) == EXIT_OK
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].endswith("bootstrap_rounds=10")
    golden.check("settings", "rerank: the live publication's, a flag over them", out[0])
    assert out[-1].startswith("published: publication 2 (revision local-")
    assert not any("done raw_dump" in line for line in out)  # rerank_job: no fetch, no load
    # the gate's refusal is the last line: nothing published, why, and what is still live
    assert main(["rerank", "--ties", "drop", "--display-min-battles", "301"]) == EXIT_FAILED
    out, line = _one_error_line(capsys)
    assert "still live is publication 2" in line and "--allow-degenerate" in line
    golden.check("cli", "rerank: refused by the gate", line)
    assert "run config" not in line and "--new" not in line  # the CLI's flags; the same source: no new warehouse
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        assert [(r.job_name, r.status.value) for r in reversed(runs)] == [
            ("refresh_job", "SUCCESS"), ("rerank_job", "SUCCESS"), ("rerank_job", "FAILURE")]


# ---------------------------------------------------------------------------------------------
# settings never travel silently; typos speak (issue 47 items 2 and 4)
# ---------------------------------------------------------------------------------------------


def test_a_refresh_from_another_source_starts_from_the_defaults_and_names_what_it_would_carry(sample_run, tmp_path,
                                                                                                golden):
    """The sample's settings (min_battles=3, bootstrap_rounds=5) go with a refresh of the sample, not with one
    of another dump: that one starts from the defaults, says so and names the flag that carries them."""
    from arena_pipeline.resources import DumpSource, Warehouse
    from arena_pipeline.run_command import starting_settings

    warehouse = Warehouse(database=str(sample_run.warehouse))
    same, said = starting_settings(warehouse, DumpSource(source=str(REAL_CSV)))
    assert same["min_battles"] == 3 and same["bootstrap_rounds"] == 5
    golden.check("settings", "refresh of the live source: the live publication's", said)
    header, records = read_real_csv()
    other = write_csv(tmp_path / "own_dump.csv", header, records[:60])
    base, said = starting_settings(warehouse, DumpSource(source=str(other)))
    assert base is None
    assert repr(str(other.resolve())) in said and "--keep-settings" in said
    golden.check("settings", "refresh of another source: the defaults", said, {str(REAL_CSV.resolve()): "<sample>"})
    kept, _ = starting_settings(warehouse, DumpSource(source=str(other)), keep_settings=True)
    assert kept == same
    assert starting_settings(warehouse, None)[0] == same  # a re-rank: the live dump itself
    assert starting_settings(warehouse, DumpSource(source=str(other)), from_defaults=True) == (None, None)


def test_the_settings_used_are_printed_whenever_they_differ_from_the_defaults():
    from arena_pipeline.run_command import settings_line

    assert settings_line({}) is None
    assert settings_line({"ops": {"rankings": {"config": {"ties": "half", "seed": 42}}}}) is None  # the defaults
    assert settings_line({"ops": {"rankings": {"config": {"display_min_battles": 0, "ties": "half"}}}}) == (
        "ranking settings used: display_min_battles=0 (default 301)")


def test_the_clis_refusal_names_its_flags_and_for_another_source_a_warehouse_of_its_own(golden):
    """The gate's refusal names its run config keys (Dagster's command takes them); the CLI's line names the
    flags that set them, and, when the run's dump is of another source, the new warehouse the README offers."""
    from arena_pipeline.core.publication.gate import refusal_message
    from arena_pipeline.core.publication.policy import policy_fields
    from arena_pipeline.run_command import CLI_RELAX_HINT, cli_refusal

    problems = ["29 of the 42 models shown on the live overall board would no longer be shown"]
    same = cli_refusal(refusal_message(problems) + ". Nothing was published: live is publication 1")
    assert f"({CLI_RELAX_HINT}); still live is publication 1" in same
    golden.check("cli", "a refusal: the CLI's flags", same)
    other = cli_refusal(refusal_message(problems, ("/x/sample.csv", "/x/own")))
    assert other.endswith("ARENA_WAREHOUSE=data/own.duckdb arena-pipeline refresh --new)")
    golden.check("cli", "a refusal: another source, a warehouse of its own", other)
    assert "run config" not in same + other
    empty = cli_refusal(refusal_message(["the new overall leaderboard is empty (no model has a rating; lower the "
                                         "rankings config min_battles if the dump is small)"]))
    assert "--min-battles" in empty and "min_battles" not in empty
    golden.check("cli", "a refusal: an empty board", empty)
    flags = set(re.findall(r"--[a-z-]+", CLI_RELAX_HINT))
    assert flags == {"--" + name.replace("_", "-") for name in policy_fields()}


def test_every_gate_policy_the_refusal_names_has_a_flag():
    """The flags come from where the policies are declared; each policy is a key of the gate's run config,
    and every setting the refusal message names has its flag."""
    from arena_pipeline.assets.publication_gate import PublishConfig
    from arena_pipeline.cli import refresh, rerank
    from arena_pipeline.core.publication.gate import RELAX_HINT
    from arena_pipeline.core.publication.policy import policy_fields

    assert list(PublishConfig.model_fields) == list(policy_fields())
    named = set(re.findall(r"\b(allow_degenerate|max_\w+_drop)\b", RELAX_HINT))
    assert named == set(policy_fields()) == {"allow_degenerate", "max_model_drop", "max_category_drop"}
    for command in (refresh, rerank):
        flags = {opt for p in command.params for opt in p.opts}
        assert {"--" + n.replace("_", "-") for n in named} <= flags


def test_max_category_drop_reaches_the_gate(home, monkeypatch):
    import arena_pipeline.run_command as run_command

    seen = {}
    monkeypatch.setattr(run_command, "run_job", lambda job, config, **_: seen.setdefault(job, config) and "ran")
    assert main(["rerank", "--max-category-drop", "1", "--from-defaults"]) == EXIT_OK
    assert seen["rerank_job"]["ops"]["publication_gate"]["config"] == {"max_category_drop": 1.0}


def test_a_misspelt_variable_is_named_with_did_you_mean_and_nothing_runs(home, monkeypatch, capsys, golden):
    import arena_pipeline.run_command as run_command

    monkeypatch.setattr(run_command, "run_job", lambda *a, **k: pytest.fail("a run started"))
    monkeypatch.delenv("ARENA_SOURCE")
    monkeypatch.setenv("ARENA_SOUCE", str(REAL_CSV))
    assert main(["refresh"]) == EXIT_USAGE
    _, line = _one_error_line(capsys)
    assert "ARENA_SOUCE" in line and "ARENA_SOURCE?" in line
    golden.check("cli", "a misspelt variable: refused", line)


def test_the_known_variables_are_the_resources_fields(monkeypatch, golden):
    from arena_pipeline.environment import known_variables, typo_lines

    known = known_variables()
    assert known["ARENA_SOURCE"] == "DumpSource.source" and known["ARENA_WAREHOUSE"] == "Warehouse.database"
    assert {"ARENA_REPORT", "ARENA_DATASETS", "ARENA_MODEL_ALIASES", "HF_TOKEN"} <= set(known)
    refusals, notes = typo_lines({"ARENA_WAREHOUS": "x", "ARENA_WAREHOUSE": "y", "ARENA_ZZZ": "1",
                                  "ARENA_SOURCE": "s"}, known)
    assert refusals == []
    assert [note.split()[1] for note in notes] == ["ARENA_WAREHOUS", "ARENA_ZZZ"]
    golden.check("cli", "misspelt variables: the notes", "\n".join(notes))


def test_a_dagster_home_that_does_not_exist_is_one_line(home, monkeypatch, capsys, golden):
    monkeypatch.setenv("DAGSTER_HOME", str(home / "no_such_home"))
    assert main(["refresh", *SAMPLE_FLAGS]) == EXIT_USAGE
    _, line = _one_error_line(capsys)
    golden.check("cli", "DAGSTER_HOME: not a folder", line)


def test_a_misspelt_warehouse_path_is_refused_when_the_default_one_exists(home, monkeypatch, capsys, golden):
    """ARENA_WAREHOUSE=dat/warehouse.duckdb beside a real data/warehouse.duckdb: refused, naming both and --new;
    with --new (or no default warehouse) the run says it starts a new warehouse there."""
    import arena_pipeline.run_command as run_command

    monkeypatch.setattr(run_command, "run_job", lambda *a, **k: "ran")
    monkeypatch.chdir(home)
    monkeypatch.setenv("ARENA_WAREHOUSE", "dat/warehouse.duckdb")
    typo = (home / "dat" / "warehouse.duckdb").absolute()
    assert main(["refresh"]) == EXIT_OK  # no default warehouse here: a new one, said so
    golden.check("cli", "a new warehouse: said so", _said_of(typo, capsys))
    (home / "data" / "warehouse.pipeline").mkdir(parents=True)  # another warehouse's store
    assert main(["refresh"]) == EXIT_USAGE
    _, line = _one_error_line(capsys)
    assert str(typo) in line and str((home / "data" / "warehouse.duckdb").absolute()) in line and "--new" in line
    golden.check("cli", "a misspelt warehouse path: refused", line)
    assert main(["refresh", "--new"]) == EXIT_OK
    golden.check("cli", "a new warehouse: said so", _said_of(typo, capsys))
    # the snapshot moved aside, its store kept (refresh.md's damaged file): not a new history, and said so
    (home / "dat" / "warehouse.pipeline").mkdir(parents=True)
    assert main(["refresh"]) == EXIT_OK
    said = _said_of(typo, capsys)
    assert str(typo.with_suffix(".pipeline")) in said
    golden.check("cli", "a warehouse written anew from its store: said so", said)


def _said_of(warehouse: Path, capsys) -> str:
    """The run's one line about ``warehouse`` (a new one, or one written anew from its store)."""
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"no warehouse at {warehouse}")]
    assert len(said) == 1, said
    return said[0]


def test_the_dotenv_of_the_project_folder_is_read_as_dagster_dev_reads_it(home, monkeypatch, capsys):
    monkeypatch.chdir(home)
    monkeypatch.delenv("ARENA_WAREHOUSE")
    (home / ".env").write_text("ARENA_WAREHOUSE=from_dotenv/warehouse.duckdb\n", encoding="utf-8")
    assert main(["leaderboard"]) == 1
    assert "no warehouse at from_dotenv/warehouse.duckdb" in capsys.readouterr().err
    monkeypatch.delenv("ARENA_WAREHOUSE")  # main() set it; the environment wins over the file
    monkeypatch.setenv("ARENA_WAREHOUSE", "from_env.duckdb")
    assert main(["leaderboard"]) == 1
    assert "no warehouse at from_env.duckdb" in capsys.readouterr().err
