"""The loop-lag instrument: the longest step since start, and since the previous `take`."""

from __future__ import annotations

from dataclasses import dataclass

from mented.looplag import LoopLag


@dataclass
class Task:
    name: str


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def step(lag: LoopLag, clock: Clock, task: str, seconds: float) -> None:
    lag.before_task_step(Task(task))  # type: ignore[arg-type]
    clock.now += seconds
    lag.after_task_step(Task(task))  # type: ignore[arg-type]


def test_take_gives_the_longest_step_since_the_previous_take_and_the_worst_stays() -> None:
    clock = Clock()
    lag = LoopLag()
    lag._clock = clock
    lag.start()
    step(lag, clock, "start-up", 0.050)  # a daemon's first hook, say
    step(lag, clock, "hook", 0.002)
    assert lag.take().task == "start-up"
    step(lag, clock, "recall", 0.004)
    step(lag, clock, "hook", 0.001)
    taken = lag.take()
    # What the load added, without the start-up's step; the worst since start is kept.
    assert (taken.task, round(taken.seconds, 3)) == ("recall", 0.004)
    assert lag.worst.task == "start-up"
    assert lag.take().seconds == 0.0  # nothing ran since
