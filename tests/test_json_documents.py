"""`--json` makes every command print one JSON document: `export` and `setup` too."""

from __future__ import annotations

import json

import pytest

from tests.conftest import DaemonProcess

QUIET = {"MENTED_SERVICE_MANAGER": "none", "MENTED_HOOK_BUDGET_MS": "3000"}


def test_export_json_is_one_document_and_the_file_format_stays(daemon: DaemonProcess) -> None:
    daemon.mentectl("rule", "add", "git-commit", "One line.")
    daemon.mentectl("rule", "add", "git-push", 'Never "force".')
    document = json.loads(daemon.mentectl("export", "--json").stdout)  # one document
    assert document["memories"] == 2
    assert document["forgotten"] == 0
    assert document["header"]["format"] == 1
    assert sorted(record["text"] for record in document["records"]) == [
        'Never "force".',
        "One line.",
    ]
    # Without --json (and with --out), the portable format as it was: JSON Lines.
    lines = daemon.mentectl("export").stdout.splitlines()
    assert json.loads(lines[0])["format"] == 1
    assert len(lines) == 3


@pytest.mark.parametrize("where", ["before", "after"])
def test_setup_json_is_one_document_before_or_after_the_verb(
    daemon: DaemonProcess, where: str
) -> None:
    daemon.env |= QUIET
    argv = (
        ["--json", "setup", "claude-code"]
        if where == "before"
        else ["setup", "claude-code", "--json"]
    )
    result = daemon.mentectl(*argv)
    document = json.loads(result.stdout)
    assert document["ok"] is True
    assert document["agent"] == "claude-code"
    assert [step["step"] for step in document["steps"]] == [
        "the daemon",
        "the hook",
        "the MCP server",
    ]
    assert any("mented is already running" in line for line in document["steps"][0]["said"])
    links = {check["link"]: check["state"] for check in document["checks"]}
    assert links["fire claude-code"] == "ok"
    assert document["first_rule"].startswith("mentectl rule add git-commit")
