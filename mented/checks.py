"""Checks on rules: small readable predicates on one field of an action.

A rule may carry checks (`Memory.checks`, each a line of text), tested against the
fields of the command that performs its action (`mented.fields`) before it runs::

    message single-line
    subject matches ^(feat|fix|docs|chore|refactor|test)(\\(.+\\))?!?:
    subject max 72
    message no-emoji
    flags forbid --no-verify

The kinds: `FIELD matches REGEX` (Python `re.search`), `FIELD not-matches REGEX`,
`FIELD max N` (characters; each line of a multi-line field), `FIELD lines-max N`,
`FIELD single-line`, `FIELD no-emoji`, `FIELD contains TEXT`, `flags forbid FLAG`.
On a list field (`trailers`, `refs`, `packages`, `flags`) a check holds for each
item, `lines-max` counts the items and `contains` asks for one item holding TEXT.

A field the command does not carry is unknown: the check is neither passed nor
failed. A check that cannot be used is refused when the rule is written, with the
position and the fields that action has: an unknown kind or field, a regex that does
not compile, or one that may backtrack for long (a repeated group that holds another
repetition or an alternation, a back-reference, more than `MAX_OPEN_REPEATS`
unbounded repetitions). Values are tested up to `MAX_TESTED_CHARS`.

A check from a place that skipped that refusal (a team's `.mented/` file, an
imported one) is parsed again where it is used; one that cannot be used is shown as
such by `explain` and never stops anything.
"""

from __future__ import annotations

import functools
import re
import unicodedata

# The regex parser `re.compile` uses, to look at a pattern's shape before compiling it.
from re import _constants as _sre  # type: ignore[attr-defined]
from re import _parser as _sre_parse  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from mented.fields import FIELDS, action_fields
from mented.memory import (
    MAX_CHECK_CHARS,
    MAX_CHECKS,
    TRIGGER_PREFIX,
    InvalidInputError,
    normalize_tag,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from mented.actions import ActionTable
    from mented.fields import Fields, FieldValue


MAX_OPEN_REPEATS = 4  # `*`, `+`, `{n,}` in one regex
MAX_TESTED_CHARS = 16 * 1024  # of a field's value; the rest is not looked at
SHOWN_VALUE_CHARS = 60  # of an offending value, in a stop's reason

Kind = Literal[
    "matches", "not-matches", "max", "lines-max", "single-line", "no-emoji", "contains", "forbid"
]
KINDS: tuple[str, ...] = (
    "matches",
    "not-matches",
    "max",
    "lines-max",
    "single-line",
    "no-emoji",
    "contains",
)
_WITH_TEXT = frozenset({"matches", "not-matches", "contains"})
_WITH_NUMBER = frozenset({"max", "lines-max"})

# Pictographs, symbols and dingbats, flags, the emoji variation selector and joiner.
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\u2300-\u23ff\ufe0f\u200d\u3030\u303d"
    "\u3297\u3299]"
)


class Check(msgspec.Struct, frozen=True):
    """One parsed check: the field it tests, its kind and argument, and its text."""

    text: str
    field: str
    kind: Kind
    argument: str = ""
    number: int = 0
    pattern: re.Pattern[str] | None = None

    def in_words(self) -> str:
        """What the check asks, as a person says it: "the subject at most 72 characters"."""
        what = f"the {self.field}"
        match self.kind:
            case "matches":
                return f"{what} must match {self.argument}"
            case "not-matches":
                return f"{what} must not match {self.argument}"
            case "max":
                return f"{what} at most {self.number} characters"
            case "lines-max":
                return f"{what} at most {self.number} lines"
            case "single-line":
                return f"{what} on a single line"
            case "no-emoji":
                return f"{what} without emoji"
            case "contains":
                return f"{what} must contain {self.argument!r}"
            case "forbid":
                return f"no {self.argument}"
        return self.text  # pragma: no cover - every kind is above


class Outcome(msgspec.Struct):  # not frozen: made for every check of every command
    """A check tested on one command's fields: passed (True), failed (False) or unknown (None).

    `said`: for a failure, what is wrong and what would pass ("the subject is 84
    characters; at most 72"); for unknown, why the field is not known.
    """

    check: Check
    passed: bool | None
    said: str = ""


class CheckError(InvalidInputError):
    """A check that cannot be used; the message says where and what would do."""


def parse_check(text: str, actions: Sequence[str] = (), table: ActionTable | None = None) -> Check:
    """`text` as a check on a field that every one of `actions` has: in `table`, the
    action table in force (a user's actions' fields, `path` of file edits), else the
    built-ins' (`FIELDS`).

    Raises:
        CheckError: naming the position and, for a field, the fields the action has.
    """
    has = FIELDS if table is None else action_fields(table)
    return _parse_cached(text, tuple((action, has.get(action)) for action in actions))


@functools.lru_cache(maxsize=1024)
def _parse_cached(text: str, actions: tuple[tuple[str, tuple[str, ...] | None], ...]) -> Check:
    if not isinstance(text, str) or not text.strip():
        raise CheckError("a check cannot be empty; e.g. 'subject max 72'")
    if len(text) > MAX_CHECK_CHARS:
        raise CheckError(
            f"a check is at most {MAX_CHECK_CHARS} characters; this one is {len(text)}"
        )
    if not text.isprintable():
        raise CheckError(f"check {text!r} holds a control character (a newline?); give one line")
    # Only leading blanks go: a regex may end with one (`^feat: `).
    stripped = text.lstrip()
    field, _, rest = stripped.partition(" ")
    rest = rest.lstrip(" ")
    kind_word, _, argument = rest.partition(" ")
    where = stripped.find(kind_word, len(field)) + 1 if kind_word else len(stripped) + 1
    _check_field(stripped, field, actions)
    if field == "flags" and kind_word == "forbid":
        if not argument.strip():
            raise CheckError(
                f"check {stripped!r}: give the flag to forbid, e.g. 'flags forbid --no-verify'"
            )
        return Check(stripped, field, "forbid", argument.strip())
    if kind_word not in KINDS:
        extra = ", or 'flags forbid FLAG'" if field == "flags" else ""
        raise CheckError(
            f"check {stripped!r}: at character {where}, {kind_word or 'nothing'!r} is not a kind "
            f"of check; use one of {', '.join(KINDS)}{extra}"
        )
    kind: Kind = kind_word  # type: ignore[assignment]
    if kind in _WITH_TEXT:
        if not argument:
            raise CheckError(
                f"check {stripped!r}: at character {where}, {kind} needs a text after it"
            )
        pattern = _compile(stripped, argument, where + len(kind) + 1) if "matches" in kind else None
        return Check(stripped, field, kind, argument, pattern=pattern)
    if kind in _WITH_NUMBER:
        if not argument.strip().isdigit() or int(argument) <= 0:
            raise CheckError(
                f"check {stripped!r}: at character {where + len(kind) + 1}, {kind} needs a "
                f"whole number above 0 (e.g. '{field} {kind} 72'), not {argument.strip()!r}"
            )
        return Check(stripped, field, kind, number=int(argument))
    if argument.strip():
        raise CheckError(
            f"check {stripped!r}: at character {where + len(kind) + 1}, {kind} takes nothing "
            f"after it (found {argument.strip()!r})"
        )
    return Check(stripped, field, kind)


def _check_field(
    text: str, field: str, actions: tuple[tuple[str, tuple[str, ...] | None], ...]
) -> None:
    for action, has in actions:
        if has is None:
            raise CheckError(
                f"check {text!r}: action {action} has no fields mented knows, so no check can "
                f"be used on it; built-in actions with fields: {', '.join(sorted(FIELDS))}, "
                "and your own actions that declare `fields` (docs/actions.md) or have `paths`"
            )
        if field not in has:
            raise CheckError(
                f"check {text!r}: at character 1, {action} has no field {field!r}; "
                f"its fields: {', '.join(has)}"
            )
    if not actions and not any(field in has for has in FIELDS.values()):
        known = sorted({name for has in FIELDS.values() for name in has})
        raise CheckError(
            f"check {text!r}: no action has a field {field!r}; fields: {', '.join(known)}"
        )


def _compile(text: str, regex: str, where: int) -> re.Pattern[str]:
    """`regex` compiled, unless it cannot be or may backtrack for long."""
    try:
        tree = _sre_parse.parse(regex)
    except re.error as exc:
        position = where + (exc.pos or 0)
        raise CheckError(
            f"check {text!r}: at character {position}, the regex is wrong: {exc.msg}"
        ) from None
    problem = _backtracking_problem(tree)
    if problem is not None:
        raise CheckError(
            f"check {text!r}: at character {where}, the regex {problem}, which can take very "
            "long on some text; write it without (e.g. '(ab)+' rather than '(a+b)+')"
        )
    return re.compile(regex)


def _backtracking_problem(tree: Any) -> str | None:  # noqa: ANN401 - re's own parse tree
    """Why a parsed regex may backtrack for long, or None."""
    open_repeats = 0
    stack: list[tuple[Any, bool]] = [(tree, False)]  # (subpattern, inside a repetition)
    while stack:
        node, repeated = stack.pop()
        for op, av in list(node):
            if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
                _, high, sub = av
                many = high > 1
                if many and high == _sre.MAXREPEAT:
                    open_repeats += 1
                if many and repeated:
                    return "repeats a group that holds another repetition"
                stack.append((sub, repeated or many))
            elif op == _sre.BRANCH:
                if repeated:
                    return "repeats a group that holds an alternation (|)"
                stack.extend((branch, repeated) for branch in av[1])
            elif op in (_sre.GROUPREF, getattr(_sre, "GROUPREF_EXISTS", None)):
                return "has a back-reference"
            elif op == _sre.SUBPATTERN:
                stack.append((av[-1], repeated))
            elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
                stack.append((av[1], repeated))
            elif op == getattr(_sre, "ATOMIC_GROUP", None):
                stack.append((av, repeated))
    if open_repeats > MAX_OPEN_REPEATS:
        return f"has {open_repeats} unbounded repetitions (at most {MAX_OPEN_REPEATS})"
    return None


def parse_checks(
    texts: Iterable[str], actions: Sequence[str], table: ActionTable | None = None
) -> tuple[str, ...]:
    """`texts` checked as a rule's checks for `actions`, leading blanks cut.

    Raises:
        CheckError: the first check that cannot be used (named by its number), or too many.
    """
    found = []
    for number, text in enumerate(texts, start=1):
        if number > MAX_CHECKS:
            raise CheckError(f"a rule has at most {MAX_CHECKS} checks")
        try:
            found.append(parse_check(text, actions, table).text)
        except CheckError as exc:
            raise CheckError(f"check {number}: {exc}") from None
    if found and not actions:
        raise CheckError("only a rule for an action can have checks (a pinned rule has none)")
    return tuple(found)


# -------------------------------------------------------------- evaluation


def evaluate(check: Check, fields: Fields) -> Outcome:
    """`check` on one command's fields. Never raises."""
    value = fields.values.get(check.field)
    if value is None:
        why = fields.unknown.get(check.field, "the command does not say")
        return Outcome(check, None, f"the {check.field} is not known: {why}")
    items = value if isinstance(value, tuple) else (value,)
    listed = isinstance(value, tuple)  # a list field (`mented.fields.LIST_FIELDS`)
    match check.kind:
        case "forbid":
            if check.argument in items:
                return _failed(check, f"the command has {check.argument}; run it without")
            return Outcome(check, True)
        case "lines-max":
            count = len(items) if listed else len(_cut(items[0]).split("\n"))
            unit = "items" if listed else "lines"
            if count > check.number:
                return _failed(
                    check, f"the {check.field} has {count} {unit}; at most {check.number}"
                )
            return Outcome(check, True)
        case "contains":
            if any(check.argument in _cut(item) for item in items):
                return Outcome(check, True)
            return _failed(
                check, f"the {check.field} does not contain {check.argument!r}: {_shown(items)}"
            )
    for item in items:
        failure = _item_failure(check, _cut(item), listed=listed)
        if failure is not None:
            return _failed(check, failure)
    return Outcome(check, True)


def passes(check: Check, fields: Fields) -> bool | None:
    """`evaluate(check, fields).passed`, without the words: the hook's path, where most
    checks pass (a failure's words then come from `evaluate`). Never raises."""
    value = fields.values.get(check.field)
    return None if value is None else passes_value(check, value)


def passes_value(check: Check, value: FieldValue) -> bool:
    """`passes` on the known value of the check's field."""
    items = value if isinstance(value, tuple) else (value,)
    kind = check.kind
    if kind == "forbid":
        return check.argument not in items
    if kind == "lines-max":
        if isinstance(value, tuple):
            return len(items) <= check.number
        return items[0][:MAX_TESTED_CHARS].count("\n") < check.number
    if kind == "contains":
        return any(check.argument in item[:MAX_TESTED_CHARS] for item in items)
    pattern = check.pattern
    number = check.number
    for item in items:
        text = item[:MAX_TESTED_CHARS]
        if kind == "matches":
            assert pattern is not None
            if pattern.search(text) is None:
                return False
        elif kind == "not-matches":
            assert pattern is not None
            if pattern.search(text) is not None:
                return False
        elif kind == "max":
            if len(text) > number and any(len(line) > number for line in text.split("\n")):
                return False
        elif kind == "single-line":
            if "\n" in text:
                return False
        elif kind == "no-emoji" and not text.isascii() and _EMOJI.search(text) is not None:
            return False
    return True


class FieldChecks:
    """Every check on one field, made into one quick test of a value: `all_pass(value)` is
    `all(passes_value(check, value) for check in checks)`, worked out with each line and
    length counted once (the hook's path: most commands pass all their checks; which
    one failed, and its words, come from `passes_value` and `evaluate` then).

    On a text value the checks of a kind are merged: `lines-max` and `single-line` into
    one count of line breaks, the `max` checks into the smallest bound (a value passes
    them all exactly when each line keeps within it). A list value (`flags`, `refs`)
    is tested check by check.
    """

    __slots__ = (
        "_checks",
        "_contains",
        "_forbidden",
        "_max_breaks",
        "_max_chars",
        "_no_emoji",
        "_required",
        "_text_only",
    )

    def __init__(self, checks: Sequence[Check]) -> None:
        self._checks = tuple(checks)
        breaks = [c.number - 1 for c in checks if c.kind == "lines-max"]
        breaks += [0 for c in checks if c.kind == "single-line"]
        self._max_breaks = min(breaks) if breaks else None
        chars = [c.number for c in checks if c.kind == "max"]
        self._max_chars = min(chars) if chars else None
        self._required = tuple(c.pattern for c in checks if c.kind == "matches" and c.pattern)
        self._forbidden = tuple(c.pattern for c in checks if c.kind == "not-matches" and c.pattern)
        self._no_emoji = any(c.kind == "no-emoji" for c in checks)
        self._contains = tuple(c.argument for c in checks if c.kind == "contains")
        # `forbid` says whether a list holds an item: tested check by check.
        self._text_only = all(c.kind != "forbid" for c in checks)

    def all_pass(self, value: FieldValue) -> bool:
        """Whether `value` passes every check on the field."""
        if not isinstance(value, str) or not self._text_only:
            return all(passes_value(check, value) for check in self._checks)
        text = value[:MAX_TESTED_CHARS] if len(value) > MAX_TESTED_CHARS else value
        if self._max_breaks is not None and text.count("\n") > self._max_breaks:
            return False
        limit = self._max_chars
        if (
            limit is not None
            and len(text) > limit
            and any(len(line) > limit for line in text.split("\n"))
        ):
            return False
        for pattern in self._required:
            if pattern.search(text) is None:
                return False
        for pattern in self._forbidden:
            if pattern.search(text) is not None:
                return False
        if self._no_emoji and not text.isascii() and _EMOJI.search(text) is not None:
            return False
        return all(argument in text for argument in self._contains)


def _item_failure(check: Check, text: str, *, listed: bool) -> str | None:
    # A list's item is named once ("the refs item 'main'"), a field's value after it.
    what = f"the {check.field} item" if listed else f"the {check.field}"
    value = _shown_text(text)
    match check.kind:
        case "matches":
            assert check.pattern is not None
            if check.pattern.search(text) is None:
                return f"{what} {value} does not match {check.argument}"
        case "not-matches":
            assert check.pattern is not None
            found = check.pattern.search(text)
            if found is not None:
                return f"{what} {value} matches {check.argument} (at {found.group()!r})"
        case "max":
            for number, line in enumerate(text.split("\n"), start=1):
                if len(line) > check.number:
                    where = f" (line {number})" if "\n" in text else ""
                    named = f"{what} {value}" if listed else what
                    return f"{named}{where} is {len(line)} characters; at most {check.number}"
        case "single-line":
            lines = text.count("\n") + 1
            if lines > 1:
                return f"{what} is {lines} lines ({value}); it must be one line"
        case "no-emoji":
            found = _EMOJI.search(text)
            if found is not None:
                name = unicodedata.name(found.group(), "an emoji").lower()
                return f"{what} {value} holds {found.group()} ({name}); write it without"
    return None


def _failed(check: Check, said: str) -> Outcome:
    return Outcome(check, False, said)


def _cut(value: str) -> str:
    return value[:MAX_TESTED_CHARS]


def _shown_text(text: str) -> str:
    """An offending value, cut to `SHOWN_VALUE_CHARS` and on one line, quoted."""
    one_line = text.replace("\n", "⏎")
    if len(one_line) > SHOWN_VALUE_CHARS:
        one_line = one_line[:SHOWN_VALUE_CHARS] + "…"
    return repr(one_line)


def _shown(items: tuple[str, ...]) -> str:
    return ", ".join(_shown_text(item) for item in items[:3]) or "(none)"


def usable_checks(
    texts: Iterable[str], actions: Sequence[str], table: ActionTable | None = None
) -> list[Check | CheckError]:
    """Each of a rule's checks parsed for `actions`, or why it cannot be used. Never raises."""
    found: list[Check | CheckError] = []
    for text in texts:
        try:
            found.append(parse_check(text, actions, table))
        except CheckError as exc:
            found.append(exc)
    return found


def value_of(fields: Fields, name: str) -> FieldValue | None:
    """A field's value, None when unknown (for `explain`)."""
    return fields.values.get(name)


def rule_checks(
    texts: Iterable[str], tags: Iterable[str], table: ActionTable | None = None
) -> tuple[str, ...]:
    """A rule's checks, for the actions its tags name, checked (`parse_checks`).

    Raises:
        CheckError: a check that cannot be used on those actions.
        InvalidInputError: a tag that names no usable action.
    """
    texts = list(texts)
    if not texts:
        return ()
    actions = [
        tag[len(TRIGGER_PREFIX) :]
        for tag in (normalize_tag(tag) for tag in tags)
        if tag.startswith(TRIGGER_PREFIX)
    ]
    return parse_checks(texts, actions, table)
