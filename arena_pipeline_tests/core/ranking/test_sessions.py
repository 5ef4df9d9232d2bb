"""Which votes of a board are clustered together (core/ranking/sessions.py)."""

from __future__ import annotations

import numpy as np

from arena_pipeline.core.ranking.sessions import session_clusters


def test_known_sessions_are_numbered_and_unknown_votes_are_singletons(golden):
    got = session_clusters(np.array([5, -1, 2, 5, -1, 2, 9]))
    assert got.cluster.tolist() == [1, 3, 0, 1, 4, 0, 2]
    assert (got.sessions, got.votes_in_sessions, got.votes_without_session) == (3, 5, 2)
    golden.check("boards", "clustering: sessions and votes without one", got.note)


def test_string_and_float_codes(golden):
    strings = session_clusters(np.array(["b", None, "a", "b"], dtype=object), column="sid")
    assert strings.cluster.tolist() == [1, 2, 0, 1]
    floats = session_clusters(np.array([1.0, np.nan, 1.0]))
    assert floats.cluster.tolist() == [0, 1, 0]
    golden.check("boards", "clustering: float codes", floats.note)
    golden.check("boards", "clustering: every vote in a session", session_clusters(np.array([3, 3])).note)


def test_no_known_session_is_not_clustered(golden):
    got = session_clusters(np.full(4, -1))
    assert got.cluster is None
    assert (got.sessions, got.votes_without_session) == (0, 4)
    golden.check("boards", "clustering: no known session", got.note)
