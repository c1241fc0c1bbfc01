"""SIGKILL the real daemon in the middle of rule writes, many times; lose nothing acknowledged.

Each round lets writer threads store, supersede and forget rules over the
socket and kills the daemon with SIGKILL at a random moment. The next daemon
starts on what was left, and the LMDB environment is walked directly: every
write acknowledged before the kill is there, the one write per writer that was
in flight when the daemon died is either wholly there or wholly absent (a
record without its index entry, or the reverse, fails the test), and the
counters agree with the records. The new daemon must answer the same through
the store API (recall for every action, reads, status counts).

This test process keeps the environment open the whole time, with a reader
table of only 8 slots. That is what a second process reading the store (a
backup, an inspection tool) does, and it stops LMDB from quietly resetting the
reader table when the daemon starts alone: each killed daemon leaves a stale
reader slot that only `reader_check()` at start clears. Twelve rounds through
an 8-slot table show that repeated crashes never exhaust it.

The data files that are not the daemon's (not LMDB, another program's LMDB, a
newer schema) are refused at start and left byte for byte as they were.

`MENTED_KILL_ROUNDS` sets the number of rounds (12 by default). When
`MENTED_RELIABILITY_REPORT` names a file, the figures are appended to it as
JSON lines (`python -m tests.reliability` collects them; docs/reliability.md).
"""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import lmdb
import msgspec
import pytest

from mented.memory import Memory
from mented.protocol import (
    ForgetRequest,
    ForgottenReply,
    GetRequest,
    MemoriesReply,
    MemoryReply,
    RecallRequest,
    StatusReply,
    StatusRequest,
    StoredReply,
    StoreRequest,
    SupersededReply,
    SupersedeRequest,
)
from mented.store import Store, StoreOpenError
from mented_client.connection import Client, DaemonError, NotRunningError, ProtocolError
from tests.conftest import DaemonProcess
from tests.reliability import record_figures, start_refused

KILL_ROUNDS = int(os.environ.get("MENTED_KILL_ROUNDS", "12"))
WRITERS = 3
ACTIONS = ("git-commit", "git-push", "pr-create", "npm-publish")
READER_SLOTS = 8  # the reader table this test gives the environment
SUB_DATABASES = {
    b"memories",
    b"triggers",
    b"handles",
    b"actions",
    b"meta",
    b"forgotten",
    b"successors",
    b"pinned",
    b"changes",
    b"synced",
}

_memory_decoder = msgspec.msgpack.Decoder(Memory)


# ------------------------------------------------------------------ the ledger


@dataclass
class Rule:
    """What a writer knows about one of its rules."""

    content: str
    action: str
    superseded_by: str | None = None  # set once the supersede was acknowledged


@dataclass
class InFlight:
    """The write a writer had sent when the daemon died: its outcome is unknown."""

    kind: str  # "store", "supersede" or "forget"
    content: str | None = None
    action: str | None = None
    target: str | None = None


@dataclass
class Ledger:
    """Every acknowledged write, and the writes in doubt after a kill."""

    rules: dict[str, Rule] = field(default_factory=dict)
    in_flight: list[InFlight] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    acknowledged: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def live_ids(self, action: str | None = None) -> set[str]:
        return {
            rule_id
            for rule_id, rule in self.rules.items()
            if rule.superseded_by is None and (action is None or rule.action == action)
        }


def write_until_killed(
    daemon: DaemonProcess, ledger: Ledger, writer: int, round_no: int, started: threading.Event
) -> None:
    """Store, supersede and forget this writer's rules until the daemon dies."""
    rng = random.Random(f"{round_no}-{writer}")
    mine: list[str] = []  # this writer's live rules: no other writer touches them
    with daemon.client(timeout=5.0) as client:
        for n in range(1_000_000):
            content = f"round {round_no} writer {writer} write {n}: keep commits small"
            roll = rng.random()
            if mine and roll < 0.25:
                op = InFlight("supersede", content=content, target=rng.choice(mine))
            elif mine and roll < 0.35:
                op = InFlight("forget", target=rng.choice(mine))
            else:
                op = InFlight("store", content=content, action=rng.choice(ACTIONS))
            try:
                acknowledge(client, op, ledger, mine)
            except (NotRunningError, ProtocolError):
                with ledger.lock:
                    ledger.in_flight.append(op)
                return
            except DaemonError as exc:
                with ledger.lock:
                    ledger.errors.append(f"{op}: {exc.code} {exc.message}")
                return
            if n == 3:
                started.set()


def acknowledge(client: Client, op: InFlight, ledger: Ledger, mine: list[str]) -> None:
    """Send `op` and enter it in the ledger once the daemon acknowledged it."""
    if op.kind == "store":
        assert op.content is not None
        assert op.action is not None
        stored = client.expect(
            StoreRequest(content=op.content, tags=[f"trigger:{op.action}"]), StoredReply
        )
        with ledger.lock:
            ledger.rules[stored.id] = Rule(op.content, op.action)
            ledger.acknowledged += 1
        mine.append(stored.id)
    elif op.kind == "supersede":
        assert op.target is not None
        assert op.content is not None
        replaced = client.expect(
            SupersedeRequest(id=op.target, content=op.content), SupersededReply
        )
        with ledger.lock:
            old = ledger.rules[op.target]
            old.superseded_by = replaced.id
            ledger.rules[replaced.id] = Rule(op.content, old.action)
            ledger.acknowledged += 1
        mine.remove(op.target)
        mine.append(replaced.id)
    else:
        assert op.target is not None
        client.expect(ForgetRequest(id=op.target), ForgottenReply)
        with ledger.lock:
            del ledger.rules[op.target]
            ledger.acknowledged += 1
        mine.remove(op.target)


# ------------------------------------------------------- the environment itself


@dataclass
class Snapshot:
    """Every sub-database of the environment, read in one transaction."""

    memories: dict[str, Memory]
    triggers: dict[bytes, bytes]
    handles: set[bytes]
    action_counts: dict[str, int]
    live_rules_counter: int
    forgotten: set[str]
    successors: set[tuple[str, str]]
    pinned: set[bytes]  # the ids in the pinned-rule index


def read_snapshot(env: lmdb.Environment) -> Snapshot:
    """Walk every key of every sub-database; fails on anything unreadable."""
    try:
        return _walk(env)
    except lmdb.MapResizedError:
        env.set_mapsize(0)  # the daemon grew the map: adopt its size
        return _walk(env)


def _walk(env: lmdb.Environment) -> Snapshot:
    with env.begin() as txn:
        names = {key for key, _ in txn.cursor()}
        assert names == SUB_DATABASES, f"unexpected sub-databases: {sorted(names)}"
        dbs = {name: env.open_db(name, txn=txn, create=False) for name in names}
        memories = {}
        for key, value in txn.cursor(dbs[b"memories"]):
            memory = _memory_decoder.decode(value)
            assert memory.id == key.decode()
            memories[memory.id] = memory
        triggers = dict(txn.cursor(dbs[b"triggers"]))
        handles = {key for key, _ in txn.cursor(dbs[b"handles"])}
        counts = {
            key.decode(): int.from_bytes(value, "big") for key, value in txn.cursor(dbs[b"actions"])
        }
        meta = dict(txn.cursor(dbs[b"meta"]))
        forgotten = {key.decode() for key, _ in txn.cursor(dbs[b"forgotten"])}
        successors = {
            (key[:26].decode(), key[26:].decode()) for key, _ in txn.cursor(dbs[b"successors"])
        }
        pinned = {value for _, value in txn.cursor(dbs[b"pinned"])}
    return Snapshot(
        memories=memories,
        triggers=triggers,
        handles=handles,
        action_counts=counts,
        live_rules_counter=int.from_bytes(meta.get(b"live_rules", b""), "big"),
        forgotten=forgotten,
        successors=successors,
        pinned=pinned,
    )


def inconsistencies(snap: Snapshot) -> list[str]:
    """Whatever makes the store disagree with itself: half of a write without the other."""
    problems = []
    live_pairs = {
        (action, memory.id)
        for memory in snap.memories.values()
        if memory.is_live
        for action in memory.actions
    }
    indexed_pairs = set()
    for key, value in snap.triggers.items():
        action = key.split(b"\0", 1)[0].decode()
        indexed_pairs.add((action, value.decode()))
    for action, memory_id in sorted(live_pairs - indexed_pairs):
        problems.append(f"live rule {memory_id} for {action} is missing from the trigger index")
    for action, memory_id in sorted(indexed_pairs - live_pairs):
        problems.append(f"trigger index has {action} -> {memory_id}, which is not a live rule")
    if len(indexed_pairs) != len(snap.triggers):
        problems.append("the trigger index has duplicate entries")
    handles = {memory_id[::-1].encode() for memory_id in snap.memories}
    if handles != snap.handles:
        problems.append(f"handles differ from records: {sorted(handles ^ snap.handles)[:5]}")
    counts: dict[str, int] = {}
    for action, _ in live_pairs:
        counts[action] = counts.get(action, 0) + 1
    if counts != snap.action_counts:
        problems.append(f"per-action counts {snap.action_counts} != live rules {counts}")
    live_rules = sum(1 for m in snap.memories.values() if m.is_live and m.actions)
    if live_rules != snap.live_rules_counter:
        problems.append(f"live_rules counter {snap.live_rules_counter} != {live_rules}")
    if both := sorted(snap.forgotten & set(snap.memories)):
        problems.append(f"forgotten and still there: {both[:5]}")
    live_pinned = {m.id.encode() for m in snap.memories.values() if m.is_live and m.is_pinned}
    if live_pinned != snap.pinned:
        problems.append(f"pinned index {sorted(snap.pinned)} != live pinned rules")
    for memory in snap.memories.values():
        if memory.supersedes and (memory.supersedes, memory.id) not in snap.successors:
            problems.append(f"{memory.id} supersedes {memory.supersedes}: not in the successors")
        after = snap.memories.get(memory.superseded_by or "")
        if after is not None and after.supersedes != memory.id:
            problems.append(f"{memory.id} -> {after.id} is linked one way only")
        before = snap.memories.get(memory.supersedes or "")
        if before is not None and before.superseded_by != memory.id:
            problems.append(f"{memory.id} supersedes {before.id}, which does not know it")
    return problems


def settle(ledger: Ledger, snap: Snapshot) -> int:
    """Decide each in-flight write from what the kill left: wholly done or not at all.

    Returns:
        How many of them had committed although their answer never arrived.
    """
    by_content = {m.content: m for m in snap.memories.values()}
    landed = 0
    for op in ledger.in_flight:
        if op.kind == "store":
            assert op.content is not None
            assert op.action is not None
            found = by_content.get(op.content)
            if found is not None:
                assert found.actions == (op.action,)
                ledger.rules[found.id] = Rule(op.content, op.action)
                landed += 1
        elif op.kind == "supersede":
            assert op.target is not None
            assert op.content is not None
            old = snap.memories[op.target]
            found = by_content.get(op.content)
            if found is None:
                assert old.is_live, f"{old.id} was retired by a supersede that never landed"
            else:
                assert found.supersedes == old.id
                assert old.superseded_by == found.id
                ledger.rules[op.target].superseded_by = found.id
                ledger.rules[found.id] = Rule(op.content, ledger.rules[op.target].action)
                landed += 1
        elif op.target not in snap.memories:
            del ledger.rules[op.target or ""]
            landed += 1
    ledger.in_flight.clear()
    return landed


def assert_matches_ledger(ledger: Ledger, snap: Snapshot) -> None:
    """The environment holds exactly the acknowledged (and settled) writes."""
    assert set(snap.memories) == set(ledger.rules), (
        f"lost: {sorted(set(ledger.rules) - set(snap.memories))[:5]}, "
        f"unexpected: {sorted(set(snap.memories) - set(ledger.rules))[:5]}"
    )
    for rule_id, rule in ledger.rules.items():
        memory = snap.memories[rule_id]
        assert memory.content == rule.content
        assert memory.actions == (rule.action,)
        assert memory.superseded_by == rule.superseded_by


def reader_pids(env: lmdb.Environment) -> list[int]:
    """The pids holding slots in the environment's reader table."""
    return [int(match) for match in re.findall(r"^\s*(\d+)\s", env.readers(), re.MULTILINE)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def shared_env(short_tmp: Path) -> Iterator[tuple[DaemonProcess, lmdb.Environment]]:
    """A daemon's data directory, held open by this process with an 8-slot reader table."""
    daemon = DaemonProcess(short_tmp)
    daemon.start()
    assert daemon.stop(signal.SIGTERM) == 0
    # The table is sized by whoever creates the lock file; with this process holding
    # the environment open, every later daemon opens it shared and keeps that size.
    (daemon.data_dir / "lock.mdb").unlink()
    env = lmdb.open(
        str(daemon.data_dir), max_readers=READER_SLOTS, max_dbs=12, create=False, subdir=True
    )
    try:
        yield daemon, env
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait()
        env.close()


def assert_served_by(daemon: DaemonProcess, ledger: Ledger, touched: set[str]) -> None:
    """Through the daemon's store API: each live rule is found by its trigger, newest
    first, and nothing else is; this round's records read back whole; the counts agree."""
    with daemon.client() as client:
        for action in ACTIONS:
            found = client.expect(RecallRequest(action=action, k=1_000_000), MemoriesReply)
            assert {m.id for m in found.memories} == ledger.live_ids(action)
            times = [m.created_at for m in found.memories]
            assert times == sorted(times, reverse=True)
        for memory_id in touched & set(ledger.rules):
            memory = client.expect(GetRequest(id=memory_id), MemoryReply).memory
            assert memory.content == ledger.rules[memory_id].content
            assert memory.superseded_by == ledger.rules[memory_id].superseded_by
        status = client.expect(StatusRequest(), StatusReply)
        assert status.memories == len(ledger.rules)
        assert status.live_rules == len(ledger.live_ids())


def burst_then_kill(daemon: DaemonProcess, ledger: Ledger, round_no: int, pause: float) -> None:
    """Writers write until the daemon is SIGKILLed, `pause` seconds into the burst."""
    started = threading.Event()
    writers = [
        threading.Thread(target=write_until_killed, args=(daemon, ledger, w, round_no, started))
        for w in range(WRITERS)
    ]
    for writer in writers:
        writer.start()
    assert started.wait(10), daemon.log()
    time.sleep(pause)
    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    for writer in writers:
        writer.join(10)
    assert not ledger.errors


def test_sigkill_mid_write_loses_nothing_acknowledged_and_leaves_nothing_half_done(
    shared_env: tuple[DaemonProcess, lmdb.Environment],
) -> None:
    daemon, env = shared_env
    ledger = Ledger()
    rng = random.Random(7)
    in_doubt = landed = 0
    proc = daemon.start()
    for round_no in range(KILL_ROUNDS):
        before = {rule_id: rule.superseded_by for rule_id, rule in ledger.rules.items()}
        burst_then_kill(daemon, ledger, round_no, rng.uniform(0.02, 0.3))
        # The dead daemon's reader slot is still taken: the table needs clearing.
        assert proc.pid in reader_pids(env), env.readers()

        proc = daemon.start()
        # ...and the new daemon's reader_check() cleared it.
        assert not [pid for pid in reader_pids(env) if not alive(pid)], env.readers()
        # Read after the restart, not straight after the kill: a transaction that
        # reached the disk just before the kill is published to other readers of
        # the environment only once the next writer recovers LMDB's write lock.
        snap = read_snapshot(env)
        assert inconsistencies(snap) == []
        in_doubt += len(ledger.in_flight)
        landed += settle(ledger, snap)
        assert_matches_ledger(ledger, snap)
        touched = {i for i, rule in ledger.rules.items() if before.get(i, "") != rule.superseded_by}
        assert_served_by(daemon, ledger, touched)

    assert daemon.stop(signal.SIGTERM) == 0
    assert len(ledger.live_ids()) > KILL_ROUNDS  # the rounds really wrote
    record_figures(
        "crash_safety",
        kill_rounds=KILL_ROUNDS,
        writes_acknowledged=ledger.acknowledged,
        memories_after_last_round=len(ledger.rules),
        writes_in_flight_at_kills=in_doubt,
        in_flight_writes_that_had_committed=landed,
        reader_slots=READER_SLOTS,
    )


# -------------------------------------------------------- refusing foreign data


def snapshot_files(directory: Path) -> dict[str, bytes]:
    """The store's files, byte for byte (the session memory's directory is not the store)."""
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


@pytest.mark.parametrize(
    "foreign",
    [
        pytest.param(os.urandom(64 * 1024), id="random-bytes"),
        pytest.param(b"SQLite format 3\0" + bytes(4080), id="sqlite-file"),
    ],
)
def test_a_data_file_that_is_not_lmdb_is_refused_and_left_untouched(
    short_tmp: Path, foreign: bytes
) -> None:
    daemon = DaemonProcess(short_tmp)
    daemon.data_dir.mkdir(mode=0o700)
    (daemon.data_dir / "data.mdb").write_bytes(foreign)
    log = start_refused(daemon)
    assert "is not an LMDB database file" in log
    assert "left it untouched" in log
    assert (daemon.data_dir / "data.mdb").read_bytes() == foreign
    assert not (daemon.data_dir / "lock.mdb").exists()
    assert not daemon.socket.exists()


def test_a_store_from_a_newer_schema_is_refused_and_left_untouched(short_tmp: Path) -> None:
    daemon = DaemonProcess(short_tmp)
    daemon.start()
    with daemon.client() as client:
        client.expect(StoreRequest(content="one line", tags=["trigger:git-commit"]), StoredReply)
    assert daemon.stop() == 0
    env = lmdb.open(str(daemon.data_dir), max_dbs=12, create=False)
    with env.begin(write=True) as txn:
        meta = env.open_db(b"meta", txn=txn, create=False)
        txn.put(b"schema_version", b"99", db=meta)
    env.close()
    before = snapshot_files(daemon.data_dir)
    log = start_refused(daemon)
    assert "newer mented (schema 99" in log
    assert "upgrade mented" in log
    after = snapshot_files(daemon.data_dir)
    assert after["data.mdb"] == before["data.mdb"]
    with pytest.raises(StoreOpenError):  # and it still says so: nothing was migrated
        Store(daemon.data_dir)


def test_an_lmdb_environment_that_is_not_a_mented_store_is_refused(short_tmp: Path) -> None:
    daemon = DaemonProcess(short_tmp)
    env = lmdb.open(str(daemon.data_dir), max_dbs=2)
    with env.begin(write=True) as txn:
        txn.put(b"someone", b"else's data")
    env.close()
    before = (daemon.data_dir / "data.mdb").read_bytes()
    log = start_refused(daemon)
    assert "not a mented store" in log
    assert (daemon.data_dir / "data.mdb").read_bytes() == before
