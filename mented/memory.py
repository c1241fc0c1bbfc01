"""The memory record, its ids and short handles, and the rules for trigger tags.

A memory is a piece of what the agent should know. An *action rule* is a memory
with a `trigger:<action>` tag: it is found by the action it governs, not by topic.
A *pinned rule* (tag `pinned`) is handed over at the start of every session. Any
other memory is a *fact*, found by topic (`mented.recall`).
This module is shared by the store, the protocol and the CLI; it imports nothing
of theirs.
"""

from __future__ import annotations

import os
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

import msgspec

if TYPE_CHECKING:
    from collections.abc import Collection

TRIGGER_PREFIX = "trigger:"
# The tag of a pinned rule: handed to the agent at the start of every session
# (and again after its context is compacted or cleared), not by an action.
PINNED_TAG = "pinned"
MAX_ACTION_LENGTH = 64
MAX_CONTENT_BYTES = 64 * 1024
SHORT_HANDLE_LENGTH = 8  # characters of an id shown as its handle
MIN_HANDLE_LENGTH = 6  # the fewest characters of an id that may name a memory
# `Memory.origin` of a rule a repository commits in its .mented/ folder (mented.team).
ORIGIN_PROJECT = "project"
# Where a rule comes from, as mentectl and its page say it (`origin_of`).
Origin = Literal["yours", "team", "synced"]


class MemoryType(StrEnum):
    """What kind of memory a record is."""

    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    CORRECTION = "correction"
    PREFERENCE = "preference"


class Memory(msgspec.Struct, kw_only=True, frozen=True):
    """One stored memory.

    `agent` and `project` are its scope: a memory scoped to an agent is seen only
    by that agent, one scoped to a project directory only from inside it.
    Times are Unix seconds.
    """

    id: str
    content: str
    memory_type: MemoryType = MemoryType.SEMANTIC
    tags: tuple[str, ...] = ()
    agent: str | None = None
    project: str | None = None
    created_at: float
    valid_until: float | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    # Other live versions this one replaces too: the tips of a fork it settles (two
    # machines superseded the same rule while apart). Empty for an ordinary version.
    merges: tuple[str, ...] = ()
    # Where a rule comes from: None for your own (the store), "project" for a rule a
    # repository commits in its .mented/ folder (mented.team; never stored).
    origin: str | None = None
    # Checks on the fields of the action's command (mented.checks), each a line such
    # as "subject max 72"; tested before the command runs. Empty for most rules.
    checks: tuple[str, ...] = ()

    @property
    def actions(self) -> tuple[str, ...]:
        """The actions this memory is a rule for (its trigger tags, normalized)."""
        return tuple(
            tag[len(TRIGGER_PREFIX) :] for tag in self.tags if tag.startswith(TRIGGER_PREFIX)
        )

    @property
    def is_pinned(self) -> bool:
        """Whether this memory is a pinned rule (tagged `pinned`)."""
        return PINNED_TAG in self.tags

    @property
    def is_rule(self) -> bool:
        """Whether this memory is a rule: for an action (a trigger tag) or pinned."""
        return self.is_pinned or bool(self.actions)

    @property
    def is_live(self) -> bool:
        """False once superseded."""
        return self.superseded_by is None


def origin_of(memory: Memory, synced: Collection[str]) -> Origin:
    """Where `memory` comes from: a project's committed rules ("team"), brought by sync
    from another machine ("synced": `synced` holds its id, as a `list` or `get` reply's
    `synced` does), else "yours": made on this machine (or imported from a file)."""
    if memory.origin == ORIGIN_PROJECT:
        return "team"
    return "synced" if memory.id in synced else "yours"


class Forgotten(msgspec.Struct, kw_only=True, frozen=True):
    """What is kept of a forgotten memory: enough to forget it everywhere it travelled.

    `created_at` and `supersedes` are the forgotten memory's own, so that the versions
    around it stay linked (and its predecessor stays retired) on every machine.
    """

    id: str
    created_at: float
    supersedes: str | None = None
    forgotten_at: float


class InvalidInputError(ValueError):
    """Input a user can fix: the message says what was wrong and what to do."""


MAX_CHECKS = 16  # checks on one rule
MAX_CHECK_CHARS = 1000  # characters of one check


def check_checks_shape(checks: object) -> tuple[str, ...]:
    """A rule's checks as stored: at most `MAX_CHECKS` one-line texts, leading blanks cut.

    What each one means is `mented.checks`'s to say (the daemon asks it first);
    this is the shape every record must have, wherever it comes from.

    Raises:
        InvalidInputError: not a list of short one-line texts.
    """
    if not isinstance(checks, list | tuple) or not all(isinstance(c, str) for c in checks):
        raise InvalidInputError("checks must be a list of texts, e.g. ['subject max 72']")
    if len(checks) > MAX_CHECKS:
        raise InvalidInputError(
            f"a rule has at most {MAX_CHECKS} checks; this one has {len(checks)}"
        )
    for check in checks:
        if not check.strip() or len(check) > MAX_CHECK_CHARS or not check.isprintable():
            raise InvalidInputError(
                f"check {check[:80]!r} is not a usable check: one line of at most "
                f"{MAX_CHECK_CHARS} characters, e.g. 'subject max 72'"
            )
    return tuple(check.lstrip() for check in checks)  # a regex may end with a blank


# Crockford's base32: no I, L, O, U, so ids survive being read aloud or retyped.
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id(now: float | None = None) -> str:
    """A 26-character ULID: 48 bits of milliseconds then 80 random bits.

    Ids sort by creation time, so ids double as a tie-breaker after `created_at`.
    """
    millis = int((time.time() if now is None else now) * 1000)
    value = (millis << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def short_handle(memory_id: str) -> str:
    """The short handle of a memory: the last 8 characters of its id, lower-case.

    They are random (the id's first characters are its timestamp), so handles of
    memories made in the same moment still differ. `Store.get` accepts them.
    """
    return memory_id[-SHORT_HANDLE_LENGTH:].lower()


def normalize_action(action: str) -> str:
    """The canonical form of an action name: stripped and lower-cased.

    Raises:
        InvalidInputError: the name is empty, blank, too long or has control characters.
    """
    name = action.strip().lower()
    if not name:
        raise InvalidInputError("an action name cannot be empty; use e.g. 'git-commit'")
    if len(name) > MAX_ACTION_LENGTH:
        raise InvalidInputError(
            f"action name is {len(name)} characters long; the limit is {MAX_ACTION_LENGTH}"
        )
    # Every whitespace character but the space is unprintable, so two C-level checks
    # say what a per-character loop would, at a fraction of the cost: every lookup
    # normalizes its action name.
    if not name.isprintable() or " " in name:
        raise InvalidInputError(
            f"action name {action!r} contains whitespace or control characters; "
            "use a single word like 'git-commit'"
        )
    return name


def action_from_input(action: str) -> str:
    """An action name as a person or a model wrote it, normalized: `trigger:` dropped.

    Raises:
        InvalidInputError: not a usable name (see `normalize_action`).
    """
    name = action.strip()
    if name.lower().startswith(TRIGGER_PREFIX):
        name = name[len(TRIGGER_PREFIX) :]
    return normalize_action(name)


def normalize_tag(tag: str) -> str:
    """Trigger tags are normalized (`trigger:Git-Commit` -> `trigger:git-commit`), and
    `Pinned` to `pinned`; others kept.

    Raises:
        InvalidInputError: a trigger tag names an unusable action, or the tag is empty.
    """
    stripped = tag.strip()
    if not stripped:
        raise InvalidInputError("a tag cannot be empty")
    if stripped.lower().startswith(TRIGGER_PREFIX):
        return TRIGGER_PREFIX + normalize_action(stripped[len(TRIGGER_PREFIX) :])
    if stripped.lower() == PINNED_TAG:
        return PINNED_TAG
    return stripped


def trigger_tag(action: str) -> str:
    """The tag that makes a memory a rule for `action`."""
    return TRIGGER_PREFIX + normalize_action(action)
