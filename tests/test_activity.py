"""mented.activity: the hook's fires kept on disk for `mentectl log`: across a restart,
bounded by count, bytes and age, filtered by the daemon, robust to a torn last line, a
full disk and a hostile data directory; test fires are never the user's activity."""

from __future__ import annotations

import argparse
import errno
import os
import stat
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from mented import activity
from mented.actions import load_action_table
from mented.activity import FILE_NAME, OLD_FILE_NAME, ActivityLog, FireFilter, log_reply
from mented.agents.pretooluse import pretooluse_event
from mented.compliance import ComplianceRecord
from mented.config import ActivitySettings, Config
from mented.hooks import HookHandler, decode_event
from mented.matcher import Matcher
from mented.protocol import ErrorCode, ErrorReply, FireRecord, LogReply, LogRequest
from mented.server import Server, ServerOptions
from mented_client.commands.log import since_option

if TYPE_CHECKING:
    from pathlib import Path

    from mented.sessions import SessionMemory
    from mented.store import Store

NOW = time.time()
DAY = 86_400.0


def fire(  # noqa: PLR0913 - a fire's fields, as a test names them
    command: str = "git commit -m x",
    *,
    at: float | None = None,
    agent: str = "claude-code",
    session: str | None = "session-1",
    cwd: str | None = "/home/u/repo",
    actions: tuple[str, ...] = ("git-commit",),
    test: bool = False,
) -> FireRecord:
    return FireRecord(
        time=NOW if at is None else at,
        agent=agent,
        session=session,
        cwd=cwd,
        command=command,
        actions=list(actions),
        test=test,
    )


def commands(record: ActivityLog, wanted: FireFilter | None = None, n: int = 10_000) -> list[str]:
    fires, _ = record.query(wanted or FireFilter(), n)
    return [f.command for f in fires]


def on_disk(directory: Path) -> bytes:
    return b"".join(
        (directory / name).read_bytes()
        for name in (OLD_FILE_NAME, FILE_NAME)
        if (directory / name).exists()
    )


# ------------------------------------------------------------------ kept


def test_fires_are_kept_across_a_close_and_reopen_newest_first(tmp_path: Path) -> None:
    record = ActivityLog(tmp_path)
    for number in range(3):
        record.append(fire(f"git commit -m {number}", at=NOW + number))
    record.close()

    reopened = ActivityLog(tmp_path)
    assert commands(reopened) == ["git commit -m 2", "git commit -m 1", "git commit -m 0"]
    assert commands(reopened, n=1) == ["git commit -m 2"]
    assert reopened.not_kept is None
    # Commands are the user's data: the file is theirs alone.
    assert stat.S_IMODE((tmp_path / FILE_NAME).stat().st_mode) == 0o600


def test_a_wider_mode_is_narrowed_to_0600(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_bytes(b"")
    (tmp_path / FILE_NAME).chmod(0o644)
    ActivityLog(tmp_path).append(fire())
    assert stat.S_IMODE((tmp_path / FILE_NAME).stat().st_mode) == 0o600


async def test_the_daemons_log_survives_a_restart(short_tmp: Path) -> None:
    """The server, closed and opened again on its data directory, still answers `log`
    with the fire of before; before, the log was in memory and the answer was empty."""
    options = ServerOptions(
        socket_path=short_tmp / "run" / "s.sock", data_dir=short_tmp / "data", handle_signals=False
    )
    server = Server(options)
    server.open()
    try:
        server.store.store("One line.", tags=["trigger:git-commit"])
        event = pretooluse_event(
            "git commit -m 'fix: x'", cwd="/tmp", session="kept", tool_use_id="toolu_1"
        )
        assert server.hooks.handle("claude-code", event)
    finally:
        server.close()

    again = Server(options)
    again.open()
    try:
        reply = await again._answer(LogRequest())
        assert isinstance(reply, LogReply)
        assert [(f.session, f.command) for f in reply.fires] == [("kept", "git commit -m 'fix: x'")]
        assert reply.not_kept is None
        # And `status`'s "last rules" is that fire again, not "none yet".
        assert again.hooks.last_fire is None
        await again._recall_last_fire()
        assert again.hooks.last_fire is not None
        assert again.hooks.last_fire.session == "kept"
    finally:
        again.close()


async def test_a_fire_since_the_start_is_not_replaced_by_an_older_one(short_tmp: Path) -> None:
    options = ServerOptions(
        socket_path=short_tmp / "run" / "s.sock", data_dir=short_tmp / "data", handle_signals=False
    )
    server = Server(options)
    server.open()
    try:
        server.store.store("One line.", tags=["trigger:git-commit"])
        for session in ("before", "doctor"):
            event = pretooluse_event("git commit -m x", cwd="/tmp", session=session)
            call = decode_event("claude-code", event)
            server.hooks.handle_decoded("claude-code", call, test=session == "doctor")
    finally:
        server.close()
    again = Server(options)
    again.open()
    try:
        await again._recall_last_fire()  # doctor's test fire is newer, but not the user's
        assert again.hooks.last_fire is not None
        assert again.hooks.last_fire.session == "before"
        event = pretooluse_event("git commit -m y", cwd="/tmp", session="since")
        again.hooks.handle("claude-code", event)
        await again._recall_last_fire()
        assert again.hooks.last_fire.session == "since"
    finally:
        again.close()


# ------------------------------------------------------------------ bounded


def test_the_record_is_bounded_by_count_the_newest_kept(tmp_path: Path) -> None:
    settings = ActivitySettings(max_fires=100)
    record = ActivityLog(tmp_path, settings)
    for number in range(1000):
        record.append(fire(f"c{number}", at=NOW + number))
    record.close()
    kept = commands(ActivityLog(tmp_path, settings))
    assert 50 <= len(kept) <= 100
    assert kept[0] == "c999"
    assert kept == [f"c{number}" for number in range(999, 999 - len(kept), -1)]
    assert on_disk(tmp_path).count(b"\n") <= 100


def test_the_record_is_bounded_by_bytes(tmp_path: Path) -> None:
    settings = ActivitySettings(max_mib=1, max_fires=1_000_000)
    record = ActivityLog(tmp_path, settings)
    long = "x" * 1000  # a command as the hook cuts it
    for number in range(3000):  # about 3.3 MiB of fires
        record.append(fire(f"{number} {long}", at=NOW + number))
    record.close()
    assert len(on_disk(tmp_path)) <= 1024 * 1024
    kept = commands(ActivityLog(tmp_path, settings))
    assert kept[0].startswith("2999 ")
    assert len(kept) > 300


def test_fires_older_than_max_age_are_never_shown_and_leave_the_disk(tmp_path: Path) -> None:
    settings = ActivitySettings(max_age_days=1)
    record = ActivityLog(tmp_path, settings)
    record.append(fire("three days ago", at=NOW - 3 * DAY))
    record.append(fire("two days ago", at=NOW - 2 * DAY))
    assert commands(record) == []  # on disk still, never shown
    record.append(fire("now"))  # the file's oldest is too old: a new file starts
    record.append(fire("now again"))  # the old file's newest is too old: removed
    assert commands(record) == ["now again", "now"]
    assert b"days ago" not in on_disk(tmp_path)
    assert not (tmp_path / OLD_FILE_NAME).exists()


def test_the_fires_of_before_a_restart_count_toward_the_bound(tmp_path: Path) -> None:
    record = ActivityLog(tmp_path)
    for number in range(80):
        record.append(fire(f"before {number}", at=NOW + number))
    record.close()
    settings = ActivitySettings(max_fires=100)  # 50 a file: the 80 are too many
    reopened = ActivityLog(tmp_path, settings)
    assert reopened.counting is not None
    reopened.counting.join()  # counted off the event loop
    for number in range(60):
        reopened.append(fire(f"after {number}", at=NOW + 100 + number))
    assert b"before" not in on_disk(tmp_path)
    assert on_disk(tmp_path).count(b"\n") == 60


def test_an_old_file_of_before_a_restart_goes_when_too_old(tmp_path: Path) -> None:
    """The file a restart found over its bound becomes the old one at the first fire,
    and goes once its newest fire is too old (its times read from the file)."""
    record = ActivityLog(tmp_path)
    for number in range(3):
        record.append(fire(f"before {number}", at=NOW - 3 * DAY + number))
    record.close()
    reopened = ActivityLog(tmp_path, ActivitySettings(max_age_days=1))
    reopened.append(fire("now"))  # the current file's oldest is too old: rotated
    assert (tmp_path / OLD_FILE_NAME).exists()
    reopened.append(fire("now again"))  # the old file's newest is too old: removed
    assert not (tmp_path / OLD_FILE_NAME).exists()
    assert commands(reopened) == ["now again", "now"]


def test_lowered_bounds_apply_from_the_next_fire(tmp_path: Path) -> None:
    record = ActivityLog(tmp_path)
    for number in range(400):
        record.append(fire(f"c{number}", at=NOW + number))
    record.reconfigure(ActivitySettings(max_fires=100))
    for number in range(400, 700):
        record.append(fire(f"c{number}", at=NOW + number))
    assert 50 <= len(commands(record)) <= 100 + 400  # the old file goes with the next rotation
    assert on_disk(tmp_path).count(b"\n") <= 150


def test_with_on_disk_off_the_record_is_in_memory_only(tmp_path: Path) -> None:
    record = ActivityLog(tmp_path, ActivitySettings(on_disk=False))
    record.append(fire())
    assert commands(record) == ["git commit -m x"]
    assert not (tmp_path / FILE_NAME).exists()
    assert record.not_kept is not None
    assert "on_disk = false" in record.not_kept


def test_a_reload_turning_on_disk_off_stops_the_writes_and_on_starts_them(tmp_path: Path) -> None:
    record = ActivityLog(tmp_path)
    record.append(fire("kept"))
    record.reconfigure(ActivitySettings(on_disk=False))
    record.append(fire("private"))
    assert b"private" not in on_disk(tmp_path)
    record.reconfigure(ActivitySettings())
    record.append(fire("kept again"))
    assert commands(ActivityLog(tmp_path)) == ["kept again", "kept"]


# ------------------------------------------------------------------ filters


@pytest.fixture
def filled(tmp_path: Path) -> ActivityLog:
    record = ActivityLog(tmp_path)
    for entry in (
        fire("old", at=NOW - 3 * 3600, session="aaa-111"),
        fire("codex push", agent="codex", session="bbb-222", actions=("git-push",)),
        fire("sibling", cwd="/home/u/repo-other", session="aaa-111"),
        fire("deeper", cwd="/home/u//repo/./src", session="aaa-222"),  # as an agent may say it
        fire("doctor", session="doctor-1", test=True),
    ):
        record.append(entry)
    return record


def shown(record: ActivityLog, **fields: object) -> list[str]:
    """The commands `mentectl log` is answered (test fires left out unless asked for)."""
    fields.setdefault("include_tests", False)
    reply = log_reply(record, LogRequest(n=100, **fields))  # type: ignore[arg-type]
    assert isinstance(reply, LogReply)
    return [f.command for f in reply.fires]


def test_without_filters_every_fire_but_the_test_fires(filled: ActivityLog) -> None:
    assert shown(filled) == ["deeper", "sibling", "codex push", "old"]
    assert shown(filled, include_tests=True) == ["doctor", "deeper", "sibling", "codex push", "old"]


def test_a_request_without_the_filters_is_answered_as_before(filled: ActivityLog) -> None:
    """An older client (`mentectl doctor` of before, looking for its test fire): every
    fire, newest first, the test fires with them."""
    reply = log_reply(filled, LogRequest(n=2))
    assert isinstance(reply, LogReply)
    assert [f.command for f in reply.fires] == ["doctor", "deeper"]


def test_the_daemon_filters_by_session_agent_project_action_and_time(
    filled: ActivityLog,
) -> None:
    assert shown(filled, session="aaa-111") == ["sibling", "old"]
    assert shown(filled, session="aaa") == ["deeper", "sibling", "old"]  # how it begins
    assert shown(filled, agent="codex") == ["codex push"]
    assert shown(filled, agent="cursor") == []
    # In the directory or under it; not a sibling whose name begins the same.
    assert shown(filled, project="/home/u/repo") == ["deeper", "codex push", "old"]
    assert shown(filled, project="/home/u/repo/src/") == ["deeper"]
    assert shown(filled, project="/") == ["deeper", "sibling", "codex push", "old"]
    assert shown(filled, action="git-push") == ["codex push"]
    assert shown(filled, since=NOW - 3600) == ["deeper", "sibling", "codex push"]
    assert shown(filled, session="aaa", since=NOW - 3600, project="/home/u/repo") == ["deeper"]
    assert shown(filled, session="doctor", include_tests=True) == ["doctor"]


def test_filters_over_many_blocks_find_what_a_plain_scan_finds(tmp_path: Path) -> None:
    """Read backwards block by block, blocks without a filter's words skipped: the
    same fires as decoding every one, in the same order, across the two files."""
    record = ActivityLog(tmp_path, ActivitySettings(max_mib=1))
    every = [
        fire(
            f"c{number} " + "y" * (number % 700),
            at=NOW - 5000 + number,
            agent=("claude-code", "codex", "cursor")[number % 3],
            session=f"s{number % 7}-{number % 2}",
            cwd=("/home/u/repo", "/home/u/repo/src", "/srv/other")[number % 5 % 3],
            actions=(("git-commit",), ("git-push",), ())[number % 4 % 3],
            test=number % 11 == 0,
        )
        for number in range(3000)  # about 1.5 MiB, in blocks of 64 KiB
    ]
    for entry in every:
        record.append(entry)
    assert (tmp_path / OLD_FILE_NAME).exists()
    kept = set(commands(record, FireFilter(include_tests=True)))
    assert 1000 < len(kept) < len(every)
    every = [entry for entry in every if entry.command in kept]
    for wanted in (
        FireFilter(agent="codex"),
        FireFilter(session="s3"),
        FireFilter(session="s3-1", action="git-push"),
        FireFilter(project="/home/u/repo/src", include_tests=True),
        FireFilter(since=NOW - 400, agent="cursor"),
        FireFilter(action="git-commit", project="/srv/other", since=NOW - 2500),
    ):
        expected = [f.command for f in reversed(every) if wanted.matches(f)]
        assert commands(record, wanted) == expected, wanted
        assert commands(record, wanted, n=5) == expected[:5], wanted


def test_since_reads_past_a_clock_set_back(tmp_path: Path) -> None:
    record = ActivityLog(tmp_path)
    record.append(fire("before", at=NOW - 100))
    record.append(fire("clock set back", at=NOW - 300))
    record.append(fire("after", at=NOW - 50))
    assert commands(record, FireFilter(since=NOW - 150)) == ["after", "before"]


def test_a_relative_project_is_refused(filled: ActivityLog) -> None:
    reply = log_reply(filled, LogRequest(project="repo"))
    assert isinstance(reply, ErrorReply)
    assert reply.code == ErrorCode.BAD_REQUEST
    assert "absolute" in reply.message


def test_a_larger_answer_than_a_frame_holds_says_there_is_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = ActivityLog(tmp_path)
    for number in range(50):
        record.append(fire(f"c{number}", at=NOW + number))
    monkeypatch.setattr(activity, "MAX_REPLY_BYTES", 2000)
    fires, more = record.query(FireFilter(), 50)
    assert more
    assert 0 < len(fires) < 50


@pytest.mark.parametrize(
    ("text", "seconds_ago"), [("90s", 90), ("30m", 1800), ("2h", 7200), ("7d", 7 * DAY)]
)
def test_since_takes_a_duration_back_from_now(text: str, seconds_ago: float) -> None:
    assert since_option(text, now=NOW) == NOW - seconds_ago


def test_since_takes_an_iso_time_local_unless_it_has_an_offset() -> None:
    assert since_option("2026-12-01T09:00:00Z") == datetime(2026, 12, 1, 9, tzinfo=UTC).timestamp()
    assert since_option("2026-12-01T09:00") == datetime(2026, 12, 1, 9).timestamp()  # noqa: DTZ001


def test_since_says_what_it_takes_for_anything_else() -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        since_option("yesterday")
    assert "'yesterday' is neither a duration nor an ISO time" in str(refused.value)
    assert "2h" in str(refused.value)


# ------------------------------------------------------------------ robust


def test_a_torn_last_line_is_skipped_and_the_next_fire_starts_a_new_one(tmp_path: Path) -> None:
    record = ActivityLog(tmp_path)
    record.append(fire("first"))
    record.append(fire("second"))
    record.close()
    with (tmp_path / FILE_NAME).open("ab") as file:  # a daemon killed in a write
        file.write(b'{"time":1764486100.0,"agent":"claude-code","command":"tor')

    reopened = ActivityLog(tmp_path)
    assert commands(reopened) == ["second", "first"]
    reopened.append(fire("third"))
    reopened.close()
    assert commands(ActivityLog(tmp_path)) == ["third", "second", "first"]


def test_a_symlinked_record_is_refused_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    line = b'{"time":%f,"agent":"codex","command":"planted"}\n' % NOW
    target.write_bytes(line)
    data = tmp_path / "data"
    data.mkdir()
    (data / FILE_NAME).symlink_to(target)
    (data / OLD_FILE_NAME).symlink_to(target)

    record = ActivityLog(data)
    record.append(fire("mine"))
    assert target.read_bytes() == line  # nothing written through the link
    assert (data / FILE_NAME).is_symlink()
    assert commands(record) == ["mine"]  # in memory; the planted fire is never read
    assert record.not_kept is not None
    assert "is a symbolic link: refused, not followed" in record.not_kept
    assert "remove it" in record.not_kept


def test_a_symlinked_old_file_is_not_read(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b'{"time":%f,"agent":"codex","command":"planted"}\n' % NOW)
    data = tmp_path / "data"
    data.mkdir()
    (data / OLD_FILE_NAME).symlink_to(target)
    record = ActivityLog(data)
    record.append(fire("mine"))
    assert commands(record) == ["mine"]
    assert record.not_kept is None


def test_a_named_pipe_in_its_place_is_refused_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / FILE_NAME)
    record = ActivityLog(tmp_path)
    record.append(fire())
    assert record.not_kept is not None
    assert "is a named pipe" in record.not_kept
    assert commands(record) == ["git commit -m x"]


def test_another_users_file_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another user")
    (tmp_path / FILE_NAME).write_bytes(b"")
    os.chown(tmp_path / FILE_NAME, 65534, 65534)
    record = ActivityLog(tmp_path)
    record.append(fire())
    assert (tmp_path / FILE_NAME).read_bytes() == b""
    assert record.not_kept is not None
    assert "owned by another user (uid 65534)" in record.not_kept


def test_on_a_full_disk_the_hook_still_answers_and_the_record_resumes(
    tmp_path: Path, store: Store, sessions: SessionMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "activity").mkdir()
    record = ActivityLog(tmp_path / "activity")
    config = Config()
    hooks = HookHandler(
        store, Matcher(load_action_table(config)), config, sessions, on_fire=record.append
    )
    store.store("One line.", tags=["trigger:git-commit"])

    def no_room(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(activity, "_write", no_room)
    out = hooks.handle("claude-code", pretooluse_event("git commit -m a", cwd="/tmp", session="s1"))
    assert b"One line." in out  # the hook answered as ever
    assert commands(record) == ["git commit -m a"]  # from memory
    assert record.not_kept is not None
    assert "No space left on device" in record.not_kept

    monkeypatch.setattr(activity, "_write", os.write)
    monkeypatch.setattr(activity, "RETRY_S", 0.0)
    record._retry_at = 0.0  # the retry is due (the test waits for no clock)
    hooks.handle("claude-code", pretooluse_event("git commit -m b", cwd="/tmp", session="s1"))
    assert record.not_kept is None
    assert commands(record) == ["git commit -m b"]  # the one while full was lost from disk
    assert on_disk(tmp_path / "activity").startswith(b"{")


# ------------------------------------------------------------------ test fires


def test_a_test_fire_is_no_part_of_the_record_of_whether_rules_are_kept(
    store: Store, sessions: SessionMemory
) -> None:
    """`mentectl doctor`'s sample commit fails the user's check: stopped, but not counted
    (before: a `stopped` in `mentectl report` for each doctor run)."""
    config = Config()
    hooks = HookHandler(store, Matcher(load_action_table(config)), config, sessions)
    compliance = ComplianceRecord(None)
    hooks.prechecks.compliance = compliance
    store.store("Conventional.", tags=["trigger:git-commit"], checks=["subject matches ^fix"])
    doctor = pretooluse_event(
        "git commit -m 'mented doctor: test fire'", cwd="/tmp", session="doctor"
    )
    out = hooks.handle_decoded("claude-code", decode_event("claude-code", doctor), test=True)
    assert b"deny" in out
    assert compliance.summary().total.checked == 0
    assert compliance.summary().total.handed == 0

    user = pretooluse_event("git commit -m 'mented: x'", cwd="/tmp", session="mine")
    hooks.handle("claude-code", user)
    assert compliance.summary().total.stopped == 1
