"""GitHub Copilot CLI: `PreToolUse`, `PostToolUse`, `SessionStart` and `PreCompact` command
hooks in a version-1 hooks file.

Settings: a file of our own, `~/.copilot/hooks/mented.json` (user; under
`$COPILOT_HOME` when that is set), or `<repo>/.github/hooks/mented.json`.
Copilot CLI loads every `*.json` in both folders; a repository's only once the
folder is trusted, and in prompt mode (`-p`) only for an already trusted one.

Copilot CLI takes its own camelCase events (`preToolUse`, with `sessionId`,
`toolName` `bash`, `toolArgs`) and, since 1.0.x, Claude Code's PascalCase names,
for which it sends Claude Code's payload and reads Claude Code's answer. We use
the latter, so this agent is the shared `PreToolUse` adapter; checked with
Copilot CLI 1.0.102 driven against a mock model:

- stdin: `{"hook_event_name": "PreToolUse", "session_id": ..., "timestamp": ISO,
  "cwd": ..., "tool_name": "Bash", "tool_input": {"command": ..., "description": ...}}`;
- `hookSpecificOutput.permissionDecision` `deny` stops the command; the model
  reads "Denied by preToolUse hook: <reason>" as the tool's result, before it ran;
- `hookSpecificOutput.additionalContext` becomes a user message "Additional
  context from preToolUse hook:\\n<text>" after the tool's result: after it ran.

`PostToolUse` (the checks of what a command did, `mented.afterchecks`; checked with
1.0.102 against a mock model): stdin is Claude Code's payload with `"hook_event_name":
"PostToolUse"` and a `tool_result`; unlike `PreToolUse`, the answer read is Copilot's
own `PostToolUseHookOutput`: `{"additionalContext": TEXT}` at the top level, which the
model reads in the tool's result, after its output ("Tool "bash" succeeded. Additional
guidance from postToolUse hooks:\\n<text>"). A `hookSpecificOutput.additionalContext`
(Claude Code's answer) is dropped without a word.

An entry is flat (no matcher groups): `{"type": "command", "bash": ...,
"timeoutSec": 5, "matcher": "bash"}`; the matcher must match the whole tool name.

A hook that *fails* denies the call (1.0.102: a command exiting 1 gives
"Denied by preToolUse hook from <file> (hook errored)"); one that times out is
let through. The shim always exits 0, but a shell that cannot start it (the
interpreter was removed) exits 127: the installed command line exits 0 once the
shim or its interpreter is gone (`mented_client.hook_settings.guarded_command`;
installs before it ended in `|| true`).

`/clear` ends the session (a new one gets a new id); `PreCompact` (fired when a
compaction starts) empties the context of the session.

`SessionStart` (`pinned_rules`; checked with 1.0.102 against a mock model):
stdin is `{"hook_event_name": "SessionStart", "session_id": ..., "timestamp":
ISO, "cwd": ..., "source": "new", "initial_prompt": ...}`, `source` one of
`startup`, `new` (a prompt, `-p`, and `/new`) and `resume` (copilot-sdk
types.d.ts `SessionStartHookInput`). Unlike `PreToolUse`, the answer is Copilot's
own, `{"additionalContext": TEXT}` at the top level (`SessionStartHookOutput`);
a `hookSpecificOutput.additionalContext` is ignored here. The text becomes a
user message of its own, first in the conversation, before the prompt. It is not
kept in the session: a resumed session has only what its own `resume` start
answers (the first start's message is gone from the conversation), so on
`resume` every pinned rule is handed over again.

MCP servers: `mcpServers.NAME` in `~/.copilot/mcp-config.json` (under
`$COPILOT_HOME`), as `copilot mcp add NAME -- CMD ARGS` writes it (1.0.102):
`{"type": "local", "command": ..., "args": [...], "tools": ["*"]}`; `copilot mcp
list` lists it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from mented.agents.pretooluse import (
    EVENT_NAME,
    POST_TOOL_USE,
    SESSION_START,
    EveryCallAgent,
    McpSettings,
    SettingsLayout,
)

PRE_COMPACT = "PreCompact"
# The `SessionStart` sources Copilot CLI sends; on `resume` it has dropped what
# the session's first start answered.
SESSION_SOURCES = frozenset({"startup", "new", "resume"})
RESUME = "resume"
SHELL_TOOL_MATCHER = "bash"  # Copilot's own name for its shell tool (the payload says Bash)


_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, kw_only=True)
class CopilotAgent(EveryCallAgent):
    """Copilot CLI: the shared shape, in flat version-1 entries with `bash` and `timeoutSec`."""

    def render_session_context(self, text: str) -> bytes:
        """Copilot's own `SessionStart` answer: the context at the top level."""
        return _encoder.encode({"additionalContext": text})

    def render_after(self, text: str) -> bytes:
        """Copilot's own `PostToolUse` answer: the context at the top level (Claude Code's
        `hookSpecificOutput` never reaches the model there)."""
        return _encoder.encode({"additionalContext": text})

    def hook_entry(
        self,
        command: str,
        timeout_s: int,
        event: str = EVENT_NAME,
        condition: str | None = None,  # noqa: ARG002 - Copilot has no condition on a hook
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "type": "command",
            # A failing preToolUse hook denies the call: the command line exits 0 once
            # the shim is gone (mented_client.hook_settings.guarded_command).
            "bash": command,
            "timeoutSec": self.layout.timeout_value(timeout_s),
        }
        if event in (EVENT_NAME, POST_TOOL_USE):
            entry["matcher"] = SHELL_TOOL_MATCHER
        return entry

    @property
    def hook_events(self) -> list[str]:
        return [EVENT_NAME, SESSION_START, PRE_COMPACT, POST_TOOL_USE]


AGENT = CopilotAgent(
    pinned_rules=True,
    session_start_sources=SESSION_SOURCES,
    pinned_dropped_sources=frozenset({RESUME}),
    name="copilot-cli",
    title="GitHub Copilot CLI",
    config_dir_env="COPILOT_HOME",
    config_dir_name=".copilot",
    settings_name="hooks/mented.json",
    project_settings_file=".github/hooks/mented.json",
    context_emptied_events=frozenset({PRE_COMPACT}),
    post_tool_event=POST_TOOL_USE,
    install_note=("Copilot CLI loads a repository's .github/hooks only once you trust the folder."),
    layout=SettingsLayout(
        nested=False,
        command_key="bash",
        timeout_key="timeoutSec",
        top={"version": 1},
        hooks_only=True,
    ),
    mcp=McpSettings(
        file_name="mcp-config.json",
        entry={"type": "local", "tools": ["*"]},
        list_command="copilot mcp list",
    ),
)
