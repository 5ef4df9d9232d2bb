"""The load's worker processes (core/ingest/parallel.py): the forkserver starts before the jobs are ready."""

from __future__ import annotations

import multiprocessing

import psutil
import pytest

from arena_pipeline.core.ingest.parallel import run_in_processes, start_processes


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="no forkserver here")
def test_the_forkserver_runs_once_started_and_runs_the_jobs_after():
    start_processes(["colorsys"])  # returns at once: the forkserver imports while the caller goes on
    children = psutil.Process().children()
    assert any("forkserver" in " ".join(child.cmdline()) for child in children)
    assert run_in_processes(abs, [-2, 3], 2) == [2, 3]
