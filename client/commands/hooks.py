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
from collections.abc import Collection
from pathlib import Path

from mented.actions import TableInForce
from mented.agents import AGENTS
from mented.registration import hook_needs
from mented_client.agents import client_of
from mented_client.agents.base import (
    DEFAULT_TIMEOUT_S,
    hook_command,
    status_needs,
    user_git_aliases,
)
from mented_client.commands.output import print_json


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
