"""Degraded states (`mented.problems`): every fallback shows in `status` and `doctor`.

The real daemon on a really full disk (a 2 MiB tmpfs filled up) and with a config
file that was invalid when it started; the record itself on its own.
"""

from __future__ import annotations

import errno
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mented.agents.pretooluse import pretooluse_event
from mented.problems import CONFIG_DEFAULTS, SESSION_MEMORY, Problems
from tests.conftest import PYTHON, DaemonProcess

REPO = Path(__file__).resolve().parent.parent
SHIM = REPO / "client" / "shim.py"
RULE = "Commit messages: a single line."
# Doctor's links with no service manager here: a skipped service must not fail doctor.
QUIET = {"MENTED_SERVICE_MANAGER": "none", "MENTED_HOOK_BUDGET_MS": "3000"}


@pytest.fixture
def process(short_tmp: Path) -> Iterator[DaemonProcess]:
    """A daemon not started yet; stopped afterwards if a test left it running."""
    daemon = DaemonProcess(short_tmp)
    daemon.env |= QUIET
    try:
        yield daemon
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait()


def fire(daemon: DaemonProcess, session: str, n: int = 0) -> dict[str, object]:
    """The shim as Claude Code runs it, before a `git commit`: its hookSpecificOutput."""
    event = pretooluse_event(
        "git commit -m 'fix: x'", cwd="/tmp", session=session, tool_use_id=f"toolu_{session}_{n}"
    )
    result = subprocess.run(
        [PYTHON, "-I", "-S", str(SHIM), "claude-code"],
        input=event,
        env={"MENTED_SOCKET": str(daemon.socket), "MENTED_HOOK_BUDGET_MS": "3000"},
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0
    assert result.stderr == b""
    specific: dict[str, object] = json.loads(result.stdout)["hookSpecificOutput"]
    return specific


def fill(directory: Path) -> Path:
    """Write a file in `directory` until its file system has no room left."""
    filler = directory / "filler"
    with filler.open("wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def degraded(status: str) -> list[str]:
    return [line for line in status.splitlines() if line.startswith("degraded:")]


def test_a_full_data_dir_shows_in_status_and_doctor_until_there_is_room(
    process: DaemonProcess, small_tmpfs: Path
) -> None:
    daemon = process
    daemon.data_dir = small_tmpfs / "data"
    daemon.env["MENTED_DATA_DIR"] = str(daemon.data_dir)
    daemon.start()
    daemon.mentectl("hooks", "install", "claude-code")
    daemon.mentectl("rule", "add", "git-commit", RULE)
    healthy = daemon.mentectl("doctor")
    assert healthy.stdout.rstrip().endswith("Every link works."), healthy.stdout
    assert fire(daemon, "before-full")["permissionDecision"] == "deny"  # stopped once, first

    filler = fill(small_tmpfs)
    # The fallback: a new session's commit is not stopped, its rules come as context.
    answer = fire(daemon, "while-full")
    assert "permissionDecision" not in answer
    assert RULE in str(answer["additionalContext"])

    status = daemon.mentectl("status", check=False)
    assert status.returncode == 1
    lines = degraded(status.stdout)
    assert len(lines) == 2, status.stdout
    assert lines[0].startswith("degraded:   session memory unavailable (cannot write")
    assert "no command is stopped before it runs" in lines[0]
    assert "fix: free some space in the data directory" in lines[0]
    assert f"the data directory {daemon.data_dir} is full (" in lines[1]
    assert "bytes free): new rules cannot be written" in lines[1]
    assert f"fix: free some space on the file system of {daemon.data_dir}" in lines[1]
    assert status.stderr.startswith("mentectl: degraded: session memory unavailable")
    as_json = json.loads(daemon.mentectl("status", "--json", check=False).stdout)
    assert as_json["healthy"] is False
    assert as_json["error"]["code"] == "degraded"
    assert [p["kind"] for p in as_json["problems"]] == ["session_memory", "data_dir_full"]

    doctor = daemon.mentectl("doctor", check=False)
    assert doctor.returncode == 1
    assert "Every link works." not in doctor.stdout
    assert "FAIL  session memory " in doctor.stdout
    assert "FAIL  data dir full " in doctor.stdout
    assert doctor.stdout.rstrip().endswith("links broken: see the fix under each FAIL.")

    filler.unlink()
    assert fire(daemon, "after-full")["permissionDecision"] == "deny"  # remembered again
    recovered = daemon.mentectl("status")
    assert degraded(recovered.stdout) == []
    assert daemon.stop() == 0


_TYPO_CONFIG = '[delivery]\ndefualt = "context"\n'


def test_a_daemon_on_the_built_in_settings_says_so_until_it_is_reloaded(
    process: DaemonProcess,
) -> None:
    daemon = process
    daemon.write_config(_TYPO_CONFIG)
    daemon.start()
    status = daemon.mentectl("status", check=False)
    assert status.returncode == 1
    (line,) = degraded(status.stdout)
    assert f"running on the built-in settings, not on {daemon.config_path}" in line

    # Fixed on disk but not reloaded: the file is valid, yet the daemon still runs on
    # the built-in settings (it said nothing of it before).
    daemon.write_config('[delivery]\ndefault = "context"\n')
    status = daemon.mentectl("status", check=False)
    assert "INVALID" not in status.stdout
    assert status.returncode == 1
    (line,) = degraded(status.stdout)
    assert "running on the built-in settings" in line
    assert line.endswith("then `mentectl reload`")
    doctor = daemon.mentectl("doctor", check=False)
    assert doctor.returncode == 1
    link = re.compile(r"^FAIL  config defaults +running on the built-in settings", re.MULTILINE)
    assert link.search(doctor.stdout)

    daemon.reload()
    status = daemon.mentectl("status")
    assert degraded(status.stdout) == []
    assert json.loads(daemon.mentectl("status", "--json").stdout)["problems"] == []
    assert daemon.stop() == 0


def test_a_problem_keeps_when_it_began_and_clears() -> None:
    problems = Problems()
    problems.clear(SESSION_MEMORY)  # nothing to clear: no effect
    problems.note(SESSION_MEMORY, "first", "fix")
    since = problems.current()[0].since
    problems.note(CONFIG_DEFAULTS, "other", "fix")
    problems.note(SESSION_MEMORY, "again", "fix it")
    assert [(p.kind, p.message, p.fix) for p in problems.current()] == [
        (SESSION_MEMORY, "again", "fix it"),
        (CONFIG_DEFAULTS, "other", "fix"),
    ]
    assert problems.current()[0].since == since
    problems.clear(SESSION_MEMORY)
    assert SESSION_MEMORY not in problems
    problems.clear(SESSION_MEMORY)
    assert [p.kind for p in problems.current()] == [CONFIG_DEFAULTS]
