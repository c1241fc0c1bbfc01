"""Claude Code: mented's hook entries in `settings.json` (`SettingsHooks`), and its MCP
server registered through Claude Code's own CLI.

Claude Code keeps user-scope MCP servers in `~/.claude.json` (`$CLAUDE_CONFIG_DIR`),
which running sessions rewrite all the time: so mentectl registers the server with
`claude mcp add --scope user` and removes it with `claude mcp remove`. Without `claude`
on PATH an install fails (exit 1), naming the exact command to run, and `doctor`
offers that command rather than `mcp install` again.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

from mented import paths
from mented.agents import Agent
from mented.agents.claude_code import AGENT
from mented_client.agents.settings_hooks import SettingsHooks
from mented_client.commands.mcp import (
    SERVER_NAME,
    Registration,
    Writer,
    check_command,
    entry_command,
)
from mented_client.commands.output import CommandError
from mented_client.hook_settings import MCP_SERVERS

CLAUDE_TIMEOUT_S = 120  # `claude` is a Node program: slow to start on a cold cache


def claude_registration(agent: Agent) -> Registration:
    path = agent.mcp_config_path()
    where = f"{path} (user scope)"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Registration(agent.name, registered=False, where=where)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return Registration(agent.name, registered=False, where=where, problem=f"unreadable: {exc}")
    servers = doc.get(MCP_SERVERS) if isinstance(doc, dict) else None
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    if not isinstance(entry, dict):
        return Registration(agent.name, registered=False, where=where)
    command = entry_command(entry)
    return Registration(
        agent.name, registered=True, where=where, command=command, problem=check_command(command)
    )


def _claude_cli(*args: str) -> subprocess.CompletedProcess[str]:
    claude = shutil.which("claude")
    assert claude is not None
    try:
        return subprocess.run(  # noqa: S603 - argv list, no shell
            [claude, *args],
            # In the home directory, not the one mentectl was started in: the
            # registration is the user's (`--scope user`), and Claude Code reads a
            # project's `.claude/` and `.mcp.json` from its working directory.
            cwd=paths.home(),
            capture_output=True,
            text=True,
            timeout=CLAUDE_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommandError(f"`claude {' '.join(args)}` failed: {exc}") from exc


def _install_claude(agent: Agent, command: list[str]) -> str:
    add = ["mcp", "add", "--scope", "user", SERVER_NAME, "--", *command]
    if shutil.which("claude") is None:
        # Not done, so not a success: a script or `setup` must be able to tell.
        raise CommandError(
            "Claude Code's `claude` command is not on PATH, so the MCP server was not "
            f"registered. Register it by running:\n  {shlex.join(['claude', *add])}"
        )
    current = claude_registration(agent)
    if current.registered and current.command == command:
        return f"the MCP server is already registered with Claude Code ({current.where})"
    if current.registered:
        # `claude mcp add` refuses a name that exists: replace our own old entry.
        _claude_cli("mcp", "remove", "--scope", "user", SERVER_NAME)
    result = _claude_cli(*add)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise CommandError(
            f"`claude {shlex.join(add)}` failed ({result.returncode}): {detail}; "
            "run it yourself to see what Claude Code says"
        )
    return (
        f"registered the MCP server with Claude Code (user scope): {shlex.join(command)}\n"
        "new Claude Code sessions have mented's tools (`/mcp` lists them)"
    )


def _uninstall_claude(agent: Agent) -> str:
    remove = ["mcp", "remove", "--scope", "user", SERVER_NAME]
    if not claude_registration(agent).registered:
        return "the MCP server is not registered with Claude Code: nothing to do"
    if shutil.which("claude") is None:
        return (
            "Claude Code's `claude` command is not on PATH. Remove the MCP server by running:\n"
            f"  {shlex.join(['claude', *remove])}"
        )
    result = _claude_cli(*remove)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise CommandError(f"`claude {shlex.join(remove)}` failed ({result.returncode}): {detail}")
    return "removed the MCP server from Claude Code"


def claude_fix(agent: Agent, command: list[str]) -> str | None:  # noqa: ARG001 - one agent
    """`claude mcp add`, to run where `claude` is, when it is not on PATH here."""
    if shutil.which("claude") is not None:
        return None
    add = ["claude", "mcp", "add", "--scope", "user", SERVER_NAME, "--", *command]
    return f"`claude` is not on PATH here; run `{shlex.join(add)}` where it is"


class ClaudeCodeHooks(SettingsHooks):
    """Claude Code's hook entries, and its MCP server registered through `claude`."""

    def mcp_writer(self) -> Writer:
        return CLAUDE_CLI


CLAUDE_CLI = Writer(claude_registration, _install_claude, _uninstall_claude, fix=claude_fix)
CLIENT = ClaudeCodeHooks(AGENT)
