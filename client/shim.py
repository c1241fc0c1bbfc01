# mented hook shim: the agent runs this file once per shell command; stdlib only.
"""Pass an agent's hook event to the mented daemon and print what it answers.

Usage: ``<absolute python> -I -S <absolute path to this file> AGENT [SOCKET]``
with the agent's event JSON on stdin.

This file is on the hot path of every shell command the agent runs, so it
imports only modules that are built into the interpreter or cost about a
millisecond (`sys`, `posix`, `time`, `_signal`, `_socket`): not `socket` (11 ms),
not `json` (12 ms), nothing of mented's. It does not parse the event: the stdin
bytes travel verbatim inside the request envelope and the daemon decodes them.

It answers on stdout and exits 0, but for one answer: a stop for an agent
that blocks a call on exit status 2 and hands the model the hook's stderr
(Kiro CLI) comes as `BLOCK` then the text, which goes to stderr with status 2.

Whatever goes wrong -- no daemon, a stale socket, a daemon that hangs, a garbled
or oversized answer, oversized stdin, a bug in this file -- it prints nothing
and exits 0, so the agent's command runs untouched. A hard deadline (default
250 ms, `MENTED_HOOK_BUDGET_MS` overrides) bounds the whole run, and travels in
the request (as Unix seconds: the clock the daemon shares), so that an answer the
daemon could only send too late is dropped, not counted as read. It writes no
files and needs no home directory.

The socket is found the way `mented.paths.socket_path` finds it:
`$MENTED_SOCKET`, else the optional SOCKET argument written in at install time,
else `$XDG_RUNTIME_DIR/mented/mented.sock`, else
`${TMPDIR:-/tmp}/mented-<uid>/mented.sock`. A test keeps the two in step.
"""

# Annotations are quoted rather than `from __future__ import annotations` (one more
# module to load): this file must also run, and stay silent, on an older python3.
import _signal
import _socket
import posix
import sys
import time

MAX_STDIN = 1 << 20  # an event over 1 MiB is not a shell command we can help with
MAX_REPLY = 1 << 20  # agents cut context far below this; more means something is wrong
DEFAULT_BUDGET_MS = 250
MAX_BUDGET_MS = 10_000
MAX_AGENT_NAME = 40
_AGENT_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-_")
# The daemon's answer for a stop read from stderr, ahead of its text (mented.agents.kiro_cli,
# where a test keeps the two equal). A typed message: an older shim stays silent on it.
BLOCK = b'{"type":"block"}\n'


class _Silent(Exception):  # noqa: N818 - not an error to report: the reason to stay silent
    """Give up quietly."""


def socket_path(environ: "dict[bytes, bytes]", fallback: "bytes | None" = None) -> bytes:
    """The daemon's socket as bytes, from a bytes-keyed environment."""
    explicit = environ.get(b"MENTED_SOCKET")
    if explicit:
        return explicit
    if fallback:
        return fallback
    xdg = environ.get(b"XDG_RUNTIME_DIR")
    if xdg:
        return xdg.rstrip(b"/") + b"/mented/mented.sock"
    tmp = (environ.get(b"TMPDIR") or b"/tmp").rstrip(b"/")
    return tmp + b"/mented-" + str(posix.getuid()).encode() + b"/mented.sock"


def budget_seconds(environ: "dict[bytes, bytes]") -> float:
    """The hard deadline for the whole run, in seconds."""
    raw = environ.get(b"MENTED_HOOK_BUDGET_MS")
    try:
        millis = int(raw) if raw else DEFAULT_BUDGET_MS
    except ValueError:
        millis = DEFAULT_BUDGET_MS
    if millis <= 0:
        millis = DEFAULT_BUDGET_MS
    return min(millis, MAX_BUDGET_MS) / 1000


def _read_stdin() -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = posix.read(0, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_STDIN:
            raise _Silent
        chunks.append(chunk)


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise _Silent
    return left


def _exchange(path: bytes, request: bytes, deadline: float) -> bytes:
    """Send one frame, return the body of the answer; every step bounded by `deadline`."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(_remaining(deadline))
        sock.connect(path)
        # The command about to run goes only to a daemon of our own user: where the
        # socket sits in a shared directory (/tmp), another user could listen first.
        if _peer_uid(sock) != posix.getuid():
            raise _Silent
        view = memoryview(request)
        while view:
            sock.settimeout(_remaining(deadline))
            view = view[sock.send(view) :]
        length = int.from_bytes(_recv_exactly(sock, 4, deadline), "big")
        if length > MAX_REPLY:
            raise _Silent
        return _recv_exactly(sock, length, deadline)
    finally:
        sock.close()


def _peer_uid(sock: "_socket.socket") -> int:
    """The uid of the process listening at the other end (as `mented.peercred.peer_uid`)."""
    if hasattr(_socket, "SO_PEERCRED"):  # Linux: struct ucred {pid, uid, gid}
        raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    else:  # macOS: LOCAL_PEERCRED (SOL_LOCAL = 0, option 1): struct xucred {version, uid, ...}
        raw = sock.getsockopt(0, 1, 76)
    return int.from_bytes(raw[4:8], sys.byteorder)


def _recv_exactly(sock: _socket.socket, size: int, deadline: float) -> bytes:
    data = b""
    while len(data) < size:
        sock.settimeout(_remaining(deadline))
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise _Silent
        data += chunk
    return data


def _on_deadline(signum: int, frame: object) -> None:  # noqa: ARG001 - signal handler signature
    # The backstop behind the per-operation timeouts: whatever blocks (a stdin the
    # agent never closes, a slow disk), the process ends silently and successfully.
    posix._exit(0)  # noqa: SLF001 - no cleanup to run, and none that could fail


def run(argv: "list[str]", environ: "dict[bytes, bytes]") -> bytes:
    """The stdout bytes for this hook call (empty for silence). May raise."""
    start = time.monotonic()
    budget = budget_seconds(environ)
    deadline = start + budget
    # The same deadline on the clock the daemon shares, sent with the request: a
    # request that waits unread while the daemon is held up is then answered only
    # if there is still time, and counted as handed over only if it was.
    shared_deadline = repr(time.time() + budget).encode()
    _signal.signal(_signal.SIGALRM, _on_deadline)
    _signal.setitimer(_signal.ITIMER_REAL, budget)
    if len(argv) < 2:
        return b""
    agent = argv[1].encode()
    if not agent or len(agent) > MAX_AGENT_NAME or not _AGENT_CHARS.issuperset(agent):
        return b""
    fallback = argv[2].encode() if len(argv) > 2 else None
    event = _read_stdin().strip()
    # Hook events are JSON objects; anything else cannot be spliced into the envelope.
    if not event.startswith(b"{"):
        return b""
    # `mentectl doctor` and `setup` mark their test fires, which are not the user's.
    test = b',"test":true' if environ.get(b"MENTED_TEST_FIRE") == b"1" else b""
    body = (
        b'{"type":"hook","agent":"'
        + agent
        + b'","deadline":'
        + shared_deadline
        + test
        + b',"event":'
        + event
        + b"}"
    )
    reply = _exchange(socket_path(environ, fallback), len(body).to_bytes(4, "big") + body, deadline)
    # A hook reply is the agent's stdout; a typed daemon message (an error from an
    # older daemon, say) is never something to show the agent, but for a block.
    if reply.startswith(b'{"type":') and not reply.startswith(BLOCK):
        return b""
    return reply


def destination(answer: bytes) -> "tuple[int, bytes, int]":
    """Where `answer` goes: the file descriptor, the bytes, the exit status once written.

    A block without a reason is silence: a call is never stopped with nothing to read.
    """
    if answer.startswith(BLOCK):
        reason = answer[len(BLOCK) :]
        return (2, reason, 2) if reason.strip() else (1, b"", 0)
    return 1, answer, 0


def main() -> None:
    status = 0
    try:
        fd, out, written = destination(run(sys.argv, posix.environ))
        # The backstop stays armed through the write: a stdout pipe that the agent
        # does not read takes at most its buffer (64 KiB on Linux, less on macOS),
        # then blocks the write for good. An answer is cut only if the pipe has no
        # room for it at the deadline, in practice when the agent is not reading;
        # a cut answer is not JSON, so no agent acts on it.
        view = memoryview(out)
        while view:
            view = view[posix.write(fd, view) :]
        # Written whole: a block now stands, so the backstop must not turn it into exit 0.
        _signal.setitimer(_signal.ITIMER_REAL, 0)
        status = written
    except BaseException:  # noqa: BLE001, S110 - any failure, including our own bugs, is silence
        pass
    # _exit: no interpreter shutdown, so no late flush of a closed stdout can
    # turn into a traceback or a non-zero status.
    posix._exit(status)  # noqa: SLF001


if __name__ == "__main__":
    main()
