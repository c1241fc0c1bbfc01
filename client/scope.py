"""What a rule names, as a person (`mentectl rule`) or a model (the MCP server) gives it.

The store takes any agent name and any absolute directory. These checks refuse,
before anything is stored, the scopes that would make a rule never fire (an
agent the hook does not serve, a directory that does not exist) or fire
everywhere (a blank directory read as "no project"). The MCP server turns the
`InvalidInputError` into a tool error; `mentectl` uses the argparse types below.

The action a rule names is checked against the daemon's action table
(`daemon_table`), because that is the table the hook matches commands with;
`daemon_has_action` asks the daemon for its names alone, so that a command that
needs no more of the table does not load it (`mented.actions` and what it
imports are most of `mentectl rule list --action`'s start-up). For the same
reason the agents are checked by name (`mented.agent_names`), not by adapter.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mented.agent_names import AGENT_NAMES
from mented.memory import InvalidInputError, action_from_input
from mented.protocol import ActionsReply, ActionsRequest, StatusReply, StatusRequest

if TYPE_CHECKING:
    from mented.actions import TableInForce
    from mented_client.connection import Client


def check_agent(name: str) -> str:
    """The agent `name` (lower-cased) when the hook serves it.

    Raises:
        InvalidInputError: a rule scoped to any other name would never fire; the
            message lists the agents there are.
    """
    agent = name.strip().lower()
    if agent in AGENT_NAMES:
        return agent
    from mented_client.suggest import did_you_mean  # noqa: PLC0415 - errors only

    raise InvalidInputError(
        f"unknown agent {name!r}{did_you_mean(agent, AGENT_NAMES)}: a rule scoped to it would "
        f"never fire; use one of: {', '.join(sorted(AGENT_NAMES))}"
    )


def daemon_table(client: Client) -> TableInForce:
    """The action table of the daemon `client` talks to, loaded from its config file.

    The daemon names the file it was started with (`--config`, `$MENTED_CONFIG`
    or the default), which need not be the one this process would find.
    While the file on disk is invalid, the daemon runs on the one it loaded before
    and sends its text: that table is the one in force, and a warning says the
    file is invalid.
    """
    from mented.actions import load_table_in_force  # noqa: PLC0415 - see the module docstring

    status = _status_warned(client)
    path = Path(status.config) if status.config else None
    if status.config_error and status.config_in_force is not None:
        return load_table_in_force(path, text=status.config_in_force)
    return load_table_in_force(path)


# Short: a command that asks a daemon that is not there should not be slowed down.
CONNECT_TIMEOUT = 0.2


def table_in_force(socket: str | None) -> TableInForce:
    """The running daemon's action table (`daemon_table`), else the config file's here.

    The config file here is the one a daemon started now would read.
    """
    from mented import paths  # noqa: PLC0415 - see the module docstring
    from mented.actions import load_table_in_force  # noqa: PLC0415 - see the module docstring
    from mented_client.connection import Client, NotRunningError  # noqa: PLC0415 - as above

    try:
        with Client(socket, connect_timeout=CONNECT_TIMEOUT) as client:
            return daemon_table(client)
    except NotRunningError:
        return load_table_in_force(paths.config_path(None))


def daemon_has_action(client: Client, action: str) -> str | None:
    """`action` normalized when the daemon's table in force has it; else None.

    The quick check, with the daemon's names only; on None, `daemon_table` and
    `check_action` say what is wrong and suggest names. Warns as `daemon_table` does.
    """
    _status_warned(client)
    try:
        name = action_from_input(action)
    except InvalidInputError:
        return None
    names = {summary.name for summary in client.expect(ActionsRequest(), ActionsReply).actions}
    return name if name in names else None


def _status_warned(client: Client) -> StatusReply:
    """The daemon's status, with a warning when it runs on a config that is not the file's."""
    status = client.expect(StatusRequest(), StatusReply)
    if status.config_error and status.config_in_force is not None:
        print(
            "mentectl: warning: the config file is invalid; shown here is what the daemon "
            f"runs on: {status.config_error}",
            file=sys.stderr,
        )
    return status


def project_dir(directory: str, *, base: str) -> str:
    """`directory` as an absolute path resolved through symlinks (`~` expanded, relative to `base`).

    Resolved, so that a rule given through a link and one given by its target are
    the same project; the store resolves the agent's working directory too, so
    the rule is seen from the link and from the target alike.

    Raises:
        InvalidInputError: it is blank, or not an existing directory.
    """
    if not directory.strip():
        raise InvalidInputError(
            "a project directory cannot be blank; leave it out for a rule seen in every directory"
        )
    path = os.path.realpath(os.path.join(base, os.path.expanduser(directory)))  # noqa: PTH111, PTH118 - strings in, a string out
    if not Path(path).is_dir():
        raise InvalidInputError(f"project directory {directory!r} ({path}) is not a directory")
    return path


# ------------------------------------------------------- as mentectl options


def agent_option(name: str) -> str:
    """argparse type for `--agent`: an agent the hook serves."""
    try:
        agent = check_agent(name)
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return agent


def project_option(directory: str) -> str:
    """argparse type for `--project`: an existing directory, absolute and normalized."""
    try:
        path = project_dir(directory, base=os.getcwd())  # noqa: PTH109 - lexical, like the hook's cwd
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return path


def directory_option(directory: str) -> str:
    """argparse type for `--cwd`: absolute and normalized; it need not exist here."""
    return os.path.normpath(os.path.join(os.getcwd(), os.path.expanduser(directory)))  # noqa: PTH109, PTH111, PTH118 - lexical


def count_option(value: str) -> int:
    """argparse type for a count (`rule list -k`, `log -n`): 1 or more.

    0 or less would print "no rules" and exit 0, as if there were none.
    """
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        msg = f"{value!r} is not a count: give 1 or more"
        raise argparse.ArgumentTypeError(msg)
    return count
