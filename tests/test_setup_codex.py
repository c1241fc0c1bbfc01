"""`setup codex` and `hooks install codex` around Codex's own trust step.

Codex runs a hook only once the user trusted it in its `/hooks` view, which
mented cannot do for them: right after setup that is the next step, not a broken
link, and an install that leaves trusted entries as they were asks for nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mented.agents import codex
from tests.conftest import DaemonProcess

QUIET = {"MENTED_SERVICE_MANAGER": "none", "MENTED_HOOK_BUDGET_MS": "3000"}


@pytest.fixture
def codex_user(daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The daemon's user with Codex in CODEX_HOME (here too, for the trust helpers)."""
    codex_home = Path(daemon.env["HOME"]) / "codexhome"
    daemon.env |= QUIET | {"CODEX_HOME": str(codex_home)}
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    yield codex_home


def trust_every_hook(codex_home: Path) -> None:
    config = codex_home / "config.toml"
    text = config.read_text() if config.exists() else ""
    config.write_text(text + codex.trust_config_toml(codex.user_hooks_path()))


def test_setup_codex_names_trusting_the_hooks_as_the_next_step_not_a_failure(
    daemon: DaemonProcess, codex_user: Path
) -> None:
    result = daemon.mentectl("setup", "codex", check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "links broken" not in out
    assert "FAIL" not in out
    assert "warn  hook codex PreToolUse" in out
    assert "One step left, and only you can take it: Codex CLI runs mented's hooks once you " in out
    assert "trust them (3 entries above): open Codex, type `/hooks`" in out
    assert "mented is set up for Codex CLI, but for that step." in out

    trust_every_hook(codex_user)
    again = daemon.mentectl("setup", "codex").stdout
    assert "One step left" not in again
    assert "Every link works." in again
    assert "mented is set up for Codex CLI." in again
    assert os.environ["CODEX_HOME"] == str(codex_user)


def test_hooks_install_codex_asks_for_trust_only_when_codex_does_not_trust_them(
    daemon: DaemonProcess, codex_user: Path
) -> None:
    first = daemon.mentectl("hooks", "install", "codex").stdout
    assert "review the mented entries and trust them" in first
    trust_every_hook(codex_user)
    changed = daemon.mentectl("hooks", "install", "codex", "--timeout", "7").stdout
    assert "review the mented entries and trust them" in changed  # a new hash: again
    back = daemon.mentectl("hooks", "install", "codex").stdout
    assert back.startswith("Updated the mented hook for Codex CLI")
    assert "trust them" not in back
    assert "Codex CLI already trusts these entries: nothing to do there." in back
