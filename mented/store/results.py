"""What the store takes and hands back besides memories: items, counters, summaries, forks."""

from __future__ import annotations

from collections.abc import Sequence  # at runtime: msgspec resolves StoreItem's annotations

import msgspec

from mented.memory import Memory, MemoryType


class StoreStats(msgspec.Struct, kw_only=True, frozen=True):
    """Counters for `mentectl status`, each read in O(1)."""

    memories: int
    live_rules: int  # live memories with at least one trigger tag
    actions_with_rules: int  # distinct actions that have a live rule
    db_bytes: int  # pages in use
    map_bytes: int  # current map size (grows on demand)


class ImportSummary(msgspec.Struct, kw_only=True, frozen=True):
    """What `Store.import_records` changed: records added, memories forgotten, the rest."""

    added: int = 0
    forgotten: int = 0
    unchanged: int = 0


class Fork(msgspec.Struct, kw_only=True, frozen=True):
    """A rule superseded on two machines while apart: more than one current version.

    `root` is the oldest version of the rule; `tips` its current versions, newest first.
    """

    root: str
    tips: tuple[Memory, ...]


class FactChanges(msgspec.Struct, kw_only=True, frozen=True):
    """A stretch of the change log (see `Store.fact_changes`).

    `changed` holds the ids of facts whose liveness changed after the number
    asked for, up to `upto` (each id once); `more` says the log goes on past
    `upto`; `complete` is False when entries after the number asked for were
    already dropped, so that only a rebuild can catch up.
    """

    upto: int
    changed: tuple[str, ...] = ()
    more: bool = False
    complete: bool = True


class StoreItem(msgspec.Struct, kw_only=True, frozen=True):
    """One memory for `Store.store_many`: the arguments of `Store.store`.

    `created_at` (Unix seconds) lets an import keep original times; None means now.
    """

    content: str
    memory_type: MemoryType = MemoryType.SEMANTIC
    tags: Sequence[str] = ()
    agent: str | None = None
    project: str | None = None
    created_at: float | None = None
