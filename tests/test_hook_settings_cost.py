"""`mentectl hooks install` again and `hooks uninstall` cost about what the first install does.

Claude Code's settings file holds hundreds of our entries (one per command shape,
mented/registration.py). Updating them (a new `--timeout`) and removing them read
the whole file once per entry: seconds of CPU for the user, each time (and minutes
of the test suite). Compared with the first install in the same test, in CPU time
of this thread (docs/testing.md, "Timing on a busy machine"), with a wide factor.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mented_client.cli import main

# The first install reads and writes the file a few times; on the code that read it
# once per entry, the update and the uninstall cost 25 to 30 times as much.
FACTOR = 8


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for variable in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "MENTED_SOCKET"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    return home


def cpu_of(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[float, str]:
    """The thread's CPU time for `mentectl ARGS`, and what it printed (it must succeed)."""
    started = time.thread_time()
    status = main(list(args))
    spent = time.thread_time() - started
    out, err = capsys.readouterr()
    assert status == 0, err
    return spent, out


def test_updating_and_removing_hundreds_of_entries_costs_about_one_install(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    main(["status"])  # the client's imports, out of the baseline
    capsys.readouterr()
    install, _ = cpu_of(capsys, "hooks", "install", "claude-code")
    entries = settings.read_text().count('"timeout": ')
    assert entries > 100, entries  # the file this is about
    update, _ = cpu_of(capsys, "hooks", "install", "claude-code", "--timeout", "7")
    assert settings.read_text().count('"timeout": 7') == entries
    uninstall, out = cpu_of(capsys, "hooks", "uninstall", "claude-code")
    assert f"Removed {entries} mented hook entries" in out
    assert not settings.exists()
    budget = FACTOR * install
    assert update < budget, f"updating took {update:.2f} s of CPU, the install {install:.2f} s"
    assert uninstall < budget, f"removing took {uninstall:.2f} s, the install {install:.2f} s"
