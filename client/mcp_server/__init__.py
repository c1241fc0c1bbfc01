"""mented's MCP server: the agent's tools to remember, supersede and inspect the user's rules.

`mentectl mcp` runs it on stdio; the agent (Claude Code, Codex, ...) spawns it
once per session. It is a client of the daemon over the socket, like
`mentectl`: every tool call is one short connection, so a daemon restarted in
the middle of a session is simply found again. When the daemon is down, each
tool answers with an error saying how to start it, and the server keeps running.

Rules are memories tagged `trigger:<action>`. The action is checked against
the same action table the daemon uses (its built-ins plus the user's config
file, found through the daemon's status), because a rule for an action the hook
never names would never fire. The known actions are listed in the tool's
description and an unknown one is refused with the closest known names, by the
same check as `mentectl rule add` (`mented.actions.check_action`); a project
directory is resolved as `mentectl` resolves it (`mented_client.scope`).

Every answer names memories by their short handle (`mented.memory.short_handle`,
the same handle the hook shows next to each rule it injects), so the model can
go from "the rule you were just shown" to `supersede_rule` in one step. The
tools also accept full ids.

Built on the official MCP Python SDK (2.x, `mcp.server.mcpserver.MCPServer`),
an optional dependency (`pip install 'mented[mcp]'`): the daemon and the hook
never import it, and `mentectl` imports this module only for `mentectl mcp`.
Tool functions are synchronous; the SDK runs them on worker threads, so the
blocking socket client does not stall the stdio loop.

Layout: `bridge.py` talks to the daemon for the tools, `schema.py` holds the
tools' shared arguments and their answers, `rule_tools.py` the tools for action
rules, `lookup_tools.py` those of pinned rules and facts; this module puts the
server together. `mented_client.mcp_front` answers the first requests while this
package is imported (seconds), and hands the connection over to it (`run`);
`wire.py` takes the answers it gives from the SDK.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

from mented import __version__
from mented.actions import TableInForce
from mented.agents import DEFAULT_AGENT
from mented_client import mcp_front
from mented_client.mcp_front import describe_actions
from mented_client.mcp_server.bridge import Bridge
from mented_client.mcp_server.lookup_tools import add_pin_rule, add_recall, add_remember
from mented_client.mcp_server.rule_tools import (
    add_forget_rule,
    add_list_rules,
    add_remember_rule,
    add_rule_history,
    add_rules_for_action,
    add_supersede_rule,
)

SERVER_NAME = "mented"

INSTRUCTIONS = """\
mented keeps the user's rules and hands each one to you right before you run the \
command it governs (a `trigger:<action>` rule, e.g. for git-commit, pr-create).
- The user states how something must be done ("from now on, commit messages are one \
line with a conventional prefix"): remember_rule with the action it governs.
- A fact or an event worth keeping that governs no particular command: remember; \
find facts later by their words with recall (e.g. before asking the user something \
they may have told you in an earlier session).
- A rule for everything you do, not one kind of command ("always answer in British \
English"): pin_rule. Pinned rules reach you at the start of every session; there is \
room for only a handful, so prefer remember_rule whenever the rule is about an action.
- The user changes their mind about an existing rule ("we switched from squash merges \
to rebase"): supersede_rule with the rule's handle (shown in brackets next to each rule \
mented hands you, or found with rules_for_action / list_rules). Do not add a second, \
contradicting rule: the old one would keep firing.
- "What was the old rule?": rule_history.
"""


def make_server(
    *,
    agent: str = DEFAULT_AGENT,
    socket_path: str | Path | None = None,
    cwd: str | None = None,
    in_force: TableInForce | None = None,
) -> MCPServer:
    """The MCP server with its tools, bridging to the daemon at `socket_path`.

    Args:
        agent: the agent this server serves: the scope of "this agent only", and
            whose view `rules_for_action` shows.
        socket_path: the daemon's socket (default: as `mentectl` finds it).
        cwd: the project directory of the session (default: the working directory).
        in_force: the action table for the tools' descriptions (default: the
            daemon's, else the config file's: `mcp_front.startup_table`).
    """
    bridge = Bridge(
        socket_path=Path(socket_path) if socket_path else None,
        agent=agent,
        cwd=os.path.abspath(cwd or os.getcwd()),  # noqa: PTH100, PTH109 - lexical, like the hook's cwd
    )
    if in_force is None:
        in_force = mcp_front.startup_table(socket_path)
    # With what each action is, where the model picks one.
    return _with_tools(bridge, describe_actions(in_force.table), ", ".join(in_force.table.names()))


def marked_server() -> MCPServer:
    """The server with the front's marks where the known actions go (`wire.py`)."""
    bridge = Bridge(socket_path=None, agent=DEFAULT_AGENT, cwd=os.sep)
    return _with_tools(bridge, mcp_front.KNOWN_TEXT, mcp_front.KNOWN_NAMES)


def _with_tools(bridge: Bridge, known_text: str, known_names: str) -> MCPServer:
    server = MCPServer(
        SERVER_NAME,
        title="mented: the user's rules for actions",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )

    # In the order the model is shown them: storing first, then finding and changing.
    add_remember_rule(server, bridge, known_text)
    add_remember(server, bridge)
    add_pin_rule(server, bridge)
    add_recall(server, bridge)
    add_rules_for_action(server, bridge, known_names)
    add_list_rules(server, bridge)
    add_supersede_rule(server, bridge)
    add_rule_history(server, bridge)
    add_forget_rule(server, bridge)
    return server


def run(
    *,
    agent: str,
    socket_path: str | Path | None,
    cwd: str | None = None,
    in_force: TableInForce | None = None,
) -> None:
    """Serve on stdin/stdout until the client closes the connection (taking it over
    from the front when one answered the first requests)."""
    server = make_server(agent=agent, socket_path=socket_path, cwd=cwd, in_force=in_force)
    front = mcp_front.active()
    if front is None:
        server.run("stdio")
        return
    from mented_client.mcp_server.wire import serve_on  # noqa: PLC0415 - with the front only

    front.hand_over(lambda stdin_fd, stdout_fd: serve_on(server, stdin_fd, stdout_fd))
