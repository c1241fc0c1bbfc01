"""The record of whether rules are kept: per rule version, what the hook saw happen.

For each rule version (its id) and agent, counted from events the hook notes:

- `handed`: the rule went to the model in full;
- `passed_first`: it passed with no stop for that action just before it;
- `passed`: it passed after one or more stops (the model put it right);
- `stopped`: it failed a check and was stopped;
- `let_through`: it failed again after `[checks] max_stops` stops, and ran;
- `told`: it failed with `[checks] mode = "tell"`, and ran;
- `retry_changed` / `retry_same`: for a rule without checks, the command after the
  hook stopped one to hand the rule over (`[delivery]` "before") was a different
  command, or the same one again (`mented.hooks`);
- `failed_after`: a check that could not be told before the command ran (the
  message written in the editor) failed on what it did (`mented.afterchecks`).

`checked` (a command was tested against the rule's checks, some field known) is the
sum of the outcomes of a check: each implies it, so it is not written apart (a
`checked` line of an older file is skipped: its outcome line counts it).

Bounded: a rolling window of at most `MAX_EVENTS` events no older than `MAX_AGE_S`.
Kept across restarts in the data directory (`compliance.jsonl`, one event a line,
made 0600, rewritten without the old events once it holds twice the window); synced
nowhere. Lines are appended in batches, not one write per event (the hook notes up
to one event per rule per command): waiting events are written once `FLUSH_EVENTS`
wait, with the first event noted `FLUSH_S` or more after the first waiting one, and
by `flush` and `close` (the daemon's stop). The report counts them all the same (it
reads the memory); a crash loses the waiting ones. A damaged line is skipped; a file that cannot
be read or written leaves the record in memory only, and says so once in the log.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict, deque
from typing import TYPE_CHECKING

import msgspec

from mented import untrusted
from mented.log import log
from mented.protocol import ReportReply, ReportRow

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

    from mented.memory import Memory

MAX_EVENTS = 50_000
MAX_AGE_S = 90 * 86_400
FILE_NAME = "compliance.jsonl"
_MAX_LINE_BYTES = 256
KINDS = (
    "handed",
    "passed_first",
    "passed",
    "stopped",
    "let_through",
    "told",
    "retry_changed",
    "retry_same",
    "failed_after",
)
_KIND_SET = frozenset(KINDS)
# Each implies `checked`. `failed_after` too: a check on a field unknown before the
# command had no outcome then (a rule with another check known before counts twice).
_CHECK_OUTCOMES = frozenset(
    {"passed_first", "passed", "stopped", "let_through", "told", "failed_after"}
)
FLUSH_EVENTS = 64
FLUSH_S = 1.0
# O_NONBLOCK: a named pipe put there is refused (ENXIO), never waited on.
_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


class Event(msgspec.Struct, array_like=True, frozen=True):
    """One thing the hook saw: when, which rule version, which agent, what."""

    time: float
    rule: str
    agent: str
    what: str


class Counts(msgspec.Struct):
    """The counts of one rule (or agent) over a window."""

    handed: int = 0
    checked: int = 0
    passed_first: int = 0
    passed: int = 0
    stopped: int = 0
    let_through: int = 0
    told: int = 0
    retry_changed: int = 0
    retry_same: int = 0
    failed_after: int = 0

    def add(self, what: str) -> None:
        setattr(self, what, getattr(self, what) + 1)
        if what in _CHECK_OUTCOMES:
            self.checked += 1

    @property
    def passed_first_share(self) -> float | None:
        """Of the commands checked, the share that passed at the first attempt."""
        decided = (
            self.passed_first
            + self.passed
            + self.stopped
            + self.let_through
            + self.told
            + self.failed_after
        )
        return None if decided == 0 else self.passed_first / decided


class Summary(msgspec.Struct):
    """Counts per rule, per agent and in all, over the events since a time."""

    since: float
    by_rule: dict[str, Counts] = msgspec.field(default_factory=dict)
    by_agent: dict[str, Counts] = msgspec.field(default_factory=dict)
    total: Counts = msgspec.field(default_factory=Counts)


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Event)


class ComplianceRecord:
    """The rolling record, in memory and appended to `directory/compliance.jsonl`."""

    def __init__(self, directory: Path | None, *, max_events: int = MAX_EVENTS) -> None:
        self._events: deque[Event] = deque(maxlen=max_events)
        self._max_events = max_events
        self._path = None if directory is None else directory / FILE_NAME
        self._fd: int | None = None
        self._lines = 0
        self._failed = False
        self._waiting: list[Event] = []  # noted, not written yet
        self._first_waiting = 0.0
        # Called when events start to wait: the daemon then flushes them `FLUSH_S` later,
        # so that a crash after a quiet spell loses at most that much of the record.
        self.on_waiting: Callable[[], None] | None = None
        if self._path is not None:
            self._load()

    def note(self, rule_id: str, agent: str, what: str) -> None:
        """Record one event now (written with the next batch). Never raises."""
        self.note_all((rule_id,), agent, what)

    def note_all(self, rule_ids: Iterable[str], agent: str, what: str) -> None:
        """Record the same event for each of `rule_ids` now. Never raises."""
        if what not in _KIND_SET:
            return
        now = time.time()
        agent = agent[:64]
        events = [Event(now, rule_id[:64], agent, what) for rule_id in rule_ids]
        self._events.extend(events)
        if self._path is None or self._failed:
            return
        first = not self._waiting
        if first:
            self._first_waiting = now
        self._waiting += events
        if len(self._waiting) >= FLUSH_EVENTS or now - self._first_waiting >= FLUSH_S:
            self.flush()
        elif first and self.on_waiting is not None:
            self.on_waiting()

    def flush(self) -> None:
        """Write the events that wait. Never raises."""
        waiting, self._waiting = self._waiting, []
        if waiting:
            self._append(waiting)

    def summary(self, *, since: float = 0.0, agent: str | None = None) -> Summary:
        """The counts of the events at or after `since` (of one agent, when given)."""
        cutoff = max(since, time.time() - MAX_AGE_S)
        found = Summary(since=cutoff)
        for event in self._events:
            if event.time < cutoff or (agent is not None and event.agent != agent):
                continue
            found.by_rule.setdefault(event.rule, Counts()).add(event.what)
            found.by_agent.setdefault(event.agent, Counts()).add(event.what)
            found.total.add(event.what)
        return found

    def close(self) -> None:
        self.flush()
        self._close_file()

    def _close_file(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # ------------------------------------------------------------------ file

    def _load(self) -> None:
        assert self._path is not None
        limit = 2 * self._max_events * _MAX_LINE_BYTES
        try:
            data = untrusted.read_file(self._path, limit=limit)
        except FileNotFoundError:
            return
        except untrusted.Refused as exc:
            self._fail(str(exc))
            return
        cutoff = time.time() - MAX_AGE_S
        for line in data.splitlines():
            try:
                event = _decoder.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue  # a line cut by a crash, or damaged: the rest still counts
            if event.time >= cutoff and event.what in _KIND_SET:  # no old `checked` line
                self._events.append(event)
        self._lines = len(data.splitlines())
        if self._lines > len(self._events):
            self._rewrite()

    def _append(self, events: list[Event]) -> None:
        if self._path is None or self._failed:
            return
        data = b"".join(_encoder.encode(event) + b"\n" for event in events)
        try:
            if self._fd is None:
                self._fd = os.open(self._path, _OPEN_FLAGS, 0o600)
            os.write(self._fd, data)  # unsynced: a count, not a rule
        except OSError as exc:
            self._fail(f"{self._path}: {exc.strerror or exc}")
            return
        self._lines += len(events)
        if self._lines >= 2 * self._max_events:
            self._rewrite()

    def _rewrite(self) -> None:
        """The file again with only the window's events (written aside, then renamed)."""
        assert self._path is not None
        self._close_file()
        aside = self._path.with_name(FILE_NAME + ".new")
        try:
            fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(b"".join(_encoder.encode(event) + b"\n" for event in self._events))
            aside.replace(self._path)
        except OSError as exc:
            self._fail(f"{self._path}: {exc.strerror or exc}")
            return
        self._lines = len(self._events)

    def _fail(self, why: str) -> None:
        if not self._failed:
            self._failed = True
            log.warning("compliance_record_not_kept", error=why)


MAX_WATCHED = 4096  # sessions whose last stop waits for its next command


class _Stop(msgspec.Struct, frozen=True):
    call: bytes  # the stopped call's digest (`mented.hooks._call_digest`)
    actions: frozenset[str]
    rule_ids: tuple[str, ...]  # the rules without checks it handed over


class RetryWatch:
    """For rules without checks: after the hook stopped a command to hand them over, was
    the session's next command of those actions the same one again, or a changed one?

    `stopped` when such a stop reached the agent; `next_call` with each later command of
    the session: the first one naming one of the stop's actions says which, once.
    Bounded by `MAX_WATCHED` sessions, the oldest forgotten.
    """

    def __init__(self) -> None:
        self._stops: OrderedDict[bytes, _Stop] = OrderedDict()

    def __bool__(self) -> bool:
        return bool(self._stops)

    def stopped(
        self, session: bytes, call: bytes, actions: Iterable[str], rule_ids: Iterable[str]
    ) -> None:
        rules = tuple(rule_ids)
        if not rules:
            self._stops.pop(session, None)
            return
        self._stops[session] = _Stop(call, frozenset(actions), rules)
        self._stops.move_to_end(session)
        while len(self._stops) > MAX_WATCHED:
            self._stops.popitem(last=False)

    def watching(self, session: bytes, actions: Iterable[str]) -> bool:
        """Whether the session's last stop waits for a command naming one of `actions`
        (before the caller digests the command for `next_call`)."""
        stop = self._stops.get(session)
        return stop is not None and not stop.actions.isdisjoint(actions)

    def next_call(
        self, session: bytes, call: bytes, actions: Iterable[str]
    ) -> tuple[tuple[str, ...], str] | None:
        """The rules of the session's last stop and `retry_same` or `retry_changed`, when
        this command names one of its actions; None otherwise (and for no stop)."""
        if not self.watching(session, actions):
            return None
        stop = self._stops.pop(session)
        return stop.rule_ids, "retry_same" if call == stop.call else "retry_changed"


def report_row(key: str, counts: Counts, rule: Memory | None = None) -> ReportRow:
    """`counts` as the wire shows them, with the rule's text and actions when known."""
    return ReportRow(
        key=key,
        content=rule.content if rule is not None else "",
        actions=list(rule.actions) if rule is not None else [],
        handed=counts.handed,
        checked=counts.checked,
        passed_first=counts.passed_first,
        passed=counts.passed,
        stopped=counts.stopped,
        let_through=counts.let_through,
        told=counts.told,
        retry_changed=counts.retry_changed,
        retry_same=counts.retry_same,
        failed_after=counts.failed_after,
        share_passed_first=counts.passed_first_share,
    )


def report(
    record: ComplianceRecord,
    *,
    since: float,
    agent: str | None,
    rule_of: Callable[[str], Memory | None],
) -> ReportReply:
    """The record over the window, per rule (newest activity first kept in count order)."""
    summary = record.summary(since=since, agent=agent)
    rules = [
        report_row(rule_id, counts, rule_of(rule_id))
        for rule_id, counts in sorted(
            summary.by_rule.items(), key=lambda item: (-item[1].checked, -item[1].handed)
        )
    ]
    agents = [report_row(name, counts) for name, counts in sorted(summary.by_agent.items())]
    return ReportReply(
        since=summary.since, rules=rules, agents=agents, total=report_row("total", summary.total)
    )
