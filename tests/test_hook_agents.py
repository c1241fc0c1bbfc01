"""Crush, Factory Droid, Augment Auggie, Cline CLI, Kiro CLI: built from sources and documents.

None of these was run against the real binary here: the payloads are the ones
their sources or documents give (tests/data/hook_agents/, whose README says
where each came from). Each goes through mented as the daemon answers it, and
each answer is checked in the agent's own shape: a deny where a deny is safe,
never an approval, and for Cline never a `cancel` (it ends the user's task).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mented.agents import AGENTS, ToolCall
from mented.memory import MemoryType
from mented.sessions import SessionMemory
from mented.store import Store
from mented_client.agents import hook_file as hook_files
from mented_client.cli import main
from tests.test_more_agents import handler

DATA = Path(__file__).parent / "data" / "hook_agents"
RULE = "commit messages: single line, conventional prefix, no emojis"
NEW = ("crush", "factory-droid", "augment-auggie", "cline-cli", "kiro-cli")


def recorded(agent: str) -> list[dict[str, Any]]:
    payloads: list[dict[str, Any]] = json.loads((DATA / f"{agent}.json").read_text())["payloads"]
    return payloads


def first_commit(agent: str) -> bytes:
    """The agent's first recorded payload: a `git commit` it is about to run."""
    return json.dumps(recorded(agent)[0]["event"]).encode()


# ------------------------------------------------------------------ decoding


@pytest.mark.parametrize("agent", NEW)
def test_recorded_payloads_decode_to_the_call_they_make(agent: str) -> None:
    for payload in recorded(agent):
        call = AGENTS[agent].decode(json.dumps(payload["event"]).encode())
        expect = payload["expect"]
        if expect is None:
            assert call is None, payload["event"]
            continue
        assert isinstance(call, ToolCall), payload["event"]
        assert call.command == expect.get("command", "")
        assert list(call.edited) == expect.get("edited", [])
        assert call.mcp_tool == expect.get("mcp_tool", "")
        assert call.session == expect["session"]
        if "cwd" in expect:
            assert call.cwd == expect["cwd"]


@pytest.mark.parametrize("agent", NEW)
@pytest.mark.parametrize(
    "junk",
    [b"", b"not json", b"[1, 2]", b'{"tool_name": 5}', b"[" * 100_000, b'{"tool_call": "x"}'],
)
def test_hostile_payloads_decode_to_nothing(agent: str, junk: bytes) -> None:
    assert AGENTS[agent].decode(junk) is None


# ------------------------------------------------------------------ answering


@pytest.fixture
def store(store: Store) -> Store:
    """The conftest's empty store, with the rule."""
    store.store(RULE, memory_type=MemoryType.PROCEDURAL, tags=["trigger:git-commit"])
    return store


def never_approves(answer: dict[str, Any]) -> None:
    text = json.dumps(answer)
    assert '"allow"' not in text and '"approve"' not in text


@pytest.mark.parametrize("agent", ["crush", "factory-droid", "augment-auggie"])
def test_claude_shaped_agents_stop_the_first_commit_once_then_point(
    agent: str, store: Store, sessions: SessionMemory
) -> None:
    hooks = handler(store, sessions)
    stop = json.loads(hooks.handle(agent, first_commit(agent)))
    never_approves(stop)
    specific = stop["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    assert RULE in specific["permissionDecisionReason"]
    assert hooks.handle(agent, first_commit(agent)) == b""  # the retry runs, untouched
    later = recorded(agent)[0]["event"]
    later = {**later, "tool_input": {**later["tool_input"], "command": "git commit -m 'fix: y'"}}
    pointer = json.loads(hooks.handle(agent, json.dumps(later).encode()))
    never_approves(pointer)
    assert "permissionDecision" not in pointer["hookSpecificOutput"]
    assert RULE not in pointer["hookSpecificOutput"]["additionalContext"]


def test_cline_never_cancels_its_task_the_rules_go_as_context(
    store: Store, sessions: SessionMemory
) -> None:
    hooks = handler(store, sessions)  # delivery "before": a stop, for any other agent
    first = json.loads(hooks.handle("cline-cli", first_commit("cline-cli")))
    assert set(first) == {"contextModification"}  # no cancel, no errorMessage
    assert RULE in first["contextModification"]
    # Handed over in this task: a pointer next time, still never a cancel.
    again = json.loads(hooks.handle("cline-cli", first_commit("cline-cli")))
    assert set(again) == {"contextModification"}
    assert RULE not in again["contextModification"]
    record = hooks.recent_fires(2)[1]
    assert record.mode == "context"


def test_cline_a_failing_check_is_told_never_cancelled(
    store: Store, sessions: SessionMemory
) -> None:
    store.store("short subjects", tags=["trigger:git-commit"], checks=["subject max 5"])
    hooks = handler(store, sessions)
    answer = json.loads(hooks.handle("cline-cli", first_commit("cline-cli")))
    assert set(answer) == {"contextModification"}
    assert "subject" in answer["contextModification"]
    assert hooks.recent_fires(1)[0].mode == "context"  # told: the command was not stopped
    # Any other agent would have been stopped by the same failing check.
    claude = hooks.handle("factory-droid", first_commit("factory-droid"))
    assert json.loads(claude)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_cline_render_deny_is_context_too() -> None:
    assert json.loads(AGENTS["cline-cli"].render_deny("R")) == {"contextModification": "R"}


# ------------------------------------------------------------------ installing


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CRUSH_GLOBAL_CONFIG", "XDG_CONFIG_HOME", "MENTED_SOCKET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return home


def mentectl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


CRUSH_USER = """{
  "$schema": "https://charm.land/crush.json",
  "options": {"tui": {"compact_mode": true}},
  "hooks": {
    "PreToolUse": [
      {"name": "no-rm-rf", "matcher": "^bash$", "command": "./hooks/no-rm-rf.sh"}
    ]
  }
}
"""


def test_crush_install_is_a_flat_anchored_entry_and_uninstall_gives_the_file_back(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".config" / "crush" / "crush.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(CRUSH_USER)
    assert mentectl(capsys, "hooks", "install", "crush")[0] == 0
    doc = json.loads(settings.read_text())
    assert doc["options"] == {"tui": {"compact_mode": True}}
    user, ours = doc["hooks"]["PreToolUse"]
    assert user["name"] == "no-rm-rf"
    assert ours["name"] == "mented" and ours["timeout"] == 5
    assert ours["matcher"].startswith("^(?:") and ours["matcher"].endswith(")$")
    assert "hooks" not in ours  # flat: the entry is the list item itself
    status, out, _ = mentectl(capsys, "hooks", "status", "crush")
    assert status == 0, out
    assert "PreToolUse installed, ok" in out
    assert mentectl(capsys, "hooks", "uninstall", "crush")[0] == 0
    assert settings.read_text() == CRUSH_USER


def test_crush_follows_its_global_config_variable(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CRUSH_GLOBAL_CONFIG", str(tmp_path / "elsewhere"))
    assert mentectl(capsys, "hooks", "install", "crush")[0] == 0
    assert (tmp_path / "elsewhere" / "crush.json").is_file()
    assert not (home / ".config").exists()


@pytest.mark.parametrize("content", [b"{ not json", b'{"hooks": [1, 2]}', b"\xff\xfe{}"])
def test_a_crush_file_that_is_not_usable_is_left_as_it_is(
    home: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    settings = home / ".config" / "crush" / "crush.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(content)
    status, _, err = mentectl(capsys, "hooks", "install", "crush")
    assert status != 0
    assert "crush.json" in err
    assert settings.read_bytes() == content


def test_a_huge_crush_file_is_refused_without_reading_it_all(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".config" / "crush" / "crush.json"
    settings.parent.mkdir(parents=True)
    with settings.open("wb") as handle:
        handle.truncate(64 * 1024 * 1024)  # sparse: 64 MiB of NULs
    status, _, err = mentectl(capsys, "hooks", "install", "crush")
    assert status != 0
    assert "too large" in err
    assert settings.stat().st_size == 64 * 1024 * 1024


def test_a_symlinked_crush_file_stays_a_link_and_keeps_the_users_settings(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dotfiles = tmp_path / "dotfiles" / "crush.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(CRUSH_USER)
    settings = home / ".config" / "crush" / "crush.json"
    settings.parent.mkdir(parents=True)
    settings.symlink_to(dotfiles)
    assert mentectl(capsys, "hooks", "install", "crush")[0] == 0
    assert settings.is_symlink()
    assert json.loads(dotfiles.read_text())["options"] == {"tui": {"compact_mode": True}}
    assert mentectl(capsys, "hooks", "uninstall", "crush")[0] == 0
    assert settings.is_symlink() and dotfiles.read_text() == CRUSH_USER


def test_a_project_crush_file_that_leads_outside_the_project_is_refused(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (project / "crush.json").symlink_to(outside)
    status, _, err = mentectl(capsys, "hooks", "install", "crush", "--project", str(project))
    assert status != 0
    assert "leads outside the project" in err
    assert outside.read_text() == "{}"


def test_droid_installs_in_hooks_json_and_round_trips(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mentectl(capsys, "hooks", "install", "factory-droid")[0] == 0
    hooks = home / ".factory" / "hooks.json"
    doc = json.loads(hooks.read_text())
    (group,) = doc["hooks"]["PreToolUse"]
    assert "Execute" in group["matcher"]
    assert group["hooks"][0]["timeout"] == 5  # seconds
    assert mentectl(capsys, "hooks", "uninstall", "factory-droid")[0] == 0
    assert not (home / ".factory").exists()  # it held nothing else: all gone


def test_droid_keeps_to_settings_json_when_the_users_hooks_live_there(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new hooks.json would turn off the hooks Droid reads from settings.json."""
    settings = home / ".factory" / "settings.json"
    settings.parent.mkdir()
    original = (
        '{\n  "model": "claude-opus",\n  "hooks": {"Stop": [{"hooks": '
        '[{"type": "command", "command": "notify-send done"}]}]}\n}\n'
    )
    settings.write_text(original)
    assert mentectl(capsys, "hooks", "install", "factory-droid")[0] == 0
    assert not (home / ".factory" / "hooks.json").exists()
    doc = json.loads(settings.read_text())
    assert set(doc["hooks"]) >= {"Stop", "PreToolUse"}
    assert mentectl(capsys, "hooks", "uninstall", "factory-droid")[0] == 0
    assert settings.read_text() == original


def test_auggie_timeout_is_milliseconds_and_project_install_is_the_local_file(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    (project / ".augment").mkdir(parents=True)
    shared = project / ".augment" / "settings.json"
    shared.write_text('{"hooks": {}}\n')
    assert mentectl(capsys, "hooks", "install", "augment-auggie", "--project", str(project))[0] == 0
    local = json.loads((project / ".augment" / "settings.local.json").read_text())
    (group,) = local["hooks"]["PreToolUse"]
    assert group["matcher"].split("|")[0] == "launch-process"
    assert group["hooks"][0]["timeout"] == 5000
    assert shared.read_text() == '{"hooks": {}}\n'  # the team's file is not touched
    assert (
        mentectl(capsys, "hooks", "uninstall", "augment-auggie", "--project", str(project))[0] == 0
    )
    assert not (project / ".augment" / "settings.local.json").exists()


def test_cline_hook_file_runs_the_shim_command_line_and_uninstall_removes_only_it(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = mentectl(capsys, "hooks", "install", "cline-cli")
    assert status == 0, out
    hook = home / "Documents" / "Cline" / "Hooks" / "PreToolUse"
    text = hook.read_text()
    assert text.startswith("#!/bin/sh\n")
    assert os.access(hook, os.X_OK)
    (entry,) = hook_files.entries_in(AGENTS["cline-cli"], text)
    from mented_client.commands.hooks import hook_command

    assert entry.command == hook_command(AGENTS["cline-cli"])  # the real interpreter, guarded
    assert "/shims/" not in entry.command
    status, out, _ = mentectl(capsys, "hooks", "status", "cline-cli")
    assert status == 0 and "PreToolUse installed, ok" in out
    assert mentectl(capsys, "hooks", "install", "cline-cli")[1].startswith("The mented hook")
    assert mentectl(capsys, "hooks", "uninstall", "cline-cli")[0] == 0
    assert not (home / "Documents" / "Cline").exists()  # what the install created goes
    assert (home / "Documents").is_dir()  # the user's own folder stays


def test_cline_hook_file_with_the_daemon_gone_says_nothing_and_exits_0(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The installed file, run as Cline runs it (its #! line, the payload on stdin)."""
    socket = tmp_path / "no-daemon.sock"
    assert mentectl(capsys, "--socket", str(socket), "hooks", "install", "cline-cli")[0] == 0
    hook = home / "Documents" / "Cline" / "Hooks" / "PreToolUse"
    done = subprocess.run(
        [str(hook)], input=first_commit("cline-cli"), capture_output=True, check=False
    )
    assert (done.returncode, done.stdout) == (0, b"")


def test_a_users_cline_hook_is_never_replaced(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hook = home / "Documents" / "Cline" / "Hooks" / "PreToolUse"
    hook.parent.mkdir(parents=True)
    mine = "#!/usr/bin/env bash\necho '{}'\n"
    hook.write_text(mine)
    status, _, err = mentectl(capsys, "hooks", "install", "cline-cli")
    assert status != 0
    assert "hook of yours" in err and "PreToolUse.sh" in err
    assert hook.read_text() == mine
    assert mentectl(capsys, "hooks", "uninstall", "cline-cli")[0] == 0
    assert hook.read_text() == mine


def test_a_symlinked_cline_hook_is_not_followed(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "target"
    target.write_text("precious\n")
    hook = home / "Documents" / "Cline" / "Hooks" / "PreToolUse"
    hook.parent.mkdir(parents=True)
    hook.symlink_to(target)
    status, _, err = mentectl(capsys, "hooks", "install", "cline-cli")
    assert status != 0
    assert "symbolic link" in err
    assert target.read_text() == "precious\n" and hook.is_symlink()


def test_a_fifo_in_place_of_the_cline_hook_does_not_hang(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hook = home / "Documents" / "Cline" / "Hooks" / "PreToolUse"
    hook.parent.mkdir(parents=True)
    os.mkfifo(hook)
    status, _, err = mentectl(capsys, "hooks", "install", "cline-cli")
    assert status != 0
    assert "not a regular file" in err


@pytest.mark.parametrize("agent", NEW)
def test_mcp_install_says_plainly_it_is_not_done_for_these_agents(
    agent: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = mentectl(capsys, "mcp", "install", agent)
    assert status != 0
    assert "does not register its MCP server" in err
    assert not list(home.iterdir())


def test_doctor_checks_and_fires_each_agents_installed_hook(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mented_client.commands import doctor

    socket = tmp_path / "no-daemon.sock"
    for agent in NEW:
        assert mentectl(capsys, "--socket", str(socket), "hooks", "install", agent)[0] == 0
    # A generous budget: the fire's timing is a benchmark, not this test's point.
    target = doctor.FireTarget(socket, daemon_up=False, budget_ms=60_000)
    checks = {check.link: check for check in doctor.check_hooks(target)}
    for agent in NEW:
        installed = [c for link, c in checks.items() if link.startswith(f"hook {agent} ")]
        assert installed and all(c.state == "ok" for c in installed), installed
        # Fired with the agent's own sample event: exit 0, nothing on stderr, silent.
        fire = checks[f"fire {agent}"]
        assert (fire.state, "the daemon is down" in fire.detail) == ("warn", True), fire


def test_each_agents_installed_command_hands_its_first_commit_the_rules(
    daemon: Any,
) -> None:
    """One run of the installed hook per agent, through the shim to a live daemon."""
    daemon.mentectl("rule", "add", "git-commit", RULE)
    for agent in NEW:
        daemon.mentectl("hooks", "install", agent)
    home = Path(daemon.env["HOME"])
    env = daemon.env | {"MENTED_HOOK_BUDGET_MS": "5000"}  # a loaded machine: not a late answer
    crush = json.loads((home / ".config" / "crush" / "crush.json").read_text())
    commands = {
        "crush": crush["hooks"]["PreToolUse"][0]["command"],
        "factory-droid": json.loads((home / ".factory" / "hooks.json").read_text())["hooks"][
            "PreToolUse"
        ][0]["hooks"][0]["command"],
        "augment-auggie": json.loads((home / ".augment" / "settings.json").read_text())["hooks"][
            "PreToolUse"
        ][0]["hooks"][0]["command"],
    }
    for agent, command in commands.items():
        done = subprocess.run(  # as the agents run it: through a shell
            ["/bin/sh", "-c", command],
            input=first_commit(agent),
            env=env,
            capture_output=True,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, b""), agent
        specific = json.loads(done.stdout)["hookSpecificOutput"]
        assert specific["permissionDecision"] == "deny", agent
        assert RULE in specific["permissionDecisionReason"]
    # Kiro CLI: the rules on stderr, exit 2 (its block); the retry, from the same parent
    # process (this one: the line `exec`s the shim), runs: the daemon's session is that process.
    kiro = json.loads((home / ".kiro" / "agents" / "mented.json").read_text())
    kiro_command = kiro["hooks"]["preToolUse"][0]["command"]
    for status in (2, 0):
        done = subprocess.run(  # as Kiro runs it: `bash -c LINE`
            ["/bin/sh", "-c", kiro_command],
            input=first_commit("kiro-cli"),
            env=env,
            capture_output=True,
            check=False,
        )
        assert (done.returncode, done.stdout) == (status, b""), done.stderr
        assert (RULE in done.stderr.decode()) == (status == 2)
    hook = home / "Documents" / "Cline" / "Hooks" / "PreToolUse"
    done = subprocess.run(  # as Cline runs it: the file itself, by its #! line
        [str(hook)],
        input=first_commit("cline-cli"),
        env=env,
        capture_output=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    answer = json.loads(done.stdout)
    assert set(answer) == {"contextModification"}
    assert RULE in answer["contextModification"]


def test_mcp_status_and_doctor_say_the_server_is_not_offered_not_missing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mented_client.commands import doctor

    status = main(["mcp", "status"])
    out, _ = capsys.readouterr()
    assert status in (0, 1)
    for agent in NEW:
        (line,) = [line for line in out.splitlines() if line.startswith(f"{agent}:")]
        assert "does not register its MCP server here" in line
        assert "mcp install" not in line  # no step offered that would only fail
    checks = {check.link: check for check in doctor.check_mcp()}
    for agent in NEW:
        assert checks[f"mcp {agent}"].state == "skip"
        assert checks[f"mcp {agent}"].fix is None


def test_cline_project_install_writes_the_workspace_hook_and_says_to_keep_it_out_of_git(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    status, out, _ = mentectl(capsys, "hooks", "install", "cline-cli", "--project", str(project))
    assert status == 0
    hook = project / ".clinerules" / "hooks" / "PreToolUse"
    assert hook_files.is_ours(hook.read_text())
    assert ".git/info/exclude" in out
    assert mentectl(capsys, "hooks", "uninstall", "cline-cli", "--project", str(project))[0] == 0
    assert not (project / ".clinerules").exists()
    assert not (home / "Documents").exists()  # the user's folder was never touched


def test_a_clinerules_folder_that_leads_outside_the_project_is_refused(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / ".clinerules").symlink_to(elsewhere)
    status, _, err = mentectl(capsys, "hooks", "install", "cline-cli", "--project", str(project))
    assert status != 0
    assert "leads outside the project" in err
    assert not list(elsewhere.iterdir())


def test_a_users_own_linked_cline_hook_is_not_mented_and_not_a_failure(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dotfiles = tmp_path / "dotfiles-hook"
    dotfiles.write_text("#!/bin/sh\necho '{}'\n")
    hook = home / "Documents" / "Cline" / "Hooks" / "PreToolUse"
    hook.parent.mkdir(parents=True)
    hook.symlink_to(dotfiles)
    status, out, _ = mentectl(capsys, "hooks", "status", "cline-cli")
    assert status == 0
    assert "not installed" in out


# Where a project install of the two agents added last writes: a project's clone
# chooses what stands there.
PROJECT_FILES = {"kiro-cli": ".kiro/agents/mented.json", "kilo": ".kilo/plugin/mented.js"}


@pytest.mark.parametrize("agent", sorted(PROJECT_FILES))
@pytest.mark.parametrize(
    "hostile", ["folder linked outside", "/dev/zero", "named pipe", "8 GiB file"]
)
def test_a_hostile_file_where_a_project_install_writes_is_refused(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str, hostile: str
) -> None:
    project = tmp_path / "repo"
    target = project / PROJECT_FILES[agent]
    target.parent.parent.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    if hostile == "folder linked outside":
        target.parent.symlink_to(outside)
    else:
        target.parent.mkdir()
        if hostile == "/dev/zero":
            target.symlink_to("/dev/zero")
        elif hostile == "named pipe":
            os.mkfifo(target)
        else:
            with target.open("wb") as sparse:
                sparse.truncate(8 << 30)
    status, out, err = mentectl(capsys, "hooks", "install", agent, "--project", str(project))
    assert status != 0
    assert out == ""
    words = {
        "folder linked outside": f"leads outside the project, to {outside / target.name}",
        "/dev/zero": "leads outside the project, to /dev/zero",
        "named pipe": "named pipe",
        "8 GiB file": "8589934592 bytes, over the",
    }
    assert words[hostile] in err
    assert not list(outside.iterdir())  # nothing written through the link
    if hostile == "named pipe":
        assert target.is_fifo()
    elif hostile == "8 GiB file":
        assert target.stat().st_size == 8 << 30
