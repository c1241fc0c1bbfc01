"""How long the event loop was held: the longest trio task step, recent and since start.

Every hook of every agent session goes through the daemon's one trio thread, so
the time one task step keeps it (a search, a match, a scan done in place, or the
GIL held by a worker thread meanwhile) is what every other request waits. A trio
instrument times each step: two clock reads and a comparison, no timer of its
own (an idle daemon wakes for nothing). `mentectl status` shows the worst step
since start and over the last minute or two, with the task that took it, and the
tests of docs/reliability.md assert on it under each attack. `status` also says the
longest step since the previous `status` (`loop_lag_since_ms`), so that a benchmark
can measure what a load added after its set-up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import trio

WINDOW_S = 60.0  # "recent": this window and the one before it


@dataclass(frozen=True, slots=True)
class Lag:
    """The longest step in some span of time, and the task that took it."""

    seconds: float = 0.0
    task: str | None = None


class LoopLag(trio.abc.Instrument):
    """A trio instrument keeping the longest task step (`start`, then add it to the run)."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self._window_s = window_s
        self._clock = time.perf_counter
        self._step_started = 0.0
        self._worst = Lag()
        self._window_end = self._clock() + window_s
        self._this_window = Lag()
        self._last_window = Lag()
        self._since_taken = Lag()  # see `take`

    def start(self) -> None:
        """Begin with the step in progress (`trio.lowlevel.add_instrument` is called in
        one: its end comes without a beginning)."""
        self._step_started = self._clock()
        self._window_end = self._step_started + self._window_s

    def before_task_step(self, task: trio.lowlevel.Task) -> None:  # noqa: ARG002 - trio's signature
        self._step_started = self._clock()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        now = self._clock()
        took = now - self._step_started
        if took > self._since_taken.seconds:
            self._since_taken = Lag(took, task.name)
        if now >= self._window_end:
            self._rotate(now)
        if took > self._this_window.seconds:
            self._this_window = Lag(took, task.name)
            if took > self._worst.seconds:
                self._worst = self._this_window

    def _rotate(self, now: float) -> None:
        # A window that ended long ago (an idle daemon) leaves nothing recent behind.
        stale = now >= self._window_end + self._window_s
        self._last_window = Lag() if stale else self._this_window
        self._this_window = Lag()
        self._window_end = now + self._window_s

    @property
    def worst(self) -> Lag:
        """The longest step since the daemon started serving."""
        return self._worst

    @property
    def recent(self) -> Lag:
        """The longest step in the last one to two windows."""
        now = self._clock()
        if now >= self._window_end:
            self._rotate(now)
        this, last = self._this_window, self._last_window
        return this if this.seconds >= last.seconds else last

    def take(self) -> Lag:
        """The longest step since the previous `take`, and start again: what a load
        added, once its set-up's steps are taken (`mentectl bench`'s loop-lag part)."""
        taken, self._since_taken = self._since_taken, Lag()
        return taken

    def reset(self) -> None:
        """Forget what was measured (the start-up's first steps, or a test's set-up)."""
        self._worst = self._this_window = self._last_window = self._since_taken = Lag()
