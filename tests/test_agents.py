"""Agent adapters: decoding real PreToolUse events and rendering what each agent reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mented.actions import load_action_table
from mented.agent_names import AGENT_NAMES
from mented.agents import AGENTS, ToolCall
from mented.config import Config
from mented.registration import hook_needs
from mented_client.commands.hooks import DEFAULT_TIMEOUT_S

# Shaped like the events Claude Code and Codex send (Codex: pre-tool-use.command.input schema).
CLAUDE_EVENT = {
    "session_id": "abc123",
    "transcript_path": "/home/u/.claude/projects/repo/abc123.jsonl",
    "cwd": "/home/u/repo",
    "permission_mode": "default",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {
        "command": "git commit -m \"$(cat <<'EOF'\nfix: x\nEOF\n)\"",
        "description": "Commit the fix",
        "timeout": 120000,
    },
    "tool_use_id": "toolu_01ABC",
}
CODEX_EVENT = {
    "session_id": "0199-session",
    "turn_id": "turn-1",
    "transcript_path": None,
    "cwd": "/home/u/repo",
    "hook_event_name": "PreToolUse",
    "model": "gpt-5",
    "permission_mode": "default",
    "tool_name": "Bash",
    "tool_input": {"command": "gh pr create --fill"},
    "tool_use_id": "call_1",
}


def test_the_agent_names_are_the_registrys() -> None:
    # `mentectl rule --agent` checks names against AGENT_NAMES, without the adapters:
    # an agent added to AGENTS alone would be refused there.
    assert sorted(AGENT_NAMES) == sorted(AGENTS)
    assert len(set(AGENT_NAMES)) == len(AGENT_NAMES)


def test_claude_code_event_decodes_to_the_shell_call() -> None:
    call = AGENTS["claude-code"].decode(json.dumps(CLAUDE_EVENT).encode())
    assert call == ToolCall(
        command=CLAUDE_EVENT["tool_input"]["command"],  # type: ignore[index]
        tool="Bash",
        cwd="/home/u/repo",
        session="abc123",
        tool_use_id="toolu_01ABC",
    )


def test_codex_event_decodes_to_the_shell_call() -> None:
    call = AGENTS["codex"].decode(json.dumps(CODEX_EVENT).encode())
    assert call is not None
    assert call.command == "gh pr create --fill"
    assert (call.cwd, call.session) == ("/home/u/repo", "0199-session")


def test_the_event_after_a_command_ran_decodes_as_a_call_that_ran() -> None:
    event = {**CLAUDE_EVENT, "hook_event_name": "PostToolUse", "tool_response": {"stdout": ""}}
    call = AGENTS["claude-code"].decode(json.dumps(event).encode())
    assert call is not None
    assert call.ran
    assert call.command == CLAUDE_EVENT["tool_input"]["command"]  # type: ignore[index]


@pytest.mark.parametrize(
    "change",
    [
        {"tool_name": "Read", "tool_input": {"file_path": "/repo/git_commit.py"}},
        {"tool_name": "Edit", "tool_input": {}},
        {"tool_name": "Edit", "tool_input": {"file_path": 5}},
        {"tool_name": "mcp__github", "tool_input": {}},
        {"tool_name": "mcp____create_issue", "tool_input": {}},
        {"hook_event_name": "PostToolUseFailure"},
        {"tool_input": {"command": "   "}},
        {"tool_input": {}},
        {"tool_input": None},
    ],
)
def test_events_that_are_no_tool_call_we_act_on(change: dict[str, object]) -> None:
    event = {**CLAUDE_EVENT, **change}
    assert AGENTS["claude-code"].decode(json.dumps(event).encode()) is None


@pytest.mark.parametrize(
    "raw", [b"", b"null", b"[]", b'"text"', b"{", b'{"cwd": 5}', b"[" * 5000 + b"]" * 5000]
)
def test_undecodable_events(raw: bytes) -> None:
    assert AGENTS["claude-code"].decode(raw) is None


def test_missing_optional_fields_are_fine() -> None:
    call = AGENTS["codex"].decode(b'{"tool_name": "Bash", "tool_input": {"command": "ls"}}')
    assert call == ToolCall(command="ls", tool="Bash")


@pytest.mark.parametrize(
    ("tool", "tool_input", "edited"),
    [
        (
            "Edit",
            {"file_path": "/repo/db/migrations/1.sql", "old_string": "a"},
            "/repo/db/migrations/1.sql",
        ),
        ("Write", {"file_path": "CHANGELOG.md", "content": "x"}, "CHANGELOG.md"),
        ("MultiEdit", {"file_path": "/r/a.py", "edits": []}, "/r/a.py"),
        ("NotebookEdit", {"notebook_path": "/r/n.ipynb"}, "/r/n.ipynb"),
    ],
)
def test_claude_code_file_edits_decode_to_the_files_they_write(
    tool: str, tool_input: dict[str, object], edited: str
) -> None:
    event = {**CLAUDE_EVENT, "tool_name": tool, "tool_input": tool_input}
    call = AGENTS["claude-code"].decode(json.dumps(event).encode())
    assert call == ToolCall(
        edited=(edited,), tool=tool, cwd="/home/u/repo", session="abc123", tool_use_id="toolu_01ABC"
    )
    assert call.kind_in_words() == "file edit"


def test_an_mcp_tool_decodes_to_server_and_tool_whatever_its_input() -> None:
    event = {
        **CLAUDE_EVENT,
        "tool_name": "mcp__github__create_pull_request",
        "tool_input": {"owner": "o", "repo": "r", "title": "t", "command": 42},
    }
    call = AGENTS["claude-code"].decode(json.dumps(event).encode())
    assert call is not None
    assert call.mcp_tool == "github/create_pull_request"
    assert call.describe() == "MCP tool github/create_pull_request"
    assert call.kind_in_words() == "tool call"


# The agents that answer in the shared `hookSpecificOutput` (the others: tests/test_more_agents.py).
SHARED_ANSWER = ["claude-code", "codex", "copilot-cli"]


@pytest.mark.parametrize("name", SHARED_ANSWER)
def test_context_output_is_exactly_the_documented_shape(name: str) -> None:
    out = AGENTS[name].render_context('rules: "quoted"\nand ünïcode')
    assert json.loads(out) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "additionalContext": 'rules: "quoted"\nand ünïcode',
        }
    }


@pytest.mark.parametrize("name", SHARED_ANSWER)
def test_deny_output_is_exactly_the_documented_shape(name: str) -> None:
    out = AGENTS[name].render_deny("follow the rules, then run it again")
    assert json.loads(out) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "follow the rules, then run it again",
        }
    }


def test_settings_locations(monkeypatch: pytest.MonkeyPatch) -> None:
    home, project = Path("/home/u"), Path("/work/repo")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    claude, codex = AGENTS["claude-code"], AGENTS["codex"]
    assert claude.settings_path() == home / ".claude" / "settings.json"
    assert claude.project_settings_path(project) == project / ".claude" / "settings.json"
    assert codex.settings_path() == home / ".codex" / "hooks.json"
    assert codex.install_note is not None
    assert "/hooks" in codex.install_note


def test_the_agents_own_variables_move_their_config_directories(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOME", "/home/u")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/cfg/claude")
    monkeypatch.setenv("CODEX_HOME", "/cfg/codex")
    assert AGENTS["claude-code"].settings_path() == Path("/cfg/claude/settings.json")
    assert AGENTS["codex"].settings_path() == Path("/cfg/codex/hooks.json")


@pytest.mark.parametrize("name", ["claude-code", "codex"])
def test_hook_groups_run_one_command_for_bash_and_for_every_session_start(name: str) -> None:
    groups = AGENTS[name].hook_groups("/py -I -S /shim.py x", 5)
    assert list(groups) == ["PreToolUse", "SessionStart", "PostToolUse"]
    (pretooluse,), (session_start,) = groups["PreToolUse"], groups["SessionStart"]
    assert pretooluse["matcher"] == "Bash"
    # After a shell command ran: what it did is checked (mented.afterchecks).
    assert groups["PostToolUse"] == [
        {
            "matcher": "Bash",
            "hooks": [AGENTS[name].hook_entry("/py -I -S /shim.py x", 5, "PostToolUse")],
        }
    ]
    # SessionStart on every source: pinned rules go to new and resumed sessions too,
    # and again after a compaction or a /clear.
    assert session_start["matcher"] == "clear|compact|resume|startup"
    for group in (pretooluse, session_start):
        (hook,) = group["hooks"]
        assert {key: hook[key] for key in ("type", "command", "timeout")} == {
            "type": "command",
            "command": "/py -I -S /shim.py x",
            "timeout": 5,
        }
        assert hook["statusMessage"].startswith("mented: ")


# The hand-install files in hooks/ must stay in step with what `hooks install` writes.
HOOKS_DIR = Path(__file__).parent.parent / "hooks"
PLACEHOLDER = "/ABSOLUTE/PATH/TO/python3 -I -S /ABSOLUTE/PATH/TO/mented_client/shim.py"
SOCKET_PLACEHOLDER = "/ABSOLUTE/PATH/TO/mented.sock"


@pytest.mark.parametrize(("name", "folder"), [("claude-code", "claude-code"), ("codex", "codex")])
def test_the_hand_install_files_match_the_installer(name: str, folder: str) -> None:
    doc = json.loads((HOOKS_DIR / folder / "hooks.json").read_text())
    command = doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert command == f"{PLACEHOLDER} {name} {SOCKET_PLACEHOLDER}"
    # Registered for what the built-in action table needs, as `hooks install` does with no config.
    needs = hook_needs(load_action_table(Config()))
    assert doc["hooks"] == AGENTS[name].hook_groups(command, DEFAULT_TIMEOUT_S, needs)
