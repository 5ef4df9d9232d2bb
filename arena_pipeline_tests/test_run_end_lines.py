"""What a run says at its end (issue 25 item 11), and the docs' re-rank recipe against the gate's own words
(item 13): run on the offline sample of docs/getting-started.md, with the recipe's selection and config read from
docs/refresh.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import dagster as dg
import pytest

from arena_pipeline.resources import DumpSource, ReportSettings, Warehouse
from arena_pipeline_tests.support.materialize import materialize
from arena_pipeline_tests.support.publication_support import RANKING_SELECTION, REPO_ROOT, publications, query

SAMPLE = Path(__file__).parent / "data" / "arena_human_preference_sample_100.csv"
#: what the gate says of the docs' re-rank recipe on the sample, and with display_min_battles 0 added
RECIPE_REFUSAL = ("42 of the 42 models shown on the live overall board would no longer be shown (100% > "
                  "max_model_drop 50%, 14 of them only provisional now: was the live board ranked with a lower "
                  "display_min_battles?)")
WITH_DISPLAY_0 = "28 of the 42 models shown on the live overall board would no longer be shown (67% > max_model_drop 50%)"
LIVE = re.compile(r"live is publication (\d+) \(revision (local-[0-9a-f]{16})\) in warehouse (\S+), report (\S+)$")


def _page(name: str) -> str:
    """A docs page with its whitespace folded (the recipes wrap lines anywhere)."""
    return " ".join((REPO_ROOT / "docs" / name).read_text(encoding="utf-8").split())


def _recipe() -> tuple[list[str], dict]:
    """The selection and run config of docs/refresh.md's 'Re-rank the live dump with other settings'."""
    text = _page("refresh.md")
    block = text[text.index("**Re-rank the live dump with other settings**"):]
    select = re.search(r"--select '([^']+)'", block).group(1).split(",")
    return select, json.loads(re.search(r"--config-json '([^']+)'", block).group(1))


class Sample:
    def __init__(self, root: Path, instance: dg.DagsterInstance):
        self.root, self.instance = root, instance
        self.warehouse, self.report = root / "warehouse.duckdb", root / "report" / "index.html"

    def run(self, selection, config: dict):
        resources = {"dump_source": DumpSource(source=str(SAMPLE), cache_dir=str(self.root / "cache")),
                     "warehouse": Warehouse(database=str(self.warehouse), retention=50),
                     "report_settings": ReportSettings(report_path=str(self.report))}
        return materialize(resources, selection=selection, run_config=config, instance=self.instance)

    def lines(self, result, step: str) -> list[str]:
        """The messages the step logged itself (not Dagster's events), in order."""
        return [e.user_message for e in self.instance.all_logs(result.run_id)
                if e.step_key == step and e.dagster_event is None]

    def live(self, text: str) -> tuple[int, str]:
        """The publication and revision a line names, checking that it names this warehouse and report."""
        found = LIVE.search(text)
        assert found, text
        assert Path(found.group(3)) == self.warehouse.resolve() and Path(found.group(4)) == self.report.resolve()
        return int(found.group(1)), found.group(2)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The docs' offline run: the 100-vote sample published with display_min_battles 0."""
    with dg.instance_for_test() as instance:
        sample = Sample(tmp_path_factory.mktemp("sample"), instance)
        result = sample.run("*", {"ops": {"rankings": {"config": {"display_min_battles": 0}}}})
        assert result.success
        assert sample.live(sample.lines(result, "publication_gate")[-1])[0] == 1
        assert sample.lines(result, "publication_gate")[-1].startswith("published: live is publication 1 ")
        yield sample


@pytest.mark.slow
def test_docs_rerank_recipe_says_what_the_gate_says(sample):
    page = _page("refresh.md")
    assert RECIPE_REFUSAL in page and WITH_DISPLAY_0 in page
    (shown,), = query(sample.warehouse, "SELECT count(*) FROM arena.leaderboard WHERE category = 'overall' "
                      "AND method = 'bt' AND NOT provisional")
    assert shown == 42 and f"(all {shown} models shown)" in _page("getting-started.md")  # the offline section's figure
    select, config = _recipe()
    assert config["ops"]["rankings"]["config"] == {"ties": "drop", "bootstrap_rounds": 200}
    before = publications(sample.warehouse)
    refused = sample.run(select, config)
    (failure,) = refused.get_step_failure_events()
    description = failure.step_failure_data.user_failure_data.description
    assert failure.step_key == "publication_gate" and RECIPE_REFUSAL in description
    # the refusal ends with what is still live and where
    assert description.split(". Nothing was published: ")[1].startswith("live is publication")
    assert sample.live(description) == (before[-1][0], before[-1][1])
    config["ops"]["rankings"]["config"]["display_min_battles"] = 0
    (failure,) = sample.run(select, config).get_step_failure_events()
    assert WITH_DISPLAY_0 in failure.step_failure_data.user_failure_data.description
    assert publications(sample.warehouse) == before
    # what the page says publishes, publishes; the step's last line says so
    publishing = re.search(r"`(\{\"ops\": \{\"rankings\": \{\"config\": \{\"display_min_battles\": 0, "
                           r"\"bootstrap_rounds\": 200\}\}\}\})` publishes", page).group(1)
    result = sample.run(select, json.loads(publishing))
    assert result.success
    last = sample.lines(result, "publication_gate")[-1]
    assert last.startswith("published: ") and sample.live(last)[0] == publications(sample.warehouse)[-1][0] > before[-1][0]


@pytest.mark.slow
def test_a_run_that_publishes_nothing_ends_saying_what_is_live(sample, golden):
    before = publications(sample.warehouse)
    live = before[-1][:2]
    # a selection without the gate: one line, from the last step, naming the selection that publishes
    result = sample.run(["arena/battle_categories", *RANKING_SELECTION],
                        {"ops": {"rankings": {"config": {"display_min_battles": 0}}}})
    assert result.success
    assert not [m for m in sample.lines(result, "battle_categories") if "publishes nothing" in m]
    (note,) = [m for m in sample.lines(result, "rankings") if "publishes nothing" in m]
    assert note == sample.lines(result, "rankings")[-1]
    assert f"publication {live[0]} (revision {live[1]}) in warehouse {sample.warehouse.resolve()}." in note
    assert "add publication_gate,leaderboard_report" in note
    golden.check("runs", "a selection without the gate: its last line", note,
                 {f"publication {live[0]} (revision {live[1]})": "publication <live> (revision <revision>)"})
    # the gate alone, with nothing built: nothing new, what is live and the report it re-rendered
    result = sample.run(["publication_gate"], {})
    assert result.success
    last = sample.lines(result, "publication_gate")[-1]
    assert last.startswith("nothing new was published: ") and sample.live(last) == live
    # the report alone
    result = sample.run(["leaderboard_report"], {})
    last = sample.lines(result, "publication_gate")[-1]
    assert last.startswith("report re-rendered: ") and sample.live(last) == live
    assert publications(sample.warehouse) == before
