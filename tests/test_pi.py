"""pi: its extension's events decoded, the answers it reads, and the install of the file.

The events are the ones pi 0.73.1 sent through `client/pi_extension.ts` against the
mock model (tests/data/pi_events.jsonl); an edit's and a write's are built the same
way from pi's `edit`/`write` tool schemas (dist/core/tools/edit.js, write.js): the
path alone. The extension itself, run by the real pi, is tested in
tests/test_real_pi.py.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mented.agents import AGENTS, ContextEmptied, SessionStarted, ToolCall
from mented.agents import pi as pi_module
from mented.config import Config, DeliverySettings, HookSettings
from mented.hooks import HookHandler
from mented.memory import PINNED_TAG, MemoryType
from mented.protocol import PROTOCOL_VERSION, StatusReply
from mented.sessions import SessionMemory
from mented.store import Store
from mented_client.agents import extension_file
from mented_client.agents import extension_file as extension
from mented_client.agents.extension_file import Found
from mented_client.cli import main
from tests.test_hooks import make_matcher

PI = AGENTS["pi"]
DATA = Path(__file__).parent / "data" / "pi_events.jsonl"
RULE = "commit messages: single line, conventional prefix, no emojis"
PINNED = "answer in British English"
SHIPPED = Path(__file__).parent.parent / "client" / "pi_extension.ts"


def recorded() -> list[dict[str, Any]]:
    """The hook requests as pi sent them: agreement, then one per line."""
    lines = DATA.read_text().splitlines()[1:]
    return [json.loads(line) for line in lines]


def event(index: int, **changes: Any) -> bytes:
    found = recorded()[index]["event"]
    return json.dumps({**found, **changes}).encode()


BEFORE_AGENT_START, COMMIT_CALL, COMMIT_RESULT, LS_CALL, LS_RESULT = range(5)


# ------------------------------------------------------------------ the events


def test_the_recorded_requests_are_for_pi_with_a_deadline() -> None:
    for request in recorded():
        assert request["type"] == "hook"
        assert request["agent"] == "pi"
        assert isinstance(request["deadline"], float)


def test_recorded_events_decode() -> None:
    start = PI.decode(event(BEFORE_AGENT_START))
    assert isinstance(start, SessionStarted)
    assert (start.session, start.source) == ("01a234e7-8436-76c1-a72b-707a2557b5e9", "startup")
    call = PI.decode(event(COMMIT_CALL))
    assert isinstance(call, ToolCall)
    assert call.command == 'git commit --allow-empty -m "fix: x"'
    assert (call.tool, call.ran) == ("bash", False)
    assert call.tool_use_id == "toolu_call_1"
    assert call.cwd == "/tmp/pirec/repo"
    after = PI.decode(event(COMMIT_RESULT))
    assert isinstance(after, ToolCall)
    assert after.ran
    assert PI.decode(event(LS_CALL)) == ToolCall(
        command="ls",
        tool="bash",
        cwd="/tmp/pirec/repo",
        session="01a234e7-8436-76c1-a72b-707a2557b5e9",
        tool_use_id="toolu_call_2",
    )


@pytest.mark.parametrize("tool", ["edit", "write"])
def test_file_writes_are_their_path(tool: str) -> None:
    call = PI.decode(event(COMMIT_CALL, tool_name=tool, input={"path": "src/app.py"}))
    assert isinstance(call, ToolCall)
    assert (call.edited, call.command) == (("src/app.py",), "")


def test_compaction_empties_the_session() -> None:
    compact = {"event": "session_compact", "session_id": "s1"}
    assert PI.decode(json.dumps(compact).encode()) == ContextEmptied("s1")
    assert PI.decode(b'{"event": "session_compact"}') is None


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[]",
        b'{"event": "tool_call", "tool_name": "bash", "input": "git commit"}',
        b'{"event": "tool_call", "tool_name": "bash", "input": {"command": 7}}',
        b'{"event": "tool_call", "tool_name": "bash", "input": {"command": "  "}}',
        b'{"event": "tool_call", "tool_name": "read", "input": {"path": "a.py"}}',
        b'{"event": "tool_call", "tool_name": "bash"}',
        b'{"event": "agent_end", "session_id": "s"}',
        b'{"event": "tool_call", "input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ],
)
def test_what_is_not_a_call_of_ours_decodes_to_nothing(raw: bytes) -> None:
    assert PI.decode(raw) is None


def test_the_extension_sends_the_tools_the_adapter_reads() -> None:
    text = SHIPPED.read_text()
    shell = re.search(r"const SHELL_TOOLS = new Set\(\[(.*?)\]\)", text)
    edits = re.search(r"const EDIT_TOOLS = new Set\(\[(.*?)\]\)", text)
    assert shell is not None
    assert edits is not None
    assert set(json.loads(f"[{shell.group(1)}]")) == PI.shell_tools
    assert set(json.loads(f"[{edits.group(1)}]")) == PI.edit_tools
    assert PI.protocol_of(text) == PROTOCOL_VERSION


# ------------------------------------------------------------------ delivery


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "data", sync=False)
    opened.store(RULE, memory_type=MemoryType.PROCEDURAL, tags=["trigger:git-commit"])
    try:
        yield opened
    finally:
        opened.close()


def handler(store: Store, sessions: SessionMemory | None) -> HookHandler:
    config = Config(hook=HookSettings(dedupe_seconds=0), delivery=DeliverySettings())
    return HookHandler(store, make_matcher(config), config, sessions)


def answer(hooks: HookHandler, raw: bytes) -> dict[str, Any] | None:
    """What the extension reads back; never anything but a stop or context."""
    out = hooks.handle("pi", raw)
    if not out:
        return None
    decoded: dict[str, Any] = msgspec.json.decode(out)
    assert set(decoded) in ({"block", "reason"}, {"additionalContext"}), decoded
    assert decoded.get("block", True) is True  # never an approval
    return decoded


def test_a_commit_is_stopped_once_then_pointed_at_after_it_ran(
    store: Store, sessions: SessionMemory
) -> None:
    hooks = handler(store, sessions)
    stop = answer(hooks, event(COMMIT_CALL))
    assert stop is not None
    assert stop["block"] is True
    assert RULE in stop["reason"]
    assert stop["reason"].startswith("mented stopped this command once, before it ran")
    # The retry (pi sends no tool_result for a blocked call): silent before and after.
    retry = {"tool_call_id": "toolu_call_2"}
    assert answer(hooks, event(COMMIT_CALL, **retry)) is None
    assert answer(hooks, event(COMMIT_RESULT, **retry)) is None
    later = {"tool_call_id": "toolu_call_3", "input": {"command": "git commit -m 'fix: y'"}}
    assert answer(hooks, event(COMMIT_CALL, **later)) is None  # pi reads no context here
    pointer = answer(hooks, event(COMMIT_RESULT, **later))
    assert pointer is not None
    assert "still apply" in pointer["additionalContext"]
    assert RULE not in pointer["additionalContext"]


def test_a_command_that_is_no_action_gets_nothing(store: Store, sessions: SessionMemory) -> None:
    hooks = handler(store, sessions)
    assert answer(hooks, event(LS_CALL)) is None
    assert answer(hooks, event(LS_RESULT)) is None


def test_without_session_memory_the_rules_come_after_never_as_a_stop(store: Store) -> None:
    hooks = handler(store, None)
    assert answer(hooks, event(COMMIT_CALL)) is None
    context = answer(hooks, event(COMMIT_RESULT))
    assert context is not None
    assert RULE in context["additionalContext"]


def test_pinned_rules_go_with_the_first_prompt_and_again_after_a_compaction(
    store: Store, sessions: SessionMemory
) -> None:
    store.store(PINNED, memory_type=MemoryType.PROCEDURAL, tags=[PINNED_TAG])
    hooks = handler(store, sessions)
    first = answer(hooks, event(BEFORE_AGENT_START))
    assert first is not None
    assert PINNED in first["additionalContext"]
    assert answer(hooks, event(BEFORE_AGENT_START)) is None  # the session has it
    session = recorded()[BEFORE_AGENT_START]["event"]["session_id"]
    compact = {"event": "session_compact", "session_id": session}
    assert answer(hooks, json.dumps(compact).encode()) is None
    again = answer(hooks, event(BEFORE_AGENT_START))
    assert again is not None
    assert PINNED in again["additionalContext"]


def test_doctor_reads_a_stop_and_a_context() -> None:
    assert pi_module.text_of_answer(PI.render_deny("R")) == "R"
    assert pi_module.text_of_answer(PI.render_context("T")) == "T"
    assert pi_module.text_of_answer(b'{"block": false, "reason": "R"}') is None
    assert pi_module.text_of_answer(b"[1]") is None


# ------------------------------------------------------------------ installing


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MENTED_SOCKET", str(tmp_path / "mented.sock"))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    return home


def user_file(home: Path) -> Path:
    return home / ".pi" / "agent" / "extensions" / "mented.ts"


def test_install_writes_the_extension_with_the_socket_and_round_trips(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hooks", "install", "pi"]) == 0
    assert "Installed mented's extension for pi" in capsys.readouterr().out
    path = user_file(home)
    text = path.read_text()
    assert extension_file.classify(text) is Found.OURS
    assert extension_file.socket_of(text) == str(tmp_path / "mented.sock")
    assert PI.protocol_of(text) == PROTOCOL_VERSION
    assert main(["hooks", "install", "pi"]) == 0
    assert "nothing changed" in capsys.readouterr().out
    assert main(["hooks", "status", "pi"]) == 0
    assert "extension installed, protocol 1, ok" in capsys.readouterr().out
    assert main(["hooks", "uninstall", "pi"]) == 0
    assert "Removed mented's extension" in capsys.readouterr().out
    assert not path.exists()


def test_uninstall_takes_the_folders_the_install_created_and_only_those(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hooks", "install", "pi"]) == 0
    assert main(["hooks", "uninstall", "pi"]) == 0
    out = capsys.readouterr().out
    assert "~/.pi/agent/extensions was left empty: removed too" in out
    assert not (home / ".pi" / "agent").exists()
    settings = home / ".pi" / "agent" / "settings.json"  # pi's own, beside the folder
    settings.parent.mkdir(parents=True)
    settings.write_text("{}\n")
    assert main(["hooks", "install", "pi"]) == 0
    assert main(["uninstall", "pi"]) == 0
    assert not (home / ".pi" / "agent" / "extensions").exists()
    assert settings.read_text() == "{}\n"


def test_install_follows_pi_coding_agent_dir(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "pi-config"))
    assert main(["hooks", "install", "pi"]) == 0
    assert (tmp_path / "pi-config" / "extensions" / "mented.ts").is_file()
    assert not user_file(home).exists()


@pytest.mark.parametrize("theirs", ["someone else's", "edited"])
def test_a_file_mented_did_not_write_is_never_replaced_nor_removed(
    home: Path, theirs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = user_file(home)
    if theirs == "edited":
        assert main(["hooks", "install", "pi"]) == 0
        text = path.read_text().replace("DEFAULT_BUDGET_MS = 250", "DEFAULT_BUDGET_MS = 900")
    else:
        path.parent.mkdir(parents=True)
        text = "export default function (pi) { /* the user's own */ }\n"
    path.write_text(text)
    capsys.readouterr()
    assert main(["hooks", "install", "pi"]) == 1
    said = capsys.readouterr().err
    assert "nothing was written" in said
    assert ("changed since mented wrote it" if theirs == "edited" else "is not mented's") in said
    assert main(["hooks", "uninstall", "pi"]) == 0
    assert "leaves it alone" in capsys.readouterr().out
    assert main(["uninstall", "pi"]) == 0
    assert path.read_text() == text
    assert main(["hooks", "status", "pi"]) == 1


def test_a_symlink_is_never_followed(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.ts"
    target.write_text("the user's\n")
    path = user_file(home)
    path.parent.mkdir(parents=True)
    path.symlink_to(target)
    assert main(["hooks", "install", "pi"]) == 1
    assert main(["hooks", "uninstall", "pi"]) == 0
    assert path.is_symlink()
    assert target.read_text() == "the user's\n"


def test_a_symlinked_plugin_folder_is_refused(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "shared").mkdir()
    (home / ".pi" / "agent").mkdir(parents=True)
    (home / ".pi" / "agent" / "extensions").symlink_to(tmp_path / "shared")
    assert main(["hooks", "install", "pi"]) == 1
    assert "is a symbolic link" in capsys.readouterr().err
    assert list((tmp_path / "shared").iterdir()) == []


def test_a_named_pipe_is_refused_without_blocking(home: Path) -> None:
    path = user_file(home)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    assert main(["hooks", "install", "pi"]) == 1
    assert main(["hooks", "uninstall", "pi"]) == 0
    assert path.exists()


def test_project_install_and_a_project_link_leading_out(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    assert main(["hooks", "install", "pi", "--project", str(project)]) == 0
    assert (project / ".pi" / "extensions" / "mented.ts").is_file()
    assert not user_file(home).exists()
    assert main(["uninstall", "pi"]) == 0  # the user's: the project's is named, not removed
    assert (project / ".pi" / "extensions" / "mented.ts").is_file()
    assert main(["hooks", "uninstall", "pi", "--project", str(project)]) == 0
    assert not (project / ".pi" / "extensions" / "mented.ts").exists()
    other = tmp_path / "other"
    other.mkdir()
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / ".pi").symlink_to(other)
    capsys.readouterr()
    assert main(["hooks", "install", "pi", "--project", str(hostile)]) == 1
    assert "symbolic link" in capsys.readouterr().err
    assert list(other.iterdir()) == []


def test_hooks_command_has_no_command_line_for_pi(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hooks", "command", "pi"]) == 2
    assert "no hook command line" in capsys.readouterr().err


def test_mcp_install_says_pi_has_none(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "install", "pi"]) == 1
    assert "pi has no MCP support" in capsys.readouterr().err
    assert not (home / ".pi").exists()


def status(protocol: int) -> StatusReply:
    return StatusReply(version="0", protocol=protocol, pid=1, uptime_s=0, socket="s", data_dir="d")


def test_doctor_checks_the_extension_protocol_against_the_daemons(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    socket = tmp_path / "no-daemon.sock"
    (check,) = extension.doctor_checks(PI, socket, None)
    assert (check.state, check.detail) == ("skip", "not installed for pi")
    older = SHIPPED.read_text().replace(
        f"MENTED_PROTOCOL_VERSION = {PROTOCOL_VERSION};", "MENTED_PROTOCOL_VERSION = 0;"
    )
    monkeypatch.setattr(extension_file, "shipped_text", lambda agent: older)
    assert main(["hooks", "install", "pi"]) == 0
    checks = extension.doctor_checks(PI, socket, status(PROTOCOL_VERSION))
    mismatch = next(check for check in checks if check.link == "hook pi")
    assert mismatch.state == "fail"
    assert f"speaks protocol 0, the daemon {PROTOCOL_VERSION}" in mismatch.detail
    assert mismatch.fix is not None
    assert "mentectl hooks install pi" in mismatch.fix
    fired = next(check for check in checks if check.link == "fire pi")
    assert fired.state == "fail"  # no daemon at that socket
    monkeypatch.setattr(extension_file, "shipped_text", lambda agent: SHIPPED.read_text())
    user_file(home).unlink()
    assert main(["hooks", "install", "pi"]) == 0
    (ok, _) = extension.doctor_checks(PI, tmp_path / "mented.sock", status(PROTOCOL_VERSION))
    assert (ok.link, ok.state) == ("hook pi", "ok")
    (elsewhere, _) = extension.doctor_checks(PI, socket, status(PROTOCOL_VERSION))
    assert elsewhere.state == "warn"
    assert "falls back to the socket" in elsewhere.detail


def test_a_file_that_is_not_utf8_or_not_the_users_is_left_alone(home: Path) -> None:
    path = user_file(home)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff\xfe not text")
    assert main(["hooks", "install", "pi"]) == 1
    assert path.read_bytes() == b"\xff\xfe not text"
    path.unlink()
    assert main(["hooks", "install", "pi"]) == 0
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    os.chown(path, 65534, 65534)
    text = path.read_text()
    assert main(["hooks", "uninstall", "pi"]) == 0
    assert main(["hooks", "install", "pi"]) == 1
    assert path.read_text() == text
    assert path.stat().st_uid == 65534
