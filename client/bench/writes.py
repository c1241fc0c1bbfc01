"""5. Writes: durable single rule adds through the daemon, each flushed before the reply.

The bulk import (`Store.store_many`) is timed while `recall` fills its stores.
"""

from __future__ import annotations

import time

import msgspec

from mented.protocol import StoredReply, StoreRequest
from mented_client.bench.corpus import rule_text
from mented_client.bench.plans import Plan
from mented_client.bench.processes import Daemon
from mented_client.bench.timing import Summary, summarize, timed
from mented_client.connection import Client


class WritesSection(msgspec.Struct, frozen=True, kw_only=True):
    durable_add: Summary
    durable_adds_per_s: float
    bulk_memories: int
    bulk_seconds: float
    bulk_per_s: float
    bulk_batch: int


def bench_durable_adds(plan: Plan, daemon: Daemon) -> tuple[Summary, float]:
    """Single rule adds through the daemon, each committed with fsync before the reply."""
    samples = []
    with Client(daemon.socket) as client:
        started = time.perf_counter()
        for number in range(plan.durable_writes):
            request = StoreRequest(
                content=rule_text(number, "release-create"),
                tags=["trigger:release-create"],
            )
            samples.append(timed(client.expect, request, StoredReply))
        elapsed = time.perf_counter() - started
    return summarize(samples), plan.durable_writes / elapsed
