"""`mentectl mcp`: run mented's MCP server, and register it with each agent.

- `mentectl mcp [--agent NAME]` serves the MCP tools on stdin/stdout (see
  `mented_client.mcp_server`, imported only here: the SDK is an optional extra
  and `mentectl`'s other verbs must stay fast).
- `mentectl mcp install AGENT` registers it at user scope, where and how the
  agent's own module says (`Agent.mcp`, `mented.agents.pretooluse.McpSettings`);
  this module only knows the three ways of writing it (`WRITERS`; "none": the
  agent's own module says why mentectl does not register it there; "by-hand":
  the user adds the entry its note shows):
  - "claude-cli": through the agent's own CLI (`claude mcp add --scope user`),
    because running Claude Code sessions rewrite `~/.claude.json` all the time;
    without `claude` on PATH it fails (exit 1), naming the exact command to
    run, and `doctor` offers that command rather than `mcp install` again.
  - "codex-toml": Codex's `config.toml` (`$CODEX_HOME`), `[mcp_servers.mented]`:
    only that table's lines are added or replaced, every other byte stays.
  - "json": the member `mcpServers.mented` of a JSON file (Gemini CLI's and
    Qwen Code's `settings.json`, Copilot CLI's `mcp-config.json`, Cursor's
    `mcp.json`), spliced in as the hooks are (`mented_client.hook_settings`):
    every other byte stays, a backup of the previous file is kept beside it.
  - "none": not registered (pi has no MCP support; some agents' MCP settings are
    not checked): install says why and fails; "by-hand": opencode, whose entry the
    user adds as its note shows.
- `mentectl mcp uninstall AGENT` takes our entry out again. A file left with
  nothing in it is removed, with the directories that leaves empty up to the
  agent's config directory; an install's backup goes once it holds nothing the
  file does not.
- `mentectl mcp status` says, per agent, whether it is registered and runs.

`install_mcp`, `uninstall_mcp` and `mcp_registration` are the functions
`mentectl setup`, `mentectl uninstall` and `doctor` call.

The registered command is this interpreter, chosen as for the service
(`service_manager.daemon_interpreter`), running `mented_client.cli`, so it
finds this installation whatever PATH the agent has. Every agent's entry ends
in `--fallback-socket PATH`, the socket mentectl uses at install time, exactly
as the hook's command line ends in it: an agent may start its servers without
the environment that finds the daemon (Codex passes only HOME, PATH, USER, ...;
Gemini CLI and Copilot CLI filter theirs; a desktop launcher or an ssh session
may lack XDG_RUNTIME_DIR), and then the default would be /tmp/mented-UID while
the daemon listens in /run/user/UID. As for the hook, `$MENTED_SOCKET` in the
agent's environment wins over it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mented import paths
from mented.agents import AGENTS, DEFAULT_AGENT, Agent
from mented.memory import InvalidInputError
from mented_client import mcp_front
from mented_client.commands.output import CommandError, escape_controls, print_json
from mented_client.files import display_path, remove_file, write_atomically
from mented_client.hook_settings import (
    MCP_SERVER_NAME,
    MCP_SERVERS,
    SettingsError,
    backup_kept,
    mcp_server,
    read_settings,
    with_mcp_server,
    without_mcp_server,
    write_without_ours,
)
from mented_client.scope import agent_option, check_agent
from mented_client.service_manager import daemon_interpreter

if TYPE_CHECKING:  # argparse's class is not subscriptable at run time
    from collections.abc import Callable

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]  # noqa: SLF001 - argparse's own type

SERVER_NAME = MCP_SERVER_NAME
CLAUDE_TIMEOUT_S = 120  # `claude` is a Node program: slow to start on a cold cache
SDK_MISSING = (
    "the MCP server needs the MCP Python SDK 2.x, an optional dependency: "
    "install it with `pip install 'mented[mcp]'` (into mented's environment)"
)


def register(subparsers: SubParsers, common: argparse.ArgumentParser) -> None:
    mcp = subparsers.add_parser(
        "mcp",
        help="run the MCP server that lets the agent remember and supersede rules",
        description="Without a verb: serve mented's MCP tools on stdin/stdout (the agent "
        "starts this itself once it is registered: see `mentectl mcp install`).",
    )
    mcp.add_argument(
        "--agent",
        type=agent_option,
        default=DEFAULT_AGENT,
        help="the agent being served: whose rules `rules_for_action` shows and what "
        f"'this agent only' means (default: {DEFAULT_AGENT})",
    )
    mcp.add_argument(
        "--project-dir",
        metavar="DIR",
        help="the session's project directory (default: the working directory)",
    )
    mcp.add_argument(
        "--fallback-socket",
        metavar="PATH",
        help="the daemon's socket when neither --socket nor $MENTED_SOCKET names one "
        "(`mcp install` writes in the socket it used, as the hook does)",
    )
    mcp.set_defaults(handler=run_server)
    verbs = mcp.add_subparsers(dest="verb", metavar="VERB")

    install = verbs.add_parser(
        "install", parents=[common], help="register the MCP server with an agent (user scope)"
    )
    install.add_argument(
        "target", metavar="AGENT", choices=sorted(AGENTS), help=", ".join(sorted(AGENTS))
    )
    install.set_defaults(handler=run_install)

    uninstall = verbs.add_parser(
        "uninstall", parents=[common], help="remove the MCP server's registration from an agent"
    )
    uninstall.add_argument(
        "target", metavar="AGENT", choices=sorted(AGENTS), help=", ".join(sorted(AGENTS))
    )
    uninstall.set_defaults(handler=run_uninstall)

    status = verbs.add_parser(
        "status", parents=[common], help="whether the MCP server is registered with each agent"
    )
    status.set_defaults(handler=run_status)


# ------------------------------------------------------------------- the command


def server_command(agent: str, socket: str | Path | None = None) -> list[str]:
    """The command an agent runs to start mented's MCP server.

    `socket` is mentectl's `--socket`; with `$MENTED_SOCKET` and the default it
    gives the socket written in as the server's fallback (see the module's note).

    Raises:
        CommandError: this interpreter is a shim script (see `daemon_interpreter`).
    """
    # The interpreter the daemon's service would run: mented's packages (and the
    # MCP SDK) are in its environment, and no pyenv shim is started per session.
    fallback = paths.socket_path(socket).absolute()
    return [
        str(daemon_interpreter()),
        "-m",
        "mented_client.cli",
        "mcp",
        "--agent",
        agent,
        "--fallback-socket",
        str(fallback),
    ]


@dataclass(frozen=True)
class Registration:
    """Whether an agent will start mented's MCP server, and what it runs."""

    agent: str
    registered: bool
    where: str  # the file holding the registration
    command: list[str] | None = None
    problem: str | None = None  # registered, but it cannot work as it is
    supported: bool = True  # False: mentectl does not register it with this agent

    @property
    def ok(self) -> bool:
        return self.registered and self.problem is None

    def describe(self) -> str:
        if not self.supported:
            return f"{self.agent}: mentectl does not register its MCP server here ({self.where})"
        if not self.registered:
            why = f" ({self.problem})" if self.problem else ""
            return (
                f"{self.agent}: MCP server not registered in {self.where}{why}; "
                f"run `mentectl mcp install {self.agent}`"
            )
        runs = shlex.join(self.command or [])
        line = f"{self.agent}: MCP server registered in {self.where}: {runs}"
        if self.problem:
            line += f"\n  problem: {self.problem}; run `mentectl mcp install {self.agent}` again"
        return line


def _check_command(command: list[str]) -> str | None:
    if not command or not command[0]:
        return "the entry has no command"
    program = shutil.which(command[0])
    if program is None:
        return f"it runs {command[0]}, which does not exist or is not executable"
    return None


def _known_agent(agent: str) -> Agent:
    """The agent named `agent` when mented serves it (`check_agent`); a usage error otherwise."""
    try:
        name: str = check_agent(agent)
    except InvalidInputError as exc:
        raise CommandError(str(exc), status=2) from exc
    return AGENTS[name]


def mcp_registration(agent: str) -> Registration:
    """Whether `agent` has mented's MCP server registered, in its own configuration."""
    known = _known_agent(agent)
    return WRITERS[known.mcp.how].registration(known)


def install_mcp(agent: str, *, socket: str | Path | None = None) -> str:
    """Register mented's MCP server with `agent`; returns what was done, for the user.

    Raises:
        CommandError: the registration failed; the message says why and what to do.
    """
    known = _known_agent(agent)
    message = WRITERS[known.mcp.how].install(known, server_command(known.name, socket))
    if not sdk_installed():
        message += f"\nwarning: {SDK_MISSING}"
    return message


def sdk_installed() -> bool:
    """Whether this environment has the MCP SDK that `mentectl mcp` needs."""
    return importlib.util.find_spec("mcp") is not None


def uninstall_mcp(agent: str) -> str:
    """Remove mented's MCP server from `agent`'s configuration; returns what was done.

    Raises:
        CommandError: the configuration cannot be read or written; it is left as it was.
    """
    known = _known_agent(agent)
    return WRITERS[known.mcp.how].uninstall(known)


def _registered(agent: Agent) -> str:
    """What to say after a registration: where the agent shows it, and its note."""
    lists = f" (`{agent.mcp.list_command}` lists them)" if agent.mcp.list_command else ""
    line = f"new {agent.title} sessions have mented's tools{lists}"
    return line + (f"\n{agent.mcp.note}" if agent.mcp.note else "")


# ------------------------------------------------------------------ Claude Code


def claude_config_file() -> Path:
    """Where Claude Code keeps user-scope MCP servers (`mcpServers` in `.claude.json`).

    In `$CLAUDE_CONFIG_DIR` when that is set; otherwise in the home directory,
    beside `~/.claude` rather than in it.
    """
    return AGENTS["claude-code"].mcp_config_path()


def _claude_registration(agent: Agent) -> Registration:
    path = agent.mcp_config_path()
    where = f"{path} (user scope)"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Registration(agent.name, registered=False, where=where)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return Registration(agent.name, registered=False, where=where, problem=f"unreadable: {exc}")
    servers = doc.get(MCP_SERVERS) if isinstance(doc, dict) else None
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    if not isinstance(entry, dict):
        return Registration(agent.name, registered=False, where=where)
    command = _entry_command(entry)
    return Registration(
        agent.name, registered=True, where=where, command=command, problem=_check_command(command)
    )


def _claude_cli(*args: str) -> subprocess.CompletedProcess[str]:
    claude = shutil.which("claude")
    assert claude is not None
    try:
        return subprocess.run(  # noqa: S603 - argv list, no shell
            [claude, *args],
            # In the home directory, not the one mentectl was started in: the
            # registration is the user's (`--scope user`), and Claude Code reads a
            # project's `.claude/` and `.mcp.json` from its working directory.
            cwd=paths.home(),
            capture_output=True,
            text=True,
            timeout=CLAUDE_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommandError(f"`claude {' '.join(args)}` failed: {exc}") from exc


def install_fix(agent: str, *, socket: str | Path | None = None) -> str:
    """What registers the MCP server with `agent`, for `doctor`'s fix lines.

    `mentectl mcp install`, unless it cannot work here: Claude Code's is then the
    `claude mcp add` command to run where `claude` is.
    """
    known = _known_agent(agent)
    if known.mcp.how == "none":
        return f"none needed: mentectl does not register it with {known.title} (the hook works)"
    if known.mcp.how == "by-hand":
        return f"{known.mcp.note}: {shlex.join(server_command(known.name, socket))}"
    if known.mcp.how == "claude-cli" and shutil.which("claude") is None:
        command = server_command(known.name, socket)
        add = ["claude", "mcp", "add", "--scope", "user", SERVER_NAME, "--", *command]
        return f"`claude` is not on PATH here; run `{shlex.join(add)}` where it is"
    return f"`mentectl mcp install {known.name}`"


def _install_claude(agent: Agent, command: list[str]) -> str:
    add = ["mcp", "add", "--scope", "user", SERVER_NAME, "--", *command]
    if shutil.which("claude") is None:
        # Not done, so not a success: a script or `setup` must be able to tell.
        raise CommandError(
            "Claude Code's `claude` command is not on PATH, so the MCP server was not "
            f"registered. Register it by running:\n  {shlex.join(['claude', *add])}"
        )
    current = _claude_registration(agent)
    if current.registered and current.command == command:
        return f"the MCP server is already registered with Claude Code ({current.where})"
    if current.registered:
        # `claude mcp add` refuses a name that exists: replace our own old entry.
        _claude_cli("mcp", "remove", "--scope", "user", SERVER_NAME)
    result = _claude_cli(*add)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise CommandError(
            f"`claude {shlex.join(add)}` failed ({result.returncode}): {detail}; "
            "run it yourself to see what Claude Code says"
        )
    return (
        f"registered the MCP server with Claude Code (user scope): {shlex.join(command)}\n"
        "new Claude Code sessions have mented's tools (`/mcp` lists them)"
    )


def _uninstall_claude(agent: Agent) -> str:
    remove = ["mcp", "remove", "--scope", "user", SERVER_NAME]
    if not _claude_registration(agent).registered:
        return "the MCP server is not registered with Claude Code: nothing to do"
    if shutil.which("claude") is None:
        return (
            "Claude Code's `claude` command is not on PATH. Remove the MCP server by running:\n"
            f"  {shlex.join(['claude', *remove])}"
        )
    result = _claude_cli(*remove)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise CommandError(f"`claude {shlex.join(remove)}` failed ({result.returncode}): {detail}")
    return "removed the MCP server from Claude Code"


# ------------------------------------------------------------------------ Codex


def codex_config_file() -> Path:
    """Codex's config file: `$CODEX_HOME/config.toml`, else `~/.codex/config.toml`."""
    return AGENTS["codex"].mcp_config_path()


_OUR_HEADER = re.compile(
    r"^[ \t]*\[[ \t]*mcp_servers[ \t]*\.[ \t]*"
    r"""(?:mented|"mented"|'mented')[ \t]*\][ \t]*(?:#.*)?$""",
    re.MULTILINE,
)
_ANY_HEADER = re.compile(r"^[ \t]*\[", re.MULTILINE)
_BLANK_OR_COMMENT = re.compile(r"[ \t]*(?:#.*)?")


def toml_string(value: str) -> str:
    """`value` as a TOML basic string."""
    out = ['"']
    for ch in value:
        if ch in {'"', "\\"}:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def codex_table(command: list[str]) -> str:
    """Our `[mcp_servers.mented]` table, as written into config.toml."""
    args = ", ".join(toml_string(arg) for arg in command[1:])
    return f"[mcp_servers.{SERVER_NAME}]\ncommand = {toml_string(command[0])}\nargs = [{args}]\n"


def _parse(text: str, path: Path | str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CommandError(
            f"{path} is not valid TOML ({exc}); fix it first, then run this again"
        ) from exc


def _our_entry(doc: dict[str, Any]) -> dict[str, Any] | None:
    servers = doc.get("mcp_servers")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    return entry if isinstance(entry, dict) else None


def _entry_command(entry: dict[str, Any]) -> list[str]:
    args = entry.get("args") or []
    return [str(entry.get("command") or ""), *(str(arg) for arg in args)]


def _table_span(text: str) -> tuple[int, int] | None:
    """Where our table's lines are: its header to its last key line (trailing comments stay)."""
    headers = list(_OUR_HEADER.finditer(text))
    if not headers:
        return None
    if len(headers) > 1:
        raise CommandError(
            f"[mcp_servers.{SERVER_NAME}] appears {len(headers)} times; keep one and run this again"
        )
    return table_span(text, headers[0])


def table_span(text: str, header: re.Match[str]) -> tuple[int, int]:
    """Where the TOML table whose `header` line matched is: from the header to its
    last key line (blank lines and comments before the next table stay with it)."""
    start = header.start()
    body = text.index("\n", header.end()) + 1 if "\n" in text[header.end() :] else len(text)
    following = _ANY_HEADER.search(text, body)
    end = following.start() if following else len(text)
    # Blank lines and comments just above the next table belong to that table.
    lines = text[body:end].splitlines(keepends=True)
    while lines and _BLANK_OR_COMMENT.fullmatch(lines[-1].rstrip("\r\n")):
        end -= len(lines.pop())
    return start, end


def _other_settings(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` without our table (for comparing everything else)."""
    copy = dict(doc)
    servers = copy.get("mcp_servers")
    if isinstance(servers, dict):
        copy["mcp_servers"] = {k: v for k, v in servers.items() if k != SERVER_NAME}
        if not copy["mcp_servers"] and SERVER_NAME in servers:
            del copy["mcp_servers"]
    return copy


def with_codex_server(text: str, command: list[str], path: Path | str = "config.toml") -> str:
    """`text` with our table added or replaced; every other byte unchanged.

    Raises:
        CommandError: the file is not TOML, or our entry is written in a form
            (inline table, dotted keys) that cannot be replaced line by line.
    """
    doc = _parse(text, path)
    entry = _our_entry(doc)
    if entry is not None and _entry_command(entry) == command:
        return text
    table = codex_table(command)
    span = _table_span(text)
    if span is not None:
        start, end = span
        tail = text[end:]
        new = text[:start] + table + ("\n" if tail and not tail.startswith("\n") else "") + tail
    elif entry is not None:
        raise CommandError(
            f"{path} defines mcp_servers.{SERVER_NAME} without a [mcp_servers.{SERVER_NAME}] "
            "header (inline table or dotted keys); remove that entry and run this again"
        )
    else:
        separator = "" if not text.strip() else ("\n" if text.endswith("\n") else "\n\n")
        new = text + separator + table
    _check_edit(doc, new, command, path)
    return new


def without_codex_server(text: str, path: Path | str = "config.toml") -> str:
    """`text` without our table (and the blank line set before it when it was appended)."""
    doc = _parse(text, path)
    if _our_entry(doc) is None:
        return text
    span = _table_span(text)
    if span is None:
        raise CommandError(
            f"{path} defines mcp_servers.{SERVER_NAME} without a [mcp_servers.{SERVER_NAME}] "
            "header (inline table or dotted keys); remove it by hand"
        )
    start, end = span
    if not text[end:].strip() and text[:start].endswith("\n\n"):
        start -= 1  # the blank line `with_codex_server` put before an appended table
    new = text[:start] + text[end:]
    if _other_settings(doc) != _other_settings(_parse(new, path)):
        raise CommandError(
            f"removing [mcp_servers.{SERVER_NAME}] from {path} would change other settings; "
            "remove it by hand"
        )
    return new


def _check_edit(old: dict[str, Any], new_text: str, command: list[str], path: Path | str) -> None:
    """The edit changed our entry's command and nothing else, or it is refused."""
    try:
        new = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise CommandError(
            f"adding [mcp_servers.{SERVER_NAME}] to {path} would make it invalid ({exc}), "
            "e.g. because mcp_servers is an inline table; add the table by hand:\n"
            + codex_table(command)
        ) from exc
    entry = _our_entry(new)
    if (
        entry is None
        or _entry_command(entry) != command
        or _other_settings(old) != _other_settings(new)
    ):
        raise CommandError(
            f"cannot edit {path} safely line by line; add or replace this table by hand:\n"
            + codex_table(command)
        )


def _write_codex(path: Path, text: str) -> None:
    try:
        # A new config.toml is private: Codex keeps MCP servers' environment (tokens) in it.
        write_atomically(path, text, mode=0o600)
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc}") from exc


def _read_codex(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from exc


def _codex_registration(agent: Agent) -> Registration:
    path = agent.mcp_config_path()
    try:
        doc = _parse(_read_codex(path), path)
    except CommandError as exc:
        return Registration(agent.name, registered=False, where=str(path), problem=str(exc))
    entry = _our_entry(doc)
    if entry is None:
        return Registration(agent.name, registered=False, where=str(path))
    command = _entry_command(entry)
    problem = _check_command(command)
    if entry.get("enabled") is False:
        problem = "it is switched off (enabled = false)"
    return Registration(
        agent.name, registered=True, where=str(path), command=command, problem=problem
    )


def _install_codex(agent: Agent, command: list[str]) -> str:
    path = agent.mcp_config_path()
    text = _read_codex(path)
    new = with_codex_server(text, command, path)
    if new == text:
        return f"the MCP server is already registered with {agent.title} ({path})"
    _write_codex(path, new)
    return f"registered the MCP server with {agent.title} in {path}: {shlex.join(command)}\n" + (
        _registered(agent)
    )


def _uninstall_codex(agent: Agent) -> str:
    path = agent.mcp_config_path()
    text = _read_codex(path)
    new = without_codex_server(text, path)
    if new == text:
        return f"the MCP server is not registered in {path}: nothing to do"
    if new.strip() or path.is_symlink():
        _write_codex(path, new)
        return f"removed [mcp_servers.{SERVER_NAME}] from {path}"
    # The table was all the file held (the install created it): no empty file is left.
    try:
        directories = remove_file(path, up_to=agent.config_dir())
    except OSError as exc:
        raise CommandError(f"cannot remove {path}: {exc}") from exc
    return f"removed {path}: it held only [mcp_servers.{SERVER_NAME}]" + _gone(directories)


def _gone(directories: list[Path]) -> str:
    return "".join(
        f"\n{display_path(directory)} was left empty: removed too" for directory in directories
    )


# ------------------------------------------------------------------- JSON files


def _json_entry(agent: Agent, command: list[str]) -> dict[str, Any]:
    """Our entry in the agent's `mcpServers`: the command, and what the agent adds."""
    return {"command": command[0], "args": command[1:], **agent.mcp.entry}


def _json_registration(agent: Agent) -> Registration:
    path = agent.mcp_config_path()
    try:
        text = read_settings(path)
        entry = mcp_server(text, path, SERVER_NAME) if text and text.strip() else None
    except SettingsError as exc:
        return Registration(agent.name, registered=False, where=str(path), problem=str(exc))
    if entry is None:
        return Registration(agent.name, registered=False, where=str(path))
    command = _entry_command(entry)
    return Registration(
        agent.name,
        registered=True,
        where=str(path),
        command=command,
        problem=_check_command(command),
    )


def _install_json(agent: Agent, command: list[str]) -> str:
    path = agent.mcp_config_path()
    try:
        text = read_settings(path)
        new = with_mcp_server(text or "", path, SERVER_NAME, _json_entry(agent, command))
        if new == text:
            return f"the MCP server is already registered with {agent.title} ({path})"
        # A new file is private: agents keep MCP servers' environment (tokens) in it.
        backup = write_atomically(path, new, backup=True, mode=0o600)
    except SettingsError as exc:
        raise CommandError(str(exc)) from exc
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc}") from exc
    saved = f"\nprevious file saved as {display_path(backup)}" if backup else ""
    return (
        f"registered the MCP server with {agent.title} in {path}: {shlex.join(command)}{saved}\n"
        + _registered(agent)
    )


def _uninstall_json(agent: Agent) -> str:
    path = agent.mcp_config_path()
    try:
        text = read_settings(path)
        if not text or not text.strip() or mcp_server(text, path, SERVER_NAME) is None:
            return f"the MCP server is not registered in {path}: nothing to do"
        new = without_mcp_server(text, path, SERVER_NAME)
        backup, directories = write_without_ours(
            path, text, new, {MCP_SERVERS}, agent, up_to=agent.config_dir()
        )
    except SettingsError as exc:
        raise CommandError(str(exc)) from exc
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc}") from exc
    kept = f"\n{backup_kept(backup)}" if backup else ""
    if directories is not None:
        return f"removed {path}: it held only mented's MCP server" + _gone(directories) + kept
    return f"removed {MCP_SERVERS}.{SERVER_NAME} from {path}; nothing else changed" + kept


@dataclass(frozen=True)
class Writer:
    """One way of registering the MCP server (`McpSettings.how`)."""

    registration: Callable[[Agent], Registration]
    install: Callable[[Agent, list[str]], str]
    uninstall: Callable[[Agent], str]


# ------------------------------------------------------------- not registered


def _none_registration(agent: Agent) -> Registration:
    """An agent mentectl does not register the server with: never registered, no problem."""
    return Registration(
        agent.name, registered=False, where=agent.mcp.note or agent.title, supported=False
    )


def _install_none(agent: Agent, command: list[str]) -> str:  # noqa: ARG001 - nothing to write
    raise CommandError(
        f"mentectl does not register its MCP server with {agent.title} "
        f"({agent.mcp.note or 'its MCP settings were not checked'}); the hook works without it"
    )


def _uninstall_none(agent: Agent) -> str:
    return f"mentectl never registers its MCP server with {agent.title}: nothing to do"


def _by_hand_registration(agent: Agent) -> Registration:
    return Registration(agent=agent.name, registered=False, where=str(agent.mcp_config_path()))


def _install_by_hand(agent: Agent, command: list[str]) -> str:
    # Not done, so not a success: `setup` goes on, saying so.
    raise CommandError(
        f"mented does not write {agent.title}'s MCP settings; {agent.mcp.note}: "
        f"{shlex.join(command)}"
    )


def _uninstall_by_hand(agent: Agent) -> str:
    return f"mented wrote no MCP server into {agent.title}'s settings; nothing changed"


WRITERS: dict[str, Writer] = {
    "none": Writer(_none_registration, _install_none, _uninstall_none),
    "claude-cli": Writer(_claude_registration, _install_claude, _uninstall_claude),
    "codex-toml": Writer(_codex_registration, _install_codex, _uninstall_codex),
    "json": Writer(_json_registration, _install_json, _uninstall_json),
    # An agent whose MCP settings mented does not write (opencode): its note says how.
    "by-hand": Writer(_by_hand_registration, _install_by_hand, _uninstall_by_hand),
}


# --------------------------------------------------------------------- handlers


def run_server(args: argparse.Namespace) -> int:
    # As the hook: --socket, else $MENTED_SOCKET, else the socket written in at install.
    socket = args.socket or os.environ.get(paths.SOCKET_ENV) or args.fallback_socket
    in_force = None
    front = mcp_front.active()
    if front is not None:
        # The front answered `initialize` already: the tools can be listed before
        # the SDK is imported, once the action table is known.
        in_force = mcp_front.startup_table(socket)
        front.use_table(in_force)
    try:
        from mented_client import mcp_server  # noqa: PLC0415 - the SDK is heavy and optional
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in {"mcp", "mcp_types", "pydantic"}:
            raise
        raise CommandError(f"{SDK_MISSING} ({exc})") from exc

    mcp_server.run(agent=args.agent, socket_path=socket, cwd=args.project_dir, in_force=in_force)
    return 0


def run_install(args: argparse.Namespace) -> int:
    message = install_mcp(args.target, socket=args.socket)
    if args.json:
        print_json({"agent": args.target, "message": message})
    else:
        print(escape_controls(message))
    return 0


def run_uninstall(args: argparse.Namespace) -> int:
    message = uninstall_mcp(args.target)
    if args.json:
        print_json({"agent": args.target, "message": message})
    else:
        print(escape_controls(message))
    return 0


def run_status(args: argparse.Namespace) -> int:
    registrations = [mcp_registration(agent) for agent in sorted(AGENTS)]
    if args.json:
        print_json([asdict(r) | {"ok": r.ok} for r in registrations])
    else:
        for registration in registrations:
            print(escape_controls(registration.describe()))
    return 0
