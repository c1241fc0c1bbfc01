"""Augment's Auggie CLI: Claude Code's hook format, with `launch-process` as its shell tool.

Built from Augment's documents, not run against the `auggie` binary (it needs
Augment's hosted service): docs.augmentcode.com/cli/hooks ("Hooks", Auggie
1.x) and docs.augmentcode.com/cli/hooks-examples, as stored in December 2026.

Settings: `~/.augment/settings.json` (user; "changes made in /settings are
always saved to your user settings file, ~/.augment/settings.json"), or
`<workspace>/.augment/settings.local.json` ("personal project overrides — not
committed") before `<workspace>/.augment/settings.json` (shared). Claude Code's
layout, but `timeout` is in milliseconds (default 60000). The matcher is a
case-sensitive regular expression.

The documents say a hook's `command` is the "path to the shell script to
execute (must be a .sh file)". Our entry is the shim's command line, as for the
other agents; whether Auggie runs a command line that is not a `.sh` path was
not checked.

stdin: Claude Code's payload, `hook_event_name`, `tool_name`, `tool_input`
(the examples read `.tool_input.command` for `launch-process` and
`.tool_input.path` for `str-replace-editor`); the session is read from
`session_id`, else `conversation_id`. Edits: `str-replace-editor` and
`save-file`, whose file is `tool_input.path`. MCP tools (matched as `mcp:...`
in the documents, the name's layout not given) are not registered.

Answer: Claude Code's `hookSpecificOutput` ("only PreToolUse can block tool
execution"; exit 2 with stderr blocks too). As for Droid, a `PreToolUse`
`additionalContext` is taken to arrive after the tool ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from mented.agents.pretooluse import (
    EVENT_NAME,
    ContextEmptied,
    McpSettings,
    PreToolUseAgent,
    SessionStarted,
    SettingsLayout,
    ToolCall,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from mented.agents.pretooluse import InstalledEntry
    from mented.registration import HookNeeds

SHELL_TOOL = "launch-process"
EDIT_TOOLS = frozenset({"str-replace-editor", "save-file"})


class _Session(msgspec.Struct):
    session_id: str | None = None
    conversation_id: str | None = None


class _PathInput(msgspec.Struct):
    path: str | None = None


_session = msgspec.json.Decoder(_Session)
_path_input = msgspec.json.Decoder(_PathInput)


@dataclass(frozen=True, kw_only=True)
class AuggieAgent(PreToolUseAgent):
    """Auggie: the shared shape; edits name their file in `path`, no MCP tools."""

    def decode(self, event: bytes) -> ToolCall | SessionStarted | ContextEmptied | None:
        call = super().decode(event)
        if isinstance(call, ToolCall) and call.session is None:
            try:
                session = _session.decode(event).conversation_id
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                return call
            if session:
                return ToolCall(
                    command=call.command,
                    mcp_tool=call.mcp_tool,
                    edited=call.edited,
                    tool=call.tool,
                    cwd=call.cwd,
                    session=session,
                    tool_use_id=call.tool_use_id,
                    ran=call.ran,
                )
        return call

    def _tool_call(self, tool: str, tool_input: msgspec.Raw) -> ToolCall | None:
        if tool in EDIT_TOOLS:
            path = _path_input.decode(tool_input).path
            return ToolCall(edited=(path,)) if path else None
        if tool in self.shell_tools:
            return super()._tool_call(tool, tool_input)
        return None  # MCP tools: their names' layout is not documented

    def tool_input(self, tool: str, files: Sequence[str]) -> dict[str, object]:  # noqa: ARG002
        return {"path": files[0]} if files else {}

    def hook_entry(
        self, command: str, timeout_s: int, event: str = EVENT_NAME, condition: str | None = None
    ) -> dict[str, Any]:
        """The shared entry, its `timeout` in milliseconds."""
        entry = super().hook_entry(command, timeout_s, event, condition)
        entry["timeout"] = self.layout.timeout_value(timeout_s)
        return entry

    def other_tools(self, needs: HookNeeds) -> tuple[list[str], list[str]]:
        return (self.file_edit_tools() if needs.edits else []), []

    def registration_gaps(self, installed: Iterable[InstalledEntry], needs: HookNeeds) -> list[str]:
        """The shared check, without MCP tools (never registered here)."""
        return [gap for gap in super().registration_gaps(installed, needs) if "MCP" not in gap]


AGENT = AuggieAgent(
    name="augment-auggie",
    title="Augment Auggie",
    config_dir_env="",  # no variable documented that moves ~/.augment
    config_dir_name=".augment",
    settings_name="settings.json",
    project_settings_file=".augment/settings.json",
    project_local_file=".augment/settings.local.json",
    shell_tools=frozenset({SHELL_TOOL}),
    edit_tools=EDIT_TOOLS,
    layout=SettingsLayout(timeout_per_second=1000),
    mcp=McpSettings(
        how="none",
        file_name="settings.json",
        note="Auggie's MCP settings were not checked against Auggie",
    ),
)
