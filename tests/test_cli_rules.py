"""`mentectl status` and `mentectl rule ...` against a real daemon."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import DaemonProcess


def add(daemon: DaemonProcess, action: str, text: str, *scope: str) -> str:
    out = daemon.mentectl("rule", "add", action, text, *scope, "--json").stdout
    return str(json.loads(out)["id"])


def listed(daemon: DaemonProcess, *args: str) -> list[str]:
    out = daemon.mentectl("rule", "list", *args, "--json").stdout
    return [rule["content"] for rule in json.loads(out)["rules"]]


def test_status_reports_a_running_daemon(daemon: DaemonProcess) -> None:
    result = daemon.mentectl("status")
    assert "running" in result.stdout
    assert str(daemon.socket) in result.stdout
    data = json.loads(daemon.mentectl("status", "--json").stdout)
    assert data["running"] is True
    assert data["pid"] == daemon.proc.pid  # type: ignore[union-attr]
    assert data["protocol"] == 1


def test_status_exits_1_with_one_line_reason_when_not_running(daemon: DaemonProcess) -> None:
    daemon.stop()
    result = daemon.mentectl("status", check=False)
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "not running" in result.stderr


def test_add_list_supersede_history_forget(daemon: DaemonProcess) -> None:
    first = add(daemon, "git-commit", "single line")
    add(daemon, "pr-create", "draft PRs")
    assert listed(daemon, "--action", "git-commit") == ["single line"]
    assert sorted(listed(daemon)) == ["draft PRs", "single line"]

    out = json.loads(daemon.mentectl("rule", "supersede", first, "two lines", "--json").stdout)
    assert out["superseded"] == first
    assert listed(daemon, "--action", "git-commit") == ["two lines"]
    assert listed(daemon, "--action", "git-commit", "--all") == ["two lines", "single line"]

    history = json.loads(daemon.mentectl("rule", "history", out["id"], "--json").stdout)
    assert [m["content"] for m in history["history"]] == ["single line", "two lines"]

    shown = json.loads(daemon.mentectl("rule", "show", first, "--json").stdout)
    assert shown["superseded_by"] == out["id"]

    daemon.mentectl("rule", "forget", out["id"])
    assert listed(daemon, "--action", "git-commit") == []


def test_list_with_action_is_recall_for_action(daemon: DaemonProcess, tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    add(daemon, "git-commit", "everyone")
    add(daemon, "git-commit", "codex only", "--agent", "codex")
    add(daemon, "git-commit", "app only", "--project", str(app))
    for n in range(8):
        add(daemon, "git-push", f"push rule {n}")

    as_claude = listed(daemon, "--action", "git-commit", "--agent", "claude-code", "--cwd", "/")
    assert as_claude == ["everyone"]
    in_app = listed(daemon, "--action", "git-commit", "--agent", "codex", "--cwd", str(app / "src"))
    assert in_app == ["app only", "codex only", "everyone"]
    assert len(listed(daemon, "--action", "git-push")) == 6  # k defaults to 6, as the hook
    assert listed(daemon, "--action", "git-push", "-k", "2") == ["push rule 7", "push rule 6"]


def test_errors_go_to_stderr_with_nonzero_exit(daemon: DaemonProcess) -> None:
    bad_action = daemon.mentectl("rule", "add", "git commit", "x", check=False)
    assert bad_action.returncode != 0
    assert "whitespace" in bad_action.stderr
    missing = daemon.mentectl("rule", "show", "01JZZZZZZZZZZZZZZZZZZZZZZZ", check=False)
    assert missing.returncode == 1
    assert missing.stdout == ""
    assert "not_found" in missing.stderr


def test_text_output_is_readable(daemon: DaemonProcess) -> None:
    rule_id = add(daemon, "git-commit", "single line")
    out = daemon.mentectl("rule", "list", "--action", "git-commit").stdout
    assert rule_id in out
    assert "single line" in out
    assert "git-commit" in out


def test_status_is_unhealthy_while_the_config_file_is_invalid(daemon: DaemonProcess) -> None:
    daemon.write_config("[hook]\nk = 'six'\n")
    assert daemon.mentectl("reload", check=False).returncode != 0
    result = daemon.mentectl("status", check=False)
    assert result.returncode == 1
    assert "unhealthy" in result.stderr
    assert str(daemon.config_path) in result.stderr
    assert json.loads(daemon.mentectl("status", "--json", check=False).stdout)["healthy"] is False
    daemon.write_config("[hook]\nk = 3\n")
    daemon.mentectl("reload")
    assert daemon.mentectl("status").returncode == 0


def test_socket_and_json_work_before_or_after_the_verb(daemon: DaemonProcess) -> None:
    env_free = {k: v for k, v in daemon.env.items() if k != "MENTED_SOCKET"}
    import subprocess
    import sys

    for argv in (
        ["--socket", str(daemon.socket), "--json", "status"],
        ["status", "--json", "--socket", str(daemon.socket)],
    ):
        result = subprocess.run(
            [sys.executable, "-m", "mented_client.cli", *argv],
            env=env_free,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(result.stdout)["socket"] == str(daemon.socket)
