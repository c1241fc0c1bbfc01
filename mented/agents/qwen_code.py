"""Qwen Code: Claude Code's hook events and answers, with its own shell tool and home.

Settings: `~/.qwen/settings.json` (user; `$QWEN_HOME/settings.json` when that is
set) or `<project>/.qwen/settings.json`. Found in Qwen Code 0.24.4's shipped code
(`@qwen-code/qwen-code`, `chunks/`):

- `PreToolUse` sends Claude Code's payload (`tool_name`, `tool_input`,
  `tool_use_id`, `permission_mode`); the shell tool is `run_shell_command`, and a
  group's `matcher` is a regular expression.
- `hookSpecificOutput.permissionDecision` `deny` stops the call before it runs;
  the reason comes back to the model as the tool's error.
- A `PreToolUse` answer's `additionalContext` reaches no one: the scheduler only
  notes that there was one (`hasAdditionalContext` on a trace span; the ACP
  agent writes it to its debug log). A `PostToolUse` one is added to the tool's
  result, after the tool ran. So, as for Gemini CLI, we install both: before a
  command only a stop is said, after it the context.

- `SessionStart` (`startup`, `resume` for `--continue`, `clear`, `compact`): the
  answer's `additionalContext` is set at the end of the system instruction, which a
  resumed session's saved history leaves out: the pinned rules are handed again.

MCP servers: `mcpServers.NAME` (`command`, `args`) in the same user
`settings.json`, as `qwen mcp add --scope user` writes it (0.24.4, with and
without `$QWEN_HOME`); `qwen mcp list` lists it.

Everything else is the shared adapter; only these differences are named here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from mented.agents.pretooluse import EVENT_NAME, McpSettings, PreToolUseAgent, ToolCall

if TYPE_CHECKING:
    from mented.registration import HookNeeds

POST_TOOL_USE = "PostToolUse"
SHELL_TOOL = "run_shell_command"

_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, kw_only=True)
class QwenAgent(PreToolUseAgent):
    """Qwen Code: the shared shape, with the context said after the command ran."""

    def takes_context(self, call: ToolCall) -> bool:
        """Only a `PostToolUse` answer's context reaches the model."""
        return call.ran

    def render_context(self, text: str) -> bytes:
        return _encoder.encode(
            {"hookSpecificOutput": {"hookEventName": POST_TOOL_USE, "additionalContext": text}}
        )

    def hook_groups(
        self,
        command: str,
        timeout_s: int,
        needs: HookNeeds | None = None,
        *,
        prefilter: bool = True,
    ) -> dict[str, list[dict[str, Any]]]:
        """The shared groups, and the same tools once more under `PostToolUse`."""
        groups = super().hook_groups(command, timeout_s, needs, prefilter=prefilter)
        groups[POST_TOOL_USE] = [
            {**group, "hooks": [self.hook_entry(command, timeout_s, POST_TOOL_USE)]}
            for group in groups[EVENT_NAME]
        ]
        return groups

    @property
    def hook_events(self) -> list[str]:
        return [*super().hook_events, POST_TOOL_USE]


AGENT = QwenAgent(
    name="qwen-code",
    title="Qwen Code",
    config_dir_env="QWEN_HOME",
    config_dir_name=".qwen",
    settings_name="settings.json",
    project_settings_file=".qwen/settings.json",
    shell_tools=frozenset({SHELL_TOOL}),
    after_event=POST_TOOL_USE,
    post_tool_event=POST_TOOL_USE,
    mcp=McpSettings(file_name="settings.json", list_command="qwen mcp list"),
    pinned_rules=True,
    # A resumed session's history leaves out what its first start was handed
    # (`applySessionStartContext` is not saved): hand the pinned rules again.
    pinned_dropped_sources=frozenset({"resume"}),
)
