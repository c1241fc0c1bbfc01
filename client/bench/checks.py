"""Checks before the command (issue 25): the hook with rules that carry checks, and without.

`python -m mented_client.bench.checks` prints a Markdown table for docs/benchmarks.md.
In process, the daemon's part of a hook request (`HookHandler.answer_decoded`, then the
answer's `sent()`, as the server calls them; the second after the answer is written,
timed apart): 6 rules for git-commit with 3 checks each against the same 6 rules without
checks, interleaved in one loop. Two cases: the same command again (the matcher's
cache warm, as for a retry) and a new commit message every time (cache cold for both).
Then field extraction alone, per command, over the matcher's benchmark commands.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from mented.actions import load_action_table
from mented.compliance import ComplianceRecord
from mented.config import Config, DeliverySettings
from mented.fields import FIELDS, fields_in
from mented.hooks import HookHandler, decode_event
from mented.matcher import Matcher
from mented.sessions import SessionMemory
from mented.store import Store
from mented_client.bench.corpus import CORPUS, hook_event


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


def _handler(root: Path, *, checks: bool) -> HookHandler:
    store = Store(root / "store")
    for number in range(6):
        store.store(
            f"commit rule {number}: single line, conventional prefix, no emojis",
            tags=["trigger:git-commit"],
            checks=checks_of(number) if checks else (),
        )
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


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="mented-bench-checks-"))
    (root / "with").mkdir()
    (root / "without").mkdir()
    with_checks = _handler(root / "with", checks=True)
    without = _handler(root / "without", checks=False)
    rows = []
    for case in ("same command", "new message each time"):
        times: dict[str, list[float]] = {"with": [], "without": []}
        after: dict[str, list[float]] = {"with": [], "without": []}
        for number in range(ROUNDS):
            message = "fix: login bug" if case == "same command" else f"fix: login bug {number}"
            event = hook_event(f'git commit -m "{message}"', f"toolu_{case[0]}{number}", "s1")
            for name, handler in (("without", without), ("with", with_checks)):
                # As the server runs it: the answer, sent, then what follows its sending
                # (the fire log, the record of whether rules are kept), timed apart.
                started = time.perf_counter()
                answer = handler.answer_decoded("claude-code", decode_event("claude-code", event))
                answered = time.perf_counter()
                answer.sent()
                times[name].append(answered - started)
                after[name].append(time.perf_counter() - answered)
                assert answer.out, "a pointer at least"
        for name in ("without", "with"):
            cut = ROUNDS // 10  # the first rounds warm up
            rows.append((case, name, times[name][cut:], after[name][cut:]))
    print("| hook, daemon's part (in process) | p50 | p99 | vs without | then, once sent: p50 |")
    print("|---|--:|--:|--:|--:|")
    for case, name, values, then in rows:
        base = next(v for c, n, v, _ in rows if c == case and n == "without")
        ratio = statistics.median(values) / statistics.median(base)
        label = "6 rules x 3 checks" if name == "with" else "6 rules, no checks"
        print(
            f"| {case}: {label} | {statistics.median(values) * 1e6:.0f} us | "
            f"{_p(values, 0.99) * 1e6:.0f} us | {ratio:.2f}x | "
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
