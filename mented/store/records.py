"""The records and their indexes: memories, triggers, handles, pinned rules, the change log."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lmdb

from mented.memory import MIN_HANDLE_LENGTH, InvalidInputError, Memory, MemoryType
from mented.store.environment import _Environment
from mented.store.errors import NotFoundError, StoreError
from mented.store.layout import (
    _META_CHANGE_SEQ,
    _META_LIVE_RULES,
    _SEQ_BYTES,
    _decode,
    _encoder,
    _handle_key,
    _newest_first_key,
    _trigger_key,
)
from mented.store.validation import _CROCKFORD, _ID_LENGTH, _new_memory

if TYPE_CHECKING:
    import builtins
    from collections.abc import Iterable, Iterator, Sequence

    from mented.store.results import StoreItem

_AMBIGUOUS_SHOWN = 5


class _Records(_Environment):
    """Memories written with their index entries, and read back by id or handle."""

    # The named databases (`mented.store.layout`), opened by `mented.store.migrations`.
    _memories: lmdb._Database
    _triggers: lmdb._Database
    _handles: lmdb._Database
    _actions: lmdb._Database
    _meta: lmdb._Database
    _forgotten: lmdb._Database
    _successors: lmdb._Database
    _pinned: lmdb._Database
    _changes: lmdb._Database
    _synced: lmdb._Database

    def store(  # noqa: PLR0913 - the fields of a memory
        self,
        content: str,
        *,
        memory_type: MemoryType = MemoryType.SEMANTIC,
        tags: Sequence[str] = (),
        agent: str | None = None,
        project: str | None = None,
        checks: Sequence[str] = (),
    ) -> Memory:
        """Store a memory; a `trigger:<action>` tag makes it a rule for that action.

        Raises:
            InvalidInputError: empty or oversized content, an unusable tag or action
                name, a relative project path, an unknown memory type.
        """
        memory = _new_memory(
            content,
            memory_type=memory_type,
            tags=tags,
            agent=agent,
            project=project,
            checks=checks,
        )
        self._write(lambda txn: self._insert(txn, memory))
        return memory

    def store_many(self, items: Iterable[StoreItem]) -> builtins.list[str]:
        """Store many memories in one transaction (import, benchmarks): all or none.

        Raises:
            InvalidInputError: naming the first bad item by its position.
        """
        memories = []
        for position, item in enumerate(items):
            try:
                memories.append(
                    _new_memory(
                        item.content,
                        memory_type=item.memory_type,
                        tags=item.tags,
                        agent=item.agent,
                        project=item.project,
                        created_at=item.created_at,
                    )
                )
            except InvalidInputError as exc:
                raise InvalidInputError(f"item {position}: {exc}") from exc

        def insert_all(txn: lmdb.Transaction[bytes]) -> None:
            for memory in memories:
                self._insert(txn, memory)

        self._write(insert_all)
        return [memory.id for memory in memories]

    def _insert(self, txn: lmdb.Transaction[bytes], memory: Memory) -> None:
        if not txn.put(
            memory.id.encode(), _encoder.encode(memory), overwrite=False, db=self._memories
        ):
            raise StoreError(f"id {memory.id} is already taken; try again")
        txn.put(_handle_key(memory.id), b"", db=self._handles)
        if memory.supersedes is not None:
            self._link(txn, memory.supersedes, memory.id)
        for merged in memory.merges:
            self._link(txn, merged, memory.id)
        if memory.is_live:
            self._index(txn, memory)

    def _put(self, txn: lmdb.Transaction[bytes], memory: Memory) -> None:
        txn.put(memory.id.encode(), _encoder.encode(memory), db=self._memories)

    def _index(self, txn: lmdb.Transaction[bytes], memory: Memory) -> None:
        actions = memory.actions
        for action in actions:
            txn.put(_trigger_key(action, memory), memory.id.encode(), db=self._triggers)
            self._count(txn, self._actions, action.encode(), +1)
        if actions:
            self._count(txn, self._meta, _META_LIVE_RULES, +1)
        self._index_lookups(txn, memory)

    def _unindex(self, txn: lmdb.Transaction[bytes], memory: Memory) -> None:
        actions = memory.actions
        for action in actions:
            if txn.delete(_trigger_key(action, memory), db=self._triggers):
                self._count(txn, self._actions, action.encode(), -1)
        if actions:
            self._count(txn, self._meta, _META_LIVE_RULES, -1)
        self._unindex_lookups(txn, memory)

    def _index_lookups(self, txn: lmdb.Transaction[bytes], memory: Memory) -> None:
        """`memory` became live: into the pinned index, or the fact change log."""
        if memory.is_pinned:
            txn.put(_newest_first_key(memory), memory.id.encode(), db=self._pinned)
        elif not memory.is_rule:
            self._log_fact_change(txn, memory.id)

    def _unindex_lookups(self, txn: lmdb.Transaction[bytes], memory: Memory) -> None:
        """`memory` stopped being live (superseded, forgotten)."""
        if memory.is_pinned:
            txn.delete(_newest_first_key(memory), db=self._pinned)
        elif not memory.is_rule:
            self._log_fact_change(txn, memory.id)

    def _log_fact_change(self, txn: lmdb.Transaction[bytes], memory_id: str) -> None:
        raw = txn.get(_META_CHANGE_SEQ, db=self._meta)
        seq = (int.from_bytes(raw, "big") if raw else 0) + 1
        txn.put(_META_CHANGE_SEQ, seq.to_bytes(_SEQ_BYTES, "big"), db=self._meta)
        txn.put(seq.to_bytes(_SEQ_BYTES, "big"), memory_id.encode(), db=self._changes)
        # Entries the recall index has applied go here, a few per write: the log
        # stays as long as what the index has yet to apply.
        applied = self._changes_applied
        cursor = txn.cursor(self._changes)
        for _ in range(64):
            if not cursor.first() or int.from_bytes(cursor.key(), "big") > applied:
                break
            cursor.delete()

    @staticmethod
    def _count(txn: lmdb.Transaction[bytes], db: lmdb._Database, key: bytes, delta: int) -> None:
        raw = txn.get(key, db=db)
        value = (int.from_bytes(raw, "big") if raw else 0) + delta
        if value > 0:
            txn.put(key, value.to_bytes(8, "big"), db=db)
        else:
            txn.delete(key, db=db)

    def _index_all_pinned(self, txn: lmdb.Transaction[bytes]) -> int:
        count = 0
        for raw in txn.cursor(self._memories).iternext(keys=False):
            memory = _decode(raw)
            if memory.is_live and memory.is_pinned:
                txn.put(_newest_first_key(memory), memory.id.encode(), db=self._pinned)
                count += 1
        return count

    def _link(self, txn: lmdb.Transaction[bytes], before: str, after: str) -> None:
        txn.put(before.encode() + after.encode(), b"", db=self._successors)

    def _successor_ids(self, txn: lmdb.Transaction[bytes], memory_id: str) -> builtins.list[str]:
        prefix = memory_id.encode()
        cursor = txn.cursor(self._successors)
        found: builtins.list[str] = []
        if not cursor.set_range(prefix):
            return found
        for key in cursor.iternext(values=False):
            if not key.startswith(prefix):
                break
            found.append(key[_ID_LENGTH:].decode())
        return found

    def _load(self, txn: lmdb.Transaction[bytes], memory_id: str | None) -> Memory | None:
        if memory_id is None:
            return None
        raw = txn.get(memory_id.encode(), db=self._memories)
        return None if raw is None else _decode(raw)

    def _resolve(self, txn: lmdb.Transaction[bytes], memory_id: str) -> Memory:
        """The memory named by a full id, its handle or a unique end or start of its id.

        The handle is what the agent is shown (`[86258kp8]`): brackets are dropped.
        A start of at least 6 characters is what a person types from `rule list`.
        """
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidInputError("give a memory id (or its last 8 characters)")
        wanted = memory_id.strip().strip("[]").strip().upper()
        if len(wanted) < MIN_HANDLE_LENGTH:
            raise InvalidInputError(
                f"{memory_id!r} is too short to name a memory: "
                f"give at least {MIN_HANDLE_LENGTH} characters of its id"
            )
        if len(wanted) > _ID_LENGTH or not _CROCKFORD.issuperset(wanted):
            raise NotFoundError(f"no memory has the id {memory_id!r}")
        if len(wanted) == _ID_LENGTH:
            memory = self._load(txn, wanted)
            if memory is None:
                raise NotFoundError(f"no memory has the id {memory_id!r}")
            return memory
        ending = wanted[::-1].encode()
        ends = [key[::-1] for key in self._keys_with_prefix(txn, ending, self._handles)]
        starts = list(self._keys_with_prefix(txn, wanted.encode(), self._memories))
        matches = [key.decode() for key in dict.fromkeys(ends + starts)]
        if not matches:
            raise NotFoundError(f"no memory has an id starting or ending with {memory_id!r}")
        if len(matches) > 1:
            shown = ", ".join(matches[:_AMBIGUOUS_SHOWN])
            more = "" if len(matches) <= _AMBIGUOUS_SHOWN else ", ..."
            raise InvalidInputError(
                f"{memory_id!r} matches several memories ({shown}{more}); "
                "give more characters of the id"
            )
        memory = self._load(txn, matches[0])
        if memory is None:  # an index entry without its record
            raise NotFoundError(f"no memory has an id starting or ending with {memory_id!r}")
        return memory

    def _keys_with_prefix(
        self, txn: lmdb.Transaction[bytes], prefix: bytes, db: lmdb._Database
    ) -> Iterator[bytes]:
        """Up to `_AMBIGUOUS_SHOWN + 1` keys of `db` that start with `prefix`."""
        cursor = txn.cursor(db)
        if not cursor.set_range(prefix):
            return
        for count in range(_AMBIGUOUS_SHOWN + 1):
            key = cursor.key()
            if not key.startswith(prefix):
                return
            yield key
            if count == _AMBIGUOUS_SHOWN or not cursor.next():
                return
