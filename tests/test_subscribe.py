"""`subscribe` and `actions` against the real daemon: the event stream, its filters, a
subscriber that never reads (dropped, while hooks keep their latency: measured here)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

from mented.agents.pretooluse import pretooluse_event
from mented.memory import short_handle
from mented.portable import export_store
from mented.protocol import (
    ActionsReply,
    ActionsRequest,
    ConfigEvent,
    DroppedEvent,
    ErrorReply,
    Event,
    FireEvent,
    ForgetRequest,
    ForgottenReply,
    RuleEvent,
    StatusReply,
    StatusRequest,
    StoredReply,
    StoreRequest,
    SubscribedReply,
    SubscribeRequest,
    SupersededReply,
    SupersedeRequest,
    encode,
    event_decoder,
    recv_frame,
    reply_decoder,
)
from mented.store import Store
from mented_client.connection import Client, DaemonError
from tests.conftest import DaemonProcess, connect_unix
from tests.reliability import record_figures

COMMIT = "trigger:git-commit"


class Subscriber:
    """A raw subscription: the `subscribed` answer, then one event per `next()`."""

    def __init__(self, daemon: DaemonProcess, **request: object) -> None:
        self.sock = connect_unix(daemon.socket, timeout=10)
        self.sock.sendall(encode(SubscribeRequest(**request)))  # type: ignore[arg-type]
        self.reply = reply_decoder.decode(recv_frame(self.sock))

    def next(self) -> Event:
        return event_decoder.decode(recv_frame(self.sock))

    def close(self) -> None:
        self.sock.close()


def hook(client: Client, command: str, *, cwd: str = "/home/u/repo", session: str = "s1") -> None:
    client.hook("claude-code", pretooluse_event(command, cwd=cwd, session=session))


def test_fires_and_changes_arrive_in_order_with_their_fields(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    watcher = Subscriber(daemon)
    assert watcher.reply == SubscribedReply(kinds=["fire", "rule", "config"], project=None)
    with daemon.client() as client:
        rule = client.expect(
            StoreRequest(content="commit messages: single line", tags=[COMMIT]), StoredReply
        ).id
        hook(client, "git commit -m 'fix: x'")
        hook(client, "ls -la")  # names no action: not published
        new = client.expect(SupersedeRequest(id=rule, content="no emojis"), SupersededReply).id
        fact = client.expect(StoreRequest(content="we deploy on fridays"), StoredReply).id
        client.expect(ForgetRequest(id=fact), ForgottenReply)
    other = Store(tmp_path / "other", sync=False)
    other.store("push with --force-with-lease", tags=["trigger:git-push"])
    export_store(other, tmp_path / "rules.jsonl")
    other.close()
    daemon.mentectl("import", str(tmp_path / "rules.jsonl"))
    daemon.reload()
    daemon.write_config("[hook\n")
    with pytest.raises(DaemonError):
        daemon.reload()

    added = watcher.next()
    assert isinstance(added, RuleEvent)
    assert (added.change, added.id, added.handle, added.actions, added.content) == (
        "added",
        rule,
        short_handle(rule),
        ["git-commit"],
        "commit messages: single line",
    )
    assert (added.project, added.agent, added.replaces) == (None, None, None)
    fired = watcher.next()
    assert isinstance(fired, FireEvent)
    assert (fired.agent, fired.session, fired.cwd, fired.command) == (
        "claude-code",
        "s1",
        "/home/u/repo",
        "git commit -m 'fix: x'",
    )
    assert (fired.actions, fired.rule_ids, fired.handles) == (
        ["git-commit"],
        [rule],
        [short_handle(rule)],
    )
    assert (fired.mode, fired.delivery) == ("stop", "full")
    superseded = watcher.next()
    assert isinstance(superseded, RuleEvent)
    assert (superseded.change, superseded.id, superseded.replaces) == ("superseded", new, rule)
    stored_fact, forgotten = watcher.next(), watcher.next()
    assert isinstance(stored_fact, RuleEvent)
    assert isinstance(forgotten, RuleEvent)
    assert (stored_fact.change, stored_fact.id, stored_fact.actions) == ("added", fact, [])
    assert (forgotten.change, forgotten.id) == ("forgotten", fact)
    imported = watcher.next()
    assert isinstance(imported, RuleEvent)
    assert (imported.change, imported.added, imported.forgotten) == ("imported", 1, 0)
    reloaded, refused = watcher.next(), watcher.next()
    assert isinstance(reloaded, ConfigEvent)
    assert isinstance(refused, ConfigEvent)
    assert reloaded.config == str(daemon.config_path)
    assert reloaded.error is None
    assert refused.error is not None
    assert "previous configuration stays in force" in refused.error
    assert all(fired.time <= event.time <= time.time() for event in (superseded, imported, refused))
    watcher.close()


def test_filters_by_kind_and_by_project(daemon: DaemonProcess) -> None:
    rules_here = Subscriber(daemon, kinds=["rule"], project="/home/u/repo/")
    assert rules_here.reply == SubscribedReply(kinds=["rule"], project="/home/u/repo")
    fires_here = Subscriber(daemon, kinds=["fire"], project="/home/u/repo")
    with daemon.client() as client:

        def store(content: str, project: str | None) -> str:
            request = StoreRequest(content=content, tags=[COMMIT], project=project)
            return client.expect(request, StoredReply).id

        everywhere = store("global", None)
        store("another project's", "/home/u/other")
        parent = store("the parent's", "/home/u")
        hook(client, "git commit -m a", cwd="/home/u/repo/src")
        hook(client, "git commit -m b", cwd="/home/u/repository")  # not inside /home/u/repo
        hook(client, "git commit -m c", cwd="/home/u/repo", session="s2")
        last = store("the last", None)
    assert [rules_here.next().id for _ in range(3)] == [everywhere, parent, last]  # type: ignore[union-attr]
    fired = [fires_here.next() for _ in range(2)]
    assert [event.command for event in fired] == ["git commit -m a", "git commit -m c"]  # type: ignore[union-attr]
    for subscriber in (rules_here, fires_here):  # nothing else came: the next is a timeout
        subscriber.sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            subscriber.next()
        subscriber.close()


def test_bad_subscriptions_are_refused(daemon: DaemonProcess) -> None:
    unknown = Subscriber(daemon, kinds=["fire", "keystrokes"])
    assert isinstance(unknown.reply, ErrorReply)
    assert unknown.reply.code == "bad_request"
    assert "keystrokes" in unknown.reply.message
    relative = Subscriber(daemon, project="repo")
    assert isinstance(relative.reply, ErrorReply)
    assert relative.reply.code == "bad_request"
    assert "absolute" in relative.reply.message


def test_a_subscription_outlives_the_idle_timeout_and_ends_at_shutdown(
    daemon: DaemonProcess,
) -> None:
    started = time.monotonic()
    daemon.stop()  # the baseline: a stop with nothing to wait for, on this machine, now
    baseline = time.monotonic() - started
    daemon.write_config("[daemon]\nconnection_idle_s = 0.3\n")
    daemon.start()
    watcher = Subscriber(daemon, kinds=["rule"])
    time.sleep(0.9)  # three idle timeouts
    with daemon.client() as client:
        stored = client.expect(StoreRequest(content="still here", tags=[COMMIT]), StoredReply)
        assert client.expect(StatusRequest(), StatusReply).subscribers == 1
    assert watcher.next().id == stored.id  # type: ignore[union-attr]
    started = time.monotonic()
    assert daemon.stop() == 0
    # Not the 5 s shutdown grace: it was ended at once.
    assert time.monotonic() - started < 2 * baseline + 2.5, baseline
    assert watcher.sock.recv(1) == b""
    watcher.close()


def test_actions_lists_the_table_in_force(daemon: DaemonProcess) -> None:
    daemon.write_config(
        '[actions.db-migrate]\ndescription = "change the schema"\n'
        'shapes = [{ program = "alembic", subcommand = ["upgrade"] }]\n'
    )
    daemon.reload()
    with daemon.client() as client:
        actions = client.expect(ActionsRequest(), ActionsReply).actions
    names = [action.name for action in actions]
    assert names == sorted(names)
    assert {"git-commit", "pr-create", "db-migrate"} <= set(names)
    described = {action.name: action.description for action in actions}
    assert described["db-migrate"] == "change the schema"
    assert described["git-commit"]


ROUNDS, HOOKS_PER_ROUND = 3, 100  # 300 hooks each way, interleaved


def hook_latency_ms(client: Client, name: str) -> float:
    """One hook request that fires (a new session each time: its rules go in full)."""
    event = pretooluse_event(f"git commit -m '{name}'", cwd="/home/u/repo", session=name)
    started = time.perf_counter()
    out = client.hook("claude-code", event)
    elapsed = (time.perf_counter() - started) * 1000
    assert b"single line" in out
    return elapsed


def percentile(latencies: list[float], fraction: float) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def test_a_subscriber_that_never_reads_is_dropped_and_hooks_keep_their_latency(
    daemon: DaemonProcess,
) -> None:
    series: dict[str, list[float]] = {"none": [], "stuck": [], "until dropped": []}
    with daemon.client() as client:
        client.expect(StoreRequest(content="single line", tags=[COMMIT]), StoredReply)
        for index in range(50):
            hook_latency_ms(client, f"warm-up {index}")
        # Side by side: rounds without a subscriber, and with one that never reads.
        for round_ in range(ROUNDS):
            for index in range(HOOKS_PER_ROUND):
                series["none"].append(hook_latency_ms(client, f"none {round_} {index}"))
            stuck = Subscriber(daemon, kinds=["fire"])
            for index in range(HOOKS_PER_ROUND):
                series["stuck"].append(hook_latency_ms(client, f"stuck {round_} {index}"))
            stuck.close()
        # One that never reads, until its queue (1,000 events) and the socket are full.
        stuck = Subscriber(daemon, kinds=["fire"])
        while client.expect(StatusRequest(), StatusReply).subscribers:
            name = f"until {len(series['until dropped'])}"
            series["until dropped"].append(hook_latency_ms(client, name))
            assert len(series["until dropped"]) < 20_000, "never dropped"
    # It reads at last: the events that went out before, then `dropped`, then the end.
    received = []
    while not received or not isinstance(received[-1], DroppedEvent):
        received.append(stuck.next())
    assert all(isinstance(event, FireEvent) for event in received[:-1])
    assert received[-1].message == (  # type: ignore[union-attr]
        "this subscriber fell 1000 events behind and was dropped; subscribe again"
    )
    assert stuck.sock.recv(1) == b""
    stuck.close()

    figures = {
        name: (statistics.median(values), percentile(values, 0.99), max(values))
        for name, values in series.items()
    }
    print()
    for name, (median, p99, worst) in figures.items():
        print(
            f"{len(series[name]):5} hooks, subscriber {name:13}: "
            f"p50 {median:.2f} ms  p99 {p99:.2f} ms  max {worst:.2f} ms"
        )
    print(f"events the dropped subscriber read before the `dropped` frame: {len(received) - 1}")
    record_figures(
        "subscriber_never_reads",
        **{
            f"{name.replace(' ', '_')}_{stat}_ms": round(value, 2)
            for name, values in figures.items()
            for stat, value in zip(("p50", "p99", "max"), values, strict=True)
        },
        hooks_until_dropped=len(series["until dropped"]),
    )
    # Generous: the machine is shared, and "until dropped" runs after the interleaved
    # rounds (the load may have changed). A stuck subscriber costs a hook a queue
    # append; one that blocked the daemon's sends would cost seconds.
    base_p50, base_p99, _ = figures["none"]
    for name in ("stuck", "until dropped"):
        median, p99, _ = figures[name]
        assert median < 5 * base_p50 + 10, (name, figures)
        assert p99 < 10 * base_p99 + 100, (name, figures)
