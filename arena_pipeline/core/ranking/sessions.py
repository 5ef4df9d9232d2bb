"""Which votes of a board share an evaluation session: the clusters of the clustered intervals.

A vote's session is known when its ``evaluation_session_id`` is not null. Votes of one session may
be dependent (a user who re-votes a pair, or who brings the same taste to several pairs), sessions
are taken as independent. Where no vote of a board has a known session (the 33k and 55k dump
formats leave the column null), the board has no clustered interval: every vote would be its own
"session" and a clustered interval would be the vote-level one under another name. Where some
votes have a session and others do not (a dump with sessions beside one without), the votes
without a session count as sessions of one vote each, and :attr:`SessionClusters.note` says how
many votes were clustered and how many were not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: ``SessionClusters.note`` when no vote of the board has a known session.
NO_SESSIONS = ("not clustered: no vote of this board has a known {column} (sessions unknown, as in "
               "dumps without session ids); cluster_* are null and the primary interval is the vote-level one")
NO_COLUMN = ("not clustered: the battles have no {column} column; cluster_* are null and the primary "
             "interval is the vote-level one")
DISABLED = "not clustered: cluster_column is None; cluster_* are null"


@dataclass(frozen=True)
class SessionClusters:
    """The clusters of one board's fitted votes.

    Attributes
    ----------
    cluster
        Cluster index ``0 .. K - 1`` of every vote, or None when the board is not clustered (no
        vote has a known session). Votes without a session get clusters of their own, numbered
        after the known sessions.
    sessions
        Distinct known sessions among the votes.
    votes_in_sessions
        Votes with a known session.
    votes_without_session
        Votes whose session is unknown (each one a cluster of its own when the board is clustered).
    note
        What was clustered, in words (``arena.board_status.clustering``).
    """

    cluster: np.ndarray | None
    sessions: int
    votes_in_sessions: int
    votes_without_session: int
    note: str


def session_clusters(session: np.ndarray, column: str = "evaluation_session_id") -> SessionClusters:
    """The clusters of a board's votes from their session codes.

    Parameters
    ----------
    session
        One code per vote (any integer or string labels), with a negative integer, NaN or None
        where the session is unknown; shape (n,).
    column
        The session column's name, for the note.

    Returns
    -------
    SessionClusters
        Not clustered (``cluster`` None) when no vote has a known session.
    """
    session = np.asarray(session)
    if session.dtype.kind in "iu":
        known = session >= 0
    elif session.dtype.kind == "f":
        known = ~np.isnan(session)
    else:
        known = np.array([s is not None for s in session], dtype=bool)
    n, n_known = session.size, int(known.sum())
    if n_known == 0:
        return SessionClusters(None, 0, 0, n, NO_SESSIONS.format(column=column))
    codes = np.unique(session[known], return_inverse=True)[1].reshape(-1)
    k = int(codes.max()) + 1
    cluster = np.empty(n, dtype=np.int64)
    cluster[known] = codes
    cluster[~known] = k + np.arange(n - n_known)
    note = f"clustered by {column}: {n_known:,} votes in {k:,} sessions"
    if n_known < n:
        note += (f"; {n - n_known:,} votes with a null {column} (dumps without session ids) each counted as "
                 "a session of its own")
    return SessionClusters(cluster, k, n_known, n - n_known, note)


def unclustered(reason: str, votes: int) -> SessionClusters:
    """A board that is not clustered for ``reason`` (:data:`NO_COLUMN`, :data:`DISABLED`)."""
    return SessionClusters(None, 0, 0, votes, reason)
