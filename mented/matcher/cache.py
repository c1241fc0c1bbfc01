"""The hook's caches: a command's actions and its matched words, by its digest, bounded."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from mented.git_aliases import NO_ALIASES, Aliases
from mented.matcher.limits import MAX_COMMAND_CHARS, MAX_HEREDOC_SCAN_CHARS

if TYPE_CHECKING:
    from mented.matcher.clock import _Clock
    from mented.matcher.results import Explanation, MatchedCommand

# Over-long commands remembered with their length, for the hook's log (`too_long`).
_TOO_LONG_REMEMBERED = 64
# Bytes the hook's cache (command digest -> actions) may hold, each entry weighed by
# `_CACHE_ENTRY_BYTES` and 8 bytes an action (the names are the table's own strings).
CACHE_BYTES = 1 << 20
# Characters of words `matched_commands` keeps (for the checks of rules, mented.prechecks).
MATCHED_CACHE_CHARS = 1 << 20
_CACHE_ENTRY_BYTES = 240  # measured: the dict slot and list node, a 16-byte digest, a tuple


def _cache_key(command: str, aliases: Aliases = NO_ALIASES) -> bytes:
    """The command's digest; with git aliases in force, theirs too (`git ci` differs by them)."""
    digest = hashlib.blake2b(command.encode("utf-8", "surrogatepass"), digest_size=16)
    if aliases.digest:
        digest.update(aliases.digest)
    return digest.digest()


class _MatchCaches:
    """The caches of a `Matcher`, under one lock: what `actions_in` and `matched_commands`
    answered, and the lengths of over-long commands."""

    def __init__(self, cache_bytes: int = CACHE_BYTES) -> None:
        # Only what the hook needs, by a digest of the command: a cached 128 KiB
        # command costs as little as a short one (`explain` is not cached).
        self._cache: OrderedDict[bytes, tuple[str, ...]] = OrderedDict()
        self._cache_limit = max(0, cache_bytes)
        self._cache_used = 0
        # The daemon matches slow commands in a worker thread, the rest on its own.
        self._cache_lock = threading.Lock()
        self._too_long: OrderedDict[bytes, int] = OrderedDict()  # under the cache's lock
        # `matched_commands`' answers (under the cache's lock). With `keep_matched` set
        # (a rule with checks exists), every match fills it as it goes: the hook's one
        # parse of a command also serves its checks.
        self.keep_matched = False
        self._matched: OrderedDict[bytes, tuple[tuple[MatchedCommand, ...], int]] = OrderedDict()
        self._matched_used = 0

    @property
    def cache_bytes(self) -> int:
        """What the cache holds now, weighed as it counts against `CACHE_BYTES`."""
        return self._cache_used

    def too_long(self, command: str, *, aliases: Aliases = NO_ALIASES) -> int | None:
        """The length of `command`, not analyzed for being over `MAX_COMMAND_CHARS` even
        without its heredoc bodies (that length), as the last `actions_in` found; else None.

        For the hook's log: it says why such a command fired nothing.
        """
        if not isinstance(command, str) or len(command) <= MAX_COMMAND_CHARS:
            return None
        if len(command) > MAX_HEREDOC_SCAN_CHARS:
            return len(command)
        with self._cache_lock:
            return self._too_long.get(_cache_key(command, aliases))

    def _cached(self, key: bytes) -> tuple[str, ...] | None:
        """The cached actions for a command's key, marked as just used; None when not cached."""
        with self._cache_lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
            return cached

    def _kept_matched(self, key: bytes) -> tuple[MatchedCommand, ...] | None:
        """What `matched_commands` kept for a command's key, marked as just used; else None."""
        with self._cache_lock:
            kept = self._matched.get(key)
            if kept is not None:
                self._matched.move_to_end(key)
                return kept[0]
            return None

    def _keep_matched(self, key: bytes, seen: list[MatchedCommand], clock: _Clock | None) -> None:
        """Keep what `matched_commands` answers for `key`, unless cut short."""
        if clock is not None and (clock.late or clock.out_of_time or clock.bashlex_cut):
            return
        weight = _CACHE_ENTRY_BYTES + sum(
            len(word or "") + 8 for found in seen for word in (*found.args, found.stdin)
        )
        if weight > MATCHED_CACHE_CHARS:
            return
        with self._cache_lock:
            if key in self._matched:
                return
            self._matched[key] = (tuple(seen), weight)
            self._matched_used += weight
            while self._matched_used > MATCHED_CACHE_CHARS:
                _, (_, dropped) = self._matched.popitem(last=False)
                self._matched_used -= dropped

    def _remember(self, key: bytes, explanation: Explanation) -> None:
        actions = explanation.actions
        weight = _CACHE_ENTRY_BYTES + 8 * len(actions)
        if explanation.too_long is not None:
            with self._cache_lock:
                self._too_long[key] = explanation.too_long
                self._too_long.move_to_end(key)
                while len(self._too_long) > _TOO_LONG_REMEMBERED:
                    self._too_long.popitem(last=False)
        if weight > self._cache_limit:
            return
        with self._cache_lock:
            if key in self._cache:
                return
            self._cache[key] = actions
            self._cache_used += weight
            while self._cache_used > self._cache_limit:
                _, evicted = self._cache.popitem(last=False)
                self._cache_used -= _CACHE_ENTRY_BYTES + 8 * len(evicted)
