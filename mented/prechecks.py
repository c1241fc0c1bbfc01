"""Before the command: the checks of the rules it is handed, tested on its fields.

`HookHandler` asks `PreChecks.judge` about every command whose visible rules carry
checks (`Memory.checks`); a command none of whose rules has one costs nothing here.
The command's words come from the matcher's one parse of it (`Matcher.matched_commands`,
with the shape each action matched by), the fields of each action that the checks
read are read from them (`mented.fields`, the others left alone), and every check on
a field is tested at once (`mented.checks.FieldChecks`); only a value that fails is
tested check by check (`passes_value`; the words of a failure from `evaluate`). An
unknown field is no failure. What a set of rules asks (`_Plan`: their checks parsed, the same
check on several rules once) is kept by the rule versions; what a command's checks
found, by the command, its directory and those versions (`_judged_key`).

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
import itertools
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Literal, Protocol

import msgspec

from mented.checks import (
    Check,
    CheckError,
    FieldChecks,
    Outcome,
    evaluate,
    parse_check,
    passes_value,
)
from mented.edits import MAX_PATHS_PER_EDIT, EditMatcher
from mented.fields import action_fields, fields_in, fields_of_edit
from mented.memory import short_handle

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mented.actions import ActionTable
    from mented.agents import ToolCall
    from mented.config import Config
    from mented.git_aliases import Aliases
    from mented.matcher import Matcher
    from mented.memory import Memory

MAX_COUNTED = 4096  # (agent, session, action) whose stops in a row are counted
MAX_JUDGED = 1024  # outcomes kept for a command judged again (a retry) in the same place
MAX_FAILURES_SAID = 6  # failed checks named in one answer; the rest are counted
MAX_PLANS = 64  # sets of rule versions whose checks are kept parsed
MAX_KEYED_CHARS = 2048  # a command (and directory) up to this long keys its outcomes itself

Answer = Literal["stop", "tell", "let-through"]


class Compliance(Protocol):
    """Where what the checks found is noted (`mented.compliance.ComplianceRecord`)."""

    def note(self, rule_id: str, agent: str, what: str) -> None: ...

    def note_all(self, rule_ids: Iterable[str], agent: str, what: str) -> None: ...


class Failure(msgspec.Struct, frozen=True):
    """A rule's check that one command failed."""

    action: str
    rule: Memory
    outcome: Outcome


class Verdict(msgspec.Struct):
    """What the checks of one command's rules found, and what follows.

    `answer` is None when nothing failed. `checked`: the rules with at least one
    check that could be told (passed or failed), by action.
    """

    failures: list[Failure] = msgspec.field(default_factory=list)
    checked: dict[str, list[Memory]] = msgspec.field(default_factory=dict)
    answer: Answer | None = None
    stops_so_far: int = 0
    # For the record of whether rules are kept, once the answer is sent (`record`).
    notes: list[tuple[list[str], str]] = msgspec.field(default_factory=list)
    # The checks on a field the command does not carry (a message written in the
    # editor): what `mented.afterchecks` tests once the command ran.
    unknown: list[tuple[str, Memory, Check]] = msgspec.field(default_factory=list)


# Per field: its name, the positions of the rules with a check on it, each distinct
# check on it with the positions of the rules that carry it, and all of them as one test.
_FieldPlan = tuple[str, tuple[int, ...], tuple[tuple[Check, tuple[int, ...]], ...], FieldChecks]


class _Plan(msgspec.Struct, frozen=True):
    """What a set of rules asks: per action and field, each distinct usable check once,
    with the positions (in `wanted`) of the rules that carry it. `fields`: the fields
    each action's checks read (no other is read from the command); `all_checked`: the
    rules with a usable check by action, as `Verdict.checked` has them when every
    field was known."""

    wanted: tuple[tuple[str, Memory], ...]
    actions: tuple[str, ...]
    checks: dict[str, tuple[_FieldPlan, ...]]
    fields: dict[str, frozenset[str]]
    all_checked: dict[str, list[Memory]]  # shared by the verdicts: never changed
    carrying: int  # how many rules have a usable check


def _plan(wanted: list[tuple[str, Memory]], table: ActionTable) -> _Plan:
    carriers: dict[str, dict[str, dict[str, tuple[Check, dict[int, None]]]]] = {}
    for position, (action, rule) in enumerate(wanted):
        of_action = carriers.setdefault(action, {})
        for check in _checks_of(rule, action, table):
            on_field = of_action.setdefault(check.field, {})
            on_field.setdefault(check.text, (check, {}))[1][position] = None
    carrying = {
        position
        for of_action in carriers.values()
        for on_field in of_action.values()
        for _, rules in on_field.values()
        for position in rules
    }  # the rules with a usable check
    all_checked: dict[str, list[Memory]] = {}
    for position, (action, rule) in enumerate(wanted):
        if position in carrying:
            all_checked.setdefault(action, []).append(rule)
    return _Plan(
        wanted=tuple(wanted),
        actions=tuple(carriers),
        checks={
            action: tuple(
                (
                    name,
                    tuple(dict.fromkeys(p for _, rules in on_field.values() for p in rules)),
                    tuple((check, tuple(rules)) for check, rules in on_field.values()),
                    FieldChecks([check for check, _ in on_field.values()]),
                )
                for name, on_field in of_action.items()
            )
            for action, of_action in carriers.items()
        },
        fields={action: frozenset(of_action) for action, of_action in carriers.items()},
        all_checked=all_checked,
        carrying=len(carrying),
    )


class PreChecks:
    """Tests rules' checks before a command runs; counts stops per session and action."""

    def __init__(
        self, matcher: Matcher, config: Config, compliance: Compliance | None = None
    ) -> None:
        self._matcher = matcher
        self._edits = EditMatcher(matcher.table)
        self._config = config
        self.compliance = compliance
        self._stops: OrderedDict[bytes, int] = OrderedDict()
        # (command, aliases, cwd, rule versions) -> what their checks found, for a
        # command whose fields came from its words alone (no file: a file may change).
        self._judged: OrderedDict[tuple[object, ...], Verdict] = OrderedDict()
        self._plans: OrderedDict[tuple[str, ...], _Plan] = OrderedDict()  # by rule versions

    def reconfigure(self, matcher: Matcher, config: Config) -> None:
        self._matcher = matcher
        self._edits = EditMatcher(matcher.table)
        self._config = config
        self._plans.clear()  # another table may give an action other fields
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
        wanted: list[tuple[str, Memory]] = []
        versions: list[str] = []  # what the outcomes and the plan depend on
        has_fields = action_fields(self._matcher.table)
        for action, rules in visible:
            if action in has_fields:
                for rule in rules:
                    if rule.checks:
                        wanted.append((action, rule))
                        versions += (action, rule.id)
        if not wanted or call.ran or not (call.command or call.edited):
            return None
        tested = tuple(versions)
        key = _judged_key(call, aliases, tested)
        judged = self._judged.get(key)
        if judged is not None:
            self._judged.move_to_end(key)
            verdict = Verdict(
                failures=judged.failures, checked=judged.checked, unknown=judged.unknown
            )
        else:
            plan = self._plans.get(tested)
            if plan is None:
                plan = self._plans[tested] = _plan(wanted, self._matcher.table)
                while len(self._plans) > MAX_PLANS:
                    self._plans.popitem(last=False)
            verdict, from_file = self._test(call, plan, aliases=aliases, deadline=deadline)
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
        plan: _Plan,
        *,
        aliases: Aliases,
        deadline: float | None,
    ) -> tuple[Verdict, bool]:
        """The checks' outcomes on the command, and whether a field came from a file."""
        table = self._matcher.table
        if call.command:
            # From now on every match keeps its words: the next command's one parse serves both.
            self._matcher.keep_matched = True
            commands = self._matcher.matched_commands(
                call.command, deadline=deadline, aliases=aliases
            )
            found = fields_in(table, commands, plan.actions, call.cwd, only=plan.fields)
        else:  # a file edit: the files, as its actions' `paths` patterns see them
            paths = [
                path
                for edited in itertools.islice(call.edited, MAX_PATHS_PER_EDIT)
                if (path := self._edits.relative_path(edited, call.cwd))
            ]
            found = [
                fields
                for action in plan.actions
                if (fields := fields_of_edit(table, action, paths)) is not None
            ]
        told: set[int] = set()
        failed: dict[int, list[Outcome]] = {}
        unknown: dict[int, list[Check]] = {}
        for fields in found:
            values = fields.values
            for name, on_field, checks, all_checks in plan.checks[fields.action]:
                value = values.get(name)
                if value is None:  # unknown: neither passed nor failed
                    for check, rules in checks:
                        for position in rules:
                            unknown.setdefault(position, []).append(check)
                    continue
                told.update(on_field)
                if all_checks.all_pass(value):  # the usual case: one quick test for all
                    continue
                for check, rules in checks:
                    if not passes_value(check, value):
                        outcome = evaluate(check, fields)  # the words of the failure
                        for position in rules:
                            failed.setdefault(position, []).append(outcome)
        from_file = any(fields.from_file for fields in found)
        if not failed and not unknown and len(told) == plan.carrying:
            # Every field known, every check passed: the rules as the plan has them.
            return Verdict(checked=plan.all_checked), from_file
        verdict = Verdict()
        for position, (action, rule) in enumerate(plan.wanted):
            if position in told:
                verdict.checked.setdefault(action, []).append(rule)
            for outcome in failed.get(position, ()):
                verdict.failures.append(Failure(action, rule, outcome))
            verdict.unknown += ((action, rule, check) for check in unknown.get(position, ()))
        return verdict, from_file

    def _decide(self, agent: str, call: ToolCall, verdict: Verdict) -> None:
        if not verdict.failures and not self._stops and self.compliance is None:
            return  # passed, no stop counted: nothing to change, nothing to note
        failed_actions = list(dict.fromkeys(failure.action for failure in verdict.failures))
        for action in verdict.checked:
            if action not in failed_actions:
                # No stop counted anywhere (the usual case): no key to work out.
                before = self._stops.pop(_count_key(agent, call, action), 0) if self._stops else 0
                self._note(verdict, action, "passed_first" if before == 0 else "passed")
        if not failed_actions:
            return
        settings = self._config.checks
        answer: Answer = "tell"
        for action in failed_actions:
            key = _count_key(agent, call, action)
            stops = self._stops.get(key, 0)
            verdict.stops_so_far = max(verdict.stops_so_far, stops)
            if settings.mode_of(action) != "stop":
                self._note(verdict, action, "told")
                continue
            if stops >= settings.max_stops:
                self._stops.pop(key, None)
                self._note(verdict, action, "let_through")
                if answer == "tell":
                    answer = "let-through"
                continue
            answer = "stop"
            self._stops[key] = stops + 1
            self._stops.move_to_end(key)
            self._note(verdict, action, "stopped")
        while len(self._stops) > MAX_COUNTED:
            self._stops.popitem(last=False)
        verdict.answer = answer

    def _note(self, verdict: Verdict, action: str, what: str) -> None:
        if self.compliance is None:
            return
        rules = verdict.checked.get(action, [])
        if what in ("stopped", "let_through", "told"):
            failing = {f.rule.id for f in verdict.failures if f.action == action}
            rules = [rule for rule in rules if rule.id in failing]
        verdict.notes.append(([rule.id for rule in rules], what))

    def record(self, agent: str, verdict: Verdict) -> None:
        """Note what `verdict` found in the record of whether rules are kept: called once
        its answer reached the agent (the hook calls it then, off the agent's wait; an
        answer nobody read changed nothing). Each outcome counts as checked."""
        if self.compliance is not None:
            for rule_ids, what in verdict.notes:
                self.compliance.note_all(rule_ids, agent, what)


def _checks_of(rule: Memory, action: str, table: ActionTable) -> list[Check]:
    """The rule's checks usable on `action`; one that is not (a team file's) is left out."""
    usable = []
    for text in rule.checks:
        try:
            usable.append(parse_check(text, (action,), table))
        except CheckError:
            continue
    return usable


def _judged_key(call: ToolCall, aliases: Aliases, versions: tuple[str, ...]) -> tuple[object, ...]:
    """What makes a command's checks come out the same: its text and directory, git
    aliases, and the rule versions tested (a new version is a new id). A short command
    is its own key (hashed by Python, no digest to work out); a long one is kept as a
    digest, so that the outcomes kept hold at most `MAX_JUDGED` x `MAX_KEYED_CHARS`."""
    command, cwd = call.command or call.describe(), call.cwd or ""
    if len(command) + len(cwd) <= MAX_KEYED_CHARS:
        return (command, cwd, aliases.digest, versions)
    digest = hashlib.blake2b(command.encode("utf-8", "surrogatepass"), digest_size=16)
    digest.update(b"\0" + cwd.encode("utf-8", "surrogatepass"))
    return (digest.digest(), len(command), aliases.digest, versions)


def _count_key(agent: str, call: ToolCall, action: str) -> bytes:
    """Whose stops in a row are counted: this agent's session (or directory), this action."""
    where = call.session or f"cwd:{call.cwd}"
    return hashlib.blake2b(f"{agent}\0{where}\0{action}".encode(), digest_size=16).digest()


def render_failures(verdict: Verdict, max_stops: int, *, what: str = "command") -> str:
    """The words the model reads about the checks that failed (`what`: the call's kind,
    "command" or "file edit")."""
    rules: dict[str, tuple[Memory, list[Outcome]]] = {}
    for failure in verdict.failures:
        rules.setdefault(failure.rule.id, (failure.rule, []))[1].append(failure.outcome)
    count = len(rules)
    broken = "a rule of the user's" if count == 1 else f"{count} of the user's rules"
    match verdict.answer:
        case "stop":
            head = f"mented stopped this {what}: it breaks {broken}."
            tail = (
                f"Change the {what} so that it keeps them, then run it again "
                f"(stop {verdict.stops_so_far + 1} of at most {max_stops} for this)."
            )
        case "let-through":
            head = (
                f"mented let this {what} run after {max_stops} stops, but it still breaks {broken}."
            )
            tail = "Put it right once it has run (amend it), and tell the user."
        case _:
            head = f"This {what} breaks {broken}; it runs anyway."
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
