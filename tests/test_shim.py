"""The hook shim as the agent runs it: a separate stdlib-only process that is silent on failure."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mented import paths
from mented.agents.pretooluse import pretooluse_event
from mented.protocol import frame, recv_frame
from mented_client import shim
from mented_client.hook_settings import installed_shim, real_interpreter

PYTHON = str(real_interpreter())
SHIM = str(installed_shim())
BUDGET_MS = 150
# Wall time allowed beyond the budget: interpreter start-up and exit, as measured
# then (`start_up_s`: a busy machine multiplies it), twice, and this on top.
MARGIN_S = 0.45
EVENT = pretooluse_event(
    "git commit -m x", cwd="/home/u/repo", session="s-1", tool_use_id="toolu_1"
)
ANSWER = b'{"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"rules"}}'


def run_shim(
    sock: Path | None,
    stdin: bytes = EVENT,
    *args: str,
    env: dict[str, str] | None = None,
    budget_ms: int = BUDGET_MS,
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    """Run the shim like the agent does; return the result and its wall time."""
    base = {"PATH": "/usr/bin:/bin", "MENTED_HOOK_BUDGET_MS": str(budget_ms)}
    if sock is not None:
        base["MENTED_SOCKET"] = str(sock)
    started = time.monotonic()
    result = subprocess.run(
        [PYTHON, "-I", "-S", SHIM, *(args or ("claude-code",))],
        input=stdin,
        capture_output=True,
        env=base | (env or {}),
        timeout=10,
        check=False,
    )
    return result, time.monotonic() - started


def start_up_s() -> float:
    """The wall time of a shim run with nothing to wait for (its socket does not exist):
    what starting and ending it costs on this machine, now."""
    started = time.monotonic()
    subprocess.run(
        [PYTHON, "-I", "-S", SHIM, "claude-code"],
        input=EVENT,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "MENTED_SOCKET": "/nonexistent/mented.sock"},
        timeout=10,
        check=False,
    )
    return time.monotonic() - started


def within_budget(wall: float) -> bool:
    """Whether a run ended at its budget (not later than start-up, twice, allows)."""
    return wall < BUDGET_MS / 1000 + 2 * start_up_s() + MARGIN_S


def assert_silent(result: subprocess.CompletedProcess[bytes], wall: float) -> None:
    assert result.stdout == b""
    assert result.stderr == b""
    assert result.returncode == 0
    assert within_budget(wall), wall


class FakeDaemon:
    """A Unix socket server whose every connection is handled by `behaviour`."""

    def __init__(self, path: Path, behaviour: Callable[[socket.socket], None]) -> None:
        self.path = path
        self.behaviour = behaviour
        self.requests: list[bytes] = []
        self.connections = 0
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self.held.append(conn)  # closed at the end: "never answers" must not EOF early
            with contextlib.suppress(OSError):
                self.behaviour(conn)

    def read_request(self, conn: socket.socket) -> bytes:
        conn.settimeout(5)
        body = recv_frame(conn)
        self.requests.append(body)
        return body

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


@contextmanager
def fake_daemon(
    short_tmp: Path, behaviour: Callable[[FakeDaemon, socket.socket], None]
) -> Iterator[FakeDaemon]:
    path = short_tmp / "fake.sock"
    server = FakeDaemon(path, lambda conn: behaviour(server, conn))
    try:
        yield server
    finally:
        server.close()


def answers(reply: bytes) -> Callable[[FakeDaemon, socket.socket], None]:
    def behaviour(server: FakeDaemon, conn: socket.socket) -> None:
        server.read_request(conn)
        conn.sendall(reply)

    return behaviour


# ----------------------------------------------------------- what it imports


def imported_modules(
    command: list[str], stdin: bytes = b"", env: dict[str, str] | None = None
) -> set[str]:
    result = subprocess.run(
        command, input=stdin, env=env, capture_output=True, timeout=10, check=False
    )
    line = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)", re.MULTILINE)
    return set(line.findall(result.stderr.decode()))


def test_the_shim_imports_nothing_but_cheap_builtins(short_tmp: Path) -> None:
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        bare = imported_modules([PYTHON, "-I", "-S", "-X", "importtime", "-c", "pass"])
        used = imported_modules(
            [PYTHON, "-I", "-S", "-X", "importtime", SHIM, "claude-code"],
            stdin=EVENT,
            env={"MENTED_SOCKET": str(server.path)},
        )
    assert server.requests, "the shim should have gone all the way to the daemon"
    assert used - bare == {"_socket"}


# ------------------------------------------------------------- the exchange


def test_the_event_travels_verbatim_and_the_answer_is_printed_verbatim(short_tmp: Path) -> None:
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        before = time.time()
        result, _ = run_shim(server.path, EVENT + b"\n")
    assert result.stdout == ANSWER
    assert result.returncode == 0
    (request,) = server.requests
    sent = json.loads(request)
    deadline = sent.pop("deadline")
    assert sent == {"type": "hook", "agent": "claude-code", "event": json.loads(EVENT)}
    assert request.endswith(EVENT + b"}")
    # Its own deadline, on the clock the daemon shares: its budget after it started.
    assert before < deadline <= time.time() + BUDGET_MS / 1000


def test_the_deadline_sent_is_the_budget_the_environment_sets(short_tmp: Path) -> None:
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        before = time.time()
        run_shim(server.path, EVENT, budget_ms=4000)
        after = time.time()
    (request,) = server.requests
    deadline = json.loads(request)["deadline"]
    assert before + 4 < deadline <= after + 4


def test_an_empty_answer_prints_nothing(short_tmp: Path) -> None:
    with fake_daemon(short_tmp, answers(frame(b""))) as server:
        assert_silent(*run_shim(server.path))
        assert len(server.requests) == 1


def test_env_socket_wins_over_the_installed_argument(short_tmp: Path) -> None:
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        # A budget no busy machine's start-up passes: the answer is what is checked.
        result, _ = run_shim(
            server.path, EVENT, "claude-code", str(short_tmp / "nothing.sock"), budget_ms=8000
        )
        assert result.stdout == ANSWER
        result, _ = run_shim(None, EVENT, "claude-code", str(server.path), budget_ms=8000)
        assert result.stdout == ANSWER


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"XDG_RUNTIME_DIR": "/run/user/1000"},
        {"XDG_RUNTIME_DIR": "/run/user/1000/"},
        {"XDG_RUNTIME_DIR": ""},
        {"TMPDIR": "/var/tmp/"},
        {"XDG_RUNTIME_DIR": "", "TMPDIR": "/private/tmp"},
        {"MENTED_SOCKET": "/tmp/x/m.sock", "XDG_RUNTIME_DIR": "/run/user/1000"},
    ],
)
def test_the_shim_finds_the_socket_where_mented_puts_it(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> None:
    for name in ("MENTED_SOCKET", "XDG_RUNTIME_DIR", "TMPDIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    found = shim.socket_path({os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()})
    assert Path(os.fsdecode(found)) == paths.socket_path()


# ------------------------------------------------------------- fault matrix


def never_answers(server: FakeDaemon, conn: socket.socket) -> None:
    server.read_request(conn)


def never_reads(server: FakeDaemon, conn: socket.socket) -> None:
    pass


def test_daemon_not_running(short_tmp: Path) -> None:
    runtime = short_tmp / "run"
    runtime.mkdir()
    result = run_shim(None, env={"XDG_RUNTIME_DIR": str(runtime)})
    assert_silent(*result)


def test_socket_path_missing(short_tmp: Path) -> None:
    assert_silent(*run_shim(short_tmp / "no" / "such" / "dir" / "mented.sock"))


def test_stale_socket_file(short_tmp: Path) -> None:
    path = short_tmp / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # the file stays, nobody listens
    assert path.exists()
    assert_silent(*run_shim(path))


def test_a_daemon_that_accepts_and_never_answers(short_tmp: Path) -> None:
    with fake_daemon(short_tmp, never_answers) as server:
        assert_silent(*run_shim(server.path))
        assert server.connections == 1


def test_a_daemon_that_never_reads_a_large_event(short_tmp: Path) -> None:
    big = b'{"tool_input": {"command": "' + b"x" * 900_000 + b'"}}'
    with fake_daemon(short_tmp, never_reads) as server:
        assert_silent(*run_shim(server.path, big))


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 400 Bad Request\r\n\r\n",  # a length field of about 1.2 GB
        frame(b"x" * 100)[:50],  # cut short, then the connection closes
        b"\x00\x00",  # not even a header
        frame(b'{"type":"error","code":"bad_frame","message":"no"}'),
    ],
    ids=["garbage", "short-body", "short-header", "typed-error"],
)
def test_a_daemon_that_answers_garbage(short_tmp: Path, reply: bytes) -> None:
    def behaviour(server: FakeDaemon, conn: socket.socket) -> None:
        server.read_request(conn)
        conn.sendall(reply)
        conn.close()

    with fake_daemon(short_tmp, behaviour) as server:
        assert_silent(*run_shim(server.path))


def test_a_daemon_that_answers_a_huge_frame(short_tmp: Path) -> None:
    huge = frame(b'{"hookSpecificOutput":"' + b"x" * (2 << 20) + b'"}')
    with fake_daemon(short_tmp, answers(huge)) as server:
        assert_silent(*run_shim(server.path))


@pytest.mark.parametrize(
    "stdin",
    [b"not json", b'"not an object"', b"", b"  \n", b"[1, 2]"],
    ids=["invalid-json", "json-string", "empty", "whitespace", "json-array"],
)
def test_stdin_that_is_not_an_event(short_tmp: Path, stdin: bytes) -> None:
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        assert_silent(*run_shim(server.path, stdin))
        assert server.connections == 0


def test_oversized_stdin(short_tmp: Path) -> None:
    oversized = b'{"tool_input": {"command": "' + b"x" * (1 << 20) + b'"}}'
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        assert_silent(*run_shim(server.path, oversized))
        assert server.connections == 0


def test_stdin_that_never_ends(short_tmp: Path) -> None:
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        started = time.monotonic()
        proc = subprocess.Popen(
            [PYTHON, "-I", "-S", SHIM, "claude-code"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"MENTED_SOCKET": str(server.path), "MENTED_HOOK_BUDGET_MS": str(BUDGET_MS)},
        )
        assert proc.stdin is not None
        proc.stdin.write(EVENT[:10])
        proc.stdin.flush()  # and never closed while the shim runs
        try:
            stdout, stderr = _wait(proc)
        finally:
            proc.stdin.close()
        wall = time.monotonic() - started
    assert (stdout, stderr, proc.returncode) == (b"", b"", 0)
    assert within_budget(wall), wall


def _wait(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    proc.wait(timeout=5)
    assert proc.stdout is not None
    assert proc.stderr is not None
    return proc.stdout.read(), proc.stderr.read()


@pytest.mark.parametrize("agent", ["", "../../etc/passwd", "Claude Code", "x" * 100, 'a"b'])
def test_a_bad_agent_name_is_silence(short_tmp: Path, agent: str) -> None:
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        assert_silent(*run_shim(server.path, EVENT, agent))
        assert server.connections == 0


def test_no_agent_name_is_silence(short_tmp: Path) -> None:
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        result = subprocess.run(
            [PYTHON, "-I", "-S", SHIM],
            input=EVENT,
            capture_output=True,
            env={"MENTED_SOCKET": str(server.path)},
            timeout=10,
            check=False,
        )
    assert (result.stdout, result.stderr, result.returncode) == (b"", b"", 0)


@pytest.mark.parametrize("value", ["soon", "-5", "0", ""])
def test_a_bad_budget_falls_back_to_the_default(short_tmp: Path, value: str) -> None:
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        result, _ = run_shim(server.path, env={"MENTED_HOOK_BUDGET_MS": value})
    assert result.stdout == ANSWER


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(b"600000", 10.0), (b"10001", 10.0), (b"10000", 10.0), (b"9999", 9.999), (b"1", 0.001)],
)
def test_a_huge_budget_is_capped_at_ten_seconds(value: bytes, seconds: float) -> None:
    # MENTED_HOOK_BUDGET_MS=600000 would hold the agent's tool call ten minutes
    # when the daemon hangs: the shim's deadline never passes 10 s.
    assert shim.budget_seconds({b"MENTED_HOOK_BUDGET_MS": value}) == seconds


def test_a_closed_stdout_still_exits_zero(short_tmp: Path) -> None:
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        read_end, write_end = os.pipe()
        os.close(read_end)  # whoever reads our stdout has gone away
        try:
            result = subprocess.run(
                [PYTHON, "-I", "-S", SHIM, "claude-code"],
                input=EVENT,
                stdout=write_end,
                stderr=subprocess.PIPE,
                env={"MENTED_SOCKET": str(server.path)},
                timeout=10,
                check=False,
            )
        finally:
            os.close(write_end)
    assert (result.stderr, result.returncode) == (b"", 0)


def test_the_shim_writes_no_files(short_tmp: Path) -> None:
    home = short_tmp / "home"
    home.mkdir()
    home.chmod(0o500)  # not writable: the shim must not need it
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        before = sorted(p.name for p in short_tmp.rglob("*"))
        result, _ = run_shim(server.path, env={"HOME": str(home)}, budget_ms=8000)
        after = sorted(p.name for p in short_tmp.rglob("*"))
    assert result.stdout == ANSWER
    assert before == after


def test_the_shim_says_what_it_is_near_the_top() -> None:
    head = Path(SHIM).read_text().splitlines()[:3]
    assert any("hook shim" in line for line in head)


@contextmanager
def server_of_another_user(short_tmp: Path) -> Iterator[Path]:
    """A fake daemon that answers every request with ANSWER, listening as `nobody`."""
    import pwd
    import signal

    if os.geteuid() != 0:
        pytest.skip("needs root to listen as another user")
    nobody = pwd.getpwnam("nobody")
    short_tmp.chmod(0o755)  # let `nobody` reach the shared directory
    shared = short_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    path = shared / "mented.sock"
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: another user's process squatting the socket path
        try:
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            listener.listen(8)
            os.write(ready_w, b"!")
            while True:
                conn, _ = listener.accept()
                with contextlib.suppress(OSError):
                    conn.recv(65536)
                    conn.sendall(frame(ANSWER))
                conn.close()
        finally:
            os._exit(0)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"!"
    os.close(ready_r)
    try:
        yield path
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_a_socket_served_by_another_user_gets_nothing_and_prints_nothing(
    short_tmp: Path,
) -> None:
    from mented.protocol import StatusReply, StatusRequest
    from mented_client.connection import Client, NotRunningError

    with server_of_another_user(short_tmp) as path:
        result, _ = run_shim(path)
        assert result.returncode == 0
        assert result.stdout == b""
        with pytest.raises(NotRunningError, match="not by you"):
            Client(path).expect(StatusRequest(), StatusReply)


def test_a_large_answer_to_a_stdout_nobody_reads_ends_within_the_budget(
    short_tmp: Path,
) -> None:
    # Over a pipe's 64 KiB buffer (Linux's default; macOS's is smaller), under MAX_REPLY.
    large = b'{"hookSpecificOutput":"' + b"x" * (256 << 10) + b'"}'
    assert len(large) < shim.MAX_REPLY
    with fake_daemon(short_tmp, answers(frame(large))) as server:
        read_end, write_end = os.pipe()  # the agent holds the read end and never reads it
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                [PYTHON, "-I", "-S", SHIM, "claude-code"],
                stdin=subprocess.PIPE,
                stdout=write_end,
                stderr=subprocess.PIPE,
                env={"MENTED_SOCKET": str(server.path), "MENTED_HOOK_BUDGET_MS": str(BUDGET_MS)},
            )
            os.close(write_end)
            try:
                proc.communicate(EVENT, timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            wall = time.monotonic() - started
        finally:
            os.close(read_end)
        assert len(server.requests) == 1, "the shim should have had its answer"
    assert proc.returncode == 0
    assert within_budget(wall), wall


# ------------------------------------------------ the bounds, at their edge


def test_an_event_of_exactly_the_stdin_limit_still_reaches_the_daemon(short_tmp: Path) -> None:
    # MAX_STDIN is the largest event the shim passes on: one byte more is silence
    # (test_oversized_stdin), this one is the user's command and gets its rules.
    head, tail = b'{"tool_input": {"command": "', b'"}}'
    event = head + b"x" * (shim.MAX_STDIN - len(head) - len(tail)) + tail
    assert len(event) == shim.MAX_STDIN
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        result, _ = run_shim(server.path, event, budget_ms=8000)
        assert result.stdout == ANSWER
        (request,) = server.requests
    assert request.endswith(event + b"}")


def test_an_answer_of_exactly_the_reply_limit_is_printed_whole(short_tmp: Path) -> None:
    head, tail = b'{"hookSpecificOutput":{"additionalContext":"', b'"}}'
    answer = head + b"r" * (shim.MAX_REPLY - len(head) - len(tail)) + tail
    assert len(answer) == shim.MAX_REPLY
    with fake_daemon(short_tmp, answers(frame(answer))) as server:
        result, _ = run_shim(server.path, EVENT, budget_ms=8000)
    assert result.stdout == answer


def test_an_agent_name_of_exactly_the_longest_allowed_is_passed_on(short_tmp: Path) -> None:
    longest = "a" * shim.MAX_AGENT_NAME
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        result, _ = run_shim(server.path, EVENT, longest, budget_ms=8000)
        assert result.stdout == ANSWER
        (request,) = server.requests
    assert json.loads(request)["agent"] == longest


@pytest.mark.parametrize(("value", "marked"), [("1", True), ("0", False), ("", False)])
def test_a_test_fire_is_marked_as_one_and_still_answered(
    short_tmp: Path, value: str, marked: bool
) -> None:
    # `mentectl doctor` and `setup` fire the hook with MENTED_TEST_FIRE=1: the daemon
    # must see that it is not the user's command (not counted as their activity).
    with fake_daemon(short_tmp, answers(frame(ANSWER))) as server:
        result, _ = run_shim(server.path, env={"MENTED_TEST_FIRE": value}, budget_ms=8000)
        (request,) = server.requests
    assert result.stdout == ANSWER
    assert json.loads(request).get("test", False) is marked


def test_a_daemon_that_hangs_up_mid_answer_ends_the_hook_at_once(short_tmp: Path) -> None:
    # Cut short, then the connection closes: the shim ends silently when it reads the
    # end, not at its deadline (8 s here: the agent's command would wait that long).
    def behaviour(server: FakeDaemon, conn: socket.socket) -> None:
        server.read_request(conn)
        conn.sendall(frame(ANSWER)[:20])
        conn.shutdown(socket.SHUT_WR)

    with fake_daemon(short_tmp, behaviour) as server:
        result, wall = run_shim(server.path, budget_ms=8000)
    assert (result.stdout, result.returncode) == (b"", 0)
    assert wall < 4 * start_up_s() + 2, wall
