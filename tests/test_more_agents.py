"""Gemini CLI, Copilot CLI and Cursor: their events decoded, their answers, their delivery.

The events are the agents' own: Copilot CLI's as 1.0.102 sent them to a hook
(captured with the real binary against a mock model), Gemini CLI's as 0.61's
`hookEventHandler` builds them (`createBaseInput` plus `tool_name`,
`tool_input`, `mcp_context`), Cursor's as its hooks reference gives them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mented.agents import AGENTS, ContextEmptied, SessionStarted, ToolCall
from mented.config import Config, DeliverySettings, HookSettings
from mented.hooks import HookHandler
from mented.memory import MemoryType
from mented.sessions import SessionMemory
from mented.store import Store
from tests.test_hooks import make_matcher

GEMINI = AGENTS["gemini-cli"]
COPILOT = AGENTS["copilot-cli"]
CURSOR = AGENTS["cursor"]
RULE = "commit messages: single line, conventional prefix, no emojis"

COPILOT_EVENT = {  # captured from Copilot CLI 1.0.102 (PascalCase PreToolUse entry)
    "hook_event_name": "PreToolUse",
    "session_id": "58434beb-954b-4123-b459-d7b4f374982c",
    "timestamp": "2026-12-01T04:47:30.839Z",
    "cwd": "/tmp/agx/repo1",
    "tool_name": "Bash",
    "tool_input": {"command": 'git commit --allow-empty -m "fix: x"', "description": "run"},
}
GEMINI_EVENT = {
    "session_id": "gem-session",
    "transcript_path": "/home/u/.gemini/tmp/x/chats/session.json",
    "cwd": "/home/u/repo",
    "hook_event_name": "BeforeTool",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "tool_name": "run_shell_command",
    "tool_input": {"command": "git commit -m 'fix: x'", "description": "Commit"},
}
CURSOR_EVENT = {
    "hook_event_name": "beforeShellExecution",
    "conversation_id": "conv-123",
    "generation_id": "gen-456",
    "workspace_roots": ["/home/u/repo"],
    "command": "git commit -m 'fix: x'",
    "cwd": "/home/u/repo",
}


def encode(event: dict[str, Any], **changes: Any) -> bytes:
    return json.dumps({**event, **changes}).encode()


# ------------------------------------------------------------------ decoding


def test_copilot_events_are_the_shared_shape() -> None:
    call = COPILOT.decode(encode(COPILOT_EVENT))
    assert isinstance(call, ToolCall)
    assert call.command == 'git commit --allow-empty -m "fix: x"'
    assert (call.cwd, call.session, call.ran) == (
        "/tmp/agx/repo1",
        COPILOT_EVENT["session_id"],
        False,
    )
    compact = {"hook_event_name": "PreCompact", "session_id": "s1", "trigger": "auto"}
    assert COPILOT.decode(encode(compact)) == ContextEmptied("s1")


def test_gemini_before_and_after_tool() -> None:
    before = GEMINI.decode(encode(GEMINI_EVENT))
    after = GEMINI.decode(encode(GEMINI_EVENT, hook_event_name="AfterTool", tool_response={}))
    assert isinstance(before, ToolCall)
    assert isinstance(after, ToolCall)
    assert before.command == after.command == "git commit -m 'fix: x'"
    assert (before.ran, after.ran) == (False, True)
    assert not GEMINI.takes_context(before)
    assert GEMINI.takes_context(after)


def test_gemini_mcp_tool_is_named_by_its_context_and_edits_by_path() -> None:
    mcp = encode(
        GEMINI_EVENT,
        tool_name="mcp_github_create_pull_request",
        tool_input={"title": "x"},
        mcp_context={"server_name": "github", "tool_name": "create_pull_request", "command": "x"},
    )
    call = GEMINI.decode(mcp)
    assert isinstance(call, ToolCall)
    assert call.mcp_tool == "github/create_pull_request"
    no_context = encode(GEMINI_EVENT, tool_name="mcp_github_create_pull_request")
    assert GEMINI.decode(no_context) is None  # mcp_a_b_c cannot be split safely
    edit = encode(GEMINI_EVENT, tool_name="write_file", tool_input={"file_path": "db/m/1.sql"})
    edited = GEMINI.decode(edit)
    assert isinstance(edited, ToolCall)
    assert edited.edited == ("db/m/1.sql",)


@pytest.mark.parametrize(
    ("event", "emptied"),
    [
        ({"hook_event_name": "PreCompress", "trigger": "manual"}, True),
        # Fired before every model request, compressing or not: not an emptied context.
        ({"hook_event_name": "PreCompress", "trigger": "auto"}, False),
        # Gemini CLI 0.61 drops a SessionStart answer on /clear: only the context is emptied.
        ({"hook_event_name": "SessionStart", "source": "clear"}, True),
    ],
)
def test_gemini_context_emptied(event: dict[str, Any], *, emptied: bool) -> None:
    decoded = GEMINI.decode(encode({"session_id": "g1", "cwd": "/r", **event}))
    assert decoded == (ContextEmptied("g1") if emptied else None)


@pytest.mark.parametrize("source", ["startup", "resume"])
def test_gemini_session_start_takes_pinned_rules(source: str) -> None:
    decoded = GEMINI.decode(
        encode(
            {"session_id": "g1", "cwd": "/r", "hook_event_name": "SessionStart", "source": source}
        )
    )
    # A resumed Gemini session has lost the first start's `<hook_context>`.
    assert decoded == SessionStarted("g1", "/r", source, pinned_dropped=source == "resume")


def test_copilot_session_start() -> None:
    captured = {  # as Copilot CLI 1.0.102 sent it for `copilot -p`
        "hook_event_name": "SessionStart",
        "session_id": "7aae1c9c-ab87-413c-8c1e-9a3548da427b",
        "timestamp": "2026-12-01T08:01:47.971Z",
        "cwd": "/tmp/r",
        "source": "new",
        "initial_prompt": "Commit the change.",
    }
    session = captured["session_id"]
    assert COPILOT.decode(encode(captured)) == SessionStarted(session, "/tmp/r", "new")
    assert COPILOT.decode(encode(captured, source="startup")) == SessionStarted(
        session, "/tmp/r", "startup"
    )
    resumed = COPILOT.decode(encode(captured, source="resume"))
    assert resumed == SessionStarted(session, "/tmp/r", "resume", pinned_dropped=True)
    assert COPILOT.decode(encode(captured, source="clear")) is None  # not one of Copilot's
    assert json.loads(COPILOT.render_session_context("P")) == {"additionalContext": "P"}


def test_cursor_shell_and_mcp_events() -> None:
    call = CURSOR.decode(encode(CURSOR_EVENT))
    assert isinstance(call, ToolCall)
    assert (call.command, call.cwd, call.session) == (
        "git commit -m 'fix: x'",
        "/home/u/repo",
        "conv-123",
    )
    mcp = {
        **CURSOR_EVENT,
        "hook_event_name": "beforeMCPExecution",
        "tool_name": "create_pull_request",
        "tool_input": '{"title": "x"}',
        "url": "https://api.githubcopilot.com/mcp/",
    }
    del mcp["command"]
    tool = CURSOR.decode(encode(mcp))
    assert isinstance(tool, ToolCall)
    assert tool.mcp_tool == "/create_pull_request"  # the server is not named
    assert CURSOR.decode(encode(CURSOR_EVENT, hook_event_name="afterShellExecution")) is None
    assert not CURSOR.takes_context(call)


# ------------------------------------------------------------------ answers


def test_answers_in_each_agents_shape() -> None:
    assert json.loads(GEMINI.render_deny("R")) == {"decision": "deny", "reason": "R"}
    assert json.loads(GEMINI.render_context("C")) == {
        "hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": "C"}
    }
    assert json.loads(COPILOT.render_deny("R"))["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "R",
    }
    cursor = json.loads(CURSOR.render_deny("R"))
    assert cursor["permission"] == "deny"
    assert cursor["agent_message"] == "R"


# ------------------------------------------------------------------ delivery


@pytest.fixture
def store(store: Store) -> Store:
    """The conftest's empty store, with the rule."""
    store.store(RULE, memory_type=MemoryType.PROCEDURAL, tags=["trigger:git-commit"])
    return store


def handler(store: Store, sessions: SessionMemory | None, delivery: str = "before") -> HookHandler:
    config = Config(
        hook=HookSettings(dedupe_seconds=0),
        delivery=DeliverySettings(default=delivery),  # type: ignore[arg-type]
    )
    return HookHandler(store, make_matcher(config), config, sessions)


def test_gemini_stops_before_and_says_the_pointer_after(
    store: Store, sessions: SessionMemory
) -> None:
    hooks = handler(store, sessions)
    before = encode(GEMINI_EVENT)
    after = encode(GEMINI_EVENT, hook_event_name="AfterTool", tool_response={})
    stop = json.loads(hooks.handle("gemini-cli", before))
    assert stop["decision"] == "deny"
    assert RULE in stop["reason"]
    assert hooks.handle("gemini-cli", before) == b""  # the retry: nothing Gemini would read
    assert hooks.handle("gemini-cli", after) == b""  # ... nor after it: the model just read them
    later = {**GEMINI_EVENT, "tool_input": {"command": "git commit -m 'fix: y'"}}
    assert hooks.handle("gemini-cli", encode(later)) == b""
    pointer = json.loads(hooks.handle("gemini-cli", encode(later, hook_event_name="AfterTool")))
    text = pointer["hookSpecificOutput"]["additionalContext"]
    assert "still apply" in text
    assert RULE not in text


def test_gemini_context_delivery_waits_for_after_tool(
    store: Store, sessions: SessionMemory
) -> None:
    hooks = handler(store, sessions, delivery="context")
    assert hooks.handle("gemini-cli", encode(GEMINI_EVENT)) == b""
    after = hooks.handle("gemini-cli", encode(GEMINI_EVENT, hook_event_name="AfterTool"))
    assert RULE in json.loads(after)["hookSpecificOutput"]["additionalContext"]


def test_gemini_after_tool_is_never_a_stop(store: Store) -> None:
    hooks = handler(store, None)  # no session memory: context, never a stop
    after = hooks.handle("gemini-cli", encode(GEMINI_EVENT, hook_event_name="AfterTool"))
    assert "decision" not in json.loads(after)


def test_cursor_stops_once_then_says_nothing(store: Store, sessions: SessionMemory) -> None:
    hooks = handler(store, sessions)
    first = json.loads(hooks.handle("cursor", encode(CURSOR_EVENT)))
    assert first["permission"] == "deny"
    assert RULE in first["agent_message"]
    assert hooks.handle("cursor", encode(CURSOR_EVENT)) == b""  # handed over: nothing to say


def test_cursor_without_session_memory_never_stops(store: Store) -> None:
    hooks = handler(store, None)
    assert hooks.handle("cursor", encode(CURSOR_EVENT)) == b""
    assert hooks.handle("cursor", encode(CURSOR_EVENT)) == b""


def test_copilot_stops_once_then_points(store: Store, sessions: SessionMemory) -> None:
    hooks = handler(store, sessions)
    first = json.loads(hooks.handle("copilot-cli", encode(COPILOT_EVENT)))
    assert first["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert hooks.handle("copilot-cli", encode(COPILOT_EVENT)) == b""  # the retry
    later = {**COPILOT_EVENT, "tool_input": {"command": "git commit -m 'fix: y'"}}
    second = json.loads(hooks.handle("copilot-cli", encode(later)))
    assert "still apply" in second["hookSpecificOutput"]["additionalContext"]
    # A compaction: the rules go over again.
    compact = encode({"hook_event_name": "PreCompact", "session_id": COPILOT_EVENT["session_id"]})
    assert hooks.handle("copilot-cli", compact) == b""
    again = json.loads(hooks.handle("copilot-cli", encode(COPILOT_EVENT)))
    assert again["hookSpecificOutput"]["permissionDecision"] == "deny"


# ------------------------------------------------------------------ installing


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("GEMINI_CLI_HOME", "COPILOT_HOME", "MENTED_SOCKET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return home


def mentectl(*args: str) -> int:
    from mented_client.cli import main

    return main(list(args))


def test_gemini_install_is_milliseconds_and_round_trips(home: Path) -> None:
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    original = '{\n  "theme": "GitHub",\n  "security": {"folderTrust": {"enabled": true}}\n}\n'
    settings.write_text(original)
    assert mentectl("hooks", "install", "gemini-cli") == 0
    doc = json.loads(settings.read_text())
    assert set(doc["hooks"]) == {"BeforeTool", "AfterTool", "SessionStart", "PreCompress"}
    (group,) = doc["hooks"]["BeforeTool"]
    # Anchored: the shell tool and the MCP tools the built-in table names.
    assert group["matcher"].startswith("^(run_shell_command|mcp_.*_create_pull_request|")
    assert group["matcher"].endswith(")$")
    (hook,) = group["hooks"]
    assert hook["timeout"] == 5000  # milliseconds
    assert hook["name"] == "mented"
    # No matcher (Gemini compares a lifecycle matcher for equality): every source.
    assert "matcher" not in doc["hooks"]["SessionStart"][0]
    assert doc["hooks"]["SessionStart"][0]["hooks"][0]["description"] == "mented: your pinned rules"
    assert doc["hooksConfig"] == {"enabled": True}
    assert mentectl("hooks", "install", "gemini-cli") == 0
    assert json.loads(settings.read_text()) == doc  # nothing added twice
    assert mentectl("hooks", "uninstall", "gemini-cli") == 0
    assert settings.read_text() == original


def test_gemini_install_keeps_hooks_config_the_user_set(home: Path) -> None:
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"hooksConfig": {"enabled": false, "notifications": false}}')
    assert mentectl("hooks", "install", "gemini-cli") == 0
    assert json.loads(settings.read_text())["hooksConfig"] == {
        "enabled": False,
        "notifications": False,
    }
    assert mentectl("hooks", "uninstall", "gemini-cli") == 0
    assert json.loads(settings.read_text()) == {
        "hooksConfig": {"enabled": False, "notifications": False}
    }


def test_copilot_install_writes_its_own_file_and_uninstall_removes_it(home: Path) -> None:
    path = home / ".copilot" / "hooks" / "mented.json"
    assert mentectl("hooks", "install", "copilot-cli") == 0
    doc = json.loads(path.read_text())
    assert doc["version"] == 1
    (entry,) = doc["hooks"]["PreToolUse"]
    assert entry["type"] == "command"
    assert entry["matcher"] == "bash"
    assert entry["timeoutSec"] == 5
    assert entry["bash"].endswith("; exit 0")  # a failing hook would deny the command
    assert list(doc["hooks"]) == ["PreToolUse", "SessionStart", "PreCompact", "PostToolUse"]
    assert doc["hooks"]["PostToolUse"][0]["matcher"] == "bash"  # the checks after a command
    assert "matcher" not in doc["hooks"]["SessionStart"][0]  # every source
    assert mentectl("hooks", "uninstall", "copilot-cli") == 0
    assert not path.exists()


def test_copilot_project_file_keeps_other_hooks(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "repo" / ".github" / "hooks" / "mented.json"
    path.parent.mkdir(parents=True)
    theirs = {"type": "command", "bash": "./lint.sh", "timeoutSec": 30}
    path.write_text(json.dumps({"version": 1, "hooks": {"postToolUse": [theirs]}}, indent=2))
    original = path.read_text()
    assert mentectl("hooks", "install", "copilot-cli", "--project", str(tmp_path / "repo")) == 0
    assert json.loads(path.read_text())["hooks"]["postToolUse"] == [theirs]
    assert mentectl("hooks", "uninstall", "copilot-cli", "--project", str(tmp_path / "repo")) == 0
    assert path.read_text() == original


def test_cursor_install_both_events_in_version_1_file(home: Path) -> None:
    path = home / ".cursor" / "hooks.json"
    assert mentectl("hooks", "install", "cursor") == 0
    doc = json.loads(path.read_text())
    assert doc["version"] == 1
    assert set(doc["hooks"]) == {"beforeShellExecution", "beforeMCPExecution"}
    (entry,) = doc["hooks"]["beforeShellExecution"]
    assert list(entry) == ["command"]
    assert mentectl("hooks", "status", "cursor") == 0
    assert mentectl("hooks", "uninstall", "cursor") == 0
    assert not path.exists()


def test_an_older_gemini_install_on_clear_only_is_reported_and_widened(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".gemini" / "settings.json"
    assert mentectl("hooks", "install", "gemini-cli") == 0
    # What installs before pinned rules wrote: SessionStart on /clear only.
    doc = json.loads(settings.read_text())
    doc["hooks"]["SessionStart"][0] = {"matcher": "clear", **doc["hooks"]["SessionStart"][0]}
    settings.write_text(json.dumps(doc, indent=2))
    capsys.readouterr()
    mentectl("hooks", "status")
    assert "runs only on clear (an older install)" in capsys.readouterr().out
    assert mentectl("hooks", "install", "gemini-cli") == 0
    (group,) = json.loads(settings.read_text())["hooks"]["SessionStart"]
    assert "matcher" not in group
    capsys.readouterr()
    mentectl("hooks", "status")
    assert "older install" not in capsys.readouterr().out


def test_an_older_copilot_install_without_session_start_is_completed(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / ".copilot" / "hooks" / "mented.json"
    assert mentectl("hooks", "install", "copilot-cli") == 0
    doc = json.loads(path.read_text())
    del doc["hooks"]["SessionStart"]
    path.write_text(json.dumps(doc, indent=2))
    capsys.readouterr()
    mentectl("hooks", "status")
    assert "no SessionStart entry, so pinned rules are not handed over" in capsys.readouterr().out
    assert mentectl("hooks", "install", "copilot-cli") == 0
    assert list(json.loads(path.read_text())["hooks"]) == [
        "PreToolUse",
        "PreCompact",
        "PostToolUse",
        "SessionStart",
    ]


# ------------------------------------------- events after the tool ran, and Cursor's roots


def rule_for(store: Store, text: str, **scope: Any) -> None:
    store.store(text, memory_type=MemoryType.PROCEDURAL, tags=["trigger:git-commit"], **scope)


def test_gemini_after_tool_with_a_new_rule_is_context_never_a_stop(
    store: Store, sessions: SessionMemory
) -> None:
    # A rule added while the command ran: AfterTool (with a session memory that
    # could record a stop) must say the command ran, not that it was stopped.
    hooks = handler(store, sessions)
    assert json.loads(hooks.handle("gemini-cli", encode(GEMINI_EVENT)))["decision"] == "deny"
    assert hooks.handle("gemini-cli", encode(GEMINI_EVENT)) == b""  # the retry runs
    rule_for(store, "sign every commit")
    after = json.loads(
        hooks.handle("gemini-cli", encode(GEMINI_EVENT, hook_event_name="AfterTool"))
    )
    assert "decision" not in after
    text = after["hookSpecificOutput"]["additionalContext"]
    assert after["hookSpecificOutput"]["hookEventName"] == "AfterTool"
    assert text.startswith("The command that just ran falls under the user's rules")
    assert "sign every commit" in text
    assert "stopped" not in text
    assert "before it ran" not in text


def test_cursor_with_only_workspace_roots_gets_its_projects_rules_and_no_others(
    store: Store, sessions: SessionMemory
) -> None:
    rule_for(store, "repo rule: reference the ticket", project="/home/u/repo")
    rule_for(store, "other project's rule", project="/home/u/other")
    only_roots = {k: v for k, v in CURSOR_EVENT.items() if k != "cwd"}
    call = CURSOR.decode(encode(only_roots))
    assert isinstance(call, ToolCall)
    assert call.cwd == "/home/u/repo"
    message = json.loads(handler(store, sessions).handle("cursor", encode(only_roots)))
    assert "repo rule: reference the ticket" in message["agent_message"]
    assert "other project's rule" not in message["agent_message"]
    assert RULE in message["agent_message"]  # the user's own, everywhere


QWEN = AGENTS["qwen-code"]
QWEN_EVENT = {  # Claude Code's payload with Qwen Code's shell tool (0.24.4)
    "session_id": "qwen-session",
    "transcript_path": "/home/u/.qwen/tmp/chats/session.jsonl",
    "cwd": "/home/u/repo",
    "hook_event_name": "PreToolUse",
    "permission_mode": "default",
    "tool_name": "run_shell_command",
    "tool_input": {"command": "git commit -m 'fix: x'", "description": "Commit"},
    "tool_use_id": "call_1",
}


def qwen(hooks: HookHandler, event: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = hooks.handle("qwen-code", encode(event, **changes))
    return json.loads(out) if out else {}


def test_qwen_stops_before_the_command_then_points_after_it(
    store: Store, sessions: SessionMemory
) -> None:
    hooks = handler(store, sessions)
    stop = qwen(hooks, QWEN_EVENT)["hookSpecificOutput"]
    assert stop["hookEventName"] == "PreToolUse"
    assert stop["permissionDecision"] == "deny"
    assert RULE in stop["permissionDecisionReason"]
    assert "stopped this command once, before it ran" in stop["permissionDecisionReason"]
    retry = {**QWEN_EVENT, "tool_use_id": "call_2"}
    assert qwen(hooks, retry) == {}  # the retry runs
    assert qwen(hooks, retry, hook_event_name="PostToolUse", tool_response={}) == {}
    later = {**QWEN_EVENT, "tool_use_id": "call_3", "tool_input": {"command": "git commit -m y"}}
    assert qwen(hooks, later) == {}  # a PreToolUse context reaches no one in Qwen Code
    pointer = qwen(hooks, later, hook_event_name="PostToolUse", tool_response={})
    assert pointer["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert pointer["hookSpecificOutput"]["additionalContext"].startswith(
        "mented: the rules shown earlier still apply to this command: git-commit ["
    )


def test_qwen_context_delivery_says_the_rules_after_the_command_ran(
    store: Store, sessions: SessionMemory
) -> None:
    hooks = handler(store, sessions, delivery="context")
    assert qwen(hooks, QWEN_EVENT) == {}  # nothing before: its context would be dropped
    after = qwen(hooks, QWEN_EVENT, hook_event_name="PostToolUse", tool_response={})
    assert list(after) == ["hookSpecificOutput"]
    specific = after["hookSpecificOutput"]
    assert specific["hookEventName"] == "PostToolUse"
    assert specific["additionalContext"].startswith("The command that just ran falls under")
    assert RULE in specific["additionalContext"]
    assert "permissionDecision" not in specific
    # Not handed over by the PreToolUse that said nothing: the PostToolUse did it, once.
    again = qwen(hooks, QWEN_EVENT, hook_event_name="PostToolUse", tool_use_id="call_9")
    assert RULE not in again["hookSpecificOutput"]["additionalContext"]


USERS_GEMINI_HOOKS = (
    '{\n  "hooks": {\n    "BeforeTool": [\n      {"matcher": "write_file", "hooks": '
    '[{"type": "command", "command": "echo mine"}]}\n    ]\n  }\n}\n'
)


def test_gemini_uninstall_takes_out_hooks_enabled_it_added_beside_the_users_hooks(
    home: Path,
) -> None:
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USERS_GEMINI_HOOKS)
    assert mentectl("hooks", "install", "gemini-cli") == 0
    assert json.loads(settings.read_text())["hooksConfig"] == {"enabled": True}
    # Installed again, changed: the setting is found there, and is still mented's.
    assert mentectl("hooks", "install", "gemini-cli", "--timeout", "7") == 0
    assert mentectl("hooks", "uninstall", "gemini-cli") == 0
    assert settings.read_text() == USERS_GEMINI_HOOKS  # the user's hooks, and nothing of ours
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]  # no backup
    assert not (home / ".local" / "state" / "mented").exists()  # nor an empty directory


def test_gemini_uninstall_keeps_hooks_enabled_the_user_set(home: Path) -> None:
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    original = '{\n  "hooksConfig": {"enabled": true}\n}\n'
    settings.write_text(original)
    assert mentectl("hooks", "install", "gemini-cli") == 0
    assert mentectl("hooks", "install", "gemini-cli", "--timeout", "7") == 0
    assert mentectl("hooks", "uninstall", "gemini-cli") == 0
    assert settings.read_text() == original  # not taken for mented's, nor the file removed


@pytest.mark.parametrize(
    ("disabled", "left"),
    [(["mented"], None), (["mine", "mented"], {"hooksConfig": {"disabled": ["mine"]}})],
)
def test_gemini_uninstall_takes_mented_out_of_the_hooks_gemini_turned_off(
    home: Path, disabled: list[str], left: dict[str, object] | None
) -> None:
    settings = home / ".gemini" / "settings.json"
    assert mentectl("hooks", "install", "gemini-cli") == 0
    # `/hooks disable mented` in Gemini CLI: it writes our hook's name in this list.
    doc = json.loads(settings.read_text())
    doc["hooksConfig"]["disabled"] = disabled
    settings.write_text(json.dumps(doc, indent=2))
    assert mentectl("hooks", "uninstall", "gemini-cli") == 0
    if left is None:
        assert not settings.exists()  # a new install would not be off without a word
    else:
        assert json.loads(settings.read_text()) == left


def test_gemini_install_with_a_linked_or_broken_record_keeps_the_old_rule(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USERS_GEMINI_HOOKS)
    state = home / ".local" / "state" / "mented"
    state.mkdir(parents=True)
    elsewhere = home / "elsewhere.json"
    elsewhere.write_text("not json\n")
    (state / "added-settings.json").symlink_to(elsewhere)
    assert mentectl("hooks", "install", "gemini-cli") == 0
    err = capsys.readouterr().err
    assert "cannot record in ~/.local/state/mented/added-settings.json" in err
    assert "it is a symbolic link" in err
    assert elsewhere.read_text() == "not json\n"  # not written through the link
    # No record: the setting goes with the file's last hook, as before; the user's stay.
    assert mentectl("hooks", "uninstall", "gemini-cli") == 0
    assert json.loads(settings.read_text())["hooksConfig"] == {"enabled": True}
    assert json.loads(settings.read_text())["hooks"] == json.loads(USERS_GEMINI_HOOKS)["hooks"]
