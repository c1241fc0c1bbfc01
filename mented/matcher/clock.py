"""The time limits of one match: its CPU budget and the caller's wall-clock deadline."""

from __future__ import annotations

import math
import time

from mented.cputime import own_cpu_time
from mented.matcher.limits import _CHECK_EVERY, BASHLEX_CPU_BUDGET_S, MATCH_CPU_BUDGET_S


class _Clock:
    """The time limits of one match, looked at every `_CHECK_EVERY` checkpoints.

    CPU time of this thread for the command's own budgets (what a command costs, the
    same on a busy machine; without garbage collections, `mented.cputime`),
    wall-clock time for the caller's deadline.
    """

    __slots__ = (
        "bashlex_cut",
        "bashlex_until",
        "cpu_until",
        "late",
        "out_of_time",
        "ticks",
        "wall_until",
    )

    def __init__(self, deadline: float | None, cpu_budget_s: float = MATCH_CPU_BUDGET_S) -> None:
        now = own_cpu_time()
        self.cpu_until = now + cpu_budget_s
        self.bashlex_until = now + cpu_budget_s * (BASHLEX_CPU_BUDGET_S / MATCH_CPU_BUDGET_S)
        self.wall_until = math.inf if deadline is None else deadline
        self.ticks = _CHECK_EVERY
        self.out_of_time = False  # the command used up its own budget
        self.bashlex_cut = False  # bashlex used up its part of it
        self.late = False  # the caller's deadline passed

    def expired(self) -> bool:
        """Whether matching must stop now (own budget used up, or the deadline passed)."""
        if not (self.out_of_time or self.late):
            if time.monotonic() >= self.wall_until:
                self.late = True
            elif own_cpu_time() >= self.cpu_until:
                self.out_of_time = True
        return self.out_of_time or self.late

    def tick(self) -> bool:
        """`expired()`, looked at only every `_CHECK_EVERY` calls (cheap in between)."""
        self.ticks -= 1
        if self.ticks > 0:
            return self.out_of_time or self.late
        self.ticks = _CHECK_EVERY
        return self.expired()

    def bashlex_expired(self) -> bool:
        if self.expired():
            return True
        if own_cpu_time() >= self.bashlex_until:
            self.bashlex_cut = True
        return self.bashlex_cut
