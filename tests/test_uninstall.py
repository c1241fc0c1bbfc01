"""`mentectl uninstall`: what `setup` put in the agents' files goes, and nothing of the user's.

Run as a user runs it (a subprocess, a private HOME), against a real daemon.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mented.agents import codex
from mented_client import codex_trust
from mented_client.errors import CommandError
from tests.conftest import DaemonProcess

USER_SETTINGS = '{\n  "theme": "dark"\n}\n'


def files_under(home: Path) -> list[str]:
    """Every path under `home`, but mented's own data, state and config."""
    own = (".local", ".config")
    return sorted(
        str(p.relative_to(home)) for p in home.rglob("*") if p.relative_to(home).parts[0] not in own
    )


def contents(home: Path) -> dict[str, bytes | None]:
    """`files_under`, with each file's bytes (None for a directory)."""
    return {p: None if (home / p).is_dir() else (home / p).read_bytes() for p in files_under(home)}


def prepare(daemon: DaemonProcess) -> Path:
    """The daemon's environment as a user's: Codex in CODEX_HOME, no service manager."""
    home = Path(daemon.env["HOME"])
    daemon.env |= {"CODEX_HOME": str(home / "codexhome"), "MENTED_SERVICE_MANAGER": "none"}
    return home


def set_up(daemon: DaemonProcess, agent: str) -> None:
    """What `mentectl setup AGENT` writes into the agent's files."""
    daemon.mentectl("hooks", "install", agent)
    daemon.mentectl("mcp", "install", agent)


def test_uninstall_one_agent_removes_its_hook_and_server_and_nothing_else(
    daemon: DaemonProcess,
) -> None:
    home = prepare(daemon)
    before = files_under(home)
    set_up(daemon, "codex")
    codex_files = contents(home)
    set_up(daemon, "gemini-cli")
    assert (home / ".gemini" / "settings.json").is_file()

    result = daemon.mentectl("uninstall", "gemini-cli")
    assert "Removed 4 mented hook entries from ~/.gemini/settings.json" in result.stdout
    assert "~/.gemini was left empty: removed too" in result.stdout
    assert "Still set up: codex; the daemon keeps running for them." in result.stdout
    assert "Your rules are kept in" in result.stdout
    # Codex's files are as they were, byte for byte; nothing of Gemini's is left.
    assert contents(home) == codex_files
    assert daemon.proc is not None
    assert daemon.proc.poll() is None  # still running: other agents may use it

    result = daemon.mentectl("uninstall", "codex")
    assert "No agent uses mented any more" in result.stdout
    assert "`mentectl uninstall --all`" in result.stdout
    assert files_under(home) == before  # no 0-byte config.toml, no empty codexhome/


def test_uninstall_keeps_the_users_settings_and_drops_the_redundant_backup(
    daemon: DaemonProcess,
) -> None:
    home = prepare(daemon)
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    set_up(daemon, "gemini-cli")
    assert (settings.parent / "settings.json.mented-bak").exists()

    daemon.mentectl("uninstall", "gemini-cli")
    assert settings.read_text() == USER_SETTINGS
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


def test_uninstall_all_removes_every_agent_and_stops_the_daemon(daemon: DaemonProcess) -> None:
    home = prepare(daemon)
    before = files_under(home)
    for agent in ("codex", "copilot-cli", "cursor", "qwen-code"):
        set_up(daemon, agent)
    daemon.mentectl("rule", "add", "git-commit", "Sign every commit")

    result = daemon.mentectl("--json", "uninstall", "--all")
    report = json.loads(result.stdout)
    assert report["ok"]
    assert any("stopped mented" in line for line in report["stopped"])
    assert daemon.proc is not None
    assert daemon.proc.wait(timeout=15) == 0
    assert files_under(home) == before
    # The rules stay: a new daemon on the same data has them.
    daemon.proc = None
    daemon.start()
    assert "Sign every commit" in daemon.mentectl("rule", "list").stdout


def test_uninstall_needs_an_agent_or_all(daemon: DaemonProcess) -> None:
    prepare(daemon)
    result = daemon.mentectl("uninstall", check=False)
    assert result.returncode == 2
    assert "name an agent (or several), or pass --all" in result.stderr
    result = daemon.mentectl("uninstall", "vim", check=False)
    assert result.returncode == 2
    assert "invalid choice: 'vim'" in result.stderr


USER_CODEX_CONFIG = (
    '# my Codex settings\nmodel = "o4-mini"\n\n[mcp_servers.other]\ncommand = "other"\n'
)
USER_CODEX_HOOK = {"type": "command", "command": "echo mine", "timeout": 5}


def test_uninstall_all_says_what_it_stopped_and_takes_out_codexs_trust_in_mented_only(
    daemon: DaemonProcess,
) -> None:
    home = prepare(daemon)
    codex_home = home / "codexhome"
    codex_home.mkdir()
    hooks_json = codex_home / "hooks.json"
    hooks_json.write_text(
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [USER_CODEX_HOOK]}]}})
    )
    # The user trusted their own hook in Codex, then set mented up and trusted its hooks.
    own = codex.trust_config_toml(hooks_json)
    config = codex_home / "config.toml"
    config.write_text(USER_CODEX_CONFIG + own)
    daemon.mentectl("hooks", "install", "codex")
    ours = "".join(
        f'\n[hooks.state."{key}"]\ntrusted_hash = "{value}"\n'
        for key, value in codex.trust_states(hooks_json).items()
        if f'"{key}"' not in own
    )
    assert ours.count("[hooks.state.") == 3  # PreToolUse, SessionStart and PostToolUse
    config.write_text(USER_CODEX_CONFIG + own + ours)
    assert "trusted" in daemon.mentectl("hooks", "status", "codex").stdout
    daemon.write_config("[hook]\nk = 6\n")
    log = Path(daemon.env["XDG_STATE_HOME"]) / "mented" / "mented.log"
    log.parent.mkdir(parents=True)
    log.write_text("")
    pid = daemon.wait_ready().pid

    result = daemon.mentectl("uninstall", "--all")
    assert config.read_text() == USER_CODEX_CONFIG + own  # byte for byte, but mented's
    out = result.stdout
    assert "Removed Codex's trust entries for mented's hooks from ~/codexhome/config.toml." in out
    assert f"\nstopped mented (pid {pid})\n" in out
    assert "StatusReply" not in out
    assert max(len(line) for line in out.splitlines()) < 200
    assert out.rstrip().endswith(
        f"Your rules are kept in {daemon.data_dir}, your config file in {daemon.config_path} "
        "and the log in ~/.local/state/mented/mented.log; delete them by hand if you want "
        "them gone too."
    )


def test_codexs_trust_is_taken_out_only_where_it_can_be_line_by_line() -> None:
    key = "/h/.codex/hooks.json:pre_tool_use:1:0"
    literal = f"model = 1\n\n[hooks.state.'{key}']\ntrusted_hash = 'sha256:a'\n# mine\n[x]\ny = 2\n"
    assert codex_trust.without_trust(literal, {key}, "config.toml") == (
        "model = 1\n# mine\n[x]\ny = 2\n",
        1,
    )
    other = 'model = 1\n[hooks.state."/h/.codex/hooks.json:pre_tool_use:0:0"]\ntrusted_hash = "b"\n'
    assert codex_trust.without_trust(other, {key}, "config.toml") == (other, 0)
    inline = f'[hooks.state]\n"{key}" = {{ trusted_hash = "sha256:a" }}\n'
    with pytest.raises(CommandError, match=r"remove those \[hooks\.state\] entries by hand"):
        codex_trust.without_trust(inline, {key}, "config.toml")
    with pytest.raises(CommandError, match="is not valid TOML"):
        codex_trust.without_trust("[broken", {key}, "config.toml")
