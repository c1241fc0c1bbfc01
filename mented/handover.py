"""The words the model reads: the rules for a command, in full or as a one-line pointer.

Two moments, two sets of words, each true for its delivery:

- `before` (the command was stopped once, or the agent shows context before the
  tool runs): "Run it again once it follows them".
- `after` (extra context, which the agent shows next to the tool's result):
  "the command that just ran falls under these rules; if it broke one, correct it".

Each rule keeps its short handle, so that the model and the user can supersede
it; a rule that supersedes another says which (`Replaced`: by its handle when the
session was handed it, else by its handle and first words; mented.replaced). A
project's committed rule (mented.team) is marked as the project's, and the words
say where to change it instead (its `.mented/` file, in a commit) and that the
user's own rules, listed first, win over it.
The text stays within `max_chars`: a rule longer than its share is cut with a
pointer to `mentectl rule show`, then whole rules are left out, the oldest of
the longest section first, and the section says how many. Each action keeps its
newest rule: when those do not fit side by side, each is cut to a fair share. Lengths are worked
out per line first and the text is composed once: linear in what is rendered.

A later command whose rules the session already has gets `pointer`: one line
of at most `MAX_POINTER_CHARS` naming the actions and the handles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import msgspec

from mented.memory import ORIGIN_PROJECT, SHORT_HANDLE_LENGTH, short_handle

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from mented.actions import ActionTable
    from mented.memory import Memory

Moment = Literal["before", "after"]

MAX_POINTER_CHARS = 120

INTRO: dict[Moment, str] = {
    "before": (
        "mented stopped this {what} once, before it ran, so that you read the user's rules "
        "for it first. Run it again once it follows them; it will not be stopped again for "
        "these rules."
    ),
    "after": (
        "The {what} that just ran falls under the user's rules below (from mented). "
        "If it broke one, correct it."
    ),
}
EARLIER = "The rules you were shown earlier in this session still apply, unless replaced here."
# No full stop at the end: Codex follows a deny's reason with ". Command: ...".
FOOTER = (
    "Newest first; when two conflict, the newest wins. To change a rule when the user asks: "
    '`mentectl rule supersede HANDLE "new text"` (or the mented MCP tool `supersede_rule`)'
)
# With a project's committed rules among them (mented.team): the user's own rules
# come first and win, and the project's are changed in the repository, not superseded.
FOOTER_WITH_PROJECT = (
    "The user's own rules come first, newest first, then the project's; when two conflict, "
    "the one listed first wins. To change one of the user's rules when the user asks: "
    '`mentectl rule supersede HANDLE "new text"` (or the mented MCP tool `supersede_rule`). '
    "A rule marked (the project's) is not superseded that way: it is committed in the "
    "repository's `.mented/` folder (`.mented/rules.jsonl`), shared with the team; change it "
    "there, in a commit"
)
_CUT = " … (cut; `mentectl rule show {handle}` shows it whole)"
_LEFT_OUT = (
    "({n} older {noun} for `{action}` left out to stay within {max_chars} characters; "
    "`mentectl rule list --action {action}` shows them.)"
)
_MIN_RULE_CHARS = 80  # a rule is cut no shorter than this; below, it is left out instead


MAX_REPLACED_WORDS = 60  # of a replaced rule's text (mented.replaced cuts them so)


class Replaced(msgspec.Struct, frozen=True):
    """The rule a rule replaces, as the model is told: its handle, and its first words
    when the session was not handed it (at most `MAX_REPLACED_WORDS` characters)."""

    handle: str
    words: str | None = None

    @property
    def note(self) -> str:
        """The words before the rule's text: `(replaces [handle] "first words") `."""
        said = f' "{self.words}"' if self.words else ""
        return f"(replaces [{self.handle}]{said}) "


class Section(msgspec.Struct, frozen=True):
    """One action's rules to hand over, newest first.

    `replaced` maps a rule's id to the rule it replaces (`Replaced`), when there is
    one the session may be told of (mented.replaced decides).
    """

    action: str
    rules: Sequence[Memory]
    replaced: Mapping[str, Replaced] = msgspec.field(default_factory=dict)


class Handover(msgspec.Struct, frozen=True):
    """The text, and which rules went in it whole or cut (the rest were left out)."""

    text: str
    shown_ids: list[str]

    def __bool__(self) -> bool:
        return bool(self.text)


def render_rules(  # noqa: PLR0913 - the text's parts, each named at the call
    sections: Sequence[Section],
    *,
    moment: Moment,
    max_chars: int,
    table: ActionTable,
    earlier: bool = False,
    what: str = "command",
) -> Handover:
    """The full text for `sections`, within `max_chars` (empty when not even headings fit).

    `earlier`: the session was handed other rules before, which still apply.
    `what`: what was stopped or ran: "command", "tool call", "file edit".
    """
    intro = INTRO[moment].format(what=what) + (" " + EARLIER if earlier else "")
    headings = [_heading(section.action, moment, table) for section in sections]
    notes = [
        _LEFT_OUT.format(n=999, noun="rules", action=s.action, max_chars=max_chars)
        for s in sections
    ]
    with_project = any(rule.origin == ORIGIN_PROJECT for s in sections for rule in s.rules)
    footer = FOOTER_WITH_PROJECT if with_project else FOOTER
    room = _room(intro, headings, max_chars, footer)
    if room <= 0:
        return Handover(text="", shown_ids=[])
    # A rule longer than the room is cut to it (with a pointer to the whole text):
    # the room less a note and the two line breaks (the rule's and the note's).
    per_rule = max(_MIN_RULE_CHARS, room - max(len(note) + 1 for note in notes) - 1)
    lines = [
        [_rule_line(rule, section.replaced, per_rule) for rule in section.rules]
        for section in sections
    ]
    # Each action keeps its newest rule: when those do not fit side by side, they
    # are cut to a fair share of the room, so that leaving out whole rules (below)
    # stops before a section is emptied.
    share = _fair_share(
        [len(section_lines[0]) for section_lines in lines if section_lines],
        room
        - len(sections)
        - sum(len(note) + 1 for note, s in zip(notes, sections, strict=True) if len(s.rules) > 1),
    )
    if share < per_rule:
        for section, section_lines in zip(sections, lines, strict=True):
            if section_lines and len(section_lines[0]) > share:
                section_lines[0] = _rule_line(
                    section.rules[0], section.replaced, max(_MIN_RULE_CHARS, share)
                )
    shown = [len(section_lines) for section_lines in lines]
    total = sum(len(line) + 1 for section_lines in lines for line in section_lines)
    # Leave out whole rules, oldest of the longest section first, until they fit
    # with the notes that say so. Each step is O(sections): linear overall.
    while (
        total + sum(len(notes[i]) + 1 for i, s in enumerate(sections) if shown[i] < len(s.rules))
        > room
    ):
        longest = max(range(len(shown)), key=shown.__getitem__)
        if shown[longest] == 0:
            return Handover(text="", shown_ids=[])
        shown[longest] -= 1
        total -= len(lines[longest][shown[longest]]) + 1
    parts = [intro]
    shown_ids: list[str] = []
    for section, heading, section_lines, count in zip(
        sections, headings, lines, shown, strict=True
    ):
        body = [heading, *section_lines[:count]]
        shown_ids.extend(rule.id for rule in section.rules[:count])
        left_out = len(section.rules) - count
        if left_out:
            noun = "rule" if left_out == 1 else "rules"
            body.append(
                _LEFT_OUT.format(n=left_out, noun=noun, action=section.action, max_chars=max_chars)
            )
        parts.append("\n".join(body))
    parts.append(footer)
    return Handover(text="\n\n".join(parts), shown_ids=shown_ids)


def longest_whole_rule(
    action: str, *, max_chars: int, table: ActionTable, replaces: bool = True
) -> int:
    """The most characters of rule text the hook hands over whole for `action`.

    That is when the rule is the newest one handed over, its action's alone: a
    longer rule reaches the model cut, with a pointer to `mentectl rule show`,
    at least once (the words differ a little by moment and by what performs the
    action). `mentectl rule add` warns with this figure. A line break in the rule
    counts 3 (it is indented). `replaces`: the rule may say which one it replaces
    (a superseding rule), with that one's first words to a session not handed it;
    a rule just added never does.
    """
    note = _LEFT_OUT.format(n=999, noun="rules", action=action, max_chars=max_chars)
    handle = "x" * SHORT_HANDLE_LENGTH
    longest = Replaced(handle, "w" * MAX_REPLACED_WORDS).note
    head = len(f"- [{handle}] " + (longest if replaces else ""))
    rooms = [
        _room(
            INTRO[moment].format(what=what) + " " + EARLIER,
            [_heading(action, moment, table)],
            max_chars,
        )
        for moment in INTRO
        for what in _whats(action, table)
    ]
    return max(_MIN_RULE_CHARS, min(rooms) - len(note) - 2) - head


def _whats(action: str, table: ActionTable) -> list[str]:
    """How the words name what performs `action` (`ToolCall.kind_in_words`)."""
    found = [a for a in table.actions() if a.name == action]
    if not found:
        return ["command"]
    performed = found[0]
    whats = []
    if performed.shapes or not (performed.tools or performed.paths):
        whats.append("command")
    if performed.tools:
        whats.append("tool call")
    if performed.paths:
        whats.append("file edit")
    return whats


def _fair_share(lengths: Sequence[int], budget: int) -> int:
    """The largest cut at which `lengths`, each cut to it, sum to at most `budget`.

    Lines shorter than the cut stay whole and leave their unused share to the
    others (max-min fairness). Large when they all fit uncut.
    """
    if sum(lengths) <= budget:
        return budget
    left = budget
    ordered = sorted(lengths)
    for i, length in enumerate(ordered):
        others = len(ordered) - i
        if length * others > left:
            return left // others
        left -= length
    return budget  # not reached: the sum was over the budget


def _room(intro: str, headings: Sequence[str], max_chars: int, footer: str = FOOTER) -> int:
    """What is left of `max_chars` for rules and notes after the fixed parts.

    The fixed parts: intro, headings, footer, and the blank lines between parts.
    """
    fixed = len(intro) + len(footer) + sum(len(h) for h in headings) + 2 * (len(headings) + 1)
    return max_chars - fixed


def render_pointer(handles: Sequence[tuple[str, Sequence[str]]]) -> str:
    """One line (<= MAX_POINTER_CHARS) saying the rules shown earlier still apply.

    `handles`: per action, the handles of its rules the session already has.
    """
    named = "; ".join(f"{action} " + " ".join(f"[{h}]" for h in hs) for action, hs in handles)
    line = f"mented: the rules shown earlier still apply to this command: {named}."
    if len(line) <= MAX_POINTER_CHARS:
        return line
    return line[: MAX_POINTER_CHARS - 2].rsplit(" ", 1)[0] + " …"


def _heading(action: str, moment: Moment, table: ActionTable) -> str:
    description = table.descriptions().get(action)
    if moment == "before":
        # The table's phrase speaks of the command about to run: true only before it.
        about = f"{action}: {description}" if description else action
        return f"Rules for {table.phrase_of(action)} ({about}):"
    return f"Rules for {action} ({description}):" if description else f"Rules for {action}:"


def _rule_line(rule: Memory, replaced: Mapping[str, Replaced], max_chars: int) -> str:
    handle = short_handle(rule.id)
    head = f"- [{handle}] "
    old = replaced.get(rule.id)
    if old is not None:
        # The old rule's words give way first when the line is cut short.
        if old.words and len(head) + len(old.note) > max_chars // 2:
            old = Replaced(old.handle)
        head += old.note
    if rule.origin == ORIGIN_PROJECT:  # a team rule from the repository's .mented/
        head += "(the project's) "
    # Cut before anything else touches it: a rule may be 64 KiB, the room a few thousand
    # (one character more than the room tells whether it was cut).
    content = rule.content[: max_chars + 1].strip().replace("\n", "\n  ")  # under the bullet
    room = max_chars - len(head)
    if len(content) > room:
        cut = _CUT.format(handle=handle)
        content = content[: max(0, room - len(cut))].rstrip() + cut
    return head + content
