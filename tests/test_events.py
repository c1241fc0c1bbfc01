"""The event hub: filters, order, bounded queues, dropping, and the hook's `on_fire`."""

from __future__ import annotations

import socket

import msgspec
import pytest
import trio
import trio.lowlevel
import trio.testing

from mented.actions import load_action_table
from mented.agents.pretooluse import pretooluse_event
from mented.config import Config, DeliverySettings
from mented.events import (
    EventHub,
    SubscribersFullError,
    Subscription,
    cut_text,
    serve_subscription,
)
from mented.hooks import HookHandler
from mented.matcher import Matcher
from mented.memory import Memory, MemoryType
from mented.protocol import (
    HEADER,
    MAX_EVENT_TEXT,
    ConfigEvent,
    DroppedEvent,
    FireEvent,
    FireRecord,
    RuleEvent,
    event_decoder,
)
from mented.store import Store


class Budget:
    """A daemon-wide byte bound, as the server's `_HeldBytes` keeps it."""

    def __init__(self, limit: int = 1 << 30) -> None:
        self.limit = limit
        self.total = 0

    def take(self, size: int) -> bool:
        if self.total + size > self.limit:
            return False
        self.total += size
        return True

    def give_back(self, size: int) -> None:
        self.total -= size
        assert self.total >= 0


def fire(cwd: str | None = "/home/u/repo", command: str = "git commit -m x") -> FireRecord:
    return FireRecord(
        time=1.0,
        agent="claude-code",
        session="s1",
        cwd=cwd,
        command=command,
        actions=["git-commit"],
        rule_ids=["01JDQ8Z5K3M4N5P6Q7R8S9T0VW"],
        mode="stop",
        delivery="full",
    )


def memory(project: str | None = None, content: str = "single line", id_: str = "A" * 26) -> Memory:
    return Memory(
        id=id_,
        content=content,
        tags=("trigger:git-commit",),
        project=project,
        created_at=1.0,
    )


def body(frame: bytes) -> FireEvent | RuleEvent | ConfigEvent | DroppedEvent:
    (length,) = HEADER.unpack_from(frame)
    assert len(frame) == HEADER.size + length
    return event_decoder.decode(frame[HEADER.size :])


async def drain(subscription: Subscription) -> list[object]:
    """The events queued for `subscription` now, decoded, without waiting for more."""
    events = []
    while subscription.queued:
        frame = await subscription.next_frame()
        assert frame is not None
        subscription.sent(frame)
        events.append(body(frame))
    return events


async def test_each_subscriber_gets_what_it_asked_for_in_order() -> None:
    hub = EventHub(Budget())
    everything = hub.subscribe()
    rules_only = hub.subscribe(["rule"])
    hub.publish_fire(fire())
    hub.publish_rule("added", memory())
    hub.publish_rule("superseded", memory(id_="B" * 26), replaces="A" * 26)
    hub.publish_config("/c.toml", None)
    got = await drain(everything)
    assert [type(event).__name__ for event in got] == [
        "FireEvent",
        "RuleEvent",
        "RuleEvent",
        "ConfigEvent",
    ]
    fired = got[0]
    assert isinstance(fired, FireEvent)
    assert fired.handles == ["r8s9t0vw"]
    assert (fired.agent, fired.cwd, fired.mode, fired.delivery) == (
        "claude-code",
        "/home/u/repo",
        "stop",
        "full",
    )
    assert [(e.change, e.id, e.replaces) for e in await drain(rules_only)] == [  # type: ignore[attr-defined]
        ("added", "A" * 26, None),
        ("superseded", "B" * 26, "A" * 26),
    ]


async def test_a_project_filter_keeps_what_concerns_that_directory() -> None:
    hub = EventHub(Budget())
    repo = hub.subscribe(project="/home/u/repo/")
    hub.publish_fire(fire(cwd="/home/u/repo"))
    hub.publish_fire(fire(cwd="/home/u/repo/sub"))
    hub.publish_fire(fire(cwd="/home/u/repo2"))  # a sibling whose name starts the same
    hub.publish_fire(fire(cwd=None))
    hub.publish_rule("added", memory(project=None, id_="G" * 26))  # global: applies here
    hub.publish_rule("added", memory(project="/home/u", id_="P" * 26))  # a parent's
    hub.publish_rule("added", memory(project="/home/u/repo/lib", id_="I" * 26))  # inside
    hub.publish_rule("added", memory(project="/home/other", id_="O" * 26))  # elsewhere
    hub.publish_batch("synced", added=2, forgotten=0)
    hub.publish_config(None, "bad table")
    got = await drain(repo)
    assert [e.cwd for e in got if isinstance(e, FireEvent)] == ["/home/u/repo", "/home/u/repo/sub"]
    rules = [e for e in got if isinstance(e, RuleEvent)]
    assert [e.id for e in rules] == ["G" * 26, "P" * 26, "I" * 26, msgspec.UNSET]
    assert (rules[-1].added, rules[-1].forgotten) == (2, 0)
    assert [e.error for e in got if isinstance(e, ConfigEvent)] == ["bad table"]


async def test_batches_that_changed_nothing_and_fires_without_actions_are_not_published() -> None:
    hub = EventHub(Budget())
    subscription = hub.subscribe()
    hub.publish_batch("synced", added=0, forgotten=0)
    hub.publish_fire(FireRecord(time=1.0, agent="claude-code", command="session start (startup)"))
    assert subscription.queued == 0


async def test_a_batch_event_leaves_out_what_a_single_change_has() -> None:
    hub = EventHub(Budget())
    subscription = hub.subscribe()
    hub.publish_batch("imported", added=3, forgotten=1)
    hub.publish_rule("forgotten", memory())
    frames = [await subscription.next_frame() for _ in range(2)]
    batch, single = (msgspec.json.decode(frame[HEADER.size :]) for frame in frames if frame)
    assert batch.keys() == {"type", "kind", "time", "change", "added", "forgotten"}
    assert single["agent"] is None
    assert single["replaces"] is None
    assert "added" not in single


async def test_long_content_is_cut_and_says_so() -> None:
    hub = EventHub(Budget())
    subscription = hub.subscribe()
    hub.publish_rule("added", memory(content="x" * 60_000))
    (event,) = await drain(subscription)
    assert isinstance(event, RuleEvent)
    assert isinstance(event.content, str)
    assert event.content.startswith("x" * MAX_EVENT_TEXT)
    assert event.content.endswith(f"… ({60_000 - MAX_EVENT_TEXT} more characters)")
    assert cut_text("short") == "short"


async def test_a_subscriber_that_falls_behind_is_dropped_and_its_bytes_given_back() -> None:
    budget = Budget()
    hub = EventHub(budget, max_events=5)
    stuck = hub.subscribe()
    reading = hub.subscribe()
    for index in range(5):
        hub.publish_fire(fire(command=f"git commit -m {index}"))
    assert stuck.queued == 5
    assert budget.total > 0
    await drain(reading)
    hub.publish_fire(fire(command="git commit -m 5"))  # the sixth: one too many for `stuck`
    assert stuck.dropped is not None
    assert stuck.queued == 0
    assert hub.subscribers == 1  # nothing more is published to it
    assert await stuck.next_frame() is None
    dropped = body(stuck.dropped)
    assert isinstance(dropped, DroppedEvent)
    assert dropped.message == (
        "this subscriber fell 5 events behind and was dropped; subscribe again"
    )
    assert [e.command for e in await drain(reading)] == ["git commit -m 5"]  # type: ignore[attr-defined]
    hub.unsubscribe(reading)
    hub.unsubscribe(stuck)
    assert budget.total == 0


async def test_bytes_bound_a_queue_too_and_the_daemon_wide_budget_is_kept() -> None:
    hub = EventHub(Budget(), max_bytes=10_000)
    by_bytes = hub.subscribe()
    for _ in range(4):  # ~4.2 KiB each: the third would pass 10,000 bytes
        hub.publish_rule("added", memory(content="y" * 5000))
    assert by_bytes.dropped is not None
    assert "fell 10000 bytes of events behind" in body(by_bytes.dropped).message  # type: ignore[union-attr]
    budget = Budget(limit=1000)
    tight = EventHub(budget)
    subscription = tight.subscribe()
    tight.publish_rule("added", memory(content="z" * 2000))
    assert subscription.dropped is not None
    assert "holds too much for clients that do not read" in body(subscription.dropped).message  # type: ignore[union-attr]
    assert budget.total == 0


async def test_served_on_a_socket_until_the_client_closes_then_dropped_frame_after_a_stall() -> (
    None
):
    hub = EventHub(Budget(), max_events=3, grace_s=5)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        subscription = hub.subscribe()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                serve_subscription, subscription, trio.socket.from_stdlib_socket(ours)
            )
            hub.publish_config("/c.toml", None)
            await trio.sleep(0.05)
            theirs.settimeout(5)
            first = theirs.recv(1 << 16)
            assert isinstance(body(first), ConfigEvent)
            # Nobody reads: the kernel's buffer fills, then the queue, then it is dropped.
            command = "git commit -m " + "x" * 900
            while subscription.dropped is None:
                hub.publish_fire(fire(command=command))
                await trio.lowlevel.checkpoint()
            # The client reads at last: whole frames, the last of them `dropped`.
            received = bytearray()
            frames: list[object] = []
            while not frames or not isinstance(frames[-1], DroppedEvent):
                received += await trio.to_thread.run_sync(theirs.recv, 1 << 16)
                while len(received) >= HEADER.size:
                    (length,) = HEADER.unpack_from(received)
                    if len(received) < HEADER.size + length:
                        break
                    frames.append(body(bytes(received[: HEADER.size + length])))
                    del received[: HEADER.size + length]
            assert all(isinstance(frame, FireEvent) for frame in frames[:-1])
            assert not received  # nothing after it: the server closes the connection
        assert hub.subscribers == 0


async def test_the_hook_handler_reports_each_fire_that_named_an_action(store: Store) -> None:
    config = Config(delivery=DeliverySettings(default="context"))
    seen: list[FireRecord] = []
    handler = HookHandler(store, Matcher(load_action_table(config)), config, on_fire=seen.append)
    store.store("single line", memory_type=MemoryType.PROCEDURAL, tags=["trigger:git-commit"])
    handler.handle("claude-code", pretooluse_event("git commit -m x", cwd="/r", session="s"))
    handler.handle("claude-code", pretooluse_event("ls -la", cwd="/r", session="s"))
    assert [(fire.actions, fire.delivery) for fire in seen] == [(["git-commit"], "full")]


async def test_a_client_that_goes_away_ends_its_subscription_quietly() -> None:
    hub = EventHub(Budget())
    for close in ("before reading", "with events unread"):
        ours, theirs = socket.socketpair()
        with ours:
            subscription = hub.subscribe()
            with trio.fail_after(5):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(
                        serve_subscription, subscription, trio.socket.from_stdlib_socket(ours)
                    )
                    if close == "with events unread":
                        hub.publish_config("/c.toml", None)
                        await trio.sleep(0.01)
                    theirs.close()
                    for _ in range(100):  # sending into a closed socket: EPIPE, not a crash
                        hub.publish_config("/c.toml", None)
                        await trio.lowlevel.checkpoint()
            hub.unsubscribe(subscription)
    assert hub.subscribers == 0


async def test_publishing_costs_the_publisher_nothing_per_subscriber() -> None:
    # Fanned out on the hook's path, 300 subscribers took a hook from 1.1 to 48 ms.
    hub = EventHub(Budget())
    subscriptions = [hub.subscribe(client=n) for n in range(200)]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.fan_out)
        await trio.testing.wait_all_tasks_blocked()
        for n in range(3):
            hub.publish_fire(fire(command=f"git commit -m {n}"))
            # Nothing offered by the publisher itself: fan-out does it after.
            assert all(subscription.queued == 0 for subscription in subscriptions)
        await trio.testing.wait_all_tasks_blocked()
        for subscription in subscriptions:
            assert [e.command for e in await drain(subscription)] == [  # type: ignore[union-attr]
                "git commit -m 0",
                "git commit -m 1",
                "git commit -m 2",
            ]
        nursery.cancel_scope.cancel()


async def test_subscriptions_are_bounded_per_client_and_in_all() -> None:
    hub = EventHub(Budget())
    hub.max_subscribers, hub.max_per_client = 6, 3
    mine = [hub.subscribe(client=1) for _ in range(3)]
    with pytest.raises(SubscribersFullError, match=r"process 1\) holds 3 subscriptions"):
        hub.subscribe(client=1)
    others = [hub.subscribe(client=2), hub.subscribe(client=3), hub.subscribe()]
    with pytest.raises(SubscribersFullError, match="serves 6 subscriptions"):
        hub.subscribe(client=4)
    # Idle long enough, the one sent nothing for longest expires to make room.
    hub.idle_s = 0.0
    hub.publish_config(None, None)  # sent to each in turn: the first is the idlest now
    newest = hub.subscribe(client=4)
    assert hub.subscribers == 6
    expired = [s for s in [*mine, *others] if s.dropped is not None]
    assert len(expired) == 1
    assert b"was sent nothing for" in (expired[0].dropped or b"")
    assert newest.dropped is None
