"""Gemini CLI: `BeforeTool` and `AfterTool` command hooks in `settings.json`.

Settings: `~/.gemini/settings.json` (user; `$GEMINI_CLI_HOME/.gemini/settings.json`
when that is set) or `<project>/.gemini/settings.json`. Found in Gemini CLI 0.61's
shipped code (`packages/core/src/hooks/`, bundled in `@google/gemini-cli`):

- The event on stdin has Claude Code's field names (`session_id`,
  `transcript_path`, `cwd`, `hook_event_name`, `timestamp`, `tool_name`,
  `tool_input`; no `tool_use_id`); the shell tool is `run_shell_command`, the
  file-writing tools `write_file` and `replace` (`tool_input.file_path`), and an
  MCP tool comes with `mcp_context.server_name` / `tool_name`.
- A deny is `{"decision": "deny", "reason": R}`: the model gets "Tool execution
  blocked: R" and the tool does not run.
- A `BeforeTool` answer's `hookSpecificOutput.additionalContext` is read by no
  one; an `AfterTool` one is appended to the tool's output (`<hook_context>`),
  after the tool ran. So we install both: before a tool only a stop is said,
  after it the context.
- A group's `matcher` is a regular expression searched in the tool name (so we
  anchor ours), but compared for equality with a lifecycle event's trigger.
- The hook `timeout` is in milliseconds (default 60,000).
- `SessionStart` has source `startup`, `resume` or `clear` (no `compact`); the
  compaction event is `PreCompress` with trigger `manual` or `auto`. An `auto`
  one fires before every model request, before Gemini CLI knows whether it
  will compress, so only `manual` (`/compress`) is taken to empty the context.
- A `SessionStart` answer's `hookSpecificOutput.additionalContext` reaches the
  model on `startup` and `resume` (`pinned_rules`): with a prompt (`-p`) it is
  put before the prompt as `<hook_context>...</hook_context>`
  (packages/cli/src/gemini.tsx), interactively added to the history as a user
  message of the same form (AppContainer.tsx); `<` and `>` in it become `&lt;`
  and `&gt;` (`getAdditionalContext`). It does not outlive the process: a
  resumed session's history leaves out every user message that starts with
  `<hook_context>` (`convertSessionToClientHistory`, `isIgnoredUserContent`; with
  `-p` the first prompt goes with it), so on `resume` every pinned rule is
  handed over again. On `clear` (`/clear`,
  ui/commands/clearCommand.ts) only the answer's `systemMessage` is shown to the
  user and the context is dropped, so there a session start only means the
  context was emptied. A lifecycle matcher is compared for equality, so our
  `SessionStart` group has none: it runs for every source.
- Hooks run only in a folder Gemini CLI trusts (folder trust is on by default),
  and only when `hooksConfig.enabled` is not false (true by default since 0.27;
  false before): `mentectl hooks install` writes it when missing.

MCP servers: `mcpServers.NAME` (`command`, `args`) in the same user
`settings.json`, as `gemini mcp add --scope user` writes it (checked with 0.61:
`gemini mcp list` lists ours). A stdio server starts only in a trusted folder,
with the environment minus variables that look like secrets.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mented import paths
from mented.agents.pretooluse import (
    SESSION_START,
    ContextEmptied,
    McpSettings,
    PreToolUseAgent,
    SessionStarted,
    SettingsLayout,
    ToolCall,
    pretooluse_event,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mented.registration import HookNeeds

BEFORE_TOOL = "BeforeTool"
AFTER_TOOL = "AfterTool"
PRE_COMPRESS = "PreCompress"
SHELL_TOOL = "run_shell_command"
MCP_PREFIX = "mcp_"
HOOK_NAME = "mented"  # what `/hooks disable` and `hooksConfig.disabled` call our hooks

_DESCRIPTIONS = {
    BEFORE_TOOL: "mented: your rules for this command",
    AFTER_TOOL: "mented: your rules for the command that ran",
    SESSION_START: "mented: your pinned rules",
    PRE_COMPRESS: "mented: context compressed, rules will be handed over again",
}
# Lifecycle matchers are compared for equality with the event's trigger; None:
# the group has no matcher and runs for every trigger (`SessionStart`: startup,
# resume and clear, each its own string, which one matcher cannot name).
_LIFECYCLE_MATCHERS: dict[str, str | None] = {SESSION_START: None, PRE_COMPRESS: "manual"}
# The `SessionStart` source whose answer Gemini CLI 0.61 drops (clearCommand.ts
# shows only its `systemMessage`): it only says the context was emptied.
_CONTEXT_DROPPED_SOURCE = "clear"
# A resumed session's history leaves out every user message that starts with
# `<hook_context>` (`isIgnoredUserContent`, 0.61): what the first start handed is
# gone, so a resume gets every pinned rule again.
_RESUME = "resume"


class _McpContext(msgspec.Struct):
    server_name: str | None = None
    tool_name: str | None = None


class _GeminiEvent(msgspec.Struct):
    """The fields we use beyond the shared ones."""

    hook_event_name: str | None = None
    session_id: str | None = None
    trigger: str | None = None  # PreCompress: manual or auto
    mcp_context: _McpContext | None = None


_decoder = msgspec.json.Decoder(_GeminiEvent)
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, kw_only=True)
class GeminiAgent(PreToolUseAgent):
    """Gemini CLI: the shared event shape under its own event names and outputs."""

    def config_dir(self) -> Path:
        """`$GEMINI_CLI_HOME/.gemini`, else `~/.gemini` (Gemini moves its home, not the folder)."""
        home = os.environ.get(self.config_dir_env)
        return (Path(home) if home else paths.home()) / self.config_dir_name

    def decode(self, event: bytes) -> ToolCall | SessionStarted | ContextEmptied | None:
        try:
            extra = _decoder.decode(event)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        if extra.hook_event_name == PRE_COMPRESS:
            if extra.trigger == "manual" and extra.session_id:
                return ContextEmptied(session=extra.session_id)
            return None
        call = super().decode(event)
        if isinstance(call, SessionStarted):
            if call.source == _CONTEXT_DROPPED_SOURCE:
                return ContextEmptied(session=call.session) if call.session else None
            return call
        if not isinstance(call, ToolCall) or not call.mcp_tool:
            return call
        # Gemini names an MCP tool mcp_SERVER_TOOL, which cannot be split on "_":
        # the server and the tool come in `mcp_context`.
        mcp = extra.mcp_context
        if mcp is None or not mcp.server_name or not mcp.tool_name:
            return None
        return msgspec.structs.replace(call, mcp_tool=f"{mcp.server_name}/{mcp.tool_name}")

    def _tool_call(self, tool: str, tool_input: msgspec.Raw) -> ToolCall | None:
        if tool.startswith(self.mcp_prefix):  # named by `decode`, from `mcp_context`
            return ToolCall(mcp_tool=tool)
        return super()._tool_call(tool, tool_input)

    def takes_context(self, call: ToolCall) -> bool:
        """Only an `AfterTool` answer's context reaches the model."""
        return call.ran

    def render_context(self, text: str) -> bytes:
        return _encoder.encode(
            {"hookSpecificOutput": {"hookEventName": AFTER_TOOL, "additionalContext": text}}
        )

    def render_deny(self, reason: str) -> bytes:
        return _encoder.encode({"decision": "deny", "reason": reason})

    def sample_event(self, command: str, *, cwd: str, session: str) -> bytes:
        return pretooluse_event(
            command,
            cwd=cwd,
            session=session,
            tool_name=SHELL_TOOL,
            hook_event_name=BEFORE_TOOL,
            transcript_path="",
            timestamp="2026-01-01T00:00:00.000Z",
        )

    def tool_event(
        self, tool: str, files: Sequence[str] = (), *, cwd: str, session: str | None = None
    ) -> bytes:
        """The shared event under `BeforeTool`; an MCP tool's with its `mcp_context`, the
        server taken to end at the first "_" of mcp_SERVER_TOOL (Gemini CLI's own event
        names the server, which may hold a "_": its name alone cannot)."""
        server, _, name = tool.removeprefix(self.mcp_prefix).partition(self.mcp_separator)
        mcp = {"server_name": server, "tool_name": name}
        return pretooluse_event(
            "",
            cwd=cwd,
            session=session,
            tool_name=tool,
            tool_input=self.tool_input(tool, files),
            hook_event_name=BEFORE_TOOL,
            mcp_context=mcp if tool.startswith(self.mcp_prefix) and server and name else None,
        )

    # ------------------------------------------------------------------ installing

    def hook_entry(
        self,
        command: str,
        timeout_s: int,
        event: str = BEFORE_TOOL,
        condition: str | None = None,  # noqa: ARG002 - Gemini has no condition on a hook
    ) -> dict[str, Any]:
        return {
            "name": HOOK_NAME,
            "type": "command",
            "command": command,
            "timeout": self.layout.timeout_value(timeout_s),
            "description": _DESCRIPTIONS[event],
        }

    def hook_group(self, command: str, timeout_s: int) -> dict[str, Any]:
        return self._group(BEFORE_TOOL, self._tool_matcher(None), command, timeout_s)

    def hook_groups(
        self,
        command: str,
        timeout_s: int,
        needs: HookNeeds | None = None,
        *,
        prefilter: bool = True,  # noqa: ARG002 - Gemini has no command filter
    ) -> dict[str, list[dict[str, Any]]]:
        """One group per event; the tool events' matcher names the tools `needs` names.

        None for `needs`: the shell tool alone. Every shell command starts the
        hook (Gemini has no condition on the command).
        """
        tools = self._tool_matcher(needs)
        groups: dict[str, list[dict[str, Any]]] = {}
        for event in self.hook_events:
            if event in _LIFECYCLE_MATCHERS:
                matcher = _LIFECYCLE_MATCHERS[event]
            elif not tools:
                groups[event] = []
                continue
            else:
                matcher = tools
            groups[event] = [self._group(event, matcher, command, timeout_s)]
        return groups

    def _tool_matcher(self, needs: HookNeeds | None) -> str:
        """The tool events' matcher: a regex searched in the tool name, so anchored."""
        if needs is None:
            return "^(" + "|".join(sorted(self.shell_tools)) + ")$"
        shells = sorted(self.shell_tools) if needs.commands else []
        names, patterns = self.other_tools(needs)
        alternatives = [re.escape(name) for name in shells + names] + patterns
        return "^(" + "|".join(alternatives) + ")$" if alternatives else ""

    def _group(
        self, event: str, matcher: str | None, command: str, timeout_s: int
    ) -> dict[str, Any]:
        group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
        return {**group, "hooks": [self.hook_entry(command, timeout_s, event)]}

    @property
    def hook_events(self) -> list[str]:
        return [BEFORE_TOOL, AFTER_TOOL, SESSION_START, PRE_COMPRESS]


AGENT = GeminiAgent(
    pinned_rules=True,
    pinned_dropped_sources=frozenset({_RESUME}),
    name="gemini-cli",
    title="Gemini CLI",
    shell_tools=frozenset({SHELL_TOOL}),
    edit_tools=frozenset({"write_file", "replace"}),
    mcp_prefix=MCP_PREFIX,  # mcp_SERVER_TOOL
    mcp_separator="_",
    config_dir_env="GEMINI_CLI_HOME",
    config_dir_name=".gemini",
    settings_name="settings.json",
    project_settings_file=".gemini/settings.json",
    event_name=BEFORE_TOOL,
    after_event=AFTER_TOOL,
    post_tool_event=AFTER_TOOL,
    install_note=(
        "Gemini CLI runs hooks only in folders it trusts; a project's hooks it "
        "also asks you about once."
    ),
    layout=SettingsLayout(
        timeout_per_second=1000,
        enable=("hooksConfig", "enabled"),
        disabled=("hooksConfig", "disabled", HOOK_NAME),
    ),
    mcp=McpSettings(
        file_name="settings.json",
        list_command="gemini mcp list",
        note="Gemini CLI starts MCP servers only in folders it trusts.",
    ),
)
