"""A hook request end to end: agent event -> shell command -> actions -> rules -> stdout bytes.

`HookHandler.handle` runs on the daemon's trio thread for every shell command
an agent runs, so it does only in-memory work and store reads (microseconds),
and it never raises: any failure is silence (empty stdout), because a hook
must never get in the way of the command.

What the model reads is one text with a section per action the command
performs, rules newest first, each with the short handle that `mentectl rule
show` / `supersede` accept. It is capped (`[hook] max_context_chars`); whole
rules are left out, oldest first, and the text says how many.

Delivery (`[delivery]` in the config file, per action):

- `context` (default): the text rides along as extra context. Claude Code
  shows it to the model next to the tool result, i.e. after the command ran.
- `gate`: the first matching command of a session -- and the first one after
  that action's rules changed -- is denied with the rules as the reason, and the
  model runs it again once it follows them; later ones get `context`. An
  action counts as shown only once an answer carrying its rules went out. The
  per-session memory of this is bounded and expires (`gate_session_ttl_s`
  after the last answer for it).
  An event without a session id always gets `context`: without one, a deny
  could repeat forever.

The same event delivered twice within `[hook] dedupe_seconds` (a hook
registered both in settings and in a plugin) is answered once. Events are
remembered by a 16-byte digest, not by their command (up to the shim's 1 MiB).

Every command that names an action is recorded in a bounded in-memory log
(`mentectl log`): mode `context` or `gate` when rules were handed over, `none`
when no rule was visible to that agent in that directory.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from mented.agents import AGENTS
from mented.log import log
from mented.memory import short_handle
from mented.protocol import FireRecord

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mented.actions import ActionTable
    from mented.agents import ShellCall
    from mented.config import Config
    from mented.matcher import Matcher
    from mented.memory import Memory
    from mented.store import Store

FIRE_LOG_SIZE = 500
MAX_GATE_ENTRIES = 4096  # (agent, session, action) triples remembered for gate mode
MAX_RECENT_EVENTS = 1024  # events remembered for de-duplication
MAX_LOGGED_COMMAND = 1000  # characters of a command kept in the fire log

RULE_ORDER = "Rules are listed newest first; when two rules conflict, the newest one wins."
CONTEXT_INTRO = f"The user's rules for this command, from mented. {RULE_ORDER}"
GATE_INTRO = (
    "mented stopped this command once, so that the user's rules reach you before it runs. "
    f"Run it again once it follows them. {RULE_ORDER}"
)
FOOTER = (
    "The handle in brackets names a rule; when the user changes their mind, the mented "
    'MCP tool `supersede_rule` (or `mentectl rule supersede HANDLE "new text"`) replaces it.'
)


@dataclass(slots=True)
class _GateState:
    rule_ids: tuple[str, ...]  # the rules the deny showed; another set means deny again
    expires: float


class HookHandler:
    """Answers `hook` requests and keeps the log of recent fires."""

    def __init__(self, store: Store, matcher: Matcher, config: Config) -> None:
        self._store = store
        self._matcher = matcher
        self._config = config
        self._fires: deque[FireRecord] = deque(maxlen=FIRE_LOG_SIZE)
        self._last_fire: FireRecord | None = None
        self._gate: OrderedDict[tuple[str, str, str], _GateState] = OrderedDict()
        self._recent: OrderedDict[bytes, float] = OrderedDict()  # event digest -> expiry
        self._failures_logged: set[str] = set()

    def reconfigure(self, matcher: Matcher, config: Config) -> None:
        """Use a new action table and settings from the next request on."""
        self._matcher = matcher
        self._config = config

    def handle(self, agent: str, event: bytes) -> bytes:
        """The exact stdout bytes for `agent`'s hook `event`; empty for silence. Never raises."""
        try:
            return self._handle(agent, event)
        except Exception as exc:  # noqa: BLE001 - the hook's contract: failure is silence
            kind = type(exc).__name__
            if kind not in self._failures_logged:  # once per kind: this runs per command
                self._failures_logged.add(kind)
                log.warning("hook_failed", agent=agent, error=repr(exc), exc_info=True)
            return b""

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

    # ---------------------------------------------------------------- internals

    def _handle(self, agent: str, event: bytes) -> bytes:
        started = time.perf_counter()
        adapter = AGENTS.get(agent)
        if adapter is None:
            return b""
        call = adapter.decode(event)
        if call is None:
            return b""
        actions = self._matcher.actions_in(call.command)
        if not actions:
            return b""
        now = time.monotonic()
        event_key = _event_digest(agent, call)
        if self._seen_recently(event_key, now):
            return b""
        hook = self._config.hook
        sections: list[tuple[str, list[Memory]]] = []
        for action in actions:
            rules = self._store.recall_for_action(action, agent=agent, cwd=call.cwd, k=hook.k)
            if rules:
                sections.append((action, rules))
        out = b""
        mode = "none"
        if sections:
            gate = any(
                self._gate_due(agent, call.session, action, rules, now)
                for action, rules in sections
            )
            text = render_rules(
                sections,
                intro=GATE_INTRO if gate else CONTEXT_INTRO,
                max_chars=hook.max_context_chars,
                table=self._matcher.table,
            )
            if text:
                mode = "gate" if gate else "context"
                out = adapter.render_deny(text) if gate else adapter.render_context(text)
                self._remember(event_key, now)
                # Only now have the rules gone out. Every gated action is marked,
                # even when another one decided the deny: the answer shows all of them.
                for action, rules in sections:
                    self._gate_shown(agent, call.session, action, rules, now)
        self._record(
            FireRecord(
                time=time.time(),
                agent=agent,
                session=call.session,
                cwd=call.cwd,
                command=call.command[:MAX_LOGGED_COMMAND],
                actions=list(actions),
                rule_ids=[rule.id for _, rules in sections for rule in rules],
                mode=mode,
                latency_us=(time.perf_counter() - started) * 1e6,
            )
        )
        return out

    def _record(self, fire: FireRecord) -> None:
        self._fires.append(fire)
        if fire.mode != "none":
            self._last_fire = fire

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

    def _gated(self, session: str | None, action: str) -> bool:
        # Without a session a deny could repeat forever: such events get context.
        return session is not None and self._config.delivery.get(action, "context") == "gate"

    def _gate_due(
        self, agent: str, session: str | None, action: str, rules: Sequence[Memory], now: float
    ) -> bool:
        """Whether `action` must be denied now: its rules were not shown in this session yet."""
        if not self._gated(session, action):
            return False
        state = self._gate.get((agent, session or "", action))
        return state is None or state.expires <= now or state.rule_ids != tuple(r.id for r in rules)

    def _gate_shown(
        self, agent: str, session: str | None, action: str, rules: Sequence[Memory], now: float
    ) -> None:
        """Remember that an answer carrying `action`'s rules went out in this session."""
        if not self._gated(session, action):
            return
        key = (agent, session or "", action)
        rule_ids = tuple(rule.id for rule in rules)
        self._gate[key] = _GateState(
            rule_ids=rule_ids, expires=now + self._config.hook.gate_session_ttl_s
        )
        self._gate.move_to_end(key)
        while self._gate:
            oldest_key, oldest = next(iter(self._gate.items()))
            if len(self._gate) <= MAX_GATE_ENTRIES and oldest.expires > now:
                break
            del self._gate[oldest_key]


# ------------------------------------------------------------------- rendering


def _event_digest(agent: str, call: ShellCall) -> bytes:
    """What makes two deliveries the same event, in 16 bytes (a command runs to 1 MiB)."""
    fields = msgspec.json.encode((agent, call.session, call.tool_use_id, call.cwd, call.command))
    return hashlib.blake2b(fields, digest_size=16).digest()


def describe_action(action: str, phrase: str, description: str | None = None) -> str:
    """An action in words, as the model reads it.

    `pr-create` -> "the pull request you are about to open (pr-create: open a pull ...)".
    """
    about = f"{action}: {description}" if description else action
    return f"{phrase} ({about})"


def render_rules(
    sections: Sequence[tuple[str, Sequence[Memory]]],
    *,
    intro: str,
    max_chars: int,
    table: ActionTable,
) -> str:
    """The text handed to the model: `intro`, one section per action, the footer.

    Within `max_chars`: whole rules are left out, the oldest of the longest
    section first, and each section says how many it lost. Empty when not even
    the headings fit.
    """
    shown = [len(rules) for _, rules in sections]
    while True:
        text = _compose(sections, shown, intro, max_chars, table)
        if len(text) <= max_chars:
            return text
        longest = max(range(len(shown)), key=shown.__getitem__)
        if shown[longest] == 0:
            return ""
        shown[longest] -= 1


def _compose(
    sections: Sequence[tuple[str, Sequence[Memory]]],
    shown: Sequence[int],
    intro: str,
    max_chars: int,
    table: ActionTable,
) -> str:
    parts = [intro]
    descriptions = table.descriptions()
    for (action, rules), count in zip(sections, shown, strict=True):
        heading = describe_action(action, table.phrase_of(action), descriptions.get(action))
        lines = [f"Rules for {heading}:"]
        for rule in rules[:count]:
            content = rule.content.strip().replace("\n", "\n  ")
            lines.append(f"- [{short_handle(rule.id)}] {content}")
        left_out = len(rules) - count
        if left_out:
            noun = "rule" if left_out == 1 else "rules"
            lines.append(
                f"({left_out} older {noun} for `{action}` left out to stay within "
                f"{max_chars} characters; `mentectl rule list --action {action}` shows them.)"
            )
        parts.append("\n".join(lines))
    parts.append(FOOTER)
    return "\n\n".join(parts)
