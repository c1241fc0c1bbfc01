# ruff: noqa: INP001 - a script run by hand, not a package
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
(`[pinned]` 5 rules, 1,200 characters), through the real hook request.

Run it with the real interpreter (not a pyenv shim), on a quiet machine::

    .venv/bin/python bench/bench_lookups.py [--sizes 1000 100000] [--queries 2000]

Target (issue 16): recall p50 under 2 ms at 100,000 facts over the socket.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from mented.agents.pretooluse import text_of_answer
from mented.memory import MemoryType
from mented.protocol import (
    MemoriesReply,
    RecalledReply,
    RecallFactsRequest,
    RecallRequest,
    ReindexedReply,
    ReindexRequest,
    StatusReply,
    StatusRequest,
    StoredReply,
    StoreRequest,
)
from mented.store import Store, StoreItem
from mented_client.connection import Client, NotRunningError, ProtocolError

VOCABULARY = 5000
SEED = 16


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


def start_daemon(root: Path) -> subprocess.Popen[bytes]:
    env = os.environ | {
        "MENTED_SOCKET": str(root / "mented.sock"),
        "MENTED_DATA_DIR": str(root / "data"),
        "MENTED_CONFIG": str(root / "config.toml"),
    }
    log = (root / "mented.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mented.daemon"], env=env, stdout=log, stderr=log
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            with Client(root / "mented.sock", timeout=1.0) as client:
                client.expect(StatusRequest(), StatusReply)
                return proc
        except (NotRunningError, ProtocolError):
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the daemon did not start")


def measure(size: int, queries: int) -> dict[str, float]:
    rng = random.Random(SEED)  # noqa: S311 - a reproducible corpus, not a secret
    with tempfile.TemporaryDirectory(prefix="mdb-", dir="/tmp") as tmp:
        root = Path(tmp)
        fill(root / "data", size, rng)
        proc = start_daemon(root)
        try:
            with Client(root / "mented.sock", timeout=600.0) as client:
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
            proc.terminate()
            proc.wait()
        index_bytes = sum(
            path.stat().st_size for path in (root / "data" / "recall").iterdir() if path.is_file()
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


def session_start_cost() -> tuple[int, int]:
    """Characters handed over at session start: one short rule, and the default cap full."""
    with tempfile.TemporaryDirectory(prefix="mdb-", dir="/tmp") as tmp:
        root = Path(tmp)
        proc = start_daemon(root)
        try:
            with Client(root / "mented.sock") as client:

                def hand_over(session: str) -> int:
                    event = json.dumps(
                        {
                            "hook_event_name": "SessionStart",
                            "source": "startup",
                            "session_id": session,
                            "cwd": "/work/app",
                        }
                    ).encode()
                    return len(text_of_answer(client.hook("claude-code", event)) or "")

                def pin(text: str) -> None:
                    client.expect(
                        StoreRequest(
                            content=text, memory_type=MemoryType.PROCEDURAL, tags=["pinned"]
                        ),
                        StoredReply,
                    )

                pin("Answer in British English.")
                one = hand_over("one")
                # The rest of the cap: five rules of 1,200 characters together.
                for n in range(4):
                    pin(f"Pinned rule {n}: " + "x" * (1174 // 4 - 16))
                full = hand_over("full")
        finally:
            proc.terminate()
            proc.wait()
    return one, full


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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


if __name__ == "__main__":
    sys.exit(main())
