"""The words the model reads: full text within the cap, linear in size, and the pointer."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from mented.actions import load_action_table
from mented.config import Config
from mented.handover import MAX_POINTER_CHARS, Section, render_pointer, render_rules
from mented.memory import MAX_CONTENT_BYTES, Memory, MemoryType, new_id, short_handle

if TYPE_CHECKING:
    from collections.abc import Sequence

TABLE = load_action_table(Config())
ACTIONS = [action.name for action in TABLE.actions()]


def memory(text: str) -> Memory:
    return Memory(
        id=new_id(), content=text, memory_type=MemoryType.PROCEDURAL, created_at=time.time()
    )


def render(sections: Sequence[Section], max_chars: int = 4000) -> str:
    return render_rules(sections, moment="before", max_chars=max_chars, table=TABLE).text


def test_a_rule_longer_than_the_cap_is_cut_with_a_pointer_to_all_of_it() -> None:
    long = memory("first line\n" + "y" * 20_000)
    text = render([Section("git-commit", [long])], max_chars=2000)
    assert len(text) <= 2000
    assert f"`mentectl rule show {short_handle(long.id)}` shows it whole" in text
    assert "first line\n  yyy" in text  # its own lines stay under its bullet


def test_rendering_grows_linearly_with_the_number_of_rules() -> None:
    def seconds(per_action: int) -> float:
        sections = [
            Section(action, [memory("z" * MAX_CONTENT_BYTES) for _ in range(per_action)])
            for action in ACTIONS
        ]
        runs = []
        for _ in range(3):
            started = time.perf_counter()
            text = render(sections, max_chars=9500)
            runs.append(time.perf_counter() - started)
            assert len(text) <= 9500
        return min(runs)

    # 13 actions x k rules of 64 KiB: the old renderer composed the text again for
    # every rule it dropped (k = 5 -> 50 cost 100x; 12.6 s at 50). Ten times the
    # rules must cost about ten times as much, not a hundred.
    assert seconds(50) < 25 * seconds(5) + 0.005


def test_the_pointer_stays_short_however_many_rules() -> None:
    handles = [(action, [short_handle(new_id()) for _ in range(50)]) for action in ACTIONS]
    line = render_pointer(handles)
    assert len(line) <= MAX_POINTER_CHARS
    assert line.startswith("mented: the rules shown earlier still apply")
    short = render_pointer([("git-commit", ["abcd1234"])])
    assert (
        short
        == "mented: the rules shown earlier still apply to this command: git-commit [abcd1234]."
    )
