"""Pinned rules and facts end to end: mentectl, the real daemon, the real hook shim."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mented_client.hook_settings import installed_shim
from tests.conftest import DaemonProcess

PYTHON = sys.executable


def remember(daemon: DaemonProcess, text: str, *args: str) -> str:
    out = daemon.mentectl("remember", text, *args, "--json").stdout
    return str(json.loads(out)["id"])


def recall(daemon: DaemonProcess, *args: str) -> list[str]:
    out = daemon.mentectl("recall", *args, "--json").stdout
    return [hit["memory"]["content"] for hit in json.loads(out)["hits"]]


def session_start(daemon: DaemonProcess, agent: str, source: str, cwd: Path) -> bytes:
    """What the real shim prints for the agent's SessionStart event."""
    event = {
        "session_id": f"{agent}-session",
        "cwd": str(cwd),
        "hook_event_name": "SessionStart",
        "source": source,
        "transcript_path": "/tmp/t.jsonl",
    }
    result = subprocess.run(
        [PYTHON, "-I", "-S", str(installed_shim()), agent],
        input=json.dumps(event).encode(),
        capture_output=True,
        env=daemon.env | {"MENTED_HOOK_BUDGET_MS": "5000"},
        timeout=30,
        check=True,
    )
    assert result.stderr == b""
    return result.stdout


def test_remember_recall_replace_and_reindex(daemon: DaemonProcess, tmp_path: Path) -> None:
    project = tmp_path / "app"
    project.mkdir()
    first = remember(daemon, "The staging database is stg-db-2, read-only for us", "--tag", "db")
    remember(daemon, "Deploys happen on Tuesdays", "--project", str(project))
    remember(daemon, "The cafeteria closes at three")
    assert recall(daemon, "staging", "databases", "--everywhere") == [
        "The staging database is stg-db-2, read-only for us"
    ]
    assert recall(daemon, "deploys", "--cwd", str(tmp_path)) == []
    assert recall(daemon, "deploys", "--cwd", str(project / "src")) == [
        "Deploys happen on Tuesdays"
    ]
    text = daemon.mentectl("recall", "staging", "--everywhere").stdout
    assert "The staging database is stg-db-2" in text
    assert "semantic" in text

    out = daemon.mentectl("remember", "The staging database is stg-db-3", "--replaces", first)
    assert "replacing" in out.stdout
    assert recall(daemon, "staging", "--everywhere") == ["The staging database is stg-db-3"]
    history = json.loads(daemon.mentectl("rule", "history", first, "--json").stdout)
    assert [m["content"] for m in history["history"]][-1] == "The staging database is stg-db-3"

    reindexed = json.loads(daemon.mentectl("reindex", "--json").stdout)
    assert reindexed["facts"] == 3
    assert recall(daemon, "staging", "--everywhere") == ["The staging database is stg-db-3"]


def test_recall_refusals_say_what_to_do(daemon: DaemonProcess) -> None:
    result = daemon.mentectl("recall", "!!!", check=False)
    assert result.returncode == 1
    assert "has no words to search for" in result.stderr
    result = daemon.mentectl("remember", "x", "--tag", "trigger:git-commit", check=False)
    assert result.returncode == 2
    assert "use `mentectl rule add` for rules" in result.stderr


def test_facts_written_before_a_crash_are_recalled_after_it(daemon: DaemonProcess) -> None:
    remember(daemon, "The staging database is stg-db-2")
    remember(daemon, "The build server is ci-2")
    daemon.stop(signal.SIGKILL)
    # Whatever the index had applied, a lost index file too: the store is the truth.
    shutil.rmtree(daemon.data_dir / "recall")
    daemon.start()
    assert recall(daemon, "build", "server", "--everywhere") == ["The build server is ci-2"]
    remember(daemon, "The build server moved to ci-3")
    daemon.stop(signal.SIGKILL)
    daemon.start()
    assert len(recall(daemon, "build", "server", "--everywhere")) == 2


def test_pinned_rules_are_listed_capped_and_handed_over_at_session_start(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    daemon.write_config("[pinned]\nmax_rules = 3\n")
    daemon.reload()
    out = daemon.mentectl("rule", "add", "--pinned", "Answer in British English").stdout
    assert "handed over at the start of every session" in out
    daemon.mentectl("rule", "add", "git-commit", "single line")
    daemon.mentectl("rule", "add", "--pinned", "Never run the full test suite unasked")
    daemon.mentectl("rule", "add", "--pinned", "Be terse", "--agent", "codex")
    # A third for every agent would make four for Codex.
    refused = daemon.mentectl("rule", "add", "--pinned", "Tabs, not spaces", check=False)
    assert refused.returncode == 1
    assert "would hand sessions for codex 4 pinned rules" in refused.stderr
    assert "the cap is 3 rules" in refused.stderr
    assert "They are now 3" in refused.stderr
    assert "action rule instead" in refused.stderr
    # For Claude Code alone it fits.
    daemon.mentectl("rule", "add", "--pinned", "Tabs, not spaces", "--agent", "claude-code")

    pinned = json.loads(daemon.mentectl("rule", "list", "--pinned", "--json").stdout)["rules"]
    assert len(pinned) == 4
    everything = daemon.mentectl("rule", "list").stdout
    assert "pinned" in everything
    assert "git-commit" in everything

    for agent in ("claude-code", "codex"):
        doc = json.loads(session_start(daemon, agent, "startup", tmp_path))
        specific = doc["hookSpecificOutput"]
        assert specific["hookEventName"] == "SessionStart"
        text = specific["additionalContext"]
        assert "Answer in British English" in text
        assert "Never run the full test suite unasked" in text
        assert ("Be terse" in text) == (agent == "codex")
        assert ("Tabs, not spaces" in text) == (agent == "claude-code")
        assert "single line" not in text
        # Resumed: the session has them already.
        assert session_start(daemon, agent, "resume", tmp_path) == b""
        # Compacted: they go again.
        assert "British" in session_start(daemon, agent, "compact", tmp_path).decode()
    fires = json.loads(daemon.mentectl("log", "--json").stdout)["fires"]
    assert any(fire["command"] == "session start (compact)" for fire in fires)


def test_a_supersede_that_breaks_the_cap_is_refused(daemon: DaemonProcess) -> None:
    daemon.write_config("[pinned]\nmax_chars = 120\n")
    daemon.reload()
    first = json.loads(
        daemon.mentectl("rule", "add", "--pinned", "Answer in British English", "--json").stdout
    )["id"]
    refused = daemon.mentectl("rule", "supersede", first, "x" * 121, check=False)
    assert refused.returncode == 1
    assert "this pinned rule is 121 characters" in refused.stderr
    daemon.mentectl("rule", "supersede", first, "Answer in British English, always")


@pytest.mark.parametrize("source", ["startup", "clear"])
def test_no_pinned_rule_is_silence(daemon: DaemonProcess, tmp_path: Path, source: str) -> None:
    daemon.mentectl("rule", "add", "git-commit", "single line")
    assert session_start(daemon, "claude-code", source, tmp_path) == b""
