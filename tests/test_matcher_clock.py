"""The matcher's time budget and the caller's deadline (`mented.matcher.clock`)."""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import bashlex
import pytest

from mented.actions import load_action_table
from mented.config import Config
from mented.cputime import own_cpu_time
from mented.matcher import MATCH_CPU_BUDGET_S, Explanation, Matcher
from mented.matcher import clock as clock_module
from mented.server.hooks import _QUICK_MATCH_S
from tests.matcher_helpers import assert_well_formed

# Commands that took bashlex from a third of a second to seconds (issue 12): a word of
# backtick substitutions, a chain of redirections, and fifteen `bash -c` strings of them.
HOSTILE = {
    "backticks": '"' + "`x`" * 2700 + '"',
    "redirections": "x" + ">y" * 4000,
    "fifteen bash -c strings": " ; ".join(
        "bash -c " + json.dumps("x" + ">y" * 4000) for _ in range(15)
    ),
    "fifteen bash -c strings of backticks": " ; ".join(
        "bash -c " + json.dumps("`x`" * 2700) for _ in range(15)
    ),
}


@contextmanager
def slow_collections(cpu_s: float) -> Iterator[None]:
    """Every garbage collection takes `cpu_s` of this thread's CPU, as a full one of a
    large heap does (41-126 ms measured in the daemon)."""

    def burn(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            until = time.thread_time() + cpu_s
            while time.thread_time() < until:
                pass

    gc.callbacks.append(burn)
    try:
        yield
    finally:
        gc.callbacks.remove(burn)


def test_a_collection_inside_a_match_does_not_use_up_its_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A collection of 80 ms of CPU landing in bashlex made the match give up at its
    # 50 ms and name no action: that command got no rules.
    matcher = Matcher(load_action_table(Config()), cache_bytes=0)
    parse = bashlex.parse

    def collecting(source: str) -> object:
        with slow_collections(0.080):
            gc.collect()
        return parse(source)

    monkeypatch.setattr(bashlex, "parse", collecting)
    explanation = matcher.explain("git add -A && git commit -m 'fix: x' && git push")
    assert explanation.actions == ("git-commit", "git-push")
    assert explanation.parser == "bashlex"
    assert not any("budget" in note or "bashlex" in note for note in explanation.notes)


def cpu_seconds(call: Callable[[], object]) -> float:
    """The CPU `call` took of this thread, as the budget counts it (collections left out)."""
    started = own_cpu_time()
    call()
    return own_cpu_time() - started


@pytest.mark.parametrize("command", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_command_costs_at_most_the_time_budget(command: str) -> None:
    matcher = Matcher(load_action_table(Config()), cache_bytes=0)
    explanation: list[Explanation] = []
    spent = cpu_seconds(lambda: explanation.append(matcher.explain(command)))
    # Cut at the budget, give or take a checkpoint (a few hundred microseconds); the
    # margin is for a busy machine. Unbounded, each took 0.4 to 4 seconds.
    assert spent < 3 * MATCH_CPU_BUDGET_S, spent
    assert_well_formed(explanation[0])
    assert explanation[0].fallback_used
    assert any("time budget" in note or "ms" in note for note in explanation[0].notes)


def test_an_action_before_a_hostile_string_is_still_named() -> None:
    matcher = Matcher(load_action_table(Config()), cache_bytes=0)
    command = "git push; " + HOSTILE["fifteen bash -c strings"]
    assert matcher.actions_in(command) == ("git-push",)


def test_a_passed_deadline_stops_matching_and_is_not_cached() -> None:
    matcher = Matcher(load_action_table(Config()))
    command = "echo " + "word " * 3000 + "&& git push"
    late: list[tuple[str, ...]] = []
    spent = cpu_seconds(lambda: late.append(matcher.actions_in(command, deadline=0.0)))
    assert late == [()]
    assert spent < MATCH_CPU_BUDGET_S
    # The cut answer was not kept: without a deadline the whole command is read.
    assert matcher.actions_in(command) == ("git-push",)
    explanation = matcher.explain(command, deadline=0.0)
    assert any("deadline" in note for note in explanation.notes)


def test_ordinary_commands_are_not_cut() -> None:
    matcher = Matcher(load_action_table(Config()), cache_bytes=0)
    body = "some text with `git push` and $(npm publish) in it\n" * 200
    command = f"git add -A && git commit -F - <<'EOF'\n{body}EOF\ngh pr create --fill"
    explanation = matcher.explain(command)
    assert explanation.actions == ("git-commit", "pr-create")
    assert not any("budget" in note or "deadline" in note for note in explanation.notes)


def test_a_quick_match_cut_in_bashlex_leaves_the_command_to_the_full_match(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The hook first matches on the event loop within a small budget (`_QUICK_MATCH_S`),
    # bashlex getting half of it; a command whose parse starts slowly uses that half
    # up. The quick path must then give up (None: the hook matches in a worker within
    # the whole budget), not keep and cache the answer of a cut parse.
    matcher = Matcher(load_action_table(Config()))
    spent = [0.0]
    monkeypatch.setattr(clock_module, "own_cpu_time", lambda: own_cpu_time() + spent[0])
    parse = bashlex.parse

    def slow_start(source: str) -> object:
        spent[0] += 0.6 * _QUICK_MATCH_S  # past bashlex's half, under the whole budget
        return parse(source)

    monkeypatch.setattr(bashlex, "parse", slow_start)
    command = "git add -A && git commit -m 'fix: the parser' && git push"
    assert matcher.quick_actions_in(command, _QUICK_MATCH_S) is None
    assert matcher.actions_in(command) == ("git-commit", "git-push")
    explanation = matcher.explain(command)
    assert explanation.parser == "bashlex"
    assert not any("budget" in note or "bashlex" in note for note in explanation.notes)
