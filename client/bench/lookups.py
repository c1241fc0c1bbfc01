"""The other two lookups: recall over the socket, the index's build rate, a session start's cost.

For each store size (default 1,000 and 100,000 facts), a store is filled in one
transaction, a real daemon is started on it (`python -m mented.daemon`), the
recall index is rebuilt through the socket (`reindex`, timed by the daemon), and
`recall` requests of two or three words are timed from a client on one open
connection, as an MCP tool call or `mentectl recall` sends them. Facts are
sentences of 8 to 20 words drawn from a 5,000-word vocabulary with Zipf-like
frequencies; queries take their words from the middle of that vocabulary (a
word in about 0.1 to 1% of the facts), as topic words are.

Then the characters a session start hands over with the default cap
(`[pinned]` 5 rules, 1,200 characters), through the real hook request
(`session_cost.session_start_cost`).

Run it with the real interpreter (not a pyenv shim), on a quiet machine::

    .venv/bin/python -m mented_client.bench lookups [--sizes 1000 100000] [--queries 2000]

Target (issue 16): recall p50 under 2 ms at 100,000 facts over the socket.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from mented.protocol import (
    MemoriesReply,
    RecalledReply,
    RecallFactsRequest,
    RecallRequest,
    ReindexedReply,
    ReindexRequest,
)
from mented.store import Store, StoreItem
from mented_client.bench.processes import Daemon
from mented_client.bench.session_cost import session_start_cost
from mented_client.connection import Client

VOCABULARY = 5000
SEED = 16
START_TIMEOUT_S = 600.0  # a daemon on a large store of facts


def words() -> list[str]:
    return [f"w{n}" for n in range(VOCABULARY)]


def fill(data_dir: Path, size: int, rng: random.Random) -> None:
    vocabulary = words()
    weights = [1 / (rank + 1) for rank in range(VOCABULARY)]  # Zipf, s = 1
    items = []
    for n in range(size):
        sentence = rng.choices(vocabulary, weights, k=rng.randint(8, 20))
        project = f"/work/project{n % 20}" if n % 4 == 0 else None  # a quarter scoped
        items.append(StoreItem(content=" ".join(sentence), tags=(), project=project))
    store = Store(data_dir, sync=False)
    try:
        for start in range(0, size, 20_000):
            store.store_many(items[start : start + 20_000])
    finally:
        store.close()


def measure(size: int, queries: int) -> dict[str, float]:
    rng = random.Random(SEED)  # noqa: S311 - a reproducible corpus, not a secret
    with tempfile.TemporaryDirectory(prefix="mdb-", dir="/tmp") as tmp:
        root = Path(tmp)
        daemon = Daemon(root, "data", root / "config.toml")
        fill(daemon.data_dir, size, rng)
        daemon.start(timeout_s=START_TIMEOUT_S)
        try:
            with Client(daemon.socket, timeout=600.0) as client:
                built = client.expect(ReindexRequest(), ReindexedReply)
                middle = [f"w{n}" for n in range(50, 500)]
                asked = [" ".join(rng.sample(middle, rng.randint(2, 3))) for _ in range(queries)]
                samples = []
                hits = 0
                for query in asked:
                    started = time.perf_counter_ns()
                    reply = client.expect(
                        RecallFactsRequest(
                            query=query, agent="claude-code", cwd="/work/project3/src", k=5
                        ),
                        RecalledReply,
                    )
                    samples.append(time.perf_counter_ns() - started)
                    hits += len(reply.hits)
                # The cheapest lookup on the same connection: what the socket itself costs.
                baseline = []
                for _ in range(queries):
                    started = time.perf_counter_ns()
                    client.expect(
                        RecallRequest(action="git-commit", cwd="/work/app"), MemoriesReply
                    )
                    baseline.append(time.perf_counter_ns() - started)
        finally:
            daemon.stop()
        index_bytes = sum(
            path.stat().st_size for path in (daemon.data_dir / "recall").iterdir() if path.is_file()
        )
    samples.sort()
    return {
        "facts": size,
        "build_s": built.seconds,
        "build_rate": size / built.seconds,
        "p50_ms": statistics.median(samples) / 1e6,
        "p99_ms": samples[int(0.99 * len(samples))] / 1e6,
        "hits_per_query": hits / queries,
        "baseline_p50_ms": statistics.median(baseline) / 1e6,
        "index_mib": index_bytes / 2**20,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m mented_client.bench lookups`: the figures per store size, printed."""
    parser = argparse.ArgumentParser(
        prog="python -m mented_client.bench lookups",
        description="The other two lookups: recall over the socket, the index's build rate, "
        "a session start's cost.",
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--queries", type=int, default=2000)
    args = parser.parse_args(argv)
    print(
        f"load average {os.getloadavg()[0]:.1f}, "
        f"Python {platform.python_version()}, tantivy {metadata.version('tantivy')}, "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"
    )
    for size in args.sizes:
        figures = measure(size, args.queries)
        print(
            f"{size:>7} facts: recall p50 {figures['p50_ms']:.2f} ms, p99 "
            f"{figures['p99_ms']:.2f} ms ({figures['hits_per_query']:.1f} hits/query; a "
            f"recall_for_action on the same connection: p50 {figures['baseline_p50_ms']:.2f} ms); "
            f"index built in {figures['build_s']:.2f} s ({figures['build_rate']:,.0f} facts/s), "
            f"{figures['index_mib']:.1f} MiB"
        )
    one, full = session_start_cost()
    print(f"session start: {one} characters for one short pinned rule, {full} at the full cap")
    return 0
