"""Lookups: a rule recalled by action, listings, pinned rules, the facts' change log, stats."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mented.memory import (
    TRIGGER_PREFIX,
    InvalidInputError,
    Memory,
    MemoryType,
    normalize_action,
    normalize_tag,
    trigger_tag,
)
from mented.store.history import _History
from mented.store.layout import (
    _META_CHANGE_SEQ,
    _META_LIVE_RULES,
    _META_STORE_ID,
    _SEQ_BYTES,
    _decode,
    _newest_first,
)
from mented.store.results import FactChanges, StoreStats
from mented.store.validation import _check_memory_type
from mented.store.visibility import _places, _sees_from

if TYPE_CHECKING:
    import builtins
    from collections.abc import Callable, Iterable, Sequence

    import lmdb


class _Lookups(_History):
    """What callers read: each lookup in one short read transaction, filtered by `visible_to`."""

    def recall_for_action(
        self, action: str, *, agent: str | None = None, cwd: str | None = None, k: int = 6
    ) -> builtins.list[Memory]:
        """The live rules for `action` that the caller may see: newest first, at most `k`.

        A key lookup in the trigger index: its cost depends on the rules for this
        action only. Writes nothing. An unknown or unusable action name, or
        `k <= 0`, gives an empty list, never an error.
        """
        if k <= 0 or not isinstance(action, str):
            return []
        try:
            name = normalize_action(action)
        except InvalidInputError:
            return []
        where = _places(cwd)
        return self._read(
            lambda txn: self._rules(txn, name, agent=agent, cwd=where, limit=k, keep=None)
        )

    def _rules(  # noqa: PLR0913 - one lookup, spelled out
        self,
        txn: lmdb.Transaction[bytes],
        action: str,
        *,
        agent: str | None,
        cwd: tuple[str, ...] | None,
        limit: int | None,
        keep: Callable[[Memory], bool] | None,
    ) -> builtins.list[Memory]:
        """Walk one action's range of the trigger index, newest first."""
        prefix = action.encode() + b"\0"
        found: builtins.list[Memory] = []
        cursor = txn.cursor(self._triggers)
        if not cursor.set_range(prefix):
            return found
        while True:
            if not cursor.key().startswith(prefix):
                break
            raw = txn.get(cursor.value(), db=self._memories)
            if raw is not None:
                memory = _decode(raw)
                if _sees_from(memory, agent, cwd) and (keep is None or keep(memory)):
                    found.append(memory)
                    if len(found) == limit:
                        break
            if not cursor.next():
                break
        return found

    def get(self, memory_id: str) -> Memory:
        """One memory by its id or by a unique suffix of at least 6 characters.

        Raises:
            NotFoundError: no memory matches.
            InvalidInputError: the handle is too short or matches several memories.
        """
        return self._read(lambda txn: self._resolve(txn, memory_id))

    def list(  # noqa: PLR0913 - the filters of `mentectl rule list`
        self,
        *,
        action: str | None = None,
        agent: str | None = None,
        cwd: str | None = None,
        tag: str | None = None,
        memory_type: MemoryType | None = None,
        rules_only: bool = False,
        include_superseded: bool = False,
        limit: int | None = None,
        also: Sequence[Memory] = (),
    ) -> builtins.list[Memory]:
        """Memories the caller may see that match every filter given, newest first.

        With `action` (and not `include_superseded`) this is `recall_for_action`
        with `k=limit` (None: all). Without `action`, or with superseded rules
        included, it walks all memories: an administrative listing, not a hot path.
        `also` are memories kept elsewhere (a project's committed rules), listed
        with the stored ones when they pass the same filters.

        Raises:
            InvalidInputError: an unusable `tag` or `memory_type` filter.
        """
        if limit is not None and limit <= 0:
            return []
        wanted_tag = None if tag is None else normalize_tag(tag)
        kind = None if memory_type is None else _check_memory_type(memory_type)
        trigger = None
        if action is not None:
            try:
                trigger = trigger_tag(action)
            except (InvalidInputError, AttributeError):
                return []
        where = _places(cwd)

        def keep(memory: Memory) -> bool:
            return (
                (include_superseded or memory.is_live)
                and (kind is None or memory.memory_type == kind)
                and (wanted_tag is None or wanted_tag in memory.tags)
                and (trigger is None or trigger in memory.tags)
                and (not rules_only or memory.is_rule)
                and _sees_from(memory, agent, where)
            )

        if trigger is not None and not include_superseded:
            name = trigger[len(TRIGGER_PREFIX) :]
            filters = kind is not None or wanted_tag is not None
            found = self._read(
                lambda txn: self._rules(
                    txn, name, agent=agent, cwd=where, limit=limit, keep=keep if filters else None
                )
            )
        else:
            found = self._read(lambda txn: self._scan(txn, keep, limit))
        elsewhere = [memory for memory in also if keep(memory)]
        if not elsewhere:
            return found
        found += elsewhere
        found.sort(key=_newest_first, reverse=True)
        return found if limit is None else found[:limit]

    def _scan(
        self, txn: lmdb.Transaction[bytes], keep: Callable[[Memory], bool], limit: int | None
    ) -> builtins.list[Memory]:
        """All memories matching `keep`, newest first, walking ids backwards.

        Ids order memories by millisecond; within one millisecond `created_at`
        and then the id decide, so after `limit` matches the walk finishes that
        millisecond before sorting and cutting.
        """
        found: builtins.list[Memory] = []
        boundary: bytes | None = None
        cursor = txn.cursor(self._memories)
        more = cursor.last()
        while more:
            key = cursor.key()
            if boundary is not None and not key.startswith(boundary):
                break
            memory = _decode(cursor.value())
            if keep(memory):
                found.append(memory)
                if boundary is None and limit is not None and len(found) >= limit:
                    boundary = key[:10]  # the id's timestamp part
            more = cursor.prev()
        found.sort(key=_newest_first, reverse=True)
        return found if limit is None else found[:limit]

    def pinned_rules(
        self, *, agent: str | None = None, cwd: str | None = None
    ) -> builtins.list[Memory]:
        """The live pinned rules the caller may see, newest first (None: every one).

        A walk over the pinned index, which holds a handful of rules per scope
        (the cap is checked when one is added): no walk over the memories.
        """
        where = _places(cwd)

        def walk(txn: lmdb.Transaction[bytes]) -> builtins.list[Memory]:
            found: builtins.list[Memory] = []
            for memory_id in txn.cursor(self._pinned).iternext(keys=False):
                raw = txn.get(memory_id, db=self._memories)
                if raw is not None and _sees_from(memory := _decode(raw), agent, where):
                    found.append(memory)
            return found

        return self._read(walk)

    def reindex_pinned(self) -> int:
        """Rebuild the pinned index from the memories; returns how many rules it holds."""

        def rebuild(txn: lmdb.Transaction[bytes]) -> int:
            txn.drop(self._pinned, delete=False)
            return self._index_all_pinned(txn)

        return self._write(rebuild)

    @property
    def store_id(self) -> str:
        """This store's id, made once at creation: the recall index keeps it to know whose it is."""

        def read(txn: lmdb.Transaction[bytes]) -> str:
            raw = txn.get(_META_STORE_ID, db=self._meta)
            return raw.decode() if raw else ""

        return self._read(read)

    def fact_changes(self, after: int, *, limit: int = 10_000) -> FactChanges:
        """The facts whose liveness changed after change number `after`, from the log.

        At most `limit` entries at a time: call again from `upto` while `more`.
        """

        def read(txn: lmdb.Transaction[bytes]) -> FactChanges:
            raw = txn.get(_META_CHANGE_SEQ, db=self._meta)
            head = int.from_bytes(raw, "big") if raw else 0
            if after >= head:
                return FactChanges(upto=head, complete=after == head)
            cursor = txn.cursor(self._changes)
            start = (after + 1).to_bytes(_SEQ_BYTES, "big")
            if not cursor.set_range(start) or cursor.key() != start:
                return FactChanges(upto=head, complete=False)
            changed: dict[str, None] = {}
            upto = after
            for key, value in cursor:
                if upto - after >= limit:
                    break
                upto = int.from_bytes(key, "big")
                changed[value.decode()] = None
            return FactChanges(upto=upto, changed=tuple(changed), more=upto < head)

        return self._read(read)

    def changes_applied(self, seq: int) -> None:
        """The recall index has applied the change log up to `seq`: later writes drop it."""
        self._changes_applied = max(self._changes_applied, seq)

    def live_facts(
        self, after: str | None = None, *, limit: int = 10_000
    ) -> tuple[int, builtins.list[Memory], str | None]:
        """Live facts (memories that are no rule) with ids after `after`, at most `limit` walked.

        Returns the change number, read in the same transaction, the facts, and
        the id to go on from (None at the end). A rebuild of the recall index
        that walks the store this way, then applies the change log from the
        first answer's number on, misses nothing: what changed while it walked is
        in the log too, and applying it again changes nothing.
        """

        def read(txn: lmdb.Transaction[bytes]) -> tuple[int, builtins.list[Memory], str | None]:
            raw = txn.get(_META_CHANGE_SEQ, db=self._meta)
            cursor = txn.cursor(self._memories)
            more = cursor.set_range(after.encode() + b"\0") if after else cursor.first()
            facts: builtins.list[Memory] = []
            last: str | None = None
            for _ in range(limit):
                if not more:
                    last = None
                    break
                memory = _decode(cursor.value())
                if memory.is_live and not memory.is_rule:
                    facts.append(memory)
                last = memory.id
                more = cursor.next()
            else:
                last = last if more else None
            return (int.from_bytes(raw, "big") if raw else 0), facts, last

        return self._read(read)

    def load_many(self, memory_ids: Iterable[str]) -> dict[str, Memory]:
        """The memories with these full ids that exist (one read transaction)."""

        def read(txn: lmdb.Transaction[bytes]) -> dict[str, Memory]:
            found = {}
            for memory_id in memory_ids:
                memory = self._load(txn, memory_id)
                if memory is not None:
                    found[memory_id] = memory
            return found

        return self._read(read)

    def stats(self) -> StoreStats:
        """Counts kept by the writes themselves: no walk over the memories."""

        def read(txn: lmdb.Transaction[bytes]) -> StoreStats:
            self._check_file_size()  # `status` is how a watcher would notice
            raw = txn.get(_META_LIVE_RULES, db=self._meta)
            info = self._env.info()
            return StoreStats(
                memories=txn.stat(self._memories)["entries"],
                live_rules=int.from_bytes(raw, "big") if raw else 0,
                actions_with_rules=txn.stat(self._actions)["entries"],
                db_bytes=(info["last_pgno"] + 1) * self._env.stat()["psize"],
                map_bytes=info["map_size"],
            )

        return self._read(read)
