"""`mentectl mcp install AGENT` read back by the real agent's own `mcp` command.

mentectl writes each agent's MCP config itself (Claude Code's through `claude
mcp add`); the agent's own listing (`mcp list`, or `mcp get mented` where the
list names servers only) is what says the entry is where and how the agent reads
it. The user's own server is in the file first, and is all that is left in it
after the uninstall.

Opt-in, as tests/test_real_agents.py: the `agents` marker (`MENTED_AGENT_TESTS=1`);
the agents come from npm into `~/.cache/mented-tests/agents/`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import isolated_env
from tests.real_agents import AGENTS, QWEN_CODE, NpmAgent, install

pytestmark = pytest.mark.agents

# The agent's listing command, and the file our user's own server goes in first
# (None: registered through the agent's CLI, which writes the file).
LISTINGS: dict[str, tuple[NpmAgent, list[str], str | None]] = {
    "claude-code": (AGENTS["claude-code"], ["mcp", "get", "mented"], None),
    "codex": (AGENTS["codex"], ["mcp", "list"], None),
    "copilot-cli": (AGENTS["copilot-cli"], ["mcp", "get", "mented"], ".copilot/mcp-config.json"),
    "gemini-cli": (AGENTS["gemini-cli"], ["mcp", "list"], ".gemini/settings.json"),
    "qwen-code": (QWEN_CODE, ["mcp", "list"], ".qwen/settings.json"),
}
USERS_SERVER = {"mcpServers": {"docs": {"command": "/bin/true", "args": ["docs-server"]}}}
TIMEOUT_S = 180  # Node programs, slow to start on a loaded machine


def run(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    result = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    return result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(LISTINGS))
def test_the_agent_lists_the_server_mentectl_registered(name: str, short_tmp: Path) -> None:
    npm_agent, listing, users_file = LISTINGS[name]
    binary = install(npm_agent)
    env = isolated_env(short_tmp)
    for variable in ("GEMINI_CLI_HOME", "COPILOT_HOME", "QWEN_HOME"):
        env.pop(variable, None)
    env["PATH"] = f"{binary.parent}{os.pathsep}{env['PATH']}"  # `claude` for `mcp install`
    home = Path(env["HOME"])
    if users_file is not None:
        (home / users_file).parent.mkdir(parents=True)
        (home / users_file).write_text(json.dumps(USERS_SERVER, indent=2) + "\n")
    mentectl = [sys.executable, "-m", "mented_client.cli"]

    installed = subprocess.run(
        [*mentectl, "mcp", "install", name], env=env, capture_output=True, text=True, check=False
    )
    assert installed.returncode == 0, installed.stderr
    listed = run([str(binary), *listing], env, short_tmp)
    assert "mented" in listed
    assert f"--agent {name}" in listed or f"'--agent', '{name}'" in listed, listed

    removed = subprocess.run(
        [*mentectl, "mcp", "uninstall", name], env=env, capture_output=True, text=True, check=False
    )
    assert removed.returncode == 0, removed.stderr
    listed = run([str(binary), *listing], env, short_tmp)
    assert f"--agent {name}" not in listed
    if users_file is not None:  # (Qwen Code adds a `$version` to the file as it reads it)
        assert (
            json.loads((home / users_file).read_text())["mcpServers"] == USERS_SERVER["mcpServers"]
        )
