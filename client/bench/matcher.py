"""How long the matcher takes per command: median and p99, cache miss and cache hit.

Figure 7 of `mentectl bench` (`bench_matcher`): the matcher alone over the
benchmark's corpus (`corpus.py`: most commands name no action, the rest are the
ones rules exist for: heredoc commits, PR bodies, wrapped and chained commands),
every command parsed afresh (cache miss) and from the cache (hit).

By hand, for work on the matcher itself, the same measurement (`time_matcher`)
over that corpus and the acceptance rows in tests/data/commands.jsonl, command
by command. Run it with the real interpreter (not a pyenv shim), on a quiet
machine::

    .venv/bin/python -m mented_client.bench matcher [--rounds 50] [--per-command]

Target: cache-miss median under 1 ms for commands under 1 KiB.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import msgspec

from mented.actions import load_action_table
from mented.config import Config
from mented.matcher import Matcher
from mented_client.bench.corpus import CORPUS, HEREDOC_COMMIT
from mented_client.bench.plans import Plan
from mented_client.bench.timing import Summary, summarize, timed


class MatcherSection(msgspec.Struct, frozen=True, kw_only=True):
    commands: int
    under_1k: int
    miss: Summary  # every command under 1 KiB, parsed afresh
    hit: Summary
    over_1k: int
    miss_over_1k: Summary | None  # the commands of 1 KiB or more, parsed afresh
    heredoc_miss_us: float
    slowest_under_1k: str  # the command under 1 KiB with the slowest median miss
    slowest_miss_us: float


def time_matcher(corpus: Sequence[str], rounds: int) -> tuple[dict[str, list[int]], list[int]]:
    """Nanoseconds per call of the matcher over `rounds` passes of `corpus`, commands interleaved.

    Returns:
        Each command's timings parsed afresh (cache miss), and all timings from the cache (hit).
    """
    table = load_action_table(Config())
    uncached = Matcher(table, cache_bytes=0)
    cached = Matcher(table)
    for command in corpus:  # first calls compile regexes and fill the cache: not counted
        uncached.actions_in(command)
        cached.actions_in(command)
    misses: dict[str, list[int]] = {command: [] for command in corpus}
    hits: list[int] = []
    gc.collect()
    for _ in range(rounds):
        for command in corpus:
            misses[command].append(timed(uncached.actions_in, command))
            hits.append(timed(cached.actions_in, command))
    return misses, hits


def bench_matcher(plan: Plan, corpus: Sequence[str] = CORPUS) -> MatcherSection:
    """The matcher alone: every corpus command parsed afresh (miss) and from the cache (hit).

    `main` (run by hand) runs the same measurement (`time_matcher`) over this corpus and
    the matcher's acceptance rows, command by command, for work on the matcher itself.
    """
    misses, hits = time_matcher(corpus, plan.matcher_rounds)
    short = [command for command in corpus if len(command.encode()) < 1024]
    long = [command for command in corpus if len(command.encode()) >= 1024]
    slowest = max(short, key=lambda command: summarize(misses[command]).p50_us)
    return MatcherSection(
        commands=len(corpus),
        under_1k=len(short),
        miss=summarize([took for command in short for took in misses[command]]),
        hit=summarize(hits),
        over_1k=len(long),
        miss_over_1k=(
            summarize([took for command in long for took in misses[command]]) if long else None
        ),
        heredoc_miss_us=summarize(misses.get(HEREDOC_COMMIT) or misses[short[0]]).p50_us,
        slowest_under_1k=slowest,
        slowest_miss_us=summarize(misses[slowest]).p50_us,
    )


# In a checkout; an installed copy has no tests, and `main` measures the corpus alone.
ACCEPTANCE = Path(__file__).resolve().parents[2] / "tests" / "data" / "commands.jsonl"
SHORT = 1024  # bytes: the target is for commands under 1 KiB


def corpus() -> list[str]:
    """The benchmark's corpus and the acceptance rows' commands, when there are any."""
    lines = ACCEPTANCE.read_text(encoding="utf-8").splitlines() if ACCEPTANCE.is_file() else []
    rows = [json.loads(line) for line in lines]
    commands = list(CORPUS) + [row["command"] for row in rows]
    return [command for command in commands if command.strip()]


def summary(label: str, samples_ns: Sequence[int], commands: int) -> str:
    if not samples_ns:
        return f"{label:34} (no commands)"
    figures = summarize(samples_ns)
    return (
        f"{label:34} {commands:4} commands  median {figures.p50_us:8.1f} µs"
        f"  p99 {figures.p99_us:8.1f} µs  max {figures.max_us:9.1f} µs"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m mented_client.bench matcher`: the figures per command group, printed."""
    parser = argparse.ArgumentParser(
        prog="python -m mented_client.bench matcher",
        description="How long the matcher takes per command: median and p99, cache miss and "
        "cache hit.",
    )
    parser.add_argument("--rounds", type=int, default=30, help="passes over the corpus")
    parser.add_argument(
        "--per-command", action="store_true", help="also print each command's median miss"
    )
    args = parser.parse_args(argv)

    commands = corpus()
    short = [c for c in commands if len(c.encode()) < SHORT]
    long = [c for c in commands if len(c.encode()) >= SHORT]
    miss, hit = time_matcher(commands, args.rounds)

    def misses_of(group: list[str]) -> list[int]:
        return [took for command in group for took in miss[command]]

    print(
        f"python {platform.python_version()} ({sys.executable}), "
        f"bashlex {metadata.version('bashlex')}, {os.cpu_count()} cpus, "
        f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {args.rounds} rounds"
    )
    if not ACCEPTANCE.is_file():
        print(f"({ACCEPTANCE} not found: the benchmark's corpus only)")
    print(summary("cache miss, commands < 1 KiB", misses_of(short), len(short)))
    print(summary("cache miss, commands >= 1 KiB", misses_of(long), len(long)))
    print(summary("cache miss, all", misses_of(commands), len(commands)))
    print(summary("cache hit, all", hit, len(commands)))
    if args.per_command:
        print("\nmedian cache miss per command, slowest first:")
        medians = {command: summarize(miss[command]).p50_us for command in commands}
        for command in sorted(commands, key=medians.__getitem__, reverse=True):
            shown = command.replace("\n", "\\n")
            shown = shown if len(shown) <= 70 else shown[:69] + "…"
            print(f"{medians[command]:8.1f} µs  {len(command):5} B  {shown}")
    return 0
