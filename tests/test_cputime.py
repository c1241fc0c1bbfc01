"""mented/cputime.py: the thread's CPU time without its garbage collections."""

from __future__ import annotations

import gc
import threading
import time

from mented.cputime import own_cpu_time


def burn_in_collections(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        until = time.thread_time() + 0.060
        while time.thread_time() < until:
            pass


def test_a_collection_is_left_out_and_the_rest_counted() -> None:
    gc.callbacks.append(burn_in_collections)
    try:
        own, cpu = own_cpu_time(), time.thread_time()
        gc.collect()  # 60 ms or more of this thread's CPU, all of it the collector's
        until = time.thread_time() + 0.020
        while time.thread_time() < until:  # 20 ms that are ours
            pass
        own, cpu = own_cpu_time() - own, time.thread_time() - cpu
    finally:
        gc.callbacks.remove(burn_in_collections)
    assert cpu >= 0.080
    assert 0.020 <= own < 0.040, own  # ours, and not the collection's 60 ms


def test_each_thread_counts_its_own_collections() -> None:
    seen: list[float] = []

    def other() -> None:
        before = own_cpu_time()
        gc.collect()
        seen.append(own_cpu_time() - before)

    gc.callbacks.append(burn_in_collections)
    try:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    finally:
        gc.callbacks.remove(burn_in_collections)
    assert seen[0] < 0.040  # the other thread's collection, left out there
