"""Crush (charmbracelet/crush): a `PreToolUse` command hook in `crush.json`.

Built from Crush's source at commit 37f36e93 (2026-08-21; `docs/hooks/README.md`,
`internal/hooks/{input,hooks,runner}.go`, `internal/agent/hooked_tool.go`,
`internal/config/load.go`), not run against the Crush binary.

Settings: the global `crush.json` (`$CRUSH_GLOBAL_CONFIG/crush.json`, else
`$XDG_CONFIG_HOME/crush/crush.json`, else `~/.config/crush/crush.json`) or a
project's `crush.json` (`.crush.json` is read too, and wins). Strict JSON.
Each entry is flat, an item of `hooks.PreToolUse` itself::

    {"hooks": {"PreToolUse": [{"name": "mented", "matcher": "^(?:bash)$",
                               "command": "...", "timeout": 5}]}}

`matcher` is a Go regular expression searched in the tool name (unanchored:
ours is anchored); `timeout` is in seconds. `PreToolUse` is Crush's only event
(no session start, no event after a tool ran).

stdin (`BuildPayload`): `{"event": "PreToolUse", "session_id": ..., "cwd": ...,
"tool_name": "bash", "tool_input": {"command": ...}}`: `event`, not
`hook_event_name` (read as the event before a tool, the only one sent). The
shell tool is `bash`; `edit`, `multiedit` and `write` take `file_path`; an MCP
tool is `mcp_SERVER_TOOL` (a server whose name holds `_` is split at its first).

Answer: Crush reads Claude Code's `hookSpecificOutput` (`parseClaudeCodeOutput`).
A `deny` blocks the call before it runs, the model reading "Tool call blocked by
hook. Reason: ..." as the tool's error (so a stop is safe); `additionalContext`
is appended to the tool's result, after it ran. Exit 2 would block with stderr
as the reason; the shim always exits 0 and answers on stdout. `allow` skips the
permission prompt: never sent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mented import paths
from mented.agents.pretooluse import EVENT_NAME, McpSettings, PreToolUseAgent, SettingsLayout

if TYPE_CHECKING:
    from mented.registration import HookNeeds

SHELL_TOOL = "bash"
ENTRY_NAME = "mented"  # shown in Crush's TUI next to the hook's verdict


@dataclass(frozen=True, kw_only=True)
class CrushAgent(PreToolUseAgent):
    """Crush: the shared event and answer, in flat entries each with its own matcher."""

    def config_dir(self) -> Path:
        override = self.config_dir_override()
        if override is not None:
            return override
        xdg = os.environ.get("XDG_CONFIG_HOME")
        return (Path(xdg) if xdg else paths.home() / ".config") / "crush"

    def hook_entry(
        self,
        command: str,
        timeout_s: int,
        event: str = EVENT_NAME,  # noqa: ARG002 - Crush has this one event
        condition: str | None = None,  # noqa: ARG002 - and no condition on an entry
    ) -> dict[str, Any]:
        return {"name": ENTRY_NAME, "command": command, "timeout": timeout_s}

    def hook_group(self, command: str, timeout_s: int) -> dict[str, Any]:
        return {"matcher": f"^(?:{SHELL_TOOL})$", **self.hook_entry(command, timeout_s)}

    def hook_groups(
        self,
        command: str,
        timeout_s: int,
        needs: HookNeeds | None = None,
        *,
        prefilter: bool = True,  # noqa: ARG002 - Crush filters by tool name only
    ) -> dict[str, list[dict[str, Any]]]:
        """One entry whose anchored matcher names the tools `needs` names."""
        if needs is None:
            return {EVENT_NAME: [self.hook_group(command, timeout_s)]}
        groups = self.pretooluse_groups(command, timeout_s, needs, prefilter=False)
        return {
            EVENT_NAME: [
                {"matcher": _anchored(group["matcher"]), **self.hook_entry(command, timeout_s)}
                for group in groups
            ]
        }

    @property
    def hook_events(self) -> list[str]:
        return [EVENT_NAME]


def _anchored(matcher: str) -> str:
    """`matcher` as a regex that takes whole tool names only (Go searches it anywhere)."""
    return matcher if matcher.startswith("^") else f"^(?:{matcher})$"


AGENT = CrushAgent(
    name="crush",
    title="Crush",
    config_dir_env="CRUSH_GLOBAL_CONFIG",
    config_dir_name=".config/crush",
    settings_name="crush.json",
    project_settings_file="crush.json",
    no_project_local_file=(
        "Crush reads a project's crush.json (or .crush.json) and has no uncommitted one: this "
        "file names this machine's interpreter and socket, so keep it out of git (add it to "
        ".git/info/exclude), or install for your user instead (`mentectl hooks install crush`)."
    ),
    shell_tools=frozenset({SHELL_TOOL}),
    edit_tools=frozenset({"edit", "multiedit", "write"}),
    mcp_prefix="mcp_",
    mcp_separator="_",
    layout=SettingsLayout(nested=False),
    mcp=McpSettings(
        how="none",
        file_name="crush.json",
        note="Crush keeps MCP servers under `mcp` in crush.json, a shape mentectl does not write",
    ),
)
