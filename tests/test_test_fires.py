"""`doctor`'s and `setup`'s test fires are marked, and never the user's activity.

They go through the installed hook like any fire (that is what they check), so
the daemon logs them; but `status`'s "last rules" and its characters per
session, and the event stream, are what the user's agents did.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from mented.agents.pretooluse import pretooluse_event
from tests.conftest import PYTHON, DaemonProcess

SHIM = Path(__file__).resolve().parent.parent / "client" / "shim.py"
RULE = "Commit messages: a single line."
QUIET = {"MENTED_SERVICE_MANAGER": "none", "MENTED_HOOK_BUDGET_MS": "3000"}


def status(daemon: DaemonProcess) -> dict[str, object]:
    document: dict[str, object] = json.loads(daemon.mentectl("status", "--json").stdout)
    return document


def test_doctor_and_setup_fires_are_logged_as_tests_and_not_counted(
    daemon: DaemonProcess,
) -> None:
    daemon.env |= QUIET
    daemon.mentectl("hooks", "install", "claude-code")
    daemon.mentectl("rule", "add", "git-commit", RULE)
    doctor = daemon.mentectl("doctor")
    assert "1 rule for git-commit handed over" in doctor.stdout
    assert "mented is set up" in daemon.mentectl("setup", "claude-code").stdout

    before = status(daemon)
    assert before["last_hook_fire"] is None
    assert before["hook_sessions"] == 0
    assert before["hook_chars_per_session"] is None
    text = daemon.mentectl("status").stdout
    assert "last rules: none yet" in text
    assert "handed:     no rules handed to an agent since the daemon started" in text

    # Left out of `mentectl log` unless asked for.
    assert json.loads(daemon.mentectl("log", "--json").stdout)["fires"] == []
    assert "no hook fires of your agents yet" in daemon.mentectl("log").stdout
    fires = json.loads(daemon.mentectl("log", "--json", "--include-tests").stdout)["fires"]
    assert len(fires) == 2
    assert all(fire["test"] for fire in fires)
    log = daemon.mentectl("log", "--include-tests").stdout
    assert log.count("test fire (`mentectl doctor` or `setup`): not counted") == 2

    # The user's own agent, through the same hook: that one counts.
    event = pretooluse_event(
        "git commit -m 'fix: x'", cwd="/tmp", session="users-session", tool_use_id="toolu_1"
    )
    subprocess.run(
        [PYTHON, "-I", "-S", str(SHIM), "claude-code"],
        input=event,
        env={"MENTED_SOCKET": str(daemon.socket), "MENTED_HOOK_BUDGET_MS": "3000"},
        capture_output=True,
        timeout=30,
        check=True,
    )
    after = status(daemon)
    last = after["last_hook_fire"]
    assert isinstance(last, dict)
    assert last["session"] == "users-session"
    assert last["test"] is False
    assert after["hook_sessions"] == 1
    fires = json.loads(daemon.mentectl("log", "--json", "--include-tests").stdout)["fires"]
    assert [fire["test"] for fire in fires] == [False, True, True]

    # Kept on disk: a daemon killed and started again still has them, filtered.
    daemon.stop(signal.SIGKILL)
    daemon.start()
    fires = json.loads(daemon.mentectl("log", "--json").stdout)["fires"]
    assert [fire["session"] for fire in fires] == ["users-session"]
    fires = json.loads(daemon.mentectl("log", "--json", "--include-tests").stdout)["fires"]
    assert [fire["test"] for fire in fires] == [False, True, True]
    mine = daemon.mentectl(
        "log", "--agent", "claude-code", "--since", "1h", "--action", "git-commit"
    )
    assert "users-session" in mine.stdout
    assert "no hook fires match" in daemon.mentectl("log", "--session", "nobodys").stdout
