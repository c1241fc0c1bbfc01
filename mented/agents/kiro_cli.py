"""Kiro CLI: a `preToolUse` command hook in an agent's file, a stop by exit status 2.

Built from the source Kiro CLI grew from, aws/amazon-q-developer-cli at commit 15cc8f3c
(2026-04-23): `crates/chat-cli/src/cli/agent/hook.rs` (the entry), `cli/chat/cli/hooks.rs`
`run_hook` (how it runs and what it reads), `cli/chat/mod.rs` (what a `preToolUse` result
does), `cli/agent/mod.rs` (agent files, the built-in default agent), `util/pattern_matching.rs`
(the matcher), `docs/hooks.md`; and kiro.dev/docs/cli/hooks, /docs/cli/v3/hooks. Not run
against the Kiro binary (it needs Kiro's own sign-in and hosted model).

Hooks live in an agent's JSON file, `~/.kiro/agents/<name>.json` (global) or a project's
`.kiro/agents/<name>.json`, under `hooks.preToolUse`, each entry flat::

    {"name": "mented", "tools": ["*"], ...,
     "hooks": {"preToolUse": [{"matcher": "execute_bash", "command": "...",
                               "timeout_ms": 5000, "max_output_size": 65536}]}}

`matcher` is one tool name, or a glob with `*`/`?` (`@server/*` for an MCP server's
tools); no alternation, so an entry per tool. The built-in default agent is made in
memory and has no file: `hooks install` writes an agent of mented's own, `mented`, with
the default agent's tools (`"tools": ["*"]`) and mented's hook, which the user starts
with `kiro-cli chat --agent mented` or makes the default (`install_note` says so). Kiro
CLI 3 (V3) still runs the hooks of an agent's file ("during the transition").

stdin (`run_hook`): `{"hook_event_name": "preToolUse", "cwd": ..., "tool_name": ...,
"tool_input": {...}}` and nothing else: **no session id**. The shell tool is
`execute_bash` (`execute_cmd` on Windows; `shell` in Kiro's documents) with
`tool_input.command`; `fs_write` (`write`) takes `tool_input.path`; an MCP tool is
`@SERVER/TOOL`. The daemon takes the Kiro process that ran the hook as the session
(`session_from_process`, `mented.process_session`), so a stop comes once per process.

The answer: a `preToolUse` hook's stdout "is captured but not shown", to the user or the
model; exit status 2 blocks the call and hands the model its stderr, as the tool's
result "PreToolHook blocked the tool execution: ..." (any other status is a warning to
the user, and the call runs). So the rules go by a stop or not at all, as for Cursor:
the first matching command of a Kiro process is stopped once (delivery `before`, the
default), later ones and delivery `context` say nothing (no `context_channel`). A
stop is the shim's `BLOCK` answer: the text on stderr, exit status 2.

The hook's output is cut at `max_output_size` (default 10 KiB): ours asks for 64 KiB.
A successful hook's output may be cached (`cache_ttl_seconds`, default 0: never).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from mented.agents.pretooluse import (
    ContextEmptied,
    McpSettings,
    PreToolUseAgent,
    SessionStarted,
    SettingsLayout,
    ToolCall,
)
from mented.registration import sample_name

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mented.agents.pretooluse import InstalledEntry
    from mented.registration import HookNeeds

PRE_TOOL_USE = "preToolUse"
SHELL_TOOLS = frozenset({"execute_bash", "shell"})
EDIT_TOOLS = frozenset({"fs_write", "write"})
# The shim's answer for a stop, ahead of its text (client/shim.py `BLOCK`; a test keeps
# the two equal): the shim writes the text to stderr and exits 2.
BLOCK = b'{"type":"block"}\n'
MAX_OUTPUT = 64 * 1024  # the entry's `max_output_size`: the stop's text uncut
AGENT_NAME = "mented"  # the Kiro agent `hooks install` writes: ~/.kiro/agents/mented.json


class _Input(msgspec.Struct):
    command: str | None = None  # execute_bash; fs_write's is its operation ("create", ...)
    path: str | None = None  # fs_write


class _KiroEvent(msgspec.Struct):
    hook_event_name: str | None = None
    cwd: str | None = None
    tool_name: str | None = None
    tool_input: msgspec.Raw = msgspec.Raw(b"null")
    # Never sent by Kiro; `mentectl doctor`'s test fire names its own session with it.
    session_id: str | None = None


_decoder = msgspec.json.Decoder(_KiroEvent)
_input = msgspec.json.Decoder(_Input | None)
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, kw_only=True)
class KiroAgent(PreToolUseAgent):
    """Kiro CLI: its own event without a session, a stop by exit status, no context."""

    def decode(self, event: bytes) -> ToolCall | SessionStarted | ContextEmptied | None:
        try:
            decoded = _decoder.decode(event)
            if decoded.hook_event_name != PRE_TOOL_USE or not decoded.tool_name:
                return None
            found = self._kiro_call(decoded.tool_name, _input.decode(decoded.tool_input))
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        if found is None:
            return None
        return ToolCall(
            command=found.command,
            mcp_tool=found.mcp_tool,
            edited=found.edited,
            tool=decoded.tool_name,
            cwd=decoded.cwd or None,
            session=decoded.session_id or None,
        )

    def _kiro_call(self, tool: str, tool_input: _Input | None) -> ToolCall | None:
        given = tool_input or _Input()
        if tool in self.shell_tools:
            command = given.command
            return ToolCall(command=command) if command and command.strip() else None
        if tool in self.edit_tools:
            return ToolCall(edited=(given.path,)) if given.path else None
        server, _, name = tool.removeprefix("@").partition("/")
        if tool.startswith("@") and server and name:
            return ToolCall(mcp_tool=f"{server}/{name}")
        return None

    def render_deny(self, reason: str) -> bytes:
        """The shim's block: `reason` on stderr, exit status 2."""
        return BLOCK + reason.encode()

    def sample_event(self, command: str, *, cwd: str, session: str) -> bytes:
        return _encoder.encode(
            {
                "hook_event_name": PRE_TOOL_USE,
                "cwd": cwd,
                "tool_name": "execute_bash",
                "tool_input": {"command": command, "summary": "Commit"},
                "session_id": session,  # doctor's, so that it finds its fire
            }
        )

    def tool_event(
        self, tool: str, files: Sequence[str] = (), *, cwd: str, session: str | None = None
    ) -> bytes:
        return _encoder.encode(
            {
                "hook_event_name": PRE_TOOL_USE,
                "cwd": cwd,
                "tool_name": tool,
                "tool_input": {"path": files[0]} if files else {},
                "session_id": session,
            }
        )

    # ------------------------------------------------------------------ installing

    def hook_entry(  # a flat entry; no condition (the matcher names the tool)
        self,
        command: str,
        timeout_s: int,
        event: str = PRE_TOOL_USE,  # noqa: ARG002 - the one event installed
        condition: str | None = None,  # noqa: ARG002
    ) -> dict[str, Any]:
        return {
            "command": command,
            "timeout_ms": self.layout.timeout_value(timeout_s),
            "max_output_size": MAX_OUTPUT,
        }

    def hook_group(self, command: str, timeout_s: int) -> dict[str, Any]:
        return self.hook_groups(command, timeout_s)[PRE_TOOL_USE][0]

    def hook_groups(
        self,
        command: str,
        timeout_s: int,
        needs: HookNeeds | None = None,
        *,
        prefilter: bool = True,  # noqa: ARG002 - Kiro filters by tool name only
    ) -> dict[str, list[dict[str, Any]]]:
        """One entry per tool name `needs` names (a Kiro matcher takes one name or glob)."""
        tools = sorted(self.shell_tools) if needs is None or needs.commands else []
        if needs is not None:
            tools += self.file_edit_tools() if needs.edits else []
            tools += [f"@{glob}" for glob in needs.mcp_tools]
        return {
            PRE_TOOL_USE: [
                {"matcher": tool, **self.hook_entry(command, timeout_s)} for tool in tools
            ]
        }

    def mcp_tool_sample(self, glob: str) -> str:
        server, _, tool = glob.partition("/")
        return f"@{sample_name(server)}/{sample_name(tool)}"

    def _shell_cover(self, entries: list[InstalledEntry]) -> Callable[[tuple[str, ...]], bool]:
        """Kiro reads no condition: a shell command is covered when the shell tool is."""
        shell = min(self.shell_tools)
        runs = any(self._entry_runs(entry, shell, None) for entry in entries)
        return lambda _words: runs

    def _entry_runs(self, entry: InstalledEntry, tool: str, command: str | None) -> bool:  # noqa: ARG002
        """As Kiro matches (`hook_matches_tool`): none or `*` takes all, else exact or a glob."""
        matcher = entry.matcher
        if not matcher or matcher == "*":
            return True
        if matcher == "@builtin":
            return not tool.startswith("@")
        if "*" in matcher or "?" in matcher:
            return fnmatch.fnmatchcase(tool, matcher)
        return matcher in (tool, tool.partition("/")[0])

    @property
    def hook_events(self) -> list[str]:
        return [PRE_TOOL_USE]


AGENT = KiroAgent(
    name="kiro-cli",
    title="Kiro CLI",
    config_dir_env="",  # Kiro names no variable that moves ~/.kiro
    config_dir_name=".kiro",
    settings_name=f"agents/{AGENT_NAME}.json",
    project_settings_file=f".kiro/agents/{AGENT_NAME}.json",
    no_project_local_file=(
        "Kiro CLI has no uncommitted agent folder: this file names this machine's "
        "interpreter and socket, so keep it out of git (add .kiro/agents/mented.json to "
        ".git/info/exclude), or install for your user instead (`mentectl hooks install "
        "kiro-cli`)."
    ),
    install_note=(
        "Kiro CLI's default agent is built in and has no file to hold a hook, so this file "
        f"is a Kiro agent of mented's, `{AGENT_NAME}`: all of Kiro's tools, AGENTS.md, "
        "README.md and .kiro/steering/ as context, and mented's hook. Start Kiro with it, "
        f"`kiro-cli chat --agent {AGENT_NAME}`, or make it your default: `kiro-cli settings "
        f"chat.defaultAgent {AGENT_NAME}`. To keep an agent of your own, copy the "
        "`preToolUse` entries of this file into its `hooks`."
    ),
    shell_tools=SHELL_TOOLS,
    edit_tools=EDIT_TOOLS,
    mcp_prefix="@",
    mcp_separator="/",
    event_name=PRE_TOOL_USE,
    context_channel=False,  # a `preToolUse` hook's stdout reaches no one
    session_from_process=True,
    blocks_by_exit=True,
    layout=SettingsLayout(
        nested=False,
        timeout_key="timeout_ms",
        timeout_per_second=1000,
        top={
            "name": AGENT_NAME,
            "description": "Kiro's default agent, with mented's hook (mentectl hooks install "
            "kiro-cli wrote it; mentectl hooks uninstall kiro-cli removes it)",
            "tools": ["*"],
            "resources": [
                "file://AGENTS.md",
                "file://README.md",
                "file://.kiro/steering/**/*.md",
            ],
            "useLegacyMcpJson": True,
        },
        hooks_only=True,
    ),
    mcp=McpSettings(
        how="none",
        file_name="settings/mcp.json",
        note="Kiro CLI's MCP settings (~/.kiro/settings/mcp.json, an agent's `mcpServers`) "
        "were not checked against Kiro",
    ),
)
