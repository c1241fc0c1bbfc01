"""pi (`@mariozechner/pi-coding-agent`): an extension of mented's, in pi's own process.

pi has no process hook; it loads TypeScript extensions (`~/.pi/agent/extensions/*.ts`,
under `$PI_CODING_AGENT_DIR` when that is set, or `<project>/.pi/extensions/*.ts`).
`mentectl hooks install pi` writes mented's, `mented_client/pi_extension.ts`, which
asks the daemon over the socket itself (no process per tool call) and sends these
events, built from pi's extension API (checked with pi 0.73.1: its
docs/extensions.md and dist/core/extensions/runner.js)::

    {"event": "tool_call", "session_id": "...", "cwd": "/repo", "tool_name": "bash",
     "tool_call_id": "...", "input": {"command": "git commit -m x"}}
    {"event": "tool_result", ...the same fields, after the tool ran...}
    {"event": "tool_call", ..., "tool_name": "edit", "input": {"path": "src/a.py"}}
    {"event": "before_agent_start", "session_id": "...", "cwd": "/repo"}
    {"event": "session_compact", "session_id": "..."}

The extension sends only pi's shell tool (`bash`) and its file writes (`edit`,
`write`: the path alone, never a write's content); pi has no MCP of its own
("No MCP", its README), so there is no MCP tool to name.

What it reads back (the bytes of the answer frame, empty for silence):

- `{"block": true, "reason": R}` to a `tool_call`: the extension returns it from
  pi's `tool_call` handler, and pi gives the model R as the tool's error result
  (`createErrorToolResult`, pi-agent-core agent-loop.js): a stop, before it ran.
- `{"additionalContext": T}` to a `tool_result`: appended to the tool's result as
  a text part, after it ran. pi's `tool_call` cannot add context (its return value
  only blocks), so, as for Gemini CLI, before a tool only a stop is said.
- `{"additionalContext": T}` to a `before_agent_start` (each prompt, before the
  agent loop): the pinned rules, as a message the extension returns there
  (`customType` "mented"), which pi keeps in the session and sends to the model,
  so a resumed session still has it. `session_compact` empties the context: the
  rules are handed over again after it.

Never an approval: there is no answer that lets a tool run that would not have.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import msgspec

from mented import paths
from mented.agents.in_process import ExtensionAgent, PluginAnswers, PluginEvent
from mented.agents.pretooluse import McpSettings, ToolCall

if TYPE_CHECKING:
    from collections.abc import Sequence

TOOL_CALL = "tool_call"
TOOL_RESULT = "tool_result"
BEFORE_AGENT_START = "before_agent_start"
SESSION_COMPACT = "session_compact"
SHELL_TOOL = "bash"
EDIT_TOOLS = frozenset({"edit", "write"})
# The version of the shapes above the extension speaks, in a line of its own.
EXTENSION_PROTOCOL = 1
_VERSION_LINE = re.compile(r"^export const MENTED_PROTOCOL_VERSION = (\d+);$", re.MULTILINE)


class _PiInput(msgspec.Struct):
    command: str | None = None
    path: str | None = None


class _PiEvent(PluginEvent):
    tool: str | None = msgspec.field(default=None, name="tool_name")
    call_id: str | None = msgspec.field(default=None, name="tool_call_id")
    input: _PiInput | None = None


_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, kw_only=True)
class PiAgent(ExtensionAgent):
    """pi: its extension's events, a stop before a tool, context after it."""

    event_decoder: ClassVar[msgspec.json.Decoder[_PiEvent]] = msgspec.json.Decoder(_PiEvent)

    def config_dir(self) -> Path:
        """`$PI_CODING_AGENT_DIR`, else `~/.pi/agent` (pi's `getAgentDir`, config.js)."""
        override = self.config_dir_override()
        return override or paths.home() / ".pi" / "agent"

    def call_of(self, event: _PiEvent, cwd: str | None) -> ToolCall | None:  # noqa: ARG002 - pi's commands run in the session's directory
        if event.input is None:
            return None
        command = event.input.command if event.tool in self.shell_tools else None
        path = event.input.path if event.tool in self.edit_tools else None
        if not (command and command.strip()) and not path:
            return None
        return ToolCall(command=command or "", edited=(path,) if path else ())

    def sample_event(self, command: str, *, cwd: str, session: str) -> bytes:
        return pi_event(TOOL_CALL, session=session, cwd=cwd, command=command)

    def tool_event(
        self, tool: str, files: Sequence[str] = (), *, cwd: str, session: str | None = None
    ) -> bytes:
        path = files[0] if files else None
        return pi_event(TOOL_CALL, session=session, cwd=cwd, path=path, tool=tool)


def pi_event(  # noqa: PLR0913 - the fields of an event, all optional but its name
    event: str,
    *,
    session: str | None,
    cwd: str | None,
    command: str | None = None,
    path: str | None = None,
    tool_call_id: str = "call_1",
    tool: str | None = None,
) -> bytes:
    """An event as the extension sends it (for `doctor`, `explain`, the benchmark and the
    tests): a call of `tool`, else of bash for a command and of edit for a path."""
    document: dict[str, object] = {"event": event, "session_id": session, "cwd": cwd}
    if command is not None or path is not None:
        document["tool_name"] = tool or (SHELL_TOOL if command is not None else "edit")
        document["tool_call_id"] = tool_call_id
        document["input"] = {"command": command} if command is not None else {"path": path}
    return _encoder.encode({key: value for key, value in document.items() if value is not None})


AGENT = PiAgent(
    name="pi",
    title="pi",
    config_dir_env="PI_CODING_AGENT_DIR",
    config_dir_name=".pi/agent",
    settings_name="extensions/mented.ts",
    project_settings_file=".pi/extensions/mented.ts",
    shell_tools=frozenset({SHELL_TOOL}),
    edit_tools=EDIT_TOOLS,
    event_name=TOOL_CALL,
    after_event=TOOL_RESULT,
    post_tool_event=TOOL_RESULT,
    context_emptied_events=frozenset({SESSION_COMPACT}),
    pinned_rules=True,
    session_start_event=BEFORE_AGENT_START,
    answers=PluginAnswers(
        stop="reason",
        context="additionalContext",
        session="additionalContext",
        stop_marks={"block": True},
    ),
    plugin_protocol=EXTENSION_PROTOCOL,
    protocol_line=_VERSION_LINE,
    extension_resource="pi_extension.ts",
    extension_name="mented.ts",
    extensions_dir="extensions",
    project_extensions_dir=".pi/extensions",
    mcp=McpSettings(how="none", file_name="", note="pi has no MCP support of its own"),
)
# The text of an answer of ours to the extension: a stop's reason or the context.
text_of_answer = AGENT.answers.text_of
