"""What clients can make the daemon hold: bytes daemon-wide, connections at once."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from mented.listener import DESCRIPTOR_RESERVE, MAX_CONNECTIONS
from mented.log import log
from mented.protocol import ErrorCode, ErrorReply, encode

if TYPE_CHECKING:
    from mented.server.transport import _Connection

# Give freed buffers back to the system after this much was released (see _HeldBytes).
_TRIM_AFTER = 16 * 1024 * 1024
_BUSY_FRAME = encode(
    ErrorReply(code=ErrorCode.BUSY, message="mented serves too many connections; retry shortly")
)
_BUSY_RECEIVING_FRAME = encode(
    ErrorReply(
        code=ErrorCode.BUSY,
        message="mented is receiving too many large requests at once; retry shortly",
    )
)
_BUSY_SENDING = ErrorReply(
    code=ErrorCode.BUSY,
    message="mented holds too many large answers not yet read; retry shortly",
)
_BUSY_SENDING_FRAME = encode(_BUSY_SENDING)
HOOK_SHARE = 8  # one connection slot in this many is kept for hooks alone


class ServerBusyError(Exception):
    """Too much is being received at once: this request is refused with `busy`."""


class _HeldBytes:
    """What clients make the daemon hold, counted against one daemon-wide limit.

    A request counts from the first read that leaves it incomplete until its
    answer is sent; an answer counts while the client has not read it (at most
    `send_timeout_s`). A frame that arrives whole and an answer the kernel takes
    at once are not counted: they are held only while the daemon works on them.
    Without the bound, every connection could hold a 4 MiB frame or answer for as
    long as its client likes, and thousands of them several GiB.

    Freed buffers of many sizes leave the C allocator's heap fragmented, so that
    memory stays with the process after the clients are gone; once enough has
    been released it is handed back (`malloc_trim`, where the C library has it).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._released = 0  # bytes released since memory was last handed back

    def has_room(self, size: int) -> bool:
        return self.total + size <= self.limit

    def reserve(self, conn: _Connection, size: int) -> None:
        """Count `size` more bytes for `conn`.

        Raises:
            ServerBusyError: they would take the total past the limit.
        """
        if not self.has_room(size):
            raise ServerBusyError
        self.total += size
        conn.held += size

    def take(self, size: int) -> bool:
        """Count `size` more bytes held for no one connection (a subscriber's queued
        events, `mented.events`); False, counting nothing, when there is no room."""
        if not self.has_room(size):
            return False
        self.total += size
        return True

    def give_back(self, size: int) -> None:
        """Stop counting `size` bytes counted by `take`."""
        self.total -= size

    def release(self, conn: _Connection) -> None:
        """Stop counting what `conn` held; hand memory back after a large release."""
        if not conn.held:
            return
        self.total -= conn.held
        self._released += conn.held
        conn.held = 0
        # After a large release, and when the last holder is done (however little was
        # released since: a flood's tail is freed by its last few connections).
        if self._released >= _TRIM_AFTER or (
            not self.total and self._released >= _TRIM_AFTER // 16
        ):
            self._released = 0
            _give_memory_back()


def _load_malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has no such call."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # musl has no malloc_trim
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_malloc_trim = _load_malloc_trim()


def _give_memory_back() -> None:
    """Return the C heap's free pages to the system (glibc), e.g. after a flood of
    large requests: without it, RSS stayed 130 MiB up after 2,000 of 64 KiB left."""
    if _malloc_trim is not None:
        started = time.perf_counter()
        _malloc_trim(0)
        log.debug("memory_trimmed", ms=round((time.perf_counter() - started) * 1000, 2))


def _connection_limit() -> int:
    """Connections served at once: MAX_CONNECTIONS, or fewer when the descriptor limit
    less a reserve (for the store, the listener and logging) is lower, so that the
    accept loop itself never runs dry."""
    import resource  # noqa: PLC0415 - start-up only

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return min(MAX_CONNECTIONS, max(8, soft - DESCRIPTOR_RESERVE))
