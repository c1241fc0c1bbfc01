"""Service-manager glue (mented.service) and the files mentectl installs.

Socket activation is checked in a child process that really gets the socket as
descriptor 3; sd_notify against datagram sockets the tests bind (a path and an
abstract name); launchd's `launch_activate_socket` with a ctypes stand-in that
hands over real descriptors, since macOS itself cannot run here.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import plistlib
import shlex
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from mented import service
from mented.protocol import StatusReply
from mented_client import service_files
from mented_client.commands.output import CommandError
from mented_client.service_manager import Launchd, Systemd, daemon_interpreter, detect
from tests.conftest import PYTHON

REPO = Path(__file__).resolve().parent.parent

# ------------------------------------------------------------------ listen_fds

_CHILD = """
import json, os, socket
from mented.service import listen_fds
socks = listen_fds()
print(json.dumps({
    "names": [s.getsockname() for s in socks],
    "inheritable": [os.get_inheritable(s.fileno()) for s in socks],
    "fds": [s.fileno() for s in socks],
    "env_left": sorted(k for k in os.environ if k.startswith("LISTEN_")),
}))
"""


# Puts descriptor argv[1] at 3, sets LISTEN_PID to its own pid unless given, and
# execs the rest: what a service manager does between fork and exec.
FD3_LAUNCHER = """
import os, sys
os.dup2(int(sys.argv[1]), 3)
os.environ.setdefault("LISTEN_PID", str(os.getpid()))
os.execv(sys.argv[2], sys.argv[2:])
"""


def launch_with_fd3(sock: socket.socket, argv: list[str]) -> list[str]:
    """The command line that runs `argv` with `sock` as descriptor 3."""
    return [PYTHON, "-c", FD3_LAUNCHER, str(sock.fileno()), *argv]


def _run_with_fd3(sock: socket.socket, env: dict[str, str]) -> dict[str, object]:
    result = subprocess.run(
        launch_with_fd3(sock, [PYTHON, "-c", _CHILD]),
        pass_fds=[sock.fileno()],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    data: dict[str, object] = json.loads(result.stdout)
    return data


@pytest.fixture
def listening(short_tmp: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(short_tmp / "l.sock"))
    sock.listen()
    return sock


# ------------------------------------------------------------- who started us


def test_how_started_tells_the_service_managers_mentectl_and_a_terminal() -> None:
    by_mentectl = {service.STARTED_BY_ENV: "mentectl", "INVOCATION_ID": "abc"}
    assert service.how_started(environ=by_mentectl, has_terminal=False) == "mentectl"
    assert service.STARTED_BY_ENV not in by_mentectl  # no child inherits it
    # A shell in a terminal may carry a service's variables: the terminal wins.
    systemd = {"INVOCATION_ID": "0123abcd"}
    assert service.how_started(environ=systemd, has_terminal=True) == "terminal"
    assert service.how_started(environ=systemd, has_terminal=False) == "systemd"
    # Terminal.app's shells have XPC_SERVICE_NAME=0; a launchd job its label (and pid 1 as
    # parent, which a test process is not).
    assert service.how_started(environ={"XPC_SERVICE_NAME": "0"}, has_terminal=False) == "other"
    assert service.how_started(environ={}, has_terminal=False) == "other"


def test_a_process_in_a_new_session_has_no_terminal() -> None:
    code = "from mented.service import how_started; print(how_started(environ={}))"
    result = subprocess.run(
        [PYTHON, "-c", code], capture_output=True, text=True, start_new_session=True, check=True
    )
    assert result.stdout == "other\n"


def test_listen_fds_takes_the_socket_passed_as_fd_3(listening: socket.socket) -> None:
    env = os.environ | {"LISTEN_FDS": "1", "LISTEN_FDNAMES": "mented.socket"}
    child = _run_with_fd3(listening, env)
    assert child["names"] == [listening.getsockname()]
    assert child["fds"] == [3]
    # Close-on-exec: a program the daemon might run does not inherit the listener.
    assert child["inheritable"] == [False]
    assert child["env_left"] == []


def test_listen_fds_ignores_sockets_meant_for_another_process(listening: socket.socket) -> None:
    env = os.environ | {"LISTEN_FDS": "1"}
    child = _run_with_fd3(listening, env | {"LISTEN_PID": "1"})
    assert child["names"] == []
    assert child["env_left"] == []  # unset anyway: our children must not see them either


def test_listen_fds_without_the_variables_is_empty() -> None:
    environ: dict[str, str] = {}
    assert service.listen_fds(environ=environ) == []


def test_listen_fds_refuses_malformed_variables() -> None:
    environ = {"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": "one"}
    with pytest.raises(service.ServiceError, match="LISTEN_FDS='one'"):
        service.listen_fds(environ=environ)
    assert environ == {}


def test_listen_fds_can_leave_the_variables() -> None:
    environ = {"LISTEN_PID": "1", "LISTEN_FDS": "1"}
    assert service.listen_fds(environ=environ, unset_environment=False) == []
    assert environ == {"LISTEN_PID": "1", "LISTEN_FDS": "1"}


def test_inherited_listener_refuses_what_it_cannot_serve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    udp = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    monkeypatch.setattr(service, "listen_fds", lambda: [udp])
    with pytest.raises(service.ServiceError, match="not a Unix stream socket"):
        service.inherited_listener()
    assert udp.fileno() == -1  # closed, not leaked

    two = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2)]
    monkeypatch.setattr(service, "listen_fds", lambda: two)
    with pytest.raises(service.ServiceError, match="passed 2 sockets"):
        service.inherited_listener()


def test_inherited_listener_is_none_outside_a_service_manager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("LISTEN_PID", "LISTEN_FDS"):
        monkeypatch.delenv(name, raising=False)
    if sys.platform == "darwin":
        pytest.skip("on macOS this asks the real launchd")
    assert service.inherited_listener() is None


# -------------------------------------------------------------------- sd_notify


def _datagram(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.settimeout(5)
    return sock


def test_notify_sends_to_a_path(short_tmp: Path) -> None:
    path = str(short_tmp / "notify")
    with _datagram(path) as receiver:
        assert service.notify("READY=1", environ={"NOTIFY_SOCKET": path})
        assert receiver.recv(4096) == b"READY=1"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract sockets are Linux's")
def test_notify_sends_to_an_abstract_name() -> None:
    name = f"mented-test-{uuid.uuid4().hex}"
    with _datagram("\0" + name) as receiver:
        assert service.notify("STOPPING=1", environ={"NOTIFY_SOCKET": "@" + name})
        assert receiver.recv(4096) == b"STOPPING=1"


def test_notify_is_a_quiet_no_op_without_systemd(short_tmp: Path) -> None:
    assert service.notify("READY=1", environ={}) is False
    assert service.notify("READY=1", environ={"NOTIFY_SOCKET": "vsock:2:1234"}) is False
    # Nobody listening: a lost notification must not raise.
    gone = str(short_tmp / "nobody")
    assert service.notify("READY=1", environ={"NOTIFY_SOCKET": gone}) is False


def test_reloading_carries_the_monotonic_clock(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(short_tmp / "notify")
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    with _datagram(path) as receiver:
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        service.notify_reloading()
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        fields = dict(line.split("=", 1) for line in receiver.recv(4096).decode().splitlines())
        assert fields["RELOADING"] == "1"
        assert before <= int(fields["MONOTONIC_USEC"]) <= after

        service.notify_ready("serving on /x")
        fields = dict(line.split("=", 1) for line in receiver.recv(4096).decode().splitlines())
        assert fields == {"READY": "1", "STATUS": "serving on /x", "MAINPID": str(os.getpid())}


# ---------------------------------------------------------------------- launchd


class FakeLaunchd:
    """Stands in for libSystem: a real C callback that fills `int **fds` like launchd does."""

    def __init__(self, fds: list[int], error: int = 0) -> None:
        self.array = (ctypes.c_int * len(fds))(*fds)
        self.count = len(fds)
        self.error = error
        self.names: list[bytes] = []
        self.freed: list[int | None] = []
        self.activate = service.launch_activate_socket_type()(self._activate)

    def _activate(
        self,
        name: bytes,
        fds_out: ctypes._Pointer[ctypes._Pointer[ctypes.c_int]],
        count_out: ctypes._Pointer[ctypes.c_size_t],
    ) -> int:
        self.names.append(name)
        if self.error:
            return self.error
        fds_out[0] = ctypes.cast(self.array, ctypes.POINTER(ctypes.c_int))
        count_out[0] = self.count
        return 0

    def free(self, pointer: ctypes._Pointer[ctypes.c_int]) -> None:
        self.freed.append(ctypes.cast(pointer, ctypes.c_void_p).value)


def test_launchd_sockets_are_taken_over_and_the_array_freed(listening: socket.socket) -> None:
    fake = FakeLaunchd([os.dup(listening.fileno())])
    sockets = service.launchd_sockets(activate=fake.activate, free=fake.free)
    assert fake.names == [b"Listeners"]
    assert [s.getsockname() for s in sockets] == [listening.getsockname()]
    assert not os.get_inheritable(sockets[0].fileno())
    assert fake.freed == [ctypes.addressof(fake.array)]
    sockets[0].close()


@pytest.mark.parametrize("error", [errno.ESRCH, errno.ENOENT])
def test_launchd_not_ours_is_no_socket(error: int) -> None:
    fake = FakeLaunchd([], error=error)
    assert service.launchd_sockets(activate=fake.activate, free=fake.free) == []
    assert fake.freed == []


def test_launchd_other_errors_are_reported() -> None:
    fake = FakeLaunchd([], error=errno.EALREADY)
    with pytest.raises(service.ServiceError, match="launch_activate_socket"):
        service.launchd_sockets(activate=fake.activate, free=fake.free)


@pytest.mark.skipif(sys.platform == "darwin", reason="asks the real launchd there")
def test_launchd_is_not_asked_off_macos() -> None:
    assert service.launchd_sockets() == []


def test_plists_render_the_given_absolute_paths() -> None:
    paths = {
        "python": "/Users/me/.venvs/mented/bin/python",
        "data_dir": "/Users/me/Library/Application Support/mented",
        "socket_path": "/var/folders/xy/T/mented-501/mented.sock",
        "log_file": "/Users/me/Library/Logs/mented/mented.log",
    }
    on_demand = plistlib.loads(service_files.launchd_plist(**paths, on_demand=True))
    assert on_demand["Label"] == "dev.mented.daemon"
    assert on_demand["ProgramArguments"] == [
        paths["python"], "-m", "mented.daemon",
        "--socket", paths["socket_path"], "--data-dir", paths["data_dir"],
    ]  # fmt: skip
    listener = on_demand["Sockets"][service.LAUNCHD_SOCKET_NAME]
    assert listener["SockPathName"] == paths["socket_path"]
    assert listener["SockPathMode"] == 0o600
    assert on_demand["StandardErrorPath"] == paths["log_file"]
    assert "KeepAlive" not in on_demand
    assert "RunAtLoad" not in on_demand

    always = plistlib.loads(service_files.launchd_plist(**paths, on_demand=False))
    assert always["RunAtLoad"] is True
    assert always["KeepAlive"] is True
    assert "Sockets" not in always
    assert always["ProgramArguments"] == on_demand["ProgramArguments"]


def test_the_repository_copies_are_the_templates() -> None:
    assert (REPO / "systemd/mented.socket").read_text() == service_files.SOCKET_TEMPLATE
    assert (REPO / "systemd/mented.service").read_text() == service_files.SERVICE_TEMPLATE
    assert (REPO / "launchd/dev.mented.daemon.plist").read_bytes() == (
        service_files.launchd_plist(on_demand=False)
    )
    assert (REPO / "launchd/dev.mented.daemon.on-demand.plist").read_bytes() == (
        service_files.launchd_plist(on_demand=True)
    )


def _write_fake(bin_dir: Path, name: str, log: Path, script: str = "") -> None:
    """A stand-in for `systemctl` or `launchctl` that logs its arguments."""
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / name
    fake.write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(log))}\n{script}\nexit 0\n')
    fake.chmod(0o755)


def test_launchd_install_writes_the_agent_and_bootstraps_it(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = short_tmp / "home"
    calls = short_tmp / "calls"
    # `launchctl print` fails: the agent is not loaded yet.
    _write_fake(short_tmp / "bin", "launchctl", calls, 'case "$1" in print) exit 113;; esac')
    monkeypatch.setenv("PATH", f"{short_tmp / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(short_tmp / "T"))
    monkeypatch.delenv("MENTED_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(sys, "platform", "darwin")
    manager = Launchd()
    manager.install(python=Path("/opt/py/bin/python3"), data_dir=home / "data", on_demand=True)

    plist = home / "Library/LaunchAgents/dev.mented.daemon.plist"
    agent = plistlib.loads(plist.read_bytes())
    assert agent["ProgramArguments"][0] == "/opt/py/bin/python3"
    assert agent["StandardErrorPath"] == str(home / "Library/Logs/mented/mented.log")
    socket_path = short_tmp / "T" / f"mented-{os.getuid()}" / "mented.sock"
    assert agent["Sockets"]["Listeners"]["SockPathName"] == str(socket_path)
    assert (home / "Library/Logs/mented").is_dir()
    assert socket_path.parent.stat().st_mode & 0o777 == 0o700
    uid = os.getuid()
    assert calls.read_text().splitlines() == [
        f"print gui/{uid}/dev.mented.daemon",
        f"enable gui/{uid}/dev.mented.daemon",
        f"bootstrap gui/{uid} {plist}",
    ]
    assert f"ran `launchctl bootstrap gui/{uid} {plist}`" in manager.done
    assert manager.socket_path() == socket_path
    assert manager.interpreter() == Path("/opt/py/bin/python3")


# ---------------------------------------------------------------------- systemd


def test_unit_files_hold_the_absolute_interpreter_and_data_dir() -> None:
    units = service_files.systemd_units("/opt/py 3/bin/python3", "/home/me/100%/mented")
    service_text = units["mented.service"]
    assert (
        'ExecStart="/opt/py 3/bin/python3" -m mented.daemon --data-dir /home/me/100%%/mented'
        in (service_text)
    )
    assert "ReadWritePaths=-/home/me/100%%/mented" in service_text
    settings = [line for line in service_text.splitlines() if not line.startswith("#")]
    assert not [line for line in settings if "@" in line.replace("@system-service", "")]
    assert "ListenStream=%t/mented/mented.sock" in units["mented.socket"]


def test_systemd_install_writes_enables_and_starts(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = short_tmp / "calls"
    _write_fake(short_tmp / "bin", "systemctl", calls)
    monkeypatch.setenv("PATH", f"{short_tmp / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(short_tmp / "config"))
    monkeypatch.delenv("MENTED_SERVICE_MANAGER", raising=False)
    manager = detect()
    assert isinstance(manager, Systemd)  # the fake `systemctl --user show-environment` works
    python = daemon_interpreter()
    manager.install(python=python, data_dir=short_tmp / "data", on_demand=False)

    unit_dir = short_tmp / "config/systemd/user"
    text = (unit_dir / "mented.service").read_text()
    assert f"ExecStart={python} -m mented.daemon --data-dir {short_tmp / 'data'}" in text
    assert (unit_dir / "mented.socket").read_text() == service_files.SOCKET_TEMPLATE
    assert (short_tmp / "data").stat().st_mode & 0o777 == 0o700
    assert calls.read_text().splitlines() == [
        "--user show-environment",
        "--user daemon-reload",
        "--user enable --now mented.socket",
        "--user enable mented.service",
        "--user restart mented.service",
    ]
    assert manager.done[-1] == "ran `systemctl --user restart mented.service`"
    assert manager.installed()
    assert manager.interpreter() == python

    manager.done.clear()
    manager.install(python=python, data_dir=short_tmp / "data", on_demand=True)
    assert f"kept {unit_dir / 'mented.service'} (unchanged)" in manager.done
    assert "ran `systemctl --user disable mented.service`" in manager.done


def test_the_service_runs_this_interpreter_never_a_shim_script(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = daemon_interpreter()
    assert python.is_absolute()
    if sys.prefix != sys.base_prefix:
        # A venv's python stays as it is: resolving it would lose the venv.
        assert python == Path(sys.executable).absolute()
    shim = short_tmp / "python3"
    shim.write_text('#!/bin/sh\nexec python3 "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(shim))
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)
    with pytest.raises(CommandError, match="shim"):
        daemon_interpreter()


def test_the_manager_can_be_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MENTED_SERVICE_MANAGER", "none")
    assert detect() is None
    monkeypatch.setenv("MENTED_SERVICE_MANAGER", "upstart")
    with pytest.raises(CommandError, match="systemd, launchd or none"):
        detect()


def test_doctor_checks_the_installed_service(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mented_client.commands.doctor import check_service

    calls = short_tmp / "calls"
    state = short_tmp / "enabled"
    _write_fake(
        short_tmp / "bin",
        "systemctl",
        calls,
        f'case "$2" in is-enabled) cat {shlex.quote(str(state))}; exit 0;; esac',
    )
    monkeypatch.setenv("PATH", f"{short_tmp / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(short_tmp / "config"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_tmp / "run"))
    socket_path = short_tmp / "run/mented/mented.sock"
    manager = Systemd()

    missing = check_service(socket_path, manager, None)
    assert missing.state == "warn"
    assert (missing.fix or "").startswith("`mentectl service install`")

    manager.install(python=Path("/gone/bin/python3"), data_dir=short_tmp / "data", on_demand=False)
    state.write_text("enabled\n")
    gone = check_service(socket_path, manager, None)
    assert gone.state == "fail"
    assert "runs /gone/bin/python3, which no longer exists" in gone.detail

    manager.install(python=daemon_interpreter(), data_dir=short_tmp / "data", on_demand=False)
    assert check_service(socket_path, manager, None).state == "ok"
    other = check_service(short_tmp / "elsewhere.sock", manager, None)
    assert other.state == "warn"
    assert "unset $MENTED_SOCKET" in (other.fix or "")

    # The service is installed, but what answers was typed in a terminal: not the service.
    typed = StatusReply(
        version="0",
        pid=4242,
        uptime_s=1,
        socket=str(socket_path),
        data_dir="/",
        started_by="terminal",
    )
    foreign = check_service(socket_path, manager, typed)
    assert foreign.state == "warn"
    assert "the daemon answering (pid 4242) is not the service's" in foreign.detail
    assert "in a terminal: it stops when that terminal closes" in foreign.detail
    assert foreign.fix == "`mentectl stop`, then `mentectl service start`"
    typed.started_by = "systemd"
    assert check_service(socket_path, manager, typed).state == "ok"

    state.write_text("disabled\n")
    disabled = check_service(socket_path, manager, None)
    assert (disabled.state, disabled.detail) == (
        "fail",
        "the systemd service is installed but not enabled",
    )


def test_service_restarts_refuse_an_invalid_config_and_leave_the_daemon_alone(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from mented_client.commands import service as service_command

    calls = short_tmp / "calls"
    _write_fake(short_tmp / "bin", "systemctl", calls, 'case "$2" in is-active) exit 3;; esac')
    monkeypatch.setenv("PATH", f"{short_tmp / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(short_tmp / "config"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_tmp / "run"))
    monkeypatch.setenv("MENTED_SERVICE_MANAGER", "systemd")
    monkeypatch.delenv("MENTED_SOCKET", raising=False)
    manager = Systemd()
    manager.install(python=daemon_interpreter(), data_dir=short_tmp / "data", on_demand=False)
    config = short_tmp / "config.toml"
    config.write_text('[delivery]\ndefualt = "context"\n')
    # The service's daemon answers, loaded with the file before it went bad.
    running = StatusReply(
        version="0",
        pid=4242,
        uptime_s=60,
        socket=str(manager.socket_path()),
        data_dir=str(short_tmp / "data"),
        config=str(config),
        started_by="systemd",
    )
    monkeypatch.setattr(service_command, "answering", lambda *_a, **_k: running)
    calls.write_text("")

    args = argparse.Namespace(socket=None, json=False, force=False, detached=False, timeout=1.0)
    for run in (service_command.run_restart, service_command.run_service_restart):
        with pytest.raises(CommandError) as refused:
            run(args)
        assert "names 'defualt'" in str(refused.value)
        assert "the running daemon (pid 4242) keeps its configuration" in str(refused.value)
    with pytest.raises(CommandError, match="not installed: the running daemon"):
        service_command.install_service(manager, socket=manager.socket_path(), on_demand=False)
    assert "restart" not in calls.read_text()  # systemd was never asked to restart it

    # --force restarts it: the new daemon runs on the built-in settings.
    service_command.run_service_restart(argparse.Namespace(**{**vars(args), "force": True}))
    assert "--user restart mented.service" in calls.read_text()
