"""Cursor: `beforeShellExecution` and `beforeMCPExecution` command hooks in `hooks.json`.

Settings: `~/.cursor/hooks.json` (user) or `<project>/.cursor/hooks.json`,
`{"version": 1, "hooks": {"beforeShellExecution": [{"command": "..."}]}}`.
From Cursor's published hooks reference (cursor.com/docs/agent/hooks); Cursor is
a desktop editor with no installable command-line agent here, so nothing of
this was checked against Cursor itself.

stdin, as the reference gives it::

    {"hook_event_name": "beforeShellExecution", "conversation_id": "...",
     "generation_id": "...", "workspace_roots": ["/repo"],
     "command": "git commit -m x", "cwd": "/repo"}

    {"hook_event_name": "beforeMCPExecution", "conversation_id": "...", ...,
     "tool_name": "create_pull_request", "tool_input": "{\\"title\\": ...}",
     "url": "..." | "command": "..."}

The answer is `{"permission": "allow" | "deny" | "ask", "user_message": ...,
"agent_message": ...}`. There is no field for extra context: the only text the
agent's model reads is a deny's `agent_message`. So for Cursor the rules go by a
stop or not at all: the first matching command of a conversation is stopped
once (delivery `before`, the default), later ones and delivery `context` say
nothing (no `context_channel`), and when the conversation cannot be
remembered nothing is said either, so that no command is stopped twice.

The MCP event names the tool but not the server (only its `url` or
`command`): the call is `/TOOL`, which a `*/TOOL` pattern of the action table
matches and a `SERVER/TOOL` one does not.

MCP servers: `mcpServers.NAME` (`command`, `args`) in `~/.cursor/mcp.json`, from
Cursor's MCP documentation (cursor.com/docs/mcp); not checked against Cursor.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mented.agents.pretooluse import (
    ContextEmptied,
    EveryCallAgent,
    McpSettings,
    SettingsLayout,
    ToolCall,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

SHELL_EVENT = "beforeShellExecution"
MCP_EVENT = "beforeMCPExecution"


class _CursorEvent(msgspec.Struct):
    hook_event_name: str | None = None
    conversation_id: str | None = None
    generation_id: str | None = None
    workspace_roots: list[str] | None = None
    cwd: str | None = None
    command: str | None = None  # the shell command; for MCP, the server's command
    tool_name: str | None = None
    # A JSON string in the reference; some write it as an object. Unused: the
    # tool's name is all an action needs.
    tool_input: msgspec.Raw = msgspec.Raw(b"null")


_decoder = msgspec.json.Decoder(_CursorEvent)
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, kw_only=True)
class CursorAgent(EveryCallAgent):
    """Cursor's own event shape; a deny is its only channel to the model."""

    def decode(self, event: bytes) -> ToolCall | ContextEmptied | None:
        try:
            decoded = _decoder.decode(event)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        roots = decoded.workspace_roots or []
        cwd = decoded.cwd or (roots[0] if roots else None) or None
        session = decoded.conversation_id or None
        if decoded.hook_event_name == SHELL_EVENT:
            command = decoded.command
            if not command or not command.strip():
                return None
            return ToolCall(command=command, tool=SHELL_EVENT, cwd=cwd, session=session)
        if decoded.hook_event_name == MCP_EVENT and decoded.tool_name:
            return ToolCall(
                mcp_tool=f"/{decoded.tool_name}", tool=decoded.tool_name, cwd=cwd, session=session
            )
        return None

    def config_dir_override(self) -> Path | None:
        return None

    def render_deny(self, reason: str) -> bytes:
        return _encoder.encode(
            {
                "permission": "deny",
                "user_message": "mented handed the agent your rules for this command once.",
                "agent_message": reason,
            }
        )

    def sample_event(self, command: str, *, cwd: str, session: str) -> bytes:
        return _encoder.encode(
            {
                "hook_event_name": SHELL_EVENT,
                "conversation_id": session,
                "generation_id": f"{session}-1",
                "workspace_roots": [cwd],
                "command": command,
                "cwd": cwd,
            }
        )

    def tool_event(
        self,
        tool: str,
        files: Sequence[str] = (),  # noqa: ARG002 - no file edit reaches a hook of Cursor's
        *,
        cwd: str,
        session: str | None = None,
    ) -> bytes:
        """`beforeMCPExecution`: besides the shell, Cursor's hook hears only of MCP tools,
        named by the tool alone."""
        return _encoder.encode(
            {
                "hook_event_name": MCP_EVENT,
                "conversation_id": session,
                "workspace_roots": [cwd],
                "cwd": cwd,
                "tool_name": tool,
                "tool_input": "{}",
            }
        )

    # ------------------------------------------------------------------ installing

    def hook_entry(  # Cursor's entry has no time limit and no condition
        self,
        command: str,
        timeout_s: int,  # noqa: ARG002
        event: str = SHELL_EVENT,  # noqa: ARG002
        condition: str | None = None,  # noqa: ARG002
    ) -> dict[str, Any]:
        return {"command": command}

    @property
    def hook_events(self) -> list[str]:
        return [SHELL_EVENT, MCP_EVENT]


AGENT = CursorAgent(
    registered_for="every shell command and MCP tool call",
    name="cursor",
    title="Cursor",
    config_dir_env="",  # Cursor names no variable that moves ~/.cursor
    config_dir_name=".cursor",
    settings_name="hooks.json",
    project_settings_file=".cursor/hooks.json",
    event_name=SHELL_EVENT,
    context_channel=False,  # its hook answer has no context field
    layout=SettingsLayout(nested=False, timeout_key=None, top={"version": 1}, hooks_only=True),
    mcp=McpSettings(file_name="mcp.json"),
)
