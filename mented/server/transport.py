"""The transport: connections accepted, frames read, answers sent, within bounds and deadlines."""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import time

import trio

from mented.events import Subscription
from mented.first_answers import HOOK_PREFIX as _HOOK_PREFIX
from mented.hooks import HookAnswer
from mented.log import log
from mented.peercred import is_own_user, peer_uid
from mented.protocol import HEADER, MAX_FRAME, ErrorCode, ErrorReply, FrameTooLargeError, encode
from mented.server.bounds import (
    _BUSY_FRAME,
    _BUSY_RECEIVING_FRAME,
    _BUSY_SENDING_FRAME,
    ServerBusyError,
)
from mented.server.dispatch import _Dispatch

_RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


# The first read of a request: the whole of most (a hook's event is a few KiB). A
# frame that needs more is read into a buffer of its exact size: read in 64 KiB
# chunks, a flood of such frames left that much more of the heap fragmented.
_RECV_SIZE = 16 * 1024
# An answer up to this size is handed to the kernel in one send (a Unix socket's
# send buffer is ~208 KiB by default); a larger one is counted before it is sent.
_SMALL_REPLY = 64 * 1024


class _Connection:
    """One client's socket and what the daemon holds for it.

    Straight on the trio socket: trio.SocketStream adds what one task per
    connection does not need (conflict detection, a TCP option tried on every
    Unix socket, error translation) and costs ~8% of a lookup's round trip; a
    peer that goes away raises OSError, which `_serve_connection` handles.
    """

    __slots__ = (
        "held",
        "hook_answer",
        "hook_deadline",
        "pending",
        "sock",
        "subscription",
        "untimed",
    )

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.pending = b""  # bytes received past the last frame (pipelined requests)
        self.held = 0  # bytes counted for it in `_HeldBytes`
        self.subscription: Subscription | None = None  # set by `subscribe`
        self.untimed = False  # the request being answered is long by design (`_UNTIMED`)
        # The hook answer being sent, and when its caller stops waiting (time.monotonic).
        self.hook_answer: HookAnswer | None = None
        self.hook_deadline = 0.0


def _frame_end(buffer: bytes) -> int | None:
    """Where the first frame in `buffer` ends; None while its header is incomplete.

    Raises:
        FrameTooLargeError: the announced length exceeds MAX_FRAME.
    """
    if len(buffer) < HEADER.size:
        return None
    (length,) = HEADER.unpack_from(buffer)
    if length > MAX_FRAME:
        raise FrameTooLargeError(length)
    return int(HEADER.size + length)


def _try_open_spare() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return None


class _Transport(_Dispatch):
    """The accept loop and each connection's frames."""

    async def _accept_loop(
        self, listener: trio.socket.SocketType, connections: trio.Nursery
    ) -> None:
        # A spare descriptor, given up when the process runs out, so that the
        # connection waiting in the backlog can be accepted and closed cleanly
        # instead of spinning on EMFILE.
        spare: int | None = os.open(os.devnull, os.O_RDONLY)
        exhausted = False  # logged once per episode, not every 10 ms while it lasts
        try:
            while True:
                if spare is None:
                    # Lost in a shortage (another thread, such as the recall index's
                    # reload watcher, took the descriptor it freed): taken back before
                    # the next accept can, or the next shortage would leave the waiting
                    # clients unanswered until one of the served ones leaves.
                    spare = _try_open_spare()
                try:
                    sock, _ = await listener.accept()
                except trio.ClosedResourceError:
                    return  # shutdown closed the listener under us: accepting is over
                except OSError as exc:
                    if exc.errno not in _RESOURCE_ERRNOS:
                        raise
                    if not exhausted:
                        log.warning("accept_failed", error=os.strerror(exc.errno or 0))
                        exhausted = True
                    if spare is not None:
                        os.close(spare)
                        spare = None
                        # Only the connection already waiting: an accept that waited here
                        # would refuse the next client after the shortage ended, and
                        # would not notice shutdown closing the listener.
                        with trio.move_on_after(0.05):
                            try:
                                sock, _ = await listener.accept()
                                sock.close()
                            except trio.ClosedResourceError:
                                return
                            except OSError:
                                pass
                        spare = _try_open_spare()
                    await trio.sleep(0.01)
                    continue
                if exhausted:
                    log.info("accept_recovered")
                    exhausted = False
                if self._connections >= self._max_connections:
                    # Over the limit: say so without waiting (the socket is
                    # non-blocking, the frame small), refuse, keep serving the rest.
                    with contextlib.suppress(OSError):
                        os.write(sock.fileno(), _BUSY_FRAME)
                    sock.close()
                    continue
                self._connections += 1
                self._last_activity = trio.current_time()
                connections.start_soon(self._serve_connection, sock)
        finally:
            if spare is not None:
                os.close(spare)

    async def _serve_connection(self, sock: trio.socket.SocketType, pending: bytes = b"") -> None:
        conn = _Connection(sock)
        conn.pending = pending  # what `first_answers` read of its next request
        try:
            if not is_own_user(sock):
                log.warning("peer_refused", peer_uid=peer_uid(sock))
                return
            first = True  # the first request: whether this connection gets a slot
            while not self._stopping:
                try:
                    body = await self._read_frame(conn)
                except FrameTooLargeError as exc:
                    await self._send_reply(
                        conn, encode(ErrorReply(code=ErrorCode.FRAME_TOO_LARGE, message=str(exc)))
                    )
                    return
                except ServerBusyError:
                    await self._send_reply(conn, _BUSY_RECEIVING_FRAME)
                    return
                if body is None:
                    return
                if (
                    first
                    and self._connections > self._open_to_all
                    and not body.startswith(_HOOK_PREFIX)
                ):
                    # The last slots are the hooks': long-lived clients (subscribers, idle
                    # connections) must never leave an agent's hook without an answer.
                    await self._send_reply(conn, _BUSY_FRAME)
                    return
                first = False
                answering = self._answer_request(conn, body)
                del body  # held by the answer alone, which lets go of it once dispatched
                if not await answering:
                    return
                if conn.subscription is not None:
                    await self._stream_events(conn)
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
            pass  # the client went away, stalled mid-frame or left its answer unread
        except OSError as exc:
            log.debug("connection_error", error=str(exc))
        except Exception:  # noqa: BLE001 - a bug must cost one connection, never the daemon
            # Without this, an exception escaping here (as RecursionError from the
            # decoder once did) ends the connections nursery and with it the daemon.
            log.exception("connection_failed")
        finally:
            self._settle_hook(conn, sent=False)  # an answer whose send failed: read by nobody
            if conn.subscription is not None:  # also when its `subscribed` was never sent
                self.events.unsubscribe(conn.subscription)
            self.held.release(conn)
            self._connections -= 1
            self._last_activity = trio.current_time()
            sock.close()
            if self._stopping and not self._connections:
                self._drained.set()

    async def _answer_request(self, conn: _Connection, body: bytes) -> bool:
        """Dispatch one request and send its answer; whether the connection goes on."""
        started = time.perf_counter()
        conn.untimed = False
        reply = await self._dispatch(body, conn)
        del body  # not held while the client takes its time reading the answer
        self.stats.requests += 1
        if not conn.untimed:
            self.stats.latencies_us.append((time.perf_counter() - started) * 1e6)
        if len(reply) > _SMALL_REPLY:
            reply = self._hold_reply(conn, reply)
            if reply is _BUSY_SENDING_FRAME:  # a hook's answer replaced: not handed over
                self._settle_hook(conn, sent=False)
        sent = await self._send_reply(conn, reply)
        self._settle_hook(conn, sent=sent)
        self._answered.set()
        if not sent:
            return False
        del reply  # not held while the connection waits for its next request
        self.held.release(conn)
        return True

    async def _read_frame(self, conn: _Connection) -> bytes | None:
        """The next frame's body; None at end of stream, idle timeout or shutdown.

        A frame that arrives in one piece (most requests) is taken from the first
        read. One that does not is counted against the daemon-wide bound from then
        until its answer is sent, and read into a buffer of exactly its size.

        Raises:
            FrameTooLargeError: the announced length exceeds MAX_FRAME.
            ServerBusyError: the daemon-wide bound has no room for this frame.
            trio.TooSlowError: a started frame did not complete in time.
        """
        data = conn.pending
        if not data:
            idle = self.options.connection_idle_s
            if idle is None:
                idle = self.config.daemon.connection_idle_s
            with trio.move_on_after(idle) as scope:
                self._idle_scopes.add(scope)
                try:
                    data = await conn.sock.recv(_RECV_SIZE)
                finally:
                    self._idle_scopes.discard(scope)
            if scope.cancelled_caught or not data:
                return None
        end = _frame_end(data)
        if end is not None and len(data) >= end:
            conn.pending = data[end:]
            return data[HEADER.size : end]
        # The frame is incomplete: wait for the rest, under the request timeout.
        # Most requests arrive in one piece and skip this cancel scope: entering
        # and leaving one costs ~10% of a lookup's round trip (docs/benchmarks.md).
        conn.pending = b""
        with trio.fail_after(self.options.request_timeout_s):
            while end is None:  # not even the header yet
                chunk = await conn.sock.recv(_RECV_SIZE)
                if not chunk:
                    return None
                data += chunk
                end = _frame_end(data)
            if len(data) >= end:
                conn.pending = data[end:]
                return data[HEADER.size : end]
            self.held.reserve(conn, end)
            # Read the rest in place: no chunks to join, nothing past this frame. A
            # large frame goes to pages of its own, which cost nothing until its bytes
            # arrive and go back to the system the moment it is read.
            whole: bytearray | mmap.mmap = (
                bytearray(end) if end <= _SMALL_REPLY else mmap.mmap(-1, end)
            )
            try:
                got = len(data)
                whole[:got] = data
                del data
                with memoryview(whole) as view:
                    while got < end:
                        with view[got:] as rest:
                            received = await conn.sock.recv_into(rest)
                        if not received:
                            return None
                        got += received
                    return bytes(view[HEADER.size :])
            finally:
                if isinstance(whole, mmap.mmap):
                    whole.close()

    def _hold_reply(self, conn: _Connection, reply: bytes) -> bytes:
        """Count an answer too large to hand to the kernel at once before it is sent;
        when there is no room, the answer is `busy` instead (and the large one is
        dropped at once: the caller must not keep it)."""
        try:
            self.held.reserve(conn, len(reply) + len(conn.pending))
        except ServerBusyError:
            return _BUSY_SENDING_FRAME
        return reply

    async def _send_reply(self, conn: _Connection, reply: bytes) -> bool:
        """Send one answer whole, or give up on the connection.

        An answer the kernel takes at once costs nothing more. One it does not
        is counted against the daemon-wide bound (with whatever else this
        connection holds) until sent, and must be read within `send_timeout_s`.
        A large answer is counted before it is sent (`_hold_reply`).

        Returns:
            False when the connection should close: the answer could not be held.

        Raises:
            trio.TooSlowError: the client did not read the answer in time.
        """
        view = memoryview(reply)
        sent = await conn.sock.send(view)
        if sent == len(view):
            return True
        if len(reply) <= _SMALL_REPLY:
            try:
                self.held.reserve(conn, len(reply) + len(conn.pending))
            except ServerBusyError:
                log.debug("reply_dropped", bytes=len(reply), reason="no room to hold it")
                return False
        with trio.fail_after(self.options.send_timeout_s):
            while sent < len(view):
                sent += await conn.sock.send(view[sent:])
        return True
