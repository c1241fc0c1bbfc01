"""The record of whether rules are kept (mented.compliance), `mentectl report` and `status`."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING

import msgspec
import pytest

from mented.actions import load_action_table
from mented.compliance import (
    FILE_NAME,
    FLUSH_EVENTS,
    MAX_AGE_S,
    ComplianceRecord,
    Event,
    report_row,
)
from mented.config import Config, DeliverySettings
from mented.hooks import HookHandler, decode_event
from mented.matcher import Matcher
from mented.protocol import ReportReply
from mented_client.commands.report import format_report, status_line
from tests.test_hook_e2e import Agent, context
from tests.test_hooks import event
from tests.test_prechecks_e2e import BAD, GOOD, add_post_rule, decision

if TYPE_CHECKING:
    from pathlib import Path

    from mented.sessions import SessionMemory
    from mented.store import Store
    from tests.conftest import DaemonProcess


@pytest.fixture
def claude(daemon: DaemonProcess) -> Agent:
    return Agent(daemon, "claude-code", daemon.home / ".claude" / "settings.json")


def test_one_stop_then_one_pass_is_reported_and_kept_across_a_restart(
    daemon: DaemonProcess, claude: Agent
) -> None:
    rule_id = add_post_rule(daemon)
    assert decision(claude.bash(BAD, session="r1")) == "deny"
    assert "it breaks" not in context(claude.bash(GOOD, session="r1"))
    report = json.loads(daemon.mentectl("report", "--json").stdout)
    (row,) = report["rules"]
    assert row["key"] == rule_id
    assert row["content"].startswith("commit messages: single line")
    assert (row["checked"], row["stopped"], row["passed"], row["passed_first"]) == (2, 1, 1, 0)
    assert row["handed"] == 1
    assert row["share_passed_first"] == 0.0
    assert [agent["key"] for agent in report["agents"]] == ["claude-code"]
    # A first-time pass in another session counts as one.
    claude.bash(GOOD, session="r2")
    status = daemon.mentectl("status").stdout
    assert "checks:     checked 3 commands in 7 days: 33% passed first time, 1 stopped" in status

    daemon.stop()
    daemon.start()
    again = json.loads(daemon.mentectl("report", "--json").stdout)
    assert again["rules"][0]["checked"] == 3
    text = daemon.mentectl("report").stdout
    assert "FIRST TRY" in text
    assert "git-commit: commit messages: single line" in text
    assert json.loads(daemon.mentectl("report", "--json", "--agent", "codex").stdout)["rules"] == []
    assert (daemon.data_dir / FILE_NAME).stat().st_mode & 0o777 == 0o600


def test_a_killed_daemon_keeps_the_record_of_a_command_a_moment_before(
    daemon: DaemonProcess, claude: Agent
) -> None:
    # Events wait to be written in a batch; after a quiet spell a crash lost them all.
    add_post_rule(daemon)
    assert decision(claude.bash(BAD, session="k1")) == "deny"
    record = daemon.data_dir / FILE_NAME
    deadline = time.monotonic() + 30  # written a second after, on the busiest machine sooner
    while not (record.exists() and "stopped" in record.read_text()):
        assert time.monotonic() < deadline, "the stop was never written"
        time.sleep(0.05)
    assert daemon.proc is not None
    daemon.proc.kill()
    daemon.proc.wait()
    daemon.start()
    (row,) = json.loads(daemon.mentectl("report", "--json").stdout)["rules"]
    assert row["stopped"] == 1


def test_let_through_is_counted(daemon: DaemonProcess, claude: Agent) -> None:
    daemon.write_config("[checks]\nmax_stops = 1\n")
    daemon.reload()
    add_post_rule(daemon)
    assert decision(claude.bash(BAD, session="r3")) == "deny"
    assert decision(claude.bash(BAD, session="r3")) == "context"
    (row,) = json.loads(daemon.mentectl("report", "--json").stdout)["rules"]
    assert (row["stopped"], row["let_through"]) == (1, 1)


def test_report_since_is_checked(daemon: DaemonProcess) -> None:
    result = daemon.mentectl("report", "--since", "forever", check=False)
    assert result.returncode == 2
    assert "give e.g. 7d" in result.stderr
    assert "nothing recorded since" in daemon.mentectl("report", "--since", "1h").stdout


def test_the_record_is_bounded_and_rewritten(tmp_path: Path) -> None:
    record = ComplianceRecord(tmp_path, max_events=10)
    for n in range(25):
        record.note(f"R{n}", "codex", "passed_first")
    record.close()
    lines = (tmp_path / FILE_NAME).read_text().splitlines()
    assert len(lines) < 20
    reopened = ComplianceRecord(tmp_path, max_events=10)
    assert reopened.summary().total.checked == 10
    assert set(reopened.summary().by_rule) == {f"R{n}" for n in range(15, 25)}


def test_old_and_damaged_lines_are_dropped(tmp_path: Path) -> None:
    old = json.dumps([time.time() - MAX_AGE_S - 10, "R1", "codex", "stopped"])
    fresh = json.dumps([time.time(), "R2", "codex", "stopped"])
    (tmp_path / FILE_NAME).write_text(f"{old}\n{{not json\n{fresh}\n[1, 2]\n{fresh[:10]}")
    record = ComplianceRecord(tmp_path)
    assert set(record.summary().by_rule) == {"R2"}
    record.note("R3", "codex", "nonsense")  # an unknown kind is not recorded
    assert record.summary().total.stopped == 1
    assert Event(1.0, "R", "a", "told") == Event(1.0, "R", "a", "told")


def test_a_hostile_record_file_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("")
    (tmp_path / FILE_NAME).symlink_to(target)
    record = ComplianceRecord(tmp_path)
    record.note("R1", "codex", "passed_first")  # kept in memory, the link not written through
    record.flush()
    assert record.summary().total.checked == 1
    assert target.read_text() == ""
    (tmp_path / FILE_NAME).unlink()
    os.mkfifo(tmp_path / FILE_NAME)
    record = ComplianceRecord(tmp_path)  # a FIFO is refused, never blocks
    record.note("R1", "codex", "passed_first")
    record.close()  # the batch written: refused, never blocking
    assert record.summary().total.checked == 1


def test_events_are_written_in_batches_and_all_on_close(tmp_path: Path) -> None:
    record = ComplianceRecord(tmp_path)
    record.note_all([f"R{n}" for n in range(6)], "codex", "passed_first")  # one command's rules
    assert not (tmp_path / FILE_NAME).exists()  # waiting: no write per event on the hook's path
    assert record.summary().total.checked == 6  # counted all the same
    for n in range(FLUSH_EVENTS):
        record.note(f"S{n}", "codex", "stopped")
    assert len((tmp_path / FILE_NAME).read_text().splitlines()) == FLUSH_EVENTS
    record.note("T", "codex", "told")
    record.close()
    assert len((tmp_path / FILE_NAME).read_text().splitlines()) == FLUSH_EVENTS + 7
    # An older file's `checked` lines are skipped: the outcome line beside each counts it.
    with (tmp_path / FILE_NAME).open("a") as out:
        out.write(json.dumps([time.time(), "T", "codex", "checked"]) + "\n")
    assert ComplianceRecord(tmp_path).summary().by_rule["T"].checked == 1


def test_a_stop_nobody_read_is_not_counted(store: Store, sessions: SessionMemory) -> None:
    store.store("no emoji", tags=["trigger:git-commit"], checks=["message no-emoji"])
    config = Config()
    hooks = HookHandler(store, Matcher(load_action_table(config)), config, sessions)
    record = ComplianceRecord(None)
    hooks.prechecks.compliance = record
    bad = 'git commit -m "fix: 🎉"'
    answer = hooks.answer_decoded("claude-code", decode_event("claude-code", event(bad)))
    assert b"it breaks" in answer.out
    answer.dropped()  # the agent gave up before it came: the model saw no stop
    assert record.summary().total.stopped == 0
    answer = hooks.answer_decoded("claude-code", decode_event("claude-code", event(bad)))
    answer.sent()
    assert record.summary().total.stopped == 1


def test_whether_the_retry_after_a_stop_changed_the_command_is_reported(
    store: Store, sessions: SessionMemory
) -> None:
    plain = store.store("commit messages: single line", tags=["trigger:git-commit"])
    checked = store.store("no emoji", tags=["trigger:git-commit"], checks=["message no-emoji"])
    config = Config(delivery=DeliverySettings(default="before"))
    hooks = HookHandler(store, Matcher(load_action_table(config)), config, sessions)
    record = ComplianceRecord(None)
    hooks.prechecks.compliance = record
    first = 'git commit -m "fix: x"'
    assert b"single line" in hooks.handle("claude-code", event(first, session="a"))  # stopped
    hooks.handle("claude-code", event("git push", session="a"))  # another action: no retry
    hooks.handle("claude-code", event('git commit -m "fix: y"', session="a"))  # changed
    hooks.handle("claude-code", event('git commit -m "fix: z"', session="a"))  # no stop before
    assert b"single line" in hooks.handle("claude-code", event(first, session="b"))
    hooks.handle("claude-code", event(first, session="b"))  # the same command again
    counts = record.summary().by_rule
    assert (counts[plain.id].retry_changed, counts[plain.id].retry_same) == (1, 1)
    assert (counts[checked.id].retry_changed, counts[checked.id].retry_same) == (0, 0)
    row = report_row("7d", record.summary().total)
    assert status_line(row) == (
        "checked 5 commands in 7 days: 100% passed first time, 0 stopped, 0 let through; "
        "1 of 2 retries after a stop changed the command"
    )
    reply = ReportReply(
        since=0.0, rules=[report_row(plain.id, counts[plain.id], plain)], agents=[], total=row
    )
    table = format_report(reply)
    assert "RETRY CHANGED" in table.splitlines()[1]
    assert table.splitlines()[2].endswith("1/2")
    assert msgspec.to_builtins(reply)["total"]["retry_changed"] == 1
