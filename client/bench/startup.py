"""Start-up: how soon a new daemon answers a hook, and the MCP server `initialize`.

Side by side, in interleaved rounds, with the floor: a bare interpreter importing
trio (mented is a trio program; nothing it does can start sooner). Each figure is
from spawning the process:

- `bare trio`: until `python -c "import trio"` exits;
- `ready`: until the daemon, binding its own socket, answers `status`;
- `first hook`: until the first hook's answer (a commit's rules, in full) has
  arrived, on a socket that listens before the daemon starts, as under socket
  activation: the hook connects at once and waits in the backlog, so this is what
  the first command after a start waits (its budget is 250 ms);
- `first hook, own socket`: the same when the daemon binds its own socket (`mentectl
  start`, a terminal) and the hook connects as soon as it can;
- `explain`: `mentectl explain` on a stopped daemon under socket activation: the
  daemon is spawned once `mentectl explain` has connected (as the service manager
  starts it), and the time is from that spawn until `explain` exited, having shown
  the rules;
- `MCP initialize` and `MCP tools/list`: until `mentectl mcp` has answered them.

`python -m mented_client.bench startup` runs it alone; `mentectl bench` runs it too.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import msgspec

from mented.agents.pretooluse import pretooluse_event
from mented.protocol import (
    HookRequest,
    StoredReply,
    StoreRequest,
    encode,
    recv_frame,
)
from mented_client.bench.plans import Progress
from mented_client.bench.processes import Daemon
from mented_client.bench.timing import BenchError, Summary, summarize
from mented_client.connection import Client

RULE = "commit messages: a single line with a conventional prefix"
_TIMEOUT_S = 60.0
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "mentectl-bench", "version": "1"},
    },
}


class StartupSection(msgspec.Struct, frozen=True, kw_only=True):
    bare_trio: Summary
    ready: Summary
    first_hook: Summary
    mcp_initialize: Summary
    mcp_tools: Summary
    first_hook_own_socket: Summary | None = None  # None: a result from before this row
    explain: Summary | None = None  # None: a result from before this row


def bench_startup(rounds: int, root: Path, config: Path, progress: Progress) -> StartupSection:
    """`rounds` of each start, interleaved; the times from spawn (see the module doc)."""
    daemon = Daemon(root, "startup", config)
    daemon.start()
    try:
        with Client(daemon.socket) as client:
            client.expect(StoreRequest(content=RULE, tags=["trigger:git-commit"]), StoredReply)
    finally:
        daemon.stop()
    samples: dict[str, list[int]] = {name: [] for name in StartupSection.__struct_fields__}
    for n in range(rounds):
        progress(f"start-up: round {n + 1} of {rounds}")
        samples["bare_trio"].append(_bare_trio())
        samples["ready"].append(int(daemon.start() * 1e9))
        daemon.stop()
        samples["first_hook"].append(_first_hook(daemon, f"bench-{n}"))
        samples["first_hook_own_socket"].append(_first_hook_own_socket(daemon, f"own-{n}"))
        samples["explain"].append(_explain(daemon))
        initialize, tools = _mcp(root, daemon.socket)
        samples["mcp_initialize"].append(initialize)
        samples["mcp_tools"].append(tools)
    return StartupSection(**{name: summarize(values) for name, values in samples.items()})


def _bare_trio() -> int:
    started = time.perf_counter_ns()
    subprocess.run([sys.executable, "-c", "import trio"], check=True, timeout=_TIMEOUT_S)
    return time.perf_counter_ns() - started


def _listening(daemon: Daemon) -> socket.socket:
    """The daemon's socket, listening, as a service manager holds it before a start."""
    daemon.socket.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(daemon.socket))
    listener.listen(64)
    return listener


def _spawn_activated(daemon: Daemon, listener: socket.socket) -> subprocess.Popen[bytes]:
    """Spawn the daemon on `listener` as systemd hands it over (then closed here)."""
    fd = listener.fileno()
    # Descriptor 3, LISTEN_PID the daemon's own (the shell's pid, which exec keeps).
    moved = "" if fd == 3 else f"exec 3<&{fd} {fd}<&-; "
    script = f'{moved}LISTEN_PID=$$ LISTEN_FDS=1 exec "$@"'
    argv = ["/bin/sh", "-c", script, "sh", *_daemon_argv(daemon)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MENTED_", "LISTEN_"))}
    with daemon.log_path.open("ab") as log:
        proc = subprocess.Popen(argv, pass_fds=(fd,), stdout=log, stderr=log, env=env)  # noqa: S603
    listener.close()
    return proc


def _first_hook(daemon: Daemon, session: str) -> int:
    """Spawn the daemon on a socket already listening; the ns until a hook's full answer."""
    listener = _listening(daemon)
    event = pretooluse_event('git commit -m "fix: x"', cwd=str(daemon.data_dir), session=session)
    request = encode(HookRequest(agent="claude-code", event=msgspec.Raw(event)))
    started = time.perf_counter_ns()
    proc = _spawn_activated(daemon, listener)

    def connect() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(_TIMEOUT_S)
        try:
            sock.connect(str(daemon.socket))
        except BaseException:
            sock.close()
            raise
        return sock

    return _first_answer(proc, connect, request, started)


def _explain(daemon: Daemon) -> int:
    """`mentectl explain` on a stopped daemon, socket activated once it connected; the ns
    from the daemon's spawn until `explain` exited with the rules shown."""
    listener = _listening(daemon)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MENTED_")}
    argv = [sys.executable, "-m", "mented_client.cli", "--socket", str(daemon.socket)]
    argv += ["explain", "--cwd", str(daemon.data_dir), 'git commit -m "fix: x"']
    explain = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)  # noqa: S603
    proc = None
    try:
        ready, _, _ = select.select([listener], [], [], _TIMEOUT_S)
        if not ready:
            raise BenchError("mentectl explain did not connect to the daemon's socket")
        started = time.perf_counter_ns()
        proc = _spawn_activated(daemon, listener)
        out, err = explain.communicate(timeout=_TIMEOUT_S)
        elapsed = time.perf_counter_ns() - started
    finally:
        listener.close()
        if explain.poll() is None:
            explain.kill()
            explain.wait(timeout=_TIMEOUT_S)
        if proc is not None:
            _stop(proc)
    if explain.returncode != 0 or RULE.encode() not in out:
        raise BenchError(f"mentectl explain after a start showed no rules: {(out + err)[:300]!r}")
    return elapsed


def _first_hook_own_socket(daemon: Daemon, session: str) -> int:
    """Spawn the daemon on its own socket; the ns until a hook, sent as soon as it connects,
    has its full answer."""
    daemon.socket.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MENTED_", "LISTEN_"))}
    event = pretooluse_event('git commit -m "fix: x"', cwd=str(daemon.data_dir), session=session)
    request = encode(HookRequest(agent="claude-code", event=msgspec.Raw(event)))
    argv = [*_daemon_argv(daemon), "--socket", str(daemon.socket)]
    with daemon.log_path.open("ab") as log:
        started = time.perf_counter_ns()
        proc = subprocess.Popen(argv, stdout=log, stderr=log, env=env)  # noqa: S603
    return _first_answer(proc, lambda: _connected(daemon.socket, proc), request, started)


def _first_answer(
    proc: subprocess.Popen[bytes],
    connect: Callable[[], socket.socket],
    request: bytes,
    started: int,
) -> int:
    """Send the hook on a connection `connect` opens; the ns from `started` until its full
    answer (the daemon stopped afterwards, whatever happened)."""
    try:
        with connect() as sock:
            sock.sendall(request)
            answer = recv_frame(sock)
            elapsed = time.perf_counter_ns() - started
    finally:
        _stop(proc)
    if RULE.encode() not in answer:
        raise BenchError(f"the first hook after a start got no rules: {answer[:200]!r}")
    return elapsed


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(timeout=_TIMEOUT_S)


def _connected(path: Path, proc: subprocess.Popen[bytes]) -> socket.socket:
    """A connection to `path` as soon as something listens there (tried every millisecond)."""
    deadline = time.monotonic() + _TIMEOUT_S
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(_TIMEOUT_S)
        try:
            sock.connect(str(path))
        except OSError:
            sock.close()
            if proc.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"the daemon did not listen on {path}") from None
            time.sleep(0.001)
        else:
            return sock


def _daemon_argv(daemon: Daemon) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mented.daemon",
        "--data-dir",
        str(daemon.data_dir),
        "--config",
        str(daemon.config),
        "--log-level",
        "warning",
    ]


def _mcp(root: Path, daemon_socket: Path) -> tuple[int, int]:
    """Spawn `mentectl mcp`; the ns until it answered `initialize`, then `tools/list`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MENTED_")}
    env["MENTED_SOCKET"] = str(daemon_socket)  # not running: the local table, as on a cold start
    started = time.perf_counter_ns()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mented_client.cli", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=root,
        bufsize=0,  # read by `_answer` from the descriptor
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(_INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        _answer(proc.stdout, 1)
        initialized = time.perf_counter_ns() - started
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        proc.stdin.write(json.dumps(listing).encode() + b"\n")
        proc.stdin.flush()
        _answer(proc.stdout, 2)
        listed = time.perf_counter_ns() - started
    finally:
        proc.kill()
        proc.wait(timeout=_TIMEOUT_S)
    return initialized, listed


def _answer(stdout: IO[bytes], request_id: int) -> None:
    """Read answer lines until the one to `request_id`.

    From the file descriptor, not the buffered reader: `select` on the pipe would miss
    a line that came in the same read as the one before and waits in the buffer.
    """
    deadline = time.monotonic() + _TIMEOUT_S
    pending = b""
    while True:
        while b"\n" not in pending:
            left = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([stdout], [], [], left)
            if not ready:
                raise BenchError(f"mentectl mcp did not answer request {request_id}")
            chunk = os.read(stdout.fileno(), 1 << 16)
            if not chunk:
                raise BenchError("mentectl mcp exited (is the MCP SDK installed?)")
            pending += chunk
        line, _, pending = pending.partition(b"\n")
        if json.loads(line).get("id") == request_id:
            return


def render(section: StartupSection) -> list[str]:
    """The section's table, for docs/benchmarks.md and the terminal."""
    floor = section.bare_trio.p50_us
    rows = [
        ("bare interpreter importing trio", section.bare_trio),
        ("daemon ready (own socket, `status` answered)", section.ready),
        ("first hook after a start (socket activation), full answer", section.first_hook),
        ("first hook after a start (own socket), full answer", section.first_hook_own_socket),
        (
            "`mentectl explain` on a stopped daemon (socket activation), rules shown",
            section.explain,
        ),
        ("MCP server: `initialize` answered", section.mcp_initialize),
        ("MCP server: `tools/list` answered", section.mcp_tools),
    ]
    lines = [
        "| from spawn until | median | min | max | vs bare trio |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {name} | {s.p50_us / 1000:.1f} ms | {s.min_us / 1000:.1f} ms | "
        f"{s.max_us / 1000:.1f} ms | {s.p50_us / floor:.2f}x |"
        for name, s in rows
        if s is not None
    ]
    return lines


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m mented_client.bench startup")
    parser.add_argument("--rounds", type=int, default=10, help="starts of each kind")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="mb-", dir="/tmp"))
    try:
        config = root / "config.toml"
        config.write_text("# mentectl bench: built-in defaults\n")
        section = bench_startup(args.rounds, root, config, lambda m: print(m, file=sys.stderr))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\n".join(render(section)))
    return 0
