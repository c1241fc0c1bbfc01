"""The event hub: what the daemon pushes to subscribers (editors, `mentectl watch`).

A client sends `subscribe` once; from then on its connection carries event frames
(docs/protocol.md): hook fires, rule changes, config reloads. The server publishes
them here, on the trio thread, after the work they report is done (a store write
that ran in a worker thread is published once its `await` returns): nothing here
is touched from another thread, so nothing here takes a lock.

Publishing never waits. Each event is encoded once, and its frame put in the queue
of every subscriber that wants it, at once. A queue is bounded by events and by
bytes, and its bytes count against the daemon-wide bound of what clients make it
hold (`ByteBudget`, the server's `_HeldBytes`): a subscriber that does not keep up
is dropped, not waited for. It is told so in a last `dropped` frame, sent after the
frame in flight, if it reads them within a grace period; then its connection closes.
So a stuck editor costs a hook nothing but the queueing of a few bytes.

Fan-out is off the publisher's path: in the daemon, `fan_out` runs as a task of its
own, and `publish` only appends the event to its list (a hook costs the same with 0
or 1,000 subscribers; it once took 48 ms at 300 and 677 ms at 3,000). That task
offers a bounded number of frames per turn of the event loop. Without it running
(tests of this module), `publish` delivers at once.

Subscribers are bounded: at most `MAX_SUBSCRIBERS` (far below the daemon's
connection cap: a leaky editor plugin opening one per buffer once took every
connection slot, and then every hook got `busy`), and `MAX_PER_CLIENT` per client
process. At a bound, the subscription idle longest (nothing sent to it for
`IDLE_S`) expires to make room, told so in its `dropped` frame; when none is
that idle, the new one is refused with a message saying why.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from typing import TYPE_CHECKING, Protocol

import trio

from mented.log import log
from mented.memory import short_handle
from mented.protocol import (
    EVENT_KINDS,
    MAX_EVENT_TEXT,
    ConfigEvent,
    DroppedEvent,
    Event,
    EventKind,
    FireEvent,
    FireRecord,
    RuleChange,
    RuleEvent,
    encode,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mented.memory import Memory

# How far a subscriber may fall behind before it is dropped: events, and their bytes.
# An event is a few hundred bytes (a fire's command is cut at 1,000 characters, a
# rule's content at MAX_EVENT_TEXT), so the count is what usually bounds.
MAX_QUEUED_EVENTS = 1000
MAX_QUEUED_BYTES = 1024 * 1024
_RECEIVE_SIZE = 4096  # what a subscriber sends is read and thrown away, this much at a time
MAX_SUBSCRIBERS = 256  # the daemon serves 8,192 connections: hooks keep the rest
MAX_PER_CLIENT = 32  # subscriptions one client process may hold
IDLE_S = 600.0  # a subscription sent nothing for this long may expire to make room
_OFFERS_PER_TURN = 256  # frames fan-out queues before it lets the event loop serve others
MAX_PENDING = 10_000  # events published and not fanned out yet; past it the oldest go


class SubscribersFullError(Exception):
    """No room for another subscription (the message says which bound and what to do)."""


class ByteBudget(Protocol):
    """The daemon-wide bound on bytes held for clients (the server's `_HeldBytes`)."""

    def take(self, size: int) -> bool:
        """Count `size` more bytes; False (nothing counted) when over the bound."""
        ...

    def give_back(self, size: int) -> None:
        """Stop counting `size` bytes taken before."""
        ...


class Subscription:
    """One subscriber's filter and queue of encoded event frames."""

    def __init__(
        self,
        hub: EventHub,
        kinds: Iterable[EventKind],
        project: str | None,
        max_events: int,
        client: int | None = None,
    ) -> None:
        self.kinds: frozenset[str] = frozenset(kinds)
        self.client = client  # the subscriber's process id, when known
        self.last_active = time.monotonic()  # subscribed, or last sent an event
        self.project = None if project is None else os.path.normpath(project)
        self.max_events = max_events
        self.dropped: bytes | None = None  # the last frame, once dropped
        self._hub = hub
        self._queue: deque[bytes] = deque()
        self._held = 0  # bytes of the queued frames and the one being sent
        self._in_flight = 0  # bytes of the one being sent
        self._wake = trio.Event()
        # Around the sending of frames: given a deadline when the subscriber is dropped.
        self._sending = trio.CancelScope()

    @property
    def queued(self) -> int:
        """Events waiting to be sent."""
        return len(self._queue)

    def wants(self, event: Event) -> bool:
        """Whether this subscriber asked for `event` (its kind, and its project)."""
        if type(event).__struct_config__.tag not in self.kinds:
            return False
        project = self.project
        if project is None:
            return True
        match event:
            case FireEvent(cwd=cwd):
                return cwd is not None and is_within(os.path.normpath(cwd), project)
            case RuleEvent(project=scope) if isinstance(event.id, str):
                # A rule applies here when it is global or scoped to this directory or
                # one containing it; one scoped inside this directory is shown too.
                return not isinstance(scope, str) or (
                    is_within(project, scope) or is_within(scope, project)
                )
            case _:  # batches of changes, config reloads: they may concern any project
                return True

    def offer(self, frame: bytes) -> None:
        """Queue `frame`, or drop this subscriber when it is too far behind. Never waits."""
        if self.dropped is not None:
            return
        size = len(frame)
        if len(self._queue) >= self.max_events:
            self._drop(f"this subscriber fell {self.max_events} events behind")
        elif self._held + size > self._hub.max_bytes:
            self._drop(f"this subscriber fell {self._hub.max_bytes} bytes of events behind")
        elif not self._hub.budget.take(size):
            self._drop("the daemon holds too much for clients that do not read")
        else:
            self._held += size
            self._queue.append(frame)
            self.last_active = time.monotonic()
            self._wake.set()

    async def next_frame(self) -> bytes | None:
        """The next frame to send, waiting for one; None once dropped.

        Its bytes stay counted until `sent` says it went out.
        """
        while not self._queue and self.dropped is None:
            self._wake = trio.Event()
            await self._wake.wait()
        if self.dropped is not None:
            return None
        frame = self._queue.popleft()
        self._in_flight = len(frame)
        return frame

    def sent(self, frame: bytes) -> None:
        """`frame` (from `next_frame`) went out: stop counting it."""
        self._held -= len(frame)
        self._in_flight = 0
        self._hub.budget.give_back(len(frame))

    async def send_to(self, sock: trio.socket.SocketType) -> None:
        """Send the events as they come until dropped (then the `dropped` frame), or
        cancelled. Once dropped, the frame in flight and the `dropped` one have the
        hub's grace period to go out; after that the caller closes the connection."""
        with self._sending:
            while (frame := await self.next_frame()) is not None:
                await _send_all(sock, frame)
                self.sent(frame)
            assert self.dropped is not None
            await _send_all(sock, self.dropped)

    def release(self) -> None:
        """Give back every byte still counted (the subscription is over)."""
        self._queue.clear()
        self._in_flight = 0
        if self._held:
            self._hub.budget.give_back(self._held)
            self._held = 0

    def _drop(self, why: str) -> None:
        self.dropped = encode(
            DroppedEvent(time=time.time(), message=f"{why} and was dropped; subscribe again")
        )
        self._hub.budget.give_back(self._held - self._in_flight)
        self._held = self._in_flight
        self._queue.clear()
        self._hub.stop_publishing_to(self)
        log.info("subscriber_dropped", why=why)
        self._sending.deadline = trio.current_time() + self._hub.grace_s
        self._wake.set()


class EventHub:
    """The subscribers, and `publish` for what the daemon does. Trio thread only."""

    def __init__(
        self,
        budget: ByteBudget,
        *,
        max_events: int = MAX_QUEUED_EVENTS,
        max_bytes: int = MAX_QUEUED_BYTES,
        grace_s: float = 10.0,
    ) -> None:
        """`max_events`/`max_bytes`: how far a subscriber may fall behind; `grace_s`: how
        long a dropped one has to read its last frames before its connection closes."""
        self.budget = budget
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.grace_s = grace_s
        self.max_subscribers = MAX_SUBSCRIBERS
        self.max_per_client = MAX_PER_CLIENT
        self.idle_s = IDLE_S
        self._subscribers: set[Subscription] = set()
        self._pending: deque[Event] = deque()  # published, not fanned out yet
        self._fanning_out = False  # `fan_out` runs: `publish` only appends
        self._wake_fan_out = trio.Event()

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def subscribe(
        self,
        kinds: Iterable[EventKind] = EVENT_KINDS,
        project: str | None = None,
        *,
        client: int | None = None,
    ) -> Subscription:
        """A new subscriber, which gets every event published from now on that it wants.

        Raises:
            SubscribersFullError: at a bound, with no subscription idle enough to expire.
        """
        self._make_room(client)
        subscription = Subscription(self, kinds, project, self.max_events, client)
        self._subscribers.add(subscription)
        return subscription

    def _make_room(self, client: int | None) -> None:
        if client is not None:
            own = [each for each in self._subscribers if each.client == client]
            if len(own) >= self.max_per_client and not self._expire_idlest(own):
                raise SubscribersFullError(
                    f"this client (process {client}) holds {len(own)} subscriptions, the most "
                    "one may; close the ones it no longer reads (an editor plugin may be "
                    "opening one per buffer)"
                )
        if len(self._subscribers) >= self.max_subscribers and not self._expire_idlest(
            self._subscribers
        ):
            raise SubscribersFullError(
                f"mented serves {len(self._subscribers)} subscriptions, the most it takes, "
                f"none idle for {self.idle_s:.0f} s; close some (`mentectl watch`, editors), "
                "then subscribe again"
            )

    def _expire_idlest(self, candidates: Iterable[Subscription]) -> bool:
        """Expire the subscription idle longest, if idle for `idle_s`; whether one was."""
        idlest = min(candidates, key=lambda each: each.last_active, default=None)
        if idlest is None:
            return False
        idle = time.monotonic() - idlest.last_active
        if idle < self.idle_s:
            return False
        idlest._drop(  # noqa: SLF001 - the hub owns its subscriptions
            f"this subscription was sent nothing for {idle:.0f} s and its room was needed"
        )
        return True

    def unsubscribe(self, subscription: Subscription) -> None:
        """The subscription is over: publish nothing more to it, give back its bytes."""
        self._subscribers.discard(subscription)
        subscription.release()

    def stop_publishing_to(self, subscription: Subscription) -> None:
        """Publish nothing more to `subscription` (dropped: its last frames may still go)."""
        self._subscribers.discard(subscription)

    def publish(self, event: Event) -> None:
        """Queue `event` for every subscriber that wants it; encoded once, only if one does.

        While `fan_out` runs, only appended for it: the publisher never pays per subscriber.
        """
        if not self._fanning_out:
            self._deliver(event)
            return
        if len(self._pending) >= MAX_PENDING:
            self._pending.popleft()
            log.warning("events_not_fanned_out", pending=MAX_PENDING)
        self._pending.append(event)
        self._wake_fan_out.set()

    def _deliver(self, event: Event) -> int:
        """Offer `event` to every subscriber that wants it; how many were offered it."""
        frame: bytes | None = None
        offered = 0
        # A copy: a subscriber that falls behind leaves the set as it is offered the event.
        for subscription in list(self._subscribers):
            if subscription.wants(event):
                if frame is None:
                    frame = encode(event)
                subscription.offer(frame)
                offered += 1
        return offered

    async def fan_out(self) -> None:
        """Deliver what is published, a bounded number of offers per turn of the event
        loop, until cancelled (the daemon runs it for as long as it serves)."""
        self._fanning_out = True
        try:
            while True:
                while not self._pending:
                    self._wake_fan_out = trio.Event()
                    await self._wake_fan_out.wait()
                offered = 0
                while self._pending and offered < _OFFERS_PER_TURN:
                    offered += self._deliver(self._pending.popleft())
                await trio.lowlevel.checkpoint()
        finally:
            self._fanning_out = False
            while self._pending:  # published as the daemon stopped: still delivered
                self._deliver(self._pending.popleft())

    # What the daemon publishes, each cheap when nobody listens.

    def publish_fire(self, fire: FireRecord) -> None:
        """A hook fire (the handler's record of it); only one that named an action, and
        not a test fire (`mentectl doctor`'s): a subscriber shows the user's activity."""
        if not self._subscribers or not fire.actions or fire.test:
            return
        self.publish(
            FireEvent(
                time=fire.time,
                agent=fire.agent,
                session=fire.session,
                cwd=fire.cwd,
                command=fire.command,
                actions=list(fire.actions),
                rule_ids=list(fire.rule_ids),
                handles=[short_handle(rule_id) for rule_id in fire.rule_ids],
                mode=fire.mode,
                delivery=fire.delivery,
            )
        )

    def publish_rule(self, change: RuleChange, memory: Memory, replaces: str | None = None) -> None:
        """One memory added, superseded (`memory` the new version) or forgotten."""
        if not self._subscribers:
            return
        self.publish(
            RuleEvent(
                time=time.time(),
                change=change,
                id=memory.id,
                handle=short_handle(memory.id),
                actions=list(memory.actions),
                project=memory.project,
                agent=memory.agent,
                content=cut_text(memory.content),
                replaces=replaces,
            )
        )

    def publish_batch(self, change: RuleChange, *, added: int, forgotten: int) -> None:
        """An import or a sync, only when it changed something."""
        if not self._subscribers or not (added or forgotten):
            return
        self.publish(RuleEvent(time=time.time(), change=change, added=added, forgotten=forgotten))

    def publish_config(self, config: str | None, error: str | None) -> None:
        """A config reload: `error` when the file was invalid and the previous one stays."""
        if self._subscribers:
            self.publish(ConfigEvent(time=time.time(), config=config, error=error))


async def serve_subscription(subscription: Subscription, sock: trio.socket.SocketType) -> None:
    """Send `subscription`'s events on `sock` until the client closes its end (what it
    sends meanwhile is ignored), the subscriber is dropped, or the caller cancels."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_until_end_of_stream, sock, nursery.cancel_scope)
        with contextlib.suppress(OSError):  # the client went away (EPIPE, ECONNRESET)
            await subscription.send_to(sock)
        nursery.cancel_scope.cancel()


async def _until_end_of_stream(sock: trio.socket.SocketType, done: trio.CancelScope) -> None:
    try:
        while await sock.recv(_RECEIVE_SIZE):
            pass
    except OSError:
        pass  # reset by the peer: as good as closed
    done.cancel()


async def _send_all(sock: trio.socket.SocketType, frame: bytes) -> None:
    with memoryview(frame) as view:
        sent = 0
        while sent < len(view):
            sent += await sock.send(view[sent:])


def is_within(path: str, directory: str) -> bool:
    """Whether `path` is `directory` or inside it (both absolute and normalized)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def cut_text(text: str, limit: int = MAX_EVENT_TEXT) -> str:
    """`text` cut to `limit` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit} more characters)"
