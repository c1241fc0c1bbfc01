"""The first hooks answered before trio is imported (mented/first_answers.py, issue 22 item 8).

In-process: `open_first_answers` and `answer_waiting` on the test's main thread (as the
daemon runs them before importing trio), clients in threads, then the trio server
taking over (`ServerOptions.first_answers`). Each test sets the phase's bounds so that
it ends by its answer count, never by the clock. One real daemon, under socket
activation, shows the phase in the process the service manager starts.
"""

from __future__ import annotations

import functools
import json
import pwd
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
import trio

from mented import first_answers
from mented.activity import FireFilter
from mented.agents.pretooluse import pretooluse_event
from mented.first_answers import FirstAnswers, open_first_answers
from mented.protocol import (
    HEADER,
    MAX_FRAME,
    ErrorCode,
    ErrorReply,
    HookRequest,
    ListRequest,
    MemoriesReply,
    RecallRequest,
    StatusReply,
    StatusRequest,
    encode,
    recv_frame,
    reply_decoder,
)
from mented.server import Server, ServerOptions
from mented.store import Store
from tests.conftest import PYTHON, isolated_env
from tests.test_server import connect_as
from tests.test_service import launch_with_fd3

RULE = "commit messages: one line, a conventional prefix"
TIMEOUT = 30.0
# Bounds that never end a test's phase before its answers: it ends by `max_answers`.
UNHURRIED = {"phase_s": 120.0, "idle_s": 120.0, "frame_wait_s": 120.0, "next_wait_s": 120.0}


def seeded(data_dir: Path) -> Path:
    store = Store(data_dir)
    try:
        store.store(RULE, tags=["trigger:git-commit"])
    finally:
        store.close()
    return data_dir


def hook(command: str, *, session: str, call: str, cwd: str = "/") -> bytes:
    event = pretooluse_event(command, cwd=cwd, session=session, tool_use_id=call)
    request = HookRequest(
        agent="claude-code", event=msgspec.Raw(event), deadline=time.time() + TIMEOUT
    )
    return encode(request)


def exchange(path: Path, data: bytes) -> bytes:
    """Send `data` on a new connection; the body of the one answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(TIMEOUT)
        sock.connect(str(path))
        sock.sendall(data)
        return recv_frame(sock)


# A session's commands in turn: stopped once with the rules, the retry let through,
# another commit pointed at the rules handed over, a command with no action. Built
# when a test runs: each carries its deadline.
def session() -> list[bytes]:
    return [
        hook('git commit -m "fix: a"', session="s1", call="t1"),
        hook('git commit -m "fix: a"', session="s1", call="t2"),
        hook('git commit -m "fix: b"', session="s1", call="t3"),
        hook("ls -l", session="s1", call="t4"),
    ]


def opened(root: Path) -> FirstAnswers:
    first = open_first_answers(
        socket_path=root / "run" / "s.sock",
        data_dir=root / "data",
        config_path=None,
        inherited_socket=None,
    )
    assert first is not None
    return first


def server_options(root: Path, first: FirstAnswers | None) -> ServerOptions:
    return ServerOptions(
        socket_path=root / "run" / "s.sock",
        data_dir=root / "data",
        handle_signals=False,
        first_answers=first,
    )


async def serve_while(server: Server, work: Callable[[], object]) -> None:
    """Run the trio server until `work` (blocking, in a thread) returns."""
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        await trio.to_thread.run_sync(work)
        server.request_shutdown()


def in_thread(work: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def join_all(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(TIMEOUT)


def answers_of_a_trio_server(root: Path) -> list[bytes]:
    answers: list[bytes] = []

    def run_session() -> None:
        answers.extend(exchange(root / "run" / "s.sock", data) for data in session())

    server = Server(server_options(root, None))
    server.open()
    try:
        trio.run(serve_while, server, run_session)
    finally:
        server.close()
    return answers


@pytest.mark.parametrize("answered_first", [1, 4])
def test_the_first_answers_are_the_trio_servers_to_the_byte(
    short_tmp: Path, answered_first: int
) -> None:
    seeded(short_tmp / "a" / "data")
    shutil.copytree(short_tmp / "a", short_tmp / "b")  # the same rule, the same id
    expected = answers_of_a_trio_server(short_tmp / "b")
    assert RULE.encode() in expected[0]  # stopped, with the rule
    assert expected[3] == b""  # no action: nothing

    root = short_tmp / "a"
    answers: list[bytes] = []
    first = opened(root)
    client = in_thread(
        lambda: answers.extend(exchange(root / "run" / "s.sock", data) for data in session())
    )
    first.answer_waiting(max_answers=answered_first, **UNHURRIED)
    assert first.answered == answered_first
    server = Server(server_options(root, first))
    server.open()
    try:
        trio.run(serve_while, server, client.join)
        fires, _ = server.activity.query(FireFilter(), 10)
    finally:
        server.close()
    # The stop recorded before trio counts after it: the retry is let through, the
    # next commit gets the pointer, as from the trio server alone.
    assert answers == expected
    assert server.stats.requests == 4
    # And `mentectl log` has the fires answered before trio as well as after.
    assert [fire.actions for fire in fires].count(["git-commit"]) == 3


def test_another_users_connection_is_refused_before_trio_too(
    short_tmp: Path, nobody: pwd.struct_passwd
) -> None:
    seeded(short_tmp / "data")
    first = opened(short_tmp)
    socket_path = short_tmp / "run" / "s.sock"
    short_tmp.chmod(0o755)
    socket_path.parent.chmod(0o755)
    socket_path.chmod(0o666)
    results: dict[str, bytes] = {}

    def clients() -> None:
        results["nobody"] = connect_as(nobody.pw_uid, nobody.pw_gid, socket_path, session()[0])
        results["ours"] = exchange(socket_path, session()[0])  # ends the phase: one answer

    thread = in_thread(clients)
    try:
        first.answer_waiting(max_answers=1, **UNHURRIED)
        thread.join(TIMEOUT)
    finally:
        first.close()
    assert results["nobody"] == b""  # closed without a byte
    assert RULE.encode() in results["ours"]  # the rules went to our user, once


def test_a_flood_during_the_hand_over_loses_no_connection(short_tmp: Path) -> None:
    seeded(short_tmp / "data")
    socket_path = short_tmp / "run" / "s.sock"
    first = opened(short_tmp)
    answers: dict[int, bytes] = {}
    failures: list[BaseException] = []

    def one(n: int) -> None:
        try:
            answers[n] = exchange(socket_path, hook("git commit -m x", session=f"f{n}", call="t"))
        except BaseException as exc:  # noqa: BLE001 - reported by the assert below
            failures.append(exc)

    clients = [in_thread(functools.partial(one, n)) for n in range(120)]
    first.answer_waiting(max_answers=10, **UNHURRIED)
    assert first.answered == 10
    server = Server(server_options(short_tmp, first))
    server.open()
    try:
        trio.run(serve_while, server, functools.partial(join_all, clients))
    finally:
        server.close()
    assert failures == []
    assert sorted(answers) == list(range(120))
    for answer in answers.values():
        if not answer.startswith(b'{"type":'):
            assert RULE.encode() in answer  # each session's first commit: stopped, with the rule
        else:
            reply = reply_decoder.decode(answer)
            assert isinstance(reply, ErrorReply)
            assert reply.code == ErrorCode.BUSY


def test_what_it_does_not_answer_waits_for_the_trio_server_with_its_bounds(
    short_tmp: Path,
) -> None:
    seeded(short_tmp / "data")
    socket_path = short_tmp / "run" / "s.sock"
    first = opened(short_tmp)
    request = session()[0]
    half = request[: len(request) // 2]
    results: dict[str, object] = {}
    sent = threading.Event()

    def clients() -> None:
        with (
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as lists,
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sends_half,
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as too_large,
        ):
            for sock in (lists, sends_half, too_large):
                sock.settimeout(TIMEOUT)
                sock.connect(str(socket_path))
            sends_half.sendall(half)
            too_large.sendall(HEADER.pack(MAX_FRAME + 1) + b"{")
            lists.sendall(encode(ListRequest()))  # ends the phase: the server's
            sent.wait(TIMEOUT)
            sends_half.sendall(request[len(half) :])  # the rest, to the trio server
            results["listing"] = reply_decoder.decode(recv_frame(lists))
            results["hook"] = recv_frame(sends_half)
            results["too_large"] = reply_decoder.decode(recv_frame(too_large))

    thread = in_thread(clients)
    first.answer_waiting(max_answers=1, **UNHURRIED)
    assert first.answered == 0
    server = Server(server_options(short_tmp, first))
    server.open()
    sent.set()
    try:
        trio.run(serve_while, server, lambda: thread.join(TIMEOUT))
    finally:
        server.close()
    listing = results["listing"]
    assert isinstance(listing, MemoriesReply)
    assert [memory.content for memory in listing.memories] == [RULE]
    assert RULE.encode() in results["hook"]  # type: ignore[operator]
    too_large = results["too_large"]
    assert isinstance(too_large, ErrorReply)
    assert too_large.code == ErrorCode.FRAME_TOO_LARGE


def test_a_socket_activated_daemon_answers_its_first_hook_before_importing_trio(
    short_tmp: Path,
) -> None:
    seeded(short_tmp / "data")
    socket_path = short_tmp / "managed.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_path))
    listener.listen()
    env = isolated_env(short_tmp) | {"LISTEN_FDS": "1"}
    env["MENTED_DATA_DIR"] = str(short_tmp / "data")
    argv = launch_with_fd3(listener, [PYTHON, "-m", "mented.daemon", "--log-level", "debug"])
    with listener, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as waiting:
        waiting.settimeout(TIMEOUT)
        waiting.connect(str(socket_path))  # in the backlog: it starts the daemon
        waiting.sendall(session()[0])
        with (short_tmp / "daemon.log").open("ab") as log:
            process = subprocess.Popen(
                argv, pass_fds=[listener.fileno()], env=env, stdout=log, stderr=log
            )
        try:
            answer = recv_frame(waiting)
            retry = exchange(socket_path, hook('git commit -m "fix: a"', session="s1", call="t2"))
        finally:
            process.terminate()
            assert process.wait(timeout=TIMEOUT) == 0
    assert RULE.encode() in answer
    assert retry == b""  # let through: the stop was recorded
    (phase,) = [
        json.loads(line)
        for line in (short_tmp / "daemon.log").read_text().splitlines()
        if '"first_answers"' in line
    ]
    assert phase["answered"] >= 1  # before trio: the line is logged before it is imported


def test_a_reload_signal_once_status_is_answered_reloads_rather_than_kills(
    short_tmp: Path,
) -> None:
    """`status` is answered before trio: a client that takes that for ready and sends
    SIGHUP (a reload, as systemd's ExecReload) must not kill the daemon still starting."""
    seeded(short_tmp / "data")
    socket_path = short_tmp / "managed.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_path))
    listener.listen()
    env = isolated_env(short_tmp) | {"LISTEN_FDS": "1"}
    env["MENTED_DATA_DIR"] = str(short_tmp / "data")
    argv = launch_with_fd3(listener, [PYTHON, "-m", "mented.daemon", "--log-level", "debug"])
    with listener, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(TIMEOUT)
        client.connect(str(socket_path))  # in the backlog: it starts the daemon
        client.sendall(encode(StatusRequest()))
        with (short_tmp / "daemon.log").open("ab") as log:
            process = subprocess.Popen(
                argv, pass_fds=[listener.fileno()], env=env, stdout=log, stderr=log
            )
        try:
            status = reply_decoder.decode(recv_frame(client))
            process.send_signal(signal.SIGHUP)  # before trio, most likely
            client.sendall(encode(ListRequest()))  # the trio server's
            listing = reply_decoder.decode(recv_frame(client))
            assert process.poll() is None
        finally:
            process.terminate()
            returncode = process.wait(timeout=TIMEOUT)
    assert isinstance(status, StatusReply)
    assert status.socket_activated
    assert status.socket == str(socket_path)
    assert status.pid == process.pid
    assert isinstance(listing, MemoriesReply)
    assert returncode == 0
    events = [
        json.loads(line)["event"]
        for line in (short_tmp / "daemon.log").read_text().splitlines()
        if line.startswith("{")
    ]
    assert "reloaded" in events


def test_nothing_is_answered_before_trio_when_the_config_is_invalid(short_tmp: Path) -> None:
    config = short_tmp / "config.toml"
    config.write_text("[hook]\nk = 'many'\n")
    first = first_answers.open_first_answers(
        socket_path=short_tmp / "run" / "s.sock",
        data_dir=short_tmp / "data",
        config_path=config,
        inherited_socket=None,
    )
    assert first is None  # Server.open reports it, and serves on the built-in settings
    assert not (short_tmp / "run" / "s.sock").exists()
    assert _lock_is_free(short_tmp / "data")


def _lock_is_free(data_dir: Path) -> bool:
    from mented.lockfile import DataDirBusyError, DataDirLock

    if not (data_dir / "mented.lock").exists():
        return True
    try:
        DataDirLock(data_dir, data_dir / "s.sock").release()
    except DataDirBusyError:
        return False
    return True


# A fresh interpreter, as the daemon starts: what it imported by the time its first
# hook was answered. Counted, not timed.
FIRST_HOOK_IMPORTS = """
import json, socket, sys, threading
from pathlib import Path

import mented.daemon
from mented.first_answers import open_first_answers
from mented.protocol import recv_frame

root, requests = Path(sys.argv[1]), [bytes.fromhex(r) for r in sys.argv[2].split(",")]
first = open_first_answers(
    socket_path=root / "run" / "s.sock", data_dir=root / "data", config_path=None,
    inherited_socket=None,
)
answers = []

def client():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(root / "run" / "s.sock"))
        for request in requests:
            sock.sendall(request)
            answers.append(recv_frame(sock).decode())

thread = threading.Thread(target=client)
thread.start()
first.answer_waiting(
    max_answers=len(requests), phase_s=120.0, idle_s=120.0, frame_wait_s=120.0,
    next_wait_s=120.0,
)
imported = {name: name in sys.modules for name in sys.argv[3:]}
thread.join()
first.close()
print(json.dumps({"answers": answers, "answered": first.answered, "imported": imported}))
"""
WARM_ACTION_CACHE = (
    "import mented.actions as a, mented.config as c; a.load_action_table(c.Config())"
)
NOT_BEFORE_THE_FIRST_HOOK = (
    "trio",
    "mented.server",
    "mented.events",
    "mented.sync",
    "importlib.resources",  # the built-in table is read from the action cache
    "difflib",  # suggestions for a misspelt name
    "ctypes",  # launchd's sockets
    "tomllib",  # no config file, and the built-in table from the action cache
    "mented.registration",  # installing hooks
    "mented.git_commits",  # after a commit, with a check on it
)


def imported_by_the_answers(root: Path, requests: list[bytes], modules: tuple[str, ...]) -> dict:
    """A fresh interpreter answering `requests` (on one connection) before trio: the
    answers, how many it answered, and which of `modules` it had imported by then."""
    env = isolated_env(root)
    # As after an earlier start: the checked built-in table is in the user's cache.
    subprocess.run([PYTHON, "-c", WARM_ACTION_CACHE], env=env, cwd="/", timeout=120, check=True)
    result = subprocess.run(
        [
            PYTHON,
            "-c",
            FIRST_HOOK_IMPORTS,
            str(root),
            ",".join(request.hex() for request in requests),
            *modules,
        ],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found: dict = json.loads(result.stdout)
    return found


def test_the_first_hook_is_answered_before_trio_and_the_rest_is_imported(
    short_tmp: Path,
) -> None:
    seeded(short_tmp / "data")
    found = imported_by_the_answers(short_tmp, session()[:1], NOT_BEFORE_THE_FIRST_HOOK)
    assert RULE in found["answers"][0]
    assert found["imported"] == dict.fromkeys(NOT_BEFORE_THE_FIRST_HOOK, False)


# What `mentectl explain` asks a daemon: its table (`status`, for its config file),
# then the rules of each action found, on one connection.
def explains_asks(action: str = "git-commit", cwd: str = "/") -> list[bytes]:
    return [
        encode(StatusRequest()),
        encode(RecallRequest(action=action, agent="claude-code", cwd=cwd, k=6)),
    ]


NOT_BEFORE_EXPLAIN = ("trio", "mented.server", "mented.events", "tantivy")


def test_explains_questions_are_answered_before_trio(short_tmp: Path) -> None:
    seeded(short_tmp / "data")
    found = imported_by_the_answers(short_tmp, explains_asks(), NOT_BEFORE_EXPLAIN)
    assert found["answered"] == 2
    status = reply_decoder.decode(found["answers"][0])
    assert isinstance(status, StatusReply)
    assert (status.memories, status.live_rules) == (1, 1)
    assert status.data_dir == str(short_tmp / "data")
    assert not status.socket_activated  # it bound its own socket
    rules = reply_decoder.decode(found["answers"][1])
    assert isinstance(rules, MemoriesReply)
    assert [memory.content for memory in rules.memories] == [RULE]
    assert found["imported"] == dict.fromkeys(NOT_BEFORE_EXPLAIN, False)


def explain_json(socket_path: Path, root: Path) -> dict:
    """`mentectl explain --json` of a commit, as the user runs it, against `socket_path`."""
    result = subprocess.run(
        [
            PYTHON,
            "-m",
            "mented_client.cli",
            "--socket",
            str(socket_path),
            "--json",
            "explain",
            "--cwd",
            str(root),
            "git commit -m x",
        ],
        env=isolated_env(root),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    document: dict = json.loads(result.stdout)
    return document


def test_explain_is_answered_the_same_before_trio_and_by_the_trio_server(
    short_tmp: Path,
) -> None:
    seeded(short_tmp / "data")
    socket_path = short_tmp / "run" / "s.sock"
    first = opened(short_tmp)
    early: list[dict] = []
    explain = in_thread(lambda: early.append(explain_json(socket_path, short_tmp)))
    first.answer_waiting(max_answers=2, **UNHURRIED)
    explain.join(TIMEOUT)
    assert first.answered == 2  # the table and the rules: both before trio
    server = Server(server_options(short_tmp, first))
    server.open()
    late: list[dict] = []
    try:
        trio.run(serve_while, server, lambda: late.append(explain_json(socket_path, short_tmp)))
    finally:
        server.close()
    assert early[0]["daemon"] is True
    assert [rule["content"] for rule in early[0]["rules"]["git-commit"]] == [RULE]
    assert early == late


def test_a_request_after_an_answer_on_its_connection_goes_to_the_trio_server_whole(
    short_tmp: Path,
) -> None:
    seeded(short_tmp / "data")
    first = opened(short_tmp)
    replies: list[object] = []
    answered = threading.Event()

    def client() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(TIMEOUT)
            sock.connect(str(short_tmp / "run" / "s.sock"))
            sock.sendall(encode(StatusRequest()))
            replies.append(reply_decoder.decode(recv_frame(sock)))
            answered.wait(TIMEOUT)
            # A listing, then a status behind it in the same write: both the server's.
            sock.sendall(encode(ListRequest()) + encode(StatusRequest()))
            replies.append(reply_decoder.decode(recv_frame(sock)))
            replies.append(reply_decoder.decode(recv_frame(sock)))

    thread = in_thread(client)
    first.answer_waiting(max_answers=2, **UNHURRIED)
    assert first.answered == 1  # the listing ended the phase
    answered.set()
    server = Server(server_options(short_tmp, first))
    server.open()
    try:
        trio.run(serve_while, server, lambda: thread.join(TIMEOUT))
    finally:
        server.close()
    assert [type(reply) for reply in replies] == [StatusReply, MemoriesReply, StatusReply]
    listing = replies[1]
    assert isinstance(listing, MemoriesReply)
    assert [memory.content for memory in listing.memories] == [RULE]


def test_a_failing_answer_costs_its_connection_only(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded(short_tmp / "data")
    first = opened(short_tmp)
    answer_decoded = first.hooks.answer_decoded
    calls: list[str] = []

    def fails_once(*args: object, **kwargs: object) -> object:
        calls.append("call")
        if len(calls) == 1:
            raise RuntimeError("a bug")
        return answer_decoded(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(first.hooks, "answer_decoded", fails_once)
    results: list[bytes | str] = []

    def clients() -> None:
        try:
            results.append(exchange(short_tmp / "run" / "s.sock", session()[0]))
        except (OSError, EOFError, ValueError) as exc:
            results.append(f"closed: {exc!r}")
        other = hook("git commit -m x", session="s2", call="t1")
        results.append(exchange(short_tmp / "run" / "s.sock", other))

    thread = in_thread(clients)
    try:
        first.answer_waiting(max_answers=1, **UNHURRIED)
        thread.join(TIMEOUT)
    finally:
        first.close()
    assert str(results[0]).startswith("closed")  # no answer, and no stop counted
    assert RULE.encode() in results[1]  # type: ignore[operator]
