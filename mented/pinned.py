"""Pinned rules: the few the agent is handed at the start of every session, under a hard cap.

A pinned rule (a memory tagged `pinned`) holds for everything the agent does
("answer in British English"), so it cannot wait for an action: the session
start hook hands the pinned rules the session may see (the store's one
visibility predicate) to the model when a session starts, and again when the
agent compacts or clears its context.

What makes this safe is the cap. The failure it prevents: "it works until you
have thirty rules and every prompt drags all of them along". `[pinned]
max_rules` and `max_chars` bound what any one session is handed; a rule that
would take some session past either is refused when it is added (or when a
supersede makes it longer or widens its scope), with the current total and
the way out: make it an action rule, which arrives only with its action. The
session start applies the cap too (the settings may have been lowered since),
newest first, and says what it left out.

The cap counts the rules' own text; the words around them (`render_pinned`)
add a fixed couple of hundred characters, measured in docs/benchmarks.md, and
at most 85 for each rule that names the one it replaces (mented.replaced).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from mented.memory import InvalidInputError, Memory, short_handle
from mented.protocol import PinnedOverCap
from mented.store import visible_to
from mented.words import counted

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from mented.config import PinnedSettings
    from mented.handover import Replaced

INTRO = (
    "The user's pinned rules, from mented: they hold for everything you do in this "
    "session, whatever the task."
)
FOOTER = (
    "To change one when the user asks: the mented MCP tool `supersede_rule`, or "
    '`mentectl rule supersede HANDLE "new text"`.'
)
LEFT_OUT = (
    "({more} left out by the cap of {rules} and {chars} characters; "
    "`mentectl rule list --pinned` shows them.)"
)
_OTHER_AGENT = "\0another agent"  # a viewpoint standing for every agent no rule names


class PinnedHandover(msgspec.Struct, frozen=True):
    """The words for a session start and the rules in them."""

    text: str
    shown_ids: list[str]


def content_chars(rules: Sequence[Memory]) -> int:
    """What the cap counts: the characters of the rules' own text."""
    return sum(len(rule.content) for rule in rules)


def check_cap(
    existing: Sequence[Memory],
    new: Memory,
    settings: PinnedSettings,
    *,
    replaced: Collection[str] = (),
) -> None:
    """Refuse `new` when it raises what some session that sees it is handed past the cap.

    `existing` are the live pinned rules (all of them, every scope); `replaced`
    the ids of those `new` replaces (the version it supersedes, and the other
    current versions of a fork it settles). The count is taken after the change,
    and compared with before it: a change that leaves some session over the cap
    but adds nothing to it (a supersede, after a sync brought more pinned rules
    than the cap) goes through, so that the way out of being over the cap stays
    open. Every session that sees `new` sees the same rules as one of a few
    viewpoints: each agent a rule names (or any other), in each directory a rule
    is scoped to (or `new`'s own, or anywhere).

    Raises:
        InvalidInputError: with the total, the cap, and what to do instead.
    """
    if len(new.content) > settings.max_chars:
        raise InvalidInputError(
            f"this pinned rule is {len(new.content)} characters; pinned rules are capped at "
            f"{settings.max_chars} characters together ([pinned] max_chars in the config "
            "file). Shorten it, or make it an action rule (`mentectl rule add ACTION TEXT`), "
            "which reaches the agent only with the action it governs."
        )
    for agent, place in _viewpoints(existing, new):
        if not visible_to(new, agent, place):
            continue
        before = [rule for rule in existing if visible_to(rule, agent, place)]
        after = [*(rule for rule in before if rule.id not in replaced), new]
        count, chars = len(after), content_chars(after)
        if (count > settings.max_rules and count > len(before)) or (
            chars > settings.max_chars and chars > content_chars(before)
        ):
            sessions = _sessions(agent, place, scoped=new.project is not None)
            raise InvalidInputError(_over_cap(before, after, sessions, settings))


def _viewpoints(rules: Sequence[Memory], new: Memory | None = None) -> list[tuple[str, str]]:
    """(agent, directory) pairs standing for every session the pinned rules treat apart."""
    if new is not None and new.agent is not None:
        agents = [new.agent]
    else:
        agents = [*sorted({rule.agent for rule in rules if rule.agent}), _OTHER_AGENT]
    places = {rule.project for rule in rules if rule.project}
    places.add((new.project if new is not None else None) or os.sep)
    return [(agent, place) for agent in agents for place in sorted(places)]


def _sessions(agent: str, place: str, *, scoped: bool) -> str:
    """The sessions a viewpoint stands for, in words."""
    who = "" if agent == _OTHER_AGENT else f" for {agent}"
    where = "" if place == os.sep and not scoped else f" in {place}"
    return f"sessions{who}{where}" if who or where else "every session"


def _over_cap(
    before: Sequence[Memory], after: Sequence[Memory], sessions: str, settings: PinnedSettings
) -> str:
    handles = ", ".join(short_handle(rule.id) for rule in before)
    return (
        f"pinning this would hand {sessions} {len(after)} pinned rules of "
        f"{content_chars(after)} characters; the cap is {counted(settings.max_rules, 'rule')} "
        f"and {settings.max_chars} characters ([pinned] in the config file), because pinned "
        f"rules ride along with every session. They are now {len(before)} ({handles}) of "
        f"{content_chars(before)} characters. Make this an "
        "action rule instead (`mentectl rule add ACTION TEXT`: it reaches the agent only "
        "right before the action it governs), or supersede or forget a pinned rule "
        "(`mentectl rule list --pinned`)."
    )


def within_cap(rules: Sequence[Memory], settings: PinnedSettings) -> list[Memory]:
    """The rules (newest first) a session start hands over: as many as the cap holds."""
    shown: list[Memory] = []
    chars = 0
    for rule in rules:
        if len(shown) == settings.max_rules or chars + len(rule.content) > settings.max_chars:
            continue
        shown.append(rule)
        chars += len(rule.content)
    return shown


def over_cap(rules: Sequence[Memory], settings: PinnedSettings) -> list[PinnedOverCap]:
    """Where sessions are handed fewer pinned rules than they see, and which are left out.

    Adding a pinned rule is refused past the cap, but rules pinned on two machines
    apart meet after a sync, and the cap may have been lowered since: then a
    session start leaves the oldest out, which `mentectl status` and `doctor`
    say. `rules` are all live pinned rules, newest first; one entry per
    distinct set of rules left out.
    """
    found: dict[tuple[str, ...], PinnedOverCap] = {}
    for agent, place in _viewpoints(rules):
        seen = [rule for rule in rules if visible_to(rule, agent, place)]
        shown = {rule.id for rule in within_cap(seen, settings)}
        left_out = tuple(rule.id for rule in seen if rule.id not in shown)
        if left_out and left_out not in found:
            found[left_out] = PinnedOverCap(
                sessions=_sessions(agent, place, scoped=False),
                live=len(seen),
                chars=content_chars(seen),
                left_out=list(left_out),
            )
    return list(found.values())


def render_pinned(
    rules: Sequence[Memory],
    settings: PinnedSettings,
    replaced: Mapping[str, Replaced] | None = None,
) -> PinnedHandover:
    """The words handing `rules` (newest first) to the model, within the cap.

    Empty when there are none. Rules past the cap (lowered since they were
    added) are left out, oldest first, and the text says how many. `replaced`:
    by a rule's id, the rule it replaces (mented.replaced), said before its text.
    """
    shown = within_cap(rules, settings)
    if not shown:
        return PinnedHandover("", [])
    notes = replaced or {}
    lines = [INTRO]
    lines.extend(
        f"- [{short_handle(rule.id)}] "
        + (notes[rule.id].note if rule.id in notes else "")
        + rule.content.strip().replace("\n", "\n  ")
        for rule in shown
    )
    if (left_out := len(rules) - len(shown)) > 0:
        lines.append(
            LEFT_OUT.format(
                more=counted(left_out, "more pinned rule"),
                rules=counted(settings.max_rules, "rule"),
                chars=settings.max_chars,
            )
        )
    lines.append(FOOTER)
    return PinnedHandover("\n".join(lines), [rule.id for rule in shown])
