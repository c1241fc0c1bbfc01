"""Shared fixtures. `daemon` runs the real `mented` process on private paths."""

from __future__ import annotations

import compileall
import contextlib
import functools
import io
import locale
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

import mented
import mented_client
from mented.protocol import HEADER, ActionsReply, ActionsRequest, StatusReply, StatusRequest
from mented.sessions import SessionMemory
from mented.store import Store
from mented_client.cli import _verb_of
from mented_client.cli import main as mentectl_main
from mented_client.connection import Client, NotRunningError, ProtocolError

PYTHON = sys.executable
# Generous: a daemon starts in about a second, but took over 15 s on a shared
# 2-core machine at a load average of 20. Only a daemon that never starts waits it out.
START_TIMEOUT = 60.0
AGENT_TESTS_ENV = "MENTED_AGENT_TESTS"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile mented's sources once, before the tests start hundreds of processes from them.

    The daemons and mentectl the tests start run with PYTHONDONTWRITEBYTECODE (as
    many CI images set it too), and an editable install leaves the sources
    uncompiled: each process would compile them again (~0.4 s of CPU). Once here,
    on the controller only (xdist's workers have `workerinput`).
    """
    if hasattr(session.config, "workerinput"):
        return
    for package in (mented, mented_client):
        compileall.compile_dir(Path(package.__path__[0]), quiet=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The `agents` tests download and run the real agents: only when asked to, then first.

    Under mutmut (docs/testing.md) the tests with a daemon process are left out: the
    process imports the unmutated sources, so they cannot kill a mutant.
    """
    if "MUTANT_UNDER_TEST" in os.environ:
        items[:] = [item for item in items if "daemon" not in getattr(item, "fixturenames", ())]
    if os.environ.get(AGENT_TESTS_ENV) == "1":
        # The agents' tests first (a stable sort keeps each agent's tests together):
        # each takes many seconds, and started last they kept one worker busy after
        # the others had run out of tests (`--dist worksteal` hands out the rest).
        items.sort(key=lambda item: item.get_closest_marker("agents") is None)
        return
    skip = pytest.mark.skip(
        reason=f"with the real agents: set {AGENT_TESTS_ENV}=1 (needs npm; .ci/run does it)"
    )
    for item in items:
        if item.get_closest_marker("agents") is not None:
            item.add_marker(skip)


@contextlib.contextmanager
def ctrl_c_reaches_children() -> Iterator[None]:
    """Start processes here as a terminal does: with SIGINT not ignored.

    A suite started in the background (`pytest &` in a script, nohup) has SIGINT
    ignored and passes that on to what it starts: a test of Ctrl-C would see its
    process run on. A handler set here is reset to the default in the child.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(autouse=True)
def _state_under_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """mentectl run in-process keeps its state (`added_settings`) under the test's HOME."""
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path: Unix socket paths are limited to ~107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def nobody() -> pwd.struct_passwd:
    """The `nobody` account, to act as another user; skips unless we are root and it exists."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user on this machine")


def connect_unix(path: Path, timeout: float = 15.0) -> socket.socket:
    """A blocking connection to the socket at `path`, waiting while its accept backlog is full.

    With a timeout set, a Unix socket's connect fails at once with EAGAIN when the
    listener's backlog is full instead of waiting, as a burst of connections can make it.
    """
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except BlockingIOError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)
        else:
            return sock


def raw_exchange(path: Path, data: bytes, timeout: float = 15.0) -> bytes:
    """Send raw bytes, close our side, and return all the daemon sent until it closed."""
    with connect_unix(path, timeout) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)  # the daemon may close early, e.g. on a frame too large
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        received = bytearray()
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(1 << 16):
                received += chunk
        return bytes(received)


def split_frames(data: bytes) -> list[bytes]:
    """The bodies of the frames in `data`, which must hold whole frames only."""
    bodies = []
    while data:
        assert len(data) >= HEADER.size, f"a torn frame header: {data!r}"
        (length,) = HEADER.unpack_from(data)
        end = HEADER.size + length
        assert len(data) >= end, f"a torn frame: {length} bytes announced, {len(data) - 4} sent"
        bodies.append(data[HEADER.size : end])
        data = data[end:]
    return bodies


def isolated_env(root: Path) -> dict[str, str]:
    """The environment of a user whose home, runtime, data and config are under `root`."""
    # The agents' own variables too: with them, `hooks install` would write the real config.
    agents = {"CLAUDE_CONFIG_DIR", "CODEX_HOME"}
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MENTED_", "XDG_")) and k not in agents
    }
    home = root / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        MENTED_SOCKET=str(root / "run" / "mented.sock"),
        MENTED_DATA_DIR=str(root / "data"),
        MENTED_CONFIG=str(root / "config.toml"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


# The verbs that ask the daemon (or edit files) and end: `DaemonProcess.mentectl`
# runs them in the test's process, which saves an interpreter start and mentectl's
# imports (~0.2 s of CPU) per command. The others start, stop or wait on processes
# (`start`, `setup`, `watch`, `mcp`, `uninstall`, ...) and keep a process of their own.
IN_PROCESS_VERBS = frozenset(
    {
        "actions", "doctor", "explain", "export", "hooks", "import", "log", "recall",
        "reindex", "reload", "remember", "report", "rule", "status", "sync", "trust",
    }
)  # fmt: skip
MENTECTL_TIMEOUT_S = 60


def run_mentectl(
    args: list[str], *, env: dict[str, str], stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`mentectl ARGS` with `env`, as `subprocess.run(..., text=True)` would return it.

    A verb of `IN_PROCESS_VERBS` runs here, as its process would: `os.environ` is
    `env`, the working directory `cwd`, stdin/stdout/stderr are pipes' streams with a
    child's encoding and error handler, `SystemExit` and an uncaught exception
    (its traceback on stderr) are the exit status, and it fails after 60 s as the
    process's timeout does. Everything is put back afterwards.
    """
    command = [PYTHON, "-m", "mented_client.cli", *args]
    # Only from the main thread: the swaps below are the whole process's (a model
    # server's thread running `rule supersede` would change the test's environment).
    main_thread = threading.current_thread() is threading.main_thread()
    if _verb_of(args) not in IN_PROCESS_VERBS or not main_thread:
        return subprocess.run(
            command,
            env=env,
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=MENTECTL_TIMEOUT_S,
            check=False,
        )
    encoding, errors = _child_stdio()
    out, err = io.BytesIO(), io.BytesIO()
    streams = (
        io.TextIOWrapper(
            io.BytesIO((stdin or "").encode(locale.getencoding())), encoding=encoding, errors=errors
        ),
        io.TextIOWrapper(out, encoding=encoding, errors=errors, line_buffering=False),
        io.TextIOWrapper(err, encoding=encoding, errors="backslashreplace"),
    )
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_env = dict(os.environ)
    saved_cwd = Path.cwd()

    def timed_out(_signum: int, _frame: object) -> None:
        raise _TimedOut  # not an Exception: mentectl's own handler must not catch it

    saved_alarm = signal.signal(signal.SIGALRM, timed_out)
    try:
        os.environ.clear()
        os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = streams
        signal.setitimer(signal.ITIMER_REAL, MENTECTL_TIMEOUT_S)
        try:
            status = mentectl_main(args)
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                status = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                status = 1
        except _TimedOut:
            raise subprocess.TimeoutExpired(command, MENTECTL_TIMEOUT_S) from None
        except Exception:  # noqa: BLE001 - as the interpreter does at exit
            traceback.print_exc()
            status = 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for stream in streams[1:]:
            stream.flush()
    finally:
        signal.signal(signal.SIGALRM, saved_alarm)
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(command, status, _read_pipe(out), _read_pipe(err))


class _TimedOut(BaseException):
    """An in-process mentectl ran longer than its process may."""


def _read_pipe(data: io.BytesIO) -> str:
    """What `subprocess.run(text=True)` makes of `data`: the locale's text, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data.getvalue()), encoding=locale.getencoding()).read()


@functools.cache
def _child_stdio() -> tuple[str, str]:
    """The encoding and error handler of a child interpreter's stdout on a pipe."""
    probe = "import sys; print(sys.stdout.encoding, sys.stdout.errors)"
    words = subprocess.run(
        [PYTHON, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    return words[0], words[1]


class DaemonProcess:
    """A real `mented` process on private paths, driven like a user would."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = isolated_env(root)
        self.socket = Path(self.env["MENTED_SOCKET"])
        self.data_dir = Path(self.env["MENTED_DATA_DIR"])
        self.config_path = Path(self.env["MENTED_CONFIG"])
        self.home = Path(self.env["HOME"])
        self.log_path = root / "mented.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self, *extra_args: str) -> list[str]:
        """The command line that starts the daemon (a subclass may wrap it)."""
        return [PYTHON, "-m", "mented.daemon", *extra_args]

    def start(self, *extra_args: str, wait: bool = True) -> subprocess.Popen[bytes]:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(*extra_args),
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        if wait:
            self.wait_ready()
        return self.proc

    def wait_ready(self, timeout: float = START_TIMEOUT) -> StatusReply:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                msg = f"mented exited with {self.proc.returncode}:\n{self.log()}"
                raise AssertionError(msg)
            try:
                with self.client(timeout=1.0) as client:
                    status: StatusReply = client.expect(StatusRequest(), StatusReply)
                    # `status` is answered before trio too (mented.first_answers): the
                    # action list only by the trio server, serving (signals, the log).
                    client.expect(ActionsRequest(), ActionsReply)
                    return status
            except (NotRunningError, ProtocolError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Stop the daemon with `sig` and return its exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        status = self.proc.wait(timeout=timeout)
        self.proc = None
        return status

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def client(self, timeout: float = 10.0) -> Client:
        return Client(self.socket, connect_timeout=timeout, timeout=timeout)

    def mentectl(
        self, *args: str, check: bool = True, stdin: str | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`mentectl ARGS` as the user runs it, in this environment; in this process when
        the verb asks the daemon and ends (see `run_mentectl`), else as a process."""
        result = run_mentectl(list(args), env=self.env, stdin=stdin, cwd=cwd)
        if check and result.returncode != 0:
            msg = (
                f"mentectl {' '.join(args)} exited {result.returncode}\n"
                f"stdout: {result.stdout}\nstderr: {result.stderr}"
            )
            raise AssertionError(msg)
        return result

    def write_config(self, text: str) -> None:
        self.config_path.write_text(text)

    def reload(self) -> None:
        from mented.protocol import OkReply, ReloadRequest

        with self.client() as client:
            client.expect(ReloadRequest(), OkReply)


@pytest.fixture
def daemon(short_tmp: Path) -> Iterator[DaemonProcess]:
    """A running `mented` on private paths; stopped (SIGKILL as a last resort) afterwards."""
    process = DaemonProcess(short_tmp)
    try:
        # Inside: a daemon that starts but is not ready in time is stopped too (it
        # was left running, orphaned, once the tests ended).
        process.start()
        yield process
    finally:
        if process.proc is not None and process.proc.poll() is None:
            process.proc.terminate()
            try:
                process.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.proc.kill()
                process.proc.wait()


@pytest.fixture
def small_tmpfs(short_tmp: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs to fill up; skips, saying why, where it cannot be mounted."""
    mount_point = short_tmp / "small-disk"
    mount_point.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, check=False)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """An empty store, unsynced (fast); modules that need another kind define their own."""
    opened = Store(tmp_path / "data", sync=False)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[SessionMemory]:
    """A session memory that forgets a session after an hour."""
    opened = SessionMemory(tmp_path / "sessions", ttl_s=3600)
    try:
        yield opened
    finally:
        opened.close()
