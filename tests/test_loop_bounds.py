"""The event loop only routes: no request holds it, whatever a client sends or the data holds.

Each attack of issue 22 against the real daemon, with a bystander hook (the real
shim) that must still print its rule meanwhile, and the daemon's own figure of
the longest event-loop step (`status`'s `loop_lag_ms`, measured inside it by a
trio instrument) asserted under a bound. The bound is generous, `LAG_BOUND_MS`,
so as not to flake on a loaded 2-core machine: each attack held the loop for
seconds before (docs/reliability.md has the figures, before and after).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from mented.agents.pretooluse import pretooluse_event, text_of_answer
from mented.events import MAX_PER_CLIENT
from mented.protocol import (
    ErrorCode,
    ErrorReply,
    RecalledReply,
    RecallFactsRequest,
    ReindexedReply,
    ReindexRequest,
    StatusReply,
    StatusRequest,
    StoredReply,
    StoreRequest,
    SubscribedReply,
    SubscribeRequest,
    encode,
    frame,
    recv_frame,
    reply_decoder,
)
from mented.sessions import MAX_SESSIONS, SessionKey, SessionMemory
from mented.store import Store, StoreItem
from mented_client.connection import DaemonError
from tests.conftest import DaemonProcess, connect_unix, raw_exchange, split_frames
from tests.reliability import ConstrainedDaemon, record_figures, rss_kib
from tests.test_hostile_clients import RULE, bystander_hooks, hook_event

LAG_BOUND_MS = 250.0  # each attack below held the loop 0.35 to 95 s on main
FACTS = int(os.environ.get("MENTED_ATTACK_FACTS", "20000"))


def loop_lag_ms(daemon: DaemonProcess) -> float:
    with daemon.client() as client:
        status = client.expect(StatusRequest(), StatusReply)
    assert status.loop_lag_ms is not None
    return status.loop_lag_ms


def seeded_daemon(root: Path, items: Iterator[StoreItem]) -> DaemonProcess:
    """A daemon on a store holding `items` and the bystander's rule, its index caught up."""
    daemon = DaemonProcess(root)
    store = Store(daemon.data_dir, sync=False)
    try:
        store.store_many(items)
        store.store(RULE, tags=["trigger:git-commit"])
    finally:
        store.close()
    daemon.start()
    deadline = time.monotonic() + 120
    while True:  # the first start builds the index in a worker: wait until it is done
        try:
            with daemon.client(timeout=60) as client:
                client.expect(RecallFactsRequest(query="nothing matches this"), RecalledReply)
        except DaemonError as exc:
            assert exc.code == ErrorCode.RECALL_UNAVAILABLE, exc
            assert time.monotonic() < deadline, "the index was never built"
            time.sleep(0.2)
        else:
            return daemon


def in_background(work: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """`work()` in a thread; what it returned or raised lands in the list."""
    results: list[object] = []

    def run() -> None:
        try:
            results.append(work())
        except Exception as exc:  # noqa: BLE001 - the caller asserts on it
            results.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, results


# ------------------------------------------------- 1. recall during a reindex


def test_a_recall_during_a_reindex_does_not_hold_the_loop(short_tmp: Path) -> None:
    # The recall waited for the index lock on the event loop: every other request
    # waited with it, 3.7 to 6.2 s at 60,000 facts.
    daemon = seeded_daemon(
        short_tmp,
        (StoreItem(content=f"fact {n} about the staging database") for n in range(FACTS)),
    )
    try:
        before = loop_lag_ms(daemon)

        def reindex() -> object:
            with daemon.client(timeout=120) as client:
                return client.expect(ReindexRequest(), ReindexedReply)

        def recall() -> object:
            with daemon.client(timeout=120) as client:
                return client.expect(RecallFactsRequest(query="staging database"), RecalledReply)

        rebuild, rebuilt = in_background(reindex)
        time.sleep(0.3)
        searches = [in_background(recall) for _ in range(3)]
        hooks = bystander_hooks(daemon, 5)
        rebuild.join()
        for search, _ in searches:
            search.join()
        lag = loop_lag_ms(daemon)
    finally:
        daemon.stop()
    assert isinstance(rebuilt[0], ReindexedReply), rebuilt
    assert rebuilt[0].facts == FACTS
    for _, answer in searches:
        # Refused while the rebuild runs, or answered after it: never the loop held.
        if isinstance(answer[0], DaemonError):
            assert answer[0].code == ErrorCode.RECALL_UNAVAILABLE, answer
            assert "being rebuilt" in str(answer[0])
        else:
            assert isinstance(answer[0], RecalledReply), answer
    assert len(hooks) >= 4, "the bystander's hooks went silent during the reindex"
    assert lag < LAG_BOUND_MS, f"the event loop was held {lag:.0f} ms"
    record_figures(
        "recall_during_reindex",
        facts=FACTS,
        loop_lag_before_ms=round(before, 1),
        loop_lag_ms=round(lag, 1),
        reindex_s=round(rebuilt[0].seconds, 2),
    )


# ---------------------------------- 2. recall over matches the caller may not see


def test_recall_over_others_facts_costs_the_loop_nothing(short_tmp: Path) -> None:
    # Every one of another project's facts matched: each recall fetched ever larger
    # candidate sets on the event loop until the index ran out, 2.5 to 3.8 s at 60,000.
    others = (
        StoreItem(content=f"fact {n} about the staging database", project="/work/other")
        for n in range(FACTS)
    )
    daemon = seeded_daemon(short_tmp, others)
    mine = ["the staging database is stg-db-2", "staging database backups run at 3am"]
    try:
        with daemon.client() as client:
            for content in mine:
                client.expect(StoreRequest(content=content, project="/work/app"), StoredReply)

        def recall() -> object:
            with daemon.client(timeout=120) as client:
                return client.expect(
                    RecallFactsRequest(query="staging database", cwd="/work/app/src", k=5),
                    RecalledReply,
                )

        searches = [in_background(recall) for _ in range(4)]
        hooks = bystander_hooks(daemon, 5)
        for search, _ in searches:
            search.join()
        lag = loop_lag_ms(daemon)
    finally:
        daemon.stop()
    for _, answer in searches:
        assert isinstance(answer[0], RecalledReply), answer
        assert sorted(hit.memory.content for hit in answer[0].hits) == sorted(mine)
    assert len(hooks) >= 4, "the bystander's hooks went silent during the recalls"
    assert lag < LAG_BOUND_MS, f"the event loop was held {lag:.0f} ms"
    record_figures("recall_over_hidden_facts", facts=FACTS, loop_lag_ms=round(lag, 1))


# ------------------------------- a working directory no directory can have


def hook_frame(event: bytes) -> bytes:
    return frame(b'{"type":"hook","agent":"claude-code","event":' + event + b"}")


def test_a_megabyte_working_directory_does_not_hold_the_loop(daemon: DaemonProcess) -> None:
    # Walking up 60 KB of `/a/a/...` (for its repository, its project, who may see
    # what) held the event loop 2.8 s; 200 KB more than 15 s; a megabyte, minutes.
    with daemon.client() as client:
        client.expect(StoreRequest(content=RULE, tags=["trigger:git-commit"]), StoredReply)
    event = pretooluse_event(
        "git commit -m x", cwd="/a" * 500_000, session="huge", tool_use_id="toolu_huge"
    )
    thread, answers = in_background(lambda: raw_exchange(daemon.socket, hook_frame(event), 120))
    hooks = bystander_hooks(daemon, 3)
    thread.join()
    lag = loop_lag_ms(daemon)
    (answer,) = split_frames(answers[0])  # type: ignore[arg-type]
    assert RULE in (text_of_answer(answer) or ""), answer[:200]
    assert len(hooks) >= 2, "the bystander's hooks went silent"
    assert lag < LAG_BOUND_MS, f"the event loop was held {lag:.0f} ms"


# --------------------------------------------- 7. many sessions, each one new


def test_new_sessions_past_the_bound_do_not_hold_the_loop(short_tmp: Path) -> None:
    # Past 4,096 sessions each new session's first hook decoded and sorted every
    # stored session on the loop: p50 3.4 -> 39.6 ms, max 351 ms.
    daemon = DaemonProcess(short_tmp)
    memory = SessionMemory(daemon.data_dir / "sessions", ttl_s=3600)
    try:
        handed = [f"rule-{n:022d}" for n in range(200)]
        for n in range(MAX_SESSIONS):
            memory.add(SessionKey("claude-code", f"earlier-{n}"), handed)
    finally:
        memory.close()
    daemon.start()
    try:
        with daemon.client() as client:
            client.expect(StoreRequest(content=RULE, tags=["trigger:git-commit"]), StoredReply)
        answered = 0
        for call in range(200):  # each a new session, handed the rule
            (answer,) = split_frames(raw_exchange(daemon.socket, hook_frame(hook_event(call))))
            answered += RULE in (text_of_answer(answer) or "")
        hooks = bystander_hooks(daemon, 3, first_call=1000)
        lag = loop_lag_ms(daemon)
    finally:
        daemon.stop()
    assert answered == 200
    assert len(hooks) >= 2, "the bystander's hooks went silent"
    assert lag < LAG_BOUND_MS, f"the event loop was held {lag:.0f} ms"
    record_figures("new_sessions_past_the_bound", sessions=MAX_SESSIONS, loop_lag_ms=round(lag, 1))


# ------------------------------------- 6. caches keyed by what a client sent


def test_hooks_with_megabyte_working_directories_leave_no_memory_behind(
    daemon: DaemonProcess,
) -> None:
    # A 1 MB `cwd` was kept whole as a key in two caches: 250 such hooks added 478 MiB.
    with daemon.client() as client:
        client.expect(StoreRequest(content=RULE, tags=["trigger:git-commit"]), StoredReply)
    assert daemon.proc is not None
    bystander_hooks(daemon, 1, first_call=5000)
    before = rss_kib(daemon.proc.pid)
    for n in range(150):
        cwd = f"/work/{n}/" + "x" * 1_000_000
        event = pretooluse_event(
            "git commit -m x", cwd=cwd, session=f"big-{n}", tool_use_id=f"toolu_big_{n}"
        )
        (answer,) = split_frames(raw_exchange(daemon.socket, hook_frame(event)))
        assert RULE in (text_of_answer(answer) or "")
    hooks = bystander_hooks(daemon, 2, first_call=6000)
    grown_mib = (rss_kib(daemon.proc.pid) - before) / 1024
    lag = loop_lag_ms(daemon)
    assert len(hooks) >= 1
    # Each hook's megabyte is freed with it; before, 150 of them kept about 290 MiB.
    assert grown_mib < 48, f"the daemon grew {grown_mib:.0f} MiB"
    assert lag < LAG_BOUND_MS, f"the event loop was held {lag:.0f} ms"
    record_figures("megabyte_cwd_hooks", hooks=150, rss_growth_mib=round(grown_mib, 1))


# ------------------------------------------------------- 5. subscriptions


def subscribe(daemon: DaemonProcess) -> tuple[socket.socket, object]:
    sock = connect_unix(daemon.socket)
    sock.sendall(encode(SubscribeRequest()))
    return sock, reply_decoder.decode(recv_frame(sock))


def test_long_lived_clients_cannot_take_the_hooks_connection_slots(short_tmp: Path) -> None:
    # 8,192 idle subscriptions took every connection slot: from then on every hook got
    # `busy`, and no agent any rule. Here 64 descriptors: 32 connections served.
    daemon = ConstrainedDaemon(short_tmp, nofile=64)
    daemon.start()
    held: list[socket.socket] = []
    try:
        with daemon.client() as client:
            client.expect(StoreRequest(content=RULE, tags=["trigger:git-commit"]), StoredReply)
        refused = 0
        for _ in range(40):
            sock, reply = subscribe(daemon)
            if isinstance(reply, SubscribedReply):
                held.append(sock)
            else:
                assert isinstance(reply, ErrorReply), reply
                assert reply.code == ErrorCode.BUSY
                refused += 1
                sock.close()
        hooks = bystander_hooks(daemon, 3)
        for sock in held:
            sock.close()
        time.sleep(0.5)  # the daemon counts them out once it sees them close
        lag = loop_lag_ms(daemon)
    finally:
        for sock in held:
            sock.close()
        daemon.stop()
    assert len(held) == 28  # the last 4 slots are the hooks'
    assert refused == 12
    assert len(hooks) >= 2, "the hooks got no slot"
    assert lag < LAG_BOUND_MS


def test_one_client_holds_a_bounded_number_of_subscriptions(daemon: DaemonProcess) -> None:
    held = []
    try:
        for _ in range(MAX_PER_CLIENT):
            sock, reply = subscribe(daemon)
            assert isinstance(reply, SubscribedReply), reply
            held.append(sock)
        sock, reply = subscribe(daemon)
        sock.close()
    finally:
        for each in held:
            each.close()
    assert isinstance(reply, ErrorReply)
    assert reply.code == ErrorCode.BUSY
    assert f"holds {MAX_PER_CLIENT} subscriptions" in reply.message
    assert "one per buffer" in reply.message


def test_hooks_cost_the_same_with_many_subscribers(short_tmp: Path) -> None:
    # Fanned out on the hook's path: 300 subscribers took hooks from 1.1 to 48 ms p50.
    daemon = DaemonProcess(short_tmp)
    daemon.start()
    held = []
    try:
        with daemon.client() as client:
            client.expect(StoreRequest(content=RULE, tags=["trigger:git-commit"]), StoredReply)
        for _ in range(MAX_PER_CLIENT):
            sock, reply = subscribe(daemon)
            assert isinstance(reply, SubscribedReply)
            held.append(sock)
        for call in range(300):
            (answer,) = split_frames(raw_exchange(daemon.socket, hook_frame(hook_event(call))))
            assert RULE in (text_of_answer(answer) or "")
        hooks = bystander_hooks(daemon, 3, first_call=1000)
        lag = loop_lag_ms(daemon)
    finally:
        for sock in held:
            sock.close()
        daemon.stop()
    assert len(hooks) >= 2
    assert lag < LAG_BOUND_MS, f"the event loop was held {lag:.0f} ms"
    record_figures("hooks_with_subscribers", subscribers=MAX_PER_CLIENT, loop_lag_ms=round(lag, 1))


# ---------------------------------------------- 3. path patterns that backtracked


def test_a_backtracking_path_pattern_does_not_hold_the_loop(short_tmp: Path) -> None:
    # `paths = ["**/a/**/a/**/a/**/a/**/b"]` (the config accepts it) and an edit of a
    # 90-level-deep path held the loop 3.3 to 4.2 s (95 s with five `a` segments).
    daemon = DaemonProcess(short_tmp)
    daemon.write_config(
        "[actions.deep-edit]\n"
        'description = "an edit deep down"\n'
        'paths = ["**/a/**/a/**/a/**/a/**/a/**/b"]\n'
    )
    daemon.start()
    deep_rule = "Deep files: ask before editing."
    try:
        with daemon.client() as client:
            client.expect(StoreRequest(content=RULE, tags=["trigger:git-commit"]), StoredReply)
            client.expect(StoreRequest(content=deep_rule, tags=["trigger:deep-edit"]), StoredReply)
        deep = "/work/" + "/".join(["a"] * 90)
        answers = []
        for n, name in enumerate(["c.txt", "b"]):
            event = pretooluse_event(
                "",
                cwd="/work",
                session=f"deep-{n}",
                tool_use_id=f"toolu_deep_{n}",
                tool_name="Edit",
                tool_input={"file_path": f"{deep}/{name}", "old_string": "x", "new_string": "y"},
            )
            (answer,) = split_frames(raw_exchange(daemon.socket, hook_frame(event), 120))
            answers.append(text_of_answer(answer) or "")
        hooks = bystander_hooks(daemon, 3)
        lag = loop_lag_ms(daemon)
    finally:
        daemon.stop()
    assert deep_rule not in answers[0]
    assert deep_rule in answers[1]  # matched, and the rule handed over
    assert len(hooks) >= 2
    assert lag < LAG_BOUND_MS, f"the event loop was held {lag:.0f} ms"
    record_figures("backtracking_path_pattern", depth=90, loop_lag_ms=round(lag, 1))
