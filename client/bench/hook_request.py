"""3. One hook request in the daemon, on a fresh connection each, matcher cache cold and warm."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from mented.protocol import LogReply, LogRequest
from mented_client.bench.corpus import RULES_PER_REPLY
from mented_client.bench.hook import has_commit_rules
from mented_client.bench.plans import Plan
from mented_client.bench.processes import FLOOR_KINDS, Daemon, EchoServer, hook_frame, one_shot
from mented_client.bench.timing import NS_PER_US, BenchError, Summary, summarize
from mented_client.connection import Client


class HookRequestSection(msgspec.Struct, frozen=True, kw_only=True):
    rules: int
    cold: Summary  # a command the matcher has not seen
    warm: Summary  # the same command again
    daemon_cold: Summary  # the daemon's own handling time, from its fire log
    daemon_warm: Summary
    floor_trio: Summary  # a trio echo server, one connection per request
    floor_plain: Summary  # a blocking stdlib echo server, one connection per request


def _fire_latencies(socket_path: Path, count: int) -> list[float]:
    """The daemon's own handling time (µs) of its last `count` hook fires, oldest first."""
    with Client(socket_path) as client:
        fires = client.expect(LogRequest(n=count), LogReply).fires
    return [fire.latency_us for fire in reversed(fires)]


def bench_hook_request(
    plan: Plan, daemon: Daemon, floors: Sequence[EchoServer]
) -> HookRequestSection:
    """Full hook requests, one connection each: a new command (cold) and a known one (warm).

    The echo servers are asked the same way in the same loop: the floor under the figure.
    """
    warm_command = "git commit -m 'fix: handle an empty config file'"
    one_shot(daemon.socket, hook_frame(warm_command, "toolu_warmup"))
    cold: list[int] = []
    warm: list[int] = []
    floor_samples: list[list[int]] = [[] for _ in floors]
    daemon_cold: list[float] = []
    daemon_warm: list[float] = []
    # The fire log holds the last 500 fires: read it back every 200 pairs.
    block = 200
    for start in range(0, plan.hook_requests, block):
        pairs = min(block, plan.hook_requests - start)
        for index in range(start, start + pairs):
            # A command the matcher has never seen, of the same shape as the warm one.
            cold_frame = hook_frame(
                f"git commit -m 'fix: case {index} of {plan.hook_requests}'", f"toolu_cold_{index}"
            )
            warm_frame = hook_frame(warm_command, f"toolu_warm_{index}")
            cold_started = time.perf_counter_ns()
            cold_reply = one_shot(daemon.socket, cold_frame)
            cold.append(time.perf_counter_ns() - cold_started)
            warm_started = time.perf_counter_ns()
            warm_reply = one_shot(daemon.socket, warm_frame)
            warm.append(time.perf_counter_ns() - warm_started)
            for floor, samples in zip(floors, floor_samples, strict=True):
                floor_started = time.perf_counter_ns()
                one_shot(floor.socket, warm_frame)
                samples.append(time.perf_counter_ns() - floor_started)
            if not (has_commit_rules(cold_reply) and has_commit_rules(warm_reply)):
                raise BenchError(
                    f"a hook request for a commit did not get its {RULES_PER_REPLY} rules: "
                    f"{cold_reply[:200]!r}, {warm_reply[:200]!r}"
                )
        latencies = _fire_latencies(daemon.socket, 2 * pairs)
        daemon_cold.extend(latencies[0::2])
        daemon_warm.extend(latencies[1::2])
    return HookRequestSection(
        rules=RULES_PER_REPLY,
        cold=summarize(cold),
        warm=summarize(warm),
        daemon_cold=summarize([round(us * NS_PER_US) for us in daemon_cold]),
        daemon_warm=summarize([round(us * NS_PER_US) for us in daemon_warm]),
        floor_trio=summarize(floor_samples[FLOOR_KINDS.index("trio")]),
        floor_plain=summarize(floor_samples[FLOOR_KINDS.index("plain")]),
    )
