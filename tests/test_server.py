"""The real daemon process: requests, bad input, peers, start-up and shutdown."""

from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from mented.agents.pretooluse import pretooluse_event
from mented.listener import DESCRIPTOR_RESERVE, MAX_CONNECTIONS
from mented.protocol import (
    HEADER,
    MAX_FRAME,
    ErrorCode,
    ForgetRequest,
    ForgottenReply,
    GetRequest,
    HistoryRequest,
    ListRequest,
    LogReply,
    LogRequest,
    MemoriesReply,
    MemoryReply,
    OkReply,
    RecallRequest,
    ReloadRequest,
    ShutdownRequest,
    StatusReply,
    StatusRequest,
    StoredReply,
    StoreRequest,
    SupersededReply,
    SupersedeRequest,
    encode,
    frame,
    reply_decoder,
)
from mented_client.connection import Client, DaemonError, NotRunningError
from tests.conftest import PYTHON, DaemonProcess, raw_exchange, split_frames

COMMIT = "trigger:git-commit"


def decode_reply(data: bytes) -> object:
    """The one reply frame in `data`, decoded."""
    (body,) = split_frames(data)
    return reply_decoder.decode(body)


def connect_as(uid: int, gid: int, path: Path, data: bytes) -> bytes:
    """Fork, drop to `uid`, send `data` on the socket and return what came back.

    A fork rather than a new interpreter: another user may not be allowed to
    execute anything under this checkout.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 0
        try:
            os.close(read_end)
            os.setgid(gid)
            os.setuid(uid)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                sock.connect(str(path))
                try:
                    sock.sendall(data)
                    answer = sock.recv(100)
                except (BrokenPipeError, ConnectionResetError):
                    answer = b""  # closed on us: what a refusal looks like
                os.write(write_end, b"ok:" + answer)
        except BaseException as exc:  # noqa: BLE001 - report anything to the parent
            os.write(write_end, f"error:{exc!r}".encode())
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        result = pipe.read()
    os.waitpid(pid, 0)
    assert result.startswith(b"ok:"), result
    return result[3:]


def assert_alive(daemon: DaemonProcess) -> None:
    with daemon.client() as client:
        assert client.expect(StatusRequest(), StatusReply).pid == daemon.proc.pid  # type: ignore[union-attr]


def test_every_request_round_trips(daemon: DaemonProcess) -> None:
    with daemon.client() as client:
        old = client.expect(StoreRequest(content="one line", tags=[COMMIT]), StoredReply).id
        fact = client.expect(
            StoreRequest(content="we deploy on fridays", tags=["ops"]), StoredReply
        )
        assert client.expect(GetRequest(id=old), MemoryReply).memory.content == "one line"
        recalled = client.expect(RecallRequest(action="git-commit"), MemoriesReply).memories
        assert [m.id for m in recalled] == [old]
        replaced = client.expect(SupersedeRequest(id=old, content="two lines"), SupersededReply)
        assert replaced.old.id == old
        recalled = client.expect(RecallRequest(action="Git-Commit"), MemoriesReply).memories
        assert [m.content for m in recalled] == ["two lines"]
        chain = client.expect(HistoryRequest(id=old), MemoriesReply).memories
        assert [m.id for m in chain] == [old, replaced.id]
        listed = client.expect(ListRequest(tag="ops"), MemoriesReply).memories
        assert [m.id for m in listed] == [fact.id]
        assert client.expect(ForgetRequest(id=fact.id), ForgottenReply).id == fact.id
        assert client.expect(LogRequest(n=5), LogReply).fires == []
        status = client.expect(StatusRequest(), StatusReply)
        assert status.memories == 2
        assert status.requests_served >= 9
        assert client.expect(ReloadRequest(), OkReply)


def test_several_requests_share_one_connection_and_errors_keep_it_open(
    daemon: DaemonProcess,
) -> None:
    with daemon.client() as client:
        with pytest.raises(DaemonError) as missing:
            client.expect(GetRequest(id="01JZZZZZZZZZZZZZZZZZZZZZZZ"), MemoryReply)
        assert missing.value.code == ErrorCode.NOT_FOUND
        with pytest.raises(DaemonError) as invalid:
            client.expect(StoreRequest(content="x", tags=["trigger:  "]), StoredReply)
        assert invalid.value.code == ErrorCode.INVALID
        assert client.expect(StatusRequest(), StatusReply)


def test_superseding_twice_names_the_current_rule(daemon: DaemonProcess) -> None:
    with daemon.client() as client:
        old = client.expect(StoreRequest(content="a", tags=[COMMIT]), StoredReply).id
        new = client.expect(SupersedeRequest(id=old, content="b"), SupersededReply).id
        with pytest.raises(DaemonError) as conflict:
            client.expect(SupersedeRequest(id=old, content="c"), SupersededReply)
    assert conflict.value.code == ErrorCode.CONFLICT
    assert new in conflict.value.message


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{definitely not json", ErrorCode.BAD_FRAME),
        (b'{"type": "format-disk"}', ErrorCode.UNKNOWN_REQUEST),
        (b'{"type": "recall_for_action", "action": 42}', ErrorCode.BAD_REQUEST),
        (b'{"type": "store"}', ErrorCode.BAD_REQUEST),
    ],
)
def test_bad_input_gets_a_typed_error_and_the_daemon_stays_up(
    daemon: DaemonProcess, body: bytes, code: str
) -> None:
    reply = decode_reply(raw_exchange(daemon.socket, frame(body)))
    assert getattr(reply, "code", None) == code
    assert_alive(daemon)


def test_oversized_frame_is_refused_before_reading_then_closed(daemon: DaemonProcess) -> None:
    received = raw_exchange(daemon.socket, HEADER.pack(MAX_FRAME + 1) + b"{")
    reply = decode_reply(received)
    assert getattr(reply, "code", None) == ErrorCode.FRAME_TOO_LARGE
    assert_alive(daemon)


def test_truncated_frame_and_mid_request_disconnect_lose_nothing(daemon: DaemonProcess) -> None:
    with daemon.client() as client:
        kept = client.expect(StoreRequest(content="keep me", tags=[COMMIT]), StoredReply).id
    for partial in (b"\x00\x00", encode(StoreRequest(content="half", tags=[COMMIT]))[:-3]):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(daemon.socket))
            sock.sendall(partial)
    with daemon.client() as client:
        rules = client.expect(RecallRequest(action="git-commit"), MemoriesReply).memories
    assert [m.id for m in rules] == [kept]


def test_other_users_are_refused_by_the_peer_check(
    daemon: DaemonProcess, nobody: pwd.struct_passwd
) -> None:
    # Open the path up so that only the peer-credential check stands in the way.
    daemon.root.chmod(0o755)
    daemon.socket.parent.chmod(0o755)
    daemon.socket.chmod(0o666)
    received = connect_as(nobody.pw_uid, nobody.pw_gid, daemon.socket, encode(StatusRequest()))
    assert received == b""  # closed without an answer
    assert '"peer_refused"' in daemon.log()
    assert_alive(daemon)


def test_a_stale_socket_file_is_replaced(short_tmp: Path) -> None:
    process = DaemonProcess(short_tmp)
    process.socket.parent.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(process.socket))
    stale.close()  # the file stays, nobody listens: what a killed daemon leaves
    process.start()
    try:
        assert_alive(process)
    finally:
        process.stop()


def run_second_daemon(daemon: DaemonProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """Start another `mented` in `daemon`'s environment with `args`; wait for it to exit."""
    return subprocess.run(
        [PYTHON, "-m", "mented.daemon", *args],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_a_second_daemon_on_the_same_socket_is_refused(daemon: DaemonProcess) -> None:
    second = run_second_daemon(daemon, "--data-dir", str(daemon.root / "other-data"))
    assert second.returncode == 1
    assert "already running" in second.stderr
    assert_alive(daemon)


def test_a_second_daemon_on_the_same_data_dir_names_the_first(daemon: DaemonProcess) -> None:
    second = run_second_daemon(daemon, "--socket", str(daemon.root / "run2" / "s.sock"))
    assert second.returncode == 1
    assert f"pid {daemon.proc.pid}" in second.stderr  # type: ignore[union-attr]
    assert str(daemon.socket) in second.stderr
    assert_alive(daemon)


def test_sigterm_shuts_down_cleanly_and_data_survives_a_restart(daemon: DaemonProcess) -> None:
    with daemon.client() as client:
        kept = client.expect(StoreRequest(content="survive", tags=[COMMIT]), StoredReply).id
    assert daemon.stop(signal.SIGTERM) == 0
    assert not daemon.socket.exists()
    with pytest.raises(NotRunningError):
        Client(daemon.socket, connect_timeout=1).expect(StatusRequest(), StatusReply)
    daemon.start()
    with daemon.client() as client:
        rules = client.expect(RecallRequest(action="git-commit"), MemoriesReply).memories
    assert [m.id for m in rules] == [kept]


def test_idle_connections_do_not_delay_shutdown_and_shutdown_request_answers(
    daemon: DaemonProcess,
) -> None:
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    idle.connect(str(daemon.socket))
    with daemon.client() as client:
        assert client.expect(ShutdownRequest(), OkReply)
    assert daemon.proc is not None
    assert daemon.proc.wait(timeout=10) == 0
    idle.close()
    assert not daemon.socket.exists()


def test_refuses_a_socket_directory_open_to_others(short_tmp: Path) -> None:
    process = DaemonProcess(short_tmp)
    process.socket.parent.mkdir(mode=0o700)
    process.socket.parent.chmod(0o777)
    proc = process.start(wait=False)
    assert proc.wait(timeout=30) == 1
    assert "open to other users" in process.log()


def test_never_follows_a_planted_symlink(short_tmp: Path) -> None:
    process = DaemonProcess(short_tmp)
    process.socket.parent.mkdir(mode=0o700)
    target = short_tmp / "elsewhere"
    target.write_text("not yours")
    process.socket.symlink_to(target)
    proc = process.start(wait=False)
    assert proc.wait(timeout=30) == 1
    assert "symlink" in process.log()
    assert target.read_text() == "not yours"


def test_socket_is_private_from_birth(daemon: DaemonProcess) -> None:
    assert daemon.socket.stat().st_mode & 0o777 == 0o600
    assert daemon.socket.parent.stat().st_mode & 0o777 == 0o700


def test_json_logs_on_stderr(daemon: DaemonProcess) -> None:
    first = daemon.log().splitlines()[0]
    entry = msgspec.json.decode(first)
    assert entry["event"] == "ready"
    assert entry["socket"] == str(daemon.socket)


def test_module_runs_as_script() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mented.daemon", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--data-dir" in result.stdout


def test_a_hook_envelope_around_broken_stdin_is_answered_with_silence(
    daemon: DaemonProcess,
) -> None:
    body = b'{"type":"hook","agent":"claude-code","event":{not json}'
    assert raw_exchange(daemon.socket, frame(body)) == frame(b"")
    assert_alive(daemon)


def hook_envelope(command: str, session: str, deadline: float | None) -> bytes:
    """A hook request frame as the shim sends it, with `deadline` or (None) as an older shim."""
    event = pretooluse_event(command, cwd="/home/u/repo", session=session)
    late = b"" if deadline is None else b'"deadline":' + repr(deadline).encode() + b","
    return frame(b'{"type":"hook","agent":"claude-code",' + late + b'"event":' + event + b"}")


def test_a_hook_past_its_callers_deadline_is_dropped_and_older_shims_keep_working(
    daemon: DaemonProcess,
) -> None:
    with daemon.client() as client:
        client.expect(
            StoreRequest(content="commit messages: single line", tags=[COMMIT]), StoredReply
        )
    commit = 'git commit -m "fix: x"'
    # The caller gave up already (it sent its request a second ago): nobody reads it.
    late = hook_envelope(commit, "s-1", time.time() - 1)
    assert raw_exchange(daemon.socket, late) == frame(b"")
    # So the session still gets the rules: from an older shim that sends no deadline...
    (answer,) = split_frames(raw_exchange(daemon.socket, hook_envelope(commit, "s-1", None)))
    assert b"commit messages: single line" in answer
    # ...and from one with time left.
    fresh = hook_envelope(commit, "s-2", time.time() + 5)
    (answer,) = split_frames(raw_exchange(daemon.socket, fresh))
    assert b"commit messages: single line" in answer


def test_a_data_dir_that_is_a_file_is_refused_with_a_message(short_tmp: Path) -> None:
    process = DaemonProcess(short_tmp)
    process.data_dir.write_text("I am a file")
    proc = process.start(wait=False)
    assert proc.wait(timeout=30) == 1
    assert "cannot use the data directory" in process.log()
    assert "Traceback" not in process.log()
    assert process.data_dir.read_text() == "I am a file"


def test_an_invalid_config_on_disk_makes_status_unhealthy_without_a_reload(
    daemon: DaemonProcess,
) -> None:
    daemon.write_config("[hook]\nk = 0\n")
    with daemon.client() as client:
        status = client.expect(StatusRequest(), StatusReply)
    assert status.config_error is not None
    assert str(daemon.config_path) in status.config_error
    daemon.write_config("[hook]\nk = 2\n")
    with daemon.client() as client:
        assert client.expect(StatusRequest(), StatusReply).config_error is None


def test_the_open_files_limit_is_raised_towards_the_hard_limit(short_tmp: Path) -> None:
    import resource

    process = DaemonProcess(short_tmp)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1024:
        pytest.skip(f"the hard limit ({hard}) leaves nothing to raise")

    def low_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    with process.log_path.open("ab") as log:
        process.proc = subprocess.Popen(
            [PYTHON, "-m", "mented.daemon"],
            env=process.env,
            stdout=log,
            stderr=log,
            preexec_fn=low_soft_limit,  # noqa: PLW1509 - no threads in this test process matter
        )
    try:
        process.wait_ready()
        limits = Path(f"/proc/{process.proc.pid}/limits").read_text()
        line = next(row for row in limits.splitlines() if row.startswith("Max open files"))
        # Raised as far as the connection cap needs, no further: each connection costs
        # memory, and 65,536 of them once could hold several GiB.
        assert 256 < int(line.split()[3]) <= MAX_CONNECTIONS + DESCRIPTOR_RESERVE
    finally:
        process.stop()


def test_a_bad_action_table_on_reload_keeps_the_previous_one_serving(
    daemon: DaemonProcess,
) -> None:
    event = pretooluse_event("make deploy", cwd="/tmp", session="s")
    daemon.write_config('[[actions.deploy.shapes]]\nprogram = "make"\nsubcommand = ["deploy"]\n')
    daemon.reload()
    with daemon.client() as client:
        client.expect(
            StoreRequest(content="deploy on weekdays only", tags=["trigger:deploy"]), StoredReply
        )
        assert b"deploy on weekdays only" in client.hook("claude-code", event)
    daemon.write_config('[[actions.deploy.shapes]]\nprogram = "make"\nsubcommand = "deploy"\n')
    with daemon.client() as client, pytest.raises(DaemonError) as refused:
        client.expect(ReloadRequest(), OkReply)
    assert str(daemon.config_path) in refused.value.message
    assert "deploy" in refused.value.message
    again = pretooluse_event("make deploy", cwd="/tmp", session="t")  # not a duplicate delivery
    with daemon.client() as client:
        assert b"deploy on weekdays only" in client.hook("claude-code", again)
