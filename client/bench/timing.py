"""The one way every figure is given: repeated timings summed up in microseconds.

A `Summary` holds the median, p99 (nearest rank), min, max and mean of samples
taken with `time.perf_counter_ns` on the calling side.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import ParamSpec

import msgspec

P = ParamSpec("P")

NS_PER_US = 1000


class BenchError(Exception):
    """The benchmark could not run; the message says what failed."""


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    """Repeated timings, in microseconds."""

    n: int
    p50_us: float
    p99_us: float
    min_us: float
    max_us: float
    mean_us: float


def summarize(samples_ns: Sequence[int]) -> Summary:
    """Median, p99 (nearest rank), min, max and mean of nanosecond samples, in µs."""
    if not samples_ns:
        raise BenchError("no samples: nothing was measured")
    ordered = sorted(samples_ns)
    count = len(ordered)
    middle = count // 2
    median = ordered[middle] if count % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    p99 = ordered[min(count - 1, math.ceil(0.99 * count) - 1)]
    return Summary(
        n=count,
        p50_us=median / NS_PER_US,
        p99_us=p99 / NS_PER_US,
        min_us=ordered[0] / NS_PER_US,
        max_us=ordered[-1] / NS_PER_US,
        mean_us=sum(ordered) / count / NS_PER_US,
    )


def timed(call: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> int:
    """Nanoseconds that `call(*args, **kwargs)` took."""
    started = time.perf_counter_ns()
    call(*args, **kwargs)
    return time.perf_counter_ns() - started
