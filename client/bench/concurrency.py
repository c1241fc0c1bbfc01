"""4. Many clients at once: threads sending hook requests, a new connection each."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import msgspec

from mented_client.bench.plans import Plan, Progress
from mented_client.bench.processes import Daemon, hook_frame, one_shot
from mented_client.bench.timing import BenchError, Summary, summarize


class ConcurrencyLevel(msgspec.Struct, frozen=True, kw_only=True):
    clients: int
    requests: int
    per_second: float
    time: Summary


class _HookClient:
    """One concurrent client: its requests, sent one connection each, and their times."""

    def __init__(self, socket_path: Path, requests: list[bytes]) -> None:
        self.socket_path = socket_path
        self.requests = requests
        self.samples: list[int] = []
        self.error: BaseException | None = None

    def run(self, barrier: threading.Barrier) -> None:
        try:
            barrier.wait()
            for request in self.requests:
                started = time.perf_counter_ns()
                one_shot(self.socket_path, request)
                self.samples.append(time.perf_counter_ns() - started)
        except BaseException as exc:  # noqa: BLE001 - the main thread reports it
            self.error = exc


def bench_concurrency(plan: Plan, daemon: Daemon, progress: Progress) -> list[ConcurrencyLevel]:
    """`clients` threads at once, each sending hook requests on a new connection each."""
    levels = []
    command = "git commit -m 'fix: handle an empty config file'"
    for clients in plan.concurrency:
        per_client = max(plan.concurrent_requests // clients, 1)
        frames = [
            [hook_frame(command, f"toolu_c{clients}_{c}_{i}") for i in range(per_client)]
            for c in range(clients)
        ]
        workers = [_HookClient(daemon.socket, requests) for requests in frames]
        barrier = threading.Barrier(clients + 1)
        threads = [threading.Thread(target=worker.run, args=(barrier,)) for worker in workers]
        for thread in threads:
            thread.start()
        barrier.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        failed = next((worker.error for worker in workers if worker.error), None)
        if failed is not None:
            raise BenchError(f"{clients} concurrent clients: {failed!r}")
        samples = [took for worker in workers for took in worker.samples]
        levels.append(
            ConcurrencyLevel(
                clients=clients,
                requests=len(samples),
                per_second=len(samples) / elapsed,
                time=summarize(samples),
            )
        )
        progress(f"  concurrency: {clients} clients, {len(samples) / elapsed:,.0f} requests/s")
    return levels
