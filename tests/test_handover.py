"""The words the model reads: full text within the cap, linear in size, and the pointer."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import msgspec
import pytest

from mented import handover
from mented.actions import ActionTable, load_action_table
from mented.config import Config
from mented.handover import (
    MAX_POINTER_CHARS,
    MAX_REPLACED_WORDS,
    Replaced,
    Section,
    render_pointer,
    render_rules,
)
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


def test_each_rule_is_rendered_at_most_twice_and_cut_before_it_is_composed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 13 actions x 50 rules of 64 KiB: the old renderer composed the whole text
    # again for every rule it dropped (12.6 s per hook). Now each rule's line is
    # made once, from at most twice the cap of its text, and the text composed once
    # (an action's newest rule once more, cut to its share, when they do not fit).
    lines_made: list[int] = []
    make_line = handover._rule_line

    def counting(rule: Memory, replaced: dict[str, Replaced], max_chars: int) -> str:
        line = make_line(rule, replaced, max_chars)
        lines_made.append(len(line))
        return line

    monkeypatch.setattr(handover, "_rule_line", counting)
    sections = [
        Section(action, [memory("z" * MAX_CONTENT_BYTES) for _ in range(50)]) for action in ACTIONS
    ]
    text = render(sections, max_chars=9500)
    assert len(text) <= 9500
    assert len(lines_made) <= 51 * len(ACTIONS)
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


# ------------------------------------------------- what the cut leaves the model


def test_two_long_rules_for_one_action_hand_over_the_newest_cut_not_nothing() -> None:
    # Two 5,000-character git-commit rules: the stop read only "(2 older rules ...
    # left out)" and `log` said RULES 0 of 2 (a stop for nothing).
    older, newer = memory("older: " + "o" * 5000), memory("newer: " + "n" * 5000)
    handed = render_rules(
        [Section("git-commit", [newer, older])], moment="before", max_chars=4000, table=TABLE
    )
    assert handed.shown_ids == [newer.id]
    assert len(handed.text) <= 4000
    assert f"- [{short_handle(newer.id)}] newer: nnn" in handed.text
    assert f"`mentectl rule show {short_handle(newer.id)}` shows it whole" in handed.text
    assert "(1 older rule for `git-commit` left out" in handed.text
    assert "older: " not in handed.text


@pytest.mark.parametrize("counts", [(1, 1), (1, 2), (2, 1), (3, 3), (1, 1, 1)])
def test_several_actions_over_the_cap_each_keep_their_newest_rule(
    counts: tuple[int, ...],
) -> None:
    actions = ["git-commit", "git-push", "pr-create"][: len(counts)]
    sections = [
        Section(action, [memory(f"{action} rule {n}: " + "w" * 5000) for n in range(count)])
        for action, count in zip(actions, counts, strict=True)
    ]
    handed = render_rules(sections, moment="before", max_chars=4000, table=TABLE)
    assert len(handed.text) <= 4000
    assert handed.shown_ids == [section.rules[0].id for section in sections]
    for section in sections:
        newest = short_handle(section.rules[0].id)
        assert f"- [{newest}] {section.action} rule 0: www" in handed.text
        assert f"`mentectl rule show {newest}` shows it whole" in handed.text
        left_out = len(section.rules) - 1
        if left_out:
            noun = "rule" if left_out == 1 else "rules"
            assert f"({left_out} older {noun} for `{section.action}` left out" in handed.text


def test_a_short_rule_beside_a_long_one_stays_whole() -> None:
    short = memory("one line, imperative mood")
    long = memory("long: " + "l" * 9000)
    handed = render_rules(
        [Section("git-commit", [short]), Section("git-push", [long])],
        moment="after",
        max_chars=4000,
        table=TABLE,
    )
    assert f"- [{short_handle(short.id)}] one line, imperative mood\n" in handed.text
    assert f"`mentectl rule show {short_handle(long.id)}` shows it whole" in handed.text
    assert len(handed.text) > 3900  # the long one has the rest of the room


def test_the_pointer_never_passes_its_length_and_ends_on_a_whole_word() -> None:
    # Every cut position: action names of every length move the last space around.
    for width in range(1, 40):
        for count in range(1, 8):
            handles = [
                ("a" * width, [f"{n:08x}" for n in range(count)]),
                ("git-push", ["beef0001"]),
            ]
            line = render_pointer(handles)
            full = "; ".join(f"{a} " + " ".join(f"[{h}]" for h in hs) for a, hs in handles)
            whole = f"mented: the rules shown earlier still apply to this command: {full}."
            assert len(line) <= MAX_POINTER_CHARS
            if len(whole) <= MAX_POINTER_CHARS:
                assert line == whole
            else:
                assert line.endswith(" …")
                kept = line.removesuffix(" …")
                assert whole.startswith(kept)
                assert whole[len(kept)] == " "  # cut between words
                assert len(kept) >= MAX_POINTER_CHARS - 2 - 2 * max(width + 1, len("[beef0001]."))


def test_replaces_names_only_a_rule_given_in_the_section() -> None:
    new = memory("rebase, never squash")
    seen = render([Section("git-merge", [new], {new.id: Replaced("abcd1234")})])
    assert f"- [{short_handle(new.id)}] (replaces [abcd1234]) rebase, never squash" in seen
    unseen = render([Section("git-merge", [new])])
    assert f"- [{short_handle(new.id)}] rebase, never squash" in unseen
    assert "replaces" not in unseen


def test_a_rule_replacing_one_the_session_was_not_handed_quotes_its_first_words() -> None:
    new = memory("rebase, never squash")
    said = Replaced("abcd1234", "squash before merging")
    text = render([Section("git-merge", [new], {new.id: said})])
    assert (
        f'- [{short_handle(new.id)}] (replaces [abcd1234] "squash before merging") rebase, never'
        in text
    )


def test_the_replaced_rules_words_give_way_on_a_line_cut_short() -> None:
    # Many actions, each a long rule replacing another: every line is cut to its
    # share; the old rules' words go first, the text stays within the cap, and
    # each line still says which rule it replaces.
    said = Replaced("abcd1234", "w" * MAX_REPLACED_WORDS)
    sections = []
    for action in ACTIONS:
        new = memory("n" * 3000)
        sections.append(Section(action, [new], {new.id: said}))
    text = render(sections, max_chars=4000)
    assert len(text) <= 4000
    assert text.count("(replaces [abcd1234]) ") == len(ACTIONS)
    assert f'"{"w" * MAX_REPLACED_WORDS}"' not in text  # (a handle may hold "www")


EDITS_TABLE = load_action_table(
    Config(actions={"db-migration": {"description": "change the schema", "paths": ["**/m/**"]}})
)


@pytest.mark.parametrize(
    ("action", "table", "whats"),
    [
        ("git-commit", TABLE, ["command"]),
        ("pr-create", TABLE, ["command", "tool call"]),
        ("db-migration", EDITS_TABLE, ["file edit"]),
        # `rule add` for an action the table does not name (yet): a command's words.
        ("not-in-the-table", TABLE, ["command"]),
    ],
)
def test_the_warning_figure_is_exactly_where_the_cut_begins(
    action: str, table: ActionTable, whats: list[str]
) -> None:
    # `rule add` warns above `longest_whole_rule`: a rule of that length reaches the
    # model whole however it is handed over (either moment, after earlier rules,
    # with older rules left out); one more character is cut at least once.
    # (The intro was measured with "{what}" in it: 3,305-3,307 were cut unwarned.)
    older = memory("older " + "o" * 5000)
    for max_chars in (1000, 4000, 9500):
        limit = handover.longest_whole_rule(
            action, max_chars=max_chars, table=table, replaces=False
        )

        def cut(length: int, max_chars: int = max_chars, *, lone: bool = False) -> bool:
            new = memory("r" * length)
            texts = [
                render_rules(
                    [Section(action, rules)],
                    moment=moment,
                    max_chars=max_chars,
                    table=table,
                    earlier=earlier,
                    what=what,
                ).text
                for moment in ("before", "after")
                for earlier in (False, True)
                for what in whats
                for rules in ([[new]] if lone else [[new, older], [new]])
            ]
            assert all(f"[{short_handle(new.id)}] rrr" in text for text in texts)
            return any("shows it whole" in text for text in texts)

        assert not cut(limit), (max_chars, limit)
        assert cut(limit + 1), (max_chars, limit)
        assert cut(limit + 1, lone=True), (max_chars, limit)  # its action's alone too
    # A superseding rule's line may say which rule it replaces: its figure is lower.
    assert handover.longest_whole_rule(action, max_chars=4000, table=table) == limit_at(
        action, table
    ) - len(f'(replaces [abcd1234] "{"w" * MAX_REPLACED_WORDS}") ')


def limit_at(action: str, table: ActionTable) -> int:
    return handover.longest_whole_rule(action, max_chars=4000, table=table, replaces=False)


def test_a_superseding_rule_of_the_warned_length_is_whole_with_the_longest_note() -> None:
    # `rule supersede` warns above this figure: up to it, the new rule reaches the
    # model whole even when it names the old one by its longest first words.
    older = memory("older " + "o" * 5000)
    limit = handover.longest_whole_rule("git-commit", max_chars=4000, table=TABLE)
    new = memory("r" * limit)
    said = Replaced("abcd1234", "w" * MAX_REPLACED_WORDS)
    for moment in ("before", "after"):
        text = render_rules(
            [Section("git-commit", [new, older], {new.id: said})],
            moment=moment,
            max_chars=4000,
            table=TABLE,
            earlier=True,
        ).text
        assert f'"{"w" * MAX_REPLACED_WORDS}") {"r" * limit}\n' in text
        assert "shows it whole" not in text.split("older")[0]


def test_before_the_command_runs_the_words_promise_it_will_not_be_stopped_again() -> None:
    rule = memory("one line, imperative mood")
    text = render([Section("git-commit", [rule])])
    assert text.startswith(
        "mented stopped this command once, before it ran, so that you read the user's rules "
        "for it first. Run it again once it follows them; it will not be stopped again for "
        "these rules.\n\n"
    )
    assert f"- [{short_handle(rule.id)}] one line, imperative mood\n" in text


def test_many_long_rules_are_never_cut_below_eighty_characters() -> None:
    # Four actions, each a long newest rule and an older one, at a cap where their
    # fair share is under 80 characters: the lines shown are cut no shorter than
    # 80 (a readable start, not a stub); whole actions' rules are left out instead.
    sections = [
        Section(action, [memory(f"{action} " + "w " * 2000), memory("older " + "o" * 500)])
        for action in ACTIONS[:4]
    ]
    text = render(sections, max_chars=1450)
    assert len(text) <= 1450
    lines = [line for line in text.splitlines() if line.startswith("- [")]
    assert lines, text
    for line in lines:
        assert len(line) >= 79, line  # cut to 80, less the space before the cut's words
        assert line.endswith("shows it whole)"), line


def test_long_rules_listed_before_a_short_one_still_share_the_rest_of_the_room() -> None:
    # The fair share is worked out shortest first, whatever the order of the actions:
    # the short rule stays whole and the two long ones split what it leaves.
    first, second = memory("long: " + "l" * 9000), memory("long: " + "m" * 9000)
    short = memory("one line, imperative mood")
    handed = render_rules(
        [
            Section("git-push", [first]),
            Section("pr-create", [second]),
            Section("git-commit", [short]),
        ],
        moment="after",
        max_chars=4000,
        table=TABLE,
    )
    assert f"- [{short_handle(short.id)}] one line, imperative mood\n" in handed.text
    for rule in (first, second):
        assert f"`mentectl rule show {short_handle(rule.id)}` shows it whole" in handed.text
    assert len(handed.text) > 3900  # not a third of the room each
