"""A hook request end to end: agent event -> tool call -> actions -> rules -> stdout bytes.

A tool call is a shell command (actions named by mented.matcher), an MCP tool
(mented.tool_triggers) or a file edit (mented.edits); the rest is the same for all.
`HookHandler.handle` runs on the daemon's trio thread for every tool call the
agent's hook is registered for, so it does only in-memory work, store reads (microseconds) and,
when a session is handed something new, one unsynced write to the session
memory (tens of microseconds). It never raises: any failure is silence (empty
stdout), because a hook must never get in the way of the command.

Delivery: before the action, once (`[delivery]` in the config file; the words
are in mented.handover, the session memory in mented.sessions):

- A command whose rules the session has not been handed yet gets them in full.
  With delivery `before` (the default) on an agent that shows hook context only
  after the tool ran (Claude Code, Codex), the command is stopped once with the
  rules as the reason: the model reads them before it runs, and runs it again.
  With `context`, or on an agent whose context arrives before the tool runs,
  they ride along as extra context.
- A later command whose rules were all handed over gets a one-line pointer; it
  is never stopped again. A rule added or superseded since goes alone, naming
  the rule it replaces (however it was superseded: mented.replaced), and may
  stop the command once more.
- A stop happens only once the session memory has recorded it: when the
  memory cannot be written, when the event has no session id, the rules go as
  context instead, so that nothing -- a restart, a lost session, a failure --
  can stop the same rules twice.
- `SessionStart` with source `compact` or `clear` forgets the session: the
  model no longer has the rules, so the next matching command hands them over.
- An agent may read no context at some point (Gemini CLI before a tool runs,
  Cursor never): there only a stop is said; what would be context is not said
  and not recorded as handed over, so that a later event can still say it
  (Gemini CLI's `AfterTool`, after the tool ran: never stopped).

After a command ran (`ToolCall.ran`), the checks that could not be told before
it are tested on what it did (mented.afterchecks); on an agent whose event after
a tool is installed for that alone (`checks_only_after`), nothing else is done.

Pinned rules (mented.pinned) go at `SessionStart`: on a new session, a resumed
one and after a compaction or clear, the pinned rules the session may see and
was not handed yet (all of them, after the session was forgotten), as context,
recorded in the session memory like action rules. A resumed session that has
them gets nothing, except where the agent leaves the first start's context out
of a resumed session (Gemini CLI, Copilot CLI: `SessionStarted.pinned_dropped`):
there it gets all of them again.

The same event delivered twice within `[hook] dedupe_seconds` (a hook
registered both in settings and in a plugin) is answered once. Events are
remembered by a 16-byte digest, not by their command (up to the shim's 1 MiB).

An answer counts only once it reached the caller in time. The daemon asks for a
`HookAnswer` (`answer_decoded`): what it hands over is written to the session
memory at once (a stop is said only once recorded), and withdrawn when the
answer could not be sent before the caller's deadline (a stall, a shim that
gave up): the session gets the full text next time. What else the answer
changes (the stop its retry follows, the de-duplication, the once-per-session
notice, the fire log) happens only once it was sent.

Every command that names an action is recorded (`on_fire`: the daemon's activity
record, mented.activity, read by `mentectl log`), with how its rules were delivered
and why; every field that comes from the event is cut to a bound here.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from mented.afterchecks import AfterChecks
from mented.agents import AGENTS, ContextEmptied, SessionStarted, ToolCall
from mented.compliance import RetryWatch
from mented.edits import EditMatcher
from mented.git_aliases import NO_ALIASES, RECHECK_S, Aliases, GitAliases
from mented.handover import Handover, Section, render_pointer, render_rules
from mented.log import log
from mented.matcher import MAX_COMMAND_CHARS
from mented.memory import short_handle
from mented.pinned import render_pinned
from mented.prechecks import PreChecks, Verdict, render_failures
from mented.problems import SESSION_MEMORY, session_memory_unavailable
from mented.protocol import FireRecord
from mented.replaced import replaced_in
from mented.sessions import SessionKey, SessionMemoryError
from mented.team import RuleLookup, untrusted_notice
from mented.tool_triggers import ToolMatcher

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mented.agents import Agent

    HookEvent = ToolCall | SessionStarted | ContextEmptied  # what an adapter decodes
    from mented.config import Config
    from mented.matcher import Matcher
    from mented.memory import Memory
    from mented.problems import Problems
    from mented.sessions import SessionMemory
    from mented.store import Store

FIRE_LOG_SIZE = 500
MAX_RECENT_EVENTS = 1024  # events remembered for de-duplication
MAX_STOPPED = 4096  # sessions whose last stopped call is remembered, to let its retry pass silently
MAX_SESSIONS_COUNTED = 4096  # sessions in the "characters per session" average of `status`
# Cuts of what the fire log keeps of an event's own fields (the shim passes up to 1 MiB).
MAX_LOGGED_COMMAND = 1000
MAX_LOGGED_CWD = 1024
MAX_LOGGED_SESSION = 128
MAX_CWD_CHARS = 4096  # PATH_MAX on Linux: a longer working directory is taken as `/`

# Why rules went (or did not go) the way they did, as `mentectl log` shows it.
WHY_NEW = "first time in this session"
WHY_CHANGED = "rules new or changed since this session was handed them"
WHY_HANDED = "this session already has them"
WHY_RETRY = "the retry of the call stopped for these rules"
WHY_NO_RULES = "no rule visible to this agent here"
WHY_NO_SESSION = "no session id: cannot tell what the model has"
WHY_NO_MEMORY = "session memory unavailable"
WHY_CONTEXT = "delivery is `context`"
WHY_TOO_LONG = "not even the headings fit `max_context_chars`"
WHY_NO_CONTEXT = "{agent} reads no hook context at this point"
WHY_NO_PINNED = "no pinned rule visible to this agent here"
WHY_PINNED_HANDED = "this session already has its pinned rules"
WHY_CHECK_FAILED = "a check of its rules failed"
WHY_CHECK_TOLD = "a check of its rules failed ([checks] mode is `tell`)"
WHY_CHECK_LET_THROUGH = "a check failed again after [checks] max_stops stops: let through"
WHY_LATE = "answered after the hook gave up: nothing reached the model (handed over next time)"
WHY_NOT_ANALYZED = (
    "not analyzed: {length} characters (without heredoc bodies), over the cap of {cap}: "
    "no action could be named"
)


@dataclass(eq=False, slots=True)
class HookAnswer:
    """A hook's stdout bytes, and what they change once they reached the caller in time.

    The caller sends `out`, then calls `sent()` when it was written before the
    caller's deadline, else `dropped()`: once, one or the other.
    """

    out: bytes = b""
    _on_sent: list[Callable[[], None]] = field(default_factory=list, init=False, repr=False)
    _on_dropped: list[Callable[[], None]] = field(default_factory=list, init=False, repr=False)

    def when_sent(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the answer reached its caller in time."""
        self._on_sent.append(callback)

    def when_dropped(self, callback: Callable[[], None]) -> None:
        """Call `callback` if nobody read the answer (it undoes what was written for it)."""
        self._on_dropped.append(callback)

    def sent(self) -> None:
        """The answer reached its caller in time: what it handed over counts."""
        callbacks, self._on_sent, self._on_dropped = self._on_sent, [], []
        for callback in callbacks:
            callback()

    def dropped(self) -> None:
        """Nobody read the answer: withdraw what it handed over."""
        callbacks, self._on_sent, self._on_dropped = self._on_dropped, [], []
        for callback in callbacks:
            callback()


class HookHandler:
    """Answers `hook` requests and keeps the log of recent fires."""

    def __init__(  # noqa: PLR0913 - the daemon's parts, the optional ones keyword-only
        self,
        store: Store | RuleLookup,
        matcher: Matcher,
        config: Config,
        sessions: SessionMemory | None = None,
        *,
        on_fire: Callable[[FireRecord], None] | None = None,
        problems: Problems | None = None,
    ) -> None:
        """`store`: where rules are looked up (the daemon passes a `RuleLookup`: your
        rules, then the project's trusted ones). `sessions`: the session memory; None
        (it could not be opened) means every command gets its rules as context, and
        nothing is ever stopped. `on_fire`: called with each fire as it is logged, in
        the thread that handles the event (the daemon's: it publishes it to subscribers,
        `mented.events`); it must not raise, nor wait. `problems`: where a session
        memory that fails is noted (and cleared once it works again), for `status`."""
        self._store = store
        self._matcher = matcher
        self._tools = ToolMatcher(matcher.table)
        self._edits = EditMatcher(matcher.table)
        self._config = config
        self._sessions = sessions
        self._on_fire = on_fire
        self._problems = problems
        self._fires: deque[FireRecord] = deque(maxlen=FIRE_LOG_SIZE)
        self._last_fire: FireRecord | None = None
        self._recent: OrderedDict[bytes, float] = OrderedDict()  # event digest -> expiry
        # Per session, the call last stopped: its retry follows the rules just read.
        self._stopped: OrderedDict[bytes, bytes] = OrderedDict()
        self._chars: OrderedDict[bytes, int] = OrderedDict()  # session digest -> chars handed
        self._chars_total = 0
        self._noticed: OrderedDict[bytes, None] = OrderedDict()  # (agent, session, project)
        self._failures_logged: set[str] = set()
        # Their files' stamps checked at most once per `RECHECK_S` per directory.
        self._git_aliases = GitAliases(recheck_s=RECHECK_S)
        # Rules' checks, tested before the command (`mented.prechecks`).
        self.prechecks = PreChecks(matcher, config)
        self.retries = RetryWatch()  # after a stop, whether the retry was another command
        # And after it, on what it did, those that could not be told before (`mented.afterchecks`).
        self.afterchecks = AfterChecks()

    def git_aliases_for(self, call: ToolCall) -> Aliases:
        """The user's git aliases where `call` runs, for a command that may run git.

        Read from the git config files and cached by their times (`git_aliases`):
        a command that cannot run git costs nothing, one that can a few `stat`s, or
        none within `RECHECK_S` of the last look in its directory.
        """
        if not call.command or "git" not in call.command:
            return NO_ALIASES
        return self._git_aliases.for_directory(call.cwd)

    def reconfigure(self, matcher: Matcher, config: Config) -> None:
        """Use a new action table and settings from the next request on."""
        self._matcher = matcher
        self._tools = ToolMatcher(matcher.table)
        self._edits = EditMatcher(matcher.table)
        self._config = config
        self.prechecks.reconfigure(matcher, config)
        if self._sessions is not None:
            self._sessions.ttl_s = config.hook.session_ttl_s

    def handle(self, agent: str, event: bytes, *, deadline: float | None = None) -> bytes:
        """The exact stdout bytes for `agent`'s hook `event`; empty for silence. Never raises.

        Past `deadline` (a `time.monotonic()` value: when the shim gives up) the answer is
        silence, and no more work is done for it.
        """
        return self.handle_decoded(agent, decode_event(agent, event), deadline=deadline)

    def handle_decoded(
        self,
        agent: str,
        call: HookEvent | None,
        *,
        deadline: float | None = None,
        aliases: Aliases | None = None,
        test: bool = False,
    ) -> bytes:
        """`handle` for an event already decoded (`decode_event`): the server decodes
        each one first to see whether its command is slow to match. `aliases`: the
        call's `git_aliases_for`, when the caller looked them up already (a few `stat`s
        not made twice). `test`: a test fire (`mentectl doctor`, `setup`): answered and
        logged as any other, marked, and not the user's activity (not the last fire,
        not in the characters per session, not sent to subscribers). Counts the answer
        as sent (`answer_decoded` lets the caller say). Never raises."""
        answer = self.answer_decoded(agent, call, deadline=deadline, aliases=aliases, test=test)
        answer.sent()
        return answer.out

    def answer_decoded(
        self,
        agent: str,
        call: HookEvent | None,
        *,
        deadline: float | None = None,
        aliases: Aliases | None = None,
        test: bool = False,
    ) -> HookAnswer:
        """`handle_decoded`, for a caller that sends the answer itself: it then calls the
        answer's `sent()` or `dropped()` (whether it went out before the deadline).
        Never raises."""
        answer = HookAnswer()
        try:
            answer.out = self._handle(agent, call, deadline, aliases, answer, test=test)
        except Exception as exc:  # noqa: BLE001 - the hook's contract: failure is silence
            self._log_failure_once(exc, agent=agent)
            answer.dropped()  # withdraw what it wrote before failing
            return HookAnswer()
        return answer

    def recent_fires(self, n: int) -> list[FireRecord]:
        """The last `n` fires, newest first."""
        if n <= 0:
            return []
        fires = list(self._fires)[-n:]
        fires.reverse()
        return fires

    @property
    def last_fire(self) -> FireRecord | None:
        """The last fire that handed rules to an agent."""
        return self._last_fire

    def recall_last_fire(self, fire: FireRecord) -> None:
        """`fire`, from the activity record of before a restart, is the last one, unless a
        fire since the start came first."""
        if self._last_fire is None and not fire.test and fire.delivery != "none":
            self._last_fire = fire

    def chars_per_session(self) -> tuple[float | None, int]:
        """Characters of rules handed over per session on average, and over how many sessions."""
        if not self._chars:
            return None, 0
        return self._chars_total / len(self._chars), len(self._chars)

    # ---------------------------------------------------------------- internals

    def _log_failure_once(self, exc: Exception, **fields: object) -> None:
        kind = type(exc).__name__
        if kind not in self._failures_logged:  # once per kind: this runs per command
            self._failures_logged.add(kind)
            log.warning("hook_failed", error=repr(exc), exc_info=True, **fields)

    def _handle(  # noqa: PLR0913 - the request, its answer and whether it is a test fire
        self,
        agent: str,
        call: HookEvent | None,
        deadline: float | None,
        aliases: Aliases | None,
        answer: HookAnswer,
        *,
        test: bool,
    ) -> bytes:
        started = time.perf_counter()
        adapter = AGENTS.get(agent)
        if adapter is None or call is None or _past(deadline):
            return b""
        if isinstance(call, SessionStarted):
            return self._session_started(adapter, call, started, answer, test=test)
        if isinstance(call, ContextEmptied):
            self._forget_session(SessionKey(agent, call.session))
            return b""
        if call.ran and adapter.checks_only_after:
            note = self.afterchecks.after(adapter, call, self.prechecks.compliance)
            return adapter.render_after(note) if note else b""
        if aliases is None:
            aliases = self.git_aliases_for(call)
        actions = self._actions_of(call, deadline, aliases)
        if not actions and call.command and len(call.command) > MAX_COMMAND_CHARS:
            self._record_not_analyzed(adapter, call, started, aliases, test=test)
        if not actions or _past(deadline):
            return b""
        now = time.monotonic()
        event_key = _event_digest(agent, call)
        if self._seen_recently(event_key, now):
            return b""
        k = self._config.hook.k
        visible = [
            (action, rules)
            for action in actions
            if (rules := self._store.recall_for_action(action, agent=agent, cwd=call.cwd, k=k))
        ]
        # A test fire (`mentectl doctor`'s) is no part of the record of whether rules are kept.
        if self.retries and call.session and not test:  # a stop waits for the next command
            self._watch_retry(SessionKey(agent, call.session), call, actions, answer)
        verdict = self.prechecks.judge(agent, call, visible, aliases=aliases, deadline=deadline)
        if verdict is not None and verdict.notes and not test:
            answer.when_sent(functools.partial(self.prechecks.record, agent, verdict))
        if verdict is not None:
            self.afterchecks.before(adapter, call, verdict)
        if verdict is not None and verdict.answer is not None:
            out, fire = self._deliver_failed_checks(adapter, call, visible, verdict, answer)
        else:
            out, fire = self._deliver(adapter, call, visible, answer)
        if call.ran and (note := self.afterchecks.after(adapter, call, self.prechecks.compliance)):
            said = adapter.answer_text(out) if out else None
            out = adapter.render_after(f"{note}\n\n{said}" if said else note)
        out = self._with_untrusted_notice(adapter, call, out, answer)
        if out:
            answer.when_sent(lambda: self._remember(event_key, now))
        fire.actions = list(actions)
        fire.latency_us = (time.perf_counter() - started) * 1e6
        key = SessionKey(adapter.name, call.session) if call.session else None
        self._record_when_settled(fire, answer, key, test=test)
        return out

    def _record_not_analyzed(
        self, adapter: Agent, call: ToolCall, started: float, aliases: Aliases, *, test: bool
    ) -> None:
        """Log a command the matcher did not analyze for its length: it fired nothing."""
        assert call.command is not None  # the caller checked
        length = self._matcher.too_long(call.command, aliases=aliases)
        if length is None:  # analyzed without its heredoc bodies: nothing to say
            return
        self._record(
            FireRecord(
                time=time.time(),
                agent=adapter.name,
                session=_cut(call.session, MAX_LOGGED_SESSION),
                cwd=_cut(call.cwd, MAX_LOGGED_CWD),
                command=_cut(call.describe(), MAX_LOGGED_COMMAND) or "",
                rule_ids=[],
                mode="none",
                delivery="none",
                why=WHY_NOT_ANALYZED.format(length=length, cap=MAX_COMMAND_CHARS),
                latency_us=(time.perf_counter() - started) * 1e6,
            ),
            test=test,
        )

    def _with_untrusted_notice(
        self, adapter: Agent, call: ToolCall, out: bytes, answer: HookAnswer
    ) -> bytes:
        """`out`, with a notice to the user (once per session) when the command runs in a
        project whose committed rules are not trusted yet: they are never handed over."""
        if not isinstance(self._store, RuleLookup) or not call.session:
            return out
        for project in self._store.untrusted_projects(call.cwd):  # the nearest first
            key = hashlib.blake2b(
                msgspec.json.encode((adapter.name, call.session, project.root)), digest_size=16
            ).digest()
            if key not in self._noticed:
                break
        else:
            return out
        notice = untrusted_notice(project.root, project.problem)
        noticed = adapter.with_notice(out, notice)
        if noticed is None:
            return out
        answer.when_sent(lambda: self._note_noticed(key))
        return noticed

    def _note_noticed(self, key: bytes) -> None:
        self._noticed[key] = None
        while len(self._noticed) > MAX_SESSIONS_COUNTED:
            self._noticed.popitem(last=False)

    def _session_started(
        self,
        adapter: Agent,
        start: SessionStarted,
        started: float,
        answer: HookAnswer,
        *,
        test: bool,
    ) -> bytes:
        """The pinned rules for a session start (forgetting the session when emptied)."""
        key = SessionKey(adapter.name, start.session) if start.session else None
        if key is not None and start.context_emptied:
            self._forget_session(key)
        rules = self._store.pinned_rules(agent=adapter.name, cwd=start.cwd)
        fire = FireRecord(
            time=time.time(),
            agent=adapter.name,
            session=_cut(start.session, MAX_LOGGED_SESSION),
            cwd=_cut(start.cwd, MAX_LOGGED_CWD),
            command=f"session start ({start.source})",
            rule_ids=[rule.id for rule in rules],
            mode="none",
            delivery="none",
            why=WHY_NO_PINNED,
        )
        handed, _ = self._handed(key)
        fresh = [rule for rule in rules if start.pinned_dropped or rule.id not in handed]
        replaced = replaced_in(fresh, handed, self._store, agent=adapter.name, cwd=start.cwd)
        rendered = render_pinned(fresh, self._config.pinned, replaced)
        out = b""
        if rules and not fresh:
            fire.why = WHY_PINNED_HANDED
        elif rendered.text:
            if key is not None:
                self._hand_over(key, rendered.shown_ids, answer, before=handed)
            fire.mode, fire.delivery, fire.why = "context", "full", f"session {start.source}"
            fire.full_ids, fire.chars = rendered.shown_ids, len(rendered.text)
            out = adapter.render_session_context(rendered.text)
        fire.latency_us = (time.perf_counter() - started) * 1e6
        self._record_when_settled(fire, answer, key, test=test)
        return out

    def _actions_of(
        self, call: ToolCall, deadline: float | None, aliases: Aliases
    ) -> tuple[str, ...]:
        """The actions a tool call performs: by its command, MCP tool, or the files it edits."""
        if call.command:
            return self._matcher.actions_in(call.command, deadline=deadline, aliases=aliases)
        if call.mcp_tool:
            return self._tools.actions_for(call.mcp_tool)
        return self._edits.actions_for(call.edited, call.cwd)

    def _deliver(
        self,
        adapter: Agent,
        call: ToolCall,
        visible: list[tuple[str, list[Memory]]],
        answer: HookAnswer,
    ) -> tuple[bytes, FireRecord]:
        """The answer for a command with these visible rules, and its log record."""
        fire = FireRecord(
            time=time.time(),
            agent=adapter.name,
            session=_cut(call.session, MAX_LOGGED_SESSION),
            cwd=_cut(call.cwd, MAX_LOGGED_CWD),
            command=_cut(call.describe(), MAX_LOGGED_COMMAND) or "",
            rule_ids=[rule.id for _, rules in visible for rule in rules],
            mode="none",
            delivery="none",
            why=WHY_NO_RULES,
        )
        if not visible:
            return b"", fire
        key = SessionKey(adapter.name, call.session) if call.session else None
        handed, unremembered = self._handed(key)
        new = self._sections(adapter, call, visible, handed)
        if not new:
            # Everything here was handed over in this session: a pointer, never a stop;
            # nothing at all for the retry of the call just stopped (the model read the
            # rules one turn ago).
            assert key is not None  # an empty memory hands nothing over
            if not adapter.takes_context(call):
                fire.why = WHY_NO_CONTEXT.format(agent=adapter.title)
                return b"", fire
            self._touch(key)
            stopped = self._stopped.get(key.digest)  # digested only for a session stopped
            if stopped is not None and stopped == _call_digest(call):
                del self._stopped[key.digest]
                fire.why = WHY_RETRY
                return b"", fire
            text = render_pointer(
                [(action, [short_handle(rule.id) for rule in rules]) for action, rules in visible]
            )
            fire.mode, fire.delivery, fire.why, fire.chars = (
                "context",
                "pointer",
                WHY_HANDED,
                len(text),
            )
            return adapter.render_context(text), fire
        # Whether this command's rules were partly handed over before (not other actions').
        earlier = any(rule.id in handed for _, rules in visible for rule in rules)
        wants_before = any(
            self._config.delivery.mode_of(section.action) == "before" for section in new
        )
        stop = (
            wants_before
            and adapter.can_stop
            and adapter.context_arrives == "after"
            and unremembered is None
            and not call.ran
        )
        if not stop and not adapter.takes_context(call):
            # Nothing said here would reach the model: hand nothing over, so that
            # the agent's later event for this call (or its next call) still can.
            fire.why = WHY_NO_CONTEXT.format(agent=adapter.title)
            return b"", fire
        rendered = self._render(adapter, call, new, stop=stop, earlier=earlier)
        if not rendered:
            fire.why = WHY_TOO_LONG
            return b"", fire
        handed_now = [rule.id for section in new for rule in section.rules]
        if (
            key is not None
            and unremembered is None
            and not self._hand_over(key, handed_now, answer, before=handed)
        ):
            unremembered = WHY_NO_MEMORY
            if stop:  # unrecorded, the stop could come again: say it as context instead
                stop = False
                rendered = self._render(adapter, call, new, stop=False, earlier=earlier)
        fire.mode = "stop" if stop else "context"
        fire.delivery = "full"
        fire.full_ids = rendered.shown_ids
        fire.chars = len(rendered.text)
        if not wants_before:
            fire.why = WHY_CONTEXT
        elif unremembered is not None:
            fire.why = unremembered
        elif not stop:
            fire.why = f"{adapter.title} shows hook context before the tool runs"
        else:
            fire.why = WHY_CHANGED if earlier else WHY_NEW
        if stop:
            assert key is not None  # a stop needs the session memory
            stopped = _call_digest(call)
            answer.when_sent(lambda: self._remember_stop(key, stopped))
            self._watch_stop(key, stopped, [a for a, _ in visible], new, rendered, answer=answer)
            return adapter.render_deny(rendered.text), fire
        return adapter.render_context(rendered.text), fire

    def _deliver_failed_checks(
        self,
        adapter: Agent,
        call: ToolCall,
        visible: list[tuple[str, list[Memory]]],
        verdict: Verdict,
        answer: HookAnswer,
    ) -> tuple[bytes, FireRecord]:
        """The answer for a command that fails its rules' checks (`mented.prechecks`):
        the failures, then the rules the session was not handed yet, in full."""
        _, fire = self._deliver(adapter, call, [], answer)  # the log record, nothing delivered
        fire.rule_ids = [rule.id for _, rules in visible for rule in rules]
        stop = verdict.answer == "stop" and adapter.can_stop  # else told, never stopped
        what = call.kind_in_words()
        text = render_failures(verdict, self._config.checks.max_stops, what=what)
        key = SessionKey(adapter.name, call.session) if call.session else None
        handed, unremembered = self._handed(key)
        new = self._sections(adapter, call, visible, handed)
        if new:
            earlier = any(rule.id in handed for _, rules in visible for rule in rules)
            rendered = self._render(adapter, call, new, stop=stop, earlier=earlier)
            if rendered.text:
                text = f"{text}\n\n{rendered.text}"
                fire.full_ids = rendered.shown_ids
                if key is not None and unremembered is None:
                    self._hand_over(key, rendered.shown_ids, answer, before=handed)
        if not stop and not adapter.takes_context(call):
            fire.why = WHY_NO_CONTEXT.format(agent=adapter.title)
            return b"", fire
        fire.mode = "stop" if stop else "context"
        fire.delivery = "full"
        fire.chars = len(text)  # counted for the session once the answer is sent (`_record`)
        fire.why = {
            "stop": WHY_CHECK_FAILED,
            "tell": WHY_CHECK_TOLD,
            "let-through": WHY_CHECK_LET_THROUGH,
        }[verdict.answer or "tell"]
        return (adapter.render_deny(text) if stop else adapter.render_context(text)), fire

    def _sections(
        self,
        adapter: Agent,
        call: ToolCall,
        visible: list[tuple[str, list[Memory]]],
        handed: set[str],
    ) -> list[Section]:
        """The rules not handed yet, by action, each naming the rule it replaces (if any)."""
        return [
            Section(
                action,
                fresh,
                replaced_in(fresh, handed, self._store, agent=adapter.name, cwd=call.cwd),
            )
            for action, rules in visible
            if (fresh := [rule for rule in rules if rule.id not in handed])
        ]

    def _watch_stop(  # noqa: PLR0913 - the stop's parts
        self,
        key: SessionKey,
        stopped: bytes,
        actions: list[str],
        new: list[Section],
        rendered: Handover,
        *,
        answer: HookAnswer,
    ) -> None:
        """Once the stop is sent, watch whether the next command is another one (the
        rules without checks it hands over: the checks say the rest)."""
        if self.prechecks.compliance is None:
            return
        unchecked = {rule.id for section in new for rule in section.rules if not rule.checks}
        shown = [rule_id for rule_id in rendered.shown_ids if rule_id in unchecked]
        answer.when_sent(lambda: self.retries.stopped(key.digest, stopped, actions, shown))

    def _watch_retry(
        self, key: SessionKey, call: ToolCall, actions: Sequence[str], answer: HookAnswer
    ) -> None:
        """The command after a stop: noted as the same one again or a changed one."""
        if not self.retries.watching(key.digest, actions):  # most: digest no command
            return
        seen = self.retries.next_call(key.digest, _call_digest(call), actions)
        compliance = self.prechecks.compliance
        if seen is not None and compliance is not None:
            answer.when_sent(functools.partial(compliance.note_all, seen[0], key.agent, seen[1]))

    def _remember_stop(self, key: SessionKey, call_digest: bytes) -> None:
        self._stopped[key.digest] = call_digest
        self._stopped.move_to_end(key.digest)
        while len(self._stopped) > MAX_STOPPED:
            self._stopped.popitem(last=False)

    def _render(
        self, adapter: Agent, call: ToolCall, new: list[Section], *, stop: bool, earlier: bool
    ) -> Handover:
        before = stop or adapter.context_arrives == "before"
        return render_rules(
            new,
            moment="before" if before else "after",
            max_chars=self._config.hook.max_context_chars,
            table=self._matcher.table,
            earlier=earlier,
            what=call.kind_in_words(),
        )

    def _handed(self, key: SessionKey | None) -> tuple[set[str], str | None]:
        """The rule ids this session was handed, and why it cannot be remembered (None: it can)."""
        if key is None:
            return set(), WHY_NO_SESSION
        if self._sessions is None:
            return set(), WHY_NO_MEMORY  # said once, when it failed to open
        try:
            return self._sessions.handed(key), None
        except SessionMemoryError as exc:
            self._memory_failed(exc, agent=key.agent)
            return set(), WHY_NO_MEMORY

    def _hand_over(
        self, key: SessionKey, rule_ids: list[str], answer: HookAnswer, *, before: set[str]
    ) -> bool:
        """Record that `rule_ids` go to the model in this session; whether that worked.

        Recorded now, so that a stop is said only once remembered; withdrawn if the
        answer is dropped (`before`: what the session had, which stays).
        """
        if self._sessions is None:
            return False
        try:
            self._sessions.add(key, rule_ids)
        except SessionMemoryError as exc:
            self._memory_failed(exc, agent=key.agent)
            return False
        added = [rule_id for rule_id in rule_ids if rule_id not in before]
        if added:
            answer.when_dropped(lambda: self._withdraw(key, added))
        if self._problems is not None:
            self._problems.clear(SESSION_MEMORY)
        return True

    def _memory_failed(self, exc: SessionMemoryError, *, agent: str) -> None:
        """A read or write of the session memory failed: logged once, noted for `status`."""
        self._log_failure_once(exc, agent=agent)
        if self._problems is not None:
            self._problems.note(SESSION_MEMORY, *session_memory_unavailable(str(exc), reopens=True))

    def _withdraw(self, key: SessionKey, rule_ids: list[str]) -> None:
        """The answer handing `rule_ids` over was read by nobody: hand them over next time."""
        if self._sessions is None:
            return
        try:
            self._sessions.withdraw(key, rule_ids)
        except SessionMemoryError as exc:
            self._memory_failed(exc, agent=key.agent)

    def _touch(self, key: SessionKey) -> None:
        if self._sessions is None:
            return
        try:
            self._sessions.touch(key)
        except SessionMemoryError as exc:
            self._memory_failed(exc, agent=key.agent)

    def _forget_session(self, key: SessionKey) -> None:
        """The agent emptied the model's context: hand everything over again from now on."""
        if self._sessions is None:
            return
        try:
            known = self._sessions.forget(key)
        except SessionMemoryError as exc:
            self._memory_failed(exc, agent=key.agent)
            return
        log.info("session_context_emptied", agent=key.agent, known=known)

    def _count_chars(self, key: SessionKey, chars: int) -> None:
        digest = key.digest
        self._chars[digest] = self._chars.get(digest, 0) + chars
        self._chars.move_to_end(digest)
        self._chars_total += chars
        while len(self._chars) > MAX_SESSIONS_COUNTED:
            _, dropped = self._chars.popitem(last=False)
            self._chars_total -= dropped

    def _record_when_settled(
        self, fire: FireRecord, answer: HookAnswer, key: SessionKey | None, *, test: bool
    ) -> None:
        """Log `fire` once the answer is sent; logged as handing nothing if it is dropped."""
        answer.when_sent(lambda: self._record(fire, key, test=test))
        answer.when_dropped(lambda: self._record(_dropped(fire), test=test))

    def _record(
        self, fire: FireRecord, key: SessionKey | None = None, *, test: bool = False
    ) -> None:
        """Log `fire`; unless it is a test fire, it is the user's activity: the last fire
        when it handed something over, and its characters count for `key`'s session."""
        self._fires.append(fire)
        compliance = self.prechecks.compliance
        if compliance is not None and not test:  # the record of whether rules are kept
            for rule_id in fire.full_ids:
                compliance.note(rule_id, fire.agent, "handed")
        if test:
            fire.test = True
        elif fire.delivery != "none":
            self._last_fire = fire
            if key is not None:
                self._count_chars(key, fire.chars)
        if self._on_fire is not None:
            try:
                self._on_fire(fire)
            except Exception as exc:  # noqa: BLE001 - a subscriber's trouble must not silence the hook
                self._log_failure_once(exc, during="on_fire")

    def _seen_recently(self, key: bytes, now: float) -> bool:
        recent = self._recent
        while recent:  # drop the expired ones, oldest first
            oldest, expires = next(iter(recent.items()))
            if expires > now:
                break
            del recent[oldest]
        return key in recent

    def _remember(self, key: bytes, now: float) -> None:
        self._recent[key] = now + self._config.hook.dedupe_seconds
        self._recent.move_to_end(key)
        while len(self._recent) > MAX_RECENT_EVENTS:
            self._recent.popitem(last=False)


def decode_event(agent: str, event: bytes) -> HookEvent | None:
    """What `agent`'s hook event is about; None for an unknown agent or an event we ignore.

    Never raises: the adapters answer an undecodable event with None.
    """
    adapter = AGENTS.get(agent)
    call = adapter.decode(event) if adapter is not None else None
    if isinstance(call, ToolCall | SessionStarted) and call.cwd and len(call.cwd) > MAX_CWD_CHARS:
        # No directory has such a path; walking up one (for its repository, its project
        # root, who may see what) costs its length squared: 60 KB of `/a/a/...` held the
        # event loop 2.8 s. Taken as the root: only rules for everywhere apply.
        call = msgspec.structs.replace(call, cwd="/")
    return call


def _dropped(fire: FireRecord) -> FireRecord:
    """What `fire` became when its answer was read by nobody: nothing handed over."""
    return msgspec.structs.replace(
        fire, mode="none", delivery="none", why=WHY_LATE, chars=0, full_ids=[]
    )


def _cut(text: str | None, limit: int) -> str | None:
    """`text` cut to `limit` characters for the log, saying so."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit} more characters)"


def _call_digest(call: ToolCall) -> bytes:
    """What makes a call the retry of another: the same command (or tool, or files), there."""
    return hashlib.blake2b(
        msgspec.json.encode((call.cwd, call.describe())), digest_size=16
    ).digest()


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _event_digest(agent: str, call: ToolCall) -> bytes:
    """What makes two deliveries the same event, in 16 bytes (a command runs to 1 MiB)."""
    fields = msgspec.json.encode(
        (agent, call.session, call.tool_use_id, call.cwd, call.describe(), call.ran)
    )
    return hashlib.blake2b(fields, digest_size=16).digest()
