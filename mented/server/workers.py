"""Work off the event loop: worker threads, and long store scans one at a time."""

from __future__ import annotations

import gc
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import trio

from mented.memory import InvalidInputError
from mented.server.state import _State
from mented.store import StoreError

T = TypeVar("T")


# How long a request from mentectl (`rule list --cwd`, `explain`) waits for a project read.
_PROJECT_READ_S = 5.0


# While a scan runs, the trio thread waits at most this long for the GIL each time it
# wakes (CPython's default is 5 ms: a hook, which wakes it a few dozen times, took
# 150 ms instead of 20 while a scan of 200,000 memories ran).
_SCAN_SWITCH_INTERVAL_S = 0.0005


async def _in_thread(call: Callable[[], T], limiter: trio.CapacityLimiter | None = None) -> T:
    """Run blocking store work (a write waits for fsync; a scan is long) off the trio
    thread; `limiter`: how many may run at once (None: trio's default)."""
    result = await trio.to_thread.run_sync(_capture, call, limiter=limiter)
    if not isinstance(result, _Failed):
        return result
    error = result.error
    del result
    try:
        raise error
    finally:
        del error  # this frame joins the traceback: no cycle through its locals


@dataclass(frozen=True, slots=True)
class _Failed:
    error: Exception


def _capture(call: Callable[[], T]) -> T | _Failed:
    """`call()`, or the exception it raised, stripped of the worker thread's frames.

    Raised out of a trio worker thread, an exception sits in a reference cycle with
    trio's thread machinery (its traceback's frames reach back through `f_back`),
    and those frames hold the request until the cyclic GC happens to run: a client
    sending refused 4 MiB writes grew the daemon by hundreds of MiB. Without its
    frames it holds nothing; a bug keeps its traceback as text for the log.
    """
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - handed back whole to the trio thread
        if not isinstance(exc, InvalidInputError | StoreError):
            exc.add_note("".join(traceback.format_tb(exc.__traceback__)).rstrip())
        link: BaseException | None = exc
        seen: set[int] = set()
        while link is not None and id(link) not in seen:
            seen.add(id(link))
            link.__traceback__ = None
            link = link.__cause__ or link.__context__
        return _Failed(exc)


class _Workers(_State):
    """Long store scans, one at a time, with the collector paused."""

    async def _scan(self, call: Callable[[], T]) -> T:
        """Run a store read that may walk many records in a worker thread.

        One at a time: each holds a read transaction and builds its whole answer,
        and a walk over 200,000 memories takes about a second, during which the
        trio thread goes on answering hooks. py-lmdb opens the environment with
        MDB_NOTLS and each read transaction begins and ends in the one thread
        that runs `call`. An export or a bulk import can take the same path.
        """
        async with self._scans:
            previous = sys.getswitchinterval()
            sys.setswitchinterval(_SCAN_SWITCH_INTERVAL_S)
            # The cyclic GC, triggered by the scan's hundreds of thousands of new
            # objects, would walk them all holding the GIL (100+ ms, no switch).
            collecting = gc.isenabled()
            gc.disable()
            try:
                return await _in_thread(call)
            finally:
                if collecting:
                    gc.enable()
                sys.setswitchinterval(previous)
