"""Cline CLI 3.x: an executable hook file named after the event, context only.

Built from Cline's source at commit 21cb8d25 (2026-08-22; `apps/cli` 3.0.56):
`sdk/packages/core/src/hooks/hook-file-{config,hooks}.ts`, `subprocess-runner.ts`,
`sdk/packages/shared/src/storage/paths.ts`, `sdk/packages/agents/src/agent-runtime.ts`,
`sdk/packages/core/src/extensions/tools/{constants,schemas}.ts` and
`.clinerules/hooks/README.md`; not run against the `cline` binary.

There is no settings file: a hook is an executable file named after its event
(`PreToolUse`, optionally with an extension such as `.sh`) in
`~/Documents/Cline/Hooks/` (global; `~/.cline/hooks/` is searched too) or a
workspace's `.clinerules/hooks/` (or `.cline/hooks/`). Cline runs it with the
interpreter its `#!` line names. mented writes one such file (mented_client.agents.hook_file)
that runs the shim's command line exactly as the other agents' hooks do.

stdin (`createPayloadBase` and `runToolCallStart`)::

    {"clineVersion": "...", "timestamp": "...", "taskId": "...",
     "sessionContext": {"rootSessionId": "..."}, "workspaceRoots": ["/repo"],
     "userId": "...", "hookName": "tool_call", "iteration": 1,
     "tool_call": {"id": "...", "name": "run_commands", "input": {"commands": ["git commit -m x"]}},
     "preToolUse": {"toolName": "run_commands", "parameters": {...}}}

The shell tool is `run_commands`, whose input is a list of command lines (or
one of the other forms its schema accepts: `{"command": ...}`, a string, ...);
they are read as one script, a line each. `editor` takes `path`; `apply_patch`
takes the patch in `input`.

The answer is one JSON object on stdout (`parseHookControl`): `cancel`,
`contextModification` (or `context`), `errorMessage`. **`cancel: true` ends the
whole run** (`applyStopControl`), not the one tool call: so mented never sends
it (`can_stop` false, and `render_deny` says context too). The context is
"flushed as one user message after the tool results" (agent-runtime.ts), i.e.
the model reads it after the command ran: delivery is context, after the fact.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mented import paths
from mented.agents.pretooluse import (
    ContextEmptied,
    EveryCallAgent,
    McpSettings,
    SessionStarted,
    ToolCall,
    patch_of,
    patched_files,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

PRE_TOOL_USE = "PreToolUse"
TOOL_CALL = "tool_call"  # the payload's `hookName` for PreToolUse
SHELL_TOOL = "run_commands"
EDIT_TOOL = "editor"
PATCH_TOOL = "apply_patch"


class _Call(msgspec.Struct):
    name: str | None = None
    input: msgspec.Raw = msgspec.Raw(b"null")


class _ClineEvent(msgspec.Struct):
    hookName: str | None = None  # noqa: N815 - the wire name
    taskId: str | None = None  # noqa: N815
    workspaceRoots: list[str] | None = None  # noqa: N815
    tool_call: _Call | None = None


class _PathInput(msgspec.Struct):
    path: str | None = None
    input: str | None = None  # apply_patch


_decoder = msgspec.json.Decoder(_ClineEvent)
_path_input = msgspec.json.Decoder(_PathInput)
_encoder = msgspec.json.Encoder()


def shell_script(tool_input: object) -> str:
    """The command lines of a `run_commands` input, one a line ("" when none)."""
    if isinstance(tool_input, dict):
        tool_input = tool_input.get("commands", tool_input.get("command", tool_input.get("cmd")))
    entries = tool_input if isinstance(tool_input, list) else [tool_input]
    lines = []
    for entry in entries:
        if isinstance(entry, str):
            lines.append(entry)
        elif isinstance(entry, dict) and isinstance(entry.get("command"), str):
            args = entry.get("args")
            words = [str(arg) for arg in args] if isinstance(args, list) else []
            lines.append(shlex.join([entry["command"], *words]))
    return "\n".join(line for line in lines if line.strip())


@dataclass(frozen=True, kw_only=True)
class ClineAgent(EveryCallAgent):
    """Cline: its own event, a hook file for every tool call, context and never a cancel."""

    def decode(self, event: bytes) -> ToolCall | SessionStarted | ContextEmptied | None:
        try:
            decoded = _decoder.decode(event)
            call = decoded.tool_call
            if decoded.hookName != TOOL_CALL or call is None or not call.name:
                return None
            found = self._cline_call(call.name, call.input)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        if found is None:
            return None
        roots = decoded.workspaceRoots or []
        return ToolCall(
            command=found.command,
            edited=found.edited,
            tool=call.name,
            cwd=roots[0] if roots and roots[0] else None,
            session=decoded.taskId or None,
        )

    @staticmethod
    def _cline_call(tool: str, tool_input: msgspec.Raw) -> ToolCall | None:
        if tool == SHELL_TOOL:
            script = shell_script(msgspec.json.decode(tool_input))
            return ToolCall(command=script) if script else None
        if tool == EDIT_TOOL:
            path = _path_input.decode(tool_input).path
            return ToolCall(edited=(path,)) if path else None
        if tool == PATCH_TOOL:
            files = patched_files(_path_input.decode(tool_input).input or "")
            return ToolCall(edited=files) if files else None
        return None

    def render_context(self, text: str) -> bytes:
        return _encoder.encode({"contextModification": text})

    def render_after(self, text: str) -> bytes:
        return self.render_context(text)

    def render_deny(self, reason: str) -> bytes:
        """Context, never `cancel`: a cancel ends the user's whole task (`can_stop` is
        false, so this is not asked for; were it, the model still only reads the text)."""
        return self.render_context(reason)

    def sample_event(self, command: str, *, cwd: str, session: str) -> bytes:
        return _encoder.encode(
            {
                "clineVersion": "",
                "timestamp": "",
                "taskId": session,
                "sessionContext": {"rootSessionId": session},
                "workspaceRoots": [cwd],
                "userId": "",
                "hookName": TOOL_CALL,
                "iteration": 1,
                "tool_call": {
                    "id": f"call_{session}",
                    "name": SHELL_TOOL,
                    "input": {"commands": [command]},
                },
                "preToolUse": {"toolName": SHELL_TOOL, "parameters": {"commands": command}},
            }
        )

    def tool_event(
        self, tool: str, files: Sequence[str] = (), *, cwd: str, session: str | None = None
    ) -> bytes:
        if tool == PATCH_TOOL:
            tool_input: dict[str, object] = {"input": patch_of(files)}
        else:
            tool_input = {"path": files[0]} if files else {}
        return _encoder.encode(
            {
                "taskId": session or "",
                "workspaceRoots": [cwd],
                "hookName": TOOL_CALL,
                "tool_call": {"id": "call_1", "name": tool, "input": tool_input},
            }
        )

    def config_dir(self) -> Path:
        return paths.home() / "Documents" / "Cline"

    def hook_entry(  # the hook file runs the command line itself: nothing else to say
        self,
        command: str,
        timeout_s: int,  # noqa: ARG002 - Cline's own limit (120 s) applies
        event: str = PRE_TOOL_USE,  # noqa: ARG002
        condition: str | None = None,  # noqa: ARG002
    ) -> dict[str, Any]:
        return {"command": command}

    @property
    def hook_events(self) -> list[str]:
        return [PRE_TOOL_USE]


AGENT = ClineAgent(
    registered_for="every tool call (Cline runs a hook file for each; mented answers shell "
    "commands and file edits)",
    name="cline-cli",
    title="Cline CLI",
    config_dir_env="",
    config_dir_name="Documents/Cline",
    settings_name="Hooks/PreToolUse",
    project_settings_file=".clinerules/hooks/PreToolUse",
    shell_tools=frozenset({SHELL_TOOL}),
    edit_tools=frozenset({EDIT_TOOL}),
    patch_tools=frozenset({PATCH_TOOL}),
    no_project_local_file=(
        "Cline has no uncommitted hooks folder: this file names this machine's interpreter "
        "and socket, so keep it out of git (add .clinerules/hooks/PreToolUse to "
        ".git/info/exclude), or install for your user instead (`mentectl hooks install "
        "cline-cli`)."
    ),
    event_name=PRE_TOOL_USE,
    can_stop=False,
    hook_file=True,
    mcp=McpSettings(
        how="none",
        file_name="cline_mcp_settings.json",
        note="Cline's MCP settings were not checked against Cline",
    ),
)
