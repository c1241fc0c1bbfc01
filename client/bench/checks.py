"""Checks before the command (issue 25): the hook with rules that carry checks, and without.

`python -m mented_client.bench.checks` prints a Markdown table for docs/benchmarks.md.
In process, the daemon's part of a hook request (`HookHandler.answer_decoded`, then the
answer's `sent()`, as the server calls them; the second after the answer is written,
timed apart): 6 rules for git-commit with 3 checks each against the same 6 rules without
checks, interleaved in one loop. Two cases: the same command again (the matcher's
cache warm, as for a retry) and a new commit message every time (cache cold for both).
Then field extraction alone, per command, over the matcher's benchmark commands.

Then the hook as the agent sees it (`--agent-view`, or `agent_view()`): two real daemons,
one with the 6 rules with checks and one with the same rules without, the installed
hook command line spawned as the agent spawns it (the shim, spawn to exit) and the
request alone over the socket (one connection per request, as the shim makes it, the
daemon warm), the two daemons in shuffled order every round.
In process, each figure is also given as CPU time (`time.thread_time`): on a loaded
machine the wall time is mostly the scheduler's.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from mented.actions import load_action_table
from mented.compliance import ComplianceRecord
from mented.config import Config, DeliverySettings
from mented.fields import FIELDS, fields_in
from mented.hooks import HookHandler, decode_event
from mented.matcher import Matcher
from mented.protocol import HookRequest, encode
from mented.sessions import SessionMemory
from mented.store import Store
from mented_client.bench.corpus import AGENT, CORPUS, hook_event
from mented_client.bench.hook import _spawn, install_hook
from mented_client.bench.processes import Daemon, one_shot
from mented_client.hook_settings import command_argv


def checks_of(number: int) -> tuple[str, ...]:
    """Three checks for rule `number`, each its own (the same three on every rule would be
    the post's rule six times over)."""
    return (
        "message single-line" if number == 0 else f"message lines-max {number + 1}",
        r"subject matches ^(feat|fix|docs|chore|refactor|test)(\(.+\))?!?: "
        if number == 0
        else f"subject max {60 + number}",
        "message no-emoji" if number == 0 else f"message not-matches WIP{number}",
    )


ROUNDS = 2000
SPAWN_ROUNDS = int(os.environ.get("BENCH_SPAWN_ROUNDS", "300"))
SOCKET_ROUNDS = int(os.environ.get("BENCH_SOCKET_ROUNDS", "2000"))


def _fill(store: Store, *, checks: bool) -> None:
    for number in range(6):
        store.store(
            f"commit rule {number}: single line, conventional prefix, no emojis",
            tags=["trigger:git-commit"],
            checks=checks_of(number) if checks else (),
        )


def _handler(root: Path, *, checks: bool) -> HookHandler:
    store = Store(root / "store")
    _fill(store, checks=checks)
    config = Config(delivery=DeliverySettings(default="context"))
    handler = HookHandler(
        store,
        Matcher(load_action_table(config)),
        config,
        SessionMemory(root / "sessions", ttl_s=3600),
    )
    # As the daemon runs it: the record of whether rules are kept, in its data directory.
    handler.prechecks.compliance = ComplianceRecord(root)
    return handler


def _p(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def _message(case: str, number: int) -> str:
    return "fix: login bug" if case == "same command" else f"fix: login bug {number}"


def agent_view() -> None:
    """The hook as the agent sees it, with and without checks: spawned, and its socket
    round trip alone; printed as a Markdown table."""
    root = Path(tempfile.mkdtemp(prefix="mented-bench-agent-view-"))
    config = root / "config.toml"
    config.write_text('[delivery]\ndefault = "context"\n')
    daemons = {name: Daemon(root, name, config) for name in ("without", "with")}
    for name, daemon in daemons.items():
        store = Store(daemon.data_dir)
        try:
            _fill(store, checks=name == "with")
        finally:
            store.close()
    try:
        for daemon in daemons.values():
            daemon.start()
        run_words = command_argv(install_hook(root, daemons["with"].socket))
        assert run_words is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MENTED_", "PYTHON"))}
        # The shim's budget raised: on a loaded machine a slow spawn is not silence here.
        env["MENTED_HOOK_BUDGET_MS"] = "5000"
        envs = {name: {**env, "MENTED_SOCKET": str(d.socket)} for name, d in daemons.items()}
        rng = random.Random(25)  # noqa: S311 - order shuffling
        rows = []
        for case in ("same command", "new message each time"):
            for how, rounds in (("spawned", SPAWN_ROUNDS), ("socket", SOCKET_ROUNDS)):
                wall: dict[str, list[float]] = {"with": [], "without": []}
                names = list(daemons)
                for number in range(rounds + rounds // 10):
                    command = f'git commit -m "{_message(case, number)}"'
                    rng.shuffle(names)
                    for name in names:
                        event = hook_event(command, f"toolu_{how}_{case[0]}{number}", "s1")
                        if how == "spawned":
                            took, out = _spawn(run_words.argv, event, envs[name])
                            seconds = took / 1e9
                        else:
                            frame = encode(HookRequest(agent=AGENT, event=msgspec.Raw(event)))
                            started = time.perf_counter()
                            out = one_shot(daemons[name].socket, frame)
                            seconds = time.perf_counter() - started
                        assert out, f"no answer from the daemon {name}"
                        if number >= rounds // 10:  # the first tenth warms up
                            wall[name].append(seconds)
                rows.append((case, how, wall))
    finally:
        for daemon in daemons.values():
            daemon.stop()
    print(
        "| the hook as the agent sees it | without checks: p50 | 6 rules x 3 checks: p50 | ratio |"
    )
    print("|---|--:|--:|--:|")
    for case, how, wall in rows:
        without, with_checks = statistics.median(wall["without"]), statistics.median(wall["with"])
        what = "spawned (shim, spawn to exit)" if how == "spawned" else "socket round trip"
        print(
            f"| {case}: {what} | {without * 1e6:.0f} us | {with_checks * 1e6:.0f} us | "
            f"{with_checks / without:.3f}x |"
        )


def main() -> int:
    if "--agent-view" in sys.argv[1:]:
        agent_view()
        return 0
    root = Path(tempfile.mkdtemp(prefix="mented-bench-checks-"))
    (root / "with").mkdir()
    (root / "without").mkdir()
    with_checks = _handler(root / "with", checks=True)
    without = _handler(root / "without", checks=False)
    rows = []
    for case in ("same command", "new message each time"):
        times: dict[str, list[float]] = {"with": [], "without": []}
        cpu: dict[str, list[float]] = {"with": [], "without": []}
        after: dict[str, list[float]] = {"with": [], "without": []}
        for number in range(ROUNDS):
            message = "fix: login bug" if case == "same command" else f"fix: login bug {number}"
            event = hook_event(f'git commit -m "{message}"', f"toolu_{case[0]}{number}", "s1")
            for name, handler in (("without", without), ("with", with_checks)):
                # As the server runs it: the answer, sent, then what follows its sending
                # (the fire log, the record of whether rules are kept), timed apart.
                started, started_cpu = time.perf_counter(), time.thread_time()
                answer = handler.answer_decoded("claude-code", decode_event("claude-code", event))
                answered, answered_cpu = time.perf_counter(), time.thread_time()
                answer.sent()
                times[name].append(answered - started)
                cpu[name].append(answered_cpu - started_cpu)
                after[name].append(time.perf_counter() - answered)
                assert answer.out, "a pointer at least"
        for name in ("without", "with"):
            cut = ROUNDS // 10  # the first rounds warm up
            rows.append((case, name, times[name][cut:], after[name][cut:], cpu[name][cut:]))
    print(
        "| hook, daemon's part (in process) | p50 | p99 | vs without | CPU p50 | vs without "
        "| then, once sent: p50 |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|")
    for case, name, values, then, cpu_values in rows:
        base, base_cpu = next((v, u) for c, n, v, _, u in rows if c == case and n == "without")
        ratio = statistics.median(values) / statistics.median(base)
        cpu_ratio = statistics.median(cpu_values) / statistics.median(base_cpu)
        label = "6 rules x 3 checks" if name == "with" else "6 rules, no checks"
        print(
            f"| {case}: {label} | {statistics.median(values) * 1e6:.0f} us | "
            f"{_p(values, 0.99) * 1e6:.0f} us | {ratio:.2f}x | "
            f"{statistics.median(cpu_values) * 1e6:.0f} us | {cpu_ratio:.3f}x | "
            f"{statistics.median(then) * 1e6:.1f} us |"
        )
    matcher = Matcher(load_action_table(Config()))
    extraction = []
    for _ in range(20):
        for command in CORPUS:
            commands = matcher.matched_commands(command)
            if not commands:
                continue
            started = time.perf_counter()
            fields_in(matcher.table, commands, list(FIELDS), "/nowhere")
            extraction.append(time.perf_counter() - started)
    print(
        f"| field extraction alone, {len(extraction) // 20} commands that name an action | "
        f"{statistics.median(extraction) * 1e6:.1f} us | {_p(extraction, 0.99) * 1e6:.1f} us | |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
