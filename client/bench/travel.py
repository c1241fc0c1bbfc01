# ruff: noqa: S603, S607 - runs git from PATH, as `mentectl sync` does
"""Rules that travel: export and import rates, and the time a sync takes.

Measures, in-process (the daemon runs the same code in a worker thread):

- export and import of a store of `--memories` memories (default 100,000);
- `sync` with nothing to do, and with 1,000 new records, against a bare remote on
  the same disk (so that the figure is mented's and git's work, not a network's),
  for a store of `--sync-base` memories already synced.

Run it with the real interpreter, on a quiet machine::

    .venv/bin/python -m mented_client.bench travel [--memories 100000] [--sync-base 10000]

The figures go in docs/benchmarks.md ("Rules that travel").
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from mented.actions import load_action_table
from mented.agents.pretooluse import pretooluse_event
from mented.config import Config, DeliverySettings
from mented.hooks import HookHandler
from mented.matcher import Matcher
from mented.portable import export_store, import_file
from mented.store import Store, StoreItem
from mented.sync import GitSync
from mented.team import ProjectRules, RuleLookup

ACTIONS = ("git-commit", "git-push", "pr-create", "npm-publish", "deploy")


def fill(store: Store, count: int, *, start: int = 0) -> None:
    batch = 20_000
    for first in range(start, start + count, batch):
        store.store_many(
            StoreItem(
                content=f"rule number {n}: keep commit messages to one line",
                tags=[f"trigger:{ACTIONS[n % len(ACTIONS)]}"],
            )
            for n in range(first, min(first + batch, start + count))
        )


def timed(label: str, call: object, count: int | None = None) -> float:
    assert callable(call)
    began = time.perf_counter()
    call()
    took = time.perf_counter() - began
    rate = f", {count / took:,.0f} records/s" if count else ""
    print(f"| {label} | {took * 1000:,.0f} ms{rate} |")
    return took


def hook_path(root: Path, rounds: int = 2000) -> None:
    """The hook request in the daemon (HookHandler.handle), with and without project rules."""
    store = Store(root / "hook")
    fill(store, 1000)
    repo = root / "repo"
    (repo / ".mented").mkdir(parents=True)
    (repo / ".mented" / "rules.jsonl").write_text(
        "".join(f'{{"action": "git-commit", "text": "team rule {n}"}}\n' for n in range(3))
    )
    plain = root / "plain"
    plain.mkdir()
    projects = ProjectRules(root / "hook")
    projects.trust(str(repo))
    config = Config(delivery=DeliverySettings(default="context"))
    matcher = Matcher(load_action_table(config))
    handler = HookHandler(RuleLookup(store, projects), matcher, config)
    for label, cwd in (("no project rules", plain), ("with project rules", repo)):
        times = []
        for n in range(rounds):
            # a new session each time: the rules are handed in full, never a pointer
            event = pretooluse_event("git commit -m x", cwd=str(cwd), session=f"s{n}")
            began = time.perf_counter()
            handler.handle("claude-code", event)
            times.append(time.perf_counter() - began)
        times.sort()
        p50, p99 = times[len(times) // 2] * 1e6, times[len(times) * 99 // 100] * 1e6
        print(
            f"| hook request in the daemon, {label}, warm | {p50:,.0f} us p50, {p99:,.0f} us p99 |"
        )
    colds = []
    for n in range(50):
        fresh = ProjectRules(root / "hook")  # nothing cached: find the root, read, parse
        began = time.perf_counter()
        fresh.recall_for_action("git-commit", agent=None, cwd=str(repo), k=6)
        colds.append(time.perf_counter() - began)
        del n
    colds.sort()
    print(
        f"| project rules lookup, cold (find .mented/, read, parse 3 rules) | "
        f"{colds[len(colds) // 2] * 1e6:,.0f} us p50 |"
    )
    store.close()


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m mented_client.bench travel`: the figures as Markdown table rows, printed."""
    parser = argparse.ArgumentParser(
        prog="python -m mented_client.bench travel",
        description="Rules that travel: export and import rates, and the time a sync takes.",
    )
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--sync-base", type=int, default=10_000)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="mented-travel-"))
    try:
        print(
            f"mented travel bench: {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, "
            f"load {os.getloadavg()[0]:.2f}"
        )
        print("| figure | time |\n|---|--:|")
        hook_path(root)
        source = Store(root / "source")
        fill(source, args.memories)
        path = root / "export.jsonl"
        timed(
            f"export, {args.memories:,} memories", lambda: export_store(source, path), args.memories
        )
        size = path.stat().st_size
        target = Store(root / "target")
        timed(
            f"import into an empty store, {args.memories:,} memories ({size / 1e6:.1f} MB file)",
            lambda: import_file(target, path),
            args.memories,
        )
        timed(
            "import the same file again (nothing new)",
            lambda: import_file(target, path),
            args.memories,
        )
        source.close()
        target.close()

        remote = root / "remote.git"
        subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
        machine = Store(root / "machine")
        fill(machine, args.sync_base)
        syncer = GitSync(root / "machine", timeout_s=600)
        syncer.init(str(remote))
        timed(
            f"first sync, {args.sync_base:,} memories", lambda: syncer.sync(machine), args.sync_base
        )
        timed(
            f"sync with nothing to do ({args.sync_base:,} memories synced)",
            lambda: syncer.sync(machine),
        )
        fill(machine, 1000, start=args.sync_base)
        timed(
            "sync with 1,000 new records (written, committed, pushed)", lambda: syncer.sync(machine)
        )
        other = Store(root / "other")
        other_sync = GitSync(root / "other", timeout_s=600)
        other_sync.init(str(remote))
        timed(
            f"sync on a new machine: {args.sync_base + 1000:,} records imported",
            lambda: other_sync.sync(other),
            args.sync_base + 1000,
        )
        fill(machine, 1000, start=args.sync_base + 1000)
        syncer.sync(machine)
        timed(
            "sync bringing 1,000 new records from another machine",
            lambda: other_sync.sync(other),
            1000,
        )
        machine.close()
        other.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0
