"""Whether the process that ran a build is still that process: its pid, and when it started (a reused pid is another process)."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def process_start(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat``, field 22), or None
    where it cannot be read (no such process, no ``/proc``)."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return None
    # the command name (field 2) is in parentheses and may hold spaces or parentheses: split after the last
    fields = stat[stat.rfind(")") + 2:].split()
    try:
        return int(fields[19])  # field 22 of the whole line: the 20th after the name
    except (IndexError, ValueError):
        return None


def process_gone(host: str | None, pid: int | None, started: int | None = None) -> bool:
    """Whether the process that ran a build is known to be gone: it ran on this host and has exited, or
    its pid now belongs to a process that started at another time than the one recorded (``started``,
    :func:`process_start` when the build was registered)."""
    if host != socket.gethostname() or not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    if started is None:
        return False
    now = process_start(pid)
    return now is not None and now != started
