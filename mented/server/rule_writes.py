"""Rules written: stored, superseded, forgotten, a project trusted; the pinned cap kept."""

from __future__ import annotations

import functools
import os

from mented.checks import rule_checks
from mented.memory import PINNED_TAG, Memory
from mented.pinned import check_cap
from mented.protocol import (
    ForgottenReply,
    StoredReply,
    StoreRequest,
    SupersededReply,
    SupersedeRequest,
    TrustedReply,
)
from mented.server.rule_reads import _RuleReads
from mented.server.workers import _in_thread


def _is_pinned_tag(tag: object) -> bool:
    return isinstance(tag, str) and tag.strip().lower() == PINNED_TAG


def _pinned_stand_in(content: str, agent: str | None, project: str | None) -> Memory:
    """The pinned rule a store or supersede would write, for the cap check before it
    (`project` normalized as the store keeps it; the store refuses a relative one itself)."""
    return Memory(
        id="",
        content=content,
        tags=(PINNED_TAG,),
        agent=agent,
        project=None if project is None else os.path.normpath(project),
        created_at=0.0,
    )


class _RuleWrites(_RuleReads):
    """The requests that change the rules served."""

    async def _answer_store(self, request: StoreRequest) -> StoredReply:
        memory = await _in_thread(functools.partial(self._store_memory, request))
        self._note_change()
        self.events.publish_rule("added", memory)
        return StoredReply(id=memory.id)

    async def _answer_supersede(self, request: SupersedeRequest) -> SupersededReply:
        async with self._project_rule_refused(request.id):
            new, old = await _in_thread(functools.partial(self._supersede, request))
        self._note_change()
        self.events.publish_rule("superseded", new, replaces=old.id)
        return SupersededReply(id=new.id, old=old)

    async def _answer_forget(self, memory_id: str) -> ForgottenReply:
        store = self.store
        async with self._project_rule_refused(memory_id):
            forgotten = await _in_thread(functools.partial(self._indexed, store.forget, memory_id))
        self._note_change()
        self.events.publish_rule("forgotten", forgotten)
        return ForgottenReply(id=forgotten.id)

    async def _answer_trust(self, directory: str) -> TrustedReply:
        project = await _in_thread(functools.partial(self.projects.trust, directory))
        return TrustedReply(root=project.root, rules=project.rules, digest=project.digest)

    def _store_memory(self, request: StoreRequest) -> Memory:
        """Store a memory; a pinned rule only within the cap (`mented.pinned`)."""
        checks = rule_checks(request.checks, request.tags, self.matcher.table)
        store = functools.partial(
            self._indexed,
            functools.partial(
                self.store.store,
                request.content,
                memory_type=request.memory_type,
                tags=request.tags,
                agent=request.agent,
                project=request.project,
                checks=checks,
            ),
        )
        if not any(_is_pinned_tag(tag) for tag in request.tags):
            return store()
        with self._pinned_lock:
            new = _pinned_stand_in(request.content, request.agent, request.project)
            check_cap(self.store.pinned_rules(), new, self.config.pinned)
            return store()

    def _supersede(self, request: SupersedeRequest) -> tuple[Memory, Memory]:
        """Supersede a memory; a pinned rule's new version only within the cap."""
        old = self.store.get(request.id)
        tags = old.tags if request.tags is None else tuple(request.tags)
        table = self.matcher.table
        checks = None if request.checks is None else rule_checks(request.checks, tags, table)
        if checks is None and request.tags is not None and old.checks:
            rule_checks(old.checks, tags, table)  # the old checks must fit the new actions too
        supersede = functools.partial(
            self._indexed,
            functools.partial(
                self.store.supersede,
                request.id,
                request.content,
                tags=request.tags,
                agent=request.agent,
                project=request.project,
                checks=checks,
            ),
        )
        if not any(_is_pinned_tag(tag) for tag in tags):
            return supersede()
        with self._pinned_lock:
            new = _pinned_stand_in(
                request.content,
                old.agent if request.agent is None else request.agent,
                old.project if request.project is None else request.project,
            )
            # It replaces `old` and, when `old` is one side of a fork, the other sides too.
            replaced = {version.id for version in self.store.history(old.id) if version.is_live}
            check_cap(self.store.pinned_rules(), new, self.config.pinned, replaced=replaced)
            return supersede()
