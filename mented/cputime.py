"""CPU time of the calling thread, less what the garbage collector took in it.

The matcher's budgets are CPU time of the matching thread (`mented.matcher`), so
that a busy machine does not cut a command short. But Python's collector runs in
whichever thread allocates when a generation fills up, and a full collection of
the daemon's heap costs 40-130 ms of that thread's CPU: one landing inside a match
would use up its 50 ms and the command would name no action, so get no rules. The
collector's own time is not the command's: `own_cpu_time` leaves it out, measured
by a `gc.callbacks` entry (two calls of `time.thread_time` per collection, about a
microsecond; collections are hundreds of allocations apart at the least).
"""

from __future__ import annotations

import gc
import threading
import time


class _CollectorTime(threading.local):
    """Per thread: CPU seconds spent collecting, and when the current collection began."""

    spent: float = 0.0
    began: float | None = None


_COLLECTOR = _CollectorTime()


def _time_collection(phase: str, info: dict[str, int]) -> None:  # noqa: ARG001 - gc's signature
    if phase == "start":
        _COLLECTOR.began = time.thread_time()
    elif _COLLECTOR.began is not None:
        _COLLECTOR.spent += time.thread_time() - _COLLECTOR.began
        _COLLECTOR.began = None


def own_cpu_time() -> float:
    """`time.thread_time()` without the collections run in this thread (only differences count)."""
    return time.thread_time() - _COLLECTOR.spent


if _time_collection not in gc.callbacks:
    gc.callbacks.append(_time_collection)
