"""6. Each store size's daemon: resident memory, its own heap, and cold start to ready."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import msgspec

from mented.protocol import StatusReply, StatusRequest
from mented_client.bench.processes import Daemon
from mented_client.bench.timing import Summary, summarize
from mented_client.connection import Client


class MemorySize(msgspec.Struct, frozen=True, kw_only=True):
    memories: int
    rss_bytes: int
    anon_bytes: int  # the daemon's own heap; the rest is LMDB's mapped file
    db_bytes: int
    cold_start: Summary  # process start to the first answered status request


def rss(pid: int) -> tuple[int, int]:
    """(resident bytes, anonymous resident bytes) of a process; anon is 0 where unknown."""
    fields: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in {"VmRSS", "RssAnon"}:
                fields[name] = int(value.split()[0]) * 1024
    if "VmRSS" in fields:
        return fields["VmRSS"], fields.get("RssAnon", 0)
    ps = subprocess.run(  # noqa: S603 - macOS has no /proc
        ["ps", "-o", "rss=", "-p", str(pid)],  # noqa: S607 - ps is on every PATH
        capture_output=True,
        text=True,
        check=False,
        timeout=5,
    )
    return int(ps.stdout.strip() or 0) * 1024, 0


def daemon_memory(daemon: Daemon, cold_starts: list[int]) -> MemorySize:
    """A running daemon's resident memory and store, with its cold starts (nanoseconds)."""
    resident, anon = rss(daemon.pid)
    with Client(daemon.socket) as client:
        status = client.expect(StatusRequest(), StatusReply)
    return MemorySize(
        memories=status.memories,
        rss_bytes=resident,
        anon_bytes=anon,
        db_bytes=status.db_bytes,
        cold_start=summarize(cold_starts),
    )
