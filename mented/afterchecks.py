"""After the command: the checks that could not be told before it ran, on what it did.

A field unknown before a command runs is never a stop (`mented.prechecks`): the
message of `git commit` written in the editor, `-F -`, `--amend` alone, `-C`. For
an agent with an event after a tool ran (`Agent.post_tool_event`: Claude Code's
and Codex's `PostToolUse`, Gemini CLI's `AfterTool`, Qwen Code's and Copilot CLI's
`PostToolUse`),
those checks are tested on what the command did:

- before it runs (`AfterChecks.before`), a command whose rules' checks on such a
  field came out unknown is remembered, with the commit `HEAD` names then
  (`mented.git_commits`: read from `.git`, git is not run); nothing else is done;
- after it ran (`AfterChecks.after`), if the commit `HEAD` names is another one, its
  message is read and the remembered checks tested on it. One that fails hands the
  model one short note: "the commit you just made breaks [handle]: ...; amend it."

A command none of whose rules has such a check is never remembered, so the event
after it costs one dictionary look-up. What was found is noted in the record of
whether rules are kept (`failed_after`; a rule none of whose checks could be told
before is counted as checked here). Remembered commands are bounded in number
(`MAX_PENDING`) and age (`PENDING_TTL_S`), in memory only: after a restart of the
daemon between the two events, that one command is not checked.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

import msgspec

from mented.checks import evaluate
from mented.fields import commit_fields
from mented.memory import short_handle

if TYPE_CHECKING:
    from mented.agents import Agent, ToolCall
    from mented.checks import Check, Outcome
    from mented.fields import Fields
    from mented.memory import Memory
    from mented.prechecks import Compliance, Verdict

MAX_PENDING = 1024  # commands remembered between their two events
PENDING_TTL_S = 3600.0  # a command that runs longer is not checked after
MAX_SAID = 4  # failed checks named per rule in the note

# The fields only known once the command ran, per action, and how to read them then.
AFTER_FIELDS: dict[str, frozenset[str]] = {
    "git-commit": frozenset({"message", "subject", "body", "trailers"}),
}


class _RuleChecks(msgspec.Struct, frozen=True):
    rule: Memory
    checks: tuple[Check, ...]
    counted: bool  # some other check of the rule was told before: counted as checked then


class _Pending(msgspec.Struct, frozen=True):
    agent: str
    rules: tuple[_RuleChecks, ...]
    head_before: str | None
    expires: float


class Made(msgspec.Struct, frozen=True):
    """What a command did, as read after it ran: its name for the model, and its fields."""

    what: str  # "the commit you just made (abc1234)"
    fields: Fields


def commit_made(cwd: str | None, head_before: str | None) -> Made | None:
    """The commit a `git commit` just made in `cwd`; None when `HEAD` did not move (the
    command failed, nothing to commit) or the commit cannot be read."""
    from mented import git_commits  # noqa: PLC0415 - after a commit only: not the first hook's

    commit = git_commits.head_commit(cwd)
    if commit is None or commit.oid == head_before:
        return None
    return Made(f"the commit you just made ({commit.oid[:7]})", commit_fields(commit.message))


class AfterChecks:
    """Remembers a command's checks unknown before it ran; tests them once it ran."""

    def __init__(self) -> None:
        self._pending: OrderedDict[bytes, _Pending] = OrderedDict()

    def before(self, adapter: Agent, call: ToolCall, verdict: Verdict) -> None:
        """Remember the checks on `AFTER_FIELDS` that `verdict` could not tell for `call`."""
        if (
            not verdict.unknown  # the usual case: every field known before
            or adapter.post_tool_event is None
            or verdict.answer == "stop"
            or not call.command
        ):
            return
        counted = {rule.id for rules in verdict.checked.values() for rule in rules}
        unknown: dict[str, tuple[Memory, dict[str, Check]]] = {}
        for action, rule, check in verdict.unknown:
            if check.field in AFTER_FIELDS.get(action, ()):
                unknown.setdefault(rule.id, (rule, {}))[1].setdefault(check.text, check)
        if not unknown:
            return
        key = _pending_key(adapter.name, call)
        self._pending[key] = _Pending(
            agent=adapter.name,
            rules=tuple(
                _RuleChecks(rule, tuple(checks.values()), rule.id in counted)
                for rule, checks in unknown.values()
            ),
            head_before=_head(call.cwd),
            expires=time.monotonic() + PENDING_TTL_S,
        )
        self._pending.move_to_end(key)
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)

    def after(self, adapter: Agent, call: ToolCall, compliance: Compliance | None) -> str | None:
        """The note for the model when what `call` did breaks a remembered check; else None."""
        if not self._pending or not call.command:
            return None
        pending = self._pending.pop(_pending_key(adapter.name, call), None)
        if pending is None or pending.expires < time.monotonic():
            return None
        made = commit_made(call.cwd, pending.head_before)
        if made is None:
            return None
        broken: list[tuple[Memory, list[Outcome]]] = []
        for entry in pending.rules:
            outcomes = [evaluate(check, made.fields) for check in entry.checks]
            failed = [outcome for outcome in outcomes if outcome.passed is False]
            if compliance is not None and any(o.passed is not None for o in outcomes):
                if failed:
                    compliance.note(entry.rule.id, pending.agent, "failed_after")
                elif not entry.counted:
                    compliance.note(entry.rule.id, pending.agent, "passed_first")
            if failed:
                broken.append((entry.rule, failed))
        return render_note(made.what, broken) if broken else None


def render_note(what: str, broken: list[tuple[Memory, list[Outcome]]]) -> str:
    """The note: "the commit you just made breaks [handle] TEXT: what is wrong; amend it."."""
    parts = []
    for rule, failed in broken:
        said = "; ".join(outcome.said for outcome in failed[:MAX_SAID])
        if len(failed) > MAX_SAID:
            said += f" (and {len(failed) - MAX_SAID} more)"
        parts.append(f"[{short_handle(rule.id)}] {rule.content.strip().splitlines()[0]}: {said}")
    if len(parts) == 1:
        return f"mented: {what} breaks {parts[0]}; amend it."
    lines = [f"mented: {what} breaks {len(parts)} of the user's rules; amend it."]
    lines.extend(f"- {part}" for part in parts)
    return "\n".join(lines)


def _pending_key(agent: str, call: ToolCall) -> bytes:
    """The same command of the same session in the same place, before and after it ran."""
    text = f"{agent}\0{call.session}\0{call.cwd}\0{call.command}"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _head(cwd: str | None) -> str | None:
    """`HEAD`'s commit in `cwd` before the command runs (`git_commits.head`)."""
    from mented import git_commits  # noqa: PLC0415 - as in `commit_made`

    return git_commits.head(cwd)
