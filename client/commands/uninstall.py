"""`mentectl uninstall`: undo `mentectl setup`, for some agents or for all and the daemon.

- `mentectl uninstall AGENT...` takes out what setup put in the agent's files:
  its hook (in its user settings file) and mented's MCP server. What mented
  created and left empty goes with them: a settings file that held nothing
  else, the directories that leaves empty up to the agent's config directory,
  and an install's `.mented-bak` backup once it holds nothing the file does
  not (`mented_client.hook_settings.settle_backup`); a backup that differs may
  hold the user's own changes and stays, named.
- `mentectl uninstall --all` does that for every agent, then removes the
  service (when installed) and stops the daemon: nothing of mented runs.

The daemon is not stopped for one agent: other agents, project hooks and the
editor plugin may still use it, and stopping it is one flag away. When no agent
is left with a hook or the server, the output says so and names `--all`.

Never removed: the rules (the data directory), the config file, the log: they
are the user's, and a reinstall picks them up again. The output says where they
are, for whoever wants them gone too.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mented import paths
from mented.agents import AGENTS, Agent
from mented.agents.in_process import ExtensionAgent
from mented.agents.opencode import OpencodeAgent
from mented_client import codex_trust, hook_files, plugin_files
from mented_client.commands import extension, hooks, mcp
from mented_client.commands.output import CommandError, escape_controls, print_json
from mented_client.commands.service import LOG_NAME, STOP_TIMEOUT_S, stop_detached
from mented_client.files import display_path
from mented_client.hook_settings import (
    SettingsError,
    find_entries,
    read_project_settings,
    read_settings,
)
from mented_client.service_manager import detect
from mented_client.suggest import did_you_mean


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    uninstall = subparsers.add_parser(
        "uninstall",
        parents=[common],
        help="undo `mentectl setup`: remove an agent's hook and MCP server (--all: every "
        "agent's, the service and the daemon)",
        description="Removes mented's entries from the agent's user files, and the files and "
        "directories mented created that are left empty. Your rules, config file and log "
        "are kept.",
    )
    uninstall.add_argument(
        "agents", metavar="AGENT", nargs="*", type=agent_name, help=", ".join(sorted(AGENTS))
    )
    uninstall.add_argument(
        "--all",
        action="store_true",
        help="every agent, then remove the service and stop the daemon",
    )
    uninstall.set_defaults(handler=run_uninstall)


def agent_name(value: str) -> str:
    """argparse type for AGENT (`choices` cannot be used with an optional list)."""
    if value not in AGENTS:
        choices = ", ".join(sorted(AGENTS))
        hint = did_you_mean(value, AGENTS)
        raise argparse.ArgumentTypeError(f"invalid choice: {value!r}{hint} (choose from {choices})")
    return value


@dataclass
class AgentUndone:
    """What `uninstall` did for one agent."""

    agent: str
    hook: list[str] = field(default_factory=list)  # what was done, one line each
    mcp: str = ""
    error: str | None = None
    left: list[str] = field(default_factory=list)  # project hooks here, not touched


def undo_agent(agent: Agent) -> AgentUndone:
    """Take the agent's user hook and MCP server out (each step even when the other fails)."""
    done = AgentUndone(agent.name)
    if isinstance(agent, ExtensionAgent):
        return undo_in_process(agent, done)
    places = [agent.settings_path()]
    errors = []
    # Codex keeps the user's trust in its hooks by their place in hooks.json: found first.
    trusted = codex_trust.mented_state_keys() if agent.name == "codex" else set()
    try:
        done.hook = hooks.uninstall_lines(agent, places, hooks.uninstall_hook(agent, places))
    except CommandError as exc:
        errors.append(f"hook: {exc}")
    else:
        try:
            done.hook += codex_trust.forget_trust(trusted)
        except CommandError as exc:
            errors.append(f"Codex's trust entries: {exc}")
    try:
        done.mcp = mcp.uninstall_mcp(agent.name)
    except CommandError as exc:
        errors.append(f"MCP server: {exc}")
    done.error = "; ".join(errors) or None
    done.left = [str(path) for path in project_hooks(agent, Path.cwd())]
    return done


def undo_in_process(agent: ExtensionAgent, done: AgentUndone) -> AgentUndone:
    """`undo_agent` for an agent served by a plugin file of ours: that file goes."""
    try:
        done.hook = extension.uninstall_lines(agent)
    except CommandError as exc:
        done.error = f"extension: {exc}"
    done.left = [str(path) for path in project_hooks(agent, Path.cwd())]
    return done


def project_hooks(agent: Agent, project: Path) -> list[Path]:
    """The agent's project settings files in `project` that hold mented's hook."""
    if isinstance(agent, ExtensionAgent):
        return [file.path for file in extension.project_files(agent, project)]
    found = []
    for path in agent.project_install_paths(project):
        if isinstance(agent, OpencodeAgent):  # mented's plugin file, not a settings entry
            if plugin_files.inspect(path).ours:
                found.append(path)
            continue
        try:
            if agent.hook_file:  # Cline's hook file: ours or not
                if hook_files.is_ours(hook_files.read_hook_file(path)):
                    found.append(path)
                continue
            text = read_project_settings(path, project)
            if text and text.strip() and find_entries(text, path, None, agent.layout):
                found.append(path)
        except SettingsError:
            continue
    return found


def still_set_up() -> list[str]:
    """The agents whose user files still hold mented's hook or MCP server."""
    left = []
    for name, agent in sorted(AGENTS.items()):
        if isinstance(agent, ExtensionAgent):
            if extension.installed_for_user(agent):
                left.append(name)
            continue
        path = agent.settings_path()
        if isinstance(agent, OpencodeAgent):
            if plugin_files.inspect(path).ours or mcp.mcp_registration(name).registered:
                left.append(name)
            continue
        try:
            if agent.hook_file:
                hook = hook_files.is_ours(hook_files.read_hook_file(path))
            else:
                text = read_settings(path)
                hook = bool(text and text.strip() and find_entries(text, path, None, agent.layout))
        except SettingsError:
            hook = False
        if hook or mcp.mcp_registration(name).registered:
            left.append(name)
    return left


def stop_everything(socket: Path) -> list[str]:
    """Remove the service (when installed) and stop the daemon; what was done."""
    done = []
    manager = detect()
    if manager is not None and manager.installed():
        manager.uninstall()
        done.append(f"removed the {manager.name} service:")
        done.extend(f"  {step}" for step in manager.done)
    stopped = stop_detached(socket, STOP_TIMEOUT_S)
    if stopped is not None:
        done.append(f"stopped mented (pid {stopped.pid})")
    if not done:
        done.append("no service installed and no daemon running: nothing to stop")
    return done


def kept_note() -> str:
    """Where the user's own data stays: the rules, and the config file and log if any."""
    kept = [f"Your rules are kept in {display_path(paths.data_dir())}"]
    config = paths.config_path(None)
    if config.exists():
        kept.append(f"your config file in {display_path(config)}")
    log = paths.state_dir() / LOG_NAME
    if log.exists():
        kept.append(f"the log in {display_path(log)}")
    listed = ", ".join(kept[:-1]) + f" and {kept[-1]}" if len(kept) > 1 else kept[0]
    return f"{listed}; delete them by hand if you want them gone too."


def run_uninstall(args: argparse.Namespace) -> int:
    if not args.all and not args.agents:
        raise CommandError("name an agent (or several), or pass --all", status=2)
    chosen = sorted(AGENTS) if args.all else list(dict.fromkeys(args.agents))
    undone = [undo_agent(AGENTS[name]) for name in chosen]
    stopped = stop_everything(paths.socket_path(args.socket)) if args.all else []
    left = [] if args.all else still_set_up()
    failed = any(done.error for done in undone)
    if args.json:
        print_json(
            {
                "agents": [asdict(done) for done in undone],
                "stopped": stopped,
                "still_set_up": left,
                "data_dir": str(paths.data_dir()),
                "ok": not failed,
            }
        )
        return 1 if failed else 0
    for done in undone:
        agent = AGENTS[done.agent]
        print(f"{agent.name} ({agent.title})")
        for line in [*done.hook, *done.mcp.split("\n")]:
            if line:
                print(f"  {escape_controls(line.strip(), keep_lines=False)}")
        if done.error:
            print(f"  FAILED: {escape_controls(done.error)}")
        for path in done.left:
            print(
                f"  a project hook is left in {display_path(Path(path))}: "
                f"`mentectl hooks uninstall {agent.name} --project .` removes it"
            )
    for line in stopped:
        print(line)
    if not args.all:
        if left:
            print(f"Still set up: {', '.join(left)}; the daemon keeps running for them.")
        else:
            print(
                "No agent uses mented any more; the daemon still runs. "
                "`mentectl uninstall --all` also removes the service and stops it."
            )
    print(kept_note())
    return 1 if failed else 0
