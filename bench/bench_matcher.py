# ruff: noqa: INP001 - a script run by hand, not a package
"""How long the matcher takes per command: median and p99, cache miss and cache hit.

The corpus is what agents send: the commands of `mentectl bench` (most name no
action, the rest are the ones rules exist for: heredoc commits, PR bodies, wrapped
and chained commands) and the acceptance rows in tests/data/commands.jsonl.

Run it with the real interpreter (not a pyenv shim), on a quiet machine::

    .venv/bin/python bench/bench_matcher.py [--rounds 50] [--per-command]

Target: cache-miss median under 1 ms for commands under 1 KiB.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from mented_client.bench import CORPUS

from mented.actions import load_action_table
from mented.config import Config
from mented.matcher import Matcher

ACCEPTANCE = Path(__file__).resolve().parent.parent / "tests" / "data" / "commands.jsonl"
SHORT = 1024  # bytes: the target is for commands under 1 KiB


def corpus() -> list[str]:
    rows = [json.loads(line) for line in ACCEPTANCE.read_text(encoding="utf-8").splitlines()]
    commands = list(CORPUS) + [row["command"] for row in rows]
    return [command for command in commands if command.strip()]


def percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(
    call: Callable[[str], object], commands: Sequence[str], rounds: int
) -> dict[str, list[float]]:
    """Microseconds per call, per command, over `rounds` passes (commands interleaved)."""
    samples: dict[str, list[float]] = {command: [] for command in commands}
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for command in commands:
            start = clock()
            call(command)
            samples[command].append((clock() - start) / 1000)
    return samples


def summary(label: str, samples: dict[str, list[float]], commands: Sequence[str]) -> str:
    flat = [value for command in commands for value in samples[command]]
    if not flat:
        return f"{label:34} (no commands)"
    return (
        f"{label:34} {len(commands):4} commands  median {statistics.median(flat):8.1f} µs"
        f"  p99 {percentile(flat, 0.99):8.1f} µs  max {max(flat):9.1f} µs"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="passes over the corpus")
    parser.add_argument(
        "--per-command", action="store_true", help="also print each command's median miss"
    )
    args = parser.parse_args(argv)

    commands = corpus()
    short = [c for c in commands if len(c.encode()) < SHORT]
    long = [c for c in commands if len(c.encode()) >= SHORT]
    table = load_action_table(Config())
    uncached = Matcher(table, cache_size=0)
    cached = Matcher(table)
    for command in commands:  # warm imports, regexes and the cache
        uncached.actions_in(command)
        cached.actions_in(command)

    gc.collect()
    miss = measure(uncached.actions_in, commands, args.rounds)
    hit = measure(cached.actions_in, commands, args.rounds)

    print(
        f"python {platform.python_version()} ({sys.executable}), "
        f"bashlex {metadata.version('bashlex')}, {os.cpu_count()} cpus, "
        f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {args.rounds} rounds"
    )
    print(summary("cache miss, commands < 1 KiB", miss, short))
    print(summary("cache miss, commands >= 1 KiB", miss, long))
    print(summary("cache miss, all", miss, commands))
    print(summary("cache hit, all", hit, commands))
    if args.per_command:
        print("\nmedian cache miss per command, slowest first:")
        ranked = sorted(commands, key=lambda c: statistics.median(miss[c]), reverse=True)
        for command in ranked:
            shown = command.replace("\n", "\\n")
            shown = shown if len(shown) <= 70 else shown[:69] + "…"
            print(f"{statistics.median(miss[command]):8.1f} µs  {len(command):5} B  {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
