"""The benchmark's own processes: daemons, echo servers (the floors), and where they run.

Every daemon runs on a socket and data directory in the benchmark's temporary
directory: nothing of the user's is used or touched.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

from mented.protocol import (
    HookRequest,
    IncompleteFrameError,
    OkReply,
    ShutdownRequest,
    StatusReply,
    StatusRequest,
    encode,
    recv_frame,
)
from mented_client.bench.corpus import AGENT, hook_event
from mented_client.bench.timing import BenchError
from mented_client.connection import Client, DaemonError, NotRunningError, ProtocolError

RECV_SIZE = 64 * 1024
FLOOR_KINDS = ("trio", "plain")  # the echo servers, in the order they are asked
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


class Daemon:
    """One `mented` process of the benchmark's own, on its own socket and data directory."""

    def __init__(self, root: Path, name: str, config: Path) -> None:
        self.socket = root / f"{name}.sock"
        self.data_dir = root / name
        self.config = config
        self.log_path = root / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> float:
        """Start the daemon; the seconds from spawn to the first answered status request.

        Raises:
            BenchError: it exited or did not answer within `timeout_s`.
        """
        # sys.executable, not its realpath: in a virtual environment the link is what
        # finds mented's packages, and it is the binary itself, not a shim script.
        argv = [
            sys.executable,
            "-m",
            "mented.daemon",
            "--socket",
            str(self.socket),
            "--data-dir",
            str(self.data_dir),
            "--config",
            str(self.config),
            "--log-level",
            "warning",
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("MENTED_")}
        with self.log_path.open("ab") as log:
            started = time.perf_counter()
            # A session of its own: a Ctrl-C at the terminal reaches mentectl only,
            # which stops it (`stop`), rather than every helper at once.
            self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        deadline = started + timeout_s
        while True:
            try:
                with Client(self.socket, connect_timeout=1.0, timeout=5.0) as client:
                    client.expect(StatusRequest(), StatusReply)
                return time.perf_counter() - started
            except (NotRunningError, ProtocolError):
                if self.proc.poll() is not None or time.perf_counter() > deadline:
                    self.stop()
                    raise BenchError(
                        f"the benchmark daemon did not start: {self._log_tail()}"
                    ) from None
                time.sleep(0.002)

    @property
    def pid(self) -> int:
        assert self.proc is not None, "start() first"
        return self.proc.pid

    def stop(self) -> None:
        """Ask politely, then kill; idempotent."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        # Whatever the answer (or none), the wait below and the kill after it end it.
        with contextlib.suppress(OSError, DaemonError), Client(self.socket, timeout=5.0) as client:
            client.expect(ShutdownRequest(), OkReply)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _log_tail(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return text[-2000:] or "(empty log)"


class EchoServer:
    """A floor to compare with: answers every frame with an empty JSON object, nothing else.

    `plain` is a blocking stdlib socket loop (the socket round trip and Python's share of
    it); `trio` is a trio server framed much like the daemon (a trio socket stream, an idle timeout
    per read): what any trio daemon pays before it does any work.
    """

    def __init__(self, root: Path, kind: str) -> None:
        self.kind = kind
        self.socket = root / f"echo-{kind}.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        code = "from mented_client.bench.processes import serve_echo; "
        code += f"serve_echo({str(self.socket)!r}, {self.kind!r})"
        # A session of its own, as the daemon's: Ctrl-C is mentectl's to handle.
        self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-c", code], stdin=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.perf_counter() + START_TIMEOUT_S
        while True:
            with contextlib.suppress(OSError):
                one_shot(self.socket, encode(StatusRequest()))
                return
            if self.proc.poll() is not None or time.perf_counter() > deadline:
                self.stop()
                raise BenchError(f"the {self.kind} echo server did not start")
            time.sleep(0.005)

    @property
    def pid(self) -> int:
        assert self.proc is not None, "start() first"
        return self.proc.pid

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.kill()
            proc.wait()


_ECHO_REPLY = b"\x00\x00\x00\x02{}"


def serve_echo(path: str, kind: str) -> None:
    """Run an `EchoServer` in this process until killed."""
    if kind == "plain":
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(512)
        while True:
            connection, _ = listener.accept()
            with connection:
                while connection.recv(RECV_SIZE):  # every request is one small frame
                    connection.sendall(_ECHO_REPLY)
    import trio  # noqa: PLC0415 - only this server needs it

    async def answer(sock: trio.socket.SocketType) -> None:
        stream = trio.SocketStream(sock)
        with sock:
            while True:
                with trio.move_on_after(60):
                    request = await stream.receive_some(RECV_SIZE)
                if not request:
                    return
                await stream.send_all(_ECHO_REPLY)

    async def main() -> None:
        listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await listener.bind(path)
        listener.listen(512)
        async with trio.open_nursery() as nursery:
            while True:
                sock, _ = await listener.accept()
                nursery.start_soon(answer, sock)

    trio.run(main)


def one_shot(socket_path: Path, request: bytes) -> bytes:
    """Connect, send one frame, read the reply body, close: what the hook shim does."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10.0)
        sock.connect(str(socket_path))
        sock.sendall(request)
        try:
            return recv_frame(sock)
        except IncompleteFrameError as exc:
            raise BenchError("the daemon closed the connection mid-reply") from exc


def hook_frame(command: str, tool_use_id: str) -> bytes:
    """A complete `hook` request frame for a Claude Code event running `command`."""
    event = msgspec.Raw(hook_event(command, tool_use_id))
    return encode(HookRequest(agent=AGENT, event=event))


@dataclass(frozen=True)
class Placement:
    """Where the client and the servers run while round trips are timed."""

    name: str
    client: frozenset[int] | None  # CPUs; None: wherever the scheduler likes
    servers: frozenset[int] | None


def placements() -> list[Placement]:
    """One core for all, then the client and the servers on two different cores.

    A round trip of tens of microseconds depends on where the scheduler puts the
    two processes: on one core they hand the CPU to each other, across cores each
    request wakes the other core, whose cost is the machine's (power states, a
    hypervisor). Pinning measures both, each the same way every run.
    """
    if not hasattr(os, "sched_setaffinity"):
        return [Placement("unpinned", None, None)]
    cpus = sorted(os.sched_getaffinity(0))
    one = Placement("one core", frozenset(cpus[:1]), frozenset(cpus[:1]))
    if len(cpus) < 2:
        return [one]
    return [one, Placement("two cores", frozenset(cpus[:1]), frozenset(cpus[1:2]))]


def pin(pid: int, cpus: frozenset[int] | None) -> None:
    """Move every thread of process `pid` (0: this one) to `cpus`."""
    if cpus is None:
        return
    tasks = Path(f"/proc/{pid or os.getpid()}/task")
    threads = [int(task.name) for task in tasks.iterdir()] if tasks.is_dir() else [pid]
    for thread in threads:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(thread, cpus)
