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


def said_where_it_comes_from(
    memory_id: str, *, made_on: DaemonProcess, synced_to: DaemonProcess
) -> None:
    """`rule list` and `rule show` (text and --json) say where the rule comes from."""
    assert "[synced from another machine]" in synced_to.mentectl("rule", "list").stdout
    assert "synced" not in made_on.mentectl("rule", "list").stdout
    assert "from:          synced from another machine" in (
        synced_to.mentectl("rule", "show", memory_id).stdout
    )
    assert "from:          yours (made on this machine)" in (
        made_on.mentectl("rule", "show", memory_id).stdout
    )
    for machine, origin in ((made_on, "yours"), (synced_to, "synced")):
        shown = rules(machine, "show", memory_id)
        assert isinstance(shown, dict)
        assert shown["from"] == origin


def same_rules(
    one: DaemonProcess, other: DaemonProcess, action: str, *, made_on: DaemonProcess
) -> bool:
    """Whether both machines list the same rules for `action`, each saying it is yours
    on `made_on` and synced on the other."""
    listed = {}
    for machine in (one, other):
        shown = rules(machine, "list", "--action", action)
        assert isinstance(shown, dict)
        for rule in shown["rules"]:
            assert rule.pop("from") == ("yours" if machine is made_on else "synced")
        listed[machine is one] = shown
    return listed[True] == listed[False]


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
    # Where each machine says the rule comes from: made on the laptop, synced to the desk.
    said_where_it_comes_from(first, made_on=daemon, synced_to=second)

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
        # A version superseded here is this machine's own; the other one came by sync.
        here = "v2 from the laptop" if machine is daemon else "v2 from the desk"
        assert {r["content"]: r["from"] for r in shown["rules"]} == {
            "v2 from the desk": "yours" if machine is second else "synced",
            "v2 from the laptop": "yours" if machine is daemon else "synced",
        }
        lines = machine.mentectl("rule", "list", "--action", "git-commit").stdout.splitlines()
        heads = {text.strip(): head for head, text in zip(lines[0::2], lines[1::2], strict=True)}
        assert heads.pop(here).endswith("(everywhere)")  # yours: no mark
        assert [head.endswith("  [synced from another machine]") for head in heads.values()] == [
            True
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
    assert same_rules(daemon, second, "pr-create", made_on=second)

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
    assert same_rules(daemon, second, "git-push", made_on=daemon)


def handle(memory_id: str) -> str:
    return memory_id[-8:].lower()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_after_a_sync_fork_history_shows_every_branch_and_settling_names_both(
    daemon: DaemonProcess, second: DaemonProcess, tmp_path: Path
) -> None:
    remote = tmp_path / "rules.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    first = json.loads(daemon.mentectl("rule", "add", "git-commit", "v1", "--json").stdout)["id"]
    daemon.mentectl("sync", "init", str(remote))
    second.mentectl("sync", "init", str(remote))
    here = rules(daemon, "supersede", first, "v2 from the laptop")
    there = rules(second, "supersede", first, "v2 from the desk")
    assert isinstance(here, dict)
    assert isinstance(there, dict)
    synced(daemon)
    synced(second)
    synced(daemon)

    for machine in (daemon, second):
        for asked in (first, here["id"], there["id"]):
            listed = rules(machine, "history", asked)
            assert isinstance(listed, dict)
            ids = [version["id"] for version in listed["history"]]
            assert ids[0] == first
            assert sorted(ids[1:]) == sorted([here["id"], there["id"]])
        shown = machine.mentectl("rule", "history", handle(here["id"])).stdout
        assert f"[replaces {handle(first)}]" in shown
        assert shown.count(f"[replaces {handle(first)}]") == 2  # the fork: two branches
        assert "2 current versions (" in shown
        assert "settle it with `mentectl rule supersede" in shown

    settled = daemon.mentectl("rule", "supersede", handle(here["id"]), "v3 settled").stdout
    assert f"replaces {here['id']} and {there['id']}, which no longer fire" in settled
    assert "the fork (2 current versions) is settled" in settled
    shown = daemon.mentectl("rule", "history", handle(there["id"])).stdout
    assert f"[replaces {handle(here['id'])} and {handle(there['id'])}]" in shown
    assert "current versions" not in shown
    assert shown.rstrip().endswith("v3 settled")

    # Forgotten on the desk, after a sync: no version fires anywhere, and the links
    # that name the forgotten version say so instead of pointing nowhere.
    synced(daemon)
    synced(second)
    current = rules(second, "list", "--action", "git-commit")
    assert isinstance(current, dict)
    (last,) = current["rules"]
    forgot = second.mentectl("rule", "forget", handle(last["id"])).stdout
    assert f"stays retired (`mentectl rule history {handle(here['id'])}`)" in forgot
    synced(second)
    synced(daemon)
    for machine in (daemon, second):
        assert rules(machine, "list", "--action", "git-commit") == {"rules": []}
        show = machine.mentectl("rule", "show", handle(there["id"])).stdout
        assert f"superseded_by: {last['id']} (forgotten): nothing replaces this version" in show
        details = rules(machine, "show", handle(there["id"]))
        assert isinstance(details, dict)
        assert details["forgotten_links"] == [last["id"]]
        history = machine.mentectl("rule", "history", first).stdout
        assert f"[superseded by {last['id']} (forgotten)]" in history
        assert "no version fires: the current one was forgotten" in history


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_pinned_rules_over_the_cap_after_a_sync_are_reported_and_can_be_superseded(
    daemon: DaemonProcess, second: DaemonProcess, tmp_path: Path
) -> None:
    remote = tmp_path / "rules.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    for machine, where in ((daemon, "laptop"), (second, "desk")):
        machine.write_config("[pinned]\nmax_rules = 3\n")
        machine.reload()
        machine.mentectl("sync", "init", str(remote))
        for n in range(2):
            machine.mentectl("rule", "add", "--pinned", f"pinned {n} on the {where}")
    synced(daemon)
    synced(second)
    synced(daemon)

    pinned = rules(daemon, "list", "--pinned")
    assert isinstance(pinned, dict)
    oldest = min(pinned["rules"], key=lambda rule: (rule["created_at"], rule["id"]))
    status = daemon.mentectl("status").stdout
    assert re.search(
        r"^pinned: +4 live rules \(the cap is 3 rules and \d+ characters", status, re.MULTILINE
    )
    assert (
        "OVER THE CAP: every session sees 4 pinned rules of 84 characters, over the cap of "
        f"3 rules and 1200 characters: a session start leaves out the oldest 1 "
        f"({handle(oldest['id'])})"
    ) in status
    doctor = daemon.mentectl("doctor", check=False).stdout
    assert "every session sees 4 pinned rules" in doctor
    assert "raise [pinned] max_rules" in doctor

    # A supersede adds no rule: it goes through. A new pinned rule is refused.
    daemon.mentectl("rule", "supersede", handle(oldest["id"]), "pinned 0, reworded")
    refused = daemon.mentectl("rule", "add", "--pinned", "a fifth", check=False)
    assert refused.returncode != 0
    assert "would hand every session 5 pinned rules" in refused.stderr

    # Forgetting one brings it within the cap: the report goes away.
    daemon.mentectl("rule", "forget", handle(pinned["rules"][0]["id"]))
    status = daemon.mentectl("status").stdout
    assert "OVER THE CAP" not in status
    assert re.search(r"^pinned: +3 live rules", status, re.MULTILINE)
    assert "3 live rules, within 3 rules" in daemon.mentectl("doctor", check=False).stdout
