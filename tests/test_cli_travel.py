"""`mentectl export` / `mentectl import` against real daemons: one store carried to another."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mented.agents.pretooluse import pretooluse_event
from tests.conftest import DaemonProcess


@pytest.fixture
def second() -> Iterator[DaemonProcess]:
    """A second daemon, on its own paths: another machine."""
    root = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    process = DaemonProcess(root)
    process.start()
    try:
        yield process
    finally:
        if process.proc is not None:
            process.stop()
        shutil.rmtree(root, ignore_errors=True)


def rules(daemon: DaemonProcess, *args: str) -> object:
    return json.loads(daemon.mentectl("rule", *args, "--json").stdout)


def hook_text(daemon: DaemonProcess, command: str) -> bytes:
    event = pretooluse_event(command, cwd="/tmp", session="same-session")
    with daemon.client() as client:
        return client.hook("claude-code", event)


def test_export_then_import_gives_the_same_rules_history_and_hook_output(
    daemon: DaemonProcess, second: DaemonProcess, tmp_path: Path
) -> None:
    first = json.loads(daemon.mentectl("rule", "add", "git-commit", "v1", "--json").stdout)["id"]
    newer = rules(daemon, "supersede", first, "single line, no emojis")
    daemon.mentectl("rule", "add", "pr-create", "drafts first", "--agent", "codex")
    gone = json.loads(daemon.mentectl("rule", "add", "git-push", "x", "--json").stdout)["id"]
    daemon.mentectl("rule", "forget", gone)
    out = tmp_path / "rules.jsonl"

    exported = daemon.mentectl("export", "--out", str(out))
    assert f"exported 3 memories and 1 forget to {out}" in exported.stdout
    imported = second.mentectl("import", str(out))
    assert "3 added, 1 forgotten, 0 already here" in imported.stdout

    assert rules(second, "list", "--all") == rules(daemon, "list", "--all")
    assert rules(second, "history", first) == rules(daemon, "history", first)
    assert isinstance(newer, dict)
    assert rules(second, "history", newer["id"]) == rules(daemon, "history", newer["id"])
    for command in ("git commit -m 'fix: x'", "gh pr create --fill", "git push"):
        assert hook_text(second, command) == hook_text(daemon, command)

    again = second.mentectl("import", str(out), "--json")
    assert json.loads(again.stdout) == {"added": 0, "forgotten": 0, "unchanged": 4}
    assert not list((second.data_dir / "transfer").iterdir())  # nothing left behind


def test_export_to_standard_output(daemon: DaemonProcess) -> None:
    daemon.mentectl("rule", "add", "git-commit", "single line")
    lines = daemon.mentectl("export").stdout.splitlines()
    assert json.loads(lines[0])["mented"] == "rules"
    assert json.loads(lines[1])["text"] == "single line"
    assert not list((daemon.data_dir / "transfer").iterdir())


def test_a_bad_file_is_refused_with_its_name_and_line(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"mented":"rules","format":1}\n'
        '{"kind":"memory","id":"01JDQ8Z5K3M4N5P6Q7R8S9T0VW","created_at":1,"text":"fine"}\n'
        '{"kind":"memory","id":"01JDQ8Z5K3M4N5P6Q7R8S9T0VX","created_at":1,"text":""}\n'
    )
    result = daemon.mentectl("import", str(bad), check=False)
    assert result.returncode == 1
    assert f"{bad}:3: memory content cannot be empty" in result.stderr
    assert rules(daemon, "list", "--all") == {"rules": []}
    assert json.loads(daemon.mentectl("export").stdout.splitlines()[0])["format"] == 1


def test_import_of_a_directory_says_it_is_one(daemon: DaemonProcess, tmp_path: Path) -> None:
    result = daemon.mentectl("import", str(tmp_path), check=False)
    assert result.returncode == 2
    assert f"{tmp_path} is a directory: give the file `mentectl export --out FILE` wrote" in (
        result.stderr
    )
    missing = daemon.mentectl("import", str(tmp_path / "nope.jsonl"), check=False)
    assert f"{tmp_path / 'nope.jsonl'}: no such file" in missing.stderr


def test_sync_init_refuses_a_code_repository_with_a_clear_message(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    work = tmp_path / "project"
    subprocess.run(["git", "init", "--quiet", str(work)], check=True)
    daemon.mentectl("rule", "add", "git-commit", "single line")

    refused = daemon.mentectl("sync", "init", str(work), check=False)
    assert refused.returncode == 1
    assert f"{work} is a working repository" in refused.stderr
    assert "make an empty one (`git init --bare PATH`" in refused.stderr
    assert "sync:" not in daemon.mentectl("status").stdout  # not set up
    assert (
        subprocess.run(
            ["git", "-C", str(work), "branch", "--all"], capture_output=True, text=True, check=True
        ).stdout
        == ""
    )


# ---------------------------------------------------------------- sync


def synced(daemon: DaemonProcess) -> dict[str, object]:
    out = json.loads(daemon.mentectl("sync", "--json").stdout)
    assert isinstance(out, dict)
    return out


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_two_daemons_sync_over_git_show_a_fork_and_sync_by_themselves(
    daemon: DaemonProcess, second: DaemonProcess, tmp_path: Path
) -> None:
    remote = tmp_path / "rules.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    first = json.loads(daemon.mentectl("rule", "add", "git-commit", "v1", "--json").stdout)["id"]

    out = daemon.mentectl("sync", "init", str(remote)).stdout
    assert f"synced with {remote}: 1 record of this machine written" in out
    assert "pushed" in out
    second.mentectl("sync", "init", str(remote))
    assert hook_text(second, "git commit -m x") == hook_text(daemon, "git commit -m x")

    # superseded on both machines while apart: both versions kept, the fork named
    rules(daemon, "supersede", first, "v2 from the laptop")
    rules(second, "supersede", first, "v2 from the desk")
    synced(daemon)
    assert synced(second)["added"] == 1
    synced(daemon)
    for machine in (daemon, second):
        shown = rules(machine, "list", "--action", "git-commit")
        assert isinstance(shown, dict)
        assert sorted(r["content"] for r in shown["rules"]) == [
            "v2 from the desk",
            "v2 from the laptop",
        ]
        status = machine.mentectl("status").stdout
        assert "a rule has 2 current versions" in status
        assert "settle it with `mentectl rule supersede" in status
        assert re.search(rf"^sync: +{re.escape(str(remote))}: last synced", status, re.MULTILINE)

    # [sync] after_change: the desk pushes a new rule by itself
    second.write_config("[sync]\nafter_change = true\n")
    second.reload()
    second.mentectl("rule", "add", "pr-create", "drafts first")
    deadline = time.monotonic() + 30
    while synced(daemon)["added"] == 0:
        assert time.monotonic() < deadline, second.log()
        time.sleep(0.5)
    assert rules(daemon, "list", "--action", "pr-create") == rules(
        second, "list", "--action", "pr-create"
    )

    # a remote that is down: refused with the reason, kept for status, nothing lost
    remote.rename(tmp_path / "away.git")
    daemon.mentectl("rule", "add", "git-push", "never force")
    failed = daemon.mentectl("sync", check=False)
    assert failed.returncode == 1
    assert "cannot reach the remote" in failed.stderr
    assert "FAILING (cannot reach the remote" in daemon.mentectl("status").stdout
    (tmp_path / "away.git").rename(remote)
    assert synced(daemon)["pushed"] is True
    synced(second)
    assert rules(second, "list", "--action", "git-push") == rules(
        daemon, "list", "--action", "git-push"
    )
