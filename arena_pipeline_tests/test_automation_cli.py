"""The command line that turns the schedule and the sensor on for ``dagster dev`` (docs/commands.md).

``dagster sensor start new_dump_sensor`` run bare in the project folder loads pyproject.toml's
``[tool.dagster]`` block, as the bare ``dagster dev`` does; ``-m arena_pipeline.definitions`` would name
the code location after the module instead, and the daemon of ``dagster dev`` would never tick a sensor
started under that name (issue 37, item 4). ``workspace.yaml`` names its location alike.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import dagster as dg
import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
DAGSTER = Path(sys.executable).parent / "dagster"


def _location_of_pyproject() -> str:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["dagster"]["code_location_name"]


def test_workspace_yaml_names_the_location_as_pyproject_does():
    """``dagster dev`` bare (pyproject.toml) and ``dagster dev -w workspace.yaml`` load one code location
    under one name: a schedule or sensor started from either is the one the other's daemon ticks."""
    workspace = yaml.safe_load((REPO_ROOT / "workspace.yaml").read_text())
    (entry,) = workspace["load_from"]
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["dagster"]
    assert entry["python_module"]["module_name"] == pyproject["module_name"]
    assert entry["python_module"]["location_name"] == pyproject["code_location_name"]


def _dagster(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(DAGSTER), *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DAGSTER_HOME": str(home)})


@pytest.mark.slow
def test_the_documented_start_commands_turn_both_on_for_dagster_dev(tmp_path, monkeypatch):
    """The commands of docs/commands.md, run bare from the project folder with a fresh DAGSTER_HOME, leave
    the sensor and the schedule RUNNING in the instance under pyproject's code location (the bare
    ``dagster dev``'s; ``workspace.yaml`` names its location alike: the test above), and the bare listing,
    which loads what ``dagster dev`` loads, shows the sensor running."""
    shutil.copy(REPO_ROOT / "dagster_home" / "dagster.yaml", tmp_path)
    for kind, name in (("sensor", "new_dump_sensor"), ("schedule", "nightly_refresh")):
        done = _dagster(kind, "start", name, home=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"Started {kind} {name}" in done.stdout
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with dg.DagsterInstance.get() as instance:
        states = {s.instigator_name: s for s in instance.all_instigator_state()}
    for name in ("new_dump_sensor", "nightly_refresh"):
        assert states[name].status.value == "RUNNING"
        assert states[name].origin.repository_origin.code_location_origin.location_name == _location_of_pyproject()
    # the bare listing loads what the bare `dagster dev` loads (pyproject.toml) and matches the stored state by
    # its whole origin (the daemon, by location, repository and name): the sensor is running there
    listed = _dagster("sensor", "list", home=tmp_path)
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert "Sensor: new_dump_sensor [RUNNING]" in listed.stdout.splitlines()
