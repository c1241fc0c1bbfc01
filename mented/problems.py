"""The degraded states the daemon runs in, so that no fallback is silent.

mented prefers serving rules a worse way to not serving them: without its
session memory it hands rules over after the command instead of stopping it
first; with an invalid config file it runs on the built-in settings; with a
full data directory it reads on and writes nothing. Each such fallback is
`note`d here, under a kind, by the part of the daemon that falls back, and
`clear`ed when it is over; `status` reports what is current, and `mentectl
status` and `doctor` show it with what to do.

A kind is a stable string for programs; a new degraded state adds a kind and
the code that notes and clears it, nothing else. Noting costs a dict lookup,
so the hook path may note (and clear) on every request.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from mented.protocol import Problem

# The kinds; clients show a kind they do not know by its message.
SESSION_MEMORY = "session_memory"  # commands are not stopped first: rules come after them
CONFIG_DEFAULTS = "config_defaults"  # the config file was invalid at start: built-in settings
DATA_DIR_FULL = "data_dir_full"  # no room in the data directory: nothing new is written

# Below this much free space the data directory is said to be full: a rule is a few
# KiB, but LMDB writes whole pages, and a store write copies every page it touches.
FULL_BELOW_BYTES = 1 << 20


class Problems:
    """The current degraded states, by kind. Safe to use from several threads."""

    def __init__(self) -> None:
        self._current: dict[str, Problem] = {}
        self._lock = threading.Lock()

    def note(self, kind: str, message: str, fix: str) -> None:
        """Record that `kind` is in force (again): the message and fix replace the last
        ones, `since` stays the first time it was noted."""
        with self._lock:
            earlier = self._current.get(kind)
            since = earlier.since if earlier is not None else time.time()
            self._current[kind] = Problem(kind=kind, message=message, fix=fix, since=since)

    def clear(self, kind: str) -> None:
        """`kind` is over (no effect when it was not noted)."""
        if kind in self._current:  # the common case, lock-free: nothing to clear
            with self._lock:
                self._current.pop(kind, None)

    def __contains__(self, kind: str) -> bool:
        return kind in self._current

    def current(self) -> list[Problem]:
        """What is in force, oldest first."""
        with self._lock:
            return sorted(self._current.values(), key=lambda problem: problem.since)


def session_memory_unavailable(error: str, *, reopens: bool) -> tuple[str, str]:
    """The message and fix of `SESSION_MEMORY` for `error`. `reopens`: whether it comes
    back by itself (a write failed) or only with a new daemon (it could not be opened)."""
    message = (
        f"session memory unavailable ({error}): no command is stopped before it runs; "
        "its rules are handed over as context after it instead"
    )
    if reopens:
        fix = (
            "free some space in the data directory (a full disk is the usual cause); "
            "the next hook uses the session memory again"
        )
    else:
        fix = "free some space in the data directory if it is full, then `mentectl restart`"
    return message, fix


def config_defaults(path: Path | None) -> tuple[str, str]:
    """The message and fix of `CONFIG_DEFAULTS`: the daemon started on a bad `path`."""
    where = str(path) if path is not None else "the config file"
    return (
        f"running on the built-in settings, not on {where}: it was invalid when the daemon "
        "started (your [delivery], [hook] and [actions] settings are not applied)",
        "fix the file (`mentectl status` shows what is wrong with it while it is), then "
        "`mentectl reload`",
    )


def free_bytes(directory: Path) -> int | None:
    """Bytes an unprivileged write may still take in `directory`'s file system (None:
    unknown)."""
    try:
        info = os.statvfs(directory)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def data_dir_full(directory: Path, why: str) -> tuple[str, str]:
    """The message and fix of `DATA_DIR_FULL`."""
    return (
        f"the data directory {directory} is full ({why}): new rules cannot be written "
        "(lookups go on) and the session memory cannot record what was handed over",
        f"free some space on the file system of {directory} (`df -h {directory}`)",
    )
