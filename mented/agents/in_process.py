"""An agent that runs mented in its own process: a plugin of ours, not a hook entry.

Some agents have no process hook but load plugins (opencode's and Kilo's
JavaScript plugins, pi's TypeScript extensions): for them `mentectl hooks
install` writes a file that mented ships into the agent's plugin folder, and
that file speaks mented's protocol on the socket itself. What such a plugin
sends and reads has one shape, whatever the agent, and is described here
(`InProcessAgent`); each agent's module names only its own event fields and
answer members (`PluginAnswers`), and where its file goes:

- a tool call comes as two events, one before the tool runs (`event_name`) and one
  after it ran (`after_event`), each with the session, the working directory, the
  tool's name and call id, and the tool's arguments as the agent has them;
- a session start (`session_start_event`) asks for the pinned rules, which the
  plugin puts where the agent keeps them; a compaction (`context_emptied_events`)
  means the model's context was emptied;
- the answer is one JSON object the plugin acts on: a stop (the plugin makes it
  the tool's error, before it ran), or text it adds to the tool's result after it
  ran (context before a tool reaches no model: `takes_context`), or the pinned
  rules; empty for nothing to do, never an approval;
- the plugin says which version of these shapes it speaks (`plugin_protocol`, in
  a line of its file), which `mentectl doctor` compares with the daemon's.

How mentectl installs the file differs: opencode's is package data of
`mented.agents`, pi's of `mented_client` (`ExtensionAgent`); both are installed
by `mented_client.agents.in_process`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec

from mented.agents.pretooluse import ContextEmptied, PreToolUseAgent, SessionStarted, ToolCall

if TYPE_CHECKING:
    from collections.abc import Mapping

# A plugin's session start carries no source of its own: its pinned rules go with
# the session's first request, as a new session's do.
SESSION_SOURCE = "startup"
# msgspec gives up on very deep nesting with RecursionError, not DecodeError.
_UNREADABLE = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)
_encoder = msgspec.json.Encoder()


class PluginEvent(msgspec.Struct):
    """The fields of a plugin's event every in-process agent reads, by the names used
    here; an agent's module subclasses it with its own names (`msgspec.field(name=...)`)
    and its tool's arguments."""

    event: str | None = None
    session: str | None = msgspec.field(default=None, name="session_id")
    cwd: str | None = None
    tool: str | None = None
    call_id: str | None = None


def _same(value: object, mark: object) -> bool:
    """`value` is `mark`, of its type (`true`, not `1`)."""
    return type(value) is type(mark) and value == mark


@dataclass(frozen=True, kw_only=True)
class PluginAnswers:
    """The members of the answer object a plugin acts on.

    Attributes:
        stop: the member whose text stops the call (the tool's error).
        context: the member whose text is added to a tool's result after it ran.
        session: the member whose text goes with every request of the session
            (the pinned rules).
        stop_marks: the members a stop has besides its text (pi's `"block": true`),
            without which the plugin does not stop.
    """

    stop: str
    context: str
    session: str
    stop_marks: Mapping[str, object] = field(default_factory=dict)

    def text_of(self, answer: bytes) -> str | None:
        """The text of an answer of ours: a stop's, or else the context; None when neither."""
        try:
            document = msgspec.json.decode(answer)
        except _UNREADABLE:
            return None
        if not isinstance(document, dict):
            return None
        marked = all(_same(document.get(name), mark) for name, mark in self.stop_marks.items())
        if marked and self.stop in document:
            text = document[self.stop]
        else:
            text = document.get(self.context, document.get(self.session))
        return text if isinstance(text, str) else None


@dataclass(frozen=True, kw_only=True)
class InProcessAgent(PreToolUseAgent, ABC):
    """An agent served by a plugin of mented's in its own process (module docstring).

    Attributes:
        answers: the members of the answer its plugin acts on.
        session_start_event: the event of a session start, which asks for the pinned rules.
        plugin_protocol: the version of the event and answer shapes the daemon reads.
        protocol_line: the line of the plugin file that says the version it speaks.
    """

    answers: PluginAnswers
    session_start_event: str
    plugin_protocol: int
    protocol_line: re.Pattern[str]
    # The module's decoder of its events, into a `PluginEvent`.
    event_decoder: ClassVar[msgspec.json.Decoder[Any]]  # of a `PluginEvent`

    # ------------------------------------------------------------ event and output

    def decode(self, event: bytes) -> ToolCall | SessionStarted | ContextEmptied | None:
        try:
            decoded = self.event_decoder.decode(event)
        except _UNREADABLE:
            return None
        name = decoded.event
        session = decoded.session or None
        cwd = decoded.cwd or None
        if name == self.session_start_event:
            return SessionStarted(
                session=session,
                cwd=cwd,
                source=SESSION_SOURCE,
                pinned_dropped=SESSION_SOURCE in self.pinned_dropped_sources,
            )
        if name in self.context_emptied_events:
            return ContextEmptied(session=session) if session else None
        if name not in (self.event_name, self.after_event) or not decoded.tool:
            return None
        try:
            call = self.call_of(decoded, cwd)
        except _UNREADABLE:
            return None
        if call is None:
            return None
        return call.placed(
            tool=decoded.tool,
            cwd=call.cwd or cwd,
            session=session,
            tool_use_id=decoded.call_id or None,
            ran=name == self.after_event,
        )

    @abstractmethod
    def call_of(self, event: Any, cwd: str | None) -> ToolCall | None:  # noqa: ANN401 - the module's event
        """What the tool of `event` does (its command, files or MCP tool, and the
        directory a command runs in when it names one); None when it is nothing we know.

        Raises:
            msgspec.DecodeError, msgspec.ValidationError: its arguments are not the tool's.
        """

    def takes_context(self, call: ToolCall) -> bool:
        """Only text added to a tool's result after it ran reaches the model."""
        return call.ran

    def render_deny(self, reason: str) -> bytes:
        return _encoder.encode({**self.answers.stop_marks, self.answers.stop: reason})

    def render_context(self, text: str) -> bytes:
        return _encoder.encode({self.answers.context: text})

    def render_after(self, text: str) -> bytes:
        return self.render_context(text)

    def render_session_context(self, text: str) -> bytes:
        return _encoder.encode({self.answers.session: text})

    def answer_text(self, answer: bytes) -> str | None:
        return self.answers.text_of(answer)

    def with_notice(self, answer: bytes, notice: str) -> bytes | None:  # noqa: ARG002
        """None: the plugin shows nothing to the user."""
        return None

    # ------------------------------------------------------------------ installing

    def protocol_of(self, text: str) -> int | None:
        """The protocol version a plugin file says it speaks; None when it says none."""
        match = self.protocol_line.search(text)
        return int(match.group(1)) if match else None

    @property
    def hook_events(self) -> list[str]:
        """None: there is no hook entry, and no shim command line to write or test-fire."""
        return []


@dataclass(frozen=True, kw_only=True)
class ExtensionAgent(InProcessAgent):
    """An agent whose plugin file is package data of `mented_client` (pi's extension).

    Attributes:
        extension_resource: the shipped file, in the `mented_client` package.
        extension_name: its name in the agent's plugin folder.
        extensions_dir: the user's plugin folder, inside the agent's config directory.
        project_extensions_dir: a project's plugin folder, inside the project.
    """

    extension_resource: str
    extension_name: str
    extensions_dir: str
    project_extensions_dir: str

    def settings_path(self) -> Path:
        """The user-level plugin file (where `hooks install` writes ours)."""
        return self.config_dir() / self.extensions_dir / self.extension_name

    def project_settings_path(self, project: Path) -> Path:
        return project / self.project_extensions_dir / self.extension_name

    def project_install_paths(self, project: Path) -> list[Path]:
        return [self.project_settings_path(project)]
