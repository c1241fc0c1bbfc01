"""`mentectl mcp`: run mented's MCP server, and register it with each agent.

- `mentectl mcp [--agent NAME]` serves the MCP tools on stdin/stdout (see
  `mented_client.mcp_server`, imported only here: the SDK is an optional extra
  and `mentectl`'s other verbs must stay fast).
- `mentectl mcp install AGENT` registers it at user scope, where and how the
  agent's own module says (`Agent.mcp`, `mented.agents.pretooluse.McpSettings`).
  An agent whose client module has a way of its own (`ClientAgent.mcp_writer`)
  is registered that way: Claude Code through its CLI (`claude mcp add --scope
  user`; `mented_client.agents.claude_code`), Codex as the table
  `[mcp_servers.mented]` of its config.toml (`mented_client.agents.codex`).
  This module knows the ways the others share (`WRITERS`):
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
import os
import shlex
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mented import paths
from mented.agents import AGENTS, DEFAULT_AGENT, Agent
from mented.memory import InvalidInputError
from mented_client import mcp_front
from mented_client.agents import client_of
from mented_client.commands.output import CommandError, escape_controls, print_json
from mented_client.files import display_path, write_atomically
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


def check_command(command: list[str]) -> str | None:
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


def writer_of(agent: Agent) -> Writer:
    """How mentectl registers the server with `agent`: its client module's writer, else
    the one of its `McpSettings.how` here."""
    return client_of(agent.name).mcp_writer() or WRITERS[agent.mcp.how]


def mcp_registration(agent: str) -> Registration:
    """Whether `agent` has mented's MCP server registered, in its own configuration."""
    known = _known_agent(agent)
    return writer_of(known).registration(known)


def install_mcp(agent: str, *, socket: str | Path | None = None) -> str:
    """Register mented's MCP server with `agent`; returns what was done, for the user.

    Raises:
        CommandError: the registration failed; the message says why and what to do.
    """
    known = _known_agent(agent)
    message = writer_of(known).install(known, server_command(known.name, socket))
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
    return writer_of(known).uninstall(known)


def install_fix(agent: str, *, socket: str | Path | None = None) -> str:
    """What registers the MCP server with `agent`, for `doctor`'s fix lines.

    `mentectl mcp install`, unless it cannot work here: the writer's own fix then
    (Claude Code's `claude mcp add` command, to run where `claude` is).
    """
    known = _known_agent(agent)
    if known.mcp.how == "none":
        return f"none needed: mentectl does not register it with {known.title} (the hook works)"
    if known.mcp.how == "by-hand":
        return f"{known.mcp.note}: {shlex.join(server_command(known.name, socket))}"
    writer = writer_of(known)
    if writer.fix is not None:
        fix = writer.fix(known, server_command(known.name, socket))
        if fix is not None:
            return fix
    return f"`mentectl mcp install {known.name}`"


def registered_note(agent: Agent) -> str:
    """What to say after a registration: where the agent shows it, and its note."""
    lists = f" (`{agent.mcp.list_command}` lists them)" if agent.mcp.list_command else ""
    line = f"new {agent.title} sessions have mented's tools{lists}"
    return line + (f"\n{agent.mcp.note}" if agent.mcp.note else "")


def entry_command(entry: dict[str, Any]) -> list[str]:
    args = entry.get("args") or []
    return [str(entry.get("command") or ""), *(str(arg) for arg in args)]


def gone_lines(directories: list[Path]) -> str:
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
    command = entry_command(entry)
    return Registration(
        agent.name,
        registered=True,
        where=str(path),
        command=command,
        problem=check_command(command),
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
        + registered_note(agent)
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
        return f"removed {path}: it held only mented's MCP server" + gone_lines(directories) + kept
    return f"removed {MCP_SERVERS}.{SERVER_NAME} from {path}; nothing else changed" + kept


@dataclass(frozen=True)
class Writer:
    """One way of registering the MCP server (`McpSettings.how`)."""

    registration: Callable[[Agent], Registration]
    install: Callable[[Agent, list[str]], str]
    uninstall: Callable[[Agent], str]
    # The step that registers it when `mcp install` cannot here (None: `mcp install`).
    fix: Callable[[Agent, list[str]], str | None] | None = None


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
