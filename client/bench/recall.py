"""2. `recall_for_action` by store size, over the socket and in process."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from mented.protocol import RecallRequest, encode
from mented.store import Store, StoreItem
from mented_client.bench.corpus import AGENT, CWD, RULES_PER_REPLY, rule_text
from mented_client.bench.memory import MemorySize, daemon_memory
from mented_client.bench.plans import Plan, Progress
from mented_client.bench.processes import Daemon, EchoServer, pin, placements
from mented_client.bench.timing import BenchError, Summary, summarize, timed
from mented_client.connection import Client

RECALL_BLOCK = 50  # requests to one daemon before the next one's turn


class RecallSize(msgspec.Struct, frozen=True, kw_only=True):
    memories: int
    actions: int
    round_trip: Summary  # client and daemon on one core (`placements()`)
    round_trip_two_cores: Summary | None  # on two different cores
    requests_per_s: float  # one client, one request at a time, on one core
    in_process: Summary  # Store.recall_for_action without socket or daemon
    ratio_to_smallest: float


class Floor(msgspec.Struct, frozen=True, kw_only=True):
    """An echo server asked like the daemon, in the same loop: what the figure cannot beat."""

    name: str
    round_trip: Summary
    round_trip_two_cores: Summary | None


def _load_store(
    data_dir: Path, items: Iterator[StoreItem], *, total: int, batch: int, progress: Progress
) -> float:
    """Write `items` with `Store.store_many`, `batch` per transaction; the seconds spent."""
    spent = 0.0
    done = 0
    step = max(total // 10, 1)
    next_report = step
    store = Store(data_dir)
    try:
        while done < total:
            chunk = [next(items) for _ in range(min(batch, total - done))]
            started = time.perf_counter()
            store.store_many(chunk)
            spent += time.perf_counter() - started
            done += len(chunk)
            if done >= next_report or done == total:
                rate = done / spent if spent else 0.0
                progress(f"  {done:,} of {total:,} memories ({rate:,.0f}/s)")
                next_report = done + step
    finally:
        store.close()
    return spent


def _action_name(number: int) -> str:
    return f"bench-action-{number:04d}"


def _scaling_items(actions: int, probes: int) -> Iterator[StoreItem]:
    """Rules without end: first 6 for each probed action, then spread over all `actions`.

    Every probed action has at least 6 rules at every size, so a lookup returns
    the same number of rules whatever the store's size: only the size differs.
    """
    number = 0
    for probe in range(probes):
        for _ in range(RULES_PER_REPLY):
            action = _action_name(probe)
            yield StoreItem(content=rule_text(number, action), tags=(f"trigger:{action}",))
            number += 1
    while True:
        action = _action_name(number % actions)
        yield StoreItem(content=rule_text(number, action), tags=(f"trigger:{action}",))
        number += 1


def _probes(plan: Plan) -> int:
    return max(1, min(100, min(plan.sizes) // (2 * RULES_PER_REPLY)))


def _in_process_recall(data_dir: Path, probes: int, requests: int) -> Summary:
    """`Store.recall_for_action` in this process, one store at a time, as a daemon has it."""
    rng = random.Random(7)  # noqa: S311 - which action to ask for, not cryptography
    store = Store(data_dir)
    try:
        for probe in range(probes):  # touch each probed action's pages once; not counted
            store.recall_for_action(_action_name(probe), agent=AGENT, cwd=CWD)
        recall = store.recall_for_action
        samples = [
            timed(
                recall, _action_name(rng.randrange(probes)), agent=AGENT, cwd=CWD, k=RULES_PER_REPLY
            )
            for _ in range(requests)
        ]
    finally:
        store.close()
    return summarize(samples)


@dataclass
class _ScaledStore:
    size: int
    daemon: Daemon
    load_s: float = 0.0
    in_process: Summary | None = None
    cold_starts: list[int] | None = None


def bench_scaling(
    plan: Plan, root: Path, config: Path, floors: Sequence[EchoServer], progress: Progress
) -> tuple[list[RecallSize], list[Floor], list[MemorySize], int, float]:
    """Fill one store per size, start their daemons, then ask them (and the floors) in turn.

    Returns:
        (recall per size, the floors, memory per size, memories bulk-imported, seconds
        the import took).
    """
    probes = _probes(plan)
    stores = [_ScaledStore(size, Daemon(root, f"s{size}", config)) for size in plan.sizes]
    try:
        for entry in stores:
            items = _scaling_items(plan.actions, probes)
            progress(f"loading {entry.size:,} memories over {plan.actions:,} actions")
            entry.load_s = _load_store(
                entry.daemon.data_dir,
                items,
                total=entry.size,
                batch=plan.load_batch,
                progress=progress,
            )
        progress("recall in-process, each size")
        # After all the loading, and twice over: the first pass, whose first store came
        # out slower than the same store measured again, only warms this process up.
        for _ in range(2):
            for entry in stores:
                entry.in_process = _in_process_recall(
                    entry.daemon.data_dir, probes, plan.recall_requests
                )
        progress("starting the daemons (cold start to ready)")
        for rep in range(plan.cold_starts):
            for entry in stores:
                took = entry.daemon.start()
                entry.cold_starts = [*(entry.cold_starts or []), round(took * 1e9)]
                if rep + 1 < plan.cold_starts:
                    entry.daemon.stop()
        progress(f"recall: {plan.recall_requests:,} requests per size, sizes in turn")
        servers = [(entry.daemon.socket, entry.daemon.pid) for entry in stores]
        servers += [(floor.socket, floor.pid) for floor in floors]
        by_place = _interleaved_recall(plan, servers, probes, checked=len(stores))
        first, *others = by_place.values()
        across = others[0] if others else None
        recall_floors = [
            Floor(
                name=floor.kind,
                round_trip=summarize(first[slot]),
                round_trip_two_cores=None if across is None else summarize(across[slot]),
            )
            for slot, floor in enumerate(floors, start=len(stores))
        ]
        recall, memory = [], []
        smallest = summarize(first[0]).p50_us
        for slot, entry in enumerate(stores):
            summary = summarize(first[slot])
            assert entry.in_process is not None
            assert entry.cold_starts is not None
            recall.append(
                RecallSize(
                    memories=entry.size,
                    actions=min(plan.actions, max(probes, entry.size)),
                    round_trip=summary,
                    round_trip_two_cores=None if across is None else summarize(across[slot]),
                    requests_per_s=1e6 / summary.mean_us,
                    in_process=entry.in_process,
                    ratio_to_smallest=summary.p50_us / smallest,
                )
            )
            memory.append(daemon_memory(entry.daemon, entry.cold_starts))
    finally:
        for entry in stores:
            entry.daemon.stop()
    imported = sum(entry.size for entry in stores)
    return recall, recall_floors, memory, imported, sum(entry.load_s for entry in stores)


def _interleaved_recall(
    plan: Plan, servers: Sequence[tuple[Path, int]], probes: int, *, checked: int
) -> dict[str, list[list[int]]]:
    """Round trips on one persistent connection per server, a block of requests to each in turn.

    `servers` are (socket, pid); the first `checked` are daemons, whose answer is checked
    once to hold the rules. One placement after the other (moving processes between
    cores costs their caches), and within one, sizes and floors side by side. Blocks,
    not single requests: a daemon left idle while the others answer would be measured
    waking up, not looking up.

    Returns:
        Per placement name, the samples of each server.
    """
    rng = random.Random(8)  # noqa: S311 - which action to ask for, not cryptography
    where = placements()
    original = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    clients = [Client(path) for path, _ in servers]
    samples: dict[str, list[list[int]]] = {place.name: [[] for _ in servers] for place in where}
    frames = [
        encode(RecallRequest(action=_action_name(probe), agent=AGENT, cwd=CWD, k=RULES_PER_REPLY))
        for probe in range(probes)
    ]
    order = list(range(len(servers)))
    try:
        for client in clients[:checked]:  # connect, and check each answers with the rules
            reply = msgspec.json.decode(client.roundtrip(frames[0]))
            if len(reply.get("memories", ())) != RULES_PER_REPLY:
                raise BenchError(f"recall returned {reply!r:.200}, not {RULES_PER_REPLY} rules")
        for place in where:
            pin(0, place.client)
            for _, pid in servers:
                pin(pid, place.servers)
            for start in range(0, plan.recall_requests, RECALL_BLOCK):
                count = min(RECALL_BLOCK, plan.recall_requests - start)
                block = [frames[rng.randrange(probes)] for _ in range(count)]
                rng.shuffle(order)
                for slot in order:
                    roundtrip, times = clients[slot].roundtrip, samples[place.name][slot]
                    for request in block:
                        started = time.perf_counter_ns()
                        roundtrip(request)
                        times.append(time.perf_counter_ns() - started)
    finally:
        for client in clients:
            client.close()
        if original is not None:
            os.sched_setaffinity(0, original)
    return samples
