"""mented's MCP server, driven like an agent drives it, and its registration with agents.

The process tests spawn `mentectl mcp` and talk to it over stdio with the MCP
SDK's own client, against a real daemon; the hook is fired through the real
shim. The registration tests edit files under a private HOME.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from mented.agents import AGENTS
from mented.agents.pretooluse import pretooluse_event, text_of_answer
from mented.paths import socket_path
from mented.protocol import MemoriesReply, RecallRequest
from mented_client.agents import codex as codex_client
from mented_client.commands import mcp as mcp_command
from mented_client.commands.output import CommandError
from mented_client.hook_settings import installed_shim
from tests.conftest import DaemonProcess, isolated_env

PYTHON = sys.executable
TOOLS = {
    "remember_rule",
    "remember",
    "rules_for_action",
    "list_rules",
    "supersede_rule",
    "rule_history",
    "forget_rule",
    "pin_rule",
    "recall",
}


# ----------------------------------------------------------------- helpers


def server(env: dict[str, str], cwd: Path, *args: str) -> Client:
    """An MCP client session with `mentectl mcp`, spawned the way an agent spawns it."""
    params = StdioServerParameters(
        command=PYTHON,
        args=["-m", "mented_client.cli", "mcp", *args],
        env=env,
        cwd=str(cwd),
    )
    # "legacy": the initialize handshake, as Claude Code and Codex open a session.
    return Client(params, mode="legacy", read_timeout_seconds=30)


def answer(result: CallToolResult) -> dict[str, Any]:
    """The structured answer of a successful tool call."""
    assert not result.is_error, text_of(result)
    data: dict[str, Any] | None = result.structured_content
    assert data is not None
    return data


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def fire_hook(env: dict[str, str], cwd: Path, n: int, command: str = "git commit -m x") -> str:
    """What the model is shown when Claude Code runs `command` in `cwd` (the real shim)."""
    # A new session each time: a repeated event would be de-duplicated.
    event = pretooluse_event(
        command, cwd=str(cwd), session=f"session-{n}", tool_use_id=f"toolu_{n}"
    )
    result = subprocess.run(
        [PYTHON, "-I", "-S", str(installed_shim()), "claude-code"],
        input=event,
        capture_output=True,
        # A generous budget: this test is about which rules fire, not how fast.
        env={"MENTED_SOCKET": env["MENTED_SOCKET"], "MENTED_HOOK_BUDGET_MS": "5000"},
        timeout=30,
        check=True,
    )
    if not result.stdout:
        return ""
    return text_of_answer(result.stdout) or ""


@pytest.fixture
def project(short_tmp: Path) -> Path:
    path = short_tmp / "repo"
    path.mkdir()
    return path


# ------------------------------------------------------- the server, end to end


async def test_tools_are_listed_with_descriptions_for_the_model(
    daemon: DaemonProcess, project: Path
) -> None:
    async with server(daemon.env, project) as client:
        assert client.server_info is not None
        assert client.server_info.name == "mented"
        assert "supersede_rule" in (client.instructions or "")
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert "Example" in (tool.description or ""), tool.name
    # The action vocabulary is in the description, so the model picks a real one.
    assert "git-commit" in (tools["remember_rule"].description or "")
    assert "pr-create" in (tools["remember_rule"].description or "")
    assert tools["supersede_rule"].input_schema["required"] == ["rule_id", "new_rule"]


async def test_supersede_through_the_agent_changes_the_very_next_hook_fire(
    daemon: DaemonProcess, project: Path
) -> None:
    async with server(daemon.env, project) as client:
        stored = answer(
            await client.call_tool(
                "remember_rule", {"action": "Git-Commit", "rule": "Merge PRs with squash"}
            )
        )
        assert stored["action"] == "git-commit"
        old = stored["handle"]
        assert len(old) == 8
        assert stored["id"].lower().endswith(old)

        shown = fire_hook(daemon.env, project, 1)
        assert f"[{old}] Merge PRs with squash" in shown  # the handle the agent can quote

        listed = answer(await client.call_tool("rules_for_action", {"action": "git-commit"}))
        assert [(r["handle"], r["content"]) for r in listed["rules"]] == [
            (old, "Merge PRs with squash")
        ]

        replaced = answer(
            await client.call_tool(
                "supersede_rule",
                {"rule_id": old, "new_rule": "Merge PRs with rebase, never squash"},
            )
        )
        assert replaced["old_handle"] == old
        assert replaced["old_content"] == "Merge PRs with squash"
        new = replaced["new_handle"]
        assert new != old

        # A new session: the new rule, naming the one it replaces by its first words,
        # which are no longer a rule of their own.
        shown = fire_hook(daemon.env, project, 2)
        replaces = f'(replaces [{old}] "Merge PRs with squash")'
        assert f"[{new}] {replaces} Merge PRs with rebase, never squash" in shown
        assert f"[{old}] Merge" not in shown

        history = answer(await client.call_tool("rule_history", {"rule_id": new}))
        assert [(v["handle"], v["content"], v["status"]) for v in history["versions"]] == [
            (old, "Merge PRs with squash", "superseded"),
            (new, "Merge PRs with rebase, never squash", "live"),
        ]
        assert history["current"] == new
        # The old handle leads to the same chain: "what was the old rule?"
        by_old = answer(await client.call_tool("rule_history", {"rule_id": old}))
        assert by_old["versions"] == history["versions"]

        # The old version only shows up when asked for.
        live = answer(await client.call_tool("list_rules", {}))
        assert [r["handle"] for r in live["rules"]] == [new]
        everything = answer(await client.call_tool("list_rules", {"include_superseded": True}))
        assert {r["handle"] for r in everything["rules"]} == {old, new}

        # Superseding the old version again is refused, naming the current one.
        again = await client.call_tool("supersede_rule", {"rule_id": old, "new_rule": "x"})
        assert again.is_error
        assert new in text_of(again)


async def test_unknown_action_is_refused_with_the_closest_known_ones(
    daemon: DaemonProcess, project: Path
) -> None:
    async with server(daemon.env, project) as client:
        result = await client.call_tool(
            "remember_rule", {"action": "git-comit", "rule": "one line messages"}
        )
        listing = await client.call_tool("list_rules", {"include_superseded": True})
    assert result.is_error
    message = text_of(result)
    assert "'git-comit' is not an action mented knows" in message
    assert "Did you mean: git-commit" in message
    assert "`remember` as a plain memory" in message  # the MCP server's own way out
    assert answer(listing)["rules"] == []  # nothing was stored


async def test_a_project_rule_is_not_superseded_and_its_file_is_named(
    daemon: DaemonProcess, project: Path
) -> None:
    (project / ".mented").mkdir()
    (project / ".mented" / "rules.jsonl").write_text(
        '{"action": "git-commit", "text": "team: conventional prefix"}\n'
    )
    daemon.mentectl("trust", str(project))
    shown = fire_hook(daemon.env, project, 1)
    handle = shown.split("] (the project's) team: conventional prefix")[0].rsplit("[", 1)[1]
    async with server(daemon.env, project) as client:
        superseded = await client.call_tool("supersede_rule", {"rule_id": handle, "new_rule": "x"})
        forgotten = await client.call_tool("forget_rule", {"rule_id": handle})
    for result in (superseded, forgotten):
        assert result.is_error
        assert (
            f"is a project rule from {project}/.mented/rules.jsonl: edit that file "
            "(shared with the team)"
        ) in text_of(result)
    assert "team: conventional prefix" in fire_hook(daemon.env, project, 2)


async def test_a_project_dir_that_is_not_a_directory_is_refused(
    daemon: DaemonProcess, project: Path
) -> None:
    async with server(daemon.env, project) as client:
        result = await client.call_tool(
            "remember_rule", {"action": "git-commit", "rule": "x", "project_dir": "missing"}
        )
        listing = await client.call_tool("list_rules", {"include_superseded": True})
    assert result.is_error
    assert f"project directory 'missing' ({project / 'missing'}) is not a directory" in text_of(
        result
    )
    assert answer(listing)["rules"] == []


async def test_plain_memories_and_forgetting(daemon: DaemonProcess, project: Path) -> None:
    async with server(daemon.env, project) as client:
        fact = answer(
            await client.call_tool(
                "remember",
                {"content": "Staging is rebuilt on Mondays", "tags": ["staging"]},
            )
        )
        assert fact["kind"] == "semantic"
        as_rule = await client.call_tool(
            "remember", {"content": "x", "tags": ["trigger:git-commit"]}
        )
        assert as_rule.is_error
        assert "remember_rule" in text_of(as_rule)

        rule = answer(
            await client.call_tool("remember_rule", {"action": "pr-create", "rule": "Draft PRs"})
        )
        # A fact is no rule: it is not listed with them and never fires.
        listed = answer(await client.call_tool("list_rules", {}))
        assert [r["handle"] for r in listed["rules"]] == [rule["handle"]]

        forgotten = answer(await client.call_tool("forget_rule", {"rule_id": rule["handle"]}))
        assert forgotten["content"] == "Draft PRs"
        assert answer(await client.call_tool("list_rules", {}))["rules"] == []
        missing = await client.call_tool("rule_history", {"rule_id": rule["handle"]})
        assert missing.is_error


async def test_facts_recalled_by_topic_and_rules_pinned(
    daemon: DaemonProcess, project: Path
) -> None:
    daemon.write_config("[pinned]\nmax_rules = 1\n")
    daemon.reload()
    async with server(daemon.env, project) as client:
        answer(
            await client.call_tool(
                "remember",
                {"content": "The staging database is stg-db-2", "tags": ["staging"]},
            )
        )
        answer(
            await client.call_tool(
                "remember",
                {"content": "Deploys of this app need a ticket", "this_project_only": True},
            )
        )
        answer(await client.call_tool("remember", {"content": "Lunch is at noon"}))
        found = answer(await client.call_tool("recall", {"query": "staging databases"}))
        assert [f["fact"]["content"] for f in found["facts"]] == [
            "The staging database is stg-db-2"
        ]
        assert found["facts"][0]["score"] > 0
        here = answer(await client.call_tool("recall", {"query": "deploys ticket"}))
        assert [f["fact"]["content"] for f in here["facts"]] == [
            "Deploys of this app need a ticket"
        ]
        elsewhere = answer(
            await client.call_tool(
                "recall", {"query": "deploys ticket", "project_dir": str(project.parent)}
            )
        )
        assert elsewhere["facts"] == []
        assert "No remembered fact" in elsewhere["note"]

        pinned = answer(await client.call_tool("pin_rule", {"rule": "Answer in British English"}))
        assert "start of every session" in pinned["note"]
        listed = answer(await client.call_tool("list_rules", {}))
        assert [r["handle"] for r in listed["rules"]] == [pinned["handle"]]
        over = await client.call_tool("pin_rule", {"rule": "Tabs, not spaces"})
        assert over.is_error
        assert "the cap is 1 rule and" in text_of(over)
        as_tag = await client.call_tool("remember", {"content": "x", "tags": ["Pinned"]})
        assert as_tag.is_error
        assert "pin_rule" in text_of(as_tag)


async def test_scopes_this_project_and_this_agent(
    daemon: DaemonProcess, project: Path, short_tmp: Path
) -> None:
    elsewhere = short_tmp / "other"
    elsewhere.mkdir()
    async with server(daemon.env, project, "--agent", "codex") as client:
        here = answer(
            await client.call_tool(
                "remember_rule",
                {"action": "git-push", "rule": "Never push to main", "this_project_only": True},
            )
        )
        mine = answer(
            await client.call_tool(
                "remember_rule",
                {
                    "action": "git-push",
                    "rule": "Push with --force-with-lease",
                    "this_agent_only": True,
                },
            )
        )
        assert here["scope"] == f"project={project}"
        assert mine["scope"] == "agent=codex"

        seen_here = answer(await client.call_tool("rules_for_action", {"action": "git-push"}))
        seen_elsewhere = answer(
            await client.call_tool(
                "rules_for_action", {"action": "git-push", "project_dir": str(elsewhere)}
            )
        )
    assert [r["content"] for r in seen_here["rules"]] == [
        "Push with --force-with-lease",
        "Never push to main",
    ]
    assert [r["content"] for r in seen_elsewhere["rules"]] == ["Push with --force-with-lease"]
    with daemon.client() as client:
        claude = client.expect(
            RecallRequest(action="git-push", agent="claude-code", cwd=str(project)), MemoriesReply
        )
    assert [m.content for m in claude.memories] == ["Never push to main"]


async def test_daemon_down_is_a_tool_error_and_the_server_keeps_running(
    daemon: DaemonProcess, project: Path
) -> None:
    async with server(daemon.env, project) as client:
        daemon.stop()
        down = await client.call_tool("rules_for_action", {"action": "git-commit"})
        assert down.is_error
        assert "mented is not running" in text_of(down)
        assert "mentectl start" in text_of(down)
        daemon.start()
        stored = await client.call_tool("remember_rule", {"action": "git-commit", "rule": "Sign"})
        assert answer(stored)["action"] == "git-commit"


async def test_server_starts_while_the_daemon_is_down(short_tmp: Path, project: Path) -> None:
    env = isolated_env(short_tmp)
    async with server(env, project) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("list_rules", {})
    assert "git-commit" in (tools["remember_rule"].description or "")  # the built-in table
    assert result.is_error
    assert "mentectl start" in text_of(result)


async def test_the_fallback_socket_is_used_only_when_the_environment_names_none(
    daemon: DaemonProcess, project: Path
) -> None:
    # An agent that passes no MENTED_SOCKET (Codex): the socket written in at install.
    bare = {k: v for k, v in daemon.env.items() if k != "MENTED_SOCKET"}
    fallback = ("--fallback-socket", str(daemon.socket))
    async with server(bare, project, *fallback) as client:
        assert not (await client.call_tool("list_rules", {})).is_error
    # $MENTED_SOCKET in the agent's environment wins, as for the hook.
    async with server(daemon.env, project, "--fallback-socket", "/nonexistent/m.sock") as client:
        assert not (await client.call_tool("list_rules", {})).is_error


# ------------------------------------------------------- Codex's config.toml

COMMAND = ["/opt/py/bin/python", "-m", "mented_client.cli", "--socket", "/run/m.sock", "mcp"]
CODEX_CONFIG = """\
# Codex settings, hand-written
model = "o3"  # keep this comment

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-server"]

[mcp_servers.docs.env]
TOKEN = "abc"

[profiles.fast]
model = "gpt-5"
"""


def test_codex_table_is_appended_and_the_rest_kept_byte_for_byte() -> None:
    text = codex_client.with_codex_server(CODEX_CONFIG, COMMAND)
    assert text.startswith(CODEX_CONFIG)
    doc = tomllib.loads(text)
    assert doc["mcp_servers"]["mented"] == {"command": COMMAND[0], "args": COMMAND[1:]}
    assert doc["mcp_servers"]["docs"]["env"] == {"TOKEN": "abc"}
    assert doc["profiles"] == {"fast": {"model": "gpt-5"}}


def test_codex_edit_is_idempotent_and_undone_exactly() -> None:
    once = codex_client.with_codex_server(CODEX_CONFIG, COMMAND)
    assert codex_client.with_codex_server(once, COMMAND) == once
    assert codex_client.without_codex_server(once) == CODEX_CONFIG
    assert codex_client.without_codex_server(CODEX_CONFIG) == CODEX_CONFIG


def test_codex_table_is_replaced_in_place() -> None:
    before = CODEX_CONFIG.replace(
        "[profiles.fast]",
        '[mcp_servers.mented]\ncommand = "/old/python"\nargs = [\n  "-m",\n  "old",\n]\n\n'
        "# the fast profile\n[profiles.fast]",
    )
    after = codex_client.with_codex_server(before, COMMAND)
    head, _, rest = before.partition("[mcp_servers.mented]")
    _, _, tail = rest.partition("\n\n# the fast profile")
    assert after.startswith(head)
    assert after.endswith("\n\n# the fast profile" + tail)
    assert "/old/python" not in after
    assert tomllib.loads(after)["mcp_servers"]["mented"]["command"] == COMMAND[0]


@pytest.mark.parametrize(
    "text",
    [
        'mcp_servers = { docs = { command = "npx" } }\n',  # an inline table cannot grow
        '[mcp_servers]\nmented.command = "/old/python"\n',  # our entry as dotted keys
        "[mcp_servers\n",  # not TOML
    ],
)
def test_codex_config_that_cannot_be_edited_safely_is_refused(text: str) -> None:
    with pytest.raises(CommandError, match=r"by hand|run this again"):
        codex_client.with_codex_server(text, COMMAND)


def test_codex_install_writes_once_and_status_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text(CODEX_CONFIG)
    config.chmod(0o640)
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    monkeypatch.setenv("MENTED_SOCKET", "/run/user/1000/mented/mented.sock")

    assert not mcp_command.mcp_registration("codex").registered
    message = mcp_command.install_mcp("codex")
    assert "registered" in message
    text = config.read_text()
    assert text.startswith(CODEX_CONFIG)
    assert stat.S_IMODE(config.stat().st_mode) == 0o640
    registration = mcp_command.mcp_registration("codex")
    assert registration.ok
    # Codex passes no MENTED_SOCKET/XDG_RUNTIME_DIR to its servers: the socket is written in.
    assert registration.command == [
        sys.executable,
        "-m",
        "mented_client.cli",
        "mcp",
        "--agent",
        "codex",
        "--fallback-socket",
        "/run/user/1000/mented/mented.sock",
    ]
    assert "already registered" in mcp_command.install_mcp("codex")
    assert config.read_text() == text

    mcp_command.uninstall_mcp("codex")
    assert config.read_text() == CODEX_CONFIG


def test_codex_install_refusal_leaves_the_file_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))
    config = tmp_path / "config.toml"
    config.write_text('mcp_servers = { docs = { command = "npx" } }\n')
    with pytest.raises(CommandError):
        mcp_command.install_mcp("codex")
    assert config.read_text() == 'mcp_servers = { docs = { command = "npx" } }\n'


def test_codex_install_through_a_symlinked_config_keeps_the_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dotfiles = tmp_path / "dotfiles" / "codex.toml"
    dotfiles.parent.mkdir()
    dotfiles.write_text(CODEX_CONFIG)
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    link = codex_home / "config.toml"
    link.symlink_to(dotfiles)
    monkeypatch.setenv("CODEX_HOME", str(codex_home))

    mcp_command.install_mcp("codex")
    assert link.is_symlink()
    assert link.resolve() == dotfiles.resolve()
    assert "[mcp_servers.mented]" in dotfiles.read_text()
    assert mcp_command.mcp_registration("codex").registered

    mcp_command.uninstall_mcp("codex")
    assert link.is_symlink()
    assert dotfiles.read_text() == CODEX_CONFIG


# ------------------------------------------- the agents with a JSON MCP config

# Each agent's user MCP file, under HOME, when its variable (if any) moves its directory.
JSON_AGENTS = {
    "gemini-cli": ("GEMINI_CLI_HOME", "gemini-home/.gemini/settings.json"),
    "copilot-cli": ("COPILOT_HOME", "copilot-home/mcp-config.json"),
    "qwen-code": ("QWEN_HOME", "qwen-home/settings.json"),
    "cursor": (None, ".cursor/mcp.json"),
}
USER_MCP = """{
    "theme": "dark",
    "mcpServers": {
        "docs": {"command": "npx", "args": ["-y", "docs-server"], "env": {"TOKEN": "abc"}}
    }
}
"""
SOCKET = "/run/user/1000/mented/mented.sock"


@pytest.fixture
def agent_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory with Codex's config holding Codex's own mented entry."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MENTED_SOCKET", SOCKET)
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    for variable in ("CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "COPILOT_HOME", "QWEN_HOME"):
        monkeypatch.delenv(variable, raising=False)
    mcp_command.install_mcp("codex")
    return home


def json_agent_file(agent: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    variable, relative = JSON_AGENTS[agent]
    path = home / relative
    if variable is not None:
        monkeypatch.setenv(variable, str(home / relative.split("/")[0]))
    if variable == "GEMINI_CLI_HOME":  # a home of its own, which Gemini CLI adds .gemini to
        (home / relative.split("/")[0]).mkdir(exist_ok=True)
    return path


def our_command(agent: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mented_client.cli",
        "mcp",
        "--agent",
        agent,
        "--fallback-socket",
        SOCKET,
    ]


@pytest.mark.parametrize("agent", sorted(JSON_AGENTS))
def test_json_agent_install_reinstall_uninstall_keep_the_users_servers(
    agent: str, agent_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex_config = agent_home / ".codex" / "config.toml"
    codex_before = codex_config.read_bytes()
    path = json_agent_file(agent, agent_home, monkeypatch)
    path.parent.mkdir(parents=True)
    path.write_text(USER_MCP)
    assert not mcp_command.mcp_registration(agent).registered

    message = mcp_command.install_mcp(agent)
    assert f"registered the MCP server with {AGENTS[agent].title} in {path}" in message
    installed = path.read_text()
    doc = json.loads(installed)
    command = our_command(agent)
    entry = {"command": command[0], "args": command[1:]}
    if agent == "copilot-cli":  # as `copilot mcp add` writes it
        entry |= {"type": "local", "tools": ["*"]}
    assert doc["mcpServers"] == json.loads(USER_MCP)["mcpServers"] | {"mented": entry}
    assert doc["theme"] == "dark"
    registration = mcp_command.mcp_registration(agent)
    assert registration.ok
    assert registration.where == str(path)
    assert registration.command == command
    assert (path.parent / (path.name + ".mented-bak")).read_text() == USER_MCP

    stat_before = path.stat()
    assert "already registered" in mcp_command.install_mcp(agent)
    assert path.read_text() == installed
    assert path.stat().st_mtime_ns == stat_before.st_mtime_ns

    message = mcp_command.uninstall_mcp(agent)
    assert "nothing else changed" in message
    assert path.read_text() == USER_MCP  # byte for byte
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # the backup went too
    assert "nothing to do" in mcp_command.uninstall_mcp(agent)
    # Codex's file, with Codex's own entry, was never touched.
    assert codex_config.read_bytes() == codex_before
    assert mcp_command.mcp_registration("codex").command == our_command("codex")


@pytest.mark.parametrize("agent", sorted(JSON_AGENTS))
def test_json_agent_uninstall_leaves_nothing_the_install_created(
    agent: str, agent_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = json_agent_file(agent, agent_home, monkeypatch)
    before = sorted(p.relative_to(agent_home) for p in agent_home.rglob("*"))
    mcp_command.install_mcp(agent)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it may come to hold tokens
    message = mcp_command.uninstall_mcp(agent)
    assert "it held only mented's MCP server" in message
    assert "was left empty: removed too" in message
    assert sorted(p.relative_to(agent_home) for p in agent_home.rglob("*")) == before


def test_json_agent_uninstall_keeps_a_backup_with_the_users_later_changes(
    agent_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = json_agent_file("gemini-cli", agent_home, monkeypatch)
    path.parent.mkdir(parents=True)
    path.write_text(USER_MCP)
    mcp_command.install_mcp("gemini-cli")
    path.write_text(path.read_text().replace('"dark"', '"light"'))  # the user, since
    message = mcp_command.uninstall_mcp("gemini-cli")
    backup = path.parent / "settings.json.mented-bak"
    assert backup.read_text() == USER_MCP
    assert "settings.json.mented-bak" in message
    assert "kept" in message
    assert json.loads(path.read_text())["theme"] == "light"


@pytest.mark.parametrize(
    "text",
    ['{"mcpServers": []}', '{"mcpServers": {"mented": "x"}}', "[1]", "{not json"],
)
def test_json_agent_file_that_cannot_be_edited_is_refused_and_left_alone(
    text: str, agent_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = json_agent_file("copilot-cli", agent_home, monkeypatch)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    for verb in (mcp_command.install_mcp, mcp_command.uninstall_mcp):
        try:
            verb("copilot-cli")
        except CommandError as exc:
            assert str(path) in str(exc)
        else:
            assert verb is mcp_command.uninstall_mcp  # nothing of ours there: nothing to do
    assert path.read_text() == text
    assert not mcp_command.mcp_registration("copilot-cli").ok


def test_setup_and_doctor_name_each_agents_own_file(
    agent_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mented_client.commands import doctor

    gemini = json_agent_file("gemini-cli", agent_home, monkeypatch)
    codex_before = (agent_home / ".codex" / "config.toml").read_bytes()
    doctor.setup_mcp(argparse.Namespace(agent="gemini-cli", socket=None))
    assert f"registered the MCP server with Gemini CLI in {gemini}" in capsys.readouterr().out
    assert (agent_home / ".codex" / "config.toml").read_bytes() == codex_before
    rows = {check.link: check for check in doctor.check_mcp()}
    assert rows["mcp gemini-cli"].state == "ok"
    assert str(gemini) in rows["mcp gemini-cli"].detail
    assert rows["mcp codex"].state == "ok"
    assert str(agent_home / ".codex" / "config.toml") in rows["mcp codex"].detail
    for agent in ("copilot-cli", "cursor", "qwen-code"):
        assert rows[f"mcp {agent}"].state == "skip"
        assert str(AGENTS[agent].mcp_config_path()) in rows[f"mcp {agent}"].detail


def test_codex_uninstall_leaves_no_empty_config_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex_home = tmp_path / "codexhome"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    mcp_command.install_mcp("codex")
    assert (codex_home / "config.toml").is_file()
    message = mcp_command.uninstall_mcp("codex")
    assert "it held only [mcp_servers.mented]" in message
    assert not codex_home.exists()
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ Claude Code


def test_claude_install_without_the_cli_prints_the_exact_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `claude` here
    monkeypatch.delenv("MENTED_SOCKET", raising=False)
    with pytest.raises(CommandError) as not_done:  # nothing was registered: not a success
        mcp_command.install_mcp("claude-code")
    expected = (
        f"claude mcp add --scope user mented -- {sys.executable} -m mented_client.cli mcp "
        f"--agent claude-code --fallback-socket {socket_path()}"
    )
    assert expected in str(not_done.value)
    assert expected in mcp_command.install_fix("claude-code")  # what doctor offers


def test_mentectl_mcp_install_without_claude_on_path_fails(short_tmp: Path) -> None:
    env = isolated_env(short_tmp) | {"PATH": str(short_tmp)}
    result = subprocess.run(
        [PYTHON, "-m", "mented_client.cli", "mcp", "install", "claude-code"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "not on PATH" in result.stderr
    assert "claude mcp add --scope user mented" in result.stderr


def test_claude_install_runs_claude_mcp_add(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    fake = bin_dir / "claude"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("MENTED_SOCKET", "/run/m.sock")
    mcp_command.install_mcp("claude-code")
    # The same socket as every other agent's entry (and the hook's), for the same reason.
    assert calls.read_text().splitlines() == [
        f"mcp add --scope user mented -- {sys.executable} -m mented_client.cli mcp "
        "--agent claude-code --fallback-socket /run/m.sock"
    ]

    # What `claude mcp add` writes; status reads it back.
    (tmp_path / ".claude.json").write_text(
        json.dumps(
            {
                "numStartups": 3,
                "mcpServers": {
                    "mented": {
                        "type": "stdio",
                        "command": sys.executable,
                        "args": [
                            "-m",
                            "mented_client.cli",
                            "mcp",
                            "--agent",
                            "claude-code",
                            "--fallback-socket",
                            "/run/m.sock",
                        ],
                        "env": {},
                    }
                },
            }
        )
    )
    assert mcp_command.mcp_registration("claude-code").ok
    assert "already registered" in mcp_command.install_mcp("claude-code")
    assert len(calls.read_text().splitlines()) == 1  # nothing run the second time


def test_claude_cli_runs_in_the_home_directory_not_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`claude` reads a project's `.claude/` and `.mcp.json` from its working directory:
    a `mentectl setup` typed in a cloned repository does not run it there."""
    bin_dir, home, project = tmp_path / "bin", tmp_path / "home", tmp_path / "cloned"
    for directory in (bin_dir, home, project):
        directory.mkdir()
    where = tmp_path / "cwd.txt"
    fake = bin_dir / "claude"
    fake.write_text(f"#!/bin/sh\npwd >> {where}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path))
    monkeypatch.chdir(project)
    mcp_command.install_mcp("claude-code")
    assert where.read_text().splitlines() == [str(home)]


def test_mentectl_mcp_status_says_how_to_register(short_tmp: Path) -> None:
    env = isolated_env(short_tmp) | {"PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [PYTHON, "-m", "mented_client.cli", "mcp", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "claude-code: MCP server not registered" in result.stdout
    assert "run `mentectl mcp install codex`" in result.stdout


def test_mentectl_mcp_without_the_sdk_says_how_to_install_it(short_tmp: Path) -> None:
    shadow = short_tmp / "shadow" / "mcp"  # an `mcp` package that is not the 2.x SDK
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    env = isolated_env(short_tmp) | {"PYTHONPATH": str(shadow.parent)}
    result = subprocess.run(
        [PYTHON, "-m", "mented_client.cli", "mcp"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "pip install 'mented[mcp]'" in result.stderr
    assert result.stdout == ""  # nothing on the protocol channel


# ------------------------------------------------------------- setup and doctor


def test_setup_step_registers_and_doctor_reports_it(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mented_client.commands import doctor

    env = isolated_env(short_tmp) | {"PATH": "/usr/bin:/bin", "MENTED_SERVICE_MANAGER": "none"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR"):  # as isolated_env leaves them out
        monkeypatch.delenv(name, raising=False)
    doctor.setup_mcp(argparse.Namespace(agent="codex", socket=None))
    assert "registered the MCP server with Codex" in capsys.readouterr().out

    result = subprocess.run(
        [PYTHON, "-m", "mented_client.cli", "doctor"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = result.stdout.splitlines()
    codex = next(line for line in lines if " mcp codex " in line)
    assert codex.startswith("ok")
    claude = lines.index(next(line for line in lines if " mcp claude-code " in line))
    assert lines[claude].startswith("--")  # optional: not registered is no failure
    # No `claude` on this PATH: doctor offers the command to run where it is, not a
    # `mentectl mcp install` that would fail again.
    assert "`claude` is not on PATH here; run `claude mcp add" in lines[claude + 1]


async def test_remember_and_supersede_rule_take_checks_and_the_hook_tests_them(
    daemon: DaemonProcess, project: Path
) -> None:
    async with server(daemon.env, project) as client:
        stored = answer(
            await client.call_tool(
                "remember_rule",
                {
                    "action": "git-commit",
                    "rule": "Commit subjects are short",
                    "checks": ["subject max 10"],
                },
            )
        )
        listed = answer(await client.call_tool("rules_for_action", {"action": "git-commit"}))
        assert listed["rules"][0]["checks"] == ["subject max 10"]
        assert "at most 10" in fire_hook(daemon.env, project, 30, 'git commit -m "fix: too long"')
        replaced = answer(
            await client.call_tool(
                "supersede_rule",
                {"rule_id": stored["handle"], "new_rule": "Short", "checks": ["subject max 40"]},
            )
        )
        shown = fire_hook(daemon.env, project, 31, 'git commit -m "fix: too long"')
        assert "it breaks" not in shown
        assert f"[{replaced['new_handle']}] (replaces [{stored['handle']}] " in shown
        assert '"Commit subjects are short") Short' in shown
        refused = await client.call_tool(
            "remember_rule",
            {"action": "git-commit", "rule": "x", "checks": ["title max 3"]},
        )
        assert refused.is_error
        assert "its fields: message, subject" in text_of(refused)
