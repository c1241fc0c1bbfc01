"""`mentectl hooks install|uninstall|status pi` and `doctor`, for an in-process agent.

The `hooks` verbs hand an agent that runs mented in its own process
(`mented.agents.in_process`) to this module: it has no hook entry in a settings
file but a plugin file of mented's (`mented_client.extension_file`). `--settings
PATH` names that file, `--project DIR` the project's plugin folder.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mented import paths
from mented.agents.in_process import ExtensionAgent
from mented.protocol import LogReply, LogRequest, StatusReply
from mented_client import extension_file
from mented_client.commands.output import CommandError, escape_controls, print_json
from mented_client.connection import Client, DaemonError, NotRunningError, ProtocolError
from mented_client.extension_file import ExtensionFile, Found
from mented_client.files import display_path

if TYPE_CHECKING:
    from mented_client.commands.doctor import Check

# Checked by `doctor` as the shim's fire is: a sample commit event, marked as a test.
SAMPLE_COMMAND = 'git commit -m "mented doctor: sample commit"'


def place_of(agent: ExtensionAgent, args: argparse.Namespace) -> tuple[Path, Path]:
    """The extension file a verb works on, and the top folder found as it is."""
    if getattr(args, "settings", None):
        path = Path(args.settings).expanduser().absolute()
        return path, path.parent
    project = getattr(args, "project", None)
    if project:
        return agent.project_settings_path(project), project
    return agent.settings_path(), agent.config_dir()


def run_install(agent: ExtensionAgent, args: argparse.Namespace) -> int:
    path, top = place_of(agent, args)
    outcome = extension_file.install(agent, path, args.socket, top)
    socket = str(paths.socket_path(args.socket).absolute())
    if args.json:
        print_json(
            {
                "agent": agent.name,
                "settings": str(path),
                "outcome": outcome,
                "changed": outcome != "unchanged",
                "socket": socket,
                "registered_for": agent_coverage(agent),
            }
        )
        return 0
    where = display_path(path)
    if outcome == "unchanged":
        print(f"mented's extension for {agent.title} is already in {where}; nothing changed.")
        return 0
    verb = "Updated" if outcome == "updated" else "Installed"
    print(f"{verb} mented's extension for {agent.title} in {where}.")
    print(f"  for: {agent_coverage(agent)}, in {agent.title}'s own process (no hook process)")
    print(f"  socket: {socket} (unless the agent's $MENTED_SOCKET names another)")
    print(f"  {agent.title} loads it when a session starts (`/reload` in a running one).")
    return 0


def agent_coverage(agent: ExtensionAgent) -> str:
    """The tool calls the extension hands to mented, in a few words."""
    return (
        f"every {'/'.join(sorted(agent.shell_tools))} command and file write "
        f"({', '.join(sorted(agent.edit_tools))}); the pinned rules with each prompt"
    )


def run_uninstall(agent: ExtensionAgent, args: argparse.Namespace) -> int:
    path, _ = place_of(agent, args)
    removed, said = extension_file.uninstall(agent, path)
    if args.json:
        print_json({"agent": agent.name, "settings": str(path), "removed": int(removed)})
    else:
        print(said)
    return 0


def uninstall_lines(agent: ExtensionAgent) -> list[str]:
    """`mentectl uninstall pi`: the user's extension out, if it is mented's."""
    return [extension_file.uninstall(agent, agent.settings_path())[1]]


def installed_for_user(agent: ExtensionAgent) -> bool:
    """Whether the user's plugin folder holds mented's extension."""
    return extension_file.inspect(agent.settings_path()).found is Found.OURS


def project_files(agent: ExtensionAgent, project: Path) -> list[ExtensionFile]:
    """mented's extension in `project`, if it is there (`uninstall` names it, and leaves it)."""
    file = extension_file.inspect(agent.project_settings_path(project))
    return [file] if file.found is Found.OURS else []


def places(agent: ExtensionAgent, extra: str | None = None) -> list[ExtensionFile]:
    """The user's extension file, the project's here (when there is one) and `extra`."""
    found = [extension_file.inspect(agent.settings_path())]
    project = extension_file.inspect(agent.project_settings_path(Path.cwd()))
    if project.found is not Found.MISSING and project.path != found[0].path:
        found.append(project)
    if extra:
        found.append(extension_file.inspect(Path(extra).expanduser().absolute()))
    return found


def status_problem(agent: ExtensionAgent, file: ExtensionFile) -> str | None:
    """What keeps this file from handing rules over, for `hooks status`."""
    if file.found is Found.OURS:
        return None
    if file.found is Found.MISSING:
        return "not installed"
    return extension_file.refusal(agent, file, "mentectl")


def status_json(agent: ExtensionAgent, extra: str | None) -> list[dict[str, object]]:
    return [
        {
            "settings": str(file.path),
            "exists": file.found is not Found.MISSING,
            "state": str(file.found),
            "protocol": file.protocol,
            "socket": file.socket,
            "error": file.problem,
        }
        for file in places(agent, extra)
    ]


def print_status(agent: ExtensionAgent, extra: str | None) -> bool:
    """`hooks status` lines for the agent; whether something is broken."""
    print(f"{agent.name} ({agent.title})")
    broken = False
    for file in places(agent, extra):
        where = escape_controls(display_path(file.path), keep_lines=False)
        if file.found is Found.OURS:
            print(f"  {where}: extension installed, protocol {file.protocol}, ok")
            print(f"    socket: {file.socket or 'the agent $MENTED_SOCKET, else the default'}")
            continue
        if file.found is Found.MISSING:
            print(f"  {where}: not installed (no such file)")
            continue
        broken = True
        print(f"  {where}: {escape_controls(status_problem(agent, file) or '', keep_lines=False)}")
    return broken


def doctor_checks(agent: ExtensionAgent, socket: Path, status: StatusReply | None) -> list[Check]:
    """`doctor`'s lines for the agent's extension: installed, its protocol the daemon's, a
    sample event answered."""
    from mented_client.commands.doctor import Check  # noqa: PLC0415 - doctor imports this module

    link = f"hook {agent.name}"
    checks: list[Check] = []
    files = places(agent)
    installed = [file for file in files if file.found is Found.OURS]
    checks.extend(
        Check(link, "warn", extension_file.refusal(agent, file, "mentectl"))
        for file in files
        if file.found in (Found.CHANGED, Found.FOREIGN)
    )
    if not installed:
        if not checks:
            checks.append(
                Check(
                    link,
                    "skip",
                    f"not installed for {agent.title}",
                    fix=f"`mentectl setup {agent.name}` if you use {agent.title}",
                )
            )
        return checks
    for file in installed:
        where = display_path(file.path)
        if status is not None and file.protocol != status.protocol:
            checks.append(
                Check(
                    link,
                    "fail",
                    f"{where} speaks protocol {file.protocol}, the daemon {status.protocol}",
                    fix=f"`mentectl hooks install {agent.name}` writes this version's extension",
                )
            )
        elif file.socket is not None and file.socket != str(socket.absolute()):
            checks.append(
                Check(
                    link,
                    "warn",
                    f"{where} falls back to the socket {file.socket}, but mentectl uses {socket} "
                    f"(unless {agent.title}'s environment names $MENTED_SOCKET)",
                    fix=f"`mentectl hooks install {agent.name}` writes this socket in",
                )
            )
        else:
            checks.append(Check(link, "ok", f"extension installed in {where}"))
    if status is not None:
        checks.append(fire(agent, socket))
    return checks


def fire(agent: ExtensionAgent, socket: Path) -> Check:
    """A sample commit event, as the extension sends it, marked as a test fire."""
    from mented_client.commands.doctor import Check  # noqa: PLC0415 - doctor imports this module

    link = f"fire {agent.name}"
    session = f"mented-doctor-{os.getpid()}-{time.time_ns()}"
    event = agent.sample_event(SAMPLE_COMMAND, cwd=str(Path.cwd()), session=session)
    started = time.perf_counter()
    try:
        with Client(socket, connect_timeout=2.0, timeout=2.0) as client:
            client.hook(agent.name, event, test=True)
            took = (time.perf_counter() - started) * 1000
            fires = client.expect(LogRequest(n=50), LogReply).fires
    except (NotRunningError, ProtocolError, DaemonError) as exc:
        return Check(link, "fail", f"the daemon did not answer a sample event: {exc}")
    if not any(record.session == session for record in fires):
        return Check(
            link, "fail", "the daemon answered a sample event but did not log it", fix=None
        )
    return Check(link, "ok", f"a sample `git commit` event was answered in {took:.1f} ms")


def refuse_command(agent: ExtensionAgent) -> CommandError:
    """`hooks command` has nothing to print for an agent without a hook command line."""
    return CommandError(
        f"{agent.title} runs mented in its own process: there is no hook command line. "
        f"`mentectl hooks install {agent.name}` writes mented's extension.",
        status=2,
    )
