"""`python -m mented_client.bench activity`: the hook with and without the activity record on disk.

Two daemons side by side, the same rules, one with `[activity] on_disk = false` (the
fires in memory only, as before the record was kept on disk): hook requests go to one
and the other in turn (which goes first alternates), each on a fresh connection, as
the shim sends them; the round trips' p50 and p99 of each are printed. The record is
written after the answer was sent, so what it costs shows as the next request's
wait. Then, in this process, what one `ActivityLog.append` costs, and a `log`
request filtered by session over a full record.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from mented.activity import ActivityLog, FireFilter
from mented.config import ActivitySettings
from mented.protocol import FireRecord, StoredReply, StoreRequest
from mented_client.bench.processes import Daemon, hook_frame, one_shot
from mented_client.connection import Client

RULES = 6


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _round_trips(root: Path, requests: int) -> dict[str, list[float]]:
    """Alternating hook round trips (µs) to a daemon with the record on disk and one without."""
    daemons = {}
    for name, on_disk in (("disk", "true"), ("memory", "false")):
        config = root / f"{name}.toml"
        config.write_text(f"[activity]\non_disk = {on_disk}\n")
        daemons[name] = Daemon(root, name, config)
    try:
        for daemon in daemons.values():
            daemon.start()
            with Client(daemon.socket) as client:
                for number in range(RULES):
                    client.expect(
                        StoreRequest(
                            content=f"Commit rule {number}: one line.", tags=["trigger:git-commit"]
                        ),
                        StoredReply,
                    )
        samples: dict[str, list[float]] = {name: [] for name in daemons}
        order = list(daemons)
        for index in range(requests):
            frame = hook_frame(f"git commit -m 'fix: case {index}'", f"toolu_{index}")
            for name in order if index % 2 else reversed(order):
                started = time.perf_counter_ns()
                one_shot(daemons[name].socket, frame)
                samples[name].append((time.perf_counter_ns() - started) / 1000)
        return samples
    finally:
        for daemon in daemons.values():
            daemon.stop()


def _appends(root: Path, count: int) -> list[float]:
    """What each `ActivityLog.append` costs (µs), on a record of `count` fires."""
    record = ActivityLog(root, ActivitySettings(max_fires=2 * count))
    command = "git commit -m 'fix: handle an empty config file' && git push origin main"
    fire = FireRecord(
        time=time.time(),
        agent="claude-code",
        session="bench-0123456789abcdef",
        cwd="/home/dev/webapp",
        command=command,
        actions=["git-commit", "git-push"],
        rule_ids=[f"01JDQ8Z5K3M4N5P6Q7R8S9T0V{number}" for number in range(RULES)],
        mode="stop",
        delivery="full",
        why="first time in this session",
        chars=1200,
        full_ids=[f"01JDQ8Z5K3M4N5P6Q7R8S9T0V{number}" for number in range(RULES)],
        latency_us=250.0,
    )
    took = []
    for _ in range(count):
        started = time.perf_counter_ns()
        record.append(fire)
        took.append((time.perf_counter_ns() - started) / 1000)
    began = time.perf_counter()
    found, _ = record.query(FireFilter(session="nobody"), 20)
    print(
        f"a `log --session` matching nothing, over {count} fires "
        f"({(root / 'activity.jsonl').stat().st_size >> 10} KiB): "
        f"{(time.perf_counter() - began) * 1000:.1f} ms"
    )
    assert not found
    record.close()
    return took


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m mented_client.bench activity")
    parser.add_argument("--requests", type=int, default=2000, help="hook requests per daemon")
    parser.add_argument("--appends", type=int, default=20_000, help="appends timed in process")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mented-bench-") as directory:
        root = Path(directory)
        samples = _round_trips(root, args.requests)
        for name, taken in samples.items():
            print(
                f"hook round trip, record {'on disk' if name == 'disk' else 'in memory'}: "
                f"p50 {_percentile(taken, 0.5):.0f} µs, p99 {_percentile(taken, 0.99):.0f} µs "
                f"(n={len(taken)})"
            )
        (root / "appends").mkdir()
        took = _appends(root / "appends", args.appends)
        print(
            f"ActivityLog.append: median {statistics.median(took):.1f} µs, "
            f"p99 {_percentile(took, 0.99):.1f} µs (n={len(took)})"
        )
    return 0
