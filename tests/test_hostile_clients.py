"""Hostile and careless clients against the real daemon.

- Property-based fuzzing (hypothesis) of the frame layer and the request
  decoder: random bytes, any announced length, partial frames, well-formed
  frames with wrong types, deeply nested JSON, pipelined frames. The daemon
  answers with typed errors (never `internal`) or closes the connection, stays
  up, keeps serving a bystander connection, and its memory stays bounded.
- A client that drips one byte a second and a thousand idle connections do not
  starve the hook: the real shim, under its own 250 ms deadline, still prints
  the rules.
- The descriptor limit: past it, connections are refused cleanly, whether the
  daemon counts them (its limit known at start) or the kernel says EMFILE (the
  limit lowered under it), and it serves again once they close.
- Load: clients writing and reading at once; every acknowledged write is
  readable by every other client at once and afterwards, with no errors.

Longer runs: `MENTED_FUZZ_EXAMPLES` (examples per fuzz property, default 150),
`MENTED_IDLE_CONNECTIONS` (default 1000), `MENTED_LOAD_SECONDS` (default 3).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mented.agents.pretooluse import pretooluse_event, text_of_answer
from mented.protocol import (
    HEADER,
    MAX_FRAME,
    ErrorCode,
    ErrorReply,
    GetRequest,
    ListRequest,
    MemoriesReply,
    MemoryReply,
    RecalledReply,
    RecallFactsRequest,
    RecallRequest,
    Reply,
    StatusReply,
    StatusRequest,
    StoredReply,
    StoreRequest,
    SupersededReply,
    SupersedeRequest,
    frame,
    recv_frame,
    reply_decoder,
)
from mented.server import Server, ServerOptions
from mented.store import Store, StoreItem
from mented_client.connection import Client, DaemonError, ProtocolError
from tests.conftest import DaemonProcess, connect_unix, raw_exchange, split_frames
from tests.reliability import ConstrainedDaemon, open_descriptors, record_figures, rss_kib

FUZZ_EXAMPLES = int(os.environ.get("MENTED_FUZZ_EXAMPLES", "150"))
IDLE_CONNECTIONS = int(os.environ.get("MENTED_IDLE_CONNECTIONS", "1000"))
LOAD_SECONDS = float(os.environ.get("MENTED_LOAD_SECONDS", "3"))
SHIM = Path(__file__).resolve().parents[1] / "client" / "shim.py"
# The real interpreter: the shim's deadline must not pay for a pyenv wrapper.
SHIM_PYTHON = os.path.realpath(sys.executable)
RULE = "Commit messages: one line, conventional prefix, no emojis."


def hook_event(call: int) -> bytes:
    """A Claude Code `PreToolUse` event for `git commit`; each `call` a distinct tool use
    (the daemon answers a repeated event only once)."""
    return pretooluse_event(
        "git commit -m x", cwd="/x", session=f"s-{call}", tool_use_id=f"toolu_{call}"
    )


# Every code a request may legitimately earn; `internal` means a bug.
EXPECTED_CODES = {
    ErrorCode.BAD_FRAME,
    ErrorCode.UNKNOWN_REQUEST,
    ErrorCode.BAD_REQUEST,
    ErrorCode.FRAME_TOO_LARGE,
    ErrorCode.NOT_FOUND,
    ErrorCode.INVALID,
    ErrorCode.CONFLICT,
}
RSS_GROWTH_LIMIT_KIB = 48 * 1024
ANSWER_TIMEOUT = 15.0  # > the daemon's 10 s limit on completing a started frame


# ------------------------------------------------------------------- plumbing


def typed_answers(data: bytes) -> list[Reply | bytes]:
    """Each frame of the daemon's answer as a typed reply (or a hook's raw stdout)."""
    answers: list[Reply | bytes] = []
    for body in split_frames(data):
        if body == b"" or body.startswith(b'{"hookSpecificOutput"'):
            answers.append(body)  # a hook's answer: the agent's stdout, maybe empty
            continue
        reply = reply_decoder.decode(body)
        if isinstance(reply, ErrorReply):
            assert reply.code in EXPECTED_CODES, reply
        answers.append(reply)
    return answers


class Bystander:
    """A client connected all along: the daemon must keep serving it."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.client = daemon.client(timeout=ANSWER_TIMEOUT)
        self.pid = self.check()

    def check(self) -> int:
        status = self.client.expect(StatusRequest(), StatusReply)
        assert self.daemon.proc is not None
        assert self.daemon.proc.poll() is None, self.daemon.log()
        return int(status.pid)


@pytest.fixture(scope="module", autouse=True)
def more_descriptors() -> Iterator[None]:
    """Room for a thousand connections in this process and in the daemons it starts."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = IDLE_CONNECTIONS + 512
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Bystander]:
    """One daemon for all fuzz cases (it must survive all of them), and a bystander."""
    root = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    daemon = DaemonProcess(root)
    daemon.start()
    try:
        with daemon.client() as client:
            client.expect(StoreRequest(content=RULE, tags=["trigger:git-commit"]), StoredReply)
        bystander = Bystander(daemon)
        yield bystander
        bystander.client.close()
        assert daemon.stop() == 0, daemon.log()
    finally:
        if daemon.proc is not None:
            daemon.proc.kill()
            daemon.proc.wait()
        shutil.rmtree(root, ignore_errors=True)


def fuzz(strategy: st.SearchStrategy[bytes], bystander: Bystander, name: str) -> int:
    """Send `FUZZ_EXAMPLES` inputs from `strategy`; check answers, liveness and memory.

    Returns:
        How many inputs were tried.
    """
    daemon = bystander.daemon
    tried = 0
    rss_before = rss_kib(bystander.pid)

    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(strategy)
    def one_case(data: bytes) -> None:
        nonlocal tried
        tried += 1
        typed_answers(raw_exchange(daemon.socket, data))
        bystander.check()

    one_case()
    growth = rss_kib(bystander.pid) - rss_before
    assert growth < RSS_GROWTH_LIMIT_KIB, f"RSS grew by {growth} KiB over {tried} cases"
    record_figures(f"fuzz_{name}", cases=tried, rss_growth_kib=growth)
    return tried


# ------------------------------------------------------------------ strategies

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
# Shell-ish text: what the daemon's command parser gets from a hook event.
shell_commands = st.text(alphabet="git commit -m'\"$(){}[]<>|&;`\\\n #=*~!ghprcreate", max_size=300)
# Values that get past type checks into the store's own validation.
plausible = {
    "content": st.text(min_size=0, max_size=80),
    "id": st.text(alphabet="0123456789ABCDEFGHJKMNPQRSTVWXYZabc", max_size=30),
    "action": st.text(max_size=70),
    "tags": st.lists(st.text(max_size=20).map(lambda t: f"trigger:{t}") | st.text(), max_size=5),
    "tag": st.text(max_size=20),
    "agent": st.text(max_size=70),
    "cwd": st.text(max_size=40).map(lambda t: f"/{t}"),
    "project": st.text(max_size=40) | st.text(max_size=40).map(lambda t: f"/{t}"),
    "k": st.integers(min_value=-(2**63), max_value=2**64),
    "n": st.integers(min_value=-(2**63), max_value=2**64),
    "session": st.text(max_size=140) | st.none(),
    "since": st.floats() | st.integers(min_value=-(2**63), max_value=2**64) | st.none(),
    "include_tests": st.booleans() | st.none(),
    "limit": st.integers(min_value=-5, max_value=2**64) | st.none(),
    "memory_type": st.sampled_from(["semantic", "correction", "nonsense", ""]),
    "event": st.integers(0, 10**6).map(lambda n: json.loads(hook_event(n)))
    | shell_commands.map(
        lambda command: {"tool_name": "Bash", "tool_input": {"command": command}, "cwd": "/x"}
    )
    | json_values,
}
# Request fields by type; `shutdown` is left out: obeying it is not a failure.
REQUEST_FIELDS = {
    "status": [],
    "store": ["content", "memory_type", "tags", "agent", "project"],
    "get": ["id"],
    "recall_for_action": ["action", "agent", "cwd", "k"],
    "supersede": ["id", "content", "tags", "agent", "project"],
    "history": ["id"],
    "forget": ["id"],
    "list": ["action", "agent", "cwd", "tag", "memory_type", "limit"],
    "hook": ["agent", "event"],
    "log": ["n", "session", "agent", "project", "action", "since", "include_tests"],
    "reload": [],
}


def request_objects(kind: str) -> st.SearchStrategy[dict[str, object]]:
    """A `kind` request whose fields are missing, plausible, or any JSON at all."""
    return st.fixed_dictionaries(
        {"type": st.just(kind)},
        optional={name: plausible[name] | json_values for name in REQUEST_FIELDS[kind]}
        | {"unknown_field": json_values},
    )


def encode_json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


requests = st.sampled_from(sorted(REQUEST_FIELDS)).flatmap(request_objects)


@st.composite
def deeply_nested(draw: st.DrawFn) -> bytes:
    """A body nested up to hundreds of thousands deep, at a spot chosen by hypothesis."""
    depth = draw(st.integers(min_value=1, max_value=300_000))
    opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
    nest = opener * depth + b"0" + closer * depth
    place = draw(st.sampled_from(["top", "event", "unknown", "tags", "content", "unclosed"]))
    if place == "top":
        return nest
    if place == "unclosed":
        return b'{"type":"hook","agent":"claude-code","event":' + opener * depth
    if place == "event":
        return b'{"type":"hook","agent":"claude-code","event":' + nest + b"}"
    if place == "unknown":
        return b'{"type":"list","deep":' + nest + b"}"
    return b'{"type":"store","content":"x","' + place.encode() + b'":' + nest + b"}"


# ------------------------------------------------------------------- fuzzing


def test_random_bytes_get_typed_errors_or_a_closed_connection(fuzzed: Bystander) -> None:
    fuzz(st.binary(max_size=4096), fuzzed, "random_bytes")


def test_any_announced_length_is_answered_or_closed(fuzzed: Bystander) -> None:
    lengths = st.one_of(
        st.integers(min_value=0, max_value=64),
        st.integers(min_value=0, max_value=MAX_FRAME),
        st.integers(min_value=MAX_FRAME + 1, max_value=2**32 - 1),
    )
    frames = st.tuples(lengths, st.binary(max_size=2048)).map(
        lambda pair: HEADER.pack(pair[0]) + pair[1]
    )
    fuzz(frames, fuzzed, "announced_lengths")


def test_well_formed_frames_with_wrong_fields_get_one_typed_answer_each(
    fuzzed: Bystander,
) -> None:
    # Pipelined: several frames in one write; each gets its answer, in order.
    batches = st.lists(requests.map(encode_json), min_size=1, max_size=6)

    def check_count(bodies: list[bytes]) -> bytes:
        return b"".join(frame(body) for body in bodies)

    fuzz(batches.map(check_count), fuzzed, "typed_requests")

    @settings(max_examples=max(10, FUZZ_EXAMPLES // 5), deadline=None, database=None)
    @given(batches)
    def answers_match(bodies: list[bytes]) -> None:
        answers = typed_answers(raw_exchange(fuzzed.daemon.socket, check_count(bodies)))
        assert len(answers) == len(bodies)

    answers_match()


def test_json_that_is_not_a_request_gets_typed_errors(fuzzed: Bystander) -> None:
    fuzz(json_values.map(encode_json).map(frame), fuzzed, "any_json")


def test_deeply_nested_json_gets_a_typed_error(fuzzed: Bystander) -> None:
    fuzz(deeply_nested().map(frame), fuzzed, "deep_nesting")


def test_hook_events_with_any_command_get_silence_or_context(fuzzed: Bystander) -> None:
    def hook_frame(command: str) -> bytes:
        event = {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": command}
        return frame(encode_json({"type": "hook", "agent": "claude-code", "event": event}))

    fuzz(shell_commands.map(hook_frame), fuzzed, "hook_commands")


def test_partial_frames_are_dropped_without_an_answer(fuzzed: Bystander) -> None:
    whole = requests.map(encode_json).map(frame)
    cut = st.tuples(whole, st.floats(min_value=0, max_value=1, exclude_max=True)).map(
        lambda pair: pair[0][: int(len(pair[0]) * pair[1])]
    )
    fuzz(cut, fuzzed, "partial_frames")

    @settings(max_examples=max(10, FUZZ_EXAMPLES // 5), deadline=None, database=None)
    @given(cut)
    def nothing_answered(data: bytes) -> None:
        assert raw_exchange(fuzzed.daemon.socket, data) == b""

    nothing_answered()


def test_memory_stays_bounded_under_frames_of_the_maximum_size(fuzzed: Bystander) -> None:
    # Near-maximum bodies the daemon must read whole before it can refuse them.
    big = frame(b'{"type":"store","content":"' + b"x" * (MAX_FRAME - 64) + b'"}')
    too_big = HEADER.pack(MAX_FRAME + 1) + b"x" * 65536
    for _ in range(3):  # warm up: allocator arenas reach their working size
        typed_answers(raw_exchange(fuzzed.daemon.socket, big))
    before = rss_kib(fuzzed.pid)
    rounds = 20
    for _ in range(rounds):
        (answer,) = typed_answers(raw_exchange(fuzzed.daemon.socket, big))
        assert isinstance(answer, ErrorReply)
        assert answer.code == ErrorCode.INVALID  # content over the limit
        (answer,) = typed_answers(raw_exchange(fuzzed.daemon.socket, too_big))
        assert isinstance(answer, ErrorReply)
        assert answer.code == ErrorCode.FRAME_TOO_LARGE
    fuzzed.check()
    growth = rss_kib(fuzzed.pid) - before
    assert growth < RSS_GROWTH_LIMIT_KIB, f"RSS grew by {growth} KiB"
    record_figures("max_size_frames", frames=2 * rounds, rss_growth_kib=growth)


def test_nesting_at_the_decoders_recursion_limit_gets_a_typed_error(fuzzed: Bystander) -> None:
    # Depths around msgspec's own limit (about 1000), where a hook event or an
    # ignored field once raised RecursionError out of the decoder and ended the daemon.
    for depth in (999, 1000, 1001, 10_000):
        hook = b'{"type":"hook","agent":"claude-code","event":' + b"[" * depth + b"]" * depth + b"}"
        listing = b'{"type":"list","x":' + b'{"a":' * depth + b"0" + b"}" * depth + b"}"
        # A hook request is never answered with an error: the hook stays silent.
        assert typed_answers(raw_exchange(fuzzed.daemon.socket, frame(hook))) == [b""]
        (answer,) = typed_answers(raw_exchange(fuzzed.daemon.socket, frame(listing)))
        assert isinstance(answer, ErrorReply), answer
        assert answer.code == ErrorCode.BAD_FRAME
    fuzzed.check()


def test_an_answer_too_large_for_a_frame_is_a_typed_error(daemon: DaemonProcess) -> None:
    # A careless client asks for everything in a store whose listing exceeds 4 MiB.
    content = "x" * 63_000
    with daemon.client() as client:
        for n in range(MAX_FRAME // len(content) + 4):
            client.expect(StoreRequest(content=f"{n} {content}"), StoredReply)
        with pytest.raises(DaemonError) as refused:
            client.expect(ListRequest(), MemoriesReply)
        assert refused.value.code == ErrorCode.FRAME_TOO_LARGE
        assert "ask for fewer" in refused.value.message
        # The same connection goes on: a bounded listing is answered.
        listed = client.expect(ListRequest(limit=10), MemoriesReply).memories
        assert len(listed) == 10


def test_the_client_names_an_oversized_answer_and_does_not_call_mented_absent(
    short_tmp: Path,
) -> None:
    # The other side of the frame limit: something answering with a frame over it.
    path = short_tmp / "fake.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()

    def answer_too_much() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(HEADER.pack(MAX_FRAME + 1))

    thread = threading.Thread(target=answer_too_much)
    thread.start()
    try:
        with pytest.raises(ProtocolError, match="exceeds the maximum"):
            Client(path, timeout=5).request(StatusRequest())
    finally:
        thread.join()
        server.close()


# ------------------------------------------------------ slow and idle clients


def run_shim(daemon: DaemonProcess, call: int) -> tuple[bytes, float]:
    """The shim's stdout for a `git commit` event, and its wall time in ms.

    With a generous deadline: on a busy machine the interpreter's start alone can pass
    the 250 ms default. A hook starved by other clients waits far longer (a frame
    dripped a byte a second), or is judged against a baseline measured in its test.
    """
    env = {
        "MENTED_SOCKET": str(daemon.socket),
        "PATH": os.environ.get("PATH", ""),
        "MENTED_HOOK_BUDGET_MS": "10000",
    }
    started = time.perf_counter()
    result = subprocess.run(
        [SHIM_PYTHON, "-I", "-S", str(SHIM), "claude-code"],
        input=hook_event(call),
        env=env,
        capture_output=True,
        timeout=10,
        check=True,
    )
    return result.stdout, (time.perf_counter() - started) * 1000


def drip(path: Path, stop: threading.Event, sent: list[int]) -> None:
    """A client that sends a status request one byte a second."""
    data = frame(b'{"type":"status"}')
    with connect_unix(path, ANSWER_TIMEOUT) as sock:
        for byte in data:
            if stop.wait(1.0):
                return
            try:
                sock.send(bytes([byte]))
            except OSError:
                return
            sent.append(1)


def test_slow_and_idle_clients_do_not_starve_the_hook(daemon: DaemonProcess) -> None:
    if not SHIM.exists():
        pytest.skip(f"no hook shim at {SHIM}")
    with daemon.client() as client:
        client.expect(StoreRequest(content=RULE, tags=["trigger:git-commit"]), StoredReply)
    idle: list[socket.socket] = []
    stop = threading.Event()
    sent: list[int] = []
    drippers = [threading.Thread(target=drip, args=(daemon.socket, stop, sent)) for _ in range(10)]
    for dripper in drippers:
        dripper.start()
    try:
        for _ in range(IDLE_CONNECTIONS):
            idle.append(connect_unix(daemon.socket, ANSWER_TIMEOUT))  # noqa: PERF401 - each one closed if a later one fails
        # Half-sent frames too: a header announcing a large body that never comes.
        for sock in idle[:20]:
            sock.sendall(HEADER.pack(MAX_FRAME) + b'{"type":')
        # Answered once the daemon has accepted every connection queued before it: the
        # hooks below measure serving beside idle clients, not waiting in the backlog.
        Bystander(daemon).client.close()
        times = []
        for call in range(10):
            out, elapsed = run_shim(daemon, call)
            # An empty answer would mean the shim gave up at its deadline.
            context = text_of_answer(out)
            assert context is not None
            assert RULE in context
            times.append(elapsed)
            time.sleep(0.2)  # pace the calls: the slow clients drip on meanwhile
        assert sent, "the slow clients never got to send"
        # Every idle connection is still held and served.
        for sock in idle[20:]:
            sock.sendall(frame(b'{"type":"status"}'))
        for sock in idle[20:]:
            assert isinstance(reply_decoder.decode(recv_frame(sock)), StatusReply)
    finally:
        stop.set()
        for dripper in drippers:
            dripper.join()
        for sock in idle:
            sock.close()
    record_figures(
        "slow_and_idle_clients",
        idle_connections=IDLE_CONNECTIONS,
        dripping_clients=len(drippers),
        hook_calls=len(times),
        hook_wall_ms_max=round(max(times), 1),
    )


# ----------------------------------------------------- the descriptor limit


def connect_and_ask(path: Path) -> tuple[socket.socket, bytes]:
    """Connect, send a status request, return the socket and whatever came back."""
    sock = connect_unix(path, ANSWER_TIMEOUT)
    try:
        sock.sendall(frame(b'{"type":"status"}'))
        return sock, recv_frame(sock)
    # Refused before we got to ask, or closed unanswered (IncompleteFrameError).
    except (BrokenPipeError, ConnectionResetError):
        return sock, b""


def crowd(path: Path, count: int) -> tuple[list[socket.socket], int]:
    """Open `count` connections, each asking for status; the open ones that were
    answered stay open. Returns them and how many were refused (closed unanswered)."""
    held, refused = [], 0
    for _ in range(count):
        sock, answer = connect_and_ask(path)
        reply = reply_decoder.decode(answer) if answer else None
        if isinstance(reply, StatusReply):
            held.append(sock)
        else:
            # Refused: closed unanswered, or told `busy` first (never anything else).
            assert reply is None or (isinstance(reply, ErrorReply) and reply.code == "busy")
            refused += 1
            sock.close()
    return held, refused


def crowd_until_none_refused(path: Path, count: int) -> tuple[list[socket.socket], int]:
    """`crowd`, tried again for up to 5 s while any connection is refused.

    The daemon counts a closed connection out only once it has seen the close.
    """
    deadline = time.monotonic() + 5
    while True:
        held, refused = crowd(path, count)
        if not refused or time.monotonic() > deadline:
            return held, refused
        for sock in held:
            sock.close()
        time.sleep(0.05)


def test_connections_past_the_daemons_limit_are_refused_cleanly(short_tmp: Path) -> None:
    # 64 descriptors: the daemon keeps 32 in reserve and serves 32 connections, the
    # last 4 of them to hooks alone.
    daemon = ConstrainedDaemon(short_tmp, nofile=64)
    daemon.start()
    try:
        held, refused = crowd(daemon.socket, 60)
        assert len(held) == 28
        assert refused == 32
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as extra:
            extra.settimeout(5)
            extra.connect(str(daemon.socket))
            extra.sendall(frame(b'{"type":"status"}'))
            told = reply_decoder.decode(recv_frame(extra))
        assert isinstance(told, ErrorReply)
        assert told.code == ErrorCode.BUSY  # a refusal the client can explain
        for sock in held:  # the ones it holds are still served
            sock.sendall(frame(b'{"type":"status"}'))
            assert isinstance(reply_decoder.decode(recv_frame(sock)), StatusReply)
        for sock in held:
            sock.close()
        again, refused = crowd_until_none_refused(daemon.socket, 28)
        assert (len(again), refused) == (28, 0)
        for sock in again:
            sock.close()
        assert daemon.stop() == 0
    finally:
        if daemon.proc is not None:
            daemon.proc.kill()
            daemon.proc.wait()
    record_figures("descriptor_limit_counted", nofile=64, held=28, refused=32)


def test_running_out_of_descriptors_does_not_crash_the_accept_loop(
    daemon: DaemonProcess,
) -> None:
    assert daemon.proc is not None
    pid = daemon.proc.pid
    # The recall index's catch-up at start opens files of its own: this test is about
    # accepting, so it lets the catch-up finish first (a recall waits for it).
    with daemon.client() as client:
        client.expect(RecallFactsRequest(query="anything"), RecalledReply)
    # Lower the limit under the running daemon: it still believes it has thousands,
    # so the kernel's EMFILE is what stops the next accept.
    limit = len(open_descriptors(pid)) + 8
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
    held, refused = crowd(daemon.socket, 40)
    try:
        assert 0 < len(held) < 20  # about the 8 descriptors left; the rest refused
        assert refused == 40 - len(held)
        for sock in held:  # the ones it holds keep working
            sock.sendall(frame(b'{"type":"status"}'))
            assert isinstance(reply_decoder.decode(recv_frame(sock)), StatusReply)
    finally:
        for sock in held:
            sock.close()
    again, refused_after = crowd_until_none_refused(daemon.socket, len(held))
    assert (len(again), refused_after) == (len(held), 0)
    for sock in again:
        sock.close()
    log = daemon.log()
    # Logged when a shortage starts, not once per refused connection (more than 20
    # here). A loaded machine may see the shortage end and start again a few times.
    assert 1 <= log.count('"accept_failed"') <= 6, log
    assert '"accept_recovered"' in log
    assert daemon.stop(signal.SIGTERM) == 0, daemon.log()
    record_figures("descriptor_limit_emfile", nofile=limit, held=len(held), refused=refused)


# ------------------------------------------------------------------------ load

ACTIONS = ("git-commit", "git-push", "pr-create")


class LoadLedger:
    """What the load's writers had acknowledged, shared with its readers."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.lock = threading.Lock()
        self.acknowledged: dict[str, str] = {}  # id -> content
        self.retired: dict[str, str] = {}  # old id -> the id that superseded it
        self.errors: list[str] = []
        self.writes = 0
        self.reads = 0

    def running(self) -> bool:
        return time.monotonic() < self.deadline

    def write(self, daemon: DaemonProcess, n: int) -> None:
        """Store rules and supersede this writer's own, until the deadline."""
        rng = random.Random(n)
        mine: list[str] = []
        try:
            with daemon.client() as client:
                while self.running():
                    content = f"writer {n} rule {self.writes}"
                    if mine and rng.random() < 0.3:
                        old = mine.pop(rng.randrange(len(mine)))
                        request = SupersedeRequest(id=old, content=content)
                        new = client.expect(request, SupersededReply).id
                        with self.lock:
                            self.retired[old] = new
                    else:
                        tags = [f"trigger:{rng.choice(ACTIONS)}"]
                        new = client.expect(
                            StoreRequest(content=content, tags=tags), StoredReply
                        ).id
                    mine.append(new)
                    with self.lock:
                        self.acknowledged[new] = content
                        self.writes += 1
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            self.errors.append(f"writer {n}: {exc!r}")

    def read(self, daemon: DaemonProcess, n: int) -> None:
        """Recall rules and read back acknowledged writes, until the deadline."""
        rng = random.Random(100 + n)
        try:
            with daemon.client() as client:
                while self.running():
                    recall = RecallRequest(action=rng.choice(ACTIONS), k=50)
                    for memory in client.expect(recall, MemoriesReply).memories:
                        # One consistent snapshot: a recalled rule is never a retired one.
                        assert memory.superseded_by is None, memory
                    with self.lock:
                        known = rng.choice(list(self.acknowledged)) if self.acknowledged else None
                    if known is not None:
                        # Acknowledged to one client means readable by every other.
                        got = client.expect(GetRequest(id=known), MemoryReply).memory
                        assert got.content == self.acknowledged[known]
                    with self.lock:
                        self.reads += 2
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            self.errors.append(f"reader {n}: {exc!r}")


def test_concurrent_writers_and_readers_lose_nothing(daemon: DaemonProcess) -> None:
    load = LoadLedger(LOAD_SECONDS)
    threads = [threading.Thread(target=load.write, args=(daemon, n)) for n in range(4)]
    threads += [threading.Thread(target=load.read, args=(daemon, n)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert load.errors == []
    assert load.writes > 0
    with daemon.client() as client:
        for memory_id, content in load.acknowledged.items():
            memory = client.expect(GetRequest(id=memory_id), MemoryReply).memory
            assert memory.content == content
            assert memory.superseded_by == load.retired.get(memory_id)
        recalled = set()
        for action in ACTIONS:
            reply = client.expect(RecallRequest(action=action, k=1_000_000), MemoriesReply)
            recalled |= {m.id for m in reply.memories}
        assert recalled == set(load.acknowledged) - set(load.retired)
    record_figures(
        "load",
        seconds=LOAD_SECONDS,
        clients=len(threads),
        writes_acknowledged=load.writes,
        reads=load.reads,
        errors=len(load.errors),
    )


# ------------------------------------------- the limits on slow and idle clients


@pytest.fixture
async def quick_server(short_tmp: Path) -> AsyncIterator[Server]:
    """An in-process daemon whose time limits are short enough to watch them act."""
    server = Server(
        ServerOptions(
            socket_path=short_tmp / "run" / "s.sock",
            data_dir=short_tmp / "data",
            connection_idle_s=0.5,
            request_timeout_s=1.0,
            send_timeout_s=1.0,
            handle_signals=False,
        )
    )
    server.open()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            yield server
            server.request_shutdown()
    finally:
        server.close()


async def test_a_frame_dripped_too_slowly_is_dropped_unanswered(quick_server: Server) -> None:
    stream = await trio.open_unix_socket(str(quick_server.options.socket_path))
    async with stream:
        with trio.fail_after(5):
            # One byte every 0.3 s: never idle for long, but the frame takes too long.
            for byte in frame(b'{"type":"status"}'):
                try:
                    await stream.send_all(bytes([byte]))
                except trio.BrokenResourceError:
                    break
                await trio.sleep(0.3)
            try:
                answer = await stream.receive_some()
            except trio.BrokenResourceError:  # reset: closed with our bytes unread
                answer = b""
            assert answer == b""  # closed, nothing answered


async def test_an_idle_connection_is_closed(quick_server: Server) -> None:
    stream = await trio.open_unix_socket(str(quick_server.options.socket_path))
    async with stream:
        await stream.send_all(frame(b'{"type":"status"}'))
        with trio.fail_after(5):
            answer = await stream.receive_some()
            assert isinstance(reply_decoder.decode(split_frames(answer)[0]), StatusReply)
            assert await stream.receive_some() == b""  # closed after 0.5 s of silence


def test_many_large_frames_at_once_are_bounded_together(daemon: DaemonProcess) -> None:
    # 4 MiB announced per connection, 1 byte sent: each holds a reservation of the
    # daemon-wide 64 MiB for large frames being received.
    announced = HEADER.pack(MAX_FRAME) + b"{"
    held: list[socket.socket] = []
    try:
        for _ in range(16):
            sock = connect_unix(daemon.socket)
            sock.sendall(announced)
            held.append(sock)
        time.sleep(0.5)  # let the daemon read each header
        extra = connect_unix(daemon.socket)
        held.append(extra)
        extra.settimeout(10)
        extra.sendall(announced)
        told = reply_decoder.decode(recv_frame(extra))
        assert isinstance(told, ErrorReply)
        assert told.code == ErrorCode.BUSY
        assert "too many large requests" in told.message
    finally:
        for sock in held:
            sock.close()
    # Given back when those connections go: a large request is read again.
    deadline = time.monotonic() + 5
    while True:
        with connect_unix(daemon.socket) as sock:
            sock.settimeout(10)
            body = b'{"type":"store","content":"' + b"x" * 100_000 + b'"}'
            sock.sendall(frame(body))
            reply = reply_decoder.decode(recv_frame(sock))
        if not isinstance(reply, ErrorReply) or reply.code != ErrorCode.BUSY:
            break
        assert time.monotonic() < deadline, "the reservations were never given back"
        time.sleep(0.1)
    assert isinstance(reply, ErrorReply)
    assert reply.code == ErrorCode.INVALID  # read whole and judged: too long a memory


async def polled(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    """Wait until `condition()` holds, looking every 10 ms; fail after `seconds`."""
    for _ in range(int(seconds * 100)):
        if condition():
            return
        await trio.sleep(0.01)
    pytest.fail(f"not reached within {seconds} s")


async def test_a_partial_frame_of_any_size_is_counted_until_answered(
    quick_server: Server,
) -> None:
    # Small frames too: 15,000 connections each holding most of a 64 KiB frame once
    # held 2 GiB, none of it counted.
    body = b'{"type":"status"}'
    stream = await trio.open_unix_socket(str(quick_server.options.socket_path))
    async with stream:
        await stream.send_all(HEADER.pack(len(body)) + body[:5])
        await polled(lambda: quick_server.held.total > 0)
        assert quick_server.held.total == HEADER.size + len(body)
        await stream.send_all(body[5:])
        with trio.fail_after(5):
            answer = await stream.receive_some()
        assert isinstance(reply_decoder.decode(split_frames(answer)[0]), StatusReply)
        await polled(lambda: quick_server.held.total == 0)  # given back once answered


async def test_an_unread_answer_is_dropped_after_the_send_timeout(
    quick_server: Server, short_tmp: Path
) -> None:
    # An answer larger than the socket's buffers, never read: held (and counted)
    # for send_timeout_s, then the connection is closed and the bytes given back.
    content = "x" * 60_000
    for n in range(40):
        quick_server.store.store(f"{n} {content}")
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.connect(str(quick_server.options.socket_path))
    with sock:
        await sock.send(frame(b'{"type":"list"}'))
        await polled(lambda: quick_server.held.total > 40 * 60_000)
        await polled(lambda: quick_server.held.total == 0)  # send_timeout_s is 1 s
        received = bytearray()
        with trio.fail_after(5):
            while chunk := await sock.recv(1 << 20):
                received += chunk
        # Closed without the whole answer: the client never read it in time.
        (length,) = HEADER.unpack_from(received)
        assert len(received) < HEADER.size + length


# --------------------------------------------------- memory held for clients


def peak_rss_kib(pid: int) -> int:
    """The most resident memory `pid` has had (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    msg = f"no VmHWM for pid {pid}"
    raise AssertionError(msg)


def settled_rss_kib(pid: int, seconds: float = 10.0) -> int:
    """VmRSS once it stops changing (the daemon has finished with what it was sent)."""
    deadline = time.monotonic() + seconds
    last = rss_kib(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = rss_kib(pid)
        if abs(now - last) < 512:
            return now
        last = now
    return last


# The daemon-wide bound on what clients make it hold (ServerOptions.held_limit_bytes),
# and what the test allows on top: idle connections' own cost, the allocator's slack.
HELD_LIMIT_KIB = 64 * 1024
HELD_MARGIN_KIB = 48 * 1024
GIVEN_BACK_MARGIN_KIB = 24 * 1024
SEND_TIMEOUT_S = ServerOptions.send_timeout_s  # the daemon's, as the fixture starts it


def bystander_hooks(daemon: DaemonProcess, calls: int, first_call: int = 0) -> list[float]:
    """Run the real shim `calls` times; the wall time (ms) of each that printed the rule
    (a silent one missed its budget)."""
    answered = []
    for call in range(first_call, first_call + calls):
        out, elapsed = run_shim(daemon, call)
        if RULE in (text_of_answer(out) or ""):
            answered.append(elapsed)
        time.sleep(0.1)
    return answered


def test_unread_answers_are_bounded_together(daemon: DaemonProcess) -> None:
    # 300 clients each ask for a 3.7 MiB listing and never read it: this once held
    # 1.1 GiB for as long as they liked.
    assert daemon.proc is not None
    pid = daemon.proc.pid
    with daemon.client() as client:
        client.expect(StoreRequest(content=RULE, tags=["trigger:git-commit"]), StoredReply)
        for n in range(60):
            client.expect(StoreRequest(content=f"{n} " + "x" * 62_000), StoredReply)
    before = settled_rss_kib(pid)
    held: list[socket.socket] = []
    big = busy = 0
    started = time.monotonic()
    try:
        for _ in range(300):
            sock = connect_unix(daemon.socket)
            held.append(sock)
            sock.sendall(frame(b'{"type":"list"}'))
        for sock in held:
            # Only the header: the rest of a listing stays unread.
            (length,) = HEADER.unpack(sock.recv(HEADER.size, socket.MSG_WAITALL))
            if length > 1_000_000:
                big += 1
            else:
                reply = reply_decoder.decode(sock.recv(length, socket.MSG_WAITALL))
                assert isinstance(reply, ErrorReply), reply
                assert reply.code == ErrorCode.BUSY
                busy += 1
        # An unread answer is dropped after the send timeout (10 s), and its room taken
        # by the next one: on a loaded machine the 300 listings take longer than that
        # (75 s beside two CPU hogs), so the bound is per send timeout that passed.
        windows = int((time.monotonic() - started) // SEND_TIMEOUT_S) + 1
        during = settled_rss_kib(pid)
        hooks = bystander_hooks(daemon, 5)
    finally:
        for sock in held:
            sock.close()
    growth = peak_rss_kib(pid) - before
    after = settled_rss_kib(pid) - before
    assert growth < HELD_LIMIT_KIB + HELD_MARGIN_KIB, f"RSS grew by {growth} KiB"
    assert after < GIVEN_BACK_MARGIN_KIB, f"RSS still {after} KiB up after the clients left"
    assert 0 < big <= HELD_LIMIT_KIB // 3_600 * windows, (big, windows)
    assert busy == len(held) - big
    assert len(hooks) == 5, f"{5 - len(hooks)} of 5 hooks went silent"
    record_figures(
        "unread_answers",
        clients=len(held),
        answers_held=big,
        told_busy=busy,
        rss_growth_kib=during - before,
        peak_growth_kib=growth,
        after_kib=after,
        hook_wall_ms_max=round(max(hooks), 1),
    )


PARTIAL_FRAME_CLIENTS = 6000


@pytest.fixture
def all_descriptors() -> Iterator[None]:
    """As many descriptors as the hard limit allows: a flood of thousands of clients."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < PARTIAL_FRAME_CLIENTS + 512:
        pytest.skip(f"the descriptor limit ({hard}) is too low for the flood")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.usefixtures("all_descriptors")
def test_partial_frames_of_any_size_are_bounded_together(daemon: DaemonProcess) -> None:
    # Frames up to 64 KiB were not counted: 15,000 connections each holding most of
    # one held 2 GiB, and 1 GiB stayed with the daemon after they were gone.
    assert daemon.proc is not None
    pid = daemon.proc.pid
    with daemon.client() as client:
        client.expect(StoreRequest(content=RULE, tags=["trigger:git-commit"]), StoredReply)
    partial = HEADER.pack(65_532) + b'{"type":"store","content":"' + b"x" * 60_000
    before = settled_rss_kib(pid)
    held: list[socket.socket] = []
    try:
        for _ in range(PARTIAL_FRAME_CLIENTS):
            sock = connect_unix(daemon.socket)
            held.append(sock)
            with contextlib.suppress(OSError):  # refused already: busy, closed
                sock.sendall(partial)
        during = settled_rss_kib(pid)
        hooks = bystander_hooks(daemon, 5)
        growth = peak_rss_kib(pid) - before
        busy = 0
        for sock in held[-100:]:  # the last ones found no room
            sock.settimeout(0.5)
            with contextlib.suppress(OSError):
                reply = reply_decoder.decode(recv_frame(sock))
                assert isinstance(reply, ErrorReply), reply
                assert reply.code == ErrorCode.BUSY
                busy += 1
    finally:
        for sock in held:
            sock.close()
    after = settled_rss_kib(pid) - before
    assert growth < HELD_LIMIT_KIB + HELD_MARGIN_KIB, f"RSS grew by {growth} KiB"
    assert after < GIVEN_BACK_MARGIN_KIB, f"RSS still {after} KiB up after the clients left"
    assert busy > 0
    assert len(hooks) == 5, f"{5 - len(hooks)} of 5 hooks went silent"
    record_figures(
        "partial_frames",
        clients=len(held),
        rss_growth_kib=during - before,
        peak_growth_kib=growth,
        after_kib=after,
        hook_wall_ms_max=round(max(hooks), 1),
    )


# ----------------------------------------------------------- long store scans

SCAN_MEMORIES = int(os.environ.get("MENTED_SCAN_MEMORIES", "150000"))


def test_hooks_keep_their_latency_while_a_long_list_runs(short_tmp: Path) -> None:
    # `list` over 200,000 memories ran on the event loop for about a second at a
    # time: 3 of 4 hooks fired meanwhile were silent.
    daemon = DaemonProcess(short_tmp)
    store = Store(daemon.data_dir, sync=False)
    try:
        store.store_many(
            StoreItem(content=f"note {n}: something to remember", tags=["note"])
            for n in range(SCAN_MEMORIES)
        )
        store.store(RULE, tags=["trigger:git-commit"])
    finally:
        store.close()
    daemon.start()
    stop = threading.Event()
    listings: list[float] = []
    failures: list[str] = []

    def keep_listing() -> None:
        # A listing of everything (refused as too large) and a filter that keeps nothing:
        # each walks every memory.
        requests = [ListRequest(), ListRequest(tag="nothing-has-this")]
        try:
            with daemon.client(timeout=120) as client:
                while not stop.is_set():
                    started = time.perf_counter()
                    try:
                        client.request(requests[len(listings) % 2])
                    except DaemonError as exc:
                        assert exc.code == ErrorCode.FRAME_TOO_LARGE, exc
                    listings.append(time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            failures.append(repr(exc))

    quiet = bystander_hooks(daemon, 5)  # the baseline, on this machine, now
    lister = threading.Thread(target=keep_listing)
    lister.start()
    tried = 0
    hooks: list[float] = []
    try:
        time.sleep(0.3)
        # Ten hooks at least, and on until two listings have finished meanwhile (on a
        # loaded machine one listing may outlast ten hooks).
        deadline = time.monotonic() + 120
        while tried < 10 or (len(listings) < 2 and time.monotonic() < deadline):
            hooks += bystander_hooks(daemon, 5, first_call=10 + tried)
            tried += 5
    finally:
        stop.set()
        lister.join()
        assert daemon.proc is not None
        rss = rss_kib(daemon.proc.pid)
        status = daemon.stop()
    assert failures == []
    assert len(listings) >= 2
    # Before the scans left the event loop, a hook waited about half a listing (3 of 4
    # went past the shim's 250 ms): now about as fast as before the listings began.
    assert len(hooks) == tried, f"{tried - len(hooks)} of {tried} hooks went silent"
    assert statistics.median(hooks) < 3 * statistics.median(quiet) + 250, (quiet, hooks)
    assert status == 0, daemon.log()
    record_figures(
        "hooks_during_list",
        memories=SCAN_MEMORIES,
        listing_s_max=round(max(listings), 2),
        hooks_answered=len(hooks),
        hook_wall_ms_max=round(max(hooks), 1),
        rss_kib=rss,
    )
