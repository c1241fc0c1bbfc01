"""SessionMemory: what each agent session was handed, bounded, expiring, kept across restarts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mented.sessions import MAX_RULES_PER_SESSION, SessionKey, SessionMemory, SessionMemoryError

A = SessionKey("claude-code", "session-a")


def test_handed_rules_are_remembered_per_agent_and_session(tmp_path: Path) -> None:
    memory = SessionMemory(tmp_path, ttl_s=60)
    memory.add(A, ["r1", "r2"])
    memory.add(A, ["r2", "r3"])
    assert memory.handed(A) == {"r1", "r2", "r3"}
    assert memory.handed(SessionKey("codex", "session-a")) == set()
    assert memory.handed(SessionKey("claude-code", "session-b")) == set()


def test_a_restart_keeps_what_was_handed(tmp_path: Path) -> None:
    memory = SessionMemory(tmp_path, ttl_s=60)
    memory.add(A, ["r1"])
    memory.close()
    reopened = SessionMemory(tmp_path, ttl_s=60)
    assert reopened.handed(A) == {"r1"}


def test_forget_empties_a_session(tmp_path: Path) -> None:
    memory = SessionMemory(tmp_path, ttl_s=60)
    memory.add(A, ["r1"])
    assert memory.forget(A) is True
    assert memory.handed(A) == set()
    assert memory.forget(A) is False


def test_sessions_expire(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = SessionMemory(tmp_path, ttl_s=60)
    memory.add(A, ["r1"])
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 61)
    assert memory.handed(A) == set()
    memory.add(A, ["r2"])  # an expired session starts over
    assert memory.handed(A) == {"r2"}


def test_touch_keeps_an_active_session_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = SessionMemory(tmp_path, ttl_s=60)
    memory.add(A, ["r1"])
    start = time.time()
    monkeypatch.setattr(time, "time", lambda: start + 40)
    memory.touch(A)
    monkeypatch.setattr(time, "time", lambda: start + 90)
    assert memory.handed(A) == {"r1"}


def test_the_number_of_sessions_is_bounded(tmp_path: Path) -> None:
    memory = SessionMemory(tmp_path, ttl_s=60, max_sessions=5)
    for n in range(20):
        memory.add(SessionKey("codex", f"s{n}"), [f"r{n}"])
    assert len(memory) <= 5
    assert memory.handed(SessionKey("codex", "s19")) == {"r19"}  # the newest stay
    assert memory.handed(SessionKey("codex", "s0")) == set()


def test_a_huge_session_id_is_stored_by_its_digest(tmp_path: Path) -> None:
    memory = SessionMemory(tmp_path, ttl_s=60)
    key = SessionKey("claude-code", "x" * 1_000_000)
    memory.add(key, ["r1"])
    assert memory.handed(key) == {"r1"}
    assert sum(f.stat().st_size for f in tmp_path.iterdir()) < 1_000_000


def test_an_unusable_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SessionMemoryError, match="cannot open the session memory"):
        SessionMemory(blocker / "sessions", ttl_s=60)


@pytest.mark.parametrize("keep", [100, 4096, 8192 + 100])
def test_a_damaged_file_is_moved_aside_and_the_memory_starts_empty(
    tmp_path: Path, keep: int
) -> None:
    memory = SessionMemory(tmp_path, ttl_s=60)
    for n in range(200):
        memory.add(SessionKey("codex", f"s{n}"), [f"r{n}" * 20])
    memory.close()
    data = tmp_path / "data.mdb"
    whole = data.read_bytes()
    data.write_bytes(whole[:keep])
    reopened = SessionMemory(tmp_path, ttl_s=60)
    assert reopened.handed(SessionKey("codex", "s1")) == set()
    reopened.add(A, ["r1"])
    assert reopened.handed(A) == {"r1"}
    assert (tmp_path / "data.mdb.damaged").read_bytes() == whole[:keep]


def test_past_the_bound_the_newest_rule_versions_are_the_ones_kept(tmp_path: Path) -> None:
    memory = SessionMemory(tmp_path, ttl_s=60)
    memory.add(A, [f"old-{n}" for n in range(MAX_RULES_PER_SESSION)])
    memory.add(A, ["newest"])
    handed = memory.handed(A)
    assert "newest" in handed  # else every later command is stopped for it again
    assert "old-0" not in handed  # the oldest went
    assert len(handed) == MAX_RULES_PER_SESSION
    memory.add(A, [f"batch-{n}" for n in range(MAX_RULES_PER_SESSION + 5)])
    assert f"batch-{MAX_RULES_PER_SESSION + 4}" in memory.handed(A)
