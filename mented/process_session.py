"""A session for hook events that carry no session id (Kiro CLI): the agent's own process.

Kiro CLI's `preToolUse` event is `{hook_event_name, cwd, tool_name, tool_input}` and no
session id, yet a stop must come once a session, not again on every retry. Kiro runs
each hook as its own child (`bash -c LINE`, and the installed line `exec`s the shim), so
the shim's parent is the Kiro process that holds the conversation: one Kiro process,
one session. The daemon, not the shim, works it out: it has the shim's pid from the
socket (`SO_PEERCRED`), and the shim knows nothing but the socket.

From `/proc/<pid>/stat` it reads the shim's parent, and from the parent's own the time it
started (clock ticks since boot): a pid alone comes back for another process, a pid
with its start time names one process while the machine runs, and the boot id
(`/proc/sys/kernel/random/boot_id`) tells one boot from the next (the session memory
outlives the daemon). A parent that is a shell (a hand-written line that runs the shim
without `exec`) is passed over, at most `MAX_SHELLS` of them.

All of /proc is read as untrusted input: `mented.untrusted.read_file` (no link followed,
a regular file, at most `MAX_STAT_BYTES`), the command name taken up to the last `)` (a
name may hold spaces and parentheses), every number checked. When any of it fails, where
there is no /proc or no peer pid (macOS: its peer credentials carry no pid), or when the
parent is pid 1 (the agent is gone and the shim was handed to init), the key is the
working directory and the hour instead (`FALLBACK_WINDOW_S`): one stop per directory
an hour, and at worst one more when the hour turns.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented.agents import AGENTS, ToolCall
from mented.untrusted import Refused, read_file

if TYPE_CHECKING:
    from collections.abc import Callable

    from mented.hooks import HookEvent

PROC = Path("/proc")
MAX_STAT_BYTES = 1024  # a stat line is ~300 bytes; its comm is at most 15 bytes
MAX_SHELLS = 2  # `bash -c` that forks for a hand-written line, and one more
# The shells that may stand between the agent and the shim; `comm` is cut at 15 bytes.
SHELLS = frozenset({b"sh", b"bash", b"dash", b"zsh", b"ksh", b"mksh", b"fish", b"busybox"})
FALLBACK_WINDOW_S = 3600
_STARTTIME = 19  # field 22 of stat(5), counted from the state (field 3)


class _Stat(msgspec.Struct, frozen=True):
    comm: bytes
    ppid: int
    start: int


def no_peer() -> int | None:
    """No hook process known (a caller without a connection): the fallback key."""
    return None


def with_process_session(
    agent: str, call: HookEvent | None, peer: Callable[[], int | None]
) -> HookEvent | None:
    """`call` with the session of its agent's process, for an agent whose events carry no
    session id (`session_from_process`); any other call as it is. `peer` gives the hook
    process's pid (`mented.peercred.peer_pid` of its connection), asked only when needed:
    the other agents' hooks cost no system call for it."""
    if not isinstance(call, ToolCall) or call.session is not None:
        return call
    adapter = AGENTS.get(agent)
    if adapter is None or not adapter.session_from_process:
        return call
    return msgspec.structs.replace(call, session=process_session(peer(), call.cwd))


def process_session(
    pid: int | None, cwd: str | None, *, now: float | None = None, proc: Path | None = None
) -> str:
    """The session key of the hook process `pid`: its agent's process, else `cwd` and the hour.

    `proc`: where /proc is (`PROC`, which the tests move).
    """
    proc = PROC if proc is None else proc
    found = _agent_process(pid, proc) if pid is not None and pid > 0 else None
    if found is not None:
        parent, start = found
        return f"process {parent} started {start} boot {_boot_id(proc)}"
    hour = int((time.time() if now is None else now) // FALLBACK_WINDOW_S)
    return f"directory {cwd or '/'} hour {hour}"


def _agent_process(pid: int, proc: Path) -> tuple[int, int] | None:
    """The pid and start time of the process that ran hook process `pid`, past any shells."""
    own = _stat(proc, pid)
    if own is None:
        return None
    parent = own.ppid
    for shells in range(MAX_SHELLS + 1):
        if parent <= 1:
            return None
        info = _stat(proc, parent)
        if info is None:
            return None
        if info.comm not in SHELLS or shells == MAX_SHELLS:
            return parent, info.start
        parent = info.ppid
    return None  # not reached: the loop returns on its last turn


def _stat(proc: Path, pid: int) -> _Stat | None:
    """The command name, parent and start time in `/proc/<pid>/stat`; None when unreadable."""
    try:
        data = read_file(proc / str(pid) / "stat", limit=MAX_STAT_BYTES)
    except (OSError, Refused):
        return None
    opening, closing = data.find(b"("), data.rfind(b")")
    if opening < 0 or closing < opening:
        return None
    fields = data[closing + 1 :].split()
    if len(fields) <= _STARTTIME:
        return None
    ppid, start = fields[1], fields[_STARTTIME]
    if not (ppid.isdigit() and start.isdigit()) or len(ppid) > 10 or len(start) > 20:
        return None
    return _Stat(comm=data[opening + 1 : closing], ppid=int(ppid), start=int(start))


@functools.cache
def _boot_id(proc: Path) -> str:
    """This boot's id (read once: it changes only with a reboot); "" when there is none."""
    try:
        raw = read_file(proc / "sys" / "kernel" / "random" / "boot_id", limit=64)
    except (OSError, Refused):
        return ""
    text = raw.decode("ascii", "replace").strip()
    return text if all(c in "0123456789abcdef-" for c in text) else ""
