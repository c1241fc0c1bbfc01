"""How much of everything `mentectl bench` runs: the full, quick and smoke plans."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Plan:
    """How much of everything to run."""

    name: str
    sizes: tuple[int, ...]  # store sizes for `recall` and `memory`
    actions: int  # distinct actions the memories of a store are spread over
    load_batch: int  # memories per `store_many` transaction
    hook_rounds: int  # rounds of (bare + each hook case) spawns
    recall_requests: int  # per size
    hook_requests: int  # per cache state
    concurrency: tuple[int, ...]
    concurrent_requests: int  # in all, per level
    durable_writes: int
    cold_starts: int  # per size
    matcher_rounds: int  # passes over the corpus
    attack_facts: int  # facts in the store of the loop-lag part's recall attacks


PLANS = {
    "full": Plan(
        name="full",
        sizes=(1_000, 100_000, 1_000_000),
        actions=1000,
        load_batch=20_000,
        hook_rounds=400,
        recall_requests=30_000,
        hook_requests=4000,
        concurrency=(1, 10, 100),
        concurrent_requests=10_000,
        durable_writes=300,
        cold_starts=5,
        matcher_rounds=20,
        attack_facts=60_000,
    ),
    "quick": Plan(
        name="quick",
        sizes=(1_000, 10_000, 100_000),
        actions=1000,
        load_batch=20_000,
        hook_rounds=40,
        recall_requests=3000,
        hook_requests=500,
        concurrency=(1, 10, 100),
        concurrent_requests=1000,
        durable_writes=40,
        cold_starts=1,
        matcher_rounds=3,
        attack_facts=20_000,
    ),
    # For the test suite: every section, tiny.
    "smoke": Plan(
        name="smoke",
        sizes=(100, 1000),
        actions=50,
        load_batch=400,
        hook_rounds=3,
        recall_requests=30,
        hook_requests=10,
        concurrency=(1, 4),
        concurrent_requests=24,
        durable_writes=3,
        cold_starts=1,
        matcher_rounds=1,
        attack_facts=200,
    ),
}
