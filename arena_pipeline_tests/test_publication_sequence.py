"""A seeded random sequence of full runs, re-ranks, alias changes, failing runs and kill -9, with a reader.

After every step a fresh reader sees exactly one complete publication (every view reads the
versions of the newest arena.publications row, with its row counts), the newest publication is
the last successful one, a failed or killed step changed nothing readers see, and every successful
publication is still in the history. A reader process reads all along and must never have seen
anything else.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from arena_pipeline.assets import ingest as ingest_assets
from arena_pipeline.assets import publication_gate as gate_assets
from arena_pipeline.assets import rankings as ranking_assets
from arena_pipeline.assets import version_store
from arena_pipeline.core.store import publish as core_publish
from arena_pipeline.resources import ModelCatalog
from arena_pipeline_dev.fixtures import write_dump
from arena_pipeline_tests.support.publication_support import (
    RANK,
    RERANK_SELECTION,
    Setup,
    assert_live_is_one_publication,
    fingerprint,
    query,
    subprocess_env,
)

SEED = 20261123
#: The seed's first 21 steps hold every kind of step (``KINDS``, asserted): three kills (while loading, twice in
#: the publication transaction), runs failing in the load, the ranking (whole graph and re-rank) and the
#: publication, full runs (one onto another dump), re-ranks and alias changes. The 9 steps after them (the test ran 30) only
#: repeated kinds, at about 9 CPU-s each.
STEPS = 21
ROWS = 150
KILLS = 3
RELAXED = {"max_model_drop": 1.0, "max_category_drop": 1.0}
WORKER = [sys.executable, "-m", "arena_pipeline_tests.support.refresh_worker"]
#: every kind of step the sequence must take (a kill or failure with where it happens)
KINDS = {"full", "rerank", "alias", "fail load", "fail rank", "fail publish", "kill fill", "kill publish"}


class Injected(RuntimeError):
    """The failure a step injects."""


def _raise(*args, **kwargs):
    raise Injected("injected failure")


#: where a failing run fails: while loading, while ranking, or inside the publication transaction
FAILURES = {
    "load": (ingest_assets, "fill_dump"),
    "rank": (ranking_assets, "compute_rankings"),
    "publish": (core_publish, "_drop_unused"),
}


def _unchanged(result) -> bool:
    """Whether the run's gate kept the live publication: the run's tables are what it shows (publication rule 23)."""
    return any(e.asset_key.to_user_string() == "publication_gate"
               and e.materialization.metadata.get("status") is not None
               and e.materialization.metadata["status"].value == "unchanged"
               for e in result.get_asset_materialization_events())


def _wait(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.mark.slow
def test_random_sequence_keeps_one_complete_publication_visible(tmp_path, monkeypatch):
    rng = random.Random(SEED)
    dumps = []
    for i in range(3):
        write_dump(tmp_path / f"dump{i}", n_rows=ROWS, n_shards=2, seed=100 + i)
        dumps.append(tmp_path / f"dump{i}")
    aliases = tmp_path / "aliases.csv"
    aliases.write_text("alias,canonical\nllama-4-maverick,deepseek-v3-0324\n", encoding="utf-8")
    base = Setup(tmp_path, dumps[0], tmp_path / "warehouse.duckdb")
    assert base.run().success
    successful = {1}

    out, stop, ready = tmp_path / "reader.json", tmp_path / "reader.stop", tmp_path / "reader.ready"
    reader = subprocess.Popen(
        WORKER + ["read", "--warehouse", str(base.warehouse), "--out", str(out), "--stop-file", str(stop),
                  "--ready-file", str(ready), "--pause", "0.05"],
        env=subprocess_env(base), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        start_new_session=True)
    log: list[str] = []
    kills = 0
    taken: set[str] = set()
    try:
        assert _wait(lambda: ready.exists() or reader.poll() is not None, 60) and reader.poll() is None
        for step in range(STEPS):
            before = fingerprint(base.warehouse)
            dump = rng.choice(dumps)
            setup = Setup(tmp_path, dump, base.warehouse)
            kind = rng.choice(["full", "rerank", "alias", "fail", "fail", "kill" if kills < KILLS else "rerank"])
            catalog = {"model_catalog": ModelCatalog(aliases_path=str(aliases))} if kind == "alias" else {}
            rank = {"min_battles": rng.choice([3, 5, 8]), "ties": rng.choice(["half", "drop"])}
            expect_publication = kind in ("full", "rerank", "alias")
            if kind == "kill":
                point = ("fill", "publish", "publish")[kills]  # while loading, and inside the transaction
                kills += 1
                paused = tmp_path / f"paused{step}"
                env = subprocess_env(setup, ARENA_TEST_RUN_CONFIG=json.dumps({"ops": {"rankings": {"config": RANK}}}))
                proc = subprocess.Popen(WORKER + ["refresh", "--pause-at", point, "--paused-file", str(paused)],
                                        env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.STDOUT, start_new_session=True)
                reached = _wait(lambda paused=paused, proc=proc: paused.exists() or proc.poll() is not None, 180)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
                detail = f"kill -9 at {point} (reached: {reached and paused.exists()})"
                taken.add(f"kill {point}")
            elif kind == "fail":
                where = rng.choice(sorted(FAILURES))
                with monkeypatch.context() as patch:
                    patch.setattr(*FAILURES[where], _raise)
                    if where == "load":  # a dump loaded before would be reused, not loaded again
                        patch.setattr(version_store, "reuse_together", lambda *args, **kwargs: None)
                    # nor fitted again, nor published when the live publication shows the same (rule 23)
                    patch.setattr(version_store, "reusable_version", lambda *args, **kwargs: None)
                    patch.setattr(gate_assets, "unchanged_publication", lambda *args, **kwargs: None)
                    selection = None if where == "load" else rng.choice([None, RERANK_SELECTION])
                    result = setup.run(selection=selection, rank=rank, publish=RELAXED)
                assert not result.success, (step, where)
                detail = f"failing run ({where})"
                taken.add(f"fail {where}")
            else:
                selection = RERANK_SELECTION if kind == "rerank" else None
                # the board rules of the gate have their own tests: here small boards may shrink freely
                taken.add(kind)
                result = setup.run(selection=selection, rank=rank, publish=RELAXED, **catalog)
                errors = [e.step_failure_data.error.to_string() for e in result.all_events if e.is_step_failure]
                assert result.success, (step, kind, errors)
                detail = f"{kind} of the live dump {rank}" if kind == "rerank" else f"{kind} on {dump.name} {rank}"
                if _unchanged(result):  # the live publication's dump, settings and rows: it stays live (rule 23)
                    expect_publication, detail = False, f"{detail}, unchanged"
            live = assert_live_is_one_publication(base.warehouse)
            if expect_publication:
                assert live["publication_id"] == max(successful) + 1, (step, detail)
                successful.add(live["publication_id"])
            else:
                assert live["publication_id"] == max(successful), (step, detail)
                assert fingerprint(base.warehouse) == before, (step, detail)
            history = {r[0] for r in query(base.warehouse,
                                           "SELECT DISTINCT publication_id FROM arena.leaderboard_history")}
            assert successful <= history, (step, detail)
            log.append(f"{step:2d} {detail} -> publication {live['publication_id']}")
    finally:
        stop.touch()
        try:
            reader.wait(timeout=60)
        finally:
            if reader.poll() is None:
                os.killpg(reader.pid, signal.SIGKILL)
    print("\n" + "\n".join(log))
    assert taken == KINDS, taken  # the sequence took every kind of step
    summary = json.loads(out.read_text())
    assert summary["errors"] == {}, summary["errors"]
    seen = summary["observations"]
    assert seen and all(o["consistent"] for o in seen), [o for o in seen if not o["consistent"]][:3]
    assert {o["publication"] for o in seen} <= successful
    print(f"reader: {summary['reads']} reads of {len({o['publication'] for o in seen})} publications, "
          f"{summary['blocked']} blocked by a writer; {len(successful)} publications, {kills} kills")
