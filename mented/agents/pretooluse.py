"""The `PreToolUse` hook shape that Claude Code and Codex CLI share.

Both agents spawn a command hook before a tool call with one JSON object on stdin::

    {"session_id": "...", "cwd": "/repo", "hook_event_name": "PreToolUse",
     "tool_name": "Bash", "tool_input": {"command": "git commit -m x"},
     "tool_use_id": "...", ...}

and read one JSON object from its stdout. We answer either extra context::

    {"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "..."}}

or a deny that stops the command and reaches the model before it runs::

    {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                            "permissionDecision": "deny", "permissionDecisionReason": "..."}}

Nothing else: no `decision`, no `continue`, never `allow` (the hook never
approves anything). Sources: Claude Code's hooks reference and Codex's
`pre-tool-use.command.{input,output}.schema.json`.

The same command line also runs on `SessionStart`, whose `source` says why a
session (re)starts: `startup`, `resume`, or `compact` and `clear`, which mean
the model's context was emptied, so what mented handed over in that session is
gone from it. Claude Code's and Codex's (`pinned_rules`) are answered with the
pinned rules (mented.pinned) as context, in the shape both read for this event
(Claude Code's hooks reference; Codex's `session-start.command.output.schema.json`
and hooks/src/events/session_start.rs)::

    {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "..."}}

Gemini CLI and Copilot CLI take pinned rules too, each in its own answer and
with its own sources (their modules say how); other agents' session starts are
answered with silence.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from mented import paths

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from mented.registration import HookNeeds

EVENT_NAME = "PreToolUse"
# Sent after a tool ran (Claude Code, Codex): what the command did is checked there
# (`mented.afterchecks`), and only that.
POST_TOOL_USE = "PostToolUse"
SESSION_START = "SessionStart"
# `SessionStart` sources after which the model no longer has what it was handed.
CONTEXT_EMPTIED = frozenset({"compact", "clear"})
# Every source: a new session and a resumed one get the pinned rules too.
SESSION_START_SOURCES = CONTEXT_EMPTIED | {"startup", "resume"}


class _ShellInput(msgspec.Struct):
    command: str | None = None


class _EditInput(msgspec.Struct):
    file_path: str | None = None  # Edit, Write, MultiEdit
    notebook_path: str | None = None  # NotebookEdit


# The file headers of an apply_patch patch (Codex): the files it adds, deletes,
# updates, and the new name of a moved one.
_PATCH_FILE = re.compile(
    r"^\*\*\* (?:Add File|Delete File|Update File|Move to): (.+?)\s*$", re.MULTILINE
)


def patched_files(patch: str) -> tuple[str, ...]:
    """The files an apply_patch patch writes, in order, each once."""
    return tuple(dict.fromkeys(match.group(1) for match in _PATCH_FILE.finditer(patch)))


def patch_of(files: Sequence[str]) -> str:
    """An apply_patch patch that updates `files` (whose `patched_files` they are)."""
    headers = "".join(f"*** Update File: {path}\n" for path in files)
    return f"*** Begin Patch\n{headers}*** End Patch\n"


class _PreToolUseEvent(msgspec.Struct):
    """The fields we use; every other field of the event is ignored."""

    hook_event_name: str | None = None
    session_id: str | None = None
    cwd: str | None = None
    tool_name: str | None = None
    # Decoded by the tool's kind (msgspec takes no union with Raw: absent reads as null).
    tool_input: msgspec.Raw = msgspec.Raw(b"null")
    tool_use_id: str | None = None
    source: str | None = None  # SessionStart: startup, resume, clear, compact


_event_decoder = msgspec.json.Decoder(_PreToolUseEvent)
_shell_decoder = msgspec.json.Decoder(_ShellInput)
_edit_decoder = msgspec.json.Decoder(_EditInput)
_MCP_PREFIX = "mcp__"  # Claude Code and Codex name an MCP tool mcp__SERVER__TOOL
_encoder = msgspec.json.Encoder()


def pretooluse_event(
    command: str,
    *,
    cwd: str | None,
    session: str | None,
    tool_use_id: str | None = None,
    tool_name: str = "Bash",
    **fields: object,
) -> bytes:
    """The `PreToolUse` event an agent sends on a hook's stdin before running `command`.

    The fields the decoder reads; for `mentectl doctor`, the benchmark and the
    tests. A field given as None is left out. `fields` adds other top-level
    fields (e.g. `transcript_path`) or replaces these (e.g. `tool_input`).
    """
    event = {
        "session_id": session,
        "cwd": cwd,
        "hook_event_name": EVENT_NAME,
        "tool_name": tool_name,
        "tool_input": {"command": command},
        "tool_use_id": tool_use_id,
        **fields,
    }
    return _encoder.encode({name: value for name, value in event.items() if value is not None})


def text_of_answer(output: bytes) -> str | None:
    """The text a hook answer hands the model: a stop's reason or the extra context.

    The reverse of `render_context`/`render_deny`, for `mentectl doctor`, the
    benchmark and the tests; None when `output` is neither.
    """
    try:
        answer = msgspec.json.decode(output)
        # Copilot CLI's session-start answer has `additionalContext` at the top level.
        specific = answer.get("hookSpecificOutput", answer)
    except (msgspec.DecodeError, AttributeError):
        return None
    if not isinstance(specific, dict):
        return None
    text = specific.get("permissionDecisionReason", specific.get("additionalContext"))
    return text if isinstance(text, str) else None


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call the agent is about to make: one of a shell command, an MCP tool, a file edit."""

    command: str = ""  # a shell command line
    mcp_tool: str = ""  # an MCP tool, as SERVER/TOOL
    edited: tuple[str, ...] = ()  # the files an edit writes
    tool: str = ""  # the agent's name of the tool
    cwd: str | None = None
    session: str | None = None
    tool_use_id: str | None = None
    # The event came after the tool ran (Gemini CLI's `AfterTool`): it can no
    # longer be stopped, only followed by context.
    ran: bool = False

    def placed(
        self,
        *,
        tool: str,
        cwd: str | None,
        session: str | None,
        tool_use_id: str | None,
        ran: bool,
    ) -> ToolCall:
        """What this call does (its command, MCP tool, files), with where and when its
        event says it runs (a few times faster than `dataclasses.replace`)."""
        return ToolCall(
            command=self.command,
            mcp_tool=self.mcp_tool,
            edited=self.edited,
            tool=tool,
            cwd=cwd,
            session=session,
            tool_use_id=tool_use_id,
            ran=ran,
        )

    def kind_in_words(self) -> str:
        """What the call is, as the words for the model say it."""
        if self.command:
            return "command"
        return "tool call" if self.mcp_tool else "file edit"

    def describe(self) -> str:
        """The call as `mentectl log` shows it: the command, or the tool and its files."""
        if self.command:
            return self.command
        if self.mcp_tool:
            return f"MCP tool {self.mcp_tool}"
        return f"{self.tool} {' '.join(self.edited)}"


class SessionStarted(msgspec.Struct, frozen=True):
    """A session started (`source` "startup"), was resumed, or had its context emptied.

    Decoded for an agent that takes pinned rules at session start; `session` is
    None when the event carried no session id. `pinned_dropped`: the agent keeps
    no earlier session start's answer here (Copilot CLI on resume), so every
    pinned rule is handed over again, while the other rules the session was
    handed stay handed.
    """

    session: str | None
    cwd: str | None
    source: str
    pinned_dropped: bool = False

    @property
    def context_emptied(self) -> bool:
        """The agent compacted or cleared the model's context: what it was handed is gone."""
        return self.source in CONTEXT_EMPTIED


class ContextEmptied(msgspec.Struct, frozen=True):
    """The agent compacted or cleared the model's context in `session`."""

    session: str


class SettingsLayout(msgspec.Struct, frozen=True, kw_only=True):
    """How an agent's hook settings file holds our entry, for `mentectl hooks install`.

    Attributes:
        nested: entries sit in matcher groups, `hooks.<event>[g].hooks[h]` (Claude
            Code, Codex, Gemini CLI); otherwise each entry is an item of
            `hooks.<event>` itself (Copilot CLI, Cursor).
        command_key: the entry's field holding the command line.
        timeout_key: the entry's field holding the time limit, if it has one.
        timeout_per_second: units of that field per second (1000: milliseconds).
        top: top-level members the file must have (`{"version": 1}`), added when missing.
        enable: `(object, member)` of a setting that must be true for hooks to
            run on older versions (Gemini CLI `hooksConfig.enabled`): written when
            missing, removed again by the uninstall when the install added it
            (`mented_client.added_settings`).
        disabled: `(object, member, name)` of a list of hook names the agent
            skips, which it writes itself when the user turns a hook off (Gemini
            CLI `hooksConfig.disabled`, by `/hooks disable`): `name`, ours, leaves
            it with our hooks (a new install would be off without a word).
        hooks_only: the file holds hooks and nothing else: removed when no hook is left.
    """

    nested: bool = True
    command_key: str = "command"
    timeout_key: str | None = "timeout"
    timeout_per_second: int = 1
    top: Mapping[str, object] = msgspec.field(default_factory=dict)
    enable: tuple[str, str] | None = None
    disabled: tuple[str, str, str] | None = None
    hooks_only: bool = False

    def timeout_value(self, seconds: int) -> int:
        """The value of `timeout_key` for a limit of `seconds`."""
        return seconds * self.timeout_per_second

    def timeout_seconds(self, value: object) -> float | None:
        """An installed entry's time limit in seconds; None when it has no usable one."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return value / self.timeout_per_second


class McpSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Where an agent keeps its user-scope MCP servers, for `mentectl mcp install`.

    Attributes:
        how: how mentectl writes our entry there: "claude-cli" through the
            agent's own `claude mcp add` (Claude Code rewrites its file all the
            time), "codex-toml" as a `[mcp_servers.mented]` table of a TOML file,
            "json" as the member `mcpServers.mented` of a JSON file, "none" not at
            all (an agent without MCP support, or whose MCP settings mentectl has
            not checked: `note` says why), "by-hand" written by the user
            (opencode's file has a shape of its own: `note` says how).
        file_name: the file, in the agent's user config directory.
        beside_config_dir: the file is in the home directory unless the
            config directory is moved by its variable (Claude Code's `~/.claude.json`).
        entry: members our JSON entry has besides `command` and `args`
            (Copilot CLI's `type` and `tools`, as its own `mcp add` writes them).
        list_command: the agent's command that lists its MCP servers, for people.
        note: what to tell the user after registering, if anything.
    """

    how: Literal["claude-cli", "codex-toml", "json", "none", "by-hand"] = "json"
    file_name: str
    beside_config_dir: bool = False
    entry: Mapping[str, object] = msgspec.field(default_factory=dict)
    list_command: str | None = None
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class PreToolUseAgent:
    """An agent that speaks the shared `PreToolUse` shape.

    Attributes:
        name: the name on the shim's command line and in rule scopes.
        title: how people call the agent.
        shell_tools: the tool names whose `tool_input.command` is a shell command.
        edit_tools: the tool names that write the file `tool_input.file_path`
            (or `notebook_path`).
        patch_tools: the tool names whose `tool_input.command` is an apply_patch
            patch (Codex), which writes the files it names.
        mcp_prefix: how the agent's MCP tool names start (`mcp__SERVER__TOOL`).
        mcp_separator: what comes between the server and the tool in such a name.
        shell_condition: the pre-filter on a shell command as the agent writes it
            on a hook handler (Claude Code's `if`: `Bash({})`, `{}` a command
            pattern); None when the agent has none and runs the hook for every one.
        config_dir_env: the environment variable that moves its user config directory.
        config_dir_name: that directory's name in the home directory otherwise.
        settings_name: the user-level hook settings file, in that directory.
        project_settings_file: the hook settings file inside a project directory
            (teams commit it).
        project_local_file: the project's file for one person's settings, which
            is not committed (Claude Code's `.claude/settings.local.json`): where
            `hooks install --project` writes, since the hook names this machine's
            interpreter and socket; None when the agent has none.
        no_project_local_file: for an agent without one, why, and what to do instead.
        install_note: what to tell the user after installing, if anything.
        context_arrives: when the model reads a hook's extra context: "after" the
            tool ran (both agents put it next to the tool's result) or "before".
        context_channel: whether a hook answer can carry extra context to the model at
            all (False for Cursor and Kiro CLI: their rules go by a stop or not at all).
        can_stop: whether a deny is safe: it stops the one tool call and its reason
            reaches the model (False for Cline, whose `cancel` ends the whole task):
            without it every rule goes as context, checks that fail are told, never stopped.
        hook_file: the hook is an executable file of its own at `settings_path` (Cline's
            `PreToolUse`), written by `mented_client.agents.hook_file`, not an entry in JSON.
        session_from_process: its events carry no session id (Kiro CLI): the daemon takes
            the agent's process that ran the hook as the session (`mented.process_session`).
        blocks_by_exit: a stop is exit status 2 with the reason on stderr (the shim's
            `BLOCK` answer), not an answer on stdout.
        entry_trust: whether the agent will run an installed entry, for an agent
            that has a say of its own (Codex's `/hooks` trust); None: it always does.
        event_name: the event sent before a tool runs.
        after_event: the event sent after it ran, for an agent that reads hook
            context only then (Gemini CLI's `AfterTool`); its calls have `ran` set.
        post_tool_event: the event sent after a tool ran on which the checks of
            what a command did are answered (`mented.afterchecks`): `after_event`
            where the agent has one, else an event installed for that alone
            (`PostToolUse`); None: the agent has none we checked.
        context_emptied_events: events that by themselves mean the model's context
            was emptied (Copilot CLI's `PreCompact`), besides `SessionStart` with a
            source in `CONTEXT_EMPTIED`.
        pinned_rules: whether its `SessionStart` hook hands the pinned rules over
            (`render_session_context`); checked with the real client.
        session_start_sources: the `SessionStart` sources it hands them over on.
        pinned_dropped_sources: the sources after which the agent no longer has
            what an earlier session start handed over (`SessionStarted.pinned_dropped`).
        layout: how the settings file holds our entries.
        mcp: where and how mented's MCP server is registered with the agent.
    """

    name: str
    title: str
    shell_tools: frozenset[str] = frozenset({"Bash"})
    edit_tools: frozenset[str] = frozenset()
    patch_tools: frozenset[str] = frozenset()
    mcp_prefix: str = _MCP_PREFIX
    mcp_separator: str = "__"
    shell_condition: str | None = None
    config_dir_env: str
    config_dir_name: str
    settings_name: str
    project_settings_file: str
    project_local_file: str | None = None
    no_project_local_file: str | None = None
    install_note: str | None = None
    context_arrives: Literal["before", "after"] = "after"
    context_channel: bool = True
    can_stop: bool = True
    hook_file: bool = False
    session_from_process: bool = False
    blocks_by_exit: bool = False
    user_notices: bool = False  # shows a hook answer's `systemMessage` to the user
    entry_trust: Callable[[InstalledEntry], EntryTrust] | None = None
    event_name: str = EVENT_NAME
    after_event: str | None = None
    post_tool_event: str | None = None
    context_emptied_events: frozenset[str] = frozenset()
    pinned_rules: bool = False
    session_start_sources: frozenset[str] = SESSION_START_SOURCES
    pinned_dropped_sources: frozenset[str] = frozenset()
    layout: SettingsLayout = field(default_factory=SettingsLayout)
    mcp: McpSettings

    # ------------------------------------------------------------ event and output

    def takes_context(self, call: ToolCall) -> bool:  # noqa: ARG002 - agents that differ use it
        """Whether an answer of extra context to this call's event reaches the model at all."""
        return self.context_channel

    def sample_event(self, command: str, *, cwd: str, session: str) -> bytes:
        """The event this agent sends before running the shell `command` (for `mentectl doctor`)."""
        return pretooluse_event(
            command,
            cwd=cwd,
            session=session,
            tool_use_id=f"toolu_{session}",
            tool_name=min(self.shell_tools),
            hook_event_name=self.event_name,
        )

    def tool_event(
        self, tool: str, files: Sequence[str] = (), *, cwd: str, session: str | None = None
    ) -> bytes:
        """The event this agent sends before calling `tool` (by its own name for it) that
        writes `files`, or an MCP tool's call without arguments (for `mentectl explain`)."""
        return pretooluse_event(
            "",
            cwd=cwd,
            session=session,
            tool_name=tool,
            tool_input=self.tool_input(tool, files),
            hook_event_name=self.event_name,
        )

    def tool_input(self, tool: str, files: Sequence[str]) -> dict[str, object]:
        """`tool_input` of `tool_event`: the patch of a patch tool, an edit's first file."""
        if tool in self.patch_tools:
            return {"command": patch_of(files)}
        return {"file_path": files[0]} if files else {}

    def decode(self, event: bytes) -> ToolCall | SessionStarted | ContextEmptied | None:
        """The tool call in `event`, a session start or a context emptied, or None when
        we do not act on it."""
        try:
            decoded = _event_decoder.decode(event)
        # msgspec gives up on very deep nesting with RecursionError, not DecodeError.
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        if self.pinned_rules and decoded.hook_event_name == SESSION_START:
            if decoded.source not in self.session_start_sources:
                return None
            return SessionStarted(
                session=decoded.session_id or None,
                cwd=decoded.cwd or None,
                source=decoded.source,
                pinned_dropped=decoded.source in self.pinned_dropped_sources,
            )
        if decoded.hook_event_name == SESSION_START or (
            decoded.hook_event_name in self.context_emptied_events
        ):
            emptied = decoded.hook_event_name != SESSION_START or decoded.source in CONTEXT_EMPTIED
            if emptied and decoded.session_id:
                return ContextEmptied(session=decoded.session_id)
            return None
        ran = decoded.hook_event_name is not None and decoded.hook_event_name in (
            self.after_event,
            self.post_tool_event,
        )
        if decoded.hook_event_name not in (None, self.event_name) and not ran:
            return None
        tool = decoded.tool_name or ""
        try:
            call = self._tool_call(tool, decoded.tool_input)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        if call is None:
            return None
        return call.placed(
            tool=tool,
            cwd=decoded.cwd or None,
            session=decoded.session_id or None,
            tool_use_id=decoded.tool_use_id or None,
            ran=ran,
        )

    def _tool_call(self, tool: str, tool_input: msgspec.Raw) -> ToolCall | None:
        """What the tool does, from its name and input; None when it is nothing we know.

        Raises:
            msgspec.DecodeError, msgspec.ValidationError: the input is not what the tool takes.
        """
        if tool in self.shell_tools:
            command = _shell_decoder.decode(tool_input).command
            return ToolCall(command=command) if command and command.strip() else None
        if tool in self.edit_tools:
            edit = _edit_decoder.decode(tool_input)
            path = edit.file_path or edit.notebook_path
            return ToolCall(edited=(path,)) if path else None
        if tool in self.patch_tools:
            files = patched_files(_shell_decoder.decode(tool_input).command or "")
            return ToolCall(edited=files) if files else None
        if tool.startswith(self.mcp_prefix):
            server, _, name = tool[len(self.mcp_prefix) :].partition(self.mcp_separator)
            return ToolCall(mcp_tool=f"{server}/{name}") if server and name else None
        return None

    def render_context(self, text: str) -> bytes:
        """Stdout that hands `text` to the model as extra context (nothing without a channel:
        `takes_context` keeps it from being asked then)."""
        if not self.context_channel:
            return b""
        return _encoder.encode(
            {"hookSpecificOutput": {"hookEventName": EVENT_NAME, "additionalContext": text}}
        )

    def render_after(self, text: str) -> bytes:
        """Stdout of the `post_tool_event` hook that hands `text` to the model."""
        return _encoder.encode(
            {
                "hookSpecificOutput": {
                    "hookEventName": self.post_tool_event,
                    "additionalContext": text,
                }
            }
        )

    def answer_text(self, answer: bytes) -> str | None:
        """The text an answer of `render_*` hands the model (a stop's reason or the
        context); None when it is neither."""
        return text_of_answer(answer)

    @property
    def checks_only_after(self) -> bool:
        """Whether the event after a tool ran is installed for the checks alone (no rules
        are handed over there)."""
        return self.post_tool_event is not None and self.after_event is None

    def with_notice(self, answer: bytes, notice: str) -> bytes | None:
        """`answer` with a one-line `notice` for the user (not the model), or None when
        the agent shows hooks' messages to no one (`user_notices`)."""
        if not self.user_notices:
            return None
        document: dict[str, Any] = msgspec.json.decode(answer) if answer else {}
        document["systemMessage"] = notice
        return _encoder.encode(document)

    def render_session_context(self, text: str) -> bytes:
        """Stdout of a `SessionStart` hook that hands `text` to the model."""
        return _encoder.encode(
            {"hookSpecificOutput": {"hookEventName": SESSION_START, "additionalContext": text}}
        )

    def render_deny(self, reason: str) -> bytes:
        """Stdout that stops the tool call and shows `reason` to the model."""
        return _encoder.encode(
            {
                "hookSpecificOutput": {
                    "hookEventName": EVENT_NAME,
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }
        )

    # ------------------------------------------------------------------ installing

    def config_dir_override(self) -> Path | None:
        """The user config directory the environment names (`config_dir_env`), if any."""
        override = os.environ.get(self.config_dir_env)
        return Path(override) if override else None

    def config_dir(self) -> Path:
        """The agent's user config directory: `$config_dir_env`, else `~/config_dir_name`."""
        return self.config_dir_override() or paths.home() / self.config_dir_name

    def settings_path(self) -> Path:
        """The user-level settings file that holds the agent's hooks."""
        return self.config_dir() / self.settings_name

    def mcp_config_path(self) -> Path:
        """The file that holds the agent's user-scope MCP servers (`mcp`)."""
        if self.mcp.beside_config_dir:
            return (self.config_dir_override() or paths.home()) / self.mcp.file_name
        return self.config_dir() / self.mcp.file_name

    def project_settings_path(self, project: Path) -> Path:
        """The project-level settings file inside `project` (the one teams commit)."""
        return project / self.project_settings_file

    def project_install_paths(self, project: Path) -> list[Path]:
        """The project files that can hold our hook: where an install writes first.

        The local, uncommitted file when the agent has one, then the shared file
        (where earlier installs wrote; status, doctor and uninstall look there too).
        """
        shared = self.project_settings_path(project)
        if self.project_local_file is None:
            return [shared]
        return [project / self.project_local_file, shared]

    def hook_entry(
        self, command: str, timeout_s: int, event: str = EVENT_NAME, condition: str | None = None
    ) -> dict[str, Any]:
        """One command hook as it appears in the settings file, for `event`.

        `condition`: the agent's pre-filter for it (Claude Code's `if`), if any.
        """
        entry: dict[str, Any] = {"type": "command", "command": command, "timeout": timeout_s}
        if condition is not None:
            entry["if"] = condition
        if event == SESSION_START and not self.pinned_rules:
            entry["statusMessage"] = CONTEXT_RESET_MESSAGE
        elif event in STATUS_MESSAGES:
            entry["statusMessage"] = STATUS_MESSAGES[event]
        return entry

    def mcp_tool_pattern(self, glob: str) -> str:
        """The agent's tool names for the MCP tools a SERVER/TOOL glob names, as a regex."""
        from mented.registration import glob_to_regex  # noqa: PLC0415 - installing, not hooks

        server, _, tool = glob.partition("/")
        return f"{self.mcp_prefix}{glob_to_regex(server)}{self.mcp_separator}{glob_to_regex(tool)}"

    def mcp_tool_sample(self, glob: str) -> str:
        """One agent tool name the SERVER/TOOL glob names (to check a matcher with)."""
        from mented.registration import sample_name  # noqa: PLC0415 - as mcp_tool_pattern

        server, _, tool = glob.partition("/")
        return f"{self.mcp_prefix}{sample_name(server)}{self.mcp_separator}{sample_name(tool)}"

    def file_edit_tools(self) -> list[str]:
        """The agent's tools that write files, sorted."""
        return sorted(self.edit_tools | self.patch_tools)

    def other_tools(self, needs: HookNeeds) -> tuple[list[str], list[str]]:
        """The tools besides the shell that `needs` names: exact names, and regexes."""
        names = self.file_edit_tools() if needs.edits else []
        return names, [self.mcp_tool_pattern(glob) for glob in needs.mcp_tools]

    def shell_conditions(self, needs: HookNeeds) -> list[str]:
        """The pre-filters for the shell tool: one per handler; [] when the agent has none."""
        if self.shell_condition is None:
            return []
        return [self.shell_condition.format(pattern) for pattern in needs.command_patterns()]

    def hook_group(self, command: str, timeout_s: int) -> dict[str, Any]:
        """A matcher group under `hooks.PreToolUse` that runs our hook for every shell command."""
        return {
            "matcher": tool_matcher(sorted(self.shell_tools), []),
            "hooks": [self.hook_entry(command, timeout_s)],
        }

    def pretooluse_groups(
        self, command: str, timeout_s: int, needs: HookNeeds | None, *, prefilter: bool = True
    ) -> list[dict[str, Any]]:
        """Our matcher groups under `hooks.PreToolUse`: exactly the tool calls `needs` names.

        None for `needs`: every shell command and nothing else (an install that
        knows no action table). With a pre-filter (`shell_condition`, and
        `prefilter`), shell commands get a group of their own with one handler
        per program condition, and the other tools a second group; without,
        one group whose matcher names the shell and the other tools.
        """
        if needs is None:
            return [self.hook_group(command, timeout_s)]
        shells = sorted(self.shell_tools) if needs.commands else []
        names, patterns = self.other_tools(needs)
        conditions = self.shell_conditions(needs) if prefilter else []
        if not conditions:
            if not (shells or names or patterns):
                return []
            return [
                {
                    "matcher": tool_matcher(shells + names, patterns),
                    "hooks": [self.hook_entry(command, timeout_s)],
                }
            ]
        groups = [
            {
                "matcher": tool_matcher(shells, []),
                "hooks": [
                    self.hook_entry(command, timeout_s, condition=condition)
                    for condition in conditions
                ],
            }
        ]
        if names or patterns:
            groups.append(
                {
                    "matcher": tool_matcher(names, patterns),
                    "hooks": [self.hook_entry(command, timeout_s)],
                }
            )
        return groups

    def hook_groups(
        self,
        command: str,
        timeout_s: int,
        needs: HookNeeds | None = None,
        *,
        prefilter: bool = True,
    ) -> dict[str, list[dict[str, Any]]]:
        """Our matcher groups for each event we install, by event name.

        The same command line serves both: the shim passes stdin through and the
        daemon tells the events apart by `hook_event_name`. `needs` and
        `prefilter` as for `pretooluse_groups`.
        """
        groups = {
            EVENT_NAME: self.pretooluse_groups(command, timeout_s, needs, prefilter=prefilter),
            SESSION_START: [
                {
                    "matcher": SESSION_START_MATCHER
                    if self.pinned_rules
                    else CONTEXT_EMPTIED_MATCHER,
                    "hooks": [self.hook_entry(command, timeout_s, SESSION_START)],
                }
            ],
        }
        if self.checks_only_after:
            groups[POST_TOOL_USE] = self.post_tool_groups(command, timeout_s, needs, prefilter)
        return groups

    def post_tool_groups(
        self, command: str, timeout_s: int, needs: HookNeeds | None, prefilter: bool
    ) -> list[dict[str, Any]]:
        """Our groups under `PostToolUse`: the shell commands whose effect is checked
        once they ran (`needs.after`), filtered as before the command; None for `needs`:
        every shell command."""
        from mented.registration import HookNeeds  # noqa: PLC0415 - as mcp_tool_pattern

        shell = None if needs is None else HookNeeds(commands=needs.after)
        return [
            {
                **group,
                "hooks": [
                    self.hook_entry(command, timeout_s, POST_TOOL_USE, condition=hook.get("if"))
                    for hook in group["hooks"]
                ],
            }
            for group in self.pretooluse_groups(command, timeout_s, shell, prefilter=prefilter)
        ]

    def registration_summary(self, needs: HookNeeds, *, prefilter: bool = True) -> str:
        """The tool calls `hook_groups` registers the hook for, in a few words."""
        summary = needs.summary()
        if needs.commands and (not prefilter or self.shell_condition is None):
            summary += " (every shell command)"
        return summary

    def registration_gaps(self, installed: Iterable[InstalledEntry], needs: HookNeeds) -> list[str]:
        """What `needs` names that none of the `installed` entries for `event_name` runs for.

        Each kind of tool call is checked with one sample (`git commit`, the
        `mcp__x__create_pull_request` a glob names, each file-writing tool): an
        entry covers it when its matcher takes the tool name and its condition,
        if it has one, the command. A matcher or condition that cannot be read
        here counts as covering (no false alarm).
        """
        entries = [entry for entry in installed if entry.event == self.event_name]
        gaps = []
        runs_shell = self._shell_cover(entries)
        missing_commands = [" ".join(words) for words in needs.commands if not runs_shell(words)]
        if missing_commands:
            gaps.append(f"shell commands ({', '.join(missing_commands)})")
        if needs.edits:
            tools = [
                tool
                for tool in self.file_edit_tools()
                if not any(self._entry_runs(entry, tool, None) for entry in entries)
            ]
            if tools:
                gaps.append(f"file edits ({', '.join(tools)})")
        gaps.extend(
            f"MCP tool {glob}"
            for glob in needs.mcp_tools
            if not any(
                self._entry_runs(entry, self.mcp_tool_sample(glob), None) for entry in entries
            )
        )
        return gaps

    def _shell_cover(self, entries: list[InstalledEntry]) -> Callable[[tuple[str, ...]], bool]:
        """Whether some entry runs for a shell command holding these words, as
        `_entry_runs` for each entry, with each entry read once (not once per command).

        A command is first looked up among the conditions by its own pattern
        (`*git*commit*` for `git commit`, which matches it): a settings file with
        hundreds of conditions is not searched through for each command.
        """
        from mented.registration import wildcard_regex  # noqa: PLC0415 - as mcp_tool_pattern

        shell = min(self.shell_tools)
        patterns: dict[str, None] = {}
        for entry in entries:
            if not matcher_takes(entry.matcher, shell):
                continue
            condition = entry.handler.get("if")
            if not isinstance(condition, str) or not condition.strip():
                return lambda _words: True
            if self.shell_condition is None:
                return lambda _words: True  # the agent does not read conditions
            name, _, rest = condition.strip().partition("(")
            if name != shell:
                continue
            if not rest:
                return lambda _words: True
            patterns[rest.removesuffix(")")] = None
        regexes = [wildcard_regex(pattern) for pattern in patterns]

        def runs(words: tuple[str, ...]) -> bool:
            if "*" + "*".join(words) + "*" in patterns:
                return True
            command = " ".join(words)
            return any(regex.fullmatch(command) for regex in regexes)

        return runs

    def _entry_runs(self, entry: InstalledEntry, tool: str, command: str | None) -> bool:
        """Whether the agent runs `entry` for a call of `tool` (with this shell command)."""
        if not matcher_takes(entry.matcher, tool):
            return False
        condition = entry.handler.get("if")
        if not isinstance(condition, str) or not condition.strip():
            return True
        if self.shell_condition is None:
            return True  # the agent does not read conditions
        name, _, rest = condition.strip().partition("(")
        if name != tool:
            return False
        if not rest or command is None:
            return True
        from mented.registration import wildcard_matches  # noqa: PLC0415 - as mcp_tool_pattern

        return wildcard_matches(rest.removesuffix(")"), command)

    @property
    def hook_events(self) -> list[str]:
        """The events `mentectl hooks install` adds an entry under."""
        return [EVENT_NAME, SESSION_START, *([POST_TOOL_USE] if self.checks_only_after else [])]


# ------------------------------------------------------------ installing


def tool_matcher(names: list[str], patterns: list[str]) -> str:
    """A hook `matcher` that takes exactly these tool names and regexes.

    Plain names alone stay a plain `A|B` list, which both agents compare
    exactly. With regexes it is one anchored regular expression: both agents
    search a regex matcher anywhere in the tool name (Claude Code `RegExp.test`,
    Codex `Regex::is_match`), so `Bash` alone would also take `BashOutput`.
    """
    if not patterns:
        return "|".join(names)
    alternatives = [re.escape(name) for name in names] + patterns
    return "^(?:" + "|".join(alternatives) + ")$"


def matcher_takes(matcher: str | None, tool: str) -> bool:
    """Whether an installed `matcher` takes `tool`, as both agents read it.

    No matcher, `*` or an empty one takes every tool; a plain `A|B` list is
    compared exactly; anything else is searched as a regular expression. One
    this Python cannot read counts as taking it (no false alarm).
    """
    if not matcher or matcher == "*":
        return True
    if re.fullmatch(r"[A-Za-z0-9_|]+", matcher):
        return tool in matcher.split("|")
    try:
        return re.search(matcher, tool) is not None
    except re.error:
        return True


# Installed next to the PreToolUse entry: both agents send `SessionStart` with
# `source` "startup" for a new session, "resume" for a resumed one, "compact"
# after compacting the context and "clear" after /clear: the moments the pinned
# rules are handed over (again). Claude Code matches a plain `a|b|c` matcher
# exactly against the source, Codex as a regex; both read this one as "any of
# the four". (Older installs had "clear|compact": `hooks install` widens it.)
SESSION_START_MATCHER = "|".join(sorted(SESSION_START_SOURCES))
# An agent that takes no pinned rules (`pinned_rules` False) needs only these two.
CONTEXT_EMPTIED_MATCHER = "|".join(sorted(CONTEXT_EMPTIED))

# Shown by the agent while the hook runs (both accept `statusMessage` on a
# command hook); it names mented, so that a user who sees it knows whose it is.
STATUS_MESSAGES = {
    EVENT_NAME: "mented: your rules for this command",
    SESSION_START: "mented: your pinned rules",
    POST_TOOL_USE: "mented: checking what the command did",
}
CONTEXT_RESET_MESSAGE = "mented: context reset, rules will be handed over again"


class InstalledEntry(msgspec.Struct, frozen=True):
    """One of our entries as found in a settings file: `hooks.<event>[group].hooks[hook]`."""

    settings: Path
    event: str
    group: int
    hook: int
    handler: Mapping[str, Any]  # the hook object as written
    matcher: str | None  # its group's matcher


class EntryTrust(msgspec.Struct, frozen=True):
    """Whether the agent will run an installed entry.

    Attributes:
        state: the agent's verdict in a few words ("trusted", "not trusted yet", ...).
        problem: why it will not run; None when it runs.
        fix: the step that makes it run, when it does not.
    """

    state: str
    problem: str | None = None
    fix: str | None = None


@dataclass(frozen=True, kw_only=True)
class EveryCallAgent(PreToolUseAgent):
    """An agent whose hook file lists one flat entry per event, for every call of it.

    Copilot CLI and Cursor filter nothing by the action table: the hook runs for
    every call of their events (`registered_for` says which), so a registration
    never lags the table and has no gaps to report.
    """

    registered_for: str = "every shell command"

    def hook_group(self, command: str, timeout_s: int) -> dict[str, Any]:
        return self.hook_entry(command, timeout_s)

    def hook_groups(
        self,
        command: str,
        timeout_s: int,
        needs: HookNeeds | None = None,  # noqa: ARG002 - the registration is the same for any table
        *,
        prefilter: bool = True,  # noqa: ARG002 - there is no command filter
    ) -> dict[str, list[dict[str, Any]]]:
        """One entry per event, whatever the action table names."""
        return {event: [self.hook_entry(command, timeout_s, event)] for event in self.hook_events}

    def registration_summary(self, needs: HookNeeds, *, prefilter: bool = True) -> str:  # noqa: ARG002
        return self.registered_for

    def registration_gaps(self, installed: Iterable[InstalledEntry], needs: HookNeeds) -> list[str]:  # noqa: ARG002
        """None: what `hook_groups` registers does not depend on the table."""
        return []
