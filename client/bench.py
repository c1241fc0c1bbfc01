"""`mentectl bench`: measure mented's promises on this machine and write the figures down.

The figures, numbered as in the results table (docs/benchmarks.md says what bounds each):

1. `hook`          the installed hook command line, spawn to exit, against the bare
                   interpreter (`python -I -S -c pass`), interleaved round by round:
                   a command that names no action, a commit with 6 rules, a Claude-style
                   heredoc commit, and the same commit with the daemon down.
2. `recall`        `recall_for_action` on one persistent connection per store size
                   (1 thousand, 100 thousand, 1 million memories over about a thousand
                   actions), the sizes' daemons running side by side and asked in turn,
                   so that their ratio is measured interleaved; the same lookup in-process.
3. `hook_request`  one hook request inside the daemon (decode, match, look up, render)
                   on a fresh connection each, the matcher's cache cold and warm, interleaved.
4. `concurrency`   1, 10, 100 clients (threads) sending hook requests at once.
5. `writes`        durable single rule adds through the daemon; bulk import (`store_many`).
6. `memory`        each size's daemon: resident memory and cold start to ready.
7. `matcher`       the matcher alone on a corpus of real agent commands, cache miss and hit.

Figures 2 and 3 come with floors: two echo servers that answer every frame at once,
one on trio and one on a blocking stdlib socket, asked in the same loops. They show
how much of a figure is the socket and trio rather than mented's own work.

It runs them in the order 7, 1, 3, 4, 5, then 2 and 6 (the slow store loading last),
against daemons of its own (`python -m mented.daemon`) on sockets and data directories
in a temporary directory under /tmp (Unix socket paths are limited to ~107 bytes),
removed at the end: nothing of the user's (socket, data, config, agent settings) is
used or touched. Stores are filled with `Store.store_many` before their daemon starts.

Times are taken on the calling side with `time.perf_counter_ns`. A `Summary` holds
the median, p99 (nearest rank), min, max and mean in microseconds. Where a figure is
held against a reference (the hook against the bare interpreter, the 1M store against
the 1k one) both are measured interleaved in the same loop and the ratio of their
medians is reported: on a noisy machine the ratio is the figure that counts.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
import math
import os
import platform
import random
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec

import msgspec

from mented import __version__
from mented.actions import load_action_table
from mented.agents.pretooluse import pretooluse_event, text_of_answer
from mented.config import Config
from mented.handover import MAX_POINTER_CHARS
from mented.hooks import HookHandler
from mented.matcher import Matcher
from mented.memory import MemoryType, trigger_tag
from mented.protocol import (
    HookRequest,
    IncompleteFrameError,
    LogReply,
    LogRequest,
    OkReply,
    RecallRequest,
    ShutdownRequest,
    StatusReply,
    StatusRequest,
    StoredReply,
    StoreRequest,
    encode,
    recv_frame,
)
from mented.sessions import SessionMemory
from mented.store import Store, StoreItem
from mented_client.connection import Client, DaemonError, NotRunningError, ProtocolError

Progress = Callable[[str], None]
P = ParamSpec("P")

AGENT = "claude-code"
CWD = "/home/dev/src/webapp"
RULES_PER_REPLY = 6  # `k`, and the rules each probed action has at every size
_RECV_SIZE = 64 * 1024
FLOOR_KINDS = ("trio", "plain")  # the echo servers, in the order they are asked
RECALL_BLOCK = 50  # requests to one daemon before the next one's turn
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
_NS_PER_US = 1000


class BenchError(Exception):
    """The benchmark could not run; the message says what failed."""


# ------------------------------------------------------------------------ plans


@dataclass(frozen=True, kw_only=True)
class Plan:
    """How much of everything to run."""

    name: str
    sizes: tuple[int, ...]  # store sizes for `recall` and `memory`
    actions: int  # distinct actions the memories of a store are spread over
    load_batch: int  # memories per `store_many` transaction
    hook_rounds: int  # rounds of (bare + each hook case) spawns
    recall_requests: int  # per size
    hook_requests: int  # per cache state
    concurrency: tuple[int, ...]
    concurrent_requests: int  # in all, per level
    durable_writes: int
    cold_starts: int  # per size
    matcher_rounds: int  # passes over the corpus


PLANS = {
    "full": Plan(
        name="full",
        sizes=(1_000, 100_000, 1_000_000),
        actions=1000,
        load_batch=20_000,
        hook_rounds=400,
        recall_requests=30_000,
        hook_requests=4000,
        concurrency=(1, 10, 100),
        concurrent_requests=10_000,
        durable_writes=300,
        cold_starts=5,
        matcher_rounds=20,
    ),
    "quick": Plan(
        name="quick",
        sizes=(1_000, 10_000, 100_000),
        actions=1000,
        load_batch=20_000,
        hook_rounds=40,
        recall_requests=3000,
        hook_requests=500,
        concurrency=(1, 10, 100),
        concurrent_requests=1000,
        durable_writes=40,
        cold_starts=1,
        matcher_rounds=3,
    ),
    # For the test suite: every section, tiny.
    "smoke": Plan(
        name="smoke",
        sizes=(100, 1000),
        actions=50,
        load_batch=400,
        hook_rounds=3,
        recall_requests=30,
        hook_requests=10,
        concurrency=(1, 4),
        concurrent_requests=24,
        durable_writes=3,
        cold_starts=1,
        matcher_rounds=1,
    ),
}


# ---------------------------------------------------------------------- results


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    """Repeated timings, in microseconds."""

    n: int
    p50_us: float
    p99_us: float
    min_us: float
    max_us: float
    mean_us: float


class Machine(msgspec.Struct, frozen=True, kw_only=True):
    cpu: str
    cores: int
    os: str
    python: str
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)


class HookCase(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    command: str  # the shell command in the agent's event
    daemon_up: bool
    stdout_bytes: int  # what the hook printed (the last run)
    time: Summary
    ratio: float  # median over the bare interpreter's median, same rounds


class HookSection(msgspec.Struct, frozen=True, kw_only=True):
    command_line: str  # as installed by `mentectl hooks install`
    baseline: str
    rounds: int
    bare: Summary
    cases: list[HookCase]


class HookRequestSection(msgspec.Struct, frozen=True, kw_only=True):
    rules: int
    cold: Summary  # a command the matcher has not seen
    warm: Summary  # the same command again
    daemon_cold: Summary  # the daemon's own handling time, from its fire log
    daemon_warm: Summary
    floor_trio: Summary  # a trio echo server, one connection per request
    floor_plain: Summary  # a blocking stdlib echo server, one connection per request


class ConcurrencyLevel(msgspec.Struct, frozen=True, kw_only=True):
    clients: int
    requests: int
    per_second: float
    time: Summary


class WritesSection(msgspec.Struct, frozen=True, kw_only=True):
    durable_add: Summary
    durable_adds_per_s: float
    bulk_memories: int
    bulk_seconds: float
    bulk_per_s: float
    bulk_batch: int


class RecallSize(msgspec.Struct, frozen=True, kw_only=True):
    memories: int
    actions: int
    round_trip: Summary  # client and daemon on one core (`placements()`)
    round_trip_two_cores: Summary | None  # on two different cores
    requests_per_s: float  # one client, one request at a time, on one core
    in_process: Summary  # Store.recall_for_action without socket or daemon
    ratio_to_smallest: float


class Floor(msgspec.Struct, frozen=True, kw_only=True):
    """An echo server asked like the daemon, in the same loop: what the figure cannot beat."""

    name: str
    round_trip: Summary
    round_trip_two_cores: Summary | None


class MemorySize(msgspec.Struct, frozen=True, kw_only=True):
    memories: int
    rss_bytes: int
    anon_bytes: int  # the daemon's own heap; the rest is LMDB's mapped file
    db_bytes: int
    cold_start: Summary  # process start to the first answered status request


class MatcherSection(msgspec.Struct, frozen=True, kw_only=True):
    commands: int
    under_1k: int
    miss: Summary  # every command under 1 KiB, parsed afresh
    hit: Summary
    over_1k: int
    miss_over_1k: Summary | None  # the commands of 1 KiB or more, parsed afresh
    heredoc_miss_us: float
    slowest_under_1k: str  # the command under 1 KiB with the slowest median miss
    slowest_miss_us: float


class Target(msgspec.Struct, frozen=True, kw_only=True):
    figure: str
    target: str
    measured: str
    met: bool


class SessionCost(msgspec.Struct, frozen=True, kw_only=True):
    """What a session of commits costs in mented text, with the default delivery."""

    commits: int
    rules: int
    chars: int  # mented's own text handed to the model over the session
    full_chars: int  # one full text of the rules
    full_texts: int  # answers that carried every rule's text
    stops: int  # commands stopped: each costs the model one extra turn


class BenchResult(msgspec.Struct, kw_only=True):
    mented: str
    plan: str
    command: str
    started: str
    seconds: float
    machine: Machine
    matcher: MatcherSection
    hook: HookSection
    hook_request: HookRequestSection
    concurrency: list[ConcurrencyLevel]
    writes: WritesSection
    recall_placements: list[str]  # `round_trip`, then `round_trip_two_cores` if measured
    recall: list[RecallSize]
    recall_floors: list[Floor]
    memory: list[MemorySize]
    targets: list[Target]
    session_cost: list[SessionCost] = []


def summarize(samples_ns: Sequence[int]) -> Summary:
    """Median, p99 (nearest rank), min, max and mean of nanosecond samples, in µs."""
    if not samples_ns:
        raise BenchError("no samples: nothing was measured")
    ordered = sorted(samples_ns)
    count = len(ordered)
    middle = count // 2
    median = ordered[middle] if count % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    p99 = ordered[min(count - 1, math.ceil(0.99 * count) - 1)]
    return Summary(
        n=count,
        p50_us=median / _NS_PER_US,
        p99_us=p99 / _NS_PER_US,
        min_us=ordered[0] / _NS_PER_US,
        max_us=ordered[-1] / _NS_PER_US,
        mean_us=sum(ordered) / count / _NS_PER_US,
    )


# ----------------------------------------------------------------------- corpus

HEREDOC_COMMIT = """git add mented/store.py tests/test_store.py && git commit -m "$(cat <<'EOF'
fix(store): grow the map before a bulk import fills it

Doubling on MapFullError retried the whole transaction for every batch.
Grow once up front from the batch size instead.

Co-Authored-By: Claude <noreply@anthropic.com>
EOF
)\""""

PR_BODY = "\n".join(
    [
        "## Summary",
        "",
        *(
            f"- {line}"
            for line in (
                "Grow the LMDB map before a bulk import instead of retrying on MapFullError.",
                "Import in batches of 20,000 memories, one durable transaction each.",
                "Report progress every tenth of the import on stderr.",
                "Keep the trigger index ordered newest first across batches.",
                "Refuse an import whose items name an unusable action, naming the item.",
            )
        ),
        "",
        "## Why",
        "",
        "Importing a million memories retried the whole transaction every time the map",
        "doubled, so the import took minutes instead of seconds and held the write lock",
        "the whole time. Hooks kept answering (reads do not wait for the writer), but",
        "`mentectl rule add` stalled behind the import.",
        "",
        "## Test plan",
        "",
        "- [x] `pytest tests/test_store.py -q`",
        "- [x] `mentectl bench --quick`: bulk import figure before and after",
        "- [x] imported a 1M-memory store, restarted the daemon, checked `mentectl status`",
        "- [ ] run the full benchmark on a quiet machine and update docs/benchmarks.md",
        "",
        "Closes #6. Follow-up: a streaming import from JSON lines (#17).",
    ]
)
LONG_PR_CREATE = (
    "git push -u origin HEAD && gh pr create --base main "
    "--title 'store: grow the map before a bulk import' "
    f"--body \"$(cat <<'EOF'\n{PR_BODY}\nEOF\n)\""
)

# Commands as agents send them: most name no action; the rest are the ones rules exist for.
CORPUS: tuple[str, ...] = (
    "ls -la",
    "git status",
    "git diff --stat",
    "git log --oneline -20",
    "cat src/app/main.py",
    "grep -rn 'def handle' src/ | head -20",
    "find . -name '*.py' -not -path './.venv/*' | xargs wc -l | sort -n | tail",
    "python -m pytest tests/test_store.py -q -x",
    "npm test -- --watch=false",
    "npm run build 2>&1 | tail -30",
    "cd frontend && npm run lint",
    "rg -n 'TODO|FIXME' --type py",
    "sed -n '120,180p' src/server.py",
    "ruff check . && mypy src",
    "docker compose ps",
    "curl -sS http://localhost:8080/health | jq .",
    "echo \"git commit -m 'not a commit'\"",
    "git config commit.gpgsign false",
    'for f in tests/*.py; do python -m pytest "$f" -q || break; done',
    "if [ -f package.json ]; then npm ci; fi",
    "make -j4 && ./build/app --version",
    "kubectl get pods -n staging -o wide",
    "tail -n 200 /var/log/app.log | grep -i error",
    "python - <<'PY'\nimport json, sys\nprint(json.load(open('package.json'))['version'])\nPY",
    "git add -A && git commit -m 'fix: handle empty config file'",
    'git commit -am "chore: bump version to 1.4.2"',
    "git -c commit.gpgsign=false commit -m 'wip'",
    "cd repo && git commit --amend --no-edit",
    HEREDOC_COMMIT,
    "git push origin HEAD",
    "git push --force-with-lease origin feature/login",
    "git checkout -b fix/login-timeout",
    "git switch -c feat/export-csv",
    "git rebase -i HEAD~3",
    "git merge --no-ff feature/login",
    "git tag -a v1.4.2 -m 'release 1.4.2'",
    "gh pr create --fill",
    "gh pr create --title 'Fix login timeout' --body \"$(cat <<'EOF'\n## Summary\n"
    '- raise the timeout\n\n## Test plan\n- [x] pytest\nEOF\n)"',
    "gh pr merge 42 --squash --delete-branch",
    "gh release create v1.4.2 --generate-notes",
    "npm install --save-dev vitest",
    "pip install -e '.[test]'",
    "uv pip install httpx",
    "cargo add serde --features derive",
    "npm publish --access public",
    "docker push ghcr.io/acme/webapp:1.4.2",
    "sudo -u deploy git push origin main",
    "bash -c 'cd /srv/app && git pull && git commit -am sync'",
    "git add . && git commit -m 'feat: csv export' && git push -u origin HEAD && "
    "gh pr create --fill",
    "timeout 60 npm ci && npm run build && npm test",
    LONG_PR_CREATE,
)

_RULE_TEXTS = (
    "Commit messages: a single line, a conventional prefix (fix:, feat:, chore:), no emoji.",
    "Never add a Co-Authored-By trailer or any mention of an AI assistant to a commit.",
    "Run the test suite (`make test`) and make sure it passes before committing.",
    "Keep the subject line under 72 characters and write it in the imperative mood.",
    "Do not commit generated files (dist/, *.lock changes) together with source changes.",
    "Reference the issue number at the end of the subject, e.g. `fix: login timeout (#42)`.",
    "Never force-push to main or release branches; use --force-with-lease on your own branch.",
    "Pull requests: fill in the template; link the issue; request review from @platform.",
)


def _rule_text(number: int, action: str) -> str:
    return f"{_RULE_TEXTS[number % len(_RULE_TEXTS)]} (rule {number} for {action})"


def _event(command: str, tool_use_id: str, session: str | None = None) -> bytes:
    """A Claude Code PreToolUse event for a Bash command, as its hook reads it on stdin.

    Each event is a session of its own: the first matching command of a session
    is handed every rule (later ones get a one-line pointer), and that is the
    answer measured.
    """
    return pretooluse_event(
        command,
        cwd=CWD,
        session=session or f"bench-{tool_use_id}",
        tool_use_id=tool_use_id,
        # What Claude Code sends besides: the daemon reads past them, as it must.
        transcript_path="/home/dev/.claude/projects/webapp/bench.jsonl",
        permission_mode="default",
        tool_input={"command": command, "description": "benchmark command"},
    )


# ------------------------------------------------------------------- the machine


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    if sys.platform == "darwin":
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            return subprocess.run(
                ["/usr/sbin/sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True,
                text=True,
                check=True,
                timeout=5,
            ).stdout.strip()
    return platform.processor() or platform.machine() or "unknown"


def _load() -> tuple[float, float, float]:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)
    return (round(one, 2), round(five, 2), round(fifteen, 2))


def describe_machine() -> Machine:
    """CPU, cores, OS and Python of this machine, and its load right now."""
    return Machine(
        cpu=_cpu_model(),
        cores=os.cpu_count() or 1,
        os=platform.platform(),
        python=f"{platform.python_implementation()} {platform.python_version()}",
        load_before=_load(),
    )


# -------------------------------------------------------------------- processes


def _rss(pid: int) -> tuple[int, int]:
    """(resident bytes, anonymous resident bytes) of a process; anon is 0 where unknown."""
    fields: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in {"VmRSS", "RssAnon"}:
                fields[name] = int(value.split()[0]) * 1024
    if "VmRSS" in fields:
        return fields["VmRSS"], fields.get("RssAnon", 0)
    ps = subprocess.run(  # noqa: S603 - macOS has no /proc
        ["ps", "-o", "rss=", "-p", str(pid)],  # noqa: S607 - ps is on every PATH
        capture_output=True,
        text=True,
        check=False,
        timeout=5,
    )
    return int(ps.stdout.strip() or 0) * 1024, 0


class Daemon:
    """One `mented` process of the benchmark's own, on its own socket and data directory."""

    def __init__(self, root: Path, name: str, config: Path) -> None:
        self.socket = root / f"{name}.sock"
        self.data_dir = root / name
        self.config = config
        self.log_path = root / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start the daemon; the seconds from spawn to the first answered status request.

        Raises:
            BenchError: it exited or did not answer within `START_TIMEOUT_S`.
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
            self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env
            )
        deadline = started + START_TIMEOUT_S
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
        code = f"from mented_client.bench import serve_echo; serve_echo({str(self.socket)!r}, "
        code += f"{self.kind!r})"
        self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-c", code], stdin=subprocess.DEVNULL
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
                while connection.recv(_RECV_SIZE):  # every request is one small frame
                    connection.sendall(_ECHO_REPLY)
    import trio  # noqa: PLC0415 - only this server needs it

    async def answer(sock: trio.socket.SocketType) -> None:
        stream = trio.SocketStream(sock)
        with sock:
            while True:
                with trio.move_on_after(60):
                    request = await stream.receive_some(_RECV_SIZE)
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


# ---------------------------------------------------------------------- helpers


def _timed(call: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> int:
    """Nanoseconds that `call(*args, **kwargs)` took."""
    started = time.perf_counter_ns()
    call(*args, **kwargs)
    return time.perf_counter_ns() - started


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
    event = msgspec.Raw(_event(command, tool_use_id))
    return encode(HookRequest(agent=AGENT, event=event))


def _load_store(
    data_dir: Path, items: Iterator[StoreItem], *, total: int, batch: int, progress: Progress
) -> float:
    """Write `items` with `Store.store_many`, `batch` per transaction; the seconds spent."""
    spent = 0.0
    done = 0
    step = max(total // 10, 1)
    next_report = step
    store = Store(data_dir)
    try:
        while done < total:
            chunk = [next(items) for _ in range(min(batch, total - done))]
            started = time.perf_counter()
            store.store_many(chunk)
            spent += time.perf_counter() - started
            done += len(chunk)
            if done >= next_report or done == total:
                rate = done / spent if spent else 0.0
                progress(f"  {done:,} of {total:,} memories ({rate:,.0f}/s)")
                next_report = done + step
    finally:
        store.close()
    return spent


# -------------------------------------------------------------------- 1. matcher


def time_matcher(corpus: Sequence[str], rounds: int) -> tuple[dict[str, list[int]], list[int]]:
    """Nanoseconds per call of the matcher over `rounds` passes of `corpus`, commands interleaved.

    Returns:
        Each command's timings parsed afresh (cache miss), and all timings from the cache (hit).
    """
    table = load_action_table(Config())
    uncached = Matcher(table, cache_bytes=0)
    cached = Matcher(table)
    for command in corpus:  # first calls compile regexes and fill the cache: not counted
        uncached.actions_in(command)
        cached.actions_in(command)
    misses: dict[str, list[int]] = {command: [] for command in corpus}
    hits: list[int] = []
    gc.collect()
    for _ in range(rounds):
        for command in corpus:
            misses[command].append(_timed(uncached.actions_in, command))
            hits.append(_timed(cached.actions_in, command))
    return misses, hits


def bench_matcher(plan: Plan, corpus: Sequence[str] = CORPUS) -> MatcherSection:
    """The matcher alone: every corpus command parsed afresh (miss) and from the cache (hit).

    bench/bench_matcher.py runs the same measurement (`time_matcher`) over this corpus and
    the matcher's acceptance rows, command by command, for work on the matcher itself.
    """
    misses, hits = time_matcher(corpus, plan.matcher_rounds)
    short = [command for command in corpus if len(command.encode()) < 1024]
    long = [command for command in corpus if len(command.encode()) >= 1024]
    slowest = max(short, key=lambda command: summarize(misses[command]).p50_us)
    return MatcherSection(
        commands=len(corpus),
        under_1k=len(short),
        miss=summarize([took for command in short for took in misses[command]]),
        hit=summarize(hits),
        over_1k=len(long),
        miss_over_1k=(
            summarize([took for command in long for took in misses[command]]) if long else None
        ),
        heredoc_miss_us=summarize(misses.get(HEREDOC_COMMIT) or misses[short[0]]).p50_us,
        slowest_under_1k=slowest,
        slowest_miss_us=summarize(misses[slowest]).p50_us,
    )


# ----------------------------------------------------------------------- 2. hook


def _hook_store(data_dir: Path) -> None:
    """A small, realistic store: 6 commit rules, a few for other actions, other memories."""
    items = [
        StoreItem(content=_rule_text(n, "git-commit"), tags=("trigger:git-commit",))
        for n in range(RULES_PER_REPLY)
    ]
    items += [
        StoreItem(content=_rule_text(n, action), tags=(f"trigger:{action}",))
        for action in ("git-push", "pr-create", "git-push-force")
        for n in range(3)
    ]
    items += [
        StoreItem(
            content=f"The staging database is db-{n}.internal; use read replicas for reports."
        )
        for n in range(200)
    ]
    store = Store(data_dir)
    try:
        store.store_many(items)
    finally:
        store.close()


def install_hook(root: Path, socket_path: Path) -> str:
    """Install the Claude Code hook the way a user does; the command line it wrote.

    Runs `mentectl hooks install claude-code --settings FILE` as a process, with the
    benchmark's socket in the environment (it becomes the command line's fallback
    socket argument), and reads the command back from the settings file.
    """
    settings = root / "settings.json"
    home = root / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MENTED_", "XDG_"))}
    env.update(HOME=str(home), MENTED_SOCKET=str(socket_path))
    done = subprocess.run(  # noqa: S603 - our own interpreter and module
        [
            sys.executable,
            "-m",
            "mented_client.cli",
            "hooks",
            "install",
            "claude-code",
            "--settings",
            str(settings),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        raise BenchError(f"mentectl hooks install failed: {done.stderr or done.stdout}")
    document = json.loads(settings.read_text())
    for group in document.get("hooks", {}).get("PreToolUse", []):
        for hook in group.get("hooks", []):
            if "shim.py" in hook.get("command", ""):
                return str(hook["command"])
    raise BenchError(f"no mented hook in {settings} after installing it")


def _spawn(argv: Sequence[str], stdin: bytes, env: dict[str, str]) -> tuple[int, bytes]:
    """Run `argv` with `stdin`; (nanoseconds from spawn to exit, stdout)."""
    started = time.perf_counter_ns()
    done = subprocess.run(  # noqa: S603 - the installed hook or the bare interpreter
        argv, input=stdin, capture_output=True, env=env, check=False, timeout=30
    )
    took = time.perf_counter_ns() - started
    if done.returncode != 0:
        raise BenchError(f"{shlex.join(argv)} exited {done.returncode}: {done.stderr!r}")
    return took, done.stdout


def _has_commit_rules(stdout: bytes) -> bool:
    """Whether the hook handed the agent every commit rule of `_hook_store`."""
    text = text_of_answer(stdout)
    return text is not None and all(
        _rule_text(n, "git-commit") in text for n in range(RULES_PER_REPLY)
    )


@dataclass(frozen=True)
class _SpawnCase:
    name: str
    command: str  # the shell command in the event ("" for the bare interpreter)
    daemon_up: bool
    expect_output: bool


HOOK_CASES = (
    _SpawnCase(
        "no match", "ls -la src/ && git status --short", daemon_up=True, expect_output=False
    ),
    _SpawnCase(
        "commit, 6 rules",
        "git commit -m 'fix: handle an empty config file'",
        daemon_up=True,
        expect_output=True,
    ),
    _SpawnCase("heredoc commit", HEREDOC_COMMIT, daemon_up=True, expect_output=True),
    _SpawnCase(
        "daemon down",
        "git commit -m 'fix: handle an empty config file'",
        daemon_up=False,
        expect_output=False,
    ),
)


def bench_hook(plan: Plan, root: Path, daemon: Daemon, progress: Progress) -> HookSection:
    """Spawn the installed hook and the bare interpreter, interleaved, in shuffled order."""
    command_line = install_hook(root, daemon.socket)
    hook_argv = shlex.split(command_line)
    # The same binary the hook runs, so the difference is the shim and nothing else.
    bare_argv = [hook_argv[0], "-I", "-S", "-c", "pass"]
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("MENTED_", "PYTHON"))}
    # No $MENTED_SOCKET: the installed command line's socket argument finds the daemon.
    # With it pointing at nothing, the hook meets a daemon that is down.
    down_env = {**base_env, "MENTED_SOCKET": str(root / "down" / "mented.sock")}
    samples: dict[str, list[int]] = {"bare": []}
    outputs: dict[str, int] = {}
    for case in HOOK_CASES:
        samples[case.name] = []
    for case in HOOK_CASES:  # warm the daemon's caches and the page cache; not counted
        _spawn(hook_argv, _event(case.command, "toolu_warmup", f"warmup-{case.name}"), base_env)
    rng = random.Random(6)  # noqa: S311 - order shuffling, not cryptography
    runs: list[_SpawnCase | None] = [None, *HOOK_CASES]  # None: the bare interpreter
    for index in range(plan.hook_rounds):
        # A new tool_use_id each round: the daemon answers a repeated event only once.
        event_id = f"toolu_bench_{index:06d}"
        rng.shuffle(runs)
        for run in runs:
            if run is None:  # the same stdin as the hook gets, unread
                took, _ = _spawn(bare_argv, _event(HOOK_CASES[1].command, event_id), base_env)
                samples["bare"].append(took)
                continue
            event = _event(run.command, event_id, session=f"bench-{event_id}-{run.name}")
            took, out = _spawn(hook_argv, event, base_env if run.daemon_up else down_env)
            if _has_commit_rules(out) != run.expect_output or (out and not run.expect_output):
                wanted = f"all {RULES_PER_REPLY} rules" if run.expect_output else "silence"
                raise BenchError(
                    f"hook case {run.name!r}: expected {wanted} on stdout, got {out[:200]!r}"
                )
            samples[run.name].append(took)
            outputs[run.name] = len(out)
        if (index + 1) % max(plan.hook_rounds // 5, 1) == 0:
            progress(f"  hook: {index + 1} of {plan.hook_rounds} rounds")
    bare = summarize(samples["bare"])
    cases = []
    for case in HOOK_CASES:
        summary = summarize(samples[case.name])
        cases.append(
            HookCase(
                name=case.name,
                command=case.command,
                daemon_up=case.daemon_up,
                stdout_bytes=outputs.get(case.name, 0),
                time=summary,
                ratio=summary.p50_us / bare.p50_us,
            )
        )
    return HookSection(
        command_line=command_line,
        baseline=shlex.join(bare_argv),
        rounds=plan.hook_rounds,
        bare=bare,
        cases=cases,
    )


# --------------------------------------------------------------- 3. hook request


def _fire_latencies(socket_path: Path, count: int) -> list[float]:
    """The daemon's own handling time (µs) of its last `count` hook fires, oldest first."""
    with Client(socket_path) as client:
        fires = client.expect(LogRequest(n=count), LogReply).fires
    return [fire.latency_us for fire in reversed(fires)]


def bench_hook_request(
    plan: Plan, daemon: Daemon, floors: Sequence[EchoServer]
) -> HookRequestSection:
    """Full hook requests, one connection each: a new command (cold) and a known one (warm).

    The echo servers are asked the same way in the same loop: the floor under the figure.
    """
    warm_command = "git commit -m 'fix: handle an empty config file'"
    one_shot(daemon.socket, hook_frame(warm_command, "toolu_warmup"))
    cold: list[int] = []
    warm: list[int] = []
    floor_samples: list[list[int]] = [[] for _ in floors]
    daemon_cold: list[float] = []
    daemon_warm: list[float] = []
    # The fire log holds the last 500 fires: read it back every 200 pairs.
    block = 200
    for start in range(0, plan.hook_requests, block):
        pairs = min(block, plan.hook_requests - start)
        for index in range(start, start + pairs):
            # A command the matcher has never seen, of the same shape as the warm one.
            cold_frame = hook_frame(
                f"git commit -m 'fix: case {index} of {plan.hook_requests}'", f"toolu_cold_{index}"
            )
            warm_frame = hook_frame(warm_command, f"toolu_warm_{index}")
            cold_started = time.perf_counter_ns()
            cold_reply = one_shot(daemon.socket, cold_frame)
            cold.append(time.perf_counter_ns() - cold_started)
            warm_started = time.perf_counter_ns()
            warm_reply = one_shot(daemon.socket, warm_frame)
            warm.append(time.perf_counter_ns() - warm_started)
            for floor, samples in zip(floors, floor_samples, strict=True):
                floor_started = time.perf_counter_ns()
                one_shot(floor.socket, warm_frame)
                samples.append(time.perf_counter_ns() - floor_started)
            if not (_has_commit_rules(cold_reply) and _has_commit_rules(warm_reply)):
                raise BenchError(
                    f"a hook request for a commit did not get its {RULES_PER_REPLY} rules: "
                    f"{cold_reply[:200]!r}, {warm_reply[:200]!r}"
                )
        latencies = _fire_latencies(daemon.socket, 2 * pairs)
        daemon_cold.extend(latencies[0::2])
        daemon_warm.extend(latencies[1::2])
    return HookRequestSection(
        rules=RULES_PER_REPLY,
        cold=summarize(cold),
        warm=summarize(warm),
        daemon_cold=summarize([round(us * _NS_PER_US) for us in daemon_cold]),
        daemon_warm=summarize([round(us * _NS_PER_US) for us in daemon_warm]),
        floor_trio=summarize(floor_samples[FLOOR_KINDS.index("trio")]),
        floor_plain=summarize(floor_samples[FLOOR_KINDS.index("plain")]),
    )


# --------------------------------------------------------------- 4. concurrency


class _HookClient:
    """One concurrent client: its requests, sent one connection each, and their times."""

    def __init__(self, socket_path: Path, requests: list[bytes]) -> None:
        self.socket_path = socket_path
        self.requests = requests
        self.samples: list[int] = []
        self.error: BaseException | None = None

    def run(self, barrier: threading.Barrier) -> None:
        try:
            barrier.wait()
            for request in self.requests:
                started = time.perf_counter_ns()
                one_shot(self.socket_path, request)
                self.samples.append(time.perf_counter_ns() - started)
        except BaseException as exc:  # noqa: BLE001 - the main thread reports it
            self.error = exc


def bench_concurrency(plan: Plan, daemon: Daemon, progress: Progress) -> list[ConcurrencyLevel]:
    """`clients` threads at once, each sending hook requests on a new connection each."""
    levels = []
    command = "git commit -m 'fix: handle an empty config file'"
    for clients in plan.concurrency:
        per_client = max(plan.concurrent_requests // clients, 1)
        frames = [
            [hook_frame(command, f"toolu_c{clients}_{c}_{i}") for i in range(per_client)]
            for c in range(clients)
        ]
        workers = [_HookClient(daemon.socket, requests) for requests in frames]
        barrier = threading.Barrier(clients + 1)
        threads = [threading.Thread(target=worker.run, args=(barrier,)) for worker in workers]
        for thread in threads:
            thread.start()
        barrier.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        failed = next((worker.error for worker in workers if worker.error), None)
        if failed is not None:
            raise BenchError(f"{clients} concurrent clients: {failed!r}")
        samples = [took for worker in workers for took in worker.samples]
        levels.append(
            ConcurrencyLevel(
                clients=clients,
                requests=len(samples),
                per_second=len(samples) / elapsed,
                time=summarize(samples),
            )
        )
        progress(f"  concurrency: {clients} clients, {len(samples) / elapsed:,.0f} requests/s")
    return levels


# -------------------------------------------------------------------- 5. writes


SESSION_COMMITS = (1, 10)


def bench_session_cost(root: Path) -> list[SessionCost]:
    """Sessions of 1 and 10 commits with RULES_PER_REPLY commit rules, in process.

    The daemon's own hook handler on the default configuration, as Claude Code
    drives it: a stopped command is run again at once. Counts mented's text in
    what the model is handed; docs/agents-e2e.md measures the same with the
    real agents, wrapping included.
    """
    data_dir = root / "session-cost"
    store = Store(data_dir, sync=False)
    sessions = SessionMemory(data_dir / "sessions", ttl_s=3600)
    try:
        for number in range(RULES_PER_REPLY):
            store.store(
                _rule_text(number, "git-commit"),
                memory_type=MemoryType.PROCEDURAL,
                tags=[trigger_tag("git-commit")],
            )
        config = Config()
        handler = HookHandler(store, Matcher(load_action_table(config)), config, sessions)
        return [_session_cost(handler, commits) for commits in SESSION_COMMITS]
    finally:
        sessions.close()
        store.close()


def _session_cost(handler: HookHandler, commits: int) -> SessionCost:
    chars = full_chars = full_texts = stops = 0
    calls = 0
    for number in range(commits):
        command = f'git commit -m "fix: change {number}"'
        while True:  # the command, and its retry when it was stopped
            calls += 1
            out = handler.handle(
                "claude-code", _event(command, f"toolu_{calls}", session=f"cost-{commits}")
            )
            text = text_of_answer(out) or ""
            chars += len(text)
            if all(_rule_text(n, "git-commit") in text for n in range(RULES_PER_REPLY)):
                full_texts += 1
                full_chars = len(text)
            if b'"permissionDecision":"deny"' not in out:
                break
            stops += 1
    return SessionCost(
        commits=commits,
        rules=RULES_PER_REPLY,
        chars=chars,
        full_chars=full_chars,
        full_texts=full_texts,
        stops=stops,
    )


def bench_durable_adds(plan: Plan, daemon: Daemon) -> tuple[Summary, float]:
    """Single rule adds through the daemon, each committed with fsync before the reply."""
    samples = []
    with Client(daemon.socket) as client:
        started = time.perf_counter()
        for number in range(plan.durable_writes):
            request = StoreRequest(
                content=_rule_text(number, "release-create"),
                tags=["trigger:release-create"],
            )
            samples.append(_timed(client.expect, request, StoredReply))
        elapsed = time.perf_counter() - started
    return summarize(samples), plan.durable_writes / elapsed


# --------------------------------------------------------------- 6./7. scaling


def _action_name(number: int) -> str:
    return f"bench-action-{number:04d}"


def _scaling_items(actions: int, probes: int) -> Iterator[StoreItem]:
    """Rules without end: first 6 for each probed action, then spread over all `actions`.

    Every probed action has at least 6 rules at every size, so a lookup returns
    the same number of rules whatever the store's size: only the size differs.
    """
    number = 0
    for probe in range(probes):
        for _ in range(RULES_PER_REPLY):
            action = _action_name(probe)
            yield StoreItem(content=_rule_text(number, action), tags=(f"trigger:{action}",))
            number += 1
    while True:
        action = _action_name(number % actions)
        yield StoreItem(content=_rule_text(number, action), tags=(f"trigger:{action}",))
        number += 1


def _probes(plan: Plan) -> int:
    return max(1, min(100, min(plan.sizes) // (2 * RULES_PER_REPLY)))


def _in_process_recall(data_dir: Path, probes: int, requests: int) -> Summary:
    """`Store.recall_for_action` in this process, one store at a time, as a daemon has it."""
    rng = random.Random(7)  # noqa: S311 - which action to ask for, not cryptography
    store = Store(data_dir)
    try:
        for probe in range(probes):  # touch each probed action's pages once; not counted
            store.recall_for_action(_action_name(probe), agent=AGENT, cwd=CWD)
        recall = store.recall_for_action
        samples = [
            _timed(
                recall, _action_name(rng.randrange(probes)), agent=AGENT, cwd=CWD, k=RULES_PER_REPLY
            )
            for _ in range(requests)
        ]
    finally:
        store.close()
    return summarize(samples)


@dataclass
class _ScaledStore:
    size: int
    daemon: Daemon
    load_s: float = 0.0
    in_process: Summary | None = None
    cold_starts: list[int] | None = None


def bench_scaling(
    plan: Plan, root: Path, config: Path, floors: Sequence[EchoServer], progress: Progress
) -> tuple[list[RecallSize], list[Floor], list[MemorySize], int, float]:
    """Fill one store per size, start their daemons, then ask them (and the floors) in turn.

    Returns:
        (recall per size, the floors, memory per size, memories bulk-imported, seconds
        the import took).
    """
    probes = _probes(plan)
    stores = [_ScaledStore(size, Daemon(root, f"s{size}", config)) for size in plan.sizes]
    try:
        for entry in stores:
            items = _scaling_items(plan.actions, probes)
            progress(f"loading {entry.size:,} memories over {plan.actions:,} actions")
            entry.load_s = _load_store(
                entry.daemon.data_dir,
                items,
                total=entry.size,
                batch=plan.load_batch,
                progress=progress,
            )
        progress("recall in-process, each size")
        # After all the loading, and twice over: the first pass, whose first store came
        # out slower than the same store measured again, only warms this process up.
        for _ in range(2):
            for entry in stores:
                entry.in_process = _in_process_recall(
                    entry.daemon.data_dir, probes, plan.recall_requests
                )
        progress("starting the daemons (cold start to ready)")
        for rep in range(plan.cold_starts):
            for entry in stores:
                took = entry.daemon.start()
                entry.cold_starts = [*(entry.cold_starts or []), round(took * 1e9)]
                if rep + 1 < plan.cold_starts:
                    entry.daemon.stop()
        progress(f"recall: {plan.recall_requests:,} requests per size, sizes in turn")
        servers = [(entry.daemon.socket, entry.daemon.pid) for entry in stores]
        servers += [(floor.socket, floor.pid) for floor in floors]
        by_place = _interleaved_recall(plan, servers, probes, checked=len(stores))
        first, *others = by_place.values()
        across = others[0] if others else None
        recall_floors = [
            Floor(
                name=floor.kind,
                round_trip=summarize(first[slot]),
                round_trip_two_cores=None if across is None else summarize(across[slot]),
            )
            for slot, floor in enumerate(floors, start=len(stores))
        ]
        recall, memory = [], []
        smallest = summarize(first[0]).p50_us
        for slot, entry in enumerate(stores):
            summary = summarize(first[slot])
            assert entry.in_process is not None
            assert entry.cold_starts is not None
            recall.append(
                RecallSize(
                    memories=entry.size,
                    actions=min(plan.actions, max(probes, entry.size)),
                    round_trip=summary,
                    round_trip_two_cores=None if across is None else summarize(across[slot]),
                    requests_per_s=1e6 / summary.mean_us,
                    in_process=entry.in_process,
                    ratio_to_smallest=summary.p50_us / smallest,
                )
            )
            rss, anon = _rss(entry.daemon.pid)
            with Client(entry.daemon.socket) as client:
                status = client.expect(StatusRequest(), StatusReply)
            memory.append(
                MemorySize(
                    memories=status.memories,
                    rss_bytes=rss,
                    anon_bytes=anon,
                    db_bytes=status.db_bytes,
                    cold_start=summarize(entry.cold_starts),
                )
            )
    finally:
        for entry in stores:
            entry.daemon.stop()
    imported = sum(entry.size for entry in stores)
    return recall, recall_floors, memory, imported, sum(entry.load_s for entry in stores)


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


def _pin(pid: int, cpus: frozenset[int] | None) -> None:
    """Move every thread of process `pid` (0: this one) to `cpus`."""
    if cpus is None:
        return
    tasks = Path(f"/proc/{pid or os.getpid()}/task")
    threads = [int(task.name) for task in tasks.iterdir()] if tasks.is_dir() else [pid]
    for thread in threads:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(thread, cpus)


def _interleaved_recall(
    plan: Plan, servers: Sequence[tuple[Path, int]], probes: int, *, checked: int
) -> dict[str, list[list[int]]]:
    """Round trips on one persistent connection per server, a block of requests to each in turn.

    `servers` are (socket, pid); the first `checked` are daemons, whose answer is checked
    once to hold the rules. One placement after the other (moving processes between
    cores costs their caches), and within one, sizes and floors side by side. Blocks,
    not single requests: a daemon left idle while the others answer would be measured
    waking up, not looking up.

    Returns:
        Per placement name, the samples of each server.
    """
    rng = random.Random(8)  # noqa: S311 - which action to ask for, not cryptography
    where = placements()
    original = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    clients = [Client(path) for path, _ in servers]
    samples: dict[str, list[list[int]]] = {place.name: [[] for _ in servers] for place in where}
    frames = [
        encode(RecallRequest(action=_action_name(probe), agent=AGENT, cwd=CWD, k=RULES_PER_REPLY))
        for probe in range(probes)
    ]
    order = list(range(len(servers)))
    try:
        for client in clients[:checked]:  # connect, and check each answers with the rules
            reply = msgspec.json.decode(client.roundtrip(frames[0]))
            if len(reply.get("memories", ())) != RULES_PER_REPLY:
                raise BenchError(f"recall returned {reply!r:.200}, not {RULES_PER_REPLY} rules")
        for place in where:
            _pin(0, place.client)
            for _, pid in servers:
                _pin(pid, place.servers)
            for start in range(0, plan.recall_requests, RECALL_BLOCK):
                count = min(RECALL_BLOCK, plan.recall_requests - start)
                block = [frames[rng.randrange(probes)] for _ in range(count)]
                rng.shuffle(order)
                for slot in order:
                    roundtrip, times = clients[slot].roundtrip, samples[place.name][slot]
                    for request in block:
                        started = time.perf_counter_ns()
                        roundtrip(request)
                        times.append(time.perf_counter_ns() - started)
    finally:
        for client in clients:
            client.close()
        if original is not None:
            os.sched_setaffinity(0, original)
    return samples


# ----------------------------------------------------------------------- run all


def _targets(result: BenchResult) -> list[Target]:
    targets = [
        Target(
            figure=f"hook, {case.name}",
            target="median <= 1.3x bare interpreter",
            measured=f"{case.ratio:.2f}x ({case.time.p50_us / 1000:.1f} ms vs "
            f"{result.hook.bare.p50_us / 1000:.1f} ms)",
            met=case.ratio <= 1.3,
        )
        for case in result.hook.cases
    ]
    # One row per placement: the target is scored on each, the kinder one included
    # but not alone (a cross-core wake-up costs this kind of VM tens of microseconds).
    for size in result.recall:
        measured = [size.round_trip, size.round_trip_two_cores]
        for place, summary in zip(result.recall_placements, measured, strict=False):
            if summary is None:
                continue
            targets.append(
                Target(
                    figure=f"recall p50, {size.memories:,} memories, {place}",
                    target="< 100 us",
                    measured=f"{summary.p50_us:.0f} us",
                    met=summary.p50_us < 100,
                )
            )
    largest, smallest = result.recall[-1], result.recall[0]
    targets.append(
        Target(
            figure=f"recall p50, {largest.memories:,} vs {smallest.memories:,}",
            target="<= 1.5x",
            measured=f"{largest.ratio_to_smallest:.2f}x",
            met=largest.ratio_to_smallest <= 1.5,
        )
    )
    request = result.hook_request
    targets += [
        Target(
            figure="hook request p50, matcher cache cold",
            target="< 1 ms",
            measured=f"{request.cold.p50_us:.0f} us",
            met=request.cold.p50_us < 1000,
        ),
        Target(
            figure="hook request p50, matcher cache warm",
            target="< 400 us",
            measured=f"{request.warm.p50_us:.0f} us",
            met=request.warm.p50_us < 400,
        ),
        Target(
            figure="matcher cache miss median, commands < 1 KiB",
            target="< 1 ms",
            measured=f"{result.matcher.miss.p50_us:.0f} us",
            met=result.matcher.miss.p50_us < 1000,
        ),
    ]
    for cost in result.session_cost:
        goal = cost.full_chars + (cost.commits - 1) * MAX_POINTER_CHARS
        targets.append(
            Target(
                figure=f"mented text, session of {cost.commits} commits, {cost.rules} rules",
                target=f"<= 1 full text + {cost.commits - 1} x {MAX_POINTER_CHARS} characters; "
                "one stop",
                measured=f"{cost.chars:,} characters ({cost.full_texts} full text of "
                f"{cost.full_chars:,}), {cost.stops} stop",
                met=cost.chars <= goal and cost.full_texts == 1 and cost.stops == 1,
            )
        )
    return targets


def run(plan: Plan, *, command: str = "mentectl bench", progress: Progress = print) -> BenchResult:
    """Run every benchmark of `plan` against daemons of its own; the figures.

    Raises:
        BenchError: a daemon would not start, or a phase gave a wrong answer.
    """
    started_at = dt.datetime.now(dt.UTC)
    started = time.perf_counter()
    machine = describe_machine()
    root = Path(tempfile.mkdtemp(prefix="mb-", dir="/tmp"))
    try:
        config = root / "config.toml"
        # Built-in actions and default settings: a user's config must not change the figures.
        config.write_text("# mentectl bench: built-in defaults\n")
        progress(f"matcher: {len(CORPUS)} commands, {plan.matcher_rounds} rounds")
        matcher = bench_matcher(plan)
        progress(f"session cost: sessions of {' and '.join(map(str, SESSION_COMMITS))} commits")
        session_cost = bench_session_cost(root)
        floors = [EchoServer(root, kind) for kind in FLOOR_KINDS]
        daemon = Daemon(root, "hook", config)
        _hook_store(daemon.data_dir)
        try:
            for floor in floors:
                floor.start()
            daemon.start()
            progress(f"hook: {plan.hook_rounds} rounds of {len(HOOK_CASES) + 1} processes")
            hook = bench_hook(plan, root, daemon, progress)
            progress(f"hook request: {plan.hook_requests:,} cold and warm, interleaved")
            hook_request = bench_hook_request(plan, daemon, floors)
            progress(f"concurrency: {', '.join(map(str, plan.concurrency))} clients")
            concurrency = bench_concurrency(plan, daemon, progress)
            progress(f"writes: {plan.durable_writes} durable adds")
            durable, durable_per_s = bench_durable_adds(plan, daemon)
            daemon.stop()
            recall, recall_floors, memory, imported, import_s = bench_scaling(
                plan, root, config, floors, progress
            )
        finally:
            daemon.stop()
            for floor in floors:
                floor.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    machine = msgspec.structs.replace(machine, load_after=_load())
    result = BenchResult(
        mented=__version__,
        plan=plan.name,
        command=command,
        started=started_at.isoformat(timespec="seconds"),
        seconds=0.0,
        machine=machine,
        matcher=matcher,
        hook=hook,
        hook_request=hook_request,
        concurrency=concurrency,
        writes=WritesSection(
            durable_add=durable,
            durable_adds_per_s=durable_per_s,
            bulk_memories=imported,
            bulk_seconds=import_s,
            bulk_per_s=imported / import_s,
            bulk_batch=plan.load_batch,
        ),
        recall_placements=[place.name for place in placements()],
        recall=recall,
        recall_floors=recall_floors,
        memory=memory,
        targets=[],
        session_cost=session_cost,
    )
    result.targets = _targets(result)
    result.seconds = time.perf_counter() - started
    return result


# ------------------------------------------------------------------- reporting


def _duration(micros: float) -> str:
    if micros >= 1_000_000:
        return f"{micros / 1_000_000:.2f} s"
    if micros >= 10_000:
        return f"{micros / 1000:.1f} ms"
    if micros >= 1000:
        return f"{micros / 1000:.2f} ms"
    return f"{micros:.0f} us"


def _difference(micros: float) -> str:
    """A signed difference of durations: "+1.20 ms", "-80 us"."""
    return ("+" if micros >= 0 else "-") + _duration(abs(micros))


def _bytes(count: int) -> str:
    return f"{count / 1e6:.1f} MB"


@dataclass(frozen=True)
class Row:
    """One line of the results table."""

    section: str
    figure: str
    time: Summary | None
    note: str


def rows(result: BenchResult) -> list[Row]:
    """The results table, one row per figure, grouped by section."""
    hook = result.hook
    table = [
        Row(
            "1. hook, spawn to exit",
            "bare interpreter (-I -S -c pass)",
            hook.bare,
            f"1.00x, {hook.rounds} rounds",
        )
    ]
    table += [
        Row(
            "1. hook, spawn to exit",
            case.name,
            case.time,
            f"{case.ratio:.2f}x, {case.stdout_bytes} bytes out",
        )
        for case in hook.cases
    ]
    recall = "2. recall_for_action, one connection"
    primary, *other = result.recall_placements
    for size in result.recall:
        table.append(
            Row(
                recall,
                f"{size.memories:,} memories, {primary}",
                size.round_trip,
                f"{size.ratio_to_smallest:.2f}x, {size.requests_per_s:,.0f} req/s",
            )
        )
        if size.round_trip_two_cores is not None:
            table.append(
                Row(
                    recall,
                    f"{size.memories:,} memories, {other[0]}",
                    size.round_trip_two_cores,
                    "client and daemon on different cores",
                )
            )
        table.append(
            Row(recall, f"{size.memories:,} memories, in-process", size.in_process, "no socket")
        )
    for floor in result.recall_floors:
        work = "same loop, no work: " + ("trio" if floor.name == "trio" else "the socket")
        table.append(Row(recall, f"floor: {floor.name} echo, {primary}", floor.round_trip, work))
        if floor.round_trip_two_cores is not None:
            table.append(
                Row(
                    recall,
                    f"floor: {floor.name} echo, {other[0]}",
                    floor.round_trip_two_cores,
                    work,
                )
            )
    request = result.hook_request
    table += [
        Row(
            "3. hook request in the daemon",
            "matcher cache cold",
            request.cold,
            f"daemon's part p50 {_duration(request.daemon_cold.p50_us)}",
        ),
        Row(
            "3. hook request in the daemon",
            "matcher cache warm",
            request.warm,
            f"daemon's part p50 {_duration(request.daemon_warm.p50_us)}",
        ),
        Row(
            "3. hook request in the daemon",
            "floor: trio echo server",
            request.floor_trio,
            "same loop, no work: trio",
        ),
        Row(
            "3. hook request in the daemon",
            "floor: plain echo server",
            request.floor_plain,
            "same loop, no work: the socket",
        ),
    ]
    table += [
        Row(
            "4. concurrency, hook requests",
            f"{level.clients} client{'s' if level.clients > 1 else ''}",
            level.time,
            f"{level.per_second:,.0f} req/s",
        )
        for level in result.concurrency
    ]
    writes = result.writes
    table += [
        Row(
            "5. writes",
            "durable single add",
            writes.durable_add,
            f"{writes.durable_adds_per_s:,.0f} adds/s",
        ),
        Row(
            "5. writes",
            "bulk import (store_many)",
            None,
            f"{writes.bulk_per_s:,.0f} memories/s, {writes.bulk_batch:,} per txn",
        ),
    ]
    table += [
        Row(
            "6. daemon memory and start",
            f"{size.memories:,} memories, cold start",
            size.cold_start,
            f"RSS {_bytes(size.rss_bytes)} (anon {_bytes(size.anon_bytes)}), "
            f"db {_bytes(size.db_bytes)}",
        )
        for size in result.memory
    ]
    matcher = result.matcher
    table += [
        Row(
            "7. matcher alone",
            f"cache miss, {matcher.under_1k} commands < 1 KiB",
            matcher.miss,
            f"heredoc commit p50 {_duration(matcher.heredoc_miss_us)}, "
            f"slowest command p50 {_duration(matcher.slowest_miss_us)}",
        ),
    ]
    if matcher.miss_over_1k is not None:
        table.append(
            Row(
                "7. matcher alone",
                f"cache miss, {matcher.over_1k} command{'s' if matcher.over_1k > 1 else ''} "
                ">= 1 KiB",
                matcher.miss_over_1k,
                "a PR body in a heredoc",
            )
        )
    table.append(Row("7. matcher alone", "cache hit", matcher.hit, ""))
    return table


def _cells(row: Row) -> list[str]:
    if row.time is None:
        return [row.figure, "", "", "", "", row.note]
    time = row.time
    return [
        row.figure,
        _duration(time.p50_us),
        _duration(time.p99_us),
        _duration(time.min_us),
        _duration(time.max_us),
        row.note,
    ]


_HEADINGS = ["figure", "p50", "p99", "min", "max", ""]


def format_table(result: BenchResult) -> str:
    """The results as a plain-text table, then the targets, for a terminal."""
    lines = [
        f"mented {result.mented} bench ({result.plan}), {result.seconds:.0f} s: "
        f"{result.machine.cpu}, {result.machine.cores} cores, {result.machine.python}, "
        f"load {result.machine.load_before[0]:.2f} -> {result.machine.load_after[0]:.2f}",
    ]
    body = [_cells(row) for row in rows(result)]
    widths = [max(len(cells[i]) for cells in [_HEADINGS, *body]) for i in range(5)]

    def line(cells: list[str]) -> str:
        text = "  " + cells[0].ljust(widths[0])
        text += "".join(
            "  " + cell.rjust(width) for cell, width in zip(cells[1:5], widths[1:5], strict=True)
        )
        return (text + "  " + cells[5]).rstrip()

    section = ""
    lines.append(line(_HEADINGS))
    for row, cells in zip(rows(result), body, strict=True):
        if row.section != section:
            section = row.section
            lines.append(section)
        lines.append(line(cells))
    lines.append("targets")
    lines.extend(
        f"  {'met ' if target.met else 'MISS'}  {target.figure}: {target.measured} "
        f"(target {target.target})"
        for target in result.targets
    )
    return "\n".join(lines)


def _markdown_table(result: BenchResult) -> list[str]:
    lines = [
        "| figure | p50 | p99 | min | max | |",
        "|---|--:|--:|--:|--:|---|",
    ]
    section = ""
    for row in rows(result):
        if row.section != section:
            section = row.section
            lines.append(f"| **{section}** | | | | | |")
        cells = [cell.replace("|", "\\|") for cell in _cells(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _paragraphs(result: BenchResult) -> list[str]:
    """One paragraph per figure: what bounds it, with this run's numbers."""
    hook = result.hook
    cases = {case.name: case for case in hook.cases}
    no_match, commit = cases["no match"], cases["commit, 6 rules"]
    down = cases["daemon down"]
    recall_small, recall_large = result.recall[0], result.recall[-1]
    floors = {floor.name: floor.round_trip for floor in result.recall_floors}
    request = result.hook_request
    writes = result.writes
    single, busiest = result.concurrency[0], result.concurrency[-1]
    heaps = sorted(size.anon_bytes for size in result.memory)
    memory_small, memory_large = result.memory[0], result.memory[-1]
    matcher = result.matcher
    return [
        "**1. The hook** is bounded by interpreter start. Every shell command the agent "
        f"runs spawns `<real python3> -I -S shim.py`; the bare interpreter alone "
        f"takes {_duration(hook.bare.p50_us)} here, and the hook's median differs from it by "
        f"{_difference(no_match.time.p50_us - hook.bare.p50_us)} for a command that names no "
        f"action and {_difference(commit.time.p50_us - hook.bare.p50_us)} for a commit that "
        f"gets 6 rules ({commit.stdout_bytes} bytes of context). The shim's part is compiling "
        "and running a stdlib-only file (it imports nothing that is not built in; compiling "
        "its source is about a millisecond), reading stdin, one connect/send/receive on the "
        "Unix socket (with a check that the daemon runs as the same user), and the daemon's "
        "answer (section 3); it ends with `os._exit`, skipping "
        "the interpreter shutdown that the bare interpreter goes through, which pays back "
        "part of that. With the daemon down the connect "
        f"fails at once ({_difference(down.time.p50_us - hook.bare.p50_us)}): the agent never "
        "waits for a daemon that is not there. The processes are spawned "
        "directly (no shell); a shell in front adds the same cost to the hook and to the bare "
        "interpreter. The spawns are interleaved in shuffled order, round by round, so "
        "machine noise hits both sides of each ratio alike.",
        "**2. `recall_for_action`** is an LMDB `set_range` on the trigger index and one "
        "`next()` plus a msgpack decode per rule, so it does not grow with the store: "
        f"in-process it takes {_duration(recall_small.in_process.p50_us)} at "
        f"{recall_small.memories:,} memories and {_duration(recall_large.in_process.p50_us)} "
        f"at {recall_large.memories:,} (B-tree depth grows with the logarithm of the size). "
        f"Over the socket ({result.recall_placements[0]}) the same lookup takes "
        f"{_duration(recall_small.round_trip.p50_us)}. "
        "Most of that is not the lookup: in the same loop, a trio echo server that does no "
        f"work answers in {_duration(floors['trio'].p50_us)} and a blocking stdlib one in "
        f"{_duration(floors['plain'].p50_us)}, so trio's scheduling (a task woken per "
        "request, a cancel scope for the idle timeout, a checkpoint per send and receive) "
        "costs more than LMDB does. The daemon's "
        f"{_difference(recall_small.round_trip.p50_us - floors['trio'].p50_us)} over the trio "
        "floor is the lookup itself, decoding the request and encoding 6 memories as JSON "
        "(msgspec: a few microseconds), and the server's own Python per request (framing, "
        "dispatch, the latency figures kept for `mentectl status`). Each size has its own daemon "
        "and they are asked in turn on persistent connections, so the ratio "
        f"({recall_large.ratio_to_smallest:.2f}x from {recall_small.memories:,} to "
        f"{recall_large.memories:,}) is measured side by side. Every probed action has at "
        "least 6 rules at every size, so each reply carries the same 6 rules." + _two_cores(result),
        "**3. A full hook request** pays for a new connection (accept, a new trio task, the "
        "peer-credential check), decoding the agent's event, matching the command, the "
        "lookup and rendering the agent's JSON. The daemon's own part (from its fire log) is "
        f"{_duration(request.daemon_warm.p50_us)} when the matcher has seen the command and "
        f"{_duration(request.daemon_cold.p50_us)} when it has not: the difference is "
        "bashlex parsing the command (section 7). The rest of the "
        f"{_duration(request.warm.p50_us)} (warm) is the connection: a trio echo server asked "
        f"the same way in the same loop takes {_duration(request.floor_trio.p50_us)}, a "
        f"blocking stdlib one {_duration(request.floor_plain.p50_us)}. Accepting a connection "
        "in trio (a new task, registering and unregistering the socket with epoll, waiting "
        "for the client to close) is the largest single cost of a warm hook request.",
        "**4. Concurrency**: one trio thread answers every request, so throughput is bounded "
        "by the daemon's CPU time per request, most of it accepting the connection "
        f"(section 3): {single.per_second:,.0f} requests/s with {single.clients} client, "
        f"{busiest.per_second:,.0f} with {busiest.clients}. More clients add queueing, seen "
        f"in the p99 ({_duration(single.time.p99_us)} with {single.clients} client, "
        f"{_duration(busiest.time.p99_us)} with {busiest.clients}). The clients are threads "
        "of the benchmark process, each opening a connection per request as the shim does; "
        f"on {result.machine.cores} cores they compete with the daemon for the CPU.",
        "**5. Writes**: a single add is acknowledged only after LMDB's commit has been "
        f"flushed to disk (fsync), so its {_duration(writes.durable_add.p50_us)} median is "
        "the disk's flush latency plus a worker-thread hop; it is the figure to watch on "
        "slow disks. A bulk import (`Store.store_many`) pays one flush per transaction of "
        f"{writes.bulk_batch:,} memories and is bounded by validating each memory, msgpack "
        "encoding and the B-tree inserts (record, handle, trigger key, counters): "
        f"{writes.bulk_per_s:,.0f} memories/s.",
        "**6. Memory and start**: the daemon's own heap (anonymous memory: the interpreter, "
        "trio, msgspec, bashlex, the action table) stays at "
        + (
            _bytes(heaps[0])
            if _bytes(heaps[0]) == _bytes(heaps[-1])
            else f"{_bytes(heaps[0])}-{_bytes(heaps[-1])}"
        )
        + " at every size; "
        "the rest of the resident size is LMDB's memory-mapped file, pages the kernel can "
        f"drop and re-read at will ({_bytes(memory_large.rss_bytes)} resident in all with a "
        f"{_bytes(memory_large.db_bytes)} database). Cold start to ready "
        f"({_duration(memory_small.cold_start.p50_us)}) is interpreter start plus imports "
        "(trio, msgspec, lmdb, bashlex, structlog), loading the action table and opening the "
        "store, which does not read the data: it does not grow with the store.",
        "**7. The matcher** parses with bashlex, a pure-Python parser, so a cache miss costs "
        f"{_duration(matcher.miss.p50_us)} at the median over {matcher.under_1k} real agent "
        "commands under 1 KiB, and grows with the command's length"
        + (
            f" ({_duration(matcher.miss_over_1k.p50_us)} for a PR description of "
            f"{len(LONG_PR_CREATE.encode()):,} bytes in a heredoc)"
            if matcher.miss_over_1k is not None
            else ""
        )
        + ". Commands holding what bashlex rejects (a heredoc inside `$(...)`) are first "
        "scanned by the matcher's own lexer, which empties heredoc bodies (they are data), "
        f"and then parsed: a Claude-style heredoc commit takes "
        f"{_duration(matcher.heredoc_miss_us)}. A hit is a dictionary lookup "
        f"({_duration(matcher.hit.p50_us)}): agents repeat commands, and the daemon's matcher "
        "keeps the recent ones.",
    ]


def _two_cores(result: BenchResult) -> str:
    """What moving the client and the daemon to different cores changed, if measured."""
    first, *other = result.recall_placements
    floors = {floor.name: floor for floor in result.recall_floors}
    plain, daemon = floors["plain"], result.recall[0]
    if not other or plain.round_trip_two_cores is None or daemon.round_trip_two_cores is None:
        return ""
    return (
        f" The client and the daemons run pinned to {first} (the figure the targets use), and "
        f"then the same way on {other[0]}: there each request has to wake the other core, "
        "which slows the plain socket echo "
        f"({_duration(plain.round_trip.p50_us)} -> "
        f"{_duration(plain.round_trip_two_cores.p50_us)}) as well as the daemon "
        f"({_duration(daemon.round_trip.p50_us)} -> "
        f"{_duration(daemon.round_trip_two_cores.p50_us)}): how fast a core wakes is the "
        "machine's (power states, a hypervisor), not mented's. Unpinned, the scheduler "
        "picks one placement or the other from run to run."
    )


def _session_cost_section(result: BenchResult) -> list[str]:
    if not result.session_cost:
        return []
    return [
        "## Session cost",
        "",
        "Characters of mented text handed to the model in one agent session, with "
        f"{RULES_PER_REPLY} rules for `git-commit` and the default delivery (the first commit "
        "stopped once with the rules, its retry given nothing, later commits a one-line "
        "pointer). Each stop costs the model one extra turn. Measured in process; "
        "`docs/agents-e2e.md` has the same with the real Claude Code and Codex (and what "
        "the context-only delivery of 0.1 cost: the full text on every commit).",
        "",
        "| commits | mented characters | full texts | stops (extra model turns) |",
        "|--:|--:|--:|--:|",
        *(
            f"| {cost.commits} | {cost.chars:,} | {cost.full_texts} | {cost.stops} |"
            for cost in result.session_cost
        ),
        "",
    ]


def _portable_command_line(command_line: str) -> str:
    """The hook's command line with this machine's paths named by what they are."""
    words = shlex.split(command_line)
    if len(words) < 4:
        return command_line
    named = ["<real python3>", *words[1:3], "<mented_client>/shim.py", *words[4:]]
    if len(named) > 5 and named[5].startswith("/"):
        named[5] = "<socket>"
    return " ".join(named)


def render_markdown(result: BenchResult) -> str:
    """docs/benchmarks.md: the machine, the command, the table, the targets, the reasons."""
    machine = result.machine
    # The load after includes the benchmark's own work: only the load before tells of others.
    loaded = machine.load_before[0] > 0.5 * machine.cores
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by `mentectl bench --markdown`: do not edit the figures by hand. -->",
        "",
        f"Produced by `{result.command}` (mented {result.mented}, plan `{result.plan}`, "
        f"{result.seconds:.0f} s) on {result.started}.",
        "",
        f"- CPU: {machine.cpu}, {machine.cores} cores",
        f"- OS: {machine.os}",
        f"- Python: {machine.python}",
        f"- Load average (1 min) before and after: {machine.load_before[0]:.2f}, "
        f"{machine.load_after[0]:.2f}"
        + (
            " (the machine was busy with other work: absolute times are noisy, the "
            "interleaved ratios much less so)"
            if loaded
            else ""
        ),
        "",
        "Times are medians, p99, min and max over the repetitions, measured on the calling "
        "side. Ratios compare medians measured interleaved in the same loop. Round trips of "
        "tens of microseconds also measure how fast an idle core wakes up (power states, and "
        "in a virtual machine the hypervisor), so between runs they vary more than the ratios "
        "do; the echo-server floors in sections 2 and 3 are measured alongside for that reason.",
        "",
        *_markdown_table(result),
        "",
        "## Targets",
        "",
        "| figure | target | measured | |",
        "|---|---|---|---|",
        *(
            f"| {target.figure} | {target.target} | {target.measured} | "
            f"{'met' if target.met else '**missed**'} |"
            for target in result.targets
        ),
        "",
        *_session_cost_section(result),
        "## What bounds each figure",
        "",
    ]
    for paragraph in _paragraphs(result):
        lines += [paragraph, ""]
    lines += [
        "## Reproduce",
        "",
        "```",
        "mentectl bench                      # the full run: a few minutes on 2 cores",
        "mentectl bench --quick              # under a minute",
        "mentectl bench --out results.json   # the figures as JSON as well",
        "mentectl bench --markdown docs/benchmarks.md",
        "```",
        "",
        f"The hook command line measured: `{_portable_command_line(result.hook.command_line)}`",
        "",
    ]
    return "\n".join(lines)
