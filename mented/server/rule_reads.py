"""Rules read: recalled by action, got, listed, their history; a project's rules beside yours."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable

from mented.memory import Memory
from mented.protocol import (
    MAX_FRAME,
    ActionsReply,
    ActionSummary,
    ErrorCode,
    ErrorReply,
    ListRequest,
    MemoriesReply,
    MemoryReply,
    RecallRequest,
    Reply,
    UntrustedProject,
)
from mented.replies import SCAN_ABOVE, recall_reply, untrusted_reply
from mented.server.bounds import _BUSY_SENDING
from mented.server.travel import _Travel
from mented.server.workers import _PROJECT_READ_S
from mented.store import NotFoundError

_MEMORY_OVERHEAD = 150  # bytes a memory takes in a reply beyond its content, at least


def _listing_reply(
    listing: Callable[[], list[Memory]], synced_among: Callable[[list[Memory]], list[str]]
) -> Reply:
    """The answer to a `list`, judged too large in the worker thread that scanned it:
    encoding tens of MiB only to refuse them would hold the trio thread (and every
    hook) for a tenth of a second."""
    memories = listing()
    # A lower bound on the encoded size: every memory's fields and punctuation take
    # more than _MEMORY_OVERHEAD bytes, and its content at least a byte per character.
    least = sum(len(memory.content) + _MEMORY_OVERHEAD for memory in memories)
    if least <= MAX_FRAME:
        return MemoriesReply(memories=memories, synced=synced_among(memories))
    count = len(memories)
    # Freed in one go, 200,000 memories held the GIL for a third of a second.
    while memories:
        del memories[-1000:]
    return ErrorReply(
        code=ErrorCode.FRAME_TOO_LARGE,
        message=f"the answer would hold {count} memories, over the {MAX_FRAME}-byte "
        "frame limit; ask for fewer (a limit, e.g. `mentectl rule list -k 100`, or a filter)",
    )


class _RuleReads(_Travel):
    """The requests that read rules, and what they say of a project's."""

    async def _answer_recall(self, request: RecallRequest) -> MemoriesReply:
        """The live rules for an action that the caller may see (`recall_reply`)."""
        await self.project_reads.ready(request.cwd, time.monotonic() + _PROJECT_READ_S)
        recall = functools.partial(recall_reply, self.rules, self.store, request)
        # The hook's own recall asks for a few rules; many is a scan.
        return await self._scan(recall) if request.k > SCAN_ABOVE else recall()

    def _answer_actions(self) -> ActionsReply:
        """The actions of the table in force, with their descriptions."""
        descriptions = self.matcher.table.descriptions()
        return ActionsReply(
            actions=[
                ActionSummary(name=name, description=descriptions[name])
                for name in sorted(descriptions)
            ]
        )

    async def _list(self, request: ListRequest) -> Reply:
        """A listing (a scan, off the event loop), saying when a project's rules are not served."""
        if not self.held.has_room(MAX_FRAME):
            # The answer may be up to MAX_FRAME and could not be held: spare the scan.
            return _BUSY_SENDING
        await self.project_reads.ready(request.cwd, time.monotonic() + _PROJECT_READ_S)
        listing = functools.partial(
            self.store.list,
            action=request.action,
            agent=request.agent,
            cwd=request.cwd,
            tag=request.tag,
            memory_type=request.memory_type,
            rules_only=request.rules_only,
            include_superseded=request.include_superseded,
            limit=request.limit,
            # A trusted project's committed rules are listed with yours.
            also=self.rules.trusted_rules(request.cwd),
        )
        reply = await self._scan(
            functools.partial(_listing_reply, listing, self.store.synced_among)
        )
        if isinstance(reply, MemoriesReply):
            reply.untrusted = self._untrusted(request.cwd)
        return reply

    async def _history(self, memory_id: str) -> MemoriesReply:
        """Every version of a rule, oldest first (a project's rule has its file's history)."""
        async with self._project_rule_refused(memory_id):
            history = await self._scan(functools.partial(self.store.history, memory_id))
            synced = await self._scan(functools.partial(self.store.synced_among, history))
        return MemoriesReply(memories=history, synced=synced)

    async def _get(self, memory_id: str) -> MemoryReply:
        """A memory of the store, else a project's committed rule with its file."""
        try:
            memory = self.store.get(memory_id)
            return MemoryReply(memory=memory, synced=self.store.synced_among([memory]))
        except NotFoundError:
            await self.project_reads.known_ready(time.monotonic() + _PROJECT_READ_S)
            found = self.projects.find_rule(memory_id)
            if found is None:
                raise
            project, rule = found
            return MemoryReply(memory=rule, file=project.file_of(rule))

    @contextlib.asynccontextmanager
    async def _project_rule_refused(self, memory_id: str) -> AsyncIterator[None]:
        """A `NotFoundError` for an id that names a project's committed rule becomes a
        `ProjectRuleError` naming its file: the rule is real, and changed there.

        Looked up on the event loop, after the store said no, once the projects not
        read yet are read off it (a repository's file must not hold other requests).
        """
        try:
            yield
        except NotFoundError:
            await self.project_reads.known_ready(time.monotonic() + _PROJECT_READ_S)
            self.projects.refuse_project_rule(memory_id)
            raise

    def _untrusted(self, cwd: str | None) -> UntrustedProject | None:
        """The project `cwd` is in, when its committed rules are not served (not trusted)."""
        return untrusted_reply(self.rules, cwd)
