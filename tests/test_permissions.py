"""Who may connect: private from the first instant, Unix sockets only, our own directory.

tests/test_server.py covers the modes once the daemon is up, the peer-credential
refusal, symlinks and a directory open to everyone; this file covers the moments
around them and what they do not:

- the socket is 0600 the instant `bind` creates it (the umask is set around
  the bind; nothing is chmod'ed afterwards), even for a user whose umask is 0;
- a watcher polling while daemons start and stop many times never sees the
  directory or the socket open to others, nor any file of the store;
- the daemon holds no TCP, UDP or raw socket, only Unix ones;
- it refuses a socket directory owned by someone else (as root: chown to
  `nobody`) and one with any group or other permission.
"""

from __future__ import annotations

import os
import pwd
import socket
import stat
import threading
from pathlib import Path

import pytest

from mented import listener
from mented.agents.pretooluse import pretooluse_event
from mented.protocol import StatusReply, StatusRequest
from tests.conftest import DaemonProcess
from tests.reliability import ConstrainedDaemon, open_descriptors, record_figures, start_refused

START_STOP_CYCLES = int(os.environ.get("MENTED_START_STOP_CYCLES", "4"))


def test_the_socket_is_0600_the_instant_it_is_bound(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[int, int]] = []

    class WatchedSocket(socket.socket):
        def bind(self, address: object) -> None:
            super().bind(address)  # type: ignore[arg-type]
            # Before bind_socket can do anything else: this is the mode it was born with.
            path = Path(str(address))
            seen.append((path.stat().st_mode, path.parent.stat().st_mode))

    monkeypatch.setattr(socket, "socket", WatchedSocket)  # what the listener module calls
    old_umask = os.umask(0)  # a careless user: files would be born 0777
    try:
        sock = listener.bind_socket(short_tmp / "run" / "mented.sock")
        assert os.umask(0) == 0  # and the user's umask is back afterwards
    finally:
        os.umask(old_umask)
    sock.close()
    ((socket_mode, dir_mode),) = seen
    assert stat.S_ISSOCK(socket_mode)
    assert stat.S_IMODE(socket_mode) == 0o600
    assert stat.S_IMODE(dir_mode) == 0o700


def group_or_other_bits(path: Path) -> int | None:
    """The group/other permission bits of `path`; None when it does not exist."""
    try:
        return path.lstat().st_mode & 0o077
    except FileNotFoundError:
        return None


def test_nothing_is_ever_open_to_others_while_daemons_start_and_stop(short_tmp: Path) -> None:
    daemon = ConstrainedDaemon(short_tmp, umask=0)
    watched = [daemon.socket.parent, daemon.socket, daemon.data_dir]
    exposed: list[str] = []
    looks = {"socket": 0}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for path in watched:
                bits = group_or_other_bits(path)
                if bits is not None:
                    looks["socket"] += path == daemon.socket
                    if bits:
                        exposed.append(f"{path} {bits:03o}")

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for _ in range(START_STOP_CYCLES):
            daemon.start()
            assert daemon.stop() == 0
    finally:
        stop.set()
        watcher.join()
    assert exposed == []
    assert looks["socket"] > 0  # the watcher did see the socket while it existed
    # What the store wrote, under the same umask 0: no one else may read it.
    files = [daemon.data_dir, *daemon.data_dir.iterdir()]
    assert {path.name for path in files} >= {"data.mdb", "lock.mdb", "mented.lock"}
    assert [f"{p} {group_or_other_bits(p):03o}" for p in files if group_or_other_bits(p)] == []
    record_figures("private_from_birth", start_stop_cycles=START_STOP_CYCLES)


def socket_inodes(pid: int) -> set[str]:
    return {
        target[len("socket:[") : -1]
        for target in open_descriptors(pid)
        if target.startswith("socket:[")
    }


def inodes_in(table: Path) -> set[str]:
    """The socket inodes listed in a /proc/net table."""
    try:
        lines = table.read_text().splitlines()[1:]
    except FileNotFoundError:  # no IPv6, say
        return set()
    # unix: Num RefCount Protocol Flags Type St Inode [Path]
    # tcp, udp, raw: sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    column = 6 if table.name == "unix" else 9
    return {line.split()[column] for line in lines}


def socket_tables(pid: int) -> tuple[set[str], set[str]]:
    """The inodes of the Unix sockets and of the TCP/UDP/raw sockets in `pid`'s namespace."""
    net = Path(f"/proc/{pid}/net")
    unix = inodes_in(net / "unix")
    inet = set().union(
        *(inodes_in(net / name) for name in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6"))
    )
    return unix, inet


def test_the_daemon_holds_unix_sockets_only(daemon: DaemonProcess) -> None:
    assert daemon.proc is not None
    pid = daemon.proc.pid
    with daemon.client() as client:
        client.expect(StatusRequest(), StatusReply)
        client.hook("claude-code", pretooluse_event("ls", cwd="/", session="s"))
        # The tables before and after the descriptors: a socket is in one of them.
        unix_before, inet_before = socket_tables(pid)
        ours = socket_inodes(pid)
        unix_after, inet_after = socket_tables(pid)
    assert len(ours) >= 2  # the listener and our connection
    assert ours <= unix_before | unix_after
    assert not ours & (inet_before | inet_after)
    listening = Path(f"/proc/{pid}/net/unix").read_text()
    assert str(daemon.socket) in listening, "the daemon's socket is not in /proc/net/unix"


def test_refuses_a_socket_directory_owned_by_another_user(
    short_tmp: Path, nobody: pwd.struct_passwd
) -> None:
    daemon = DaemonProcess(short_tmp)
    # Someone else got there first (a predictable /tmp/mented-UID, say), privately.
    daemon.socket.parent.mkdir(mode=0o700)
    os.chown(daemon.socket.parent, nobody.pw_uid, nobody.pw_gid)
    log = start_refused(daemon)
    assert f"belongs to uid {nobody.pw_uid}, not to you" in log
    assert not daemon.socket.exists()
    assert daemon.socket.parent.stat().st_uid == nobody.pw_uid  # and it was left alone


@pytest.mark.parametrize("mode", [0o750, 0o701, 0o720], ids=oct)
def test_refuses_a_socket_directory_with_any_access_for_others(short_tmp: Path, mode: int) -> None:
    daemon = DaemonProcess(short_tmp)
    daemon.socket.parent.mkdir(mode=0o700)
    daemon.socket.parent.chmod(mode)
    log = start_refused(daemon)
    assert f"open to other users (mode {mode:04o})" in log
    assert not daemon.socket.exists()


@pytest.mark.parametrize("mode", [0o777, 0o757])
def test_refuses_a_socket_directory_whose_parent_others_may_write(
    short_tmp: Path, mode: int
) -> None:
    process = DaemonProcess(short_tmp)
    short_tmp.chmod(mode)  # not sticky: anyone could rename run/ away
    proc = process.start(wait=False)
    assert proc.wait(timeout=30) == 1
    assert "writable by other users and not sticky" in process.log()


def test_a_sticky_shared_parent_like_tmp_is_fine(short_tmp: Path) -> None:
    process = DaemonProcess(short_tmp)
    short_tmp.chmod(0o1777)
    process.start()
    try:
        assert process.socket.exists()
    finally:
        process.stop()
