"""Bulk records: every memory and forget exported in pages, imported in one write, checked first."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from mented.memory import Forgotten, Memory, check_checks_shape
from mented.store.layout import _decode, _encoder, _forgotten_decoder, _newest_first
from mented.store.lookups import _Lookups
from mented.store.results import ImportSummary
from mented.store.validation import (
    _check_agent,
    _check_content,
    _check_created_at,
    _check_id,
    _check_memory_type,
    _check_project,
    _check_tags,
)

if TYPE_CHECKING:
    import builtins
    from collections.abc import Callable, Iterable, Iterator, Sequence

    import lmdb

    from mented.store.environment import T


class _Bulk(_Lookups):
    """Records that travel (export, import, sync): immutable, so imported in any order."""

    def export_records(self, *, batch: int = 1000) -> Iterator[builtins.list[Memory]]:
        """Every memory in id order (oldest first), `batch` at a time.

        Each batch is read in its own short transaction, so an export of a large
        store never holds one read open (which would pin old pages) and writes go
        on meanwhile; a memory stored during the walk may or may not be included.
        """
        yield from self._pages(self._memories, _decode, batch)

    def export_forgotten(self, *, batch: int = 1000) -> Iterator[builtins.list[Forgotten]]:
        """What is kept of every forgotten memory, in id order, `batch` at a time."""
        yield from self._pages(self._forgotten, _forgotten_decoder.decode, batch)

    def _pages(
        self, db: lmdb._Database, decode: Callable[[bytes], T], batch: int
    ) -> Iterator[builtins.list[T]]:
        after: bytes | None = None

        def page(txn: lmdb.Transaction[bytes]) -> builtins.list[tuple[bytes, T]]:
            cursor = txn.cursor(db)
            more = cursor.first() if after is None else cursor.set_range(after + b"\0")
            found: builtins.list[tuple[bytes, T]] = []
            while more and len(found) < batch:
                found.append((cursor.key(), decode(cursor.value())))
                more = cursor.next()
            return found

        while True:
            found = self._read(page)
            if not found:
                return
            after = found[-1][0]
            yield [item for _, item in found]

    def import_records(
        self,
        memories: Sequence[Memory],
        forgotten: Sequence[Forgotten] = (),
        *,
        synced: bool = False,
    ) -> ImportSummary:
        """Add the memories and forgets this store does not have yet: all in one write.

        Records are immutable: one already here (or forgotten here) is left as it is,
        so importing twice changes nothing. A forget wins over a copy of the memory
        here. The superseded state of every memory touched is derived again from its
        successors, so the order records arrive in does not matter. Validate the
        records first (`check_imported`, `check_forgotten`).

        `synced`: the records came from another machine (mented.sync). The memories
        added are noted in the `synced` index, in the same write, so that a listing
        can say where each came from (`synced_among`). The index is this machine's
        own: it is never exported, so the records stay the same on every machine.
        """
        if not self._read(lambda txn: self._anything_new(txn, memories, forgotten)):
            return ImportSummary(unchanged=len(memories) + len(forgotten))
        return self.import_batches(lambda: [(memories, forgotten)], synced=synced)

    def import_batches(
        self,
        batches: Callable[[], Iterable[tuple[Sequence[Memory], Sequence[Forgotten]]]],
        *,
        synced: bool = False,
    ) -> ImportSummary:
        """`import_records` for records that come a batch at a time, still in one write.

        `batches()` is called for each attempt (a map that has to grow runs the write
        again from the start) and must give the same batches each time. An exception
        it raises aborts the write, so nothing of any batch is imported: a file can be
        read and checked while it is imported, holding one batch at a time.
        """

        def apply(txn: lmdb.Transaction[bytes]) -> ImportSummary:
            added = forgot = unchanged = 0
            for memories, forgotten in batches():
                summary = self._import_batch(txn, memories, forgotten, synced=synced)
                added += summary.added
                forgot += summary.forgotten
                unchanged += summary.unchanged
            return ImportSummary(added=added, forgotten=forgot, unchanged=unchanged)

        return self._write(apply)

    def _import_batch(
        self,
        txn: lmdb.Transaction[bytes],
        memories: Sequence[Memory],
        forgotten: Sequence[Forgotten],
        *,
        synced: bool,
    ) -> ImportSummary:
        """One batch of `import_batches`; the memories it touched are derived again."""
        touched: set[str] = set()
        forgot = 0
        for tomb in forgotten:
            if txn.get(tomb.id.encode(), db=self._forgotten) is not None:
                continue
            forgot += 1
            memory = self._load(txn, tomb.id)
            if memory is not None:
                self._remove(txn, memory, tomb)
                continue
            txn.put(tomb.id.encode(), _encoder.encode(tomb), db=self._forgotten)
            before = self._resolve_link(txn, tomb.supersedes)
            if before is not None:
                self._link(txn, before, tomb.id)
                touched.add(before)
            self._follow_past(txn, tomb.id, before)
        added = 0
        for memory in sorted(memories, key=_newest_first):
            key = memory.id.encode()
            if txn.get(key, db=self._memories) is not None:
                continue
            if txn.get(key, db=self._forgotten) is not None:
                continue
            merges = (self._resolve_link(txn, merged) for merged in memory.merges)
            fresh = msgspec.structs.replace(
                memory,
                supersedes=self._resolve_link(txn, memory.supersedes),
                merges=tuple(merged for merged in merges if merged is not None),
                superseded_by=None,
                valid_until=None,
            )
            self._insert(txn, fresh)
            if synced:
                txn.put(key, b"", db=self._synced)
            added += 1
            touched.add(fresh.id)
            touched.update(fresh.merges)
            if fresh.supersedes is not None:
                touched.add(fresh.supersedes)
        for memory_id in sorted(touched):
            self._derive(txn, memory_id)
        return ImportSummary(
            added=added,
            forgotten=forgot,
            unchanged=len(memories) + len(forgotten) - added - forgot,
        )

    def synced_among(self, memories: Iterable[Memory]) -> builtins.list[str]:
        """The ids of `memories` that a sync brought here (`import_records(synced=True)`).

        The others were made on this machine, imported from a file, or (not stored
        here) a project's committed rules. One read: a lookup per memory, or a walk
        of the index when it is the smaller. What the index holds beyond the store's
        memories (an id forgotten since, a key that is no id) is never listed, since
        only the ids asked about are answered.
        """
        wanted = {memory.id.encode(): memory.id for memory in memories}
        if not wanted:
            return []

        def read(txn: lmdb.Transaction[bytes]) -> builtins.list[str]:
            if txn.stat(self._synced)["entries"] < len(wanted):
                keys = txn.cursor(self._synced).iternext(values=False)
                return sorted(wanted[key] for key in keys if key in wanted)
            return sorted(wanted[k] for k in wanted if txn.get(k, db=self._synced) is not None)

        return self._read(read)

    def _anything_new(
        self,
        txn: lmdb.Transaction[bytes],
        memories: Sequence[Memory],
        forgotten: Sequence[Forgotten],
    ) -> bool:
        if any(txn.get(tomb.id.encode(), db=self._forgotten) is None for tomb in forgotten):
            return True
        return any(
            txn.get(memory.id.encode(), db=self._memories) is None
            and txn.get(memory.id.encode(), db=self._forgotten) is None
            for memory in memories
        )


def check_imported(memory: Memory) -> Memory:
    """A memory read from a file, validated as `store` validates what it stores.

    Its derived fields (`superseded_by`, `valid_until`) are dropped: the store sets them.

    Raises:
        InvalidInputError: naming the field that is wrong.
    """
    _check_id(memory.id, "id")
    for link in (memory.supersedes, *memory.merges):
        if link is not None:
            _check_id(link, "supersedes")
    return Memory(
        id=memory.id,
        content=_check_content(memory.content),
        memory_type=_check_memory_type(memory.memory_type),
        tags=_check_tags(memory.tags),
        agent=_check_agent(memory.agent),
        project=_check_project(memory.project),
        created_at=_check_created_at(memory.created_at),
        supersedes=memory.supersedes,
        merges=tuple(memory.merges),
        checks=check_checks_shape(list(memory.checks)),
    )


def check_forgotten(tomb: Forgotten) -> Forgotten:
    """A forget read from a file, validated.

    Raises:
        InvalidInputError: naming the field that is wrong.
    """
    _check_id(tomb.id, "id")
    if tomb.supersedes is not None:
        _check_id(tomb.supersedes, "supersedes")
    _check_created_at(tomb.created_at)
    _check_created_at(tomb.forgotten_at)
    return tomb
