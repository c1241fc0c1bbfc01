"""A cache keyed by what a client sent, held by its digest and bounded in bytes.

The hook's caches are keyed by text from the agent's event (a working directory,
a file's directory), which the shim passes up to a megabyte: kept whole, 250
hooks with a 1 MB `cwd` added 478 MiB. Here a key is its 16-byte BLAKE2b digest,
and what the values weigh (the caller says how much) is bounded together with
the number of entries; the least recently used go first. Not thread-safe: a
caller used from worker threads holds its own lock around it.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")

ENTRY_OVERHEAD = 200  # bytes an entry costs beyond its value's weight (digest, tuple, links)


def digest_of(text: str) -> bytes:
    """The 16-byte key for `text` (any string: lone surrogates from JSON included)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class DigestCache(Generic[V]):
    """At most `max_entries` values weighing at most `max_bytes` together, by digest."""

    def __init__(self, *, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0  # what the entries weigh now, overhead included
        self._entries: OrderedDict[bytes, tuple[V, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, text: str) -> V | None:
        """The value cached for `text`, marked as just used; None when there is none."""
        key = digest_of(text)
        found = self._entries.get(key)
        if found is None:
            return None
        self._entries.move_to_end(key)
        return found[0]

    def put(self, text: str, value: V, weight: int = 0) -> None:
        """Cache `value` for `text`; `weight`: the bytes it holds (e.g. its strings' length).

        A value heavier than the whole bound is not cached.
        """
        key = digest_of(text)
        cost = weight + ENTRY_OVERHEAD
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        if cost > self.max_bytes:
            return
        self._entries[key] = (value, cost)
        self.bytes += cost
        while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0
