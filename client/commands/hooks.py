"""`mentectl hooks ...`: install, uninstall, status, command.

The installed hook runs the stdlib-only shim with the real interpreter, while both
files exist (else it exits 0: a removed mented never blocks the agent)::

    [ -f /abs/mented_client/shim.py ] && [ -x /abs/python3.11 ] &&
    exec /abs/python3.11 -I -S /abs/mented_client/shim.py claude-code \\
    /run/user/1000/mented/mented.sock; exit 0

The interpreter is the actual binary, never a pyenv (or asdf, ...) shim script;
`-I -S` skip the environment, the user site and the `site` import. The settings
file is edited in place. Both are explained in `mented_client.hook_settings`.
The last argument is the socket mentectl uses (`--socket`, `$MENTED_SOCKET` or
the default), the shim's fallback when the agent's environment names none.

The hook is registered for exactly the tool calls the action table needs
(mented/registration.py): the table of the running daemon (its config file),
else of the config file a daemon started here would read. After adding an MCP
tool or a path to an action, `mentectl reload` and `hooks install` again;
`hooks status` and `doctor` say when the installed registration misses one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from mented import paths
from mented.actions import TableInForce
from mented.agents import AGENTS, Agent
from mented.agents.in_process import ExtensionAgent
from mented.agents.opencode import OpencodeAgent
from mented.agents.pretooluse import (
    EVENT_NAME,
    SESSION_START,
    SESSION_START_MATCHER,
    InstalledEntry,
    SettingsLayout,
)
from mented.git_aliases import GitAliases
from mented.registration import HookNeeds, hook_needs
from mented_client import added_settings, codex_trust, hook_files
from mented_client.commands import extension
from mented_client.commands.output import CommandError, escape_controls, print_json
from mented_client.files import display_path, write_atomically
from mented_client.git_ignore import git_ignores
from mented_client.hook_settings import (
    MentedEntry,
    SettingsError,
    add_hook,
    backup_kept,
    command_argv,
    find_entries,
    guarded_command,
    has_setting,
    installed_shim,
    is_native_executable,
    missing_events,
    outside_link,
    read_settings_at,
    real_interpreter,
    remove_hooks,
    write_without_ours,
)
from mented_client.scope import table_in_force

# The agent's own limit on the hook process, a backstop only: the shim gives up
# after its budget (250 ms by default) on its own.
DEFAULT_TIMEOUT_S = 5


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    hooks = subparsers.add_parser(
        "hooks",
        help="install or remove the agent hook that hands rules to Claude Code, Codex, "
        "Gemini CLI, Copilot CLI, Cursor, Qwen Code, Crush, Factory Droid, Augment Auggie, "
        "Cline CLI, opencode or pi",
        description="The hook runs before every shell command the agent runs and hands it "
        "the user's rules for the actions that command performs.",
    )
    verbs = hooks.add_subparsers(dest="verb", metavar="VERB", required=True)
    agents = sorted(AGENTS)

    install = verbs.add_parser(
        "install",
        parents=[common],
        help="add the hook to an agent's settings file",
        description="The hook's command line names the socket mentectl uses (`mentectl "
        "--socket PATH hooks install ...`, else $MENTED_SOCKET, else the default), so an agent "
        "started without that environment still finds the daemon; $MENTED_SOCKET in the "
        "agent's environment wins.",
    )
    install.add_argument("agent", choices=agents, metavar="AGENT", help=", ".join(agents))
    _settings_options(install)
    install.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter the hook runs with (default: the real binary behind this one)",
    )
    install.add_argument(
        "--timeout",
        type=int,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"the agent's limit on the hook process (default: {DEFAULT_TIMEOUT_S})",
    )
    install.add_argument(
        "--all-commands",
        action="store_true",
        help="run the hook for every shell command, not only those that mention an action's "
        "words (the agent's pre-filter, where it has one, is left out)",
    )
    install.set_defaults(handler=run_install)

    uninstall = verbs.add_parser(
        "uninstall", parents=[common], help="remove mented's hook entries, and nothing else"
    )
    uninstall.add_argument("agent", choices=agents, metavar="AGENT", help=", ".join(agents))
    _settings_options(uninstall)
    uninstall.set_defaults(handler=run_uninstall)

    status = verbs.add_parser(
        "status", parents=[common], help="where the hook is installed and whether it still works"
    )
    status.add_argument(
        "agent",
        nargs="?",
        choices=agents,
        metavar="AGENT",
        help=f"only this agent (default: every agent): {', '.join(agents)}",
    )
    status.add_argument("--settings", metavar="PATH", help="also look in this settings file")
    status.set_defaults(handler=run_status)

    command = verbs.add_parser(
        "command", parents=[common], help="print the hook command line, for installing by hand"
    )
    command.add_argument("agent", choices=agents, metavar="AGENT", help=", ".join(agents))
    command.add_argument("--python", metavar="PATH", help="the interpreter the hook runs with")
    command.set_defaults(handler=run_command)


def _settings_options(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--settings", metavar="PATH", help="the settings file to edit")
    where.add_argument(
        "--project",
        metavar="DIR",
        type=project_directory,
        help="edit the project's hook settings: a file not committed where the agent has one "
        "(DIR/.claude/settings.local.json), else DIR/.codex/hooks.json, DIR/.gemini/settings.json, "
        "DIR/.github/hooks/mented.json, DIR/.cursor/hooks.json, DIR/crush.json, "
        "DIR/.factory/hooks.json, DIR/.augment/settings.local.json, "
        "DIR/.clinerules/hooks/PreToolUse",
    )


def project_directory(value: str) -> Path:
    """argparse type for `--project`: an existing directory (`~` expanded, made absolute)."""
    path = Path(value).expanduser().absolute()
    if not path.is_dir():
        # As `rule add --project`: a typo would otherwise create DIR/.claude/ from nothing.
        raise argparse.ArgumentTypeError(
            f"project directory {value!r} ({path}) is not a directory; nothing was written"
        )
    return path


# --------------------------------------------------------------- the command line


def hook_command(
    agent: Agent, python: str | None = None, socket: str | None = None, event: str = EVENT_NAME
) -> str:
    """The shell command line the agent runs for each shell command (and for `event`).

    It runs the shim only while the interpreter and the shim exist, and else exits 0
    (`guarded_command`): a removed installation must never block the agent's commands.
    On `SessionStart`, an agent that shows a hook's `systemMessage` to the user is
    told instead that mented's hook no longer runs (`gone_notice`).

    Args:
        agent: the agent that runs it.
        python: the interpreter (default: the real binary behind this one).
        socket: mentectl's `--socket`; with `$MENTED_SOCKET` and the default it
            gives the socket written in as the shim's fallback argument.
        event: the event the entry is for.
    """
    try:
        interpreter = Path(python).absolute() if python else real_interpreter()
        shim = installed_shim()
    except SettingsError as exc:
        raise CommandError(str(exc)) from exc
    if python and not is_native_executable(interpreter):
        raise CommandError(f"{python} is not a native executable (a shim script?)")
    # The socket mentectl talks to is written in as the shim's fallback: an agent
    # started without this environment (a desktop launcher, an ssh session without
    # XDG_RUNTIME_DIR) would otherwise look in /tmp/mented-UID while the daemon
    # listens in /run/user/UID. $MENTED_SOCKET at run time still wins.
    fallback = paths.socket_path(socket).absolute()
    length = len(os.fsencode(fallback))
    if length > paths.MAX_SOCKET_PATH:
        # The shim could never connect to it, nor the daemon listen there.
        raise CommandError(
            f"socket path {fallback} is {length} bytes long; Unix sockets allow "
            f"{paths.MAX_SOCKET_PATH} on this system, so the hook could never reach mented; "
            "nothing was written. Choose a shorter path (`mentectl --socket PATH ...` or "
            "$MENTED_SOCKET), the same one the daemon uses (`mented --socket PATH`)."
        )
    argv = [str(interpreter), "-I", "-S", str(shim), agent.name, str(fallback)]
    notice = gone_notice(agent, shim) if event == SESSION_START and agent.user_notices else None
    return guarded_command(argv, notice=notice)


def gone_notice(agent: Agent, shim: Path) -> str:
    """What a session start shows the user once the hook's shim or interpreter is gone."""
    message = (
        f"mented: the hook no longer runs, {shim} or its Python is gone (mented uninstalled, "
        "its virtual environment deleted or its clone moved), so your rules are not handed "
        f"over. Install mented again and run `mentectl setup {agent.name}`, or remove the "
        f"hook entries that run shim.py from the {agent.title} settings."
    )
    return json.dumps({"systemMessage": message}, ensure_ascii=True)


def with_session_command(
    groups: dict[str, list[dict[str, Any]]], agent: Agent, command: str, session_command: str
) -> dict[str, list[dict[str, Any]]]:
    """`groups` (`Agent.hook_groups`) with `session_command` in the `SessionStart` entries."""
    if session_command == command or SESSION_START not in groups:
        return groups
    key = agent.layout.command_key

    def swap(entry: dict[str, Any]) -> dict[str, Any]:
        return {**entry, key: session_command} if entry.get(key) == command else entry

    session = [
        {**group, "hooks": [swap(hook) for hook in group["hooks"]]}
        if agent.layout.nested
        else swap(group)
        for group in groups[SESSION_START]
    ]
    return {**groups, SESSION_START: session}


def settings_paths(agent: Agent, args: argparse.Namespace) -> list[Path]:
    """The settings files a verb edits: where an install writes, then where older ones did.

    `--settings` and the user's file are one file. `--project` is the agent's
    local, uncommitted project file where it has one (the hook names this
    machine's interpreter and socket), then the shared project file that
    earlier installs wrote to: an install moves our entry out of it, an
    uninstall removes it from both.

    Raises:
        CommandError: a `--project` file is a symlink that leads out of the project
            (writing there would change a file the project does not own).
    """
    if getattr(args, "settings", None):
        return [Path(args.settings).expanduser().absolute()]
    project = getattr(args, "project", None)
    if not project:
        return [agent.settings_path()]
    found = agent.project_install_paths(project)
    for path in found:
        target = outside_link(path, project)
        if target is not None:
            raise CommandError(
                f"{path} leads outside the project, to {target}; nothing was written. "
                "Remove the link to keep the hook in the project, or pass "
                f"--settings {target} to edit that file on purpose."
            )
    return found


# ------------------------------------------------------------- the action table


def needs_in_force(socket: str | None) -> HookNeeds:
    """The tool calls the action table in force needs the hook for.

    Raises:
        CommandError: the config file cannot be used (registering from the
            built-ins alone would leave out the user's own tools, silently).
    """
    _, table, problem = table_in_force(socket)
    if problem:
        raise CommandError(f"{problem}; fix the config file, then run this again")
    return hook_needs(table, user_git_aliases())


def user_git_aliases() -> list[str]:
    """The names of the user's git aliases (system and global config), for the filter.

    A repository's own aliases are not known at install time: `git ALIAS` run
    there starts the hook only with `--all-commands` (see hooks/README.md).
    """
    return sorted(GitAliases().for_directory(str(paths.home())).table)


# ------------------------------------------------------------------------ verbs


def run_install(args: argparse.Namespace) -> int:
    agent = AGENTS[args.agent]
    if isinstance(agent, OpencodeAgent):  # a plugin file of mented's, not a settings entry
        from mented_client.commands import plugin_install  # noqa: PLC0415 - it imports this

        return plugin_install.run_install(args, agent)
    if isinstance(agent, ExtensionAgent):  # a plugin file of ours, no settings entry
        return extension.run_install(agent, args)
    if args.timeout < 1:
        raise CommandError("--timeout must be at least 1 second", status=2)
    path, *older = settings_paths(agent, args)
    command = hook_command(agent, args.python, args.socket)
    if agent.hook_file:
        return _install_hook_file(agent, path, command, json_output=args.json, project=args.project)
    session_command = hook_command(agent, args.python, args.socket, SESSION_START)
    needs = needs_in_force(args.socket)
    prefilter = not getattr(args, "all_commands", False)
    groups = with_session_command(
        agent.hook_groups(command, args.timeout, needs, prefilter=prefilter),
        agent,
        command,
        session_command,
    )
    try:
        previous = read_settings_at(path, args.project)
        layout = agent.layout
        before = find_entries(previous, path, installed_shim(), layout) if previous else []
        text = add_hook(
            previous or "",
            path,
            groups=groups,
            shim_path=installed_shim(),
            layout=layout,
        )
        changed = text != previous
        backup = write_atomically(path, text, backup=True) if changed else None
        if changed:
            note_added_settings(path, layout, previous or "", text, installed_before=bool(before))
        # An earlier install in the project's shared file would run the hook twice.
        moved = [
            (place, removal)
            for place in older
            if (
                removal := remove_from(
                    place,
                    agent,
                    up_to=cleanup_root(agent, place, args.project),
                    project=args.project,
                )
            ).removed
        ]
    except SettingsError as exc:
        raise CommandError(str(exc)) from exc
    except OSError as exc:
        raise CommandError(f"{path}: cannot write it: {exc}") from exc
    outcome = "unchanged" if not changed else "updated" if before or moved else "installed"
    trusted = changed and _all_trusted(agent, path, text)
    notes = [agent.install_note] if agent.install_note and changed and not trusted else []
    if trusted:
        notes.append(f"{agent.title} already trusts these entries: nothing to do there.")
    if args.project:
        notes.extend(_project_notes(agent, path))
    if args.json:
        print_json(
            {
                "agent": agent.name,
                "settings": str(path),
                "outcome": outcome,
                "changed": changed,
                "command": command,
                "timeout": args.timeout,
                "registered_for": agent.registration_summary(needs, prefilter=prefilter),
                "every_command": not prefilter,
                "backup": str(backup) if backup else None,
                "moved_from": [str(place) for place, _ in moved],
                "note": agent.install_note if agent.install_note in notes else None,
                "notes": notes,
            }
        )
        return 0
    where = display_path(path)
    if outcome == "unchanged":
        print(f"The mented hook for {agent.title} is already in {where}; nothing changed.")
    else:
        verb = "Updated" if outcome == "updated" else "Installed"
        print(f"{verb} the mented hook for {agent.title} in {where}.")
        print(f"  runs: {command}")
        print(f"  for: {agent.registration_summary(needs, prefilter=prefilter)}")
        if backup:
            print(f"  previous file saved as {display_path(backup)}")
    for place, removal in moved:
        print(
            f"Moved it out of {display_path(place)}, the project's shared file "
            f"({removal.in_words()})."
        )
    for note in notes:
        print(note)
    return 0


def _install_hook_file(
    agent: Agent, path: Path, command: str, *, json_output: bool, project: Path | None
) -> int:
    """`hooks install` for an agent whose hook is a file of its own (Cline)."""
    try:
        written = hook_files.install(agent, path, command)
    except SettingsError as exc:
        raise CommandError(str(exc)) from exc
    except OSError as exc:
        raise CommandError(f"{path}: cannot write it: {exc}") from exc
    outcome = "unchanged" if not written.changed else "updated" if written.replaced else "installed"
    notes = _project_notes(agent, path) if project else []
    if json_output:
        print_json(
            {
                "agent": agent.name,
                "settings": str(path),
                "outcome": outcome,
                "changed": written.changed,
                "command": command,
                "registered_for": agent.registration_summary(HookNeeds()),
                "notes": notes,
            }
        )
        return 0
    where = display_path(path)
    if outcome == "unchanged":
        print(f"The mented hook for {agent.title} is already in {where}; nothing changed.")
        return 0
    verb = "Updated" if written.replaced else "Installed"
    print(f"{verb} the mented hook for {agent.title}: {where}.")
    print(f"  runs: {command}")
    print(f"  for: {agent.registration_summary(HookNeeds())}")
    for note in notes:
        print(note)
    return 0


def note_added_settings(
    path: Path, layout: SettingsLayout, previous: str, text: str, *, installed_before: bool
) -> None:
    """Record whether the install added the layout's `enable` setting (`added_settings`).

    Found there with no record and mented's entries already in the file (an install
    older than the record): nothing is recorded, and the uninstall keeps the old rule.
    """
    if layout.enable is None:
        return
    setting = ".".join(layout.enable)
    added = not has_setting(previous, *layout.enable) and has_setting(text, *layout.enable)
    if not added and installed_before and added_settings.added_by_mented(path, setting) is None:
        return
    try:
        added_settings.note_install(path, setting, added=added)
    except OSError as exc:
        print(
            f"mentectl: cannot record in {display_path(added_settings.record_path())} that "
            f"mented set {setting} in {display_path(path)} ({exc.strerror or exc}): "
            "`hooks uninstall` will take it out only with the file's last hook",
            file=sys.stderr,
        )


def _all_trusted(agent: Agent, path: Path, text: str) -> bool:
    """Whether the agent already runs every entry of ours in `text` (Codex trusts its
    hooks one by one: an install that left them as they were needs no new trust)."""
    if agent.entry_trust is None:
        return False
    entries = find_entries(text, path, installed_shim(), agent.layout)
    return bool(entries) and all(
        agent.entry_trust(
            InstalledEntry(path, e.event, e.group, e.hook, e.handler, e.matcher)
        ).problem
        is None
        for e in entries
    )


def _project_notes(agent: Agent, path: Path) -> list[str]:
    """What to know about a project install: the file is committed, or git would commit it."""
    if agent.project_local_file is None:
        return [
            agent.no_project_local_file
            or f"{agent.title} has no uncommitted project file that mented knows of, so this "
            "file names this machine's interpreter and socket: keep it out of git (add it to "
            f".git/info/exclude), or install for your user instead (`mentectl hooks install "
            f"{agent.name}`)."
        ]
    if git_ignores(path) is False:
        name = agent.project_local_file
        return [
            f"git does not ignore {name} in this repository: add it to .gitignore (or "
            ".git/info/exclude) so that this machine's paths are not committed."
        ]
    return []


@dataclass(frozen=True)
class Removal:
    """What taking our entries out of one settings file did."""

    removed: int = 0
    backup: Path | None = None  # an older copy beside the file, kept: it differs from it
    deleted: bool = False  # the file held nothing else, and is gone
    directories: tuple[Path, ...] = ()  # directories left empty by that, removed too

    def in_words(self) -> str:
        entries = "entry" if self.removed == 1 else "entries"
        if self.deleted:
            return f"{self.removed} mented hook {entries} removed; it held nothing else and is gone"
        return f"{self.removed} mented hook {entries} removed, nothing else changed"


def cleanup_root(agent: Agent, path: Path, project: Path | None = None) -> Path | None:
    """The highest directory an uninstall may remove once it is empty, for the file `path`.

    The agent's config directory for its user file (`~/.gemini`), the project's
    top directory of the file for a project file (`.claude`, `.github`); none
    for a file named with `--settings`.
    """
    if path == agent.settings_path():
        return agent.config_dir()
    if project is not None and path.is_relative_to(project) and path != project:
        return project / path.relative_to(project).parts[0]
    return None


def remove_from(
    path: Path, agent: Agent, *, up_to: Path | None = None, project: Path | None = None
) -> Removal:
    """Take `agent`'s hook entries out of the settings file at `path`.

    A file left as an empty object (`{}`: the install created it, or it held
    nothing else), or a hooks-only file left without hooks, is removed rather
    than left behind, and so are the directories that leaves empty, up to
    `up_to` (`cleanup_root`). A symlinked file (a dotfiles checkout) stays, as `{}`.

    No backup is written: what goes is mented's own, and every other member of
    the file is checked to be as it was. The install's backup goes too once it
    holds nothing the file does not (`settle_backup`); one that differs stays.

    Raises:
        SettingsError: the file cannot be read as settings, or removing our
            entries would change anything else.
        OSError: it cannot be written.
    """
    if agent.hook_file:
        found, emptied = hook_files.uninstall(path, up_to=up_to)
        return Removal(int(found), deleted=found, directories=tuple(emptied))
    previous = read_settings_at(path, project)
    if not previous:
        return Removal()
    layout = agent.layout
    setting = ".".join(layout.enable) if layout.enable else None
    enable_added = added_settings.added_by_mented(path, setting) if setting else None
    text, removed = remove_hooks(
        previous, path, installed_shim(), layout, enable_added=enable_added
    )
    if not removed:
        return Removal()
    ours = {"hooks", *layout.top, *(layout.enable[:1] if layout.enable else ())}
    ours.update(layout.disabled[:1] if layout.disabled else ())
    backup, directories = write_without_ours(
        path, previous, text, ours, agent, up_to=up_to, enable_added=enable_added
    )
    if setting:
        # A record left behind only makes a later uninstall fall back to the old rule.
        with contextlib.suppress(OSError):
            added_settings.forget(path)
    if directories is not None:
        return Removal(removed, backup, deleted=True, directories=tuple(directories))
    return Removal(removed, backup)


def run_uninstall(args: argparse.Namespace) -> int:
    agent = AGENTS[args.agent]
    if isinstance(agent, ExtensionAgent):
        return extension.run_uninstall(agent, args)
    places = settings_paths(agent, args)
    project = getattr(args, "project", None)
    # Codex keeps the user's trust in each entry by its place in hooks.json: found first.
    trusted = codex_trust_keys(agent, places)
    removals = uninstall_hook(agent, places, project)
    untrusted = forget_codex_trust(trusted) if trusted else []
    found = [(path, removal) for path, removal in removals if removal.removed]
    if args.json:
        first = found[0] if found else (places[0], Removal())
        print_json(
            {
                "agent": agent.name,
                "settings": str(first[0]),
                "removed": sum(removal.removed for _, removal in removals),
                "backup": str(first[1].backup) if first[1].backup else None,
                "files": [
                    {
                        "settings": str(path),
                        "removed": removal.removed,
                        "backup": str(removal.backup) if removal.backup else None,
                        "deleted": removal.deleted,
                        "directories_removed": [str(d) for d in removal.directories],
                    }
                    for path, removal in removals
                ],
                "trust_removed": untrusted,
            }
        )
        return 0
    for line in uninstall_lines(agent, places, removals) + untrusted:
        print(line)
    return 0


def codex_trust_keys(agent: Agent, places: list[Path]) -> set[str]:
    """The `hooks.state` keys of mented's Codex entries in `places` (none for other agents)."""
    if agent.name != "codex":
        return set()
    return {key for path in places for key in codex_trust.mented_state_keys(path)}


def forget_codex_trust(keys: set[str]) -> list[str]:
    """Take Codex's trust entries of `keys` out of its config.toml; what was done.

    Raises:
        CommandError: config.toml cannot be edited safely (the hook is gone already:
            the message says which entries are left to remove by hand).
    """
    try:
        return codex_trust.forget_trust(keys)
    except CommandError as exc:
        raise CommandError(f"the hook is removed, but not Codex's trust entries: {exc}") from exc


def uninstall_hook(
    agent: Agent, places: list[Path], project: Path | None = None
) -> list[tuple[Path, Removal]]:
    """Take the agent's hook entries out of each of `places` (`remove_from`).

    Raises:
        CommandError: a file cannot be read as settings or cannot be written.
    """
    if isinstance(agent, OpencodeAgent):
        from mented_client.commands import plugin_install  # noqa: PLC0415 - it imports this

        return plugin_install.uninstall_places(agent, places, project)
    try:
        return [
            (
                path,
                remove_from(path, agent, up_to=cleanup_root(agent, path, project), project=project),
            )
            for path in places
        ]
    except SettingsError as exc:
        raise CommandError(str(exc)) from exc
    except OSError as exc:
        raise CommandError(f"cannot write the settings file: {exc}") from exc


def uninstall_lines(
    agent: Agent, places: list[Path], removals: list[tuple[Path, Removal]]
) -> list[str]:
    """What `uninstall_hook` did, for people."""
    if isinstance(agent, OpencodeAgent):
        from mented_client.commands import plugin_install  # noqa: PLC0415 - it imports this

        return plugin_install.uninstall_lines(agent, places, removals)
    lines = []
    found = [(path, removal) for path, removal in removals if removal.removed]
    for path, removal in found:
        where = display_path(path)
        entries = "entry" if removal.removed == 1 else "entries"
        if removal.deleted:
            lines.append(
                f"Removed {removal.removed} mented hook {entries} from {where}; it held nothing "
                "else, so it is removed."
            )
            lines.extend(
                f"  {display_path(directory)} was left empty: removed too"
                for directory in removal.directories
            )
        else:
            lines.append(
                f"Removed {removal.removed} mented hook {entries} from {where}; nothing else "
                "changed."
            )
        if removal.backup:
            lines.append(f"  {backup_kept(removal.backup)}")
    if not found:
        where = " or ".join(display_path(path) for path in places)
        lines.append(f"No mented hook for {agent.title} in {where}; nothing changed.")
    return lines


@dataclass
class HookCheck:
    """One installed entry and whether it can still run."""

    command: str
    timeout: object
    interpreter: str | None
    shim: str | None
    socket: str | None  # the shim's fallback when the agent's environment names none
    problems: list[str]  # fixed by installing again
    event: str = EVENT_NAME
    trust: str | None = None  # the agent's own verdict, where it has one (Codex)
    trust_problem: str | None = None  # why the agent will not run it
    trust_fix: str | None = None  # the step that makes it run
    # The line exits 0 once the shim or interpreter is gone (`guarded_command`); older
    # installs' did not (exit 2: the agent blocked every command).
    guarded: bool = True


@dataclass
class SettingsPlace:
    """One settings file and the mented entries in it."""

    settings: str
    exists: bool
    hooks: list[HookCheck] = field(default_factory=list)
    error: str | None = None
    missing: list[str] = field(default_factory=list)  # events without our entry (older install)
    # The tool calls the action table names that no installed entry runs for.
    gaps: list[str] = field(default_factory=list)

    @property
    def broken(self) -> bool:
        """Whether something here keeps rules from reaching the agent."""
        return (
            self.error is not None
            or bool(self.missing)
            or bool(self.gaps)
            or any(hook.problems or hook.trust_problem for hook in self.hooks)
        )


def missing_problem(events: list[str]) -> str:
    """What a settings file without our entry for `events` lacks (an older install)."""
    what = {
        SESSION_START: "so pinned rules are not handed over at session start, nor rules "
        "again after the context is compacted or cleared"
    }
    return "; ".join(
        f"no {event} entry" + (f", {what[event]}" if event in what else "") for event in events
    )


def check_agent_entry(agent: Agent, path: Path, entry: MentedEntry) -> HookCheck:
    """`check_entry`, plus whether the agent itself will run the entry."""
    check = check_entry(entry)
    check.event = entry.event
    if agent.pinned_rules and entry.event == SESSION_START and entry.matcher is not None:
        missed = set(SESSION_START_MATCHER.split("|")) - set(entry.matcher.split("|"))
        if {"startup", "resume"} & missed:
            check.problems.append(
                f"runs only on {entry.matcher} (an older install), so pinned rules miss "
                "new sessions: install the hook again"
            )
    if agent.entry_trust is not None:
        verdict = agent.entry_trust(
            InstalledEntry(path, entry.event, entry.group, entry.hook, entry.handler, entry.matcher)
        )
        check.trust, check.trust_problem, check.trust_fix = (
            verdict.state,
            verdict.problem,
            verdict.fix,
        )
    return check


def check_entry(entry: MentedEntry) -> HookCheck:
    """Whether the interpreter and the shim an entry runs still exist."""
    run = command_argv(entry.command)
    argv = run.argv if run is not None else []
    interpreter = Path(argv[0]) if argv else None
    at = next((i for i, arg in enumerate(argv) if Path(arg).name == "shim.py"), None)
    shim = None if at is None else Path(argv[at])
    # After the shim: the agent's name, then the fallback socket (older installs had none).
    socket = argv[at + 2] if at is not None and len(argv) > at + 2 else None
    problems = []
    if interpreter is None or not interpreter.exists():
        problems.append(f"interpreter {interpreter} is missing: reinstall the hook")
    elif not is_native_executable(interpreter.resolve()):
        problems.append(f"interpreter {interpreter} is a script (slow): reinstall the hook")
    if shim is None or not shim.is_file():
        problems.append(f"shim {shim} is missing: reinstall the hook")
    return HookCheck(
        command=entry.command,
        timeout=entry.timeout,
        interpreter=str(interpreter) if interpreter else None,
        shim=str(shim) if shim else None,
        socket=socket,
        problems=problems,
        guarded=run is not None and run.guarded,
    )


def gaps_problem(gaps: list[str]) -> str:
    """What a registration that misses these tool calls means."""
    return "the hook is not registered for " + "; ".join(gaps) + ", which the action table names"


def gaps_fix(agent: Agent, where: Path) -> str:
    """The step that registers the hook for what the table names, in that settings file."""
    user = where == agent.settings_path()
    option = "" if user else f" --settings {shlex.quote(str(where))}"
    fix = f"`mentectl hooks install {agent.name}{option}` again"
    if agent.entry_trust is not None:
        fix += ", then trust the changed entries in the agent (see its note)"
    return fix


def _places(agent: Agent, extra: str | None, needs: HookNeeds | None = None) -> list[SettingsPlace]:
    """The agent's user settings, its project settings here (if any) and `extra`.

    With `needs`, each place with our entries also says which of those tool
    calls none of them runs for (`gaps`).
    """
    if isinstance(agent, OpencodeAgent):  # the plugin sees every call: no gaps
        from mented_client.commands import plugin_install  # noqa: PLC0415 - it imports this

        return plugin_install.places(agent, extra)
    user = agent.settings_path()
    here = Path.cwd()
    paths = [user, *agent.project_install_paths(here)]
    extra_path = Path(extra).expanduser().absolute() if extra else None
    if extra_path is not None:
        paths.append(extra_path)
    places = []
    for path in dict.fromkeys(paths):  # unique, in order
        try:
            # The user's file, and `extra` named on the command line, are theirs; the
            # directory's own files are the project's (a cloned repository's).
            if agent.hook_file:
                try:
                    text = hook_files.read_hook_file(path)
                except SettingsError:
                    text = ""  # a link, a FIFO, ...: the user's, not mented's hook
            else:
                text = read_settings_at(path, None if path in (user, extra_path) else here)
        except SettingsError as exc:
            places.append(SettingsPlace(settings=str(path), exists=True, error=str(exc)))
            continue
        if text is None and path != user:
            continue
        place = SettingsPlace(settings=str(path), exists=text is not None)
        try:
            entries = (
                hook_files.entries_in(agent, text)
                if agent.hook_file
                else find_entries(text, path, installed_shim(), agent.layout)
                if text and text.strip()
                else []
            )
        except SettingsError as exc:
            place.error = str(exc)
            entries = []
        place.hooks = [check_agent_entry(agent, path, entry) for entry in entries]
        place.missing = missing_events(entries, agent.hook_events) if entries else []
        if entries and needs is not None:
            place.gaps = agent.registration_gaps(
                [
                    InstalledEntry(path, e.event, e.group, e.hook, e.handler, e.matcher)
                    for e in entries
                ],
                needs,
            )
        places.append(place)
    return places


def registration_warnings(
    in_force: TableInForce, actions: Collection[str] | None = None
) -> list[str]:
    """Each installed hook that misses tool calls of the table in force, with the fix.

    The check `hooks status` and `doctor` make (each agent's `registration_gaps`),
    for `reload` and `rule add`: Claude Code's `if` filters are computed from the
    table at install, so an action added since never starts the hook. `actions`:
    only those actions' tool calls (a rule just added for one). None when the
    table cannot be used (the caller says why).
    """
    if in_force.problem:
        return []
    needs = hook_needs(in_force.table, user_git_aliases(), only=actions)
    warnings = []
    for _, agent in sorted(AGENTS.items()):
        if isinstance(agent, ExtensionAgent):  # it hands over every call: no gaps
            continue
        for place in _places(agent, None, needs):
            if place.gaps:
                where = display_path(Path(place.settings))
                fix = gaps_fix(agent, Path(place.settings))
                warnings.append(f"{where}: {gaps_problem(place.gaps)}: run {fix}")
    return warnings


def status_needs(socket: str | None) -> HookNeeds | None:
    """The tool calls the table in force needs, to check registrations by; None: unusable."""
    _, table, problem = table_in_force(socket)
    return None if problem else hook_needs(table, user_git_aliases())


def run_status(args: argparse.Namespace) -> int:
    chosen = [args.agent] if getattr(args, "agent", None) else sorted(AGENTS)
    in_process = {name: a for name in chosen if isinstance(a := AGENTS[name], ExtensionAgent)}
    needs = status_needs(args.socket)
    report = {
        name: _places(AGENTS[name], args.settings, needs)
        for name in chosen
        if name not in in_process
    }
    broken = any(place.broken for places in report.values() for place in places)
    if args.json:
        found = msgspec.to_builtins(report)
        found.update({n: extension.status_json(a, args.settings) for n, a in in_process.items()})
        broken = broken or any(
            item["error"] or item["state"] not in ("installed", "not installed")
            for name in in_process
            for item in found[name]
        )
        print_json(found)
        return 1 if broken else 0
    for name in chosen:
        if name in in_process:
            broken = extension.print_status(in_process[name], args.settings) or broken
            continue
        places = report[name]
        agent = AGENTS[name]
        print(f"{name} ({agent.title})")
        for place in places:
            where = escape_controls(display_path(Path(place.settings)), keep_lines=False)
            if place.error:
                print(f"  {where}: {escape_controls(place.error)}")
            elif not place.hooks:
                print(f"  {where}: not installed" + ("" if place.exists else " (no such file)"))
            shown: set[tuple[str, str | None]] = set()
            # One line per event and verdict: a filtered install has a handler per condition.
            lines: dict[str, int] = {}
            for hook in place.hooks:
                problems = [*hook.problems]
                if hook.trust_problem:
                    problems.append(f"{hook.trust_problem}; to fix: {hook.trust_fix}")
                trust = f" ({hook.trust})" if hook.trust and not hook.trust_problem else ""
                said = escape_controls("; ".join(problems), keep_lines=False) or "ok"
                line = f"  {where}: {hook.event} installed{trust}, {said}"
                lines[line] = lines.get(line, 0) + 1
            for line, count in lines.items():
                print(line + (f" ({count} handlers)" if count > 1 else ""))
            for hook in place.hooks:
                if (hook.command, hook.socket) in shown:
                    continue
                shown.add((hook.command, hook.socket))
                print(f"    runs: {escape_controls(hook.command, keep_lines=False)}")
                fallback = hook.socket or "the agent's $MENTED_SOCKET, else the default"
                print(f"    socket: {escape_controls(fallback, keep_lines=False)}")
            if place.missing:
                print(
                    f"  {where}: {missing_problem(place.missing)} (an older install): "
                    f"run `mentectl hooks install {name}` again"
                )
            if place.gaps:
                fix = gaps_fix(agent, Path(place.settings))
                said = escape_controls(gaps_problem(place.gaps), keep_lines=False)
                print(f"  {where}: {said}: run {fix}")
    return 1 if broken else 0


def run_command(args: argparse.Namespace) -> int:
    agent = AGENTS[args.agent]
    if isinstance(agent, OpencodeAgent):
        raise CommandError(
            f"{agent.title} runs no hook command: it loads mented's plugin, which "
            f"`mentectl hooks install {agent.name}` writes",
            status=2,
        )
    if isinstance(agent, ExtensionAgent):
        raise extension.refuse_command(agent)
    command = hook_command(agent, args.python, args.socket)
    if args.json:
        print_json({"agent": agent.name, "command": command, "timeout": DEFAULT_TIMEOUT_S})
    else:
        print(command)
    return 0
