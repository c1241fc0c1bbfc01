"""The calling side of mented, installed as `mented_client`.

General layout, lowest first (imports point up this list, never down it):

- `shim.py`            the hook shim the agent spawns per shell command. Standard
                       library only (and as little of it as possible): it knows the
                       socket and nothing else. It is run by path, never imported.
- `connection.py`      a small synchronous client for the daemon's socket, for
                       `mentectl`, editors and scripts.
- `errors.py`          `CommandError`: a failure `mentectl` shows as it is.
- `files.py`           writing the user's files (agent settings, Codex's config,
                       service units): atomically, through a symlink, with a backup.
- `hook_settings/`     the hook's command line and our entry in an agent's JSON
                       settings, spliced in without rewriting the rest.
- `service_files.py`   the systemd units and the launchd plist, rendered.
- `scope.py`           checks on what a rule names (agent, project directory), and
                       the daemon's action table the action is checked against.
- `service_manager.py` systemd --user and launchd: install, start, stop; the
                       interpreter mented runs with.
- `mcp_server/`        the MCP server: the agent's tools, a client of the daemon;
                       the tools for action rules and those of the other lookups
                       in a module each.
- `bench/`             `mentectl bench`: runs daemons of its own and measures them,
                       one module per thing measured; `python -m mented_client.bench`
                       runs the benchmarks of one part by hand.
- `agents/`            each agent's side of `hooks`, `setup`, `uninstall`, `doctor`
                       and `mcp install`: one module per agent (`client_of(name)`),
                       one class per kind of install, and what they share (`base.py`:
                       the hook's command line, where it goes, how it is checked).
- `commands/`          `mentectl`'s verbs, one module per group, and `output.py`,
                       their shared output helpers.
- `cli.py`             `mentectl`: parses arguments and hands off to `commands/`.

One import points down: `mcp_server/` shows memories with `commands/output.py`
(which imports nothing of the client but `errors.py`), so that the model and
`mentectl` see the same text; `agents/` prints with it too. `agents/` and
`commands/` meet both ways in two places: an agent's doctor checks are
`doctor.Check`s (imported inside the functions), and Claude Code's and Codex's MCP
writers are `mcp.Writer`s on `mcp`'s helpers (`mcp` asks `client_of` only when run).
From the daemon's package the client imports the
shared modules (paths, protocol, memory, config, actions, matcher, agents,
peercred), never the server or the store, except `bench/`, which fills its
stores directly and times the matcher alone. Heavy modules load only for their
verb: `bench/` for `mentectl bench`, `mcp_server/` (and the optional MCP
SDK) for `mentectl mcp`.
"""
