"""Supersession and history: a rule's versions, their links, forks, and forgetting."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import msgspec

from mented.memory import Forgotten, Memory, check_checks_shape, new_id, short_handle
from mented.store.errors import ConflictError
from mented.store.layout import _encoder, _forgotten_decoder, _handle_key, _newest_first
from mented.store.migrations import _Migrations
from mented.store.results import Fork
from mented.store.validation import (
    _ID_LENGTH,
    _check_agent,
    _check_changes,
    _check_content,
    _check_project,
    _check_tags,
)

if TYPE_CHECKING:
    import builtins
    from collections.abc import Sequence

    import lmdb


def _replaced_first(members: Sequence[Memory]) -> builtins.list[Memory]:
    """Versions of one rule, each after those it replaces, else oldest first."""
    ids = {memory.id for memory in members}
    waiting_on = {
        memory.id: {link for link in (memory.supersedes, *memory.merges) if link in ids}
        for memory in members
    }
    ordered: builtins.list[Memory] = []
    left = sorted(members, key=lambda memory: (memory.created_at, memory.id))
    while left:
        # The oldest version whose predecessors are all placed (a cycle, which only a
        # damaged store could hold, falls back to the oldest).
        ready = next((m for m in left if not waiting_on[m.id]), left[0])
        ordered.append(ready)
        left.remove(ready)
        for pending in waiting_on.values():
            pending.discard(ready.id)
    return ordered


class _History(_Migrations):
    """New versions of a memory, the state derived from its successors, forgetting."""

    def supersede(  # noqa: PLR0913 - what a new version may change
        self,
        memory_id: str,
        content: str,
        *,
        tags: Sequence[str] | None = None,
        agent: str | None = None,
        project: str | None = None,
        checks: Sequence[str] | None = None,
    ) -> tuple[Memory, Memory]:
        """Replace a memory with a new version, in one atomic write.

        `checks`: the new version's (None: the old one's).

        The new memory keeps the old one's type, and its tags and scope unless
        given. The old one gets `valid_until` and `superseded_by` and leaves the
        trigger index: it stops firing when this returns.

        Returns:
            (the new memory, the old one as updated).

        Raises:
            NotFoundError: no memory has that id.
            ConflictError: it was already superseded (the message names the current one).
            InvalidInputError: as for `store`.
        """
        _check_content(content)
        new_tags = None if tags is None else _check_tags(tags)
        new_agent = _check_agent(agent)
        new_project = _check_project(project)
        new_checks = None if checks is None else check_checks_shape(list(checks))

        def replace(txn: lmdb.Transaction[bytes]) -> tuple[Memory, Memory]:
            old = self._resolve(txn, memory_id)
            if old.superseded_by is not None:
                raise ConflictError(self._already_superseded(txn, old))
            _check_changes(old, content, new_tags, new_agent, new_project, new_checks)
            # Superseding one current version of a forked rule settles the fork.
            others = [tip for tip in self._family_tips(txn, old) if tip.id != old.id]
            now = max(time.time(), old.created_at, *(tip.created_at for tip in others))
            new = Memory(
                id=new_id(now),
                content=content,
                memory_type=old.memory_type,
                tags=old.tags if new_tags is None else new_tags,
                agent=old.agent if new_agent is None else new_agent,
                project=old.project if new_project is None else new_project,
                created_at=now,
                supersedes=old.id,
                merges=tuple(tip.id for tip in others),
                checks=old.checks if new_checks is None else new_checks,
            )
            retired = msgspec.structs.replace(old, valid_until=now, superseded_by=new.id)
            self._unindex(txn, old)
            txn.put(old.id.encode(), _encoder.encode(retired), db=self._memories)
            self._insert(txn, new)
            for tip in others:
                self._derive(txn, tip.id)
            return new, retired

        return self._write(replace)

    def forget(self, memory_id: str) -> Memory:
        """Remove a memory and its index entries; returns what was removed.

        Its neighbours in a supersession chain are linked past it. Forgetting the
        current version of a rule does not revive the one it replaced.

        Raises:
            NotFoundError: no memory has that id.
        """

        def remove(txn: lmdb.Transaction[bytes]) -> Memory:
            memory = self._resolve(txn, memory_id)
            self._remove(
                txn,
                memory,
                Forgotten(
                    id=memory.id,
                    created_at=memory.created_at,
                    supersedes=memory.supersedes,
                    forgotten_at=time.time(),
                ),
            )
            return memory

        return self._write(remove)

    def history(self, memory_id: str) -> builtins.list[Memory]:
        """Every version of a memory's rule, from any one of them, oldest first.

        The whole family: after a fork (two machines superseded one version apart)
        both branches, and the version that settled it, if any. Each version comes
        after the ones it replaces (`supersedes`, `merges`), then by time. Forgotten
        versions are not in it: the links of the others that name one do.

        Raises:
            NotFoundError: no memory has that id.
        """

        def family(txn: lmdb.Transaction[bytes]) -> builtins.list[Memory]:
            start = self._resolve(txn, memory_id)
            members = self._family(txn, start)
            if all(member.id != start.id for member in members):  # only in a damaged store
                members.append(start)
            return _replaced_first(members)

        return self._read(family)

    def forks(self) -> builtins.list[Fork]:
        """Rules with more than one current version (superseded apart on two machines).

        Walks the successors index only (one entry per supersession), not the memories.
        """

        def find(txn: lmdb.Transaction[bytes]) -> builtins.list[Fork]:
            counts: dict[str, int] = {}
            for key in txn.cursor(self._successors).iternext(values=False):
                before = key[:_ID_LENGTH].decode()
                if txn.get(key[_ID_LENGTH:], db=self._memories) is not None:
                    counts[before] = counts.get(before, 0) + 1
            found: dict[str, Fork] = {}
            for before, count in counts.items():
                memory = self._load(txn, before)
                if count < 2 or memory is None:
                    continue
                root = self._family_root(txn, memory)
                if root.id in found:
                    continue
                tips = sorted(self._family_tips(txn, root), key=_newest_first, reverse=True)
                if len(tips) > 1:
                    found[root.id] = Fork(root=root.id, tips=tuple(tips))
            return sorted(found.values(), key=lambda fork: fork.root)

        return self._read(find)

    def _already_superseded(self, txn: lmdb.Transaction[bytes], old: Memory) -> str:
        current: Memory = old
        seen = {old.id}
        while current.superseded_by is not None:
            after = self._load(txn, current.superseded_by)
            if after is None:
                return (
                    f"memory {old.id} was already superseded by {current.superseded_by}, which "
                    "has since been forgotten; store a new rule instead"
                )
            if after.id in seen:
                break
            seen.add(after.id)
            current = after
        return (
            f"memory {old.id} was already superseded; the current version is {current.id} "
            f"({short_handle(current.id)}): supersede that one instead"
        )

    def _family_root(self, txn: lmdb.Transaction[bytes], memory: Memory) -> Memory:
        seen = {memory.id}
        while (before := self._load(txn, memory.supersedes)) is not None and before.id not in seen:
            seen.add(before.id)
            memory = before
        return memory

    def _family(self, txn: lmdb.Transaction[bytes], memory: Memory) -> builtins.list[Memory]:
        """Every stored version of the rule `memory` is a version of, from its root on."""
        root = self._family_root(txn, memory)
        members: builtins.list[Memory] = []
        seen = {root.id}
        waiting = [root]
        while waiting:
            current = waiting.pop()
            members.append(current)
            for after_id in self._successor_ids(txn, current.id):
                if after_id not in seen and (after := self._load(txn, after_id)) is not None:
                    seen.add(after_id)
                    waiting.append(after)
        return members

    def _family_tips(self, txn: lmdb.Transaction[bytes], memory: Memory) -> builtins.list[Memory]:
        """The current (live) versions of the rule `memory` is a version of."""
        return [version for version in self._family(txn, memory) if version.is_live]

    def _remove(self, txn: lmdb.Transaction[bytes], memory: Memory, tomb: Forgotten) -> None:
        """Forget `memory`: drop it and its index entries, keep `tomb`, link past it."""
        if memory.is_live:
            self._unindex(txn, memory)
        txn.delete(memory.id.encode(), db=self._memories)
        txn.delete(_handle_key(memory.id), db=self._handles)
        txn.delete(memory.id.encode(), db=self._synced)
        txn.put(memory.id.encode(), _encoder.encode(tomb), db=self._forgotten)
        before = self._resolve_link(txn, memory.supersedes)
        # The forgotten version stays among its predecessor's successors: forgetting
        # the current version of a rule does not revive the one it replaced.
        self._follow_past(txn, memory.id, before)

    def _follow_past(self, txn: lmdb.Transaction[bytes], gone: str, before: str | None) -> None:
        """The versions that superseded the forgotten `gone` now supersede `before`."""
        for after_id in self._successor_ids(txn, gone):
            txn.delete(gone.encode() + after_id.encode(), db=self._successors)
            if before is not None:
                self._link(txn, before, after_id)
            after = self._load(txn, after_id)
            if after is not None and after.supersedes == gone:
                self._put(txn, msgspec.structs.replace(after, supersedes=before))
        if before is not None:
            self._derive(txn, before)

    def _derive(self, txn: lmdb.Transaction[bytes], memory_id: str) -> None:
        """Set a memory's superseded state from its successors (see the module doc)."""
        memory = self._load(txn, memory_id)
        if memory is None:
            return
        present: builtins.list[tuple[float, str]] = []
        gone: builtins.list[tuple[float, str]] = []
        for after_id in self._successor_ids(txn, memory.id):
            after = self._load(txn, after_id)
            if after is not None:
                present.append((after.created_at, after.id))
                continue
            raw = txn.get(after_id.encode(), db=self._forgotten)
            if raw is not None:
                tomb = _forgotten_decoder.decode(raw)
                gone.append((tomb.created_at, tomb.id))
        if not present and not gone:
            return  # nothing supersedes it (a lone forgotten successor stays recorded)
        superseded_by = max(present or gone)[1]
        valid_until = min(present + gone)[0]
        if (superseded_by, valid_until) == (memory.superseded_by, memory.valid_until):
            return
        if memory.is_live:
            self._unindex(txn, memory)
        self._put(
            txn,
            msgspec.structs.replace(memory, superseded_by=superseded_by, valid_until=valid_until),
        )

    def _resolve_link(self, txn: lmdb.Transaction[bytes], memory_id: str | None) -> str | None:
        """`memory_id`, or, when it was forgotten, the nearest version before it."""
        seen: set[str] = set()
        while memory_id is not None and memory_id not in seen:
            seen.add(memory_id)
            raw = txn.get(memory_id.encode(), db=self._forgotten)
            if raw is None:
                return memory_id
            memory_id = _forgotten_decoder.decode(raw).supersedes
        return memory_id
