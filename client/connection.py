"""A small synchronous client for the mented daemon.

Usage::

    from mented_client.connection import Client
    with Client() as client:
        reply = client.request(RecallRequest(action="git-commit"))

Every call has a timeout; errors from the daemon come back as `DaemonError`.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

from mented import paths
from mented.peercred import is_own_user, peer_uid
from mented.protocol import (
    ErrorReply,
    FrameTooLargeError,
    HookRequest,
    IncompleteFrameError,
    Reply,
    Request,
    SubscribedReply,
    SubscribeRequest,
    encode,
    recv_frame,
    reply_decoder,
)

ReplyT = TypeVar("ReplyT")


class NotRunningError(ConnectionError):
    """No daemon answers on the socket."""

    def __init__(self, socket_path: Path, reason: str) -> None:
        super().__init__(
            f"mented is not running at {socket_path} ({reason}); "
            "start it with `mentectl start` (or `mented` in a terminal)"
        )
        self.socket_path = socket_path


class DaemonError(Exception):
    """The daemon answered with a typed error."""

    def __init__(self, reply: ErrorReply) -> None:
        super().__init__(reply.message)
        self.code = reply.code
        self.message = reply.message


class ProtocolError(ConnectionError):
    """The daemon's answer could not be understood."""


class Client:
    """One connection to the daemon, reused for any number of requests."""

    def __init__(
        self,
        socket_path: str | Path | None = None,
        *,
        connect_timeout: float = 2.0,
        timeout: float = 10.0,
    ) -> None:
        self.socket_path = paths.socket_path(socket_path)
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self._sock: socket.socket | None = None

    def connect(self) -> None:
        """Connect now (requests connect lazily otherwise).

        Raises:
            NotRunningError: nothing answers on the socket.
        """
        if self._sock is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.connect_timeout)
        try:
            sock.connect(str(self.socket_path))
        except FileNotFoundError as exc:
            sock.close()
            raise NotRunningError(self.socket_path, "no socket file") from exc
        except ConnectionRefusedError as exc:
            sock.close()
            raise NotRunningError(self.socket_path, "connection refused: stale socket") from exc
        except OSError as exc:
            sock.close()
            raise NotRunningError(self.socket_path, exc.strerror or str(exc)) from exc
        if not is_own_user(sock):
            # Another user's process holds our socket path: never send it our rules.
            owner = peer_uid(sock)
            sock.close()
            raise NotRunningError(
                self.socket_path, f"the socket is served by uid {owner}, not by you"
            )
        sock.settimeout(self.timeout)
        self._sock = sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def roundtrip(self, frame: bytes) -> bytes:
        """Send one complete frame and return the body of the reply frame."""
        self.connect()
        assert self._sock is not None
        try:
            self._sock.sendall(frame)
            return recv_frame(self._sock)
        except FrameTooLargeError as exc:
            # Not "mented is not running": something answered, with a frame we refuse.
            self.close()
            raise ProtocolError(f"reply {exc}") from exc
        except TimeoutError as exc:
            self.close()
            raise ProtocolError(f"no answer from mented within {self.timeout:g} s") from exc
        except OSError as exc:
            self.close()
            raise NotRunningError(self.socket_path, f"connection lost: {exc}") from exc

    def request(self, message: Request) -> Reply:
        """Send a request and return its typed reply.

        Raises:
            NotRunningError: no daemon answers.
            DaemonError: the daemon answered with an error.
            ProtocolError: the answer was not a valid reply.
        """
        body = self.roundtrip(encode(message))
        try:
            reply = reply_decoder.decode(body)
        except Exception as exc:
            raise ProtocolError(f"unreadable reply from mented: {exc}") from exc
        if isinstance(reply, ErrorReply):
            raise DaemonError(reply)
        return reply

    def expect(self, message: Request, kind: type[ReplyT]) -> ReplyT:
        """`request`, checking the reply is of the expected kind."""
        reply = self.request(message)
        if not isinstance(reply, kind):
            raise ProtocolError(f"expected a {kind.__name__} reply, got {type(reply).__name__}")
        return reply

    def events(
        self,
        request: SubscribeRequest,
        *,
        output: int | None = None,
        subscribed: Callable[[], None] | None = None,
    ) -> Iterator[bytes]:
        """Subscribe, then yield the body of each event frame as it comes, waiting as
        long as it takes; the iteration ends when the daemon closes the connection.

        `subscribed`: called once the daemon confirmed the subscription, before any
        event (what happens from then on comes).

        `output`: the descriptor the events are written to. When its reader goes away
        (`mentectl watch | head -1`) the wait ends with BrokenPipeError at once, not at
        the next event, which may be hours away.

        Raises:
            NotRunningError: no daemon answers.
            DaemonError: the daemon refused the subscription.
            ProtocolError: the daemon sent a frame over the size limit.
            BrokenPipeError: `output` was closed by its reader.
        """
        self.expect(request, SubscribedReply)
        if subscribed is not None:
            subscribed()
        sock = self._sock
        assert sock is not None
        sock.settimeout(None)  # events come when they come
        waiting = select.poll()
        waiting.register(sock, select.POLLIN)
        if output is not None:
            waiting.register(output, 0)  # a closed reader shows as POLLERR (POLLHUP on some)
        while True:
            for fd, flags in waiting.poll():
                if fd == output and flags & (select.POLLERR | select.POLLHUP):
                    raise BrokenPipeError(f"the reader of descriptor {output} went away")
            try:
                body = recv_frame(sock)
            except FrameTooLargeError as exc:
                raise ProtocolError(f"event {exc}") from exc
            except (IncompleteFrameError, ConnectionResetError):
                return
            yield body

    def hook(self, agent: str, event: bytes, *, test: bool = False) -> bytes:
        """What the hook shim would print for `event` (raw stdout bytes).

        Sends this client's deadline (now plus `timeout`): an answer the daemon could
        only send later is dropped, not counted as handed over. `test`: a test fire
        (`doctor`), logged as such.
        """
        import msgspec  # noqa: PLC0415 - only this call needs Raw

        request = HookRequest(
            agent=agent, event=msgspec.Raw(event), deadline=time.time() + self.timeout, test=test
        )
        return self.roundtrip(encode(request))
