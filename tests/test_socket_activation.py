"""Socket activation and readiness for real: the daemon under a service manager.

`systemd-socket-activate` (Debian's systemd package) binds the socket, waits for
the first connection and execs the daemon with LISTEN_FDS/LISTEN_PID, exactly
as systemd does. It cannot start a second daemon after the first one exits, so
the idle-exit test plays the manager itself: it holds the listening socket and
starts a daemon whenever a connection waits on it, as systemd's socket unit
does. The unit files pass `systemd-analyze verify` where that command works.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mented.agents.pretooluse import pretooluse_event
from mented.protocol import (
    MemoriesReply,
    RecallRequest,
    StatusReply,
    StatusRequest,
    StoredReply,
    StoreRequest,
    encode,
    recv_frame,
    reply_decoder,
)
from mented_client import service_files
from mented_client.connection import Client
from mented_client.service_manager import daemon_interpreter
from tests.conftest import PYTHON, DaemonProcess, isolated_env
from tests.test_service import launch_with_fd3

SOCKET_ACTIVATE = shutil.which("systemd-socket-activate")
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_socket_activate = pytest.mark.skipif(
    SOCKET_ACTIVATE is None,
    reason="systemd-socket-activate is not installed (Debian: apt-get install systemd)",
)
TIMEOUT = 20.0
COMMIT_EVENT = pretooluse_event("git commit -m x", cwd="/", session="s1")


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; killed at the end if a failure left them running."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def activate(
    root: Path,
    socket_path: Path,
    processes: list[subprocess.Popen[bytes]],
    *daemon_args: str,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """`systemd-socket-activate -l SOCKET ... mented`; returns once the socket is bound."""
    assert SOCKET_ACTIVATE is not None
    env = env or isolated_env(root)
    passed = ["HOME", "MENTED_DATA_DIR", "MENTED_CONFIG", "PYTHONDONTWRITEBYTECODE"]
    if "NOTIFY_SOCKET" in env:
        passed.append("NOTIFY_SOCKET")
    argv = [SOCKET_ACTIVATE, "-l", str(socket_path)]
    argv += [f"--setenv={name}" for name in passed]
    argv += [PYTHON, "-m", "mented.daemon", *daemon_args]
    with (root / "activate.log").open("ab") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
    processes.append(process)
    # Listening, not only bound: a connection between its bind and its listen is refused.
    _wait_for(lambda: _listening(socket_path) or process.poll() is not None)
    assert process.poll() is None, (root / "activate.log").read_text()
    return process


def _listening(path: Path) -> bool:
    """Whether a socket listens at `path` (Linux's /proc/net/unix: the __SO_ACCEPTCON flag)."""
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) == 8 and fields[7] == str(path) and int(fields[3], 16) & 0x10000:
            return True
    return False


def _wait_for(condition: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@needs_socket_activate
def test_the_daemon_serves_on_the_socket_it_is_handed(
    short_tmp: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    socket_path = short_tmp / "activated.sock"
    process = activate(short_tmp, socket_path, processes)
    with Client(socket_path, timeout=TIMEOUT, connect_timeout=TIMEOUT) as client:
        status = client.expect(StatusRequest(), StatusReply)
        assert status.socket_activated
        assert status.socket == str(socket_path)
        assert status.pid == process.pid  # systemd-socket-activate execs the daemon
        client.expect(
            StoreRequest(content="one line, no emojis", tags=["trigger:git-commit"]), StoredReply
        )
        rules = client.expect(RecallRequest(action="git-commit"), MemoriesReply).memories
        assert [rule.content for rule in rules] == ["one line, no emojis"]
        assert b"one line, no emojis" in client.hook("claude-code", COMMIT_EVENT)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=TIMEOUT) == 0
    # The socket belongs to the manager: the daemon neither bound nor removes it.
    assert socket_path.exists()


def _notifications(receiver: socket.socket) -> dict[str, str]:
    message = receiver.recv(4096).decode()
    return dict(line.split("=", 1) for line in message.splitlines())


@needs_socket_activate
def test_readiness_reload_and_stop_are_notified(
    short_tmp: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    name = f"mented-test-{uuid.uuid4().hex}"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind("\0" + name)  # an abstract name, as systemd uses for user managers
    receiver.settimeout(TIMEOUT)
    env = isolated_env(short_tmp) | {"NOTIFY_SOCKET": "@" + name}
    socket_path = short_tmp / "activated.sock"
    with receiver:
        process = activate(short_tmp, socket_path, processes, env=env)
        with Client(socket_path, timeout=TIMEOUT, connect_timeout=TIMEOUT) as client:
            client.expect(StatusRequest(), StatusReply)  # the connection starts it
        ready = _notifications(receiver)
        assert ready == {
            "READY": "1",
            "STATUS": f"serving on {socket_path}",
            "MAINPID": str(process.pid),
        }

        process.send_signal(signal.SIGHUP)
        reloading = _notifications(receiver)
        assert reloading["RELOADING"] == "1"
        assert int(reloading["MONOTONIC_USEC"]) > 0
        assert _notifications(receiver)["READY"] == "1"

        Path(env["MENTED_CONFIG"]).write_text("[hook]\nk = 'many'\n")
        process.send_signal(signal.SIGHUP)
        assert _notifications(receiver)["RELOADING"] == "1"
        after_bad = _notifications(receiver)
        assert after_bad["READY"] == "1"  # the previous settings serve on
        assert after_bad["STATUS"].startswith("reload failed:")

        process.send_signal(signal.SIGTERM)
        assert _notifications(receiver)["STOPPING"] == "1"
        assert process.wait(timeout=TIMEOUT) == 0


def _send_status_request(path: Path) -> socket.socket:
    """Connect and send a status request without waiting for the answer."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT)
    sock.connect(str(path))  # the manager's backlog accepts it, daemon or not
    sock.sendall(encode(StatusRequest()))
    return sock


def _read_reply(sock: socket.socket) -> StatusReply:
    reply = reply_decoder.decode(recv_frame(sock))
    assert isinstance(reply, StatusReply)
    return reply


def test_idle_exit_then_the_next_connection_starts_it_again(
    short_tmp: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    socket_path = short_tmp / "managed.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_path))
    listener.listen()
    env = isolated_env(short_tmp) | {"LISTEN_FDS": "1"}

    def start_daemon() -> subprocess.Popen[bytes]:
        argv = launch_with_fd3(listener, [PYTHON, "-m", "mented.daemon", "--idle-timeout", "0.5"])
        with (short_tmp / "daemon.log").open("ab") as log:
            process = subprocess.Popen(
                argv, pass_fds=[listener.fileno()], env=env, stdout=log, stderr=log
            )
        processes.append(process)
        return process

    with listener:
        first = start_daemon()
        with Client(socket_path, timeout=TIMEOUT, connect_timeout=TIMEOUT) as client:
            status = client.expect(StatusRequest(), StatusReply)
            assert status.socket_activated
            assert status.pid == first.pid
            client.expect(StoreRequest(content="kept", tags=["trigger:git-commit"]), StoredReply)
            # An open connection is not idle, however long it stays quiet.
            with pytest.raises(subprocess.TimeoutExpired):
                first.wait(timeout=1.5)
        assert first.wait(timeout=TIMEOUT) == 0  # idle: it exits, cleanly
        assert socket_path.exists()

        # The next client finds the socket open (the manager holds it) and waits.
        waiting = _send_status_request(socket_path)
        readable, _, _ = select.select([listener], [], [], TIMEOUT)
        assert readable, "the connection did not reach the manager's socket"
        second = start_daemon()
        with waiting:
            status = _read_reply(waiting)
        assert status.pid == second.pid != first.pid
        with Client(socket_path, timeout=TIMEOUT) as client:
            rules = client.expect(RecallRequest(action="git-commit"), MemoriesReply).memories
        assert [rule.content for rule in rules] == ["kept"]
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=TIMEOUT) == 0


def test_without_a_manager_the_idle_timeout_is_ignored(short_tmp: Path) -> None:
    daemon = DaemonProcess(short_tmp)
    daemon.start("--idle-timeout", "0.2")
    try:
        assert daemon.proc is not None
        with pytest.raises(subprocess.TimeoutExpired):
            daemon.proc.wait(timeout=1.0)  # still serving: nothing would start it again
        assert "idle_timeout_ignored" in daemon.log()
    finally:
        assert daemon.stop() == 0


# ----------------------------------------------------------------- unit files


def _verify(*units: Path, runtime: Path) -> subprocess.CompletedProcess[str]:
    assert SYSTEMD_ANALYZE is not None
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = os.environ | {"XDG_RUNTIME_DIR": str(runtime)}
    return subprocess.run(
        [SYSTEMD_ANALYZE, "--user", "verify", *map(str, units)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
def test_the_rendered_units_pass_systemd_analyze_verify(short_tmp: Path) -> None:
    unit_dir = short_tmp / "units"
    unit_dir.mkdir()
    units = service_files.systemd_units(daemon_interpreter(), short_tmp / "data")
    for name, text in units.items():
        (unit_dir / name).write_text(text)
    result = _verify(*(unit_dir / name for name in units), runtime=short_tmp / "run")
    output = result.stdout + result.stderr
    if result.returncode != 0 and "mented" not in output:
        pytest.skip(f"systemd-analyze verify does not work here: {output.strip()[:300]}")
    assert result.returncode == 0, output
    assert [line for line in output.splitlines() if "mented" in line] == []

    # The check has teeth: a mistake in the file is reported.
    broken = unit_dir / "mented.service"
    broken.write_text(units["mented.service"].replace("Type=notify", "Type=notfy"))
    result = _verify(broken, runtime=short_tmp / "run")
    assert "notfy" in result.stdout + result.stderr
