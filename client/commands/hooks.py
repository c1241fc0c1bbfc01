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
import json
import os
import shlex
from collections.abc import Collection
from pathlib import Path

from mented import paths
from mented.actions import TableInForce
from mented.agents import AGENTS, Agent
from mented.agents.pretooluse import EVENT_NAME, SESSION_START
from mented.git_aliases import GitAliases
from mented.registration import HookNeeds, hook_needs
from mented_client.agents import client_of
from mented_client.agents.base import HookCheck, Removal, SettingsPlace
from mented_client.commands.output import CommandError, escape_controls, print_json
from mented_client.files import display_path
from mented_client.hook_settings import (
    MentedEntry,
    SettingsError,
    command_argv,
    guarded_command,
    installed_shim,
    is_native_executable,
    outside_link,
    real_interpreter,
)
from mented_client.scope import table_in_force

__all__ = ["HookCheck", "Removal", "SettingsPlace"]  # the shapes of what a verb found

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


def missing_problem(events: list[str]) -> str:
    """What a settings file without our entry for `events` lacks (an older install)."""
    what = {
        SESSION_START: "so pinned rules are not handed over at session start, nor rules "
        "again after the context is compacted or cleared"
    }
    return "; ".join(
        f"no {event} entry" + (f", {what[event]}" if event in what else "") for event in events
    )


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


def status_needs(socket: str | None) -> HookNeeds | None:
    """The tool calls the table in force needs, to check registrations by; None: unusable."""
    _, table, problem = table_in_force(socket)
    return None if problem else hook_needs(table, user_git_aliases())


# ------------------------------------------------------------------------ verbs


def run_install(args: argparse.Namespace) -> int:
    return client_of(args.agent).install(args)


def run_uninstall(args: argparse.Namespace) -> int:
    return client_of(args.agent).uninstall(args)


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
    return [
        warning
        for name in sorted(AGENTS)
        for warning in client_of(name).registration_warnings(needs)
    ]


def run_status(args: argparse.Namespace) -> int:
    chosen = [args.agent] if getattr(args, "agent", None) else sorted(AGENTS)
    needs = status_needs(args.socket)
    if args.json:
        found = {}
        broken = False
        for name in chosen:
            found[name], failed = client_of(name).status(args.settings, needs)
            broken = broken or failed
        print_json(found)
        return 1 if broken else 0
    broken = False
    for name in chosen:
        broken = client_of(name).print_status(args.settings, needs) or broken
    return 1 if broken else 0


def print_places(agent: Agent, places: list[SettingsPlace]) -> None:
    """`hooks status` lines for an agent's settings files."""
    name = agent.name
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


def run_command(args: argparse.Namespace) -> int:
    agent = AGENTS[args.agent]
    refused = client_of(agent.name).refuse_command()
    if refused is not None:
        raise refused
    command = hook_command(agent, args.python, args.socket)
    if args.json:
        print_json({"agent": agent.name, "command": command, "timeout": DEFAULT_TIMEOUT_S})
    else:
        print(command)
    return 0
