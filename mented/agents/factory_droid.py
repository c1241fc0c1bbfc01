"""Factory Droid: Claude Code's hook format, with `Execute` as its shell tool.

Built from Factory's documents, not run against the `droid` binary (it needs
Factory's hosted model): docs.factory.ai/harness/hooks ("Hooks") and
docs.factory.ai/reference/hooks-reference ("Hooks reference"), as stored in
December 2026.

Settings: `~/.factory/hooks.json` (user) or `<project>/.factory/hooks.json`,
Claude Code's layout (matcher groups, `type`/`command`/`timeout` in seconds).
"If hooks.json is absent, Droid also reads hook declarations from the hooks
key in the matching settings.json": so a new hooks.json would silently turn
off hooks the user keeps in `~/.factory/settings.json`. Where hooks.json does
not exist and settings.json has a `hooks` key, the install goes into
settings.json instead (`settings_path`). The matcher is case-sensitive, a plain
name compared exactly, else a regular expression.

stdin, as the reference gives it: `session_id`, `transcript_path`, `cwd`,
`permission_mode`, `hook_event_name`, `tool_name`, `tool_input`. Third-party
integrations disagree on the spelling (one documents `sessionId` and
`hookEventName`): both are read. The shell tool is `Execute` (`tool_input.command`);
`Edit` and `Create` take `file_path`.

Answer: Claude Code's `hookSpecificOutput` (`permissionDecision` `deny` blocks
the call and feeds the reason back to Droid; exit 2 does the same with stderr).
Whether a `PreToolUse` `additionalContext` reaches the model before the tool
runs is not documented: it is taken to arrive after it, as Claude Code's does,
so the first matching command of a session is stopped once. `SessionStart`
(sources as Claude Code's) is installed to notice a cleared or compacted
context; pinned rules are not handed over there (not checked).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import msgspec

from mented.agents.pretooluse import (
    ContextEmptied,
    McpSettings,
    PreToolUseAgent,
    SessionStarted,
    ToolCall,
)
from mented.untrusted import Refused, read_file

SHELL_TOOL = "Execute"
HOOKS_FILE = "hooks.json"
SETTINGS_FILE = "settings.json"
_MAX_SETTINGS = 4 * 1024 * 1024


class _CamelEvent(msgspec.Struct):
    """The camelCase spelling some integrations document."""

    hookEventName: str | None = None  # noqa: N815 - the wire name
    sessionId: str | None = None  # noqa: N815
    hook_event_name: str | None = None
    session_id: str | None = None


_camel = msgspec.json.Decoder(_CamelEvent)
_encoder = msgspec.json.Encoder()


def _holds_hooks(path: Path) -> bool:
    """Whether the JSON file at `path` has a top-level `hooks` member (False: unreadable)."""
    try:
        data = read_file(path, limit=_MAX_SETTINGS)
        document = msgspec.json.decode(data)
    except (Refused, OSError, msgspec.DecodeError, RecursionError):
        return False
    return isinstance(document, dict) and "hooks" in document


@dataclass(frozen=True, kw_only=True)
class DroidAgent(PreToolUseAgent):
    """Droid: the shared shape; its user hooks in hooks.json, or in settings.json."""

    def settings_path(self) -> Path:
        """`hooks.json`, unless it is absent and `settings.json` holds the user's hooks."""
        hooks = self.config_dir() / HOOKS_FILE
        settings = self.config_dir() / SETTINGS_FILE
        if not hooks.exists() and not hooks.is_symlink() and _holds_hooks(settings):
            return settings
        return hooks

    def decode(self, event: bytes) -> ToolCall | SessionStarted | ContextEmptied | None:
        try:
            spelled = _camel.decode(event)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        if spelled.hook_event_name is None and spelled.hookEventName is not None:
            try:
                document = msgspec.json.decode(event)
            except (msgspec.DecodeError, RecursionError):
                return None
            if isinstance(document, dict):
                document.setdefault("hook_event_name", spelled.hookEventName)
                document.setdefault("session_id", spelled.sessionId)
                event = _encoder.encode(document)
        return super().decode(event)


AGENT = DroidAgent(
    name="factory-droid",
    title="Factory Droid",
    config_dir_env="",  # no variable documented that moves ~/.factory
    config_dir_name=".factory",
    settings_name=HOOKS_FILE,
    project_settings_file=".factory/hooks.json",
    shell_tools=frozenset({SHELL_TOOL}),
    edit_tools=frozenset({"Edit", "Create"}),
    mcp=McpSettings(
        how="none",
        file_name="mcp.json",
        note="Droid's MCP settings (~/.factory/mcp.json) were not checked against Droid",
    ),
)
