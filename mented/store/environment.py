"""The LMDB environment: opened with its file checked, transactions, failures, map growth."""

from __future__ import annotations

import errno
import mmap
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import lmdb
import msgspec

from mented.store.errors import (
    StoreDamagedError,
    StoreError,
    StoreFailedError,
    StoreFullError,
    StoreOpenError,
)

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_MAP_SIZE = 1 << 40  # 1 TiB: far past any memory store; stops a runaway loop
_LMDB_MAGIC = 0xBEEFC0DE  # MDB_MAGIC, in the header of LMDB's meta pages (native order)
_MAGIC_WINDOW = 64
# Errors that mean "no room": the write is refused, the environment is intact.
_NO_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
# LMDB reports a short write (the disk filled up mid-write) as EIO: with less free
# space than this left afterwards, an EIO is taken for a full disk.
_NEARLY_FULL_BYTES = 1 << 20

T = TypeVar("T")


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


class _Environment:
    """The LMDB environment of one data directory, and the transactions every layer runs in."""

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
            self._open_databases(data_file)  # checks the schema first
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

    def _open_databases(self, data_file: Path) -> None:
        """Refuse a store that is not ours, then open (and migrate) its databases: the
        layer above does (`mented.store.migrations`)."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the environment. Waits for a write in progress; idempotent."""
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            self._gate.exclusive(self._env.close)

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
                self._raise_failed(exc)
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
                    self._raise_failed(exc)
                finally:
                    self._gate.leave()
                self._gate.exclusive(self._grow_map if grow else lambda: self._set_mapsize(0))

    def _raise_failed(self, exc: lmdb.Error | msgspec.DecodeError) -> NoReturn:
        """Raise the error `_failed` says `exc` is (`exc` itself when none), from `exc`."""
        failure = self._failed(exc)
        if failure is None:
            raise exc
        raise failure from exc

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
