"""The activity record: the hook's fires, kept in the data directory for `mentectl log`.

Each fire the hook handler records (mented.hooks, with the fields from the agent's
event already cut there: the command and the working directory to about 1,000
characters, the session id to 128) is appended here as one JSON line to
`activity.jsonl`, once the hook's answer was sent: one unsynced `write` of a few
hundred bytes, nothing the hook waits for (docs/benchmarks.md, "The activity
record on disk").

Bounded three ways (`[activity]` in the config file): when the file holds half of
`max_fires` fires or half of `max_mib`, or its oldest fire is older than
`max_age_days`, it becomes `activity.1.jsonl` (replacing the one before) and a new
file starts; `activity.1.jsonl` is removed once its newest fire is that old. The
two files hold at most `max_fires` fires in `max_mib`, and no fire older than
`max_age_days` is ever shown. The fires a file held when the daemon started are
counted in a thread of their own (`counting`): tens of milliseconds for a full
file, neither on the event loop nor in the start-up.

What goes wrong costs the record, never the hook's answer:

- a daemon killed in a write leaves at most one torn last line: it is skipped when
  read, and the next fire starts on a new line;
- a write that fails (a full disk) is tried again `RETRY_S` later; meanwhile the
  fires are kept in memory (the last `MEMORY_FIRES`), and `mentectl log` says so;
- the files are opened without following a link (`O_NOFOLLOW`, `O_NONBLOCK`) and
  must be the user's own regular files: a symlink, a named pipe or another user's
  file is refused, neither read nor written, and the record is kept in memory only
  (`not_kept` says why and what to do);
- commands are the user's data: the files are made 0600 (a wider mode is narrowed).

Read (`query`, `log_reply`) in a worker thread: both files, backwards in blocks from
the newest fire, filtered by `FireFilter` as the `log` request asks
(mented.protocol.LogRequest); a block without a filter's words is skipped undecoded.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented.config import ActivitySettings
from mented.events import is_within
from mented.log import log
from mented.protocol import ErrorCode, ErrorReply, FireRecord, LogReply, LogRequest
from mented.untrusted import describe_kind, shown

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

FILE_NAME = "activity.jsonl"
OLD_FILE_NAME = "activity.1.jsonl"
MEMORY_FIRES = 500  # kept in memory too: the record when the files cannot be used
# A fire takes a few KiB at most (its fields are cut); a longer line is none of ours.
MAX_LINE_BYTES = 64 * 1024
# Fires in one answer, in bytes: well within the protocol's 4 MiB frame.
MAX_REPLY_BYTES = 2 * 1024 * 1024
RETRY_S = 60.0  # after a failed write (no room), the file is tried again this much later
_MIB = 1024 * 1024
_DAY_S = 86_400.0
_CHUNK = 1024 * 1024  # read at once when counting the lines of a file
_BLOCK = 64 * 1024  # read at once when reading a file backwards
# Fires are appended in time order, unless the clock was set back: a read for the fires
# since some time goes this much further back before it stops.
CLOCK_SLACK_S = 3600.0
# O_NONBLOCK: a named pipe put there is refused (ENXIO), never waited on.
_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
_FIX = "remove it (mented makes a new one at its next start)"


class _Stamp(msgspec.Struct):
    time: float


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(FireRecord)
_stamp_decoder = msgspec.json.Decoder(_Stamp)
_write = os.write  # the tests make it fail as a full disk does


@dataclass(frozen=True, kw_only=True)
class FireFilter:
    """Which fires a `log` request asks for (None: any)."""

    session: str | None = None  # a session id, or its first characters
    agent: str | None = None
    project: str | None = None  # an absolute directory: fires run in it or under it
    action: str | None = None
    since: float | None = None  # Unix seconds
    include_tests: bool = False  # `mentectl doctor`'s and `setup`'s fires too

    def matches(self, fire: FireRecord) -> bool:
        """Whether `fire` is one of those asked for."""
        if fire.test and not self.include_tests:
            return False
        if self.since is not None and fire.time < self.since:
            return False
        if self.agent is not None and fire.agent != self.agent:
            return False
        if self.session is not None and not (fire.session or "").startswith(self.session):
            return False
        if self.action is not None and self.action not in fire.actions:
            return False
        return self.project is None or (
            fire.cwd is not None and is_within(os.path.normpath(fire.cwd), self.project)
        )

    def needles(self) -> list[bytes]:
        """Bytes every line of a matching fire holds: most lines are skipped undecoded.

        msgspec escapes a string character by character, so the encoding of a
        prefix (without its closing quote) is a prefix of the encoding of the whole.
        """
        found = []
        if self.agent is not None:
            found.append(b'"agent":' + _encoder.encode(self.agent))
        if self.session is not None:
            found.append(b'"session":' + _encoder.encode(self.session)[:-1])
        if self.action is not None:
            found.append(_encoder.encode(self.action))
        # A working directory in the project holds the project's last name, whatever
        # `..` or `//` it has (`matches` normalizes it).
        if self.project is not None and (name := Path(self.project).name):
            found.append(_encoder.encode(name)[1:-1])
        return found


def log_reply(activity: ActivityLog, request: LogRequest) -> LogReply | ErrorReply:
    """The answer to a `log` request (a worker thread: it may read both files whole)."""
    if request.project is not None and not Path(request.project).is_absolute():
        return ErrorReply(
            code=ErrorCode.BAD_REQUEST,
            message=f"project must be an absolute directory, not {request.project!r}",
        )
    wanted = FireFilter(
        session=request.session or None,
        agent=request.agent,
        project=None if request.project is None else os.path.normpath(request.project),
        action=request.action,
        since=request.since,
        include_tests=request.include_tests is not False,  # None: an older client's
    )
    fires, more = activity.query(wanted, request.n)
    return LogReply(fires=fires, more=more, not_kept=activity.not_kept)


class ActivityLog:
    """The record of fires: appended to `directory/activity.jsonl`, read by `query`.

    `append` runs on the daemon's event loop and never raises, nor waits (an unsynced
    write); `query` may run in another thread meanwhile.
    """

    def __init__(self, directory: Path | None, settings: ActivitySettings | None = None) -> None:
        """`directory`: the data directory (None: in memory only)."""
        self._directory = directory
        self._settings = settings or ActivitySettings()
        self._memory: deque[FireRecord] = deque(maxlen=MEMORY_FIRES)
        self._fd: int | None = None
        # Fires in the current file when it was opened (None: being counted, in a thread
        # of its own: `_count_lines`), and written to it since.
        self._counted: int | None = 0
        self._appended = 0
        self._generation = 0  # which opening of the current file: a count for another is dropped
        self.counting: threading.Thread | None = None
        self._bytes = 0
        self._oldest: float | None = None  # the first fire in the current file
        self._newest: float | None = None  # the last one written
        self._old_newest: float | None = None  # the last fire in activity.1.jsonl
        self._torn = False  # the current file does not end with a newline
        self._refused: str | None = None  # why the files are not used (until a restart)
        self._failed: str | None = None  # why the last write failed (None: it worked)
        self._retry_at = 0.0  # monotonic: when a failed file is tried again
        # Held by a reader while it opens the two files, and by a rotation: a reader
        # never sees the same fires twice, nor none of a file being renamed.
        self._rotating = threading.Lock()
        if directory is not None and self._settings.on_disk:
            self._open()

    # ------------------------------------------------------------- settings

    def reconfigure(self, settings: ActivitySettings) -> None:
        """New bounds from the next fire on; `on_disk` turned off stops the writes (the
        files written stay, for the user to remove), turned on starts them."""
        self._settings = settings
        if not settings.on_disk:
            self._close_file()
        elif self._fd is None and self._directory is not None and self._refused is None:
            self._failed = None
            self._open()

    @property
    def not_kept(self) -> str | None:
        """Why the record is in memory only, or some fires are missing from it; None: kept."""
        if self._refused is not None:
            return self._refused
        if self._failed is not None:
            return (
                f"the activity record could not be written ({self._failed}): fires since then "
                "are kept in the daemon's memory only; free some space in the data directory"
            )
        if self._directory is None or not self._settings.on_disk:
            return "kept in the daemon's memory only (`[activity] on_disk = false`)"
        return None

    # --------------------------------------------------------------- writing

    def append(self, fire: FireRecord) -> None:
        """Record `fire` (the hook's answer was sent). Never raises."""
        self._memory.append(fire)
        if self._fd is None and not self._reopen_due():
            return
        try:
            self._append(fire)
        except Exception as exc:  # noqa: BLE001 - the record must never cost the hook
            self._fail(f"{exc!r}")

    def _reopen_due(self) -> bool:
        """After a failed write, once `RETRY_S` passed: whether the file opens again."""
        if self._refused is not None or self._failed is None or not self._settings.on_disk:
            return False
        if time.monotonic() < self._retry_at:
            return False
        return self._open()  # a failure sets the next try (`_fail`)

    def _append(self, fire: FireRecord) -> None:
        assert self._fd is not None
        line = _encoder.encode(fire) + b"\n"
        if len(line) > MAX_LINE_BYTES:
            return  # cut fields make no such fire: it would be skipped when read
        now = time.time()
        self._prune_old(now)
        if self._rotation_due(now, len(line)) and not self._rotate():
            return
        if self._fd is None:
            return
        if self._torn:  # the last line was cut (a crash, a full disk): start a new one
            line = b"\n" + line
        try:
            written = _write(self._fd, line)  # unsynced: a record of what happened
        except OSError as exc:
            self._torn = True  # part of it may be there
            self._fail(os.strerror(exc.errno or 0) if exc.errno else str(exc))
            return
        self._bytes += written
        if written < len(line):  # the disk filled up in the middle of it
            self._torn = True
            self._fail(os.strerror(errno.ENOSPC))
            return
        self._torn = False
        self._appended += 1
        if self._oldest is None:
            self._oldest = fire.time
        self._newest = fire.time
        if self._failed is not None:
            self._failed = None
            log.info("activity_record_written_again")

    def _rotation_due(self, now: float, size: int) -> bool:
        settings = self._settings
        lines = (self._counted or 0) + self._appended  # while being counted: a lower bound
        if lines == 0 and self._bytes == 0:
            return False
        return (
            lines + 1 > max(1, settings.max_fires // 2)
            or self._bytes + size > settings.max_mib * _MIB // 2
            or (self._oldest is not None and now - self._oldest > settings.max_age_days * _DAY_S)
        )

    def _rotate(self) -> bool:
        """The current file becomes the old one, and a new one starts; whether it did.

        Not while a reader opens the files (it tries again with the next fire).
        """
        assert self._directory is not None
        if not self._rotating.acquire(blocking=False):
            return True  # the file grows by one more fire
        try:
            current = self._directory / FILE_NAME
            self._close_file()
            try:
                current.replace(self._directory / OLD_FILE_NAME)  # a link there is replaced
            except OSError as exc:
                self._fail(f"{current}: {exc.strerror or exc}")
                return False
            self._old_newest = self._newest
            return self._open(fresh=True)
        finally:
            self._rotating.release()

    def _prune_old(self, now: float) -> None:
        """Remove activity.1.jsonl once its newest fire is older than `max_age_days`."""
        newest = self._old_newest
        if newest is None or now - newest <= self._settings.max_age_days * _DAY_S:
            return
        assert self._directory is not None
        if not self._rotating.acquire(blocking=False):
            return
        try:
            (self._directory / OLD_FILE_NAME).unlink(missing_ok=True)  # a link is not followed
            self._old_newest = None
        except OSError as exc:
            log.warning("activity_record_not_pruned", error=exc.strerror or str(exc))
            self._old_newest = None  # not tried with every fire
        finally:
            self._rotating.release()

    # ------------------------------------------------------------------ files

    def _open(self, *, fresh: bool = False) -> bool:
        """Open the current file for appending; whether it can be used."""
        assert self._directory is not None
        path = self._directory / FILE_NAME
        flags = _APPEND_FLAGS | (os.O_EXCL if fresh else 0)
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.EEXIST):
                self._refuse(path, _refusal(path))
            else:
                self._fail(f"{path}: {exc.strerror or exc}")
            return False
        try:
            info = os.fstat(fd)
            problem = _not_ours(info)
            if problem is None and stat.S_IMODE(info.st_mode) & 0o077:
                os.fchmod(fd, 0o600)  # commands are the user's data
        except OSError as exc:
            os.close(fd)
            self._fail(f"{path}: {exc.strerror or exc}")
            return False
        if problem is not None:
            os.close(fd)
            self._refuse(path, problem)
            return False
        size = info.st_size
        try:  # a few reads: whether the last line is torn, the first and last fires' times
            torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
            head = os.pread(fd, MAX_LINE_BYTES, 0) if size else b""
            newest = _last_time_in(fd, size) if size else None
        except OSError as exc:
            os.close(fd)
            self._fail(f"{path}: {exc.strerror or exc}")
            return False
        self._fd = fd
        self._generation += 1
        self._bytes, self._torn, self._oldest = size, torn, _first_time(head.split(b"\n"))
        self._newest = newest
        self._appended = 0
        self._counted = 0 if size == 0 else None
        if not fresh:
            self._old_newest = _last_time(self._directory / OLD_FILE_NAME)
        if self._counted is None:
            # Counting 8 MiB of lines takes tens of milliseconds: not on the event loop,
            # nor in the start-up the first hook after a socket-activated start waits for.
            self._count_in_thread(fd, size)
        return True

    def _count_in_thread(self, fd: int, size: int) -> None:
        """Start counting the fires of the file just opened (`_count_lines`)."""
        try:
            copy = os.dup(fd)  # the thread's own: a rotation may close `fd` meanwhile
        except OSError:
            self._counted = 0  # no descriptor to spare: the bound counts the fires from now
            return
        self.counting = threading.Thread(
            target=self._count_lines,
            args=(copy, size, self._generation),
            name="mented-activity-count",
            daemon=True,
        )
        try:
            self.counting.start()
        except RuntimeError:  # no thread to spare
            os.close(copy)
            self._counted = 0

    def _count_lines(self, fd: int, size: int, generation: int) -> None:
        """Count the fires in the first `size` bytes of the current file (a thread)."""
        lines, offset = 0, 0
        try:
            while offset < size:
                chunk = os.pread(fd, min(_CHUNK, size - offset), offset)
                if not chunk:
                    break
                lines += chunk.count(b"\n")
                offset += len(chunk)
        except OSError:
            pass  # what was counted stands: the bound is then met a little later
        finally:
            os.close(fd)
        with self._rotating:  # not while a rotation starts another file
            if generation == self._generation:
                self._counted = lines

    def _refuse(self, path: Path, problem: str) -> None:
        self._refused = (
            f"the activity record {shown(str(path))} is {problem}: refused, not followed; "
            f"fires are kept in the daemon's memory only; {_FIX}"
        )
        log.warning("activity_record_refused", path=str(path), problem=problem)

    def _fail(self, why: str) -> None:
        if self._failed is None:
            log.warning("activity_record_not_written", error=why)
        self._failed = why
        self._retry_at = time.monotonic() + RETRY_S
        self._close_file()

    def _close_file(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        self._close_file()

    # --------------------------------------------------------------- reading

    def query(self, wanted: FireFilter, n: int) -> tuple[list[FireRecord], bool]:
        """The newest `n` fires `wanted` asks for, newest first, and whether more matched
        than fit in one answer (`MAX_REPLY_BYTES`). Any thread."""
        if n <= 0:
            return [], False
        cutoff = time.time() - self._settings.max_age_days * _DAY_S
        memory = list(self._memory)  # one step under the GIL: the loop may append meanwhile
        memory.reverse()
        if self._directory is None or self._refused is not None or not self._settings.on_disk:
            found = [fire for fire in memory if fire.time >= cutoff and wanted.matches(fire)]
            return found[:n], False
        # While writes fail, the fires since the last one written are in memory only.
        newest = self._newest
        unwritten = (
            [fire for fire in memory if newest is None or fire.time > newest]
            if self._failed is not None
            else []
        )
        found = [fire for fire in unwritten if fire.time >= cutoff and wanted.matches(fire)]
        if len(found) >= n:
            return found[:n], False
        return self._query_files(wanted, n, cutoff, found)

    def _query_files(
        self, wanted: FireFilter, n: int, cutoff: float, found: list[FireRecord]
    ) -> tuple[list[FireRecord], bool]:
        """`query` from the files: read backwards, newest first, until `n` are found or
        the fires are older than asked for (`CLOCK_SLACK_S` more, for a clock set back)."""
        assert self._directory is not None
        with self._rotating:
            fds = [_open_to_read(self._directory / name) for name in (FILE_NAME, OLD_FILE_NAME)]
        try:
            limit = self._settings.max_mib * _MIB + MAX_LINE_BYTES
            oldest = max(cutoff, wanted.since or cutoff) - CLOCK_SLACK_S
            needles = wanted.needles()
            held = 0
            skipped = 0
            for fd in fds:
                for line in () if fd is None else _lines_backward(fd, limit, needles):
                    if not line or len(line) > MAX_LINE_BYTES:
                        continue
                    if any(needle not in line for needle in needles):
                        skipped += 1  # now and then, whether the fires are older than asked
                        if skipped % 64 == 0 and (stamp := _stamp(line)) and stamp < oldest:
                            return found, False
                        continue
                    if wanted.since is not None:  # the time alone first: a fifth of the cost
                        stamp = _stamp(line)
                        if stamp is not None and stamp < wanted.since:
                            if stamp < oldest:
                                return found, False
                            continue
                    try:
                        fire = _decoder.decode(line)
                    except (msgspec.DecodeError, msgspec.ValidationError):
                        continue  # torn by a crash, or damaged: the rest still counts
                    if fire.time < oldest:
                        return found, False
                    if fire.time < cutoff or not wanted.matches(fire):
                        continue
                    held += len(line)
                    if held > MAX_REPLY_BYTES:
                        return found, True
                    found.append(fire)
                    if len(found) >= n:
                        return found, False
            return found, False
        finally:
            for fd in fds:
                if fd is not None:
                    os.close(fd)


def _not_ours(info: os.stat_result) -> str | None:
    """What is wrong with a file to keep the record in (None: nothing)."""
    if not stat.S_ISREG(info.st_mode):
        return describe_kind(info.st_mode)
    if info.st_uid != os.geteuid():
        return f"owned by another user (uid {info.st_uid})"
    return None


def _refusal(path: Path) -> str:
    """What is at `path` that could not be opened without following it."""
    try:
        return describe_kind(os.lstat(path).st_mode)
    except OSError:
        return "not a regular file"


def _open_to_read(path: Path) -> int | None:
    """`path` opened to read when it is the user's own regular file; else None."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None  # absent, or a link, or a pipe: refused when opened to write
    try:
        if _not_ours(os.fstat(fd)) is None:
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _lines_backward(fd: int, limit: int, needles: Sequence[bytes] = ()) -> Iterator[bytes]:
    """The lines of the open file's last `limit` bytes, the last line first; only from
    the blocks that hold every one of `needles` (a filter's: most blocks are skipped).

    Read in blocks from the end: the newest fires, which most requests want, cost
    one block. A line cut by the bound, or longer than `MAX_LINE_BYTES`, comes out
    in pieces or not at all; a piece does not decode.
    """
    size = os.fstat(fd).st_size
    bottom = max(0, size - limit)
    end = size
    rest = b""
    while end > bottom:
        start = max(bottom, end - _BLOCK)
        block = os.pread(fd, end - start, start)
        if len(block) < end - start:  # the file shrank (it cannot: ours are appended)
            return
        data = block + rest
        end = start
        if not all(needle in data for needle in needles):  # no line here is asked for
            rest = data.partition(b"\n")[0] if start > bottom else b""
            rest = b"" if len(rest) > MAX_LINE_BYTES else rest
            continue
        lines = data.split(b"\n")
        rest = lines[0]
        if len(rest) > MAX_LINE_BYTES:
            rest = b""  # none of ours: what comes before it is a piece, which does not decode
        yield from reversed(lines[1:])
    if bottom == 0:
        yield rest  # the file's first line (else cut by the bound: left out)


def _stamp(line: bytes) -> float | None:
    """The time of the fire on `line`, decoding nothing else; None if it is none."""
    try:
        return _stamp_decoder.decode(line).time
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _last_time(path: Path) -> float | None:
    """The time of the last fire in the file at `path` (None: none, or not ours)."""
    fd = _open_to_read(path)
    if fd is None:
        return None
    try:
        return _last_time_in(fd, os.fstat(fd).st_size)
    except OSError:
        return None
    finally:
        os.close(fd)


def _last_time_in(fd: int, size: int) -> float | None:
    """The time of the last fire in the first `size` bytes of the open file."""
    tail = os.pread(fd, MAX_LINE_BYTES, max(0, size - MAX_LINE_BYTES))
    return _first_time(reversed(tail.split(b"\n")))


def _first_time(lines: Iterable[bytes]) -> float | None:
    """The time of the first fire that decodes among `lines`."""
    for line in lines:
        if line:
            try:
                return _decoder.decode(line).time
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
    return None
