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
import json
import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from mented_client.bench import CORPUS, summarize, time_matcher

ACCEPTANCE = Path(__file__).resolve().parent.parent / "tests" / "data" / "commands.jsonl"
SHORT = 1024  # bytes: the target is for commands under 1 KiB


def corpus() -> list[str]:
    rows = [json.loads(line) for line in ACCEPTANCE.read_text(encoding="utf-8").splitlines()]
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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


if __name__ == "__main__":
    sys.exit(main())
