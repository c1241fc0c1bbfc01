"""A removed installation never blocks the agent: the installed command line exits 0, silent.

After `pip uninstall mented`, a deleted venv or a moved clone, the hook command the
agents run names a shim (or an interpreter) that is gone. Claude Code and Gemini CLI
read exit 2 as "block this command", Codex and Copilot CLI block on any failure: each
agent's installed command line, run the way the agent runs it (through a shell) with
the agent's own payload, must exit 0 and print nothing (Claude Code's session start
says, to the user, that the hook no longer runs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mented.agents import AGENTS
from mented.agents.in_process import InProcessAgent
from mented.agents.opencode import OpencodeAgent
from mented.agents.pretooluse import SESSION_START
from mented_client.agents import base as agents_base
from mented_client.agents import hook_file as hook_files
from mented_client.cli import main
from mented_client.commands import doctor
from mented_client.hook_settings import (
    command_argv,
    find_entries,
    installed_shim,
    real_interpreter,
)

# The shells the agents run a hook command with: Claude Code and Gemini CLI `bash -c`,
# Codex `$SHELL -lc` (any login shell the user has), Copilot CLI its `bash` field.
SHELLS = [shell for shell in ("sh", "bash", "zsh", "fish") if shutil.which(shell)]
# The agents that run a command line; opencode loads mented's plugin, which names no
# file of mented's installation (tests/test_opencode_plugin.py: no daemon is silence).
# opencode and pi run no command line: mented's plugin or extension is in their process.
COMMAND_AGENTS = sorted(
    name for name, a in AGENTS.items() if not isinstance(a, (OpencodeAgent, InProcessAgent))
)


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory, and an installation of mented that the test can take away.

    The shim is a copy in `tmp_path/site/mented_client/`, the interpreter a link to
    the real one in `tmp_path/bin/`: removing either is what `pip uninstall` or a
    deleted venv does to the files the installed command line names.
    """
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME", "QWEN_HOME"):
        monkeypatch.delenv(name, raising=False)
    # No daemon at this socket: the shim's own answer is silence, so any output is the
    # command line's.
    monkeypatch.setenv("MENTED_SOCKET", str(tmp_path / "no-daemon.sock"))
    monkeypatch.chdir(tmp_path)
    shim = tmp_path / "site" / "mented_client" / "shim.py"
    shim.parent.mkdir(parents=True)
    shutil.copy(installed_shim(), shim)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").symlink_to(real_interpreter())
    monkeypatch.setattr(agents_base, "installed_shim", lambda: shim)  # the command line's
    return tmp_path


def payload(agent_name: str, event: str, cwd: Path) -> bytes:
    """What the agent writes on the hook's stdin for `event`."""
    agent = AGENTS[agent_name]
    if event == agent.event_name:
        return agent.sample_event("git commit -m 'fix: x'", cwd=str(cwd), session="s-gone")
    return json.dumps(
        {"session_id": "s-gone", "cwd": str(cwd), "hook_event_name": event, "source": "startup"}
    ).encode()


def installed_commands(agent_name: str, root: Path) -> list[tuple[str, str]]:
    """(event, command line) of each entry `hooks install` wrote for the agent."""
    python = str(root / "bin" / "python3")
    assert main(["hooks", "install", agent_name, "--python", python]) == 0
    agent = AGENTS[agent_name]
    path = agent.settings_path()
    if agent.hook_file:  # Cline's hook file: its last line is the command line
        entries = hook_files.entries_in(agent, path.read_text())
    else:
        entries = find_entries(path.read_text(), path, None, agent.layout)
    assert entries
    return sorted({(entry.event, entry.command) for entry in entries})


def run(shell: str, command: str, stdin: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [shell, "-c", command],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env={**os.environ, "HOME": str(cwd / "home")},
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("agent_name", COMMAND_AGENTS)
@pytest.mark.parametrize("gone", ["shim", "interpreter"])
def test_a_removed_installation_exits_0_and_prints_nothing(
    install: Path, agent_name: str, gone: str, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = installed_commands(agent_name, install)
    capsys.readouterr()
    for event, command in commands:
        for shell in SHELLS:
            done = run(shell, command, payload(agent_name, event, install), install)
            assert (done.returncode, done.stdout, done.stderr) == (0, b"", b""), (shell, event)
    run_words = command_argv(commands[0][1])
    assert run_words is not None
    if gone == "shim":
        Path(run_words.argv[3]).unlink()
    else:
        Path(run_words.argv[0]).unlink()
    for event, command in commands:
        for shell in SHELLS:
            done = run(shell, command, payload(agent_name, event, install), install)
            assert done.returncode == 0, (shell, event, done.stderr)
            assert done.stderr == b"", (shell, event)
            if event == SESSION_START and AGENTS[agent_name].user_notices:
                notice = json.loads(done.stdout)["systemMessage"]
                assert notice.startswith("mented: the hook no longer runs")
                assert f"mentectl setup {agent_name}" in notice
            else:
                assert done.stdout == b"", (shell, event)


def test_doctor_says_the_installed_command_no_longer_exists(
    install: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (_, command), *_ = installed_commands("claude-code", install)
    capsys.readouterr()
    shim = command_argv(command)
    assert shim is not None
    Path(shim.argv[3]).unlink()
    checks = doctor.check_hooks(
        doctor.FireTarget(install / "no-daemon.sock", daemon_up=False, budget_ms=250)
    )
    failed = [check for check in checks if check.state == "fail"]
    assert failed
    assert all(f"shim {shim.argv[3]} is missing" in check.detail for check in failed)
    assert all(check.fix == "`mentectl hooks install claude-code`" for check in failed)
    # The command that is gone is not run: no fire check for it.
    assert not [check for check in checks if check.link.startswith("fire ")]


def test_an_older_plain_install_is_found_and_replaced(
    install: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plain `python -I -S shim.py AGENT SOCKET` of earlier installs (Copilot's with
    `|| true`): uninstall finds it, and install rewrites it into the guarded form."""
    for agent_name, tail in (("claude-code", ""), ("copilot-cli", " || true")):
        agent = AGENTS[agent_name]
        (_, command), *_ = installed_commands(agent_name, install)
        words = command_argv(command)
        assert words is not None
        assert words.guarded
        path = agent.settings_path()
        text = path.read_text()
        plain = " ".join(words.argv) + tail
        path.write_text(text.replace(json.dumps(command)[1:-1], plain))
        entries = find_entries(path.read_text(), path, None, agent.layout)
        assert entries
        assert any(entry.command == plain for entry in entries)
        assert not command_argv(plain).guarded  # type: ignore[union-attr]
        checks = doctor.check_hooks(
            doctor.FireTarget(install / "no-daemon.sock", daemon_up=False, budget_ms=250)
        )
        older = [check for check in checks if "form of older installs" in check.detail]
        assert older
        assert all(check.state == "warn" for check in older)
        assert all(
            check.fix == f"`mentectl hooks install {agent_name}` rewrites it" for check in older
        )
        assert main(["hooks", "install", agent_name]) == 0
        after = find_entries(path.read_text(), path, None, agent.layout)
        assert all(command_argv(entry.command).guarded for entry in after)  # type: ignore[union-attr]
        assert main(["hooks", "uninstall", agent_name]) == 0
        assert not path.exists()
    capsys.readouterr()


def test_doctor_fires_the_users_own_install_with_another_python(
    install: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hooks install --python X` in the user's own file is this installation's command
    line (the user chose X): doctor fires it. The same entry in a project's file is not."""
    installed_commands("claude-code", install)
    capsys.readouterr()
    target = doctor.FireTarget(install / "no-daemon.sock", daemon_up=False, budget_ms=5000)
    fires = [check for check in doctor.check_hooks(target) if check.link == "fire claude-code"]
    assert [check.state for check in fires] == ["warn"]
    assert "the daemon is down" in fires[0].detail

    project = install / "cloned"
    (project / ".claude").mkdir(parents=True)
    user_file = AGENTS["claude-code"].settings_path()
    (project / ".claude" / "settings.json").write_text(user_file.read_text())
    user_file.unlink()
    os.chdir(project)
    checks = doctor.check_hooks(target)
    assert not [check for check in checks if check.link.startswith("fire ")]
    assert any("so doctor does not run it" in check.detail for check in checks)
