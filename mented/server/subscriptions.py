"""Subscriptions: a connection turned into a stream of events (`mented.events`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import trio

from mented.events import SubscribersFullError, serve_subscription
from mented.peercred import peer_pid
from mented.protocol import ErrorCode, ErrorReply, Reply, SubscribedReply, SubscribeRequest
from mented.server.hooks import _Hooks

if TYPE_CHECKING:
    from mented.server.transport import _Connection


class _Subscriptions(_Hooks):
    """`subscribe`, and the events streamed after its answer."""

    def _subscribe(self, request: SubscribeRequest, conn: _Connection) -> Reply:
        """Make `conn` a subscriber (its events follow the answer: `_stream_events`)."""
        if request.project is not None and not Path(request.project).is_absolute():
            return ErrorReply(
                code=ErrorCode.BAD_REQUEST,
                message=f"project must be an absolute directory, not {request.project!r}",
            )
        kinds = list(dict.fromkeys(request.kinds))  # each once, in the order asked
        try:
            conn.subscription = self.events.subscribe(
                kinds, request.project, client=peer_pid(conn.sock)
            )
        except SubscribersFullError as exc:
            return ErrorReply(code=ErrorCode.BUSY, message=str(exc))
        return SubscribedReply(kinds=kinds, project=conn.subscription.project)

    async def _stream_events(self, conn: _Connection) -> None:
        """The rest of a subscribed connection: events until either side ends it.

        No idle timeout (a subscriber waits for events); shutdown ends it like an
        idle connection. Its queue is bounded by `self.events`, not by this task.
        """
        subscription = conn.subscription
        assert subscription is not None
        with trio.CancelScope() as scope:
            self._idle_scopes.add(scope)
            try:
                if not self._stopping:
                    await serve_subscription(subscription, conn.sock)
            finally:
                self._idle_scopes.discard(scope)
