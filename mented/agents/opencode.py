"""opencode (and Kilo Code CLI, its fork): mented's own plugin, in the agent's process.

opencode has no command hook: it runs JavaScript plugins in its own process
(Bun), each a module whose exported function returns hooks. mented ships one,
`opencode_plugin.js` beside this module, which `mentectl hooks install opencode`
copies to `~/.config/opencode/plugins/mented.js` (`$XDG_CONFIG_HOME`; with
`--project DIR`, `DIR/.opencode/plugins/mented.js`). Every `.js` or `.ts` file
there is loaded at startup; `opencode run` finds a project's `.opencode/` from
its working directory. The plugin speaks mented's protocol on the socket itself
(`node:net`): one `hook` request per tool call, as the shim sends it, and no
process started. Found in opencode 1.18.33's shipped code (npm `opencode-ai`,
the `@opencode-ai/plugin` 1.18.33 types) and run against it:

- `"tool.execute.before"(input, output)`: `input` is `{tool, sessionID, callID}`,
  `output.args` the tool's arguments, which the plugin sends as they are. A hook
  that throws stops the call before it runs, and the error's message is the
  tool's result the model reads: that is how a stop goes (`render_deny`).
- `"tool.execute.after"(input, output)`: `input` adds `args`; text appended to
  `output.output` reaches the model with the tool's result, after it ran. Before
  a tool there is no such channel, so, as for Gemini CLI, the context goes after.
- Tools: `bash` (`command`, `workdir`), `edit` and `write` (`filePath`),
  `apply_patch` (`patchText`, the patch format Codex's `apply_patch` takes). An
  MCP tool is named `SERVER_TOOL`, each part with characters outside
  `[A-Za-z0-9_-]` made `_`: the server is taken to end at the first `_`.
- `"experimental.chat.system.transform"(input, output)`: before every model
  request, `input.sessionID` and `output.system` (a list of strings). The
  system prompt is built again for each request and never stored, so the plugin
  asks once per session (a `session.start` event: every pinned rule, each time
  the process meets the session) and adds the answer to every request of it.
- The `event` hook's `session.compacted` means the model's context was emptied.

The events the plugin sends (the request's `event`; ours, in opencode's words)::

    {"hook_event_name": "tool.execute.before", "plugin": 1, "session_id": "ses_...",
     "call_id": "call_...", "cwd": "/repo", "tool": "bash",
     "args": {"command": "git commit -m x", "description": "..."}}
    {"hook_event_name": "tool.execute.after", ...the same fields}
    {"hook_event_name": "session.start", "plugin": 1, "session_id": "ses_...", "cwd": "/repo"}
    {"hook_event_name": "session.compacted", "plugin": 1, "session_id": "ses_..."}

and the answers it acts on, one JSON object (empty: nothing to do)::

    {"stop": "..."}      thrown as the tool's error: the call does not run
    {"context": "..."}   appended to the tool's output (after it ran)
    {"system": "..."}    added to the system prompt of every request of the session

Nothing else: the plugin never approves or changes a call. Kilo Code CLI loads
the same plugins from `~/.config/kilo/plugin/` and `.kilo/plugin/` (Kilo's
documentation, automate/extending/plugins); it was not run here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import msgspec

from mented import paths
from mented.agents.in_process import SESSION_SOURCE, InProcessAgent, PluginAnswers, PluginEvent
from mented.agents.pretooluse import (
    McpSettings,
    SettingsLayout,
    ToolCall,
    patch_of,
    patched_files,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

BEFORE_TOOL = "tool.execute.before"
AFTER_TOOL = "tool.execute.after"
SESSION_START = "session.start"
COMPACTED = "session.compacted"
SHELL_TOOL = "bash"
PATCH_TOOL = "apply_patch"
EDIT_TOOLS = frozenset({"edit", "write"})
# The version of the event and answer shapes above; the plugin sends it, and writes
# it in its first lines, where `mentectl doctor` compares it with the daemon's.
PLUGIN_PROTOCOL = 1
PLUGIN_SOURCE = "opencode_plugin.js"
# The first line of the plugin file: what `hooks install` recognises as its own.
PLUGIN_MARKER = "// mented plugin for opencode"
_VERSION_LINE = re.compile(r"^const PLUGIN_PROTOCOL = (\d+)$", re.MULTILINE)


class _Args(msgspec.Struct):
    command: str | None = None  # bash
    workdir: str | None = None  # bash
    filePath: str | None = None  # noqa: N815 - opencode's name; edit, write
    patchText: str | None = None  # noqa: N815 - apply_patch


class _Event(PluginEvent):
    event: str | None = msgspec.field(default=None, name="hook_event_name")
    args: msgspec.Raw = msgspec.Raw(b"null")


_args_decoder = msgspec.json.Decoder(_Args | None)
_encoder = msgspec.json.Encoder()


def plugin_source() -> str:
    """The plugin as shipped, before `hooks install` writes in the agent and the socket."""
    return resources.files("mented.agents").joinpath(PLUGIN_SOURCE).read_text(encoding="utf-8")


@dataclass(frozen=True, kw_only=True)
class OpencodeAgent(InProcessAgent):
    """An agent that loads mented's plugin: its events and answers are the plugin's.

    `settings_name` and `project_settings_file` name the plugin file (in the user
    config directory, and in a project): there is no settings file to edit.
    `config_root_env`/`config_root_name`: the user config directory is
    `$XDG_CONFIG_HOME/<name>`, else `~/.config/<name>`.
    """

    config_root_name: str = "opencode"
    # The documents' name of the folder the plugin goes in, for messages.
    plugin_folder: str = "plugins"
    event_decoder: ClassVar[msgspec.json.Decoder[_Event]] = msgspec.json.Decoder(_Event)

    # ------------------------------------------------------------ event and output

    def call_of(self, event: _Event, cwd: str | None) -> ToolCall | None:
        args = _args_decoder.decode(event.args) or _Args()
        call = self._call_of(event.tool or "", args)
        if call is None or not call.command or not args.workdir:
            return call
        workdir = args.workdir
        if not workdir.startswith("/") and cwd:
            workdir = f"{cwd.rstrip('/')}/{workdir}"
        return ToolCall(command=call.command, cwd=workdir)

    def _call_of(self, tool: str, args: _Args) -> ToolCall | None:
        if tool in self.shell_tools:
            command = args.command
            return ToolCall(command=command) if command and command.strip() else None
        if tool in self.edit_tools:
            return ToolCall(edited=(args.filePath,)) if args.filePath else None
        if tool in self.patch_tools:
            files = patched_files(args.patchText or "")
            return ToolCall(edited=files) if files else None
        server, _, name = tool.partition(self.mcp_separator)
        if server and name:
            return ToolCall(mcp_tool=f"{server}/{name}")
        return None

    def sample_event(self, command: str, *, cwd: str, session: str) -> bytes:
        return tool_event(command, cwd=cwd, session=session)

    def tool_event(
        self, tool: str, files: Sequence[str] = (), *, cwd: str, session: str | None = None
    ) -> bytes:
        if tool in self.patch_tools:
            args: dict[str, object] = {"patchText": patch_of(files)}
        else:
            args = {"filePath": files[0]} if files else {}
        return plugin_event(tool, args, cwd=cwd, session=session)

    # ------------------------------------------------------------------ installing

    def config_dir_override(self) -> Path | None:
        return None

    def config_dir(self) -> Path:
        """`$XDG_CONFIG_HOME/opencode`, else `~/.config/opencode` (its `Global.Path.config`)."""
        xdg = os.environ.get("XDG_CONFIG_HOME")
        return (Path(xdg) if xdg else paths.home() / ".config") / self.config_root_name

    @property
    def hook_events(self) -> list[str]:
        return [BEFORE_TOOL, AFTER_TOOL, SESSION_START]


def tool_event(  # noqa: PLR0913 - the event's fields
    command: str,
    *,
    cwd: str | None,
    session: str | None,
    call_id: str = "call_1",
    tool: str = SHELL_TOOL,
    event: str = BEFORE_TOOL,
) -> bytes:
    """The event the plugin sends for a bash call (for doctor, the benchmark, the tests)."""
    args = {"command": command, "description": "Run the command"}
    return plugin_event(tool, args, cwd=cwd, session=session, call_id=call_id, event=event)


def plugin_event(  # noqa: PLR0913 - the event's fields
    tool: str,
    args: Mapping[str, object],
    *,
    cwd: str | None,
    session: str | None,
    call_id: str = "call_1",
    event: str = BEFORE_TOOL,
) -> bytes:
    """The event the plugin sends for a call of `tool` with these arguments."""
    fields = {
        "hook_event_name": event,
        "plugin": PLUGIN_PROTOCOL,
        "session_id": session,
        "call_id": call_id,
        "cwd": cwd,
        "tool": tool,
        "args": args,
    }
    return _encoder.encode({key: value for key, value in fields.items() if value is not None})


AGENT = OpencodeAgent(
    name="opencode",
    title="opencode",
    project_settings_file=".opencode/plugins/mented.js",
    no_project_local_file=(
        "opencode has no uncommitted project folder: DIR/.opencode/plugins/mented.js names "
        "this machine's socket, so keep it out of git (add it to .git/info/exclude), or "
        "install for your user instead (`mentectl hooks install opencode`)."
    ),
    mcp=McpSettings(
        how="by-hand",
        file_name="opencode.json",
        note="add it by hand as the member `mcp.mented` of ~/.config/opencode/opencode.json, "
        '{"type": "local", "command": [...]}, with this command',
    ),
    shell_tools=frozenset({SHELL_TOOL}),
    edit_tools=EDIT_TOOLS,
    patch_tools=frozenset({PATCH_TOOL}),
    mcp_prefix="",
    mcp_separator="_",
    config_dir_env="",
    config_dir_name=".config/opencode",
    settings_name="plugins/mented.js",
    event_name=BEFORE_TOOL,
    after_event=AFTER_TOOL,
    post_tool_event=AFTER_TOOL,
    context_emptied_events=frozenset({COMPACTED}),
    pinned_rules=True,
    # Each start of the plugin meets the session afresh, and the system prompt is
    # not kept: every pinned rule goes again.
    session_start_event=SESSION_START,
    pinned_dropped_sources=frozenset({SESSION_SOURCE}),
    answers=PluginAnswers(stop="stop", context="context", session="system"),
    plugin_protocol=PLUGIN_PROTOCOL,
    protocol_line=_VERSION_LINE,
    layout=SettingsLayout(nested=False, timeout_key=None),
)


def plugin_protocol(text: str) -> int | None:
    """The protocol version a plugin file says it speaks; None when it says none."""
    return AGENT.protocol_of(text)
