"""Before the command: the checks of the rules it is handed, tested on its fields.

`HookHandler` asks `PreChecks.judge` about every command whose visible rules carry
checks (`Memory.checks`); a command none of whose rules has one costs nothing here.
The command is parsed once more for its words (`Matcher.matched_commands`), the
fields of each action read from them (`mented.fields`), and each check tested
(`mented.checks`). An unknown field is no failure.

When a check fails, `[checks]` in the config file says what follows, per action:

- `stop` (the default): the command is stopped with a short reason -- the rule's
  handle and text, the failed check in words, the offending value cut, what would
  pass. On the first attempt, on a retry, and long after the rules were handed over.
- after `max_stops` stops of the same action in a row in one session (default 3),
  the next failing attempt is let through, with the failures as context, and
  recorded as "let through": a model that cannot comply is never caught in a loop.
  A command of that action that passes starts the count again.
- `tell`: the failures go as context; the command runs.

What happened is noted in the record of whether rules are kept (`mented.compliance`),
when the daemon keeps one.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from mented.checks import Check, CheckError, Outcome, evaluate, parse_check
from mented.fields import FIELDS, fields_in
from mented.memory import short_handle

if TYPE_CHECKING:
    from mented.agents import ToolCall
    from mented.config import Config
    from mented.fields import Fields
    from mented.git_aliases import Aliases
    from mented.matcher import Matcher
    from mented.memory import Memory

MAX_COUNTED = 4096  # (agent, session, action) whose stops in a row are counted
MAX_JUDGED = 1024  # outcomes kept for a command judged again (a retry) in the same place
MAX_FAILURES_SAID = 6  # failed checks named in one answer; the rest are counted

Answer = Literal["stop", "tell", "let-through"]


class Compliance(Protocol):
    """Where what the checks found is noted (`mented.compliance.ComplianceRecord`)."""

    def note(self, rule_id: str, agent: str, what: str) -> None: ...


@dataclass(frozen=True)
class Failure:
    """A rule's check that one command failed."""

    action: str
    rule: Memory
    outcome: Outcome


@dataclass
class Verdict:
    """What the checks of one command's rules found, and what follows.

    `answer` is None when nothing failed. `checked`: the rules with at least one
    check that could be told (passed or failed), by action.
    """

    failures: list[Failure] = field(default_factory=list)
    checked: dict[str, list[Memory]] = field(default_factory=dict)
    outcomes: list[tuple[str, Memory, Outcome]] = field(default_factory=list)
    answer: Answer | None = None
    stops_so_far: int = 0


class PreChecks:
    """Tests rules' checks before a command runs; counts stops per session and action."""

    def __init__(
        self, matcher: Matcher, config: Config, compliance: Compliance | None = None
    ) -> None:
        self._matcher = matcher
        self._config = config
        self.compliance = compliance
        self._stops: OrderedDict[bytes, int] = OrderedDict()
        # (command, aliases, cwd, rule versions) -> what their checks found, for a
        # command whose fields came from its words alone (no file: a file may change).
        self._judged: OrderedDict[bytes, Verdict] = OrderedDict()

    def reconfigure(self, matcher: Matcher, config: Config) -> None:
        self._matcher = matcher
        self._config = config
        self._judged.clear()  # another action table may read the command differently

    def judge(
        self,
        agent: str,
        call: ToolCall,
        visible: list[tuple[str, list[Memory]]],
        *,
        aliases: Aliases,
        deadline: float | None = None,
    ) -> Verdict | None:
        """The checks of `visible` rules on `call`; None when no rule here has checks."""
        wanted = [
            (action, rule)
            for action, rules in visible
            if action in FIELDS
            for rule in rules
            if rule.checks
        ]
        if not wanted or call.ran or not call.command:
            return None
        key = _judged_key(call, aliases, wanted)
        judged = self._judged.get(key)
        if judged is not None:
            self._judged.move_to_end(key)
            verdict = Verdict(
                failures=judged.failures, checked=judged.checked, outcomes=judged.outcomes
            )
        else:
            verdict, from_file = self._test(call, wanted, aliases=aliases, deadline=deadline)
            cut = deadline is not None and time.monotonic() >= deadline  # perhaps partial
            if not (from_file or cut):
                self._judged[key] = verdict
                while len(self._judged) > MAX_JUDGED:
                    self._judged.popitem(last=False)
        self._decide(agent, call, verdict)
        return verdict

    def _test(
        self,
        call: ToolCall,
        wanted: list[tuple[str, Memory]],
        *,
        aliases: Aliases,
        deadline: float | None,
    ) -> tuple[Verdict, bool]:
        """The outcome of each check on the command, and whether a field came from a file."""
        assert call.command
        # From now on every match keeps its words: the next command's one parse serves both.
        self._matcher.keep_matched = True
        commands = self._matcher.matched_commands(call.command, deadline=deadline, aliases=aliases)
        found = fields_in(
            self._matcher.table, commands, list(dict.fromkeys(a for a, _ in wanted)), call.cwd
        )
        by_action: dict[str, list[Fields]] = {}
        for fields in found:
            by_action.setdefault(fields.action, []).append(fields)
        verdict = Verdict()
        from_file = any(fields.from_file for fields in found)
        for action, rule in wanted:
            told = False
            for check in _checks_of(rule, action):
                for fields in by_action.get(action, []):
                    outcome = evaluate(check, fields)
                    verdict.outcomes.append((action, rule, outcome))
                    if outcome.passed is not None:
                        told = True
                    if outcome.passed is False:
                        verdict.failures.append(Failure(action, rule, outcome))
            if told:
                verdict.checked.setdefault(action, []).append(rule)
        return verdict, from_file

    def _decide(self, agent: str, call: ToolCall, verdict: Verdict) -> None:
        failed_actions = list(dict.fromkeys(failure.action for failure in verdict.failures))
        for action in verdict.checked:
            if action not in failed_actions:
                key = _count_key(agent, call, action)
                before = self._stops.pop(key, 0)
                self._note(verdict, action, agent, "passed_first" if before == 0 else "passed")
        if not failed_actions:
            return
        settings = self._config.checks
        answer: Answer = "tell"
        for action in failed_actions:
            key = _count_key(agent, call, action)
            stops = self._stops.get(key, 0)
            verdict.stops_so_far = max(verdict.stops_so_far, stops)
            if settings.mode_of(action) != "stop":
                self._note(verdict, action, agent, "told")
                continue
            if stops >= settings.max_stops:
                self._stops.pop(key, None)
                self._note(verdict, action, agent, "let_through")
                if answer == "tell":
                    answer = "let-through"
                continue
            answer = "stop"
            self._stops[key] = stops + 1
            self._stops.move_to_end(key)
            self._note(verdict, action, agent, "stopped")
        while len(self._stops) > MAX_COUNTED:
            self._stops.popitem(last=False)
        verdict.answer = answer

    def _note(self, verdict: Verdict, action: str, agent: str, what: str) -> None:
        if self.compliance is None:
            return
        rules = verdict.checked.get(action, [])
        if what in ("stopped", "let_through", "told"):
            failing = {f.rule.id for f in verdict.failures if f.action == action}
            rules = [rule for rule in rules if rule.id in failing]
        for rule in rules:
            self.compliance.note(rule.id, agent, "checked")
            self.compliance.note(rule.id, agent, what)


def _checks_of(rule: Memory, action: str) -> list[Check]:
    """The rule's checks usable on `action`; one that is not (a team file's) is left out."""
    usable = []
    for text in rule.checks:
        try:
            usable.append(parse_check(text, (action,)))
        except CheckError:
            continue
    return usable


def _judged_key(call: ToolCall, aliases: Aliases, wanted: list[tuple[str, Memory]]) -> bytes:
    """What makes a command's checks come out the same: its text, git aliases, directory,
    and the rule versions tested (a new version is a new id)."""
    digest = hashlib.blake2b(call.command.encode("utf-8", "surrogatepass"), digest_size=16)
    digest.update(aliases.digest)
    digest.update(f"\0{call.cwd}\0".encode("utf-8", "surrogatepass"))
    for action, rule in wanted:
        digest.update(f"{action}:{rule.id};".encode())
    return digest.digest()


def _count_key(agent: str, call: ToolCall, action: str) -> bytes:
    """Whose stops in a row are counted: this agent's session (or directory), this action."""
    where = call.session or f"cwd:{call.cwd}"
    return hashlib.blake2b(f"{agent}\0{where}\0{action}".encode(), digest_size=16).digest()


def render_failures(verdict: Verdict, max_stops: int) -> str:
    """The words the model reads about the checks that failed."""
    rules: dict[str, tuple[Memory, list[Outcome]]] = {}
    for failure in verdict.failures:
        rules.setdefault(failure.rule.id, (failure.rule, []))[1].append(failure.outcome)
    count = len(rules)
    broken = "a rule of the user's" if count == 1 else f"{count} of the user's rules"
    match verdict.answer:
        case "stop":
            head = f"mented stopped this command: it breaks {broken}."
            tail = (
                "Change the command so that it keeps them, then run it again "
                f"(stop {verdict.stops_so_far + 1} of at most {max_stops} for this)."
            )
        case "let-through":
            head = (
                f"mented let this command run after {max_stops} stops, but it still breaks "
                f"{broken}."
            )
            tail = "Put it right once it has run (amend it), and tell the user."
        case _:
            head = f"This command breaks {broken}; it runs anyway."
            tail = "Put it right once it has run (amend it)."
    lines = [head]
    said = 0
    for rule, outcomes in rules.values():
        lines.append(f"- [{short_handle(rule.id)}] {rule.content.strip().splitlines()[0]}")
        for outcome in outcomes:
            if said >= MAX_FAILURES_SAID:
                break
            said += 1
            lines.append(f"  - {outcome.said}")
    left = len(verdict.failures) - said
    if left > 0:
        lines.append(f"  ({left} more failed checks)")
    lines.append(tail)
    return "\n".join(lines)
