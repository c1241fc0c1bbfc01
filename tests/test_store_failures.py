"""The real daemon when its store fails: a file cut short, a map that cannot grow, a full disk.

Each failure must be told to the user in words, and must leave the daemon either
serving (a full disk: the write fails, lookups go on) or gone with a non-zero
status for its service manager to restart it (a dead store), never up and
answering every request with an error.
"""

from __future__ import annotations

import hashlib
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mented.daemon import STORE_FAILED_EXIT
from mented.protocol import (
    ErrorCode,
    MemoriesReply,
    RecallRequest,
    StatusReply,
    StatusRequest,
    StoredReply,
    StoreRequest,
)
from mented.store import Store, StoreItem
from mented_client.connection import Client, DaemonError
from tests.conftest import DaemonProcess

RULE = "trigger:git-commit"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fill_offline(data_dir: Path, count: int, size: int) -> None:
    """`count` rules of `size` bytes, written without the daemon (and without fsync)."""
    store = Store(data_dir, sync=False)
    try:
        store.store_many(
            StoreItem(content=f"{n} " + "s" * size, tags=(RULE,)) for n in range(count)
        )
    finally:
        store.close()


@pytest.fixture
def process(short_tmp: Path) -> Iterator[DaemonProcess]:
    """A daemon not started yet; killed afterwards if a test left it running."""
    daemon = DaemonProcess(short_tmp)
    try:
        yield daemon
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait()


def store_or_error(client: Client, content: str) -> StoredReply | DaemonError:
    try:
        return client.expect(StoreRequest(content=content, tags=[RULE]), StoredReply)
    except DaemonError as exc:
        return exc


def wait_exit(process: DaemonProcess, timeout: float = 30.0) -> int:
    assert process.proc is not None
    return process.proc.wait(timeout=timeout)


@pytest.mark.parametrize("keep", [8192, -1])
def test_mented_refuses_to_start_on_a_data_file_cut_short(
    process: DaemonProcess, keep: int
) -> None:
    daemon = process
    fill_offline(daemon.data_dir, 2000, 300)
    data_file = daemon.data_dir / "data.mdb"
    os.truncate(data_file, keep if keep > 0 else data_file.stat().st_size + keep)
    before = digest(data_file)

    daemon.start(wait=False)
    status = wait_exit(daemon)

    log = daemon.log()
    assert status == 1, log
    # Said once: a log line here (no terminal), which `mentectl start` shows as a sentence.
    assert log.count(f"the store file {data_file} is cut short: it has") == 1
    assert f"mv {data_file} {data_file}.damaged" in log
    assert "Bus error" not in log
    assert digest(data_file) == before


def test_mentectl_start_shows_why_a_store_cut_short_is_refused(process: DaemonProcess) -> None:
    daemon = process
    fill_offline(daemon.data_dir, 2000, 300)
    data_file = daemon.data_dir / "data.mdb"
    os.truncate(data_file, data_file.stat().st_size // 2)

    started = daemon.mentectl("start", check=False)
    if started.returncode == 0:  # serving a file that will crash it: do not leave it running
        daemon.mentectl("stop", check=False)

    assert started.returncode != 0
    assert f"the store file {data_file} is cut short" in started.stderr
    assert "from a backup" in started.stderr


def _address_space_used(pid: int) -> int:
    with Path(f"/proc/{pid}/status").open() as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize"))


@pytest.mark.slow
def test_a_map_that_cannot_grow_makes_mented_exit_for_a_restart(process: DaemonProcess) -> None:
    if not hasattr(resource, "prlimit") or not Path("/proc/self/status").exists():
        pytest.skip("limits another process's address space with prlimit(2), Linux only")
    daemon = process
    # 56 MiB of the 64 MiB map the daemon opens with: a few more writes must grow it.
    fill_offline(daemon.data_dir, 900, 62_000)
    daemon.start()
    assert daemon.proc is not None
    pid = daemon.proc.pid
    acknowledged = 0
    with daemon.client() as client:
        client.expect(StoreRequest(content="warm up", tags=[RULE]), StoredReply)
        acknowledged += 1
        # As `ulimit -v` would: room for the daemon's own needs, not for a doubled map.
        limit = _address_space_used(pid) + (40 << 20)
        resource.prlimit(pid, resource.RLIMIT_AS, (limit, limit))
        for n in range(500):
            reply = store_or_error(client, f"{n} " + "g" * 60_000)
            if isinstance(reply, DaemonError):
                break
            acknowledged += 1
        else:
            pytest.fail("the map never had to grow")

    assert reply.code == ErrorCode.STORE_FAILED
    assert f"cannot use the store at {daemon.data_dir} any more" in reply.message
    assert "memory map could not grow" in reply.message
    status = wait_exit(daemon)
    assert status == STORE_FAILED_EXIT, daemon.log()
    assert '"store_failed"' in daemon.log()

    daemon.start()  # as systemd would, without the limit: nothing acknowledged is lost
    with daemon.client() as client:
        stats = client.expect(StatusRequest(), StatusReply)
    assert stats.memories == 900 + acknowledged
    daemon.stop()


def test_a_full_disk_fails_the_write_and_mented_serves_on(
    process: DaemonProcess, small_tmpfs: Path
) -> None:
    daemon = process
    daemon.data_dir = small_tmpfs / "data"
    daemon.env["MENTED_DATA_DIR"] = str(daemon.data_dir)
    daemon.start()
    acknowledged = []
    with daemon.client() as client:
        for n in range(2000):
            reply = store_or_error(client, f"{n} " + "f" * 3000)
            if isinstance(reply, DaemonError):
                break
            acknowledged.append(reply.id)
        else:
            pytest.fail("the 2 MiB disk never filled up")

        assert reply.code == ErrorCode.STORE_FULL
        assert reply.message.startswith(
            f"cannot write the store at {daemon.data_dir}: no space left on device."
        )
        # Reads go on, on the same connection.
        rules = client.expect(RecallRequest(action="git-commit", k=5000), MemoriesReply)
        assert len(rules.memories) == len(acknowledged)
        assert client.expect(StatusRequest(), StatusReply).memories == len(acknowledged)

    added = daemon.mentectl("rule", "add", "git-commit", "x" * 60_000, check=False)
    assert added.returncode == 1
    assert added.stderr.startswith(
        f"mentectl: cannot write the store at {daemon.data_dir}: no space left on device."
    )
    assert added.stderr.rstrip().endswith("(store_full)")
    assert "refused" not in added.stderr
    time.sleep(0.2)
    assert daemon.proc is not None
    assert daemon.proc.poll() is None  # still serving

    assert daemon.stop() == 0
    daemon.start()
    with daemon.client() as client:
        assert client.expect(StatusRequest(), StatusReply).memories == len(acknowledged)
    daemon.stop()
