"""`mentectl hooks install|uninstall|status` for an agent that loads mented's plugin (opencode).

The verbs of `mented_client.commands.hooks` hand such an agent over to these
functions: the plugin file is written and removed by `mented_client.plugin_files`,
and its place is reported in the shapes the hook verbs use for a settings file
(`SettingsPlace`, `HookCheck`), so that `hooks status` and `doctor` read both alike.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mented import paths
from mented.agents.opencode import PLUGIN_PROTOCOL, OpencodeAgent
from mented_client import plugin_files
from mented_client.commands import hooks
from mented_client.commands.output import CommandError, print_json
from mented_client.files import display_path


def run_install(args: argparse.Namespace, agent: OpencodeAgent) -> int:
    """Write the plugin into the agent's plugin folder (the user's, or `--project`'s)."""
    path = hooks.settings_paths(agent, args)[0]
    socket = paths.socket_path(args.socket).absolute()
    text = plugin_files.plugin_text(agent, socket)
    try:
        outcome = plugin_files.install(path, text)
    except plugin_files.PluginError as exc:
        raise CommandError(str(exc)) from exc
    except OSError as exc:
        raise CommandError(f"{path}: cannot write it: {exc}") from exc
    notes = []
    if args.project and agent.no_project_local_file:
        notes.append(agent.no_project_local_file)
    if outcome != "unchanged":
        notes.append(f"New {agent.title} sessions load it; a running one does not.")
    if args.json:
        print_json(
            {
                "agent": agent.name,
                "settings": str(path),
                "outcome": outcome,
                "changed": outcome != "unchanged",
                "plugin": str(path),
                "socket": str(socket),
                "protocol": PLUGIN_PROTOCOL,
                "registered_for": REGISTERED_FOR,
                "notes": notes,
            }
        )
        return 0
    where = display_path(path)
    if outcome == "unchanged":
        print(f"mented's plugin for {agent.title} is already in {where}; nothing changed.")
    else:
        verb = "Updated" if outcome == "updated" else "Installed"
        print(f"{verb} mented's plugin for {agent.title} in {where}.")
        print(f"  socket: {socket} (unless the agent's $MENTED_SOCKET names another)")
        print(f"  for: {REGISTERED_FOR}")
    for note in notes:
        print(note)
    return 0


# The plugin sees every tool call; the daemon tells which ones name an action.
REGISTERED_FOR = "every tool call (in the agent's process: no process started per call)"


def uninstall_places(
    agent: OpencodeAgent, places: list[Path], project: Path | None
) -> list[tuple[Path, hooks.Removal]]:
    """Remove mented's plugin from each of `places`; what was removed, as a `Removal`."""
    done = []
    for path in places:
        try:
            removed, directories = plugin_files.remove(
                path, up_to=hooks.cleanup_root(agent, path, project)
            )
        except OSError as exc:
            raise CommandError(f"{path}: cannot remove it: {exc}") from exc
        done.append(
            (path, hooks.Removal(int(removed), deleted=removed, directories=tuple(directories)))
        )
    return done


def uninstall_lines(
    agent: OpencodeAgent, places: list[Path], removals: list[tuple[Path, hooks.Removal]]
) -> list[str]:
    """What `uninstall_places` did, for people."""
    lines = []
    for path, removal in removals:
        if removal.removed:
            lines.append(f"Removed mented's plugin {display_path(path)}.")
            lines.extend(
                f"  {display_path(directory)} was left empty: removed too"
                for directory in removal.directories
            )
        else:
            found = plugin_files.inspect(path)
            if found.problem:
                lines.append(f"{found.problem} (not mented's plugin: left as it is)")
    if not any(removal.removed for _, removal in removals):
        where = " or ".join(display_path(path) for path in places)
        lines.append(f"No mented plugin for {agent.title} in {where}; nothing changed.")
    return lines


def place(agent: OpencodeAgent, path: Path, *, always: bool) -> hooks.SettingsPlace | None:
    """The plugin at `path` as `hooks status` reports a settings file; None when there is
    nothing there and `always` is false."""
    found = plugin_files.inspect(path)
    if not found.exists and not always:
        return None
    result = hooks.SettingsPlace(settings=str(path), exists=found.exists)
    if found.problem is not None:
        if found.exists and not always:
            return None  # a file of the user's in a project: not ours, nothing to say
        result.error = found.problem
        return result
    if not found.ours:
        return result
    problems = []
    if found.text != plugin_files.plugin_text(agent, Path(found.socket() or "")):
        problems.append(
            f"an older version of mented's plugin (protocol {found.protocol}, this mentectl "
            f"ships {PLUGIN_PROTOCOL}): run `mentectl hooks install {agent.name}` again"
        )
    result.hooks = [
        hooks.HookCheck(
            command=f"plugin {path}",
            timeout=None,
            interpreter=None,
            shim=None,
            socket=found.socket(),
            problems=problems,
            event="plugin",
        )
    ]
    return result


def places(agent: OpencodeAgent, extra: str | None) -> list[hooks.SettingsPlace]:
    """The user's plugin, this directory's project plugin, and `extra`, for `hooks status`."""
    user = agent.settings_path()
    found = [place(agent, user, always=True)]
    found.append(place(agent, agent.project_settings_path(Path.cwd()), always=False))
    if extra:
        found.append(place(agent, Path(extra).expanduser().absolute(), always=True))
    return [one for one in found if one is not None]
