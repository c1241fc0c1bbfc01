"""The words the model reads: full text within the cap, linear in size, and the pointer."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import msgspec
import pytest

from mented import handover
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


def test_each_rule_is_rendered_once_and_cut_before_it_is_composed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 13 actions x 50 rules of 64 KiB: the old renderer composed the whole text
    # again for every rule it dropped (12.6 s per hook). Now each rule's line is
    # made once, from at most twice the cap of its text, and the text composed once.
    lines_made: list[int] = []
    make_line = handover._rule_line

    def counting(rule: Memory, replaced: dict[str, str], max_chars: int) -> str:
        line = make_line(rule, replaced, max_chars)
        lines_made.append(len(line))
        return line

    monkeypatch.setattr(handover, "_rule_line", counting)
    sections = [
        Section(action, [memory("z" * MAX_CONTENT_BYTES) for _ in range(50)]) for action in ACTIONS
    ]
    text = render(sections, max_chars=9500)
    assert len(text) <= 9500
    assert len(lines_made) == 50 * len(ACTIONS)
    assert max(lines_made) <= 9500


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


def test_with_a_project_rule_the_words_say_yours_win_and_where_to_change_the_projects() -> None:
    mine = memory("mine: one line")
    theirs = msgspec.structs.replace(memory("team: conventional prefix"), origin="project")
    alone = render([Section("git-commit", [mine])])
    assert "when two conflict, the newest wins" in alone
    assert "(the project's)" not in alone

    text = render([Section("git-commit", [mine, theirs])])
    assert text.index("mine: one line") < text.index("(the project's) team: conventional prefix")
    assert "the newest wins" not in text  # the project's may be newer, and still not win
    assert "The user's own rules come first" in text
    assert "when two conflict, the one listed first wins" in text
    assert "`.mented/rules.jsonl`" in text
    assert "change it there, in a commit" in text
    # Within the cap with the longer words too.
    assert len(render([Section("git-commit", [mine, theirs])], max_chars=700)) <= 700
