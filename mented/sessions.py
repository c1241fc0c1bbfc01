"""What each agent session was handed: the memory behind "before the action, once".

Per (agent, session id) the daemon remembers the rule versions whose text went
to the model in that session (or that a stop told it about). A later command
whose rules were all handed over gets a one-line pointer instead of the text,
and is never stopped again; a rule added or superseded since is new, and goes
alone. When the agent compacts or clears its context, the session is forgotten:
what it was handed is no longer in front of the model.

The memory outlives the daemon: a restart must never stop the same rules twice
in a session. It lives in a small LMDB environment of its own in the data
directory (`sessions/`), opened without fsync: a write costs tens of
microseconds on the hook path, survives a crash of the daemon (the page cache
holds it), and is lost only with the machine, when the agent's session is gone
too. It is kept apart from the store of memories, which syncs every write and
holds nothing that expires.

Disposable: it holds nothing the user made. A file that LMDB refuses, or that is
shorter than its header says (reading past its end would kill the daemon with
SIGBUS), is moved aside to `data.mdb.damaged` and the memory starts empty; the
worst that costs is one more stop per session.

Bounded and expiring: an entry expires `ttl_s` after the last change to it (or
the last hook that found it nearer its end than its start), and past
`max_sessions` entries the ones nearest to expiry go first. The key is a
16-byte digest of (agent, session id): a session id is whatever the event
carried, up to a megabyte.

Which entry is nearest to expiry comes from an expiry index kept in memory (each
entry's expiry by digest, and a heap of them), read from the file once at open:
a new session past the bound drops one entry at the cost of a heap pop, the same
at 10 sessions or 100,000 started. (It once decoded and sorted every stored
session for each new one, on the event loop: 35 ms a hook, up to 351.)
"""

from __future__ import annotations

import hashlib
import heapq
import time
from dataclasses import dataclass, field
from pathlib import Path

import lmdb
import msgspec

from mented.log import log

MAX_SESSIONS = 4096
MAX_RULES_PER_SESSION = 2048  # rule versions remembered per session; the oldest go first
_FULL_MAP_ATTEMPTS = 3  # writes tried on a full map, each after making room
_MAP_SIZE = 64 << 20  # 4096 sessions x 2048 ids x 27 bytes would be 226 MiB: the bound
# above is far past real use; a full map drops the oldest sessions (see _make_room)


class _Session(msgspec.Struct, array_like=True):
    expires: float  # wall-clock seconds: the memory outlives the daemon
    rule_ids: list[str]


class _Expiry(msgspec.Struct, array_like=True):
    expires: float  # a `_Session` read for its expiry alone (the rest is skipped)


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Session)
_expiry_decoder = msgspec.msgpack.Decoder(_Expiry)


@dataclass(frozen=True, slots=True)
class SessionKey:
    """One agent session. `digest` is what is stored (worked out once: a hook uses it
    several times)."""

    agent: str
    session: str
    digest: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fields = msgspec.json.encode((self.agent, self.session))
        object.__setattr__(self, "digest", hashlib.blake2b(fields, digest_size=16).digest())


class _CutShortError(Exception):
    """The data file is shorter than the pages its header says are in use."""


def _open_checked(directory: Path) -> lmdb.Environment:
    """The environment in `directory`, checked to hold every page its header names."""
    env = lmdb.open(
        str(directory),
        map_size=_MAP_SIZE,
        max_dbs=0,
        sync=False,
        metasync=False,
        lock=True,
        readahead=False,
    )
    needed = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
    size = (directory / "data.mdb").stat().st_size
    if size < needed:
        env.close()
        raise _CutShortError(f"{size} bytes where its header says {needed}")
    return env


class SessionMemoryError(Exception):
    """The session memory cannot be read or written: deliver without stopping."""


class SessionMemory:
    """The rule versions handed over per session, bounded, expiring, kept across restarts."""

    def __init__(self, directory: Path, *, ttl_s: float, max_sessions: int = MAX_SESSIONS) -> None:
        """Open (or create) the memory in `directory`.

        Raises:
            SessionMemoryError: the directory or its LMDB files cannot be used.
        """
        self.ttl_s = ttl_s
        self._max_sessions = max_sessions
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                self._env = _open_checked(directory)
            except (lmdb.InvalidError, lmdb.CorruptedError, _CutShortError) as exc:
                damaged = directory / "data.mdb"
                damaged.replace(damaged.with_name("data.mdb.damaged"))
                log.warning("sessions_damaged", file=str(damaged), error=str(exc))
                self._env = _open_checked(directory)
            self._expires: dict[bytes, float] = {}  # digest -> expiry: the expiry index
            self._by_expiry: list[tuple[float, bytes]] = []  # a heap; stale pairs skipped
            with self._env.begin() as txn:
                self._index_expiries(txn)
        except (OSError, lmdb.Error, _CutShortError) as exc:
            raise SessionMemoryError(
                f"cannot open the session memory in {directory}: {exc}"
            ) from exc

    def close(self) -> None:
        self._env.close()

    def handed(self, key: SessionKey) -> set[str]:
        """The rule ids handed over in this session (empty when it is new or expired).

        Raises:
            SessionMemoryError: the memory cannot be read.
        """
        entry = self._get(key.digest)
        if entry is None or entry.expires <= time.time():
            return set()
        return set(entry.rule_ids)

    def add(self, key: SessionKey, rule_ids: list[str]) -> None:
        """Remember that `rule_ids` went to the model in this session; refresh its expiry.

        Raises:
            SessionMemoryError: the memory cannot be written (the caller must not
                stop the command then: nothing would keep it from stopping it again).
        """
        now = time.time()
        digest = key.digest
        entry = self._get(digest)
        known = [] if entry is None or entry.expires <= now else entry.rule_ids
        merged = list(dict.fromkeys([*known, *rule_ids]))[-MAX_RULES_PER_SESSION:]
        self._put(digest, _Session(expires=now + self.ttl_s, rule_ids=merged), now)

    def touch(self, key: SessionKey) -> None:
        """Keep an active session from expiring; writes only once half its time is gone."""
        now = time.time()
        digest = key.digest
        entry = self._get(digest)
        if entry is None or entry.expires <= now or entry.expires - now > self.ttl_s / 2:
            return
        self._put(digest, _Session(expires=now + self.ttl_s, rule_ids=entry.rule_ids), now)

    def forget(self, key: SessionKey) -> bool:
        """Forget the session (its context was compacted or cleared). Whether it was known.

        Raises:
            SessionMemoryError: the memory cannot be written.
        """
        try:
            with self._env.begin(write=True) as txn:
                forgotten = bool(txn.delete(key.digest))
        except lmdb.Error as exc:
            raise SessionMemoryError(f"cannot write the session memory: {exc}") from exc
        self._expires.pop(key.digest, None)  # its heap pair is stale from now on
        return forgotten

    def withdraw(self, key: SessionKey, rule_ids: list[str]) -> None:
        """Take back `rule_ids`: the answer handing them over reached nobody (too late).

        Raises:
            SessionMemoryError: the memory cannot be written.
        """
        now = time.time()
        entry = self._get(key.digest)
        if entry is None or entry.expires <= now:
            return
        gone = set(rule_ids)
        kept = [rule_id for rule_id in entry.rule_ids if rule_id not in gone]
        if len(kept) < len(entry.rule_ids):
            self._put(key.digest, _Session(expires=entry.expires, rule_ids=kept), now)

    def __len__(self) -> int:
        return int(self._env.stat()["entries"])

    # ---------------------------------------------------------------- internals

    def _get(self, digest: bytes) -> _Session | None:
        try:
            with self._env.begin() as txn:
                raw = txn.get(digest)
        except lmdb.Error as exc:
            raise SessionMemoryError(f"cannot read the session memory: {exc}") from exc
        if raw is None:
            return None
        try:
            return _decoder.decode(raw)
        except msgspec.DecodeError:
            return None  # an unreadable entry is a session we know nothing of

    def _put(self, digest: bytes, entry: _Session, now: float) -> None:
        value = _encoder.encode(entry)
        for attempt in range(_FULL_MAP_ATTEMPTS):
            try:
                with self._env.begin(write=True) as txn:
                    txn.put(digest, value)
                    over = txn.stat(self._env.open_db())["entries"] - self._max_sessions
                    dropped = self._drop_nearest_expiry(txn, over, keep=digest) if over > 0 else []
            except lmdb.MapFullError:
                if attempt == _FULL_MAP_ATTEMPTS - 1:
                    raise SessionMemoryError("the session memory is full") from None
                with self._env.begin(write=True) as txn:
                    # Half of what is stored (the bound may be far above it: a map
                    # filled by fewer, larger sessions). LMDB reuses the pages a
                    # write frees only two writes later: so a second halving, if the
                    # first was not yet enough.
                    stored = txn.stat(self._env.open_db())["entries"]
                    target = min(self._max_sessions, stored) // 2
                    self._make_room(txn, now, keep=digest, target=target)
            except lmdb.Error as exc:
                # What the aborted transaction would have dropped is still stored.
                raise SessionMemoryError(f"cannot write the session memory: {exc}") from exc
            else:
                for gone in dropped:
                    self._expires.pop(gone, None)
                self._note_expiry(digest, entry.expires)
                return

    def _note_expiry(self, digest: bytes, expires: float) -> None:
        self._expires[digest] = expires
        heapq.heappush(self._by_expiry, (expires, digest))
        if len(self._by_expiry) > 4 * len(self._expires) + 64:
            # Mostly stale pairs (touched, forgotten, dropped): rebuilt from the index,
            # in memory, once per that many writes.
            self._by_expiry = [(when, key) for key, when in self._expires.items()]
            heapq.heapify(self._by_expiry)

    def _drop_nearest_expiry(
        self, txn: lmdb.Transaction, count: int, *, keep: bytes
    ) -> list[bytes]:
        """Delete the `count` entries nearest to expiry (never `keep`); their digests.

        The heap's pairs that no longer match the index (the entry was written again,
        or is gone) are skipped; each drop costs a heap pop or a few.
        """
        dropped: list[bytes] = []
        kept: list[tuple[float, bytes]] = []
        while len(dropped) < count and self._by_expiry:
            expires, digest = heapq.heappop(self._by_expiry)
            if self._expires.get(digest) != expires or digest in dropped:
                continue  # stale
            if digest == keep:
                kept.append((expires, digest))
                continue
            txn.delete(digest)
            dropped.append(digest)
        for pair in kept:
            heapq.heappush(self._by_expiry, pair)
        # Popped even if the transaction fails: those entries are then found again by
        # the next open, and meanwhile are only left out of the bound's count.
        if dropped:
            log.debug("sessions_dropped", dropped=len(dropped))
        return dropped

    def _index_expiries(self, txn: lmdb.Transaction) -> None:
        """Build the expiry index from what the file holds (at open, and after a purge)."""
        expires: dict[bytes, float] = {}
        for digest, raw in txn.cursor():
            try:
                expires[bytes(digest)] = _expiry_decoder.decode(raw).expires
            except msgspec.DecodeError:
                expires[bytes(digest)] = 0.0  # unreadable: the first to go
        self._expires = expires
        self._by_expiry = [(when, key) for key, when in expires.items()]
        heapq.heapify(self._by_expiry)

    def _make_room(
        self, txn: lmdb.Transaction, now: float, *, keep: bytes, target: int | None = None
    ) -> None:
        """Drop expired sessions, then those nearest to expiry, down to `target` entries."""
        target = self._max_sessions if target is None else target
        by_expiry: list[tuple[float, bytes]] = []
        for digest, raw in txn.cursor():
            try:
                expires = _expiry_decoder.decode(raw).expires
            except msgspec.DecodeError:
                expires = 0.0
            if digest != keep:
                by_expiry.append((expires, bytes(digest)))
        by_expiry.sort()
        entries = len(by_expiry) + 1
        dropped = 0
        for expires, digest in by_expiry:
            if entries <= target and expires > now:
                break
            txn.delete(digest)
            entries -= 1
            dropped += 1
        if dropped:
            log.info("sessions_dropped", dropped=dropped, kept=entries)
        self._index_expiries(txn)
