"""Reading projects' `.mented/` folders off the daemon's event loop, within a deadline.

A project's files come from a repository (mented/team.py): reading and parsing them
is bounded (`MAX_PROJECT_BYTES`) but not free, and other sessions' hooks must not
wait on it. Before a request that looks up team rules (a hook, `rule list --cwd`,
`explain`), the daemon awaits `ProjectReads.ready(cwd, deadline)` (before one that
looks a rule up by its id, `get`, `history`, `forget`, `report`: `known_ready`): each project that
applies there and is not read yet (or changed) is read in a worker thread, at most
`MAX_READING` at a time, one read per project however many requests wait for it.
A request whose deadline passes first goes on without that project's rules (the
user's own are served as always); the read goes on and is kept for the next one.

Everything here runs on the trio thread except `read_project` itself, which only
reads and returns a `Project`: the caches of `ProjectRules` are touched by the
trio thread alone.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import trio

from mented.team import read_project

if TYPE_CHECKING:
    from mented.team import Project, ProjectRules

MAX_READING = 2  # projects read at once (each in a worker thread)


class ProjectReads:
    """The daemon's reads of projects: in worker threads, shared by the requests waiting."""

    def __init__(self, projects: ProjectRules) -> None:
        self._projects = projects
        self._limiter = trio.CapacityLimiter(MAX_READING)
        self._reading: dict[str, trio.Event] = {}

    async def ready(self, cwd: str | None, deadline: float) -> None:
        """Return once every project that applies in `cwd` is read, or at `deadline`
        (`time.monotonic()`'s clock, as the hook's), whichever comes first."""
        await self._ready(self._projects.stale(cwd), deadline)

    async def known_ready(self, deadline: float) -> None:
        """`ready` for every project the daemon knows (met or trusted), before a rule is
        looked up by its id (`ProjectRules.find_rule`)."""
        await self._ready(self._projects.known_stale(), deadline)

    async def _ready(self, stale: list[str], deadline: float) -> None:
        if not stale:
            return
        with trio.move_on_after(max(0.0, deadline - time.monotonic())):
            for root in stale:
                await self._read(root)

    async def _read(self, root: str) -> None:
        event = self._reading.get(root)
        if event is None:
            event = self._reading[root] = trio.Event()
            # Not in the waiting request's cancel scope: a read its deadline gives up on
            # still finishes and is kept for the next request there.
            trio.lowlevel.spawn_system_task(self._read_and_keep, root, event)
        await event.wait()

    async def _read_and_keep(self, root: str, event: trio.Event) -> None:
        try:
            project: Project = await trio.to_thread.run_sync(
                read_project, root, limiter=self._limiter
            )
            self._projects.install(project)
        finally:
            del self._reading[root]
            event.set()
