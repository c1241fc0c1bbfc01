"""Loop lag under attack: a bystander's hooks and the daemon's event loop while a hostile load runs.

Every hook of every session goes through the daemon's one trio thread (issue 22).
Each attack runs against a daemon of its own; meanwhile a bystander sends commit
hooks, one connection each, as the shim does, and each must be handed its rule.
Measured per attack:

- the bystander's hook round trips, before the attack (quiet) and while it runs;
- the daemon's longest event-loop step while the bystander's quiet hooks ran
  (first hooks after a start included), then while the attack ran (`status`'s
  `loop_lag_since_ms`, a trio instrument in the daemon, `mented.looplag`: the
  longest step since the previous `status`), and the task that took it.

The attacks:

- `reindex`: a `reindex` of every fact, and three `recall`s sent while it runs
  (a recall waited for the index lock on the loop: seconds for every request);
- `hidden facts`: `recall`s from one project while all the store's facts are
  another project's and match the query (each recall walked them all on the loop);
- `path pattern`: edits of a 90-level path under a configured
  `**/a/**/a/**/a/**/a/**/a/**/b` (the regular expression backtracked: seconds per edit);
- `slow clients`: a client's full share of subscriptions that never read, and
  connections that sent half a request, while hooks fire events to them.

`python -m mented_client.bench looplag` runs it alone; `mentectl bench` runs it too.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import msgspec

from mented.agents.pretooluse import pretooluse_event, text_of_answer
from mented.events import MAX_PER_CLIENT
from mented.protocol import (
    HEADER,
    ErrorCode,
    HookRequest,
    RecalledReply,
    RecallFactsRequest,
    ReindexedReply,
    ReindexRequest,
    Reply,
    Request,
    StatusReply,
    StatusRequest,
    SubscribeRequest,
    encode,
    recv_frame,
)
from mented.store import Store, StoreItem
from mented_client.bench.corpus import AGENT
from mented_client.bench.plans import Progress
from mented_client.bench.processes import Daemon, hook_frame, one_shot
from mented_client.bench.timing import BenchError, Summary, summarize
from mented_client.connection import Client, DaemonError

RULE = "commit messages: a single line with a conventional prefix"
DEEP_RULE = "deep files: ask before editing them"
DEEP_PATTERN = "**/a/**/a/**/a/**/a/**/a/**/b"
DEEP_LEVELS = 90
QUIET_HOOKS = 20  # the bystander's hooks before each attack
_TIMEOUT_S = 300.0
_WORK = "/work/app"
_OTHER = "/work/other"
R = TypeVar("R", bound=Reply)


class AttackFigures(msgspec.Struct, frozen=True, kw_only=True):
    """One attack: what ran, the daemon's longest loop step, the bystander's hooks."""

    attack: str
    load: str  # what ran, in words
    loop_lag_before_ms: float  # the longest step while the quiet hooks ran
    loop_lag_ms: float  # the longest step while the attack ran
    loop_lag_task: str | None  # the task that took it
    quiet: Summary  # the bystander's hook round trips before the attack
    during: Summary  # and while it ran


def bench_loop_lag(facts: int, root: Path, progress: Progress) -> list[AttackFigures]:
    """Each attack against a daemon of its own, `facts` facts in the store where it
    recalls; the figures in the order of the module doc."""
    attacks: list[tuple[str, Callable[[Path, int], AttackFigures]]] = [
        ("reindex", _reindex),
        ("hidden facts", _hidden_facts),
        ("path pattern", _path_pattern),
        ("slow clients", _slow_clients),
    ]
    figures: list[AttackFigures] = []
    for name, attack in attacks:
        progress(f"loop lag: {name}")
        figures.append(attack(root / f"lag-{len(figures)}", facts))
    return figures


# ------------------------------------------------------------------ the attacks


def _reindex(root: Path, facts: int) -> AttackFigures:
    items = (StoreItem(content=f"fact {n} about the staging database") for n in range(facts))
    with _daemon(root, items) as daemon:

        def recall() -> None:
            time.sleep(0.3)  # the rebuild holds the index by then
            _recall(daemon, "staging database")  # refused, or answered after it

        def attack() -> None:
            _together(lambda: _ask(daemon, ReindexRequest(), ReindexedReply), *[recall] * 3)

        return _under(daemon, "reindex", f"`reindex` of {facts:,} facts, 3 `recall`s", attack)


def _hidden_facts(root: Path, facts: int) -> AttackFigures:
    items = (
        StoreItem(content=f"fact {n} about the staging database", project=_OTHER)
        for n in range(facts)
    )
    mine = "the staging database is stg-db-2"
    with _daemon(root, items, mine=mine) as daemon:

        def recalls() -> None:
            for _ in range(5):
                reply = _recall(daemon, "staging database", cwd=f"{_WORK}/src")
                if reply is not None and [hit.memory.content for hit in reply.hits] != [mine]:
                    raise BenchError(f"a recall saw another project's facts: {reply.hits[:2]}")

        def attack() -> None:
            _together(*[recalls] * 4)

        load = f"20 `recall`s, {facts:,} facts of another project all matching"
        return _under(daemon, "hidden facts", load, attack)


def _path_pattern(root: Path, facts: int) -> AttackFigures:  # noqa: ARG001 - no facts needed
    config = f'[actions.deep-edit]\ndescription = "an edit deep down"\npaths = ["{DEEP_PATTERN}"]\n'
    with _daemon(root, iter(()), config=config, deep_rule=True) as daemon:
        deep = "/work/" + "/".join(["a"] * DEEP_LEVELS)

        def attack() -> None:
            for n in range(20):
                name = "b" if n % 2 else "c.txt"  # `b` matches: its rule is handed over
                event = pretooluse_event(
                    "",
                    cwd="/work",
                    session=f"deep-{n}",
                    tool_use_id=f"toolu_deep_{n}",
                    tool_name="Edit",
                    tool_input={
                        "file_path": f"{deep}/{name}",
                        "old_string": "x",
                        "new_string": "y",
                    },
                )
                frame = encode(HookRequest(agent=AGENT, event=msgspec.Raw(event)))
                text = text_of_answer(one_shot(daemon.socket, frame)) or ""
                if (DEEP_RULE in text) != (name == "b"):
                    raise BenchError(f"the edit of {name} got the wrong answer: {text[:200]!r}")

        load = f"20 edits of a {DEEP_LEVELS}-level path, `{DEEP_PATTERN}` configured"
        return _under(daemon, "path pattern", load, attack)


def _slow_clients(root: Path, facts: int) -> AttackFigures:  # noqa: ARG001 - no facts needed
    with _daemon(root, iter(())) as daemon, contextlib.ExitStack() as held:
        for _ in range(MAX_PER_CLIENT):
            sock = held.enter_context(_connect(daemon))
            sock.sendall(encode(SubscribeRequest()))
            recv_frame(sock)  # subscribed; never read again
        for _ in range(16):
            sock = held.enter_context(_connect(daemon))
            sock.sendall(HEADER.pack(4096) + b'{"type":')  # half a request, then nothing

        def attack() -> None:
            for n in range(300):  # each fires an event to every subscriber
                _bystander_hook(daemon, f"slow-{n}")

        load = f"300 hooks with {MAX_PER_CLIENT} subscribers that never read, 16 half requests"
        return _under(daemon, "slow clients", load, attack)


# ------------------------------------------------------------------ the harness


def _under(daemon: Daemon, name: str, load: str, attack: Callable[[], None]) -> AttackFigures:
    """The bystander's hooks before and while `attack()` runs in a thread; the lag."""
    _status(daemon)  # the daemon's start-up steps are not the quiet hooks'
    quiet = [_bystander_hook(daemon, f"quiet-{n}") for n in range(QUIET_HOOKS)]
    before = _status(daemon)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            attack()
        except BaseException as exc:  # noqa: BLE001 - reported below, on the caller's side
            failed.append(exc)

    thread = threading.Thread(target=run, name=name)
    thread.start()
    during: list[int] = []
    while thread.is_alive() or not during:
        during.append(_bystander_hook(daemon, f"during-{len(during)}"))
    thread.join()
    if failed:
        raise BenchError(f"the {name} attack failed: {failed[0]}") from failed[0]
    after = _status(daemon)
    return AttackFigures(
        attack=name,
        load=load,
        loop_lag_before_ms=before.loop_lag_since_ms or 0.0,
        loop_lag_ms=after.loop_lag_since_ms or 0.0,
        loop_lag_task=after.loop_lag_since_task,
        quiet=summarize(quiet),
        during=summarize(during),
    )


def _bystander_hook(daemon: Daemon, call: str) -> int:
    """One commit hook, a session of its own; its round trip in ns. It must get the rule."""
    frame = hook_frame('git commit -m "fix: x"', f"toolu_{call}")
    started = time.perf_counter_ns()
    answer = one_shot(daemon.socket, frame)
    elapsed = time.perf_counter_ns() - started
    if RULE not in (text_of_answer(answer) or ""):
        raise BenchError(f"a bystander's hook got no rule: {answer[:200]!r}")
    return elapsed


@contextlib.contextmanager
def _daemon(
    root: Path,
    items: Iterator[StoreItem],
    *,
    mine: str | None = None,
    config: str = "",
    deep_rule: bool = False,
) -> Iterator[Daemon]:
    """A daemon on a store holding `items` and the rules, its recall index built."""
    root.mkdir(mode=0o700)
    (root / "config.toml").write_text(config)
    daemon = Daemon(root, "daemon", root / "config.toml")
    store = Store(daemon.data_dir, sync=False)
    try:
        store.store_many(items)
        store.store(RULE, tags=["trigger:git-commit"])
        if deep_rule:
            store.store(DEEP_RULE, tags=["trigger:deep-edit"])
        if mine is not None:
            store.store(mine, project=_WORK)
    finally:
        store.close()
    try:
        daemon.start()
        deadline = time.monotonic() + _TIMEOUT_S
        while _recall(daemon, "nothing matches this") is None:  # built in a worker
            if time.monotonic() > deadline:
                raise BenchError("the recall index was never built")
            time.sleep(0.2)
        yield daemon
    finally:
        daemon.stop()


def _recall(daemon: Daemon, query: str, cwd: str | None = None) -> RecalledReply | None:
    """A recall's answer; None when refused as the index is being built."""
    try:
        return _ask(daemon, RecallFactsRequest(query=query, cwd=cwd, k=5), RecalledReply)
    except DaemonError as exc:
        if exc.code == ErrorCode.RECALL_UNAVAILABLE:
            return None
        raise


def _ask(daemon: Daemon, request: Request, reply: type[R]) -> R:
    with Client(daemon.socket, timeout=_TIMEOUT_S) as client:
        return client.expect(request, reply)


def _status(daemon: Daemon) -> StatusReply:
    return _ask(daemon, StatusRequest(), StatusReply)


def _together(*works: Callable[[], object]) -> None:
    """Each of `works` in a thread of its own, all at once; the first failure raised."""
    failed: list[BaseException] = []

    def run(work: Callable[[], object]) -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - raised again below
            failed.append(exc)

    threads = [threading.Thread(target=run, args=(work,)) for work in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failed:
        raise failed[0]


@contextlib.contextmanager
def _connect(daemon: Daemon) -> Iterator[socket.socket]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10.0)
        sock.connect(str(daemon.socket))
        yield sock


def render(figures: Sequence[AttackFigures]) -> list[str]:
    """The section's table, for docs/benchmarks.md and the terminal."""
    lines = [
        "| attack | load | loop held at most: quiet, attack (by) | bystander hook p50: "
        "quiet, attack | attack, max |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {f.attack} | {f.load} | {f.loop_lag_before_ms:.1f} ms, {f.loop_lag_ms:.1f} ms "
        f"({_task(f.loop_lag_task)}) | "
        f"{f.quiet.p50_us / 1000:.1f} ms, {f.during.p50_us / 1000:.1f} ms | "
        f"{f.during.max_us / 1000:.1f} ms (n={f.during.n}) |"
        for f in figures
    ]
    return lines


def _task(name: str | None) -> str:
    """A task's name without its module: `_Transport._serve_connection`."""
    return ".".join((name or "?").split(".")[-2:])


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m mented_client.bench looplag")
    parser.add_argument(
        "--facts", type=int, default=60_000, help="facts in the store the recalls search"
    )
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="mb-", dir="/tmp"))
    try:
        figures = bench_loop_lag(args.facts, root, lambda m: print(m, file=sys.stderr))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\n".join(render(figures)))
    return 0
