"""The LMDB store: memory records, the trigger index, supersession, visibility.

One LMDB environment lives in the data directory, with nine named sub-databases:

- `memories`  id -> record (msgpack of `Memory`). ULIDs sort by time, so a
              backward cursor walk lists memories newest first.
- `triggers`  the trigger index: one key per (live rule, action)::

                  action (UTF-8) | 0x00 | ~created_at µs (8 bytes BE) | ~id (26 bytes)

              -> id. `~` is bitwise inversion, so a *forward* walk over one
              action's prefix meets its rules newest first, ties broken by the
              larger id first. `recall_for_action` is a `set_range` to the
              prefix and a `next()` per rule: its cost depends on the number of
              rules for that action, never on the size of the store. Superseded
              or forgotten rules leave this index in the write that retires
              them, so a lookup never has to skip them.
- `handles`   reversed id -> b"": a short handle (a suffix of the id) becomes a
              prefix here, so resolving one is a `set_range` too.
- `actions`   action -> number of live rules (8 bytes BE), for `stats`.
- `meta`      schema version, the live-rule counter, the change counter and the
              store's id (random, made once: tells the recall index whose it is).
- `pinned`    the pinned rules: ~created_at µs (8 bytes BE) | ~id -> id, one key
              per live pinned rule, newest first, like the trigger index; a
              session start walks it (a handful of rules, capped when added).
- `changes`   the change log of facts for the recall index (mented.recall):
              sequence number (8 bytes BE) -> id of a fact that became live or
              stopped being live, written in the same transaction as the change.
              The index applies it after the commit and records how far it got,
              so after a crash it replays what it missed; applied entries are
              dropped by a later write (`changes_applied`).
- `forgotten` id -> `Forgotten` (msgpack): what is kept of a forgotten memory, so
              that a forget travels (export, sync) and wins over a copy elsewhere.
- `successors` predecessor id (26 bytes) | successor id (26 bytes) -> b"": every
              version (or forgotten version) that supersedes a memory, so that its
              state is derived from the versions that replace it, whatever order
              they arrived in. See "Records that travel" below.

Every write is one transaction, committed with fsync before it returns
(`sync=True`): an acknowledged write survives a crash. When LMDB reports the
map full, the map is doubled and the transaction retried, so writes never fail
with "map full" (until `MAX_MAP_SIZE`).

Failures say what they are, because LMDB trusts its file and its mapping: a
data file shorter than its header says is refused at open (reading past its end
would kill the process with SIGBUS); a full disk is `StoreFullError` (that write
is lost, the store reads on); damaged pages or records are `StoreDamagedError`;
an I/O error or a map that could not grow is `StoreFailedError`, after which
this `Store` refuses everything (`failure` says why) and its owner should exit.

Records that travel: a memory's own fields never change once written; a
memory's `superseded_by` and `valid_until` are derived from its successors
(`_derive`): retired as soon as any version supersedes it, `superseded_by` the
newest present successor (else the newest forgotten one), `valid_until` the
earliest successor's time. So a store that received the same records and
forgets in any order ends in the same state (`import_records`), two machines that
superseded one rule apart keep both successors (a fork, `forks`), and superseding
one tip of a fork settles it (the new version `merges` the other tips).

Threads: lookups may run on the event-loop thread while one write runs in a
worker thread. Each operation uses its own short transaction. Growing the map
invalidates every open transaction, so it waits, behind `_ResizeGate`, until no
transaction of this process is open. See docs/store.md.
"""

from __future__ import annotations

import errno
import mmap
import os
import sys
import threading
import time
from collections.abc import Sequence  # at runtime: msgspec resolves StoreItem's annotations
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import lmdb
import msgspec

from mented.memory import (
    MAX_CONTENT_BYTES,
    MIN_HANDLE_LENGTH,
    TRIGGER_PREFIX,
    Forgotten,
    InvalidInputError,
    Memory,
    MemoryType,
    check_checks_shape,
    new_id,
    normalize_action,
    normalize_tag,
    short_handle,
    trigger_tag,
)

if TYPE_CHECKING:
    import builtins
    from collections.abc import Callable, Iterable, Iterator

SCHEMA_VERSION = 2  # 2: the forgotten and successors databases
MAX_MAP_SIZE = 1 << 40  # 1 TiB: far past any memory store; stops a runaway loop
MAX_TAGS = 64
MAX_TAG_LENGTH = 256
MAX_AGENT_LENGTH = 64
MAX_PROJECT_LENGTH = 4096  # PATH_MAX on Linux

_ID_LENGTH = 26
_CROCKFORD = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
_MICROS_MAX = (1 << 64) - 1
_INVERT = bytes(255 - b for b in range(256))
_AMBIGUOUS_SHOWN = 5
_LMDB_MAGIC = 0xBEEFC0DE  # MDB_MAGIC, in the header of LMDB's meta pages (native order)
_MAGIC_WINDOW = 64
# Errors that mean "no room": the write is refused, the environment is intact.
_NO_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
# LMDB reports a short write (the disk filled up mid-write) as EIO: with less free
# space than this left afterwards, an EIO is taken for a full disk.
_NEARLY_FULL_BYTES = 1 << 20

_DB_MEMORIES = b"memories"
_DB_TRIGGERS = b"triggers"
_DB_HANDLES = b"handles"
_DB_ACTIONS = b"actions"
_DB_META = b"meta"
_DB_FORGOTTEN = b"forgotten"
_DB_SUCCESSORS = b"successors"
_META_SCHEMA = b"schema_version"
_META_LIVE_RULES = b"live_rules"
_DB_PINNED = b"pinned"
_DB_CHANGES = b"changes"
_META_CHANGE_SEQ = b"change_seq"
_META_STORE_ID = b"store_id"
_SEQ_BYTES = 8

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Memory)
_forgotten_decoder = msgspec.msgpack.Decoder(Forgotten)

T = TypeVar("T")


# ------------------------------------------------------------------- errors


class StoreError(Exception):
    """A store operation failed; the message is written for the user."""


class StoreOpenError(StoreError):
    """The data directory cannot be opened as a mented store (files left untouched)."""


class StoreFullError(StoreError):
    """A write found no room (disk full, quota, the map at its limit): it was not made.

    Recoverable: the store is intact, lookups go on, and writes work again once
    there is room.
    """


class StoreDamagedError(StoreError):
    """A page or record of the data file is unreadable; the rest may still be read."""


class StoreFailedError(StoreError):
    """The store can no longer be used by this process: an I/O error, a map that
    could not grow, or a data file cut short while open. Every later call raises
    this too; the process should exit so that its service manager restarts it.
    """


class NotFoundError(StoreError):
    """No memory has that id."""


class ConflictError(StoreError):
    """The operation contradicts the current state, e.g. superseding a superseded rule."""


# -------------------------------------------------------------------- types


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


# --------------------------------------------------------------- visibility


def visible_to(memory: Memory, agent: str | None, cwd: str | None) -> bool:
    """Whether a caller (`agent`, working directory `cwd`) may see `memory`.

    The one visibility rule, used by every lookup: a memory scoped to an agent is
    seen only by that agent; one scoped to a project directory only from that
    directory or inside it (whole path components: /work/app2 is not inside
    /work/app); unscoped memories by everyone. A caller that leaves `agent` or
    `cwd` as None is not filtered on that axis. `cwd` is taken as given and
    through its symlinks (see `_places`): a project directory is stored resolved.
    """
    return _sees_from(memory, agent, _places(cwd))


def _places(cwd: str | None) -> tuple[str, ...] | None:
    """`cwd` normalized, and resolved through its symlinks when that differs.

    Project directories are stored resolved (`mentectl rule add --project` through
    a link stores its target), so a command run through the link sees them; rules
    stored before that, with the link's path, are still seen from the link. Done
    once per lookup: a few `lstat` calls.
    """
    if cwd is None:
        return None
    lexical = os.path.normpath(cwd)
    if len(lexical) > MAX_PROJECT_LENGTH:
        # No directory has such a path (the kernel refuses it), and `realpath` of one
        # costs its length squared: 5 minutes for a megabyte of `/a/a/...`.
        return (lexical,)
    real = os.path.realpath(lexical)
    return (lexical,) if real == lexical else (lexical, real)


def _sees_from(memory: Memory, agent: str | None, places: tuple[str, ...] | None) -> bool:
    """`visible_to` with the working directory already in `_places` form."""
    if places is None:
        return _sees(memory, agent, None)
    return any(_sees(memory, agent, place) for place in places)


def _sees(memory: Memory, agent: str | None, cwd: str | None) -> bool:
    """`visible_to` for one normalized working directory."""
    if agent is not None and memory.agent is not None and memory.agent != agent:
        return False
    if cwd is None or memory.project is None:
        return True
    project = memory.project  # normalized when it was written
    if cwd == project:
        return True
    return cwd.startswith(project if project.endswith(os.sep) else project + os.sep)


# ------------------------------------------------------------ keys & codecs


def _trigger_key(action: str, memory: Memory) -> bytes:
    return action.encode() + b"\0" + _newest_first_key(memory)


def _newest_first_key(memory: Memory) -> bytes:
    """~created_at µs (8 bytes BE) | ~id: keys that put the newest memory first."""
    micros = min(max(int(memory.created_at * 1_000_000), 0), _MICROS_MAX)
    return (_MICROS_MAX - micros).to_bytes(8, "big") + memory.id.encode().translate(_INVERT)


def _handle_key(memory_id: str) -> bytes:
    return memory_id[::-1].encode()


def _decode(raw: bytes) -> Memory:
    # msgspec.DecodeError is turned into StoreDamagedError by `_read`/`_write`.
    return _decoder.decode(raw)


def _newest_first(memory: Memory) -> tuple[float, str]:
    return (memory.created_at, memory.id)


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


def _looks_like_lmdb(data_file: Path) -> bool | None:
    """False when `data_file` exists, is not empty and has no LMDB meta page.

    Checked before LMDB opens the directory, so that a foreign file is refused
    without even a lock file appearing next to it. LMDB's own check stays the
    final word. True when the LMDB magic number is there; None when there is
    nothing to tell by (no file, an empty one, an unreadable one).
    """
    try:
        with data_file.open("rb") as file:
            head = file.read(_MAGIC_WINDOW)
    except OSError:
        return None  # absent or unreadable: let LMDB create it or report it
    if not head:
        return None  # an empty file: LMDB initializes it
    magic = _LMDB_MAGIC.to_bytes(4, sys.byteorder)
    return any(head[offset : offset + 4] == magic for offset in range(0, len(head) - 3, 4))


def _disk_nearly_full(directory: Path) -> bool:
    try:
        info = os.statvfs(directory)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < _NEARLY_FULL_BYTES


# --------------------------------------------------------------- validation


def _check_changes(  # noqa: PLR0913, PLR0917 - what a new version may change
    old: Memory,
    content: str,
    tags: tuple[str, ...] | None,
    agent: str | None,
    project: str | None,
    checks: tuple[str, ...] | None = None,
) -> None:
    """Refuse a new version identical to `old`: it would only lengthen the history.

    Raises:
        InvalidInputError: the same text, tags and scope as `old`.
    """
    if (
        content == old.content
        and tags in (None, old.tags)
        and agent in (None, old.agent)
        and project in (None, old.project)
        and checks in (None, old.checks)
    ):
        raise InvalidInputError(
            f"memory {old.id} already says exactly that; nothing changed "
            "(give a different text, or a new --agent or --project)"
        )


def _check_content(content: str) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidInputError("memory content cannot be empty; give the text of the memory")
    size = len(content.encode())
    if size > MAX_CONTENT_BYTES:
        raise InvalidInputError(
            f"memory content is {size} bytes; the limit is {MAX_CONTENT_BYTES} bytes. "
            "Keep a rule short, or split it into several memories."
        )
    return content


def _check_tags(tags: Iterable[str]) -> tuple[str, ...]:
    if isinstance(tags, str):
        raise InvalidInputError(f"tags must be a list of strings, not the string {tags!r}")
    normalized: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInputError(f"a tag must be a string, not {tag!r}")
        if len(tag) > MAX_TAG_LENGTH:
            raise InvalidInputError(
                f"tag {tag[:40]!r}... is {len(tag)} characters; the limit is {MAX_TAG_LENGTH}"
            )
        name = normalize_tag(tag)
        if not name.isprintable():  # one C call: checks every character
            raise InvalidInputError(f"tag {tag!r} contains control characters")
        normalized[name] = None
    if len(normalized) > MAX_TAGS:
        raise InvalidInputError(f"a memory can have at most {MAX_TAGS} tags, not {len(normalized)}")
    return tuple(normalized)


def _check_memory_type(memory_type: MemoryType | str) -> MemoryType:
    try:
        return MemoryType(memory_type)
    except ValueError:
        kinds = ", ".join(kind.value for kind in MemoryType)
        raise InvalidInputError(
            f"unknown memory type {memory_type!r}; use one of: {kinds}"
        ) from None


def _check_agent(agent: str | None) -> str | None:
    if agent is None:
        return None
    name = agent.strip() if isinstance(agent, str) else ""
    if not name:
        raise InvalidInputError(
            "an agent name cannot be blank; leave it out for a memory every agent sees"
        )
    if len(name) > MAX_AGENT_LENGTH:
        raise InvalidInputError(
            f"agent name is {len(name)} characters long; the limit is {MAX_AGENT_LENGTH}"
        )
    if any(not ch.isprintable() for ch in name):
        raise InvalidInputError(f"agent name {agent!r} contains control characters")
    return name


def _check_project(project: str | None) -> str | None:
    if project is None:
        return None
    if not isinstance(project, str) or not project.strip():
        raise InvalidInputError(
            "a project directory cannot be blank; leave it out for a memory seen everywhere"
        )
    if "\0" in project or len(project) > MAX_PROJECT_LENGTH:
        raise InvalidInputError(f"project directory {project[:80]!r} is not a usable path")
    if not Path(project).is_absolute():
        raise InvalidInputError(
            f"project directory {project!r} must be an absolute path (e.g. /home/me/src/app)"
        )
    return os.path.normpath(project)


def _check_created_at(created_at: float | None) -> float:
    if created_at is None:
        return time.time()
    if not isinstance(created_at, int | float) or not 0 <= created_at < 1 << 40:
        raise InvalidInputError(f"created_at {created_at!r} is not a Unix time in seconds")
    return float(created_at)


def _new_memory(  # noqa: PLR0913 - the fields of a memory
    content: str,
    *,
    memory_type: MemoryType | str,
    tags: Iterable[str],
    agent: str | None,
    project: str | None,
    created_at: float | None = None,
    supersedes: str | None = None,
    checks: Sequence[str] = (),
) -> Memory:
    """A validated, normalized record, not yet stored."""
    content = _check_content(content)
    kind = _check_memory_type(memory_type)
    normalized_tags = _check_tags(tags)
    scope_agent = _check_agent(agent)
    scope_project = _check_project(project)
    now = _check_created_at(created_at)
    return Memory(
        id=new_id(now),
        content=content,
        memory_type=kind,
        tags=normalized_tags,
        agent=scope_agent,
        project=scope_project,
        created_at=now,
        supersedes=supersedes,
        checks=check_checks_shape(list(checks)),
    )


# -------------------------------------------------------------- concurrency


class _ResizeGate:
    """Lets transactions run side by side but keeps them out while the map grows.

    LMDB's `mdb_env_set_mapsize` may only run when this process has no open
    transaction (py-lmdb invalidates any that are), so growing the map waits for
    every transaction to end and holds new ones back until it is done. Lookups
    never wait otherwise.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._active = 0
        self._resizing = False

    def enter(self) -> None:
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._active += 1

    def leave(self) -> None:
        with self._cond:
            self._active -= 1
            if self._resizing and not self._active:
                self._cond.notify_all()

    def exclusive(self, action: Callable[[], None]) -> None:
        """Run `action` while no transaction of this process is open."""
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._resizing = True
            try:
                while self._active:
                    self._cond.wait()
                action()
            finally:
                self._resizing = False
                self._cond.notify_all()


# -------------------------------------------------------------------- store


class Store:
    """The memory store in one data directory.

    Safe to share between threads: lookups from any thread, writes serialized.
    """

    def __init__(self, data_dir: Path, *, map_size: int = 64 << 20, sync: bool = True) -> None:
        """Open (or create) the store in `data_dir`.

        Raises:
            StoreOpenError: not a directory, not an LMDB environment, not a mented
                store, a newer schema, or LMDB refused; nothing is modified.
        """
        self.path = Path(data_dir)
        self._gate = _ResizeGate()
        self._write_lock = threading.Lock()
        self._closed = False
        self._failure: str | None = None
        self._changes_applied = 0  # change-log entries up to this one may be dropped
        page = mmap.PAGESIZE
        map_size = max(map_size, 16 * page)
        map_size = -(-map_size // page) * page
        self.data_file = data_file = self.path / "data.mdb"
        looks_like_lmdb = _looks_like_lmdb(data_file)
        not_lmdb = StoreOpenError(
            f"{data_file} is not an LMDB database file. mented left it untouched: "
            "move it away, or point --data-dir / MENTED_DATA_DIR at another directory"
        )
        if looks_like_lmdb is False:
            raise not_lmdb
        if looks_like_lmdb:
            # LMDB's "invalid" on a file with its magic number: a header cut short.
            not_lmdb = StoreOpenError(self._damaged_message("is damaged: its header is unreadable"))
        try:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError:
            raise StoreOpenError(
                f"{self.path} is not a directory; point --data-dir or MENTED_DATA_DIR "
                "at a directory for mented's data"
            ) from None
        except OSError as exc:
            raise StoreOpenError(
                f"cannot create the data directory {self.path}: {exc.strerror}"
            ) from exc
        try:
            self._env = lmdb.Environment(
                str(self.path),
                map_size=map_size,
                subdir=True,
                create=False,
                mode=0o700,  # data and lock files get 0600
                metasync=sync,
                sync=sync,
                lock=True,
                max_dbs=12,
                max_readers=126,
                # One cached read transaction saves an allocation per lookup.
                max_spare_txns=1,
            )
        except lmdb.InvalidError:
            raise not_lmdb from None
        except lmdb.VersionMismatchError as exc:
            raise StoreOpenError(
                f"{data_file} was written by an incompatible LMDB version ({exc}); "
                "mented left it untouched"
            ) from exc
        except lmdb.Error as exc:
            raise StoreOpenError(f"cannot open the store in {self.path}: {exc}") from exc
        except OSError as exc:
            raise StoreOpenError(f"cannot open the store in {self.path}: {exc}") from exc
        try:
            # Before any page is read: past the end of the file, a read is SIGBUS.
            self._check_file_size(on_open=True)
            # Slots of readers in processes that were killed would pin old pages.
            self._env.reader_check()
            self._check_schema(data_file)
            self._open_databases()
        except (lmdb.CorruptedError, lmdb.PageNotFoundError, msgspec.DecodeError) as exc:
            self._env.close()
            raise StoreOpenError(self._damaged_message(f"is damaged: {exc}")) from exc
        except lmdb.Error as exc:
            self._env.close()
            raise StoreOpenError(f"cannot open the store in {self.path}: {exc}") from exc
        except BaseException:
            self._env.close()
            raise

    @property
    def failure(self) -> str | None:
        """Why this store can no longer be used (see `StoreFailedError`); None while it can."""
        return self._failure

    def _damaged_message(self, detail: str, *, running: bool = False) -> str:
        return (
            f"the store file {self.data_file} {detail}. mented left it untouched. "
            + ("Stop mented, then restore " if running else "Restore ")
            + f"the data directory {self.path} from a backup, or move the file aside "
            f"(mv {self.data_file} {self.data_file}.damaged) to start with an empty store; "
            "the moved file can still be read with LMDB's tools (mdb_dump) to save what is left"
        )

    def _check_file_size(self, *, on_open: bool = False) -> None:
        """Refuse a data file shorter than the pages LMDB's header says are in use.

        LMDB reads pages through a memory map: touching a page past the end of the
        file kills the process with SIGBUS, with no message. A file cut short (a
        failed copy, a full disk during a restore, a partial sync) is caught here
        instead, before any page beyond the two header pages is read.

        Raises:
            StoreOpenError: at open (`on_open`), naming the file and what to do.
            StoreFailedError: later: the file was cut short under the open store.
        """
        info = self._env.info()  # from the header pages, which LMDB has checked
        needed = (info["last_pgno"] + 1) * self._env.stat()["psize"]
        try:
            size = self.data_file.stat().st_size
        except OSError as exc:
            size, detail = 0, f"it cannot be examined ({exc.strerror or exc})"
        else:
            detail = f"it has {size} bytes but its header says it holds {needed}"
            if size >= needed:
                return
        if on_open:
            raise StoreOpenError(self._damaged_message(f"is cut short: {detail}"))
        self._failure = (
            f"the store file {self.data_file} changed under mented: {detail}. mented stops "
            "rather than read past its end; when it starts again it checks the file"
        )
        raise StoreFailedError(self._failure)

    def _check_schema(self, data_file: Path) -> None:
        """Refuse an environment that is not ours or is newer, before writing anything."""
        txn = self._env.begin()
        try:
            main = txn.cursor()
            if not main.first():
                return  # a new environment
            if not main.set_key(_DB_META):
                raise StoreOpenError(
                    f"{data_file} is an LMDB environment but not a mented store. mented "
                    "left it untouched: point --data-dir / MENTED_DATA_DIR elsewhere"
                )
            meta = self._env.open_db(_DB_META, txn=txn, create=False)
            raw = txn.get(_META_SCHEMA, db=meta)
        finally:
            txn.abort()
        try:
            version = int(raw or b"")
        except ValueError:
            raise StoreOpenError(
                f"{data_file} has no readable schema version ({raw!r}); "
                "the store may be damaged. mented left it untouched"
            ) from None
        if version > SCHEMA_VERSION:
            raise StoreOpenError(
                f"the store in {self.path} was written by a newer mented (schema {version}, "
                f"this one reads up to {SCHEMA_VERSION}); upgrade mented"
            )

    def _open_databases(self) -> None:
        with self._env.begin(write=True) as txn:
            self._memories = self._env.open_db(_DB_MEMORIES, txn=txn)
            self._triggers = self._env.open_db(_DB_TRIGGERS, txn=txn)
            self._handles = self._env.open_db(_DB_HANDLES, txn=txn)
            self._actions = self._env.open_db(_DB_ACTIONS, txn=txn)
            self._meta = self._env.open_db(_DB_META, txn=txn)
            self._forgotten = self._env.open_db(_DB_FORGOTTEN, txn=txn)
            self._successors = self._env.open_db(_DB_SUCCESSORS, txn=txn)
            self._open_lookup_databases(txn)
            raw = txn.get(_META_SCHEMA, db=self._meta)
            # Older schemas are migrated here, in this same transaction.
            if raw is not None and int(raw) < 2:
                self._index_successors(txn)
            if raw is None or int(raw) < SCHEMA_VERSION:
                txn.put(_META_SCHEMA, str(SCHEMA_VERSION).encode(), db=self._meta)

    def _index_successors(self, txn: lmdb.Transaction[bytes]) -> None:
        """Schema 1 -> 2: the successors index, from every memory's `supersedes`."""
        for raw in txn.cursor(self._memories).iternext(keys=False):
            memory = _decode(raw)
            if memory.supersedes is not None:
                self._link(txn, memory.supersedes, memory.id)

    def _open_lookup_databases(self, txn: lmdb.Transaction[bytes]) -> None:
        """The pinned-rule index and the fact change log; a store made before them
        gets its pinned index built here (its facts are indexed by the recall
        index's first rebuild), and every store an id."""
        pinned_existed = txn.get(_DB_PINNED) is not None  # named databases are keys of the main one
        self._pinned = self._env.open_db(_DB_PINNED, txn=txn)
        self._changes = self._env.open_db(_DB_CHANGES, txn=txn)
        if not pinned_existed:
            self._index_all_pinned(txn)
        if txn.get(_META_STORE_ID, db=self._meta) is None:
            txn.put(_META_STORE_ID, os.urandom(16).hex().encode(), db=self._meta)

    def _index_all_pinned(self, txn: lmdb.Transaction[bytes]) -> int:
        count = 0
        for raw in txn.cursor(self._memories).iternext(keys=False):
            memory = _decode(raw)
            if memory.is_live and memory.is_pinned:
                txn.put(_newest_first_key(memory), memory.id.encode(), db=self._pinned)
                count += 1
        return count

    def close(self) -> None:
        """Close the environment. Waits for a write in progress; idempotent."""
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            self._gate.exclusive(self._env.close)

    # ----------------------------------------------------------- transactions

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise StoreFailedError(self._failure)
        if self._closed:
            raise StoreError("the store is closed")

    def _read(self, work: Callable[[lmdb.Transaction[bytes]], T]) -> T:
        """Run `work` in a short read transaction.

        Raises:
            StoreDamagedError, StoreFailedError: see `_failed`.
        """
        while True:
            self._gate.enter()
            try:
                self._check_usable()
                txn = self._env.begin()
                try:
                    return work(txn)
                finally:
                    txn.abort()
            except lmdb.MapResizedError:
                pass  # another process grew the map: adopt its size below, then retry
            except (lmdb.Error, msgspec.DecodeError) as exc:
                if (failure := self._failed(exc)) is None:
                    raise
                raise failure from exc
            finally:
                self._gate.leave()
            self._gate.exclusive(lambda: self._set_mapsize(0))

    def _write(self, work: Callable[[lmdb.Transaction[bytes]], T]) -> T:
        """Run `work` in one write transaction, committed durably.

        On "map full" the transaction is aborted, the map doubled and `work` run
        again from the start, so `work` must only touch the transaction.

        Raises:
            StoreFullError, StoreDamagedError, StoreFailedError: see `_failed`.
        """
        with self._write_lock:
            while True:
                self._gate.enter()
                try:
                    self._check_usable()
                    # One stat per write, beside its fsync: a file cut short under us
                    # is reported here rather than met as SIGBUS.
                    self._check_file_size()
                    with self._env.begin(write=True) as txn:
                        return work(txn)
                except lmdb.MapFullError:
                    grow = True
                except lmdb.MapResizedError:
                    grow = False
                except (lmdb.Error, msgspec.DecodeError) as exc:
                    if (failure := self._failed(exc)) is None:
                        raise
                    raise failure from exc
                finally:
                    self._gate.leave()
                self._gate.exclusive(self._grow_map if grow else lambda: self._set_mapsize(0))

    def _failed(self, exc: lmdb.Error | msgspec.DecodeError) -> StoreError | None:
        """The error to raise for `exc`, met in a transaction.

        - no room (ENOSPC, a quota, or EIO with the disk full): `StoreFullError`;
          LMDB aborted the transaction and the store is as it was.
        - a damaged page or record: `StoreDamagedError`; other records still read.
        - any other error from the system (EIO, ENOMEM, ...) or LMDB's panic:
          `StoreFailedError`, and this store refuses everything from now on: the
          environment can no longer be trusted, and only a new process, which
          checks the file again at open, should carry on.
        - None for anything else (an LMDB error that a correct caller never
          causes): `exc` goes on as it is, a bug reported as one.
        """
        if isinstance(exc, msgspec.DecodeError):
            return StoreDamagedError(
                self._damaged_message(
                    f"is damaged: a stored record is unreadable ({exc})", running=True
                )
            )
        if isinstance(exc, lmdb.CorruptedError | lmdb.PageNotFoundError):
            return StoreDamagedError(self._damaged_message(f"is damaged: {exc}", running=True))
        code = getattr(exc, "code", 0)
        if code in _NO_ROOM_ERRNOS or (code == errno.EIO and _disk_nearly_full(self.path)):
            reason = os.strerror(errno.ENOSPC if code == errno.EIO else code).lower()
            return StoreFullError(
                f"cannot write the store at {self.path}: {reason}. Nothing was written and "
                "nothing is lost; lookups go on. Free some space and try again"
            )
        if isinstance(exc, lmdb.PanicError) or code > 0:
            self._failure = (
                f"cannot use the store at {self.path} any more: {exc}. mented stops so that "
                "it starts again on a fresh view of the file"
            )
            return StoreFailedError(self._failure)
        return None

    def _set_mapsize(self, size: int) -> None:
        """Map `size` bytes (0: adopt the size another process set).

        If mapping fails (the address space is limited, e.g. `ulimit -v`), LMDB has
        already unmapped the old map and py-lmdb has closed the environment: the
        store is dead (`StoreFailedError`).
        """
        try:
            self._env.set_mapsize(size)
        except lmdb.Error as exc:
            wanted = f"{size >> 20} MiB" if size else "its new size"
            self._failure = (
                f"cannot use the store at {self.path} any more: its memory map could not "
                f"grow to {wanted} ({getattr(exc, 'reason', exc)}; is the address space "
                "limited, e.g. by `ulimit -v` or a service manager's memory limit?). "
                "mented stops; the data file is intact"
            )
            raise StoreFailedError(self._failure) from exc

    def _grow_map(self) -> None:
        size = self._env.info()["map_size"] * 2
        if size > MAX_MAP_SIZE:
            raise StoreFullError(
                f"cannot write the store at {self.path}: it would need more than "
                f"{MAX_MAP_SIZE >> 30} GiB; forget memories you no longer need"
            )
        self._set_mapsize(size)

    # ---------------------------------------------------------------- writes

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

    # --------------------------------------------------------------- lookups

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

    # ------------------------------------------------- pinned rules and facts

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

    # --------------------------------------------------------------- helpers

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

    # ---------------------------------------------------- records that travel

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
        self, memories: Sequence[Memory], forgotten: Sequence[Forgotten] = ()
    ) -> ImportSummary:
        """Add the memories and forgets this store does not have yet: all in one write.

        Records are immutable: one already here (or forgotten here) is left as it is,
        so importing twice changes nothing. A forget wins over a copy of the memory
        here. The superseded state of every memory touched is derived again from its
        successors, so the order records arrive in does not matter. Validate the
        records first (`check_imported`, `check_forgotten`).
        """
        if not self._read(lambda txn: self._anything_new(txn, memories, forgotten)):
            return ImportSummary(unchanged=len(memories) + len(forgotten))
        return self.import_batches(lambda: [(memories, forgotten)])

    def import_batches(
        self, batches: Callable[[], Iterable[tuple[Sequence[Memory], Sequence[Forgotten]]]]
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
                summary = self._import_batch(txn, memories, forgotten)
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


# ------------------------------------------------------------ import checks


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


def _check_id(memory_id: str, field: str) -> None:
    if len(memory_id) != _ID_LENGTH or not _CROCKFORD.issuperset(memory_id):
        raise InvalidInputError(
            f"{field} {memory_id!r} is not a memory id (26 characters of Crockford base32)"
        )
