"""SessionMemory: what each agent session was handed, bounded, expiring, kept across restarts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mented import sessions as sessions_module
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


def test_touch_never_brings_back_an_expired_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent idle past the expiry has the rules out of its context: a hook then must
    # hand them over again, not revive what the session was handed before.
    memory = SessionMemory(tmp_path, ttl_s=60)
    memory.add(A, ["r1"])
    start = time.time()
    monkeypatch.setattr(time, "time", lambda: start + 61)
    memory.touch(A)
    assert memory.handed(A) == set()
    monkeypatch.setattr(time, "time", lambda: start + 70)
    assert memory.handed(A) == set()


def test_withdrawing_from_an_expired_session_brings_nothing_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = SessionMemory(tmp_path, ttl_s=60)
    memory.add(A, ["r1", "r2"])
    memory.withdraw(A, ["r2"])  # the answer handing r2 over came too late
    assert memory.handed(A) == {"r1"}
    start = time.time()
    monkeypatch.setattr(time, "time", lambda: start + 61)
    memory.withdraw(A, ["r1"])
    assert memory.handed(A) == set()


def test_forgotten_sessions_leave_the_bound_whole(tmp_path: Path) -> None:
    # A forgotten session (a compacted context) must not count as a drop later: the
    # bound on the sessions kept holds after any number of forgets.
    memory = SessionMemory(tmp_path, ttl_s=60, max_sessions=3)
    for n in range(3):
        memory.add(SessionKey("codex", f"old{n}"), ["r"])
    for n in range(3):
        assert memory.forget(SessionKey("codex", f"old{n}"))
    for n in range(6):
        memory.add(SessionKey("codex", f"new{n}"), [f"r{n}"])
        assert len(memory) <= 3
    assert memory.handed(SessionKey("codex", "new5")) == {"r5"}


def test_an_unreadable_entry_is_a_new_session_not_an_error(tmp_path: Path) -> None:
    # A damaged entry must not make every hook of that session fail: it is a session
    # mented knows nothing of, and the next hand-over replaces it.
    memory = SessionMemory(tmp_path, ttl_s=60)
    with memory._env.begin(write=True) as txn:  # damage one entry
        txn.put(A.digest, b"\xc1 not msgpack")
    assert memory.handed(A) == set()
    memory.add(A, ["r1"])
    assert memory.handed(A) == {"r1"}


def test_a_full_memory_makes_room_and_keeps_the_session_being_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past its map, the memory drops the sessions nearest to expiry (half of the
    # bound) and writes on: a hook never fails for a full session memory.
    monkeypatch.setattr(sessions_module, "_MAP_SIZE", 1 << 20)
    memory = SessionMemory(tmp_path, ttl_s=60, max_sessions=1000)
    ids = [f"{n:026d}" for n in range(400)]
    for n in range(100):  # 100 x 400 ids x 27 bytes: past the map, under the bound
        memory.add(SessionKey("codex", f"s{n}"), ids)
    newest = SessionKey("codex", "s99")
    assert memory.handed(newest) == set(ids)
    assert 0 < len(memory) < 100
    assert memory.handed(SessionKey("codex", "s0")) == set()  # the oldest went first


def test_a_full_bound_keeps_exactly_the_newest_sessions(tmp_path: Path) -> None:
    memory = SessionMemory(tmp_path, ttl_s=60, max_sessions=3)
    for n in range(5):
        memory.add(SessionKey("codex", f"s{n}"), [f"r{n}"])
        assert len(memory) == min(n + 1, 3)  # at the bound, one goes: not two
    for n in (2, 3, 4):
        assert memory.handed(SessionKey("codex", f"s{n}")) == {f"r{n}"}


def test_a_lower_bound_never_drops_the_session_being_written(tmp_path: Path) -> None:
    # Reopened with a lower bound, the oldest session is written to first: the others
    # go, never the one whose rules were just handed over.
    memory = SessionMemory(tmp_path, ttl_s=60, max_sessions=5)
    for n in range(5):
        memory.add(SessionKey("codex", f"s{n}"), [f"r{n}"])
    memory.close()
    smaller = SessionMemory(tmp_path, ttl_s=60, max_sessions=2)
    smaller.add(SessionKey("codex", "s0"), ["new"])
    assert smaller.handed(SessionKey("codex", "s0")) == {"r0", "new"}
    assert len(smaller) <= 2


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


class CountingDecoder:
    """A session decoder that counts the entries it decodes."""

    def __init__(self, decoder: object) -> None:
        self.decoder = decoder
        self.calls = 0

    def decode(self, raw: bytes) -> object:
        self.calls += 1
        return self.decoder.decode(raw)  # type: ignore[attr-defined]


def test_a_new_session_past_the_bound_costs_the_same_however_many_are_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past the bound, each new session decoded and sorted every stored one (on the
    # event loop: 35 ms a hook at 4,096 sessions, up to 351 ms).
    memory = SessionMemory(tmp_path, ttl_s=3600, max_sessions=1000)
    for n in range(1000):
        memory.add(SessionKey("codex", f"s{n}"), [f"r{n}"])
    memory.add(SessionKey("codex", "s0"), ["again"])  # s0 now expires last
    counters = []
    for name in ("_decoder", "_expiry_decoder"):
        if hasattr(sessions_module, name):
            counter = CountingDecoder(getattr(sessions_module, name))
            monkeypatch.setattr(sessions_module, name, counter)
            counters.append(counter)
    for n in range(1000, 1200):
        memory.add(SessionKey("codex", f"s{n}"), [f"r{n}"])
    decoded = sum(counter.calls for counter in counters)
    assert decoded <= 200, f"{decoded} sessions decoded for 200 new ones"
    assert len(memory) == 1000
    # The nearest to expiry went: s1..s200; s0, written again, stayed.
    assert memory.handed(SessionKey("codex", "s0")) == {"r0", "again"}
    assert memory.handed(SessionKey("codex", "s200")) == set()
    assert memory.handed(SessionKey("codex", "s201")) == {"r201"}
    assert memory.handed(SessionKey("codex", "s1199")) == {"r1199"}
    memory.close()
    # Opened again, the expiry index is read from the file: the order holds.
    again = SessionMemory(tmp_path, ttl_s=3600, max_sessions=1000)
    again.add(SessionKey("codex", "new"), ["r"])
    assert again.handed(SessionKey("codex", "s201")) == set()
    assert again.handed(SessionKey("codex", "s0")) == {"r0", "again"}
    again.forget(SessionKey("codex", "s202"))
    again.add(SessionKey("codex", "newer"), ["r"])  # room made by the forget: none dropped
    assert again.handed(SessionKey("codex", "s203")) == {"r203"}
    assert len(again) == 1000
    again.close()


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


def test_a_session_is_expired_at_its_expiry_not_a_second_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1_000_000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    memory = SessionMemory(tmp_path, ttl_s=60)
    memory.add(A, ["r1"])
    clock[0] += 59.5
    assert memory.handed(A) == {"r1"}
    clock[0] += 0.5  # exactly ttl_s after the hand-over: the rules go out again
    assert memory.handed(A) == set()


def test_an_unreadable_entry_is_the_first_to_go_at_the_bound(tmp_path: Path) -> None:
    # A damaged entry is nobody's live session: at the bound it goes before any real one.
    memory = SessionMemory(tmp_path, ttl_s=60, max_sessions=3)
    for n in range(3):
        memory.add(SessionKey("codex", f"s{n}"), [f"r{n}"])
    with memory._env.begin(write=True) as txn:  # damage the newest one
        txn.put(SessionKey("codex", "s2").digest, b"\xc1 not msgpack")
    memory.close()
    reopened = SessionMemory(tmp_path, ttl_s=60, max_sessions=3)
    reopened.add(SessionKey("codex", "s3"), ["r3"])
    assert len(reopened) == 3
    for n in (0, 1, 3):
        assert reopened.handed(SessionKey("codex", f"s{n}")) == {f"r{n}"}


def test_a_write_too_big_for_the_map_keeps_what_the_session_was_handed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hand-over fails (delivery without stops), but the rules the session was
    # handed earlier are still known: they are not stopped for again.
    monkeypatch.setattr(sessions_module, "_MAP_SIZE", 1 << 20)
    memory = SessionMemory(tmp_path, ttl_s=60)
    memory.add(A, ["r1"])
    memory.add(SessionKey("codex", "other"), ["r2"])
    huge = [f"{n:0600d}" for n in range(MAX_RULES_PER_SESSION)]  # 1.2 MB: past the map
    with pytest.raises(SessionMemoryError, match="the session memory is full"):
        memory.add(A, huge)
    assert memory.handed(A) == {"r1"}


def test_withdrawing_a_rule_does_not_lengthen_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rest was handed when it was: it expires then, withdrawal or not.
    clock = [1_000_000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    memory = SessionMemory(tmp_path, ttl_s=60)
    memory.add(A, ["r1", "r2"])
    clock[0] += 50
    memory.withdraw(A, ["r2"])
    assert memory.handed(A) == {"r1"}
    clock[0] += 11
    assert memory.handed(A) == set()


def test_the_bound_holds_after_many_writes_to_one_session(tmp_path: Path) -> None:
    # Sessions dropped at the bound leave the expiry index: else the index, rebuilt
    # after enough writes, names them again, and dropping a session already gone
    # made room for nothing.
    memory = SessionMemory(tmp_path, ttl_s=60, max_sessions=3)
    for n in range(10):
        memory.add(SessionKey("codex", f"s{n}"), [f"r{n}"])
    for n in range(200):  # one busy session: a write per hook
        memory.add(SessionKey("codex", "s9"), [f"more{n}"])
    for n in range(10, 14):
        memory.add(SessionKey("codex", f"s{n}"), [f"r{n}"])
        assert len(memory) == 3
    assert memory.handed(SessionKey("codex", "s13")) == {"r13"}


def test_many_writes_to_one_session_keep_the_memory_flat(tmp_path: Path) -> None:
    # Each write pushes its expiry on the heap that picks whom to drop at the bound;
    # the heap is rebuilt from the index once mostly stale, so a long session (a write
    # per hook, for days) does not grow the daemon. Counted on the heap itself: the
    # lmdb binding's own allocations make a traced-memory measure too noisy.
    memory = SessionMemory(tmp_path, ttl_s=60)
    memory.add(SessionKey("codex", "other"), ["r2"])
    for _ in range(5000):
        memory.add(A, ["r1"])
    assert len(memory._by_expiry) <= 4 * len(memory) + 64
    assert memory.handed(A) == {"r1"}
