"""The seam of publication targets: every target gets the same plan, is committed only after the work
file's COMMIT, and a failure of any target before it discards every staged one (the snapshot file is one
target among others)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import duckdb
import pytest

from arena_pipeline.core.publication.gate import plan_tables
from arena_pipeline.core.store import snapshot
from arena_pipeline.core.store.publish import publish
from arena_pipeline.core.store.targets import PublicationPlan, PublicationTarget
from arena_pipeline_tests.core.store.test_snapshot import _look, _target
from arena_pipeline_tests.support.small_store import RULES, TABLES
from arena_pipeline_tests.support.small_store import small_build as _build


@pytest.fixture
def work(tmp_path):
    folder = tmp_path / "warehouse.pipeline"
    folder.mkdir()
    with duckdb.connect(str(folder / "work.duckdb")) as con:
        yield con


class ListTarget:
    """A target that keeps its publications in a list (what the seam asks of a DuckLake, say)."""

    name = "list"

    def __init__(self, fail_stage: bool = False):
        self.published: list[PublicationPlan] = []
        self.discarded: list[PublicationPlan] = []
        self.fail_stage = fail_stage
        self.work_committed_at_commit: list[bool] = []

    def prepare(self) -> None:
        pass

    def stage(self, work_con, plan):
        if self.fail_stage:
            raise OSError("the catalog is unreachable")
        return plan

    def commit(self, staged):
        self.published.append(staged)

    def discard(self, staged):
        self.discarded.append(staged)

    def prune(self, work_con, schema):
        return []

    @contextlib.contextmanager
    def open_reader(self):
        with duckdb.connect() as con:
            yield con


def _publish(con, build, targets, files_of):
    chosen, rebuilt = plan_tables(con, "arena", build, TABLES, **RULES)
    return publish(con, "arena", build, chosen, rebuilt=rebuilt, history_tables=("leaderboard",),
                   targets=targets, files_of=files_of)


def test_every_target_gets_one_plan_of_what_the_publication_shows(work, tmp_path: Path):
    snap, other = _target(tmp_path), ListTarget()
    assert isinstance(snap, PublicationTarget) and isinstance(other, PublicationTarget)
    snap.prepare()
    _publish(work, _build(work, "run-1", "1" * 40, 3), [snap, other], snapshot.files_of(work, snap))
    (plan,) = other.published
    assert plan.publication_id == 1
    assert {name for name, _ in plan.views} == {"battles", "leaderboard", "leaderboard_history"}
    # the vote table's version is files in the store folder, the board's copied, the records named
    (battles,) = [v for v in plan.versions if v.startswith("battles__")]
    assert plan.files[battles] and all((tmp_path / "warehouse.pipeline" / f).is_file() for f in plan.files[battles])
    assert [v.partition("__")[0] for v in plan.copied] == ["leaderboard"]
    assert ("arena", "publications") in plan.records and ("arena_versions", "versions") in plan.records
    assert _look(snap.path) == "1 run-1"
    with snap.open_reader() as reader:  # the one reader entry: the vote tables' files resolved, from any directory
        assert reader.execute("SELECT count(*) FROM arena.battles").fetchone() == (3,)


def test_a_target_failing_to_stage_discards_the_others_and_rolls_the_work_file_back(work, tmp_path: Path):
    snap, ok, failing = _target(tmp_path), ListTarget(), ListTarget(fail_stage=True)
    _publish(work, _build(work, "run-1", "1" * 40, 3), [snap, ok], snapshot.files_of(work, snap))
    before = snap.path.read_bytes()
    with pytest.raises(OSError, match="unreachable"):
        _publish(work, _build(work, "run-2", "2" * 40, 5), [snap, ok, failing], snapshot.files_of(work, snap))
    assert snap.path.read_bytes() == before and len(ok.published) == 1 and len(ok.discarded) == 1
    assert work.execute("SELECT max(publication_id) FROM arena.publications").fetchone()[0] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_file_that_is_not_a_warehouse_is_refused_by_prepare(tmp_path: Path):
    target = _target(tmp_path)
    with duckdb.connect(str(target.path)) as con:
        con.execute("CREATE TABLE orders (id INT)")
    with pytest.raises(snapshot.NotAWarehouseError):
        target.prepare()
