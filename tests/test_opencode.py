"""opencode: the events mented's plugin sends, the answers it acts on, and its install.

The events in tests/data/opencode_events.jsonl are what the plugin sent from the real
opencode 1.18.33 (captured on a socket against the mock model), and the ones for its
other tools built from its tool schemas. The plugin itself runs under node here
(tests/test_opencode_plugin.py); the real agent in tests/test_real_opencode.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mented.agents import AGENTS, ContextEmptied, SessionStarted, ToolCall
from mented.agents.opencode import PLUGIN_MARKER, PLUGIN_PROTOCOL, plugin_protocol, plugin_source
from mented.hooks import HookHandler
from mented.memory import PINNED_TAG, MemoryType
from mented.sessions import SessionMemory
from mented.store import Store
from tests.test_more_agents import handler

OPENCODE = AGENTS["opencode"]
RULE = "commit messages: single line, conventional prefix, no emojis"
PINNED = "Never push to main without asking the user first."
DATA = Path(__file__).parent / "data" / "opencode_events.jsonl"
EVENTS = [json.loads(line)["event"] for line in DATA.read_text().splitlines()]
SESSION_START, BEFORE, AFTER = EVENTS[:3]


def encode(event: dict[str, Any], **changes: Any) -> bytes:
    return json.dumps({**event, **changes}).encode()


# ------------------------------------------------------------------ decoding


def test_the_recorded_events_decode_to_the_calls_they_are() -> None:
    decoded = [OPENCODE.decode(encode(event)) for event in EVENTS]
    session = "ses_dcb19cf5fffeXwGL7yabm2i5An"
    assert decoded[0] == SessionStarted(
        session=session, cwd="/tmp/octrial/repo3", source="startup", pinned_dropped=True
    )
    before, after = decoded[1], decoded[2]
    assert isinstance(before, ToolCall)
    assert isinstance(after, ToolCall)
    assert before.command == after.command == 'git commit --allow-empty -m "fix: x"'
    assert (before.session, before.cwd, before.tool_use_id) == (
        session,
        "/tmp/octrial/repo3",
        "call_1",
    )
    assert (before.ran, after.ran) == (False, True)
    workdir, edit, write, patch, mcp, compacted = decoded[3:]
    assert isinstance(workdir, ToolCall)
    assert workdir.cwd == "/repo/sub"  # the command runs in its workdir
    assert isinstance(edit, ToolCall)
    assert edit.edited == ("/repo/CHANGELOG.md",)
    assert isinstance(write, ToolCall)
    assert write.edited == ("/repo/docs/a.md",)
    assert isinstance(patch, ToolCall)
    assert patch.edited == ("CHANGELOG.md",)
    assert isinstance(mcp, ToolCall)
    assert mcp.mcp_tool == "github/create_pull_request"
    assert compacted == ContextEmptied("ses_1")


@pytest.mark.parametrize(
    "event",
    [
        b"",
        b"[]",
        b'{"hook_event_name": "tool.execute.before", "tool": "bash", "args": "x"}',
        b'{"hook_event_name": "tool.execute.before", "tool": "bash", "args": {"command": " "}}',
        b'{"hook_event_name": "tool.execute.before", "tool": "read", "args": {"filePath": "a"}}',
        b'{"hook_event_name": "permission.ask", "tool": "bash", "args": {"command": "ls"}}',
        b'{"hook_event_name": "session.compacted"}',
        b'{"args": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
)
def test_events_that_are_no_call_are_nothing(event: bytes) -> None:
    assert OPENCODE.decode(event) is None


# ------------------------------------------------------------------ delivery


@pytest.fixture
def store(store: Store) -> Store:
    """The conftest's empty store, with the rule."""
    store.store(RULE, memory_type=MemoryType.PROCEDURAL, tags=["trigger:git-commit"])
    return store


def answer(hooks: HookHandler, event: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = hooks.handle("opencode", encode(event, **changes))
    return json.loads(out) if out else {}


def test_the_first_commit_is_stopped_the_retry_runs_a_later_one_gets_a_pointer_after(
    store: Store, sessions: SessionMemory
) -> None:
    hooks = handler(store, sessions)
    stop = answer(hooks, BEFORE)
    assert list(stop) == ["stop"]  # the plugin throws it: the model reads it, nothing runs
    assert RULE in stop["stop"]
    assert stop["stop"].startswith("mented stopped this command once, before it ran")
    retry = {**BEFORE, "call_id": "call_2"}
    assert answer(hooks, retry) == {}  # the retry runs
    assert answer(hooks, retry, hook_event_name="tool.execute.after") == {}
    later = {**BEFORE, "call_id": "call_3", "args": {"command": "git commit -m y"}}
    assert answer(hooks, later) == {}  # before a tool opencode has no channel but a stop
    pointer = answer(hooks, later, hook_event_name="tool.execute.after")
    assert list(pointer) == ["context"]
    assert pointer["context"].startswith("mented: the rules shown earlier still apply")
    assert RULE not in pointer["context"]


def test_after_a_compaction_the_rules_are_stopped_for_again(
    store: Store, sessions: SessionMemory
) -> None:
    hooks = handler(store, sessions)
    assert "stop" in answer(hooks, BEFORE)
    session = BEFORE["session_id"]
    assert answer(hooks, EVENTS[-1], session_id=session) == {}
    assert "stop" in answer(hooks, BEFORE, call_id="call_9")


def test_context_delivery_says_the_rules_after_the_command_and_never_stops(
    store: Store, sessions: SessionMemory
) -> None:
    hooks = handler(store, sessions, delivery="context")
    assert answer(hooks, BEFORE) == {}
    after = answer(hooks, AFTER)
    assert list(after) == ["context"]
    assert RULE in after["context"]


def test_every_start_of_the_plugin_gets_every_pinned_rule(
    store: Store, sessions: SessionMemory
) -> None:
    """The system prompt is built again for each request and never kept: a plugin that
    meets a session (a new one, or opencode started again on it) gets them all."""
    store.store(PINNED, memory_type=MemoryType.PROCEDURAL, tags=[PINNED_TAG])
    hooks = handler(store, sessions)
    first = answer(hooks, SESSION_START)
    assert list(first) == ["system"]
    assert PINNED in first["system"]
    assert PINNED in answer(hooks, SESSION_START)["system"]
    assert RULE not in first["system"]


def test_a_session_start_without_pinned_rules_is_silence(
    store: Store, sessions: SessionMemory
) -> None:
    assert answer(handler(store, sessions), SESSION_START) == {}


# ------------------------------------------------------------------ the plugin file


def test_the_plugin_is_package_data_and_names_its_protocol() -> None:
    config_text = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    assert '"mented.agents" = ["*.js"]' in config_text
    source = plugin_source()
    assert source.startswith(PLUGIN_MARKER)
    assert plugin_protocol(source) == PLUGIN_PROTOCOL
    # It starts no process and reaches nothing but the socket.
    imports = [line for line in source.splitlines() if line.startswith("import ")]
    assert imports == [
        'import { createConnection } from "node:net"',
        'import { lstatSync } from "node:fs"',
        'import { dirname } from "node:path"',
    ]
    assert "child_process" not in source
    assert "spawn" not in source


# ------------------------------------------------------------------ installing


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("MENTED_SOCKET", str(tmp_path / "run" / "mented.sock"))
    monkeypatch.chdir(tmp_path)
    return home


def mentectl(*args: str) -> int:
    from mented_client.cli import main

    return main(list(args))


def plugin_path(home: Path) -> Path:
    return home / ".config" / "opencode" / "plugins" / "mented.js"


def test_install_writes_the_plugin_and_uninstall_takes_it_and_its_folders(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mentectl("hooks", "install", "opencode") == 0
    path = plugin_path(home)
    text = path.read_text()
    assert text.startswith(PLUGIN_MARKER)
    assert 'const AGENT = "opencode"' in text
    assert f"const FALLBACK_SOCKET = {json.dumps(str(tmp_path / 'run' / 'mented.sock'))}" in text
    assert "Installed mented's plugin for opencode" in capsys.readouterr().out
    assert mentectl("hooks", "install", "opencode") == 0
    assert "nothing changed" in capsys.readouterr().out
    assert mentectl("hooks", "status", "opencode") == 0
    assert "plugin installed, ok" in capsys.readouterr().out
    assert mentectl("hooks", "uninstall", "opencode") == 0
    out = capsys.readouterr().out
    assert "Removed mented's plugin ~/.config/opencode/plugins/mented.js." in out
    assert not (home / ".config" / "opencode").exists()


def test_install_never_writes_through_a_link_and_uninstall_leaves_it(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine.js"
    mine.write_text("export const Mine = async () => ({})\n")
    path = plugin_path(home)
    path.parent.mkdir(parents=True)
    path.symlink_to(mine)
    assert mentectl("hooks", "install", "opencode") == 1
    err = capsys.readouterr().err
    assert "is a symbolic link" in err
    assert "nothing was written" in err
    assert mentectl("hooks", "uninstall", "opencode") == 0
    assert "left as it is" in capsys.readouterr().out
    assert path.is_symlink()
    assert mine.read_text() == "export const Mine = async () => ({})\n"


def test_install_never_overwrites_a_file_mented_did_not_write(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = plugin_path(home)
    path.parent.mkdir(parents=True)
    path.write_text("// my own plugin\n")
    assert mentectl("hooks", "install", "opencode") == 1
    assert "a file mented did not write" in capsys.readouterr().err
    assert mentectl("hooks", "uninstall", "opencode") == 0
    assert path.read_text() == "// my own plugin\n"


def test_a_fifo_or_another_users_file_is_refused_without_being_read(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = plugin_path(home)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    assert mentectl("hooks", "install", "opencode") == 1  # returns: the FIFO is not opened
    assert "not a file mented wrote" in capsys.readouterr().err
    path.unlink()
    if os.geteuid() != 0:
        return
    path.write_text(plugin_source())
    os.chown(path, 65534, 65534)
    assert mentectl("hooks", "install", "opencode") == 1
    assert "belongs to uid 65534" in capsys.readouterr().err
    assert mentectl("hooks", "uninstall", "opencode") == 0
    assert path.exists()


def test_status_reports_an_older_plugin_and_install_replaces_it(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mentectl("hooks", "install", "opencode") == 0
    path = plugin_path(home)
    path.write_text(
        path.read_text().replace("const PLUGIN_PROTOCOL = 1", "const PLUGIN_PROTOCOL = 0")
    )
    capsys.readouterr()
    assert mentectl("hooks", "status", "opencode") == 1
    assert "an older version of mented's plugin (protocol 0" in capsys.readouterr().out
    assert mentectl("hooks", "install", "opencode") == 0
    assert "Updated mented's plugin" in capsys.readouterr().out
    assert plugin_protocol(path.read_text()) == PLUGIN_PROTOCOL


def test_a_project_install_stays_in_the_project(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    assert mentectl("hooks", "install", "opencode", "--project", str(project)) == 0
    assert (project / ".opencode" / "plugins" / "mented.js").read_text().startswith(PLUGIN_MARKER)
    assert ".git/info/exclude" in capsys.readouterr().out
    assert mentectl("hooks", "uninstall", "opencode", "--project", str(project)) == 0
    assert not (project / ".opencode").exists()
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / ".opencode").symlink_to(outside)
    assert mentectl("hooks", "install", "opencode", "--project", str(project)) == 1
    assert "leads outside the project" in capsys.readouterr().err
    assert list(outside.iterdir()) == []


def test_doctor_fails_a_plugin_that_speaks_another_protocol_than_the_daemon(
    home: Path, tmp_path: Path
) -> None:
    from mented_client.agents import client_of, plugin_file
    from mented_client.commands import doctor

    assert mentectl("hooks", "install", "opencode") == 0
    places = client_of("opencode").places(None)  # type: ignore[attr-defined]
    socket = tmp_path / "run" / "mented.sock"
    same = plugin_file.check_plugin(OPENCODE, places, doctor.FireTarget(socket, False, 250, 1))  # type: ignore[arg-type]
    assert [(check.link, check.state) for check in same] == [
        ("hook opencode", "ok"),
        ("fire opencode", "warn"),  # the daemon is down: nothing sent
    ]
    newer = plugin_file.check_plugin(OPENCODE, places, doctor.FireTarget(socket, False, 250, 2))  # type: ignore[arg-type]
    assert newer[0].state == "fail"
    assert "the plugin speaks protocol 1, the daemon 2" in newer[0].detail
    assert "mentectl hooks install opencode" in (newer[0].fix or "")


# ------------------------------------------------------------------ Kilo Code CLI


def test_kilo_installs_the_same_plugin_in_kilos_folder_under_its_own_name(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mentectl("hooks", "install", "kilo") == 0
    path = home / ".config" / "kilo" / "plugin" / "mented.js"
    text = path.read_text()
    assert text.startswith(PLUGIN_MARKER)
    assert 'const AGENT = "kilo"' in text  # the daemon serves its calls as Kilo's
    assert "Installed mented's plugin for Kilo Code CLI in ~/.config/kilo/plugin/mented.js." in (
        capsys.readouterr().out
    )
    assert not (home / ".config" / "opencode").exists()
    assert mentectl("hooks", "status", "kilo") == 0
    assert "plugin installed, ok" in capsys.readouterr().out
    assert mentectl("hooks", "uninstall", "kilo") == 0
    assert not (home / ".config" / "kilo").exists()


def test_kilo_project_install_is_the_projects_kilo_folder(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    assert mentectl("hooks", "install", "kilo", "--project", str(project)) == 0
    assert (project / ".kilo" / "plugin" / "mented.js").is_file()
    assert ".git/info/exclude" in capsys.readouterr().out
    assert not (home / ".config" / "kilo").exists()


def test_kilos_calls_are_stopped_once_as_opencodes(store: Store, sessions: SessionMemory) -> None:
    hooks = handler(store, sessions)
    stop = json.loads(hooks.handle("kilo", encode(BEFORE)))
    assert list(stop) == ["stop"]
    assert RULE in stop["stop"]
    assert hooks.handle("kilo", encode({**BEFORE, "call_id": "call_2"})) == b""
