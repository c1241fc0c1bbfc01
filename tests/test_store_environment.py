"""The LMDB environment (`mented.store.environment`): files, durability, growth, failures."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
import pytest

import mented.store.environment as environment_module
import mented.store.layout as layout_module
from mented.memory import MAX_CONTENT_BYTES
from mented.store import (
    Store,
    StoreDamagedError,
    StoreError,
    StoreFailedError,
    StoreFullError,
    StoreItem,
    StoreOpenError,
)
from tests.store_helpers import T0, contents, file_digest, rule

# ------------------------------------------------- durability, files, growth


def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    first = Store(tmp_path / "data")
    rule_v1 = first.store("one line", tags=["trigger:git-commit"], agent="codex")
    rule_v2, _ = first.supersede(rule_v1.id, "one line, no emoji")
    first.close()

    again = Store(tmp_path / "data")
    try:
        assert again.recall_for_action("git-commit", agent="codex") == [rule_v2]
        assert [m.id for m in again.history(rule_v1.id)] == [rule_v1.id, rule_v2.id]
        assert again.stats().live_rules == 1
    finally:
        again.close()


def test_writes_are_synced_and_survive_a_killed_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from mented.store import Store\n"
        "store = Store(Path(sys.argv[1]))\n"
        "flags = store._env.flags()\n"
        "assert flags['sync'] and flags['metasync'], flags\n"
        "memory = store.store('survives', tags=['trigger:git-commit'])\n"
        "store.recall_for_action('git-commit')\n"
        "print(memory.id, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(data)], capture_output=True, check=False, timeout=60
    )
    assert done.returncode == -9, done.stderr.decode()
    memory_id = done.stdout.decode().strip()

    reopened = Store(data)
    try:
        assert contents(reopened.recall_for_action("git-commit")) == ["survives"]
        assert reopened.get(memory_id).content == "survives"
    finally:
        reopened.close()


def test_the_map_grows_instead_of_filling_up(tmp_path: Path) -> None:
    tiny = 64 * 1024
    db = Store(tmp_path / "data", map_size=tiny, sync=False)
    try:
        for n in range(300):  # many writes
            db.store(f"{n:04} " + "r" * 4000, tags=["trigger:git-commit"])
        big = [StoreItem(content="b" * (MAX_CONTENT_BYTES - 1)) for _ in range(100)]
        db.store_many(big)  # one large write: ~6.5 MB in one transaction
        stats = db.stats()
        assert stats.map_bytes >= 8 * 1024 * 1024 > tiny
        assert stats.memories == 400
        assert len(db.recall_for_action("git-commit", k=1000)) == 300
    finally:
        db.close()

    reopened = Store(tmp_path / "data", map_size=tiny, sync=False)
    try:
        reopened.store("one more", tags=["trigger:git-commit"])
        assert reopened.stats().memories == 401
    finally:
        reopened.close()


def test_lookups_run_while_another_thread_grows_the_map(tmp_path: Path) -> None:
    db = Store(tmp_path / "data", map_size=64 * 1024, sync=False)
    first = db.store("seed", tags=["trigger:git-commit"])
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for n in range(200):
                db.store(f"{n} " + "w" * 8000, tags=["trigger:git-push"])
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    lookups = 0
    while writer.is_alive() or lookups == 0:
        assert db.recall_for_action("git-commit") == [first]
        lookups += 1
    writer.join()
    try:
        assert errors == []
        assert db.stats().map_bytes > 64 * 1024
        assert len(db.recall_for_action("git-push", k=500)) == 200
    finally:
        db.close()


def test_a_file_that_is_not_lmdb_is_refused_and_left_untouched(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    foreign = data / "data.mdb"
    foreign.write_bytes(b"my precious notes, not a database\n" * 500)
    before = file_digest(foreign)

    with pytest.raises(StoreOpenError, match="not an LMDB database file") as refused:
        Store(data)

    assert str(foreign) in str(refused.value)
    assert file_digest(foreign) == before
    assert sorted(path.name for path in data.iterdir()) == ["data.mdb"]  # not even a lock file


def test_a_data_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("oops")

    with pytest.raises(StoreOpenError, match="not a directory"):
        Store(data)
    assert data.read_text() == "oops"


def test_a_store_open_twice_in_one_process_is_refused(store: Store) -> None:
    with pytest.raises(StoreOpenError, match="already open"):
        Store(store.path)
    assert store.recall_for_action("git-commit") == []  # the first one still works


def test_a_new_data_dir_is_private(tmp_path: Path) -> None:
    data = tmp_path / "nested" / "data"
    Store(data).close()

    assert data.stat().st_mode & 0o777 == 0o700
    assert (data / "data.mdb").stat().st_mode & 0o077 == 0


def test_a_closed_store_says_so(tmp_path: Path) -> None:
    db = Store(tmp_path / "data")
    db.close()
    db.close()  # idempotent

    with pytest.raises(StoreError, match="closed"):
        db.recall_for_action("git-commit")
    with pytest.raises(StoreError, match="closed"):
        db.store("x")


# ----------------------------------------------------------------- failures


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed store of 3,000 rules (about 2.6 MB), to copy and damage."""
    data = tmp_path_factory.mktemp("real") / "data"
    db = Store(data, sync=False)
    db.store_many(rule("git-commit", f"{n:05} " + "r" * 200, T0 + n) for n in range(3000))
    db.close()
    return data


def _open_in_child(data: Path) -> subprocess.CompletedProcess[str]:
    """Open the store and look up a rule in another process: a SIGBUS must not end the tests."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from mented.store import Store, StoreOpenError\n"
        "try:\n"
        "    store = Store(Path(sys.argv[1]))\n"
        "except StoreOpenError as exc:\n"
        "    sys.exit(f'refused: {exc}')\n"
        "print(len(store.recall_for_action('git-commit', k=10000)))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, str(data)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize(
    "keep",
    [
        pytest.param(lambda size: 100, id="inside-the-first-header"),
        pytest.param(lambda size: 4096, id="one-header-page"),
        pytest.param(lambda size: 8192, id="headers-only"),
        pytest.param(lambda size: size // 2, id="half"),
        pytest.param(lambda size: size - 4096, id="last-page-missing"),
        pytest.param(lambda size: size - 1, id="one-byte-short"),
    ],
)
def test_a_data_file_cut_short_is_refused_at_open_and_left_untouched(
    real_store: Path, tmp_path: Path, keep: Callable[[int], int]
) -> None:
    data = tmp_path / "data"
    shutil.copytree(real_store, data)
    data_file = data / "data.mdb"
    os.truncate(data_file, keep(data_file.stat().st_size))
    before = file_digest(data_file)

    opened = _open_in_child(data)

    assert opened.returncode == 1, f"exit {opened.returncode}: {opened.stderr}"
    message = opened.stderr
    assert message.startswith(f"refused: the store file {data_file} is ")
    assert "cut short" in message or "header is unreadable" in message
    assert f"mv {data_file} {data_file}.damaged" in message
    assert "from a backup" in message
    assert file_digest(data_file) == before


def test_a_whole_copy_of_the_same_store_opens(real_store: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(real_store, data)

    opened = _open_in_child(data)

    assert (opened.returncode, opened.stdout.strip()) == (0, "3000"), opened.stderr


_CUT_SHORT_WHILE_OPEN = r"""
import os, sys
from pathlib import Path
from mented.store import Store, StoreError, StoreItem
store = Store(Path(sys.argv[1]), sync=False)
store.store_many(StoreItem(content=f"{n} " + "r" * 500) for n in range(500))
os.truncate(store.data_file, 16384)  # by another process, a restore gone wrong...
# Only calls that check the file first: a lookup would touch a page that is gone.
for call in (lambda: store.store("one more"), store.stats):
    try:
        call()
    except StoreError as exc:
        print(type(exc).__name__, exc)
print(store.failure is not None)
store.close()
"""


def test_a_data_file_cut_short_while_open_stops_the_store(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CUT_SHORT_WHILE_OPEN, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )

    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    write, status, dead = done.stdout.splitlines()
    assert write.startswith(f"StoreFailedError the store file {tmp_path / 'data'}/data.mdb")
    assert "changed under mented: it has 16384 bytes but its header says" in write
    assert status.startswith("StoreFailedError")
    assert dead == "True"


def test_a_damaged_record_is_reported_as_damage_and_the_others_still_read(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    db = Store(data, sync=False)
    victim = db.store("the damaged one", tags=["trigger:git-push"])
    other = db.store("an intact one", tags=["trigger:git-commit"])
    db.close()
    raw = (data / "data.mdb").read_bytes()
    record = layout_module._encoder.encode(victim)
    assert record in raw  # (in an older page too: LMDB copies a page on write)
    # 0xC1 is the one byte msgpack never uses: the record no longer decodes.
    (data / "data.mdb").write_bytes(raw.replace(record, b"\xc1" + record[1:]))

    db = Store(data, sync=False)
    try:
        with pytest.raises(StoreDamagedError) as damaged:
            db.get(victim.id)
        assert f"the store file {data / 'data.mdb'} is damaged" in str(damaged.value)
        assert "Stop mented, then restore" in str(damaged.value)
        assert db.get(other.id) == other
        assert db.recall_for_action("git-commit") == [other]
        assert db.failure is None  # damage is not a dead store
    finally:
        db.close()


_FILL_TO_THE_LIMIT = r"""
import resource, sys
from pathlib import Path
from mented.store import Store, StoreError
store = Store(Path(sys.argv[1]), map_size=1 << 20, sync=False)
stored = [store.store("seed", tags=["trigger:git-commit"]).id]
with open("/proc/self/status") as status:
    vm = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize"))
# Room for the 1 MiB map to double a few times, not for it to reach 64 MiB.
resource.setrlimit(resource.RLIMIT_AS, (vm + (24 << 20), resource.RLIM_INFINITY))
try:
    for n in range(100_000):
        stored.append(store.store(f"{n} " + "x" * 2000).id)
except StoreError as exc:
    print(type(exc).__name__, exc, sep="\n")
calls = (store.stats, lambda: store.recall_for_action("git-commit"), lambda: store.get(stored[0]))
for call in calls:
    try:
        call()
    except StoreError as exc:
        print(type(exc).__name__)
print(store.failure is not None)
store.close()
print(len(stored))
"""


def test_a_map_that_cannot_grow_stops_the_store_with_a_clear_error(tmp_path: Path) -> None:
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the address space used from /proc")
    data = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "-c", _FILL_TO_THE_LIMIT, str(data)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    kind, message, *after, dead, acknowledged = done.stdout.splitlines()
    assert kind == "StoreFailedError"
    assert f"cannot use the store at {data} any more" in message
    assert "memory map could not grow" in message
    assert "ulimit -v" in message
    assert after == ["StoreFailedError"] * 3  # not "closed/deleted/dropped object"
    assert dead == "True"

    reopened = Store(data, sync=False)  # without the limit: every acknowledged write is there
    try:
        assert reopened.stats().memories == int(acknowledged)
    finally:
        reopened.close()


def test_a_full_disk_refuses_the_write_and_loses_nothing(small_tmpfs: Path) -> None:
    db = Store(small_tmpfs / "data")
    acknowledged = []
    with pytest.raises(StoreFullError) as full:
        for n in range(10_000):
            memory = db.store(f"{n} " + "f" * 3000, tags=["trigger:git-commit"])
            acknowledged.append(memory)
    assert 100 < len(acknowledged) < 10_000
    assert str(full.value).startswith(
        f"cannot write the store at {small_tmpfs / 'data'}: no space left on device."
    )
    assert "Nothing was written and nothing is lost" in str(full.value)
    # Reads go on. A forget may or may not fit in the pages LMDB has free (it also
    # keeps what travels of the forget: mented/store.py, `forgotten`); refused, it
    # is refused the same way, and either way nothing else is lost.
    assert db.failure is None
    assert len(db.recall_for_action("git-commit", k=20_000)) == len(acknowledged)
    assert db.get(acknowledged[-1].id) == acknowledged[-1]
    forgot = 1
    try:
        db.forget(acknowledged[0].id)
    except StoreFullError:
        forgot = 0
    assert db.failure is None
    db.close()

    reopened = Store(small_tmpfs / "data")
    try:
        assert reopened.stats().memories == len(acknowledged) - forgot
    finally:
        reopened.close()


class _CommitFails:
    """An environment whose write transactions fail at commit with `code` (an errno)."""

    def __init__(self, env: lmdb.Environment, code: int) -> None:
        self._env = env
        self._code = code

    def begin(self, *, write: bool = False) -> Any:
        txn = self._env.begin(write=write)
        return _FailingCommit(txn, self._code) if write else txn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


class _FailingCommit:
    def __init__(self, txn: lmdb.Transaction[bytes], code: int) -> None:
        self._txn = txn
        self._code = code

    def __enter__(self) -> lmdb.Transaction[bytes]:
        return self._txn

    def __exit__(self, *exc_info: object) -> None:
        self._txn.abort()
        error = lmdb.Error(f"mdb_txn_commit: {os.strerror(self._code)}")
        error.code = self._code  # type: ignore[attr-defined]  # as py-lmdb sets it
        raise error


@pytest.mark.parametrize(
    ("nearly_full_bytes", "expected"),
    [
        pytest.param(1 << 62, StoreFullError, id="disk-full"),
        pytest.param(0, StoreFailedError, id="disk-failing"),
    ],
)
def test_an_io_error_at_commit_is_a_full_disk_only_when_the_disk_is_full(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    nearly_full_bytes: int,
    expected: type[StoreError],
) -> None:
    # LMDB reports a write cut short by a full disk as EIO, like a failing disk.
    kept = store.store("kept", tags=["trigger:git-commit"])
    monkeypatch.setattr(environment_module, "_NEARLY_FULL_BYTES", nearly_full_bytes)
    real_env = store._env
    store._env = _CommitFails(real_env, errno.EIO)  # type: ignore[assignment]

    with pytest.raises(expected):
        store.store("lost", tags=["trigger:git-commit"])

    store._env = real_env
    if expected is StoreFullError:
        assert store.failure is None
        assert store.recall_for_action("git-commit") == [kept]
    else:
        assert store.failure is not None
        assert "Input/output error" in store.failure
        with pytest.raises(StoreFailedError):
            store.recall_for_action("git-commit")
