"""The trio server: accept connections, read frames, dispatch requests, reply.

`Server.open()` does the synchronous start-up (lock the data directory, read the
config, open the store, bind or adopt the socket) and reports any problem as a
`StartupError` with a message for the user. `Server.serve()` runs until a
signal or a `shutdown` request, then stops accepting, lets requests in flight
finish (up to a grace period), and `Server.close()` releases everything.

A `subscribe` request turns its connection into a stream of events (hook fires,
rule changes, config reloads); `mented.events` queues them, bounded, and drops a
subscriber that falls behind rather than ever making a hook wait.

Reads (lookups, hook requests) run on the trio thread: they take microseconds.
Writes run in a worker thread because a durable commit waits for fsync. Long
store scans (`list`, `history`, a recall of many rules) run in a worker thread
too, one at a time, so that hooks keep their latency while one runs.

What a client can make the daemon hold is bounded by bytes, daemon-wide
(`ServerOptions.held_limit_bytes`, see `_HeldBytes`): a request from its first
partial read until its answer is sent, and an answer the client has not read,
for at most `send_timeout_s`. Past the bound a request is answered `busy`.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import gc
import mmap
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import trio

from mented import __version__
from mented.actions import load_action_table
from mented.activity import ActivityLog, FireFilter, log_reply
from mented.agents import AGENTS, ToolCall
from mented.checks import rule_checks
from mented.compliance import FLUSH_S as COMPLIANCE_FLUSH_S
from mented.compliance import ComplianceRecord, report_row
from mented.compliance import report as compliance_report
from mented.config import Config, ConfigError, load_config
from mented.events import EventHub, SubscribersFullError, Subscription, serve_subscription
from mented.first_answers import HOOK_PREFIX as _HOOK_PREFIX
from mented.first_answers import FirstAnswers, Handover
from mented.first_answers import hook_deadline as _hook_deadline
from mented.git_aliases import NO_ALIASES
from mented.hooks import HookAnswer, HookHandler, decode_event
from mented.listener import (
    DESCRIPTOR_RESERVE,
    MAX_CONNECTIONS,
    ListenerError,
    bind_socket,
    remove_socket_if_ours,
    socket_identity,
)
from mented.lockfile import DataDirBusyError, DataDirLock
from mented.log import log
from mented.looplag import LoopLag
from mented.matcher import Matcher
from mented.memory import PINNED_TAG, InvalidInputError, Memory, new_id
from mented.peercred import is_own_user, peer_pid, peer_uid
from mented.pinned import check_cap, over_cap
from mented.portable import export_store, import_streamed, unknown_action_warnings
from mented.problems import (
    CONFIG_DEFAULTS,
    DATA_DIR_FULL,
    FULL_BELOW_BYTES,
    SESSION_MEMORY,
    Problems,
    config_defaults,
    data_dir_full,
    free_bytes,
    session_memory_unavailable,
)
from mented.process_session import no_peer, with_process_session
from mented.protocol import (
    HEADER,
    MAX_FRAME,
    ActionsReply,
    ActionsRequest,
    ActionSummary,
    ErrorCode,
    ErrorReply,
    ExportedReply,
    ExportRequest,
    FireRecord,
    ForgetRequest,
    ForgottenReply,
    FrameTooLargeError,
    GetRequest,
    HistoryRequest,
    HookRequest,
    ImportedReply,
    ImportRequest,
    ListRequest,
    LogRequest,
    MemoriesReply,
    MemoryReply,
    OkReply,
    Problem,
    RecalledReply,
    RecallFactsRequest,
    RecallRequest,
    ReindexedReply,
    ReindexRequest,
    ReloadRequest,
    Reply,
    ReportRequest,
    Request,
    ShutdownRequest,
    StatusReply,
    StatusRequest,
    StoredReply,
    StoreRequest,
    SubscribedReply,
    SubscribeRequest,
    SupersededReply,
    SupersedeRequest,
    SyncedReply,
    SyncRequest,
    TrustedReply,
    TrustRequest,
    UntrustedProject,
    decode_request,
    encode,
    frame,
)
from mented.service import has_controlling_terminal
from mented.sessions import SessionMemory, SessionMemoryError
from mented.store import (
    ConflictError,
    NotFoundError,
    Store,
    StoreDamagedError,
    StoreError,
    StoreFailedError,
    StoreFullError,
)
from mented.sync import GitSync, SyncError
from mented.team import ProjectRuleError, ProjectRules, RuleLookup
from mented.team_reads import ProjectReads

if TYPE_CHECKING:
    # Imported when the index is first opened (`_open_recall_once`): Tantivy is no
    # part of what the first hook after a start waits for.
    from mented.recall import RebuildSummary, RecallIndex

T = TypeVar("T")

_NO_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_LATENCY_WINDOW = 4096  # requests kept for the p50/p99 in `status`
LAST_FIRE_LOOKBACK = 50  # fires of the record looked at for `status`'s "last rules" at start
# The first read of a request: the whole of most (a hook's event is a few KiB). A
# frame that needs more is read into a buffer of its exact size: read in 64 KiB
# chunks, a flood of such frames left that much more of the heap fragmented.
_RECV_SIZE = 16 * 1024
# An answer up to this size is handed to the kernel in one send (a Unix socket's
# send buffer is ~208 KiB by default); a larger one is counted before it is sent.
_SMALL_REPLY = 64 * 1024
HOOK_SHARE = 8  # one connection slot in this many is kept for hooks alone
# Answers that may hold this many memories come from a scan run off the trio thread.
_SCAN_ABOVE = 256
# While a scan runs, the trio thread waits at most this long for the GIL each time it
# wakes (CPython's default is 5 ms: a hook, which wakes it a few dozen times, took
# 150 ms instead of 20 while a scan of 200,000 memories ran).
_SCAN_SWITCH_INTERVAL_S = 0.0005
_MEMORY_OVERHEAD = 150  # bytes a memory takes in a reply beyond its content, at least
# Give freed buffers back to the system after this much was released (see _HeldBytes).
_TRIM_AFTER = 16 * 1024 * 1024
_BUSY_FRAME = encode(
    ErrorReply(code=ErrorCode.BUSY, message="mented serves too many connections; retry shortly")
)
_BUSY_RECEIVING_FRAME = encode(
    ErrorReply(
        code=ErrorCode.BUSY,
        message="mented is receiving too many large requests at once; retry shortly",
    )
)
_BUSY_SENDING = ErrorReply(
    code=ErrorCode.BUSY,
    message="mented holds too many large answers not yet read; retry shortly",
)
_BUSY_SENDING_FRAME = encode(_BUSY_SENDING)
# How long a request from mentectl (`rule list --cwd`, `explain`) waits for a project read.
_PROJECT_READ_S = 5.0
# CPU a command may take to match on the event loop; a slower one goes to a worker.
# Ordinary commands take 0.1 to 1 ms (docs/benchmarks.md, section 7).
_QUICK_MATCH_S = 0.005
_SLOW_MATCHES = 2  # worker threads matching slow commands at once
_SEARCHES = 2  # worker threads recalling facts at once (the others wait, off the loop)
# How long a thread holding the GIL keeps it from another that wants it (Python's
# default: 5 ms). Shorter, so that the event loop waits less behind a slow match.
_GIL_SWITCH_INTERVAL_S = 0.0005
_SYNC_CHECK_S = 60.0  # with [sync] off, how often to look whether a reload turned it on
_SYNC_SETTLE_S = 2.0  # after a write, wait this long for more before syncing them together
_RECALL_IDLE_S = 30.0  # the recall index lets go of Tantivy after this long unused
_RECALL_OPEN_AFTER_S = 1.0  # with no request by then, the recall index is opened anyway


class RecallUnavailableError(Exception):
    """Facts cannot be recalled: the index could not be opened (the message says why)."""


# Requests long by design (they walk the store or run git): their time is not the
# latency `status` reports, which is what a hook waits for (issue 23: a 60 s sync
# timeout once read as "p99 60184078 µs").
_UNTIMED = (SyncRequest, ImportRequest, ExportRequest, ReindexRequest)
# Requests that write to the store or read the recall index: they open Tantivy.
_USES_RECALL = (
    StoreRequest,
    SupersedeRequest,
    ForgetRequest,
    ImportRequest,
    SyncRequest,
    RecallFactsRequest,
    ReindexRequest,
)


# Requests that write to the store: one that succeeds shows there is room again.
_WRITES = (StoreRequest, SupersedeRequest, ForgetRequest, ImportRequest)


class ServerBusyError(Exception):
    """Too much is being received at once: this request is refused with `busy`."""


_PREVIOUS_IN_FORCE = "(the previous configuration stays in force)"
_ON_DEFAULTS = (
    "(mented started on the built-in settings instead; fix the file, then `mentectl reload`)"
)


class StartupError(Exception):
    """The daemon cannot start; the message says why and what to do."""


@dataclass(frozen=True, kw_only=True)
class ServerOptions:
    """What the daemon serves and where."""

    socket_path: Path
    data_dir: Path
    config_path: Path | None = None
    # A listening socket handed over by systemd or launchd instead of binding our own.
    inherited_socket: socket.socket | None = None
    connection_idle_s: float | None = None  # None: the config file's value
    request_timeout_s: float = 10.0  # a started frame must be complete within this
    send_timeout_s: float = 10.0  # an answer must be read by the client within this
    shutdown_grace_s: float = 5.0
    # Requests being received or answered and answers not yet read, all connections
    # together (see _HeldBytes).
    held_limit_bytes: int = 64 * 1024 * 1024
    handle_signals: bool = True
    on_ready: Callable[[], None] | None = None
    on_stopping: Callable[[], None] | None = None
    on_reloading: Callable[[], None] | None = None
    on_reloaded: Callable[[str | None], None] | None = None  # gets reload()'s result
    # With an inherited socket: exit after this many seconds without a connection;
    # the service manager keeps the socket and starts a daemon for the next client.
    # None: the config file's `[daemon] idle_timeout_s`; 0: never.
    idle_timeout_s: float | None = None
    # Who started the daemon, for `status` (see mented.service.how_started).
    started_by: str = "unknown"
    # What answered the first hooks before trio was imported: `open` serves on with it.
    first_answers: FirstAnswers | None = None


@dataclass
class _Stats:
    started: float = field(default_factory=time.time)
    requests: int = 0
    latencies_us: deque[float] = field(default_factory=lambda: deque(maxlen=_LATENCY_WINDOW))

    def percentile(self, fraction: float) -> float | None:
        if not self.latencies_us:
            return None
        ordered = sorted(self.latencies_us)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Server:
    """One daemon: the store, the matcher, the hook handler and the socket."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.stats = _Stats()
        self.loop_lag = LoopLag()  # the longest event-loop step, for `status`
        self._lock: DataDirLock | None = None
        self._listen_sock: socket.socket | None = None
        self._socket_identity: tuple[int, int] | None = None
        self._stopping = False
        self._shutdown = trio.Event()
        self._idle_scopes: set[trio.CancelScope] = set()
        self._connections = 0
        self.held = _HeldBytes(options.held_limit_bytes)
        # Subscribers' queued events count against the same bound as requests and answers.
        self.events = EventHub(self.held, grace_s=options.send_timeout_s)
        self._scans = trio.CapacityLimiter(1)  # long store scans, one at a time
        self._last_activity = 0.0  # trio clock: the last connection opened or closed
        self._drained = trio.Event()  # set when the last connection closes during shutdown
        self._max_connections = _connection_limit()
        # Past this many connections, only hooks are served (the rest: `busy`).
        self._open_to_all = self._max_connections - max(1, self._max_connections // HOOK_SHARE)
        self._slow_matches = trio.CapacityLimiter(_SLOW_MATCHES)
        self._searches = trio.CapacityLimiter(_SEARCHES)  # fact recalls, in worker threads
        self.config = Config()
        self.config_error: str | None = None  # why the config on disk is unusable, for `status`
        # Started with an invalid config file: the built-in settings serve until a reload.
        self._on_defaults = False
        self._config_stamp: tuple[int, int] | None = None
        # Fallbacks in force, for `status` (see mented.problems).
        self.problems = Problems()
        self._store_full: str | None = None  # a write found no room: until one works
        # Set when the store became unusable: the daemon stops, and exits non-zero.
        self.store_failure: str | None = None
        self.store: Store
        self.matcher: Matcher
        self.hooks: HookHandler
        self.sessions: SessionMemory | None = None
        self.syncer: GitSync
        self._wake_sync = trio.Event()  # set by writes and reloads: see _sync_by_itself
        self._writes_since_sync = 0
        self.recall: RecallIndex | None = None
        self.recall_error: str | None = None  # why `recall` is None, for `status`
        # Checking the pinned cap and storing the rule are one step: two rules pinned
        # at once must not both pass the check.
        self._pinned_lock = threading.Lock()
        self._recall_used = trio.Event()  # set by each use: see _release_recall_when_idle
        self._recall_opening = trio.Lock()  # see _open_recall_once
        self._recall_tried = False  # opened, or failed to (then `recall_error` says why)
        self._answered = trio.Event()  # set by the first answer sent: see _catch_up_recall
        self._adopted: list[Handover] = []  # connections `first_answers` accepted

    # ---------------------------------------------------------------- start-up

    def open(self) -> None:
        """Lock the data directory, read the config, open the store, bind the socket.

        Raises:
            StartupError: with a message naming what is wrong and what to do.
        """
        opts = self.options
        if opts.first_answers is not None:
            self._take_over(opts.first_answers)
            return
        try:
            self._lock = DataDirLock(opts.data_dir, opts.socket_path)
            self.config, self.matcher = self._load_settings_or_defaults()
            self.store = Store(opts.data_dir)
        except (DataDirBusyError, StoreError) as exc:
            self._release_lock()
            raise StartupError(str(exc)) from exc
        except OSError as exc:  # e.g. a --data-dir that is a file, or not writable
            self._release_lock()
            raise StartupError(
                f"cannot use the data directory {opts.data_dir}: {exc.strerror or exc}; "
                "choose another with --data-dir or MENTED_DATA_DIR"
            ) from exc
        self.sessions = _open_sessions(opts.data_dir, self.config, self.problems)
        self.syncer = GitSync(
            opts.data_dir,
            timeout_s=self.config.sync.timeout_s,
            max_fetch_bytes=self.config.sync.max_fetch_mib << 20,
        )
        # A project's files are read off the event loop, before the lookups that need them.
        self.projects = ProjectRules(opts.data_dir, read_inline=False)
        self.project_reads = ProjectReads(self.projects)
        self.rules = RuleLookup(self.store, self.projects)
        self.activity = ActivityLog(opts.data_dir, self.config.activity)  # `mentectl log`
        self.hooks = HookHandler(
            self.rules,
            self.matcher,
            self.config,
            self.sessions,
            on_fire=self._fired,
            problems=self.problems,
        )
        self.compliance = ComplianceRecord(opts.data_dir)
        self._compliance_waits = trio.Event()
        self.compliance.on_waiting = self._note_compliance_waits
        self.hooks.prechecks.compliance = self.compliance
        try:
            if opts.inherited_socket is not None:
                self._listen_sock = opts.inherited_socket
            else:
                self._listen_sock = bind_socket(opts.socket_path)
                self._socket_identity = socket_identity(opts.socket_path)
        except ListenerError as exc:
            self.store.close()
            self._release_lock()
            raise StartupError(str(exc)) from exc

    def _take_over(self, first: FirstAnswers) -> None:
        """Serve on with what answered the first hooks before trio was imported (the
        same lock, store, session memory, handler and socket), and its connections."""
        opts = self.options
        self._lock, self.store, self.sessions = first.lock, first.store, first.sessions
        self.config, self.matcher = first.config, first.matcher
        self._config_stamp = first.config_stamp
        self.problems, self.projects, self.rules = first.problems, first.projects, first.rules
        self.hooks, self.compliance = first.hooks, first.compliance
        self.syncer = GitSync(
            opts.data_dir,
            timeout_s=self.config.sync.timeout_s,
            max_fetch_bytes=self.config.sync.max_fetch_mib << 20,
        )
        self.project_reads = ProjectReads(self.projects)
        self.activity = ActivityLog(opts.data_dir, self.config.activity)  # `mentectl log`
        first.relay.fires_to(self._fired)  # the first answers' fires recorded too
        self._compliance_waits = trio.Event()
        self.compliance.on_waiting = self._note_compliance_waits
        if first.relay.compliance_waited:
            self._compliance_waits.set()
        self._listen_sock, self._socket_identity = first.listen_sock, first.socket_identity
        self.stats.requests += first.answered
        self.stats.latencies_us.extend(first.latencies_us)
        if first.answered:
            self._answered.set()
        self._adopted = first.take_connections()

    def close(self) -> None:
        """Release the socket, the store and the lock (in that order: a client that
        connects during shutdown finds no socket rather than a half-closed store)."""
        for handover in self._adopted:  # taken over, never served: nothing more to say
            handover.sock.close()
        self._adopted = []
        if self._listen_sock is not None:
            self._listen_sock.close()
            self._listen_sock = None
            if self.options.inherited_socket is None:
                remove_socket_if_ours(self.options.socket_path, self._socket_identity)
        if self.recall is not None:
            self.recall.close()
            self.recall = None
        if hasattr(self, "store"):
            self.store.close()
        if self.sessions is not None:
            self.sessions.close()
            self.sessions = None
        if hasattr(self, "compliance"):
            self.compliance.close()
        if hasattr(self, "activity"):
            self.activity.close()
        self._release_lock()

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # ----------------------------------------------------------------- serving

    async def serve(
        self, *, task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until a signal or a `shutdown` request; then drain and return."""
        assert self._listen_sock is not None, "call open() first"
        sys.setswitchinterval(_GIL_SWITCH_INTERVAL_S)
        listener = trio.socket.from_stdlib_socket(self._listen_sock)
        self.loop_lag.start()
        trio.lowlevel.add_instrument(self.loop_lag)
        try:
            await self._serve(listener, task_status)
        finally:
            trio.lowlevel.remove_instrument(self.loop_lag)

    async def _serve(
        self, listener: trio.socket.SocketType, task_status: trio.TaskStatus[Server]
    ) -> None:
        async with trio.open_nursery() as nursery:
            if self.options.handle_signals:
                await nursery.start(self._watch_signals)
            if self.options.inherited_socket is not None:
                nursery.start_soon(self._exit_when_idle)
            nursery.start_soon(self._sync_by_itself)
            nursery.start_soon(self._catch_up_recall)
            nursery.start_soon(self._release_recall_when_idle)
            nursery.start_soon(self._flush_compliance_soon)
            nursery.start_soon(self.events.fan_out)
            nursery.start_soon(self._recall_last_fire)
            async with trio.open_nursery() as connections:
                adopted, self._adopted = self._adopted, []
                for handover in adopted:  # before any accepted here: they came first
                    self._connections += 1
                    connections.start_soon(
                        self._serve_connection,
                        trio.socket.from_stdlib_socket(handover.sock),
                        handover.pending,
                    )
                connections.start_soon(self._accept_loop, listener, connections)
                log.info(
                    "ready",
                    socket=str(self.options.socket_path),
                    data_dir=str(self.options.data_dir),
                    version=__version__,
                )
                if self.options.on_ready:
                    self.options.on_ready()
                task_status.started(self)
                await self._shutdown.wait()
                log.info("stopping", connections=self._connections)
                if self.options.on_stopping:
                    self.options.on_stopping()
                # Stop accepting, wake idle connections so they close, and give
                # requests in flight the grace period to be answered.
                self._stopping = True
                for scope in list(self._idle_scopes):
                    scope.cancel()
                connections.cancel_scope.deadline = (
                    trio.current_time() + self.options.shutdown_grace_s
                )
                listener.close()
                self._listen_sock = None
                self._forget_listen_socket()
                if self._connections:
                    await self._drained.wait()
                connections.cancel_scope.cancel()
            nursery.cancel_scope.cancel()

    def _forget_listen_socket(self) -> None:
        if self.options.inherited_socket is None:
            remove_socket_if_ours(self.options.socket_path, self._socket_identity)

    def _terminal_closed(self) -> bool:
        """Whether the daemon was started in a terminal that is gone (its hangup's SIGHUP)."""
        return self.options.started_by == "terminal" and not has_controlling_terminal()

    def request_shutdown(self) -> None:
        self._shutdown.set()

    async def _exit_when_idle(self) -> None:
        """Shut down once no client has been connected for the idle timeout."""
        self._last_activity = trio.current_time()
        while True:
            # Read at each turn: a reload may change it. At 0 the watch ends until the
            # next start (no timer wakes an idle laptop for a setting that is off).
            timeout = self.options.idle_timeout_s
            if timeout is None:
                timeout = self.config.daemon.idle_timeout_s
            if timeout <= 0:
                return
            idle_for = trio.current_time() - self._last_activity
            if not self._connections and idle_for >= timeout:
                log.info("idle_exit", idle_timeout_s=timeout)
                self.request_shutdown()
                return
            await trio.sleep(timeout - idle_for if idle_for < timeout else timeout)

    async def _watch_signals(self, *, task_status: trio.TaskStatus[None]) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            task_status.started()
            async for signum in signals:
                if signum == signal.SIGHUP and self._terminal_closed():
                    # Typed in a terminal that has now closed: stop, as a foreground
                    # program does, rather than live on until a write to it fails.
                    _stop_writing_to_the_terminal()
                    log.info("terminal_closed")
                    self.request_shutdown()
                elif signum == signal.SIGHUP:
                    self.reload()
                else:
                    log.info("signal", signal=signal.Signals(signum).name)
                    self.request_shutdown()

    async def _accept_loop(
        self, listener: trio.socket.SocketType, connections: trio.Nursery
    ) -> None:
        # A spare descriptor, given up when the process runs out, so that the
        # connection waiting in the backlog can be accepted and closed cleanly
        # instead of spinning on EMFILE.
        spare: int | None = os.open(os.devnull, os.O_RDONLY)
        exhausted = False  # logged once per episode, not every 10 ms while it lasts
        try:
            while True:
                if spare is None:
                    # Lost in a shortage (another thread, such as the recall index's
                    # reload watcher, took the descriptor it freed): taken back before
                    # the next accept can, or the next shortage would leave the waiting
                    # clients unanswered until one of the served ones leaves.
                    spare = _try_open_spare()
                try:
                    sock, _ = await listener.accept()
                except trio.ClosedResourceError:
                    return  # shutdown closed the listener under us: accepting is over
                except OSError as exc:
                    if exc.errno not in _RESOURCE_ERRNOS:
                        raise
                    if not exhausted:
                        log.warning("accept_failed", error=os.strerror(exc.errno or 0))
                        exhausted = True
                    if spare is not None:
                        os.close(spare)
                        spare = None
                        # Only the connection already waiting: an accept that waited here
                        # would refuse the next client after the shortage ended, and
                        # would not notice shutdown closing the listener.
                        with trio.move_on_after(0.05):
                            try:
                                sock, _ = await listener.accept()
                                sock.close()
                            except trio.ClosedResourceError:
                                return
                            except OSError:
                                pass
                        spare = _try_open_spare()
                    await trio.sleep(0.01)
                    continue
                if exhausted:
                    log.info("accept_recovered")
                    exhausted = False
                if self._connections >= self._max_connections:
                    # Over the limit: say so without waiting (the socket is
                    # non-blocking, the frame small), refuse, keep serving the rest.
                    with contextlib.suppress(OSError):
                        os.write(sock.fileno(), _BUSY_FRAME)
                    sock.close()
                    continue
                self._connections += 1
                self._last_activity = trio.current_time()
                connections.start_soon(self._serve_connection, sock)
        finally:
            if spare is not None:
                os.close(spare)

    async def _serve_connection(self, sock: trio.socket.SocketType, pending: bytes = b"") -> None:
        conn = _Connection(sock)
        conn.pending = pending  # what `first_answers` read of its next request
        try:
            if not is_own_user(sock):
                log.warning("peer_refused", peer_uid=peer_uid(sock))
                return
            first = True  # the first request: whether this connection gets a slot
            while not self._stopping:
                try:
                    body = await self._read_frame(conn)
                except FrameTooLargeError as exc:
                    await self._send_reply(
                        conn, encode(ErrorReply(code=ErrorCode.FRAME_TOO_LARGE, message=str(exc)))
                    )
                    return
                except ServerBusyError:
                    await self._send_reply(conn, _BUSY_RECEIVING_FRAME)
                    return
                if body is None:
                    return
                if (
                    first
                    and self._connections > self._open_to_all
                    and not body.startswith(_HOOK_PREFIX)
                ):
                    # The last slots are the hooks': long-lived clients (subscribers, idle
                    # connections) must never leave an agent's hook without an answer.
                    await self._send_reply(conn, _BUSY_FRAME)
                    return
                first = False
                answering = self._answer_request(conn, body)
                del body  # held by the answer alone, which lets go of it once dispatched
                if not await answering:
                    return
                if conn.subscription is not None:
                    await self._stream_events(conn)
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
            pass  # the client went away, stalled mid-frame or left its answer unread
        except OSError as exc:
            log.debug("connection_error", error=str(exc))
        except Exception:  # noqa: BLE001 - a bug must cost one connection, never the daemon
            # Without this, an exception escaping here (as RecursionError from the
            # decoder once did) ends the connections nursery and with it the daemon.
            log.exception("connection_failed")
        finally:
            self._settle_hook(conn, sent=False)  # an answer whose send failed: read by nobody
            if conn.subscription is not None:  # also when its `subscribed` was never sent
                self.events.unsubscribe(conn.subscription)
            self.held.release(conn)
            self._connections -= 1
            self._last_activity = trio.current_time()
            sock.close()
            if self._stopping and not self._connections:
                self._drained.set()

    async def _answer_request(self, conn: _Connection, body: bytes) -> bool:
        """Dispatch one request and send its answer; whether the connection goes on."""
        started = time.perf_counter()
        conn.untimed = False
        reply = await self._dispatch(body, conn)
        del body  # not held while the client takes its time reading the answer
        self.stats.requests += 1
        if not conn.untimed:
            self.stats.latencies_us.append((time.perf_counter() - started) * 1e6)
        if len(reply) > _SMALL_REPLY:
            reply = self._hold_reply(conn, reply)
            if reply is _BUSY_SENDING_FRAME:  # a hook's answer replaced: not handed over
                self._settle_hook(conn, sent=False)
        sent = await self._send_reply(conn, reply)
        self._settle_hook(conn, sent=sent)
        self._answered.set()
        if not sent:
            return False
        del reply  # not held while the connection waits for its next request
        self.held.release(conn)
        return True

    async def _read_frame(self, conn: _Connection) -> bytes | None:
        """The next frame's body; None at end of stream, idle timeout or shutdown.

        A frame that arrives in one piece (most requests) is taken from the first
        read. One that does not is counted against the daemon-wide bound from then
        until its answer is sent, and read into a buffer of exactly its size.

        Raises:
            FrameTooLargeError: the announced length exceeds MAX_FRAME.
            ServerBusyError: the daemon-wide bound has no room for this frame.
            trio.TooSlowError: a started frame did not complete in time.
        """
        data = conn.pending
        if not data:
            idle = self.options.connection_idle_s
            if idle is None:
                idle = self.config.daemon.connection_idle_s
            with trio.move_on_after(idle) as scope:
                self._idle_scopes.add(scope)
                try:
                    data = await conn.sock.recv(_RECV_SIZE)
                finally:
                    self._idle_scopes.discard(scope)
            if scope.cancelled_caught or not data:
                return None
        end = _frame_end(data)
        if end is not None and len(data) >= end:
            conn.pending = data[end:]
            return data[HEADER.size : end]
        # The frame is incomplete: wait for the rest, under the request timeout.
        # Most requests arrive in one piece and skip this cancel scope: entering
        # and leaving one costs ~10% of a lookup's round trip (docs/benchmarks.md).
        conn.pending = b""
        with trio.fail_after(self.options.request_timeout_s):
            while end is None:  # not even the header yet
                chunk = await conn.sock.recv(_RECV_SIZE)
                if not chunk:
                    return None
                data += chunk
                end = _frame_end(data)
            if len(data) >= end:
                conn.pending = data[end:]
                return data[HEADER.size : end]
            self.held.reserve(conn, end)
            # Read the rest in place: no chunks to join, nothing past this frame. A
            # large frame goes to pages of its own, which cost nothing until its bytes
            # arrive and go back to the system the moment it is read.
            whole: bytearray | mmap.mmap = (
                bytearray(end) if end <= _SMALL_REPLY else mmap.mmap(-1, end)
            )
            try:
                got = len(data)
                whole[:got] = data
                del data
                with memoryview(whole) as view:
                    while got < end:
                        with view[got:] as rest:
                            received = await conn.sock.recv_into(rest)
                        if not received:
                            return None
                        got += received
                    return bytes(view[HEADER.size :])
            finally:
                if isinstance(whole, mmap.mmap):
                    whole.close()

    def _hold_reply(self, conn: _Connection, reply: bytes) -> bytes:
        """Count an answer too large to hand to the kernel at once before it is sent;
        when there is no room, the answer is `busy` instead (and the large one is
        dropped at once: the caller must not keep it)."""
        try:
            self.held.reserve(conn, len(reply) + len(conn.pending))
        except ServerBusyError:
            return _BUSY_SENDING_FRAME
        return reply

    async def _send_reply(self, conn: _Connection, reply: bytes) -> bool:
        """Send one answer whole, or give up on the connection.

        An answer the kernel takes at once costs nothing more. One it does not
        is counted against the daemon-wide bound (with whatever else this
        connection holds) until sent, and must be read within `send_timeout_s`.
        A large answer is counted before it is sent (`_hold_reply`).

        Returns:
            False when the connection should close: the answer could not be held.

        Raises:
            trio.TooSlowError: the client did not read the answer in time.
        """
        view = memoryview(reply)
        sent = await conn.sock.send(view)
        if sent == len(view):
            return True
        if len(reply) <= _SMALL_REPLY:
            try:
                self.held.reserve(conn, len(reply) + len(conn.pending))
            except ServerBusyError:
                log.debug("reply_dropped", bytes=len(reply), reason="no room to hold it")
                return False
        with trio.fail_after(self.options.send_timeout_s):
            while sent < len(view):
                sent += await conn.sock.send(view[sent:])
        return True

    # ---------------------------------------------------------------- requests

    async def _stream_events(self, conn: _Connection) -> None:
        """The rest of a subscribed connection: events until either side ends it.

        No idle timeout (a subscriber waits for events); shutdown ends it like an
        idle connection. Its queue is bounded by `self.events`, not by this task.
        """
        subscription = conn.subscription
        assert subscription is not None
        with trio.CancelScope() as scope:
            self._idle_scopes.add(scope)
            try:
                if not self._stopping:
                    await serve_subscription(subscription, conn.sock)
            finally:
                self._idle_scopes.discard(scope)

    async def _dispatch(self, body: bytes, conn: _Connection) -> bytes:
        """The complete reply frame for one request body (`conn`: whose, for `subscribe`)."""
        received = time.monotonic()
        request = decode_request(body)
        conn.untimed = isinstance(request, _UNTIMED)
        if isinstance(request, HookRequest):
            # The hook's reply is raw stdout bytes; HookHandler never raises. Its shim
            # gives up at its deadline: an answer after that is read by nobody, so the
            # work stops there, and what it would hand over counts only once it was
            # sent in time (`_settle_hook`, after the send).
            deadline = _hook_deadline(request.deadline, received, self.config.hook.budget_ms)
            hook_answer = await self._answer_hook(
                request, deadline, functools.partial(peer_pid, conn.sock)
            )
            if self.store.failure is not None:  # silenced by the hook: noticed here
                self._stop_for_store_failure()
            if time.monotonic() >= deadline:
                hook_answer.dropped()
                return frame(b"")
            conn.hook_answer, conn.hook_deadline = hook_answer, deadline
            return frame(hook_answer.out)
        if isinstance(request, SubscribeRequest):
            return encode(self._subscribe(request, conn))
        if isinstance(request, ErrorReply):
            if body.startswith(_HOOK_PREFIX):
                # A hook envelope around stdin that was not JSON: the shim splices
                # stdin in unparsed, and a hook is answered with silence, never an error.
                return frame(b"")
            return encode(request)
        try:
            reply = await self._answer(request)
        except NotFoundError as exc:
            reply = ErrorReply(code=ErrorCode.NOT_FOUND, message=str(exc))
        except ProjectRuleError as exc:
            reply = ErrorReply(code=ErrorCode.PROJECT_RULE, message=str(exc))
        except ConflictError as exc:
            reply = ErrorReply(code=ErrorCode.CONFLICT, message=str(exc))
        except StoreFullError as exc:
            reply = ErrorReply(code=ErrorCode.STORE_FULL, message=str(exc))
            self._store_full = "the last write to the store found no room"
        except StoreDamagedError as exc:
            reply = ErrorReply(code=ErrorCode.STORE_DAMAGED, message=str(exc))
        except StoreFailedError as exc:
            reply = ErrorReply(code=ErrorCode.STORE_FAILED, message=str(exc))
            self._stop_for_store_failure()
        except SyncError as exc:
            reply = ErrorReply(code=ErrorCode.SYNC_FAILED, message=str(exc))
        except RecallUnavailableError as exc:
            reply = ErrorReply(code=ErrorCode.RECALL_UNAVAILABLE, message=str(exc))
        except (InvalidInputError, StoreError) as exc:
            reply = ErrorReply(code=ErrorCode.INVALID, message=str(exc))
        except OSError as exc:
            reply = self._os_error_reply(request, exc)
        except Exception as exc:  # noqa: BLE001 - a bug must cost one request, never the daemon
            log.exception("request_failed", request=type(request).__name__)
            reply = ErrorReply(code=ErrorCode.INTERNAL, message=f"internal error: {exc!r}")
        else:
            if isinstance(request, _WRITES):
                self._store_full = None  # it wrote: there is room again
        answer = encode(reply)
        if len(answer) - HEADER.size > MAX_FRAME:
            # Clients refuse a frame over MAX_FRAME, as the protocol promises them, so
            # sent whole (a listing of every memory of a big store) it would read as a
            # broken connection. Say what to ask for instead.
            answer = encode(
                ErrorReply(
                    code=ErrorCode.FRAME_TOO_LARGE,
                    message=f"the answer would be {len(answer) - HEADER.size} bytes, over the "
                    f"{MAX_FRAME}-byte frame limit; ask for fewer (a limit, e.g. "
                    "`mentectl rule list -k 100`, or a filter)",
                )
            )
        return answer

    def _os_error_reply(self, request: Request, exc: OSError) -> ErrorReply:
        """A file the request wrote beside the store (a trust record, an export, the
        recall index) failed: a full disk is `store_full`, as for the store itself."""
        if exc.errno not in _NO_ROOM_ERRNOS:
            log.exception("request_failed", request=type(request).__name__)
            return ErrorReply(code=ErrorCode.INTERNAL, message=f"internal error: {exc!r}")
        where = exc.filename or self.options.data_dir
        message = (
            f"cannot write {where}: {os.strerror(exc.errno).lower()}. Nothing acknowledged "
            f"was lost; free some space on the disk of {self.options.data_dir} and try again"
        )
        if isinstance(request, RecallFactsRequest):
            return ErrorReply(code=ErrorCode.RECALL_UNAVAILABLE, message=message)
        return ErrorReply(code=ErrorCode.STORE_FULL, message=message)

    def _subscribe(self, request: SubscribeRequest, conn: _Connection) -> Reply:
        """Make `conn` a subscriber (its events follow the answer: `_stream_events`)."""
        if request.project is not None and not Path(request.project).is_absolute():
            return ErrorReply(
                code=ErrorCode.BAD_REQUEST,
                message=f"project must be an absolute directory, not {request.project!r}",
            )
        kinds = list(dict.fromkeys(request.kinds))  # each once, in the order asked
        try:
            conn.subscription = self.events.subscribe(
                kinds, request.project, client=peer_pid(conn.sock)
            )
        except SubscribersFullError as exc:
            return ErrorReply(code=ErrorCode.BUSY, message=str(exc))
        return SubscribedReply(kinds=kinds, project=conn.subscription.project)

    def _stop_for_store_failure(self) -> None:
        """Stop serving: a process that can no longer use its store would answer
        every request with an error while its service manager, seeing it up, never
        restarts it. It stops as for a shutdown and `mented` exits non-zero."""
        if self.store_failure is None:
            self.store_failure = self.store.failure or "the store failed"
            log.error("store_failed", error=self.store_failure)
            self.request_shutdown()

    def _settle_hook(self, conn: _Connection, *, sent: bool) -> None:
        """Count the hook answer just sent on `conn` as handed over, if it went out
        before its caller's deadline; else withdraw it (nobody read it)."""
        answer, conn.hook_answer = conn.hook_answer, None
        if answer is None:
            return
        if sent and time.monotonic() < conn.hook_deadline:
            answer.sent()
        else:
            answer.dropped()

    async def _answer_hook(
        self, request: HookRequest, deadline: float, peer: Callable[[], int | None] = no_peer
    ) -> HookAnswer:
        """The hook's stdout bytes; a command slow to match is matched off the event loop.

        Most commands match in well under a millisecond, here. One that takes longer
        (built to be slow: issue 12) is matched again in a worker thread, up to the
        matcher's budget, so that other sessions' hooks are answered meanwhile; at most
        `_SLOW_MATCHES` at a time, and one that waited past its deadline is not matched.
        """
        call = decode_event(request.agent, bytes(request.event))
        call = with_process_session(request.agent, call, peer)  # Kiro CLI: no session id
        if isinstance(call, ToolCall) and call.ran and AGENTS[request.agent].checks_only_after:
            # The event after a command ran, installed for the checks alone: one look-up.
            return self.hooks.answer_decoded(
                request.agent, call, deadline=deadline, test=request.test
            )
        if isinstance(call, ToolCall):  # its project's rules, read by half the budget at most
            await self.project_reads.ready(call.cwd, (time.monotonic() + deadline) / 2)
        command = call.command if isinstance(call, ToolCall) else None
        matcher = self.matcher
        aliases = self.hooks.git_aliases_for(call) if isinstance(call, ToolCall) else NO_ALIASES
        if command and matcher.quick_actions_in(command, _QUICK_MATCH_S, aliases=aliases) is None:
            async with self._slow_matches:
                if time.monotonic() >= deadline:
                    return HookAnswer()
                # Cached by the matcher for the handler's lookup below.
                await trio.to_thread.run_sync(
                    functools.partial(
                        matcher.actions_in, command, deadline=deadline, aliases=aliases
                    )
                )
        return self.hooks.answer_decoded(
            request.agent, call, deadline=deadline, aliases=aliases, test=request.test
        )

    async def _answer(self, request: Request) -> Reply:
        store = self.store
        if isinstance(request, _USES_RECALL):
            await self._open_recall_once()
            self._note_recall_use()
        match request:
            case RecallRequest(action=action, agent=agent, cwd=cwd, k=k):
                await self.project_reads.ready(cwd, time.monotonic() + _PROJECT_READ_S)
                recall = functools.partial(
                    self.rules.recall_for_action, action, agent=agent, cwd=cwd, k=k
                )
                # The hook's own recall asks for a few rules; many is a scan.
                memories = await self._scan(recall) if k > _SCAN_ABOVE else recall()
                return MemoriesReply(memories=memories, untrusted=self._untrusted(cwd))
            case GetRequest(id=memory_id):
                return await self._get(memory_id)
            case ListRequest():
                return await self._list(request)
            case HistoryRequest(id=memory_id):
                return await self._history(memory_id)
            case StoreRequest():
                memory = await _in_thread(functools.partial(self._store_memory, request))
                self._note_change()
                self.events.publish_rule("added", memory)
                return StoredReply(id=memory.id)
            case SupersedeRequest():
                async with self._project_rule_refused(request.id):
                    new, old = await _in_thread(functools.partial(self._supersede, request))
                self._note_change()
                self.events.publish_rule("superseded", new, replaces=old.id)
                return SupersededReply(id=new.id, old=old)
            case ForgetRequest(id=memory_id):
                async with self._project_rule_refused(memory_id):
                    forgotten = await _in_thread(
                        functools.partial(self._indexed, store.forget, memory_id)
                    )
                self._note_change()
                self.events.publish_rule("forgotten", forgotten)
                return ForgottenReply(id=forgotten.id)
            case ExportRequest():
                return await self._scan(self._export)
            case ImportRequest(path=path, shown_as=shown_as):
                imported = await self._scan(
                    functools.partial(self._indexed, self._import, path, shown_as)
                )
                self._note_change()
                self.events.publish_batch(
                    "imported", added=imported.added, forgotten=imported.forgotten
                )
                return imported
            case TrustRequest(dir=directory):
                project = await _in_thread(functools.partial(self.projects.trust, directory))
                return TrustedReply(root=project.root, rules=project.rules, digest=project.digest)
            case SyncRequest():
                return await self._answer_sync(request)
            case ReportRequest(since_s=since_s, agent=agent):
                await self.project_reads.known_ready(time.monotonic() + _PROJECT_READ_S)
                return compliance_report(
                    self.compliance,
                    since=time.time() - max(0.0, since_s),
                    agent=agent,
                    rule_of=self._rule_or_none,
                )
            case ActionsRequest():
                descriptions = self.matcher.table.descriptions()
                return ActionsReply(
                    actions=[
                        ActionSummary(name=name, description=descriptions[name])
                        for name in sorted(descriptions)
                    ]
                )
            case RecallFactsRequest():
                return await self._recall_facts(request)
            case ReindexRequest():
                # As a scan: the collector paused, the GIL handed back often (it walks
                # every fact, building a document of each).
                summary = await self._scan(self._reindex)
                return ReindexedReply(
                    facts=summary.facts, pinned=summary.pinned, seconds=summary.seconds
                )
            case StatusRequest():
                return self.status()
            case LogRequest():
                return await self._scan(functools.partial(log_reply, self.activity, request))
            case ReloadRequest():
                error = self.reload()
                if error:
                    return ErrorReply(code=ErrorCode.INVALID, message=error)
                return OkReply(message="configuration reloaded")
            case ShutdownRequest():
                self.request_shutdown()
                return OkReply(message="shutting down")
            case _:  # HookRequest is answered before; kept for exhaustiveness
                return ErrorReply(code=ErrorCode.UNKNOWN_REQUEST, message="unsupported request")

    async def _answer_sync(self, request: SyncRequest) -> Reply:
        """Sync now (set up first with `init_remote`), or change the remote, or say how it is."""
        if request.set_remote is not None:
            await _in_thread(functools.partial(self.syncer.set_remote, request.set_remote))
            return self.status()
        if request.status:
            return self.status()
        synced = await _in_thread(functools.partial(self._indexed, self._sync, request.init_remote))
        self.events.publish_batch("synced", added=synced.added, forgotten=synced.forgotten)
        return synced

    async def _recall_facts(self, request: RecallFactsRequest) -> RecalledReply:
        """The facts best matching the query, searched off the event loop: a search may
        wait for the index (a rebuild holds it for seconds)."""
        k = self.config.recall.k if request.k is None else request.k
        search = functools.partial(
            self._recall_index().search, request.query, agent=request.agent, cwd=request.cwd, k=k
        )
        from mented.recall import RecallBusyError  # noqa: PLC0415 - opened by now: see _answer

        try:
            hits = await _in_thread(search, self._searches)
        except RecallBusyError as exc:
            raise RecallUnavailableError(str(exc)) from None
        return RecalledReply(hits=hits)

    async def _list(self, request: ListRequest) -> Reply:
        """A listing (a scan, off the event loop), saying when a project's rules are not served."""
        if not self.held.has_room(MAX_FRAME):
            # The answer may be up to MAX_FRAME and could not be held: spare the scan.
            return _BUSY_SENDING
        await self.project_reads.ready(request.cwd, time.monotonic() + _PROJECT_READ_S)
        listing = functools.partial(
            self.store.list,
            action=request.action,
            agent=request.agent,
            cwd=request.cwd,
            tag=request.tag,
            memory_type=request.memory_type,
            rules_only=request.rules_only,
            include_superseded=request.include_superseded,
            limit=request.limit,
            # A trusted project's committed rules are listed with yours.
            also=self.rules.trusted_rules(request.cwd),
        )
        reply = await self._scan(functools.partial(_listing_reply, listing))
        if isinstance(reply, MemoriesReply):
            reply.untrusted = self._untrusted(request.cwd)
        return reply

    async def _history(self, memory_id: str) -> MemoriesReply:
        """Every version of a rule, oldest first (a project's rule has its file's history)."""
        async with self._project_rule_refused(memory_id):
            history = await self._scan(functools.partial(self.store.history, memory_id))
        return MemoriesReply(memories=history)

    async def _get(self, memory_id: str) -> MemoryReply:
        """A memory of the store, else a project's committed rule with its file."""
        try:
            return MemoryReply(memory=self.store.get(memory_id))
        except NotFoundError:
            await self.project_reads.known_ready(time.monotonic() + _PROJECT_READ_S)
            found = self.projects.find_rule(memory_id)
            if found is None:
                raise
            project, rule = found
            return MemoryReply(memory=rule, file=project.file_of(rule))

    @contextlib.asynccontextmanager
    async def _project_rule_refused(self, memory_id: str) -> AsyncIterator[None]:
        """A `NotFoundError` for an id that names a project's committed rule becomes a
        `ProjectRuleError` naming its file: the rule is real, and changed there.

        Looked up on the event loop, after the store said no, once the projects not
        read yet are read off it (a repository's file must not hold other requests).
        """
        try:
            yield
        except NotFoundError:
            await self.project_reads.known_ready(time.monotonic() + _PROJECT_READ_S)
            self.projects.refuse_project_rule(memory_id)
            raise

    def _untrusted(self, cwd: str | None) -> UntrustedProject | None:
        """The project `cwd` is in, when its committed rules are not served (not trusted)."""
        project = self.rules.untrusted_project(cwd)
        if project is None:
            return None
        return UntrustedProject(
            root=project.root, rules=len(project.rules), problem=project.problem
        )

    async def _scan(self, call: Callable[[], T]) -> T:
        """Run a store read that may walk many records in a worker thread.

        One at a time: each holds a read transaction and builds its whole answer,
        and a walk over 200,000 memories takes about a second, during which the
        trio thread goes on answering hooks. py-lmdb opens the environment with
        MDB_NOTLS and each read transaction begins and ends in the one thread
        that runs `call`. An export or a bulk import can take the same path.
        """
        async with self._scans:
            previous = sys.getswitchinterval()
            sys.setswitchinterval(_SCAN_SWITCH_INTERVAL_S)
            # The cyclic GC, triggered by the scan's hundreds of thousands of new
            # objects, would walk them all holding the GIL (100+ ms, no switch).
            collecting = gc.isenabled()
            gc.disable()
            try:
                return await _in_thread(call)
            finally:
                if collecting:
                    gc.enable()
                sys.setswitchinterval(previous)

    def _export(self) -> ExportedReply:
        """Write an export into `transfer/` (a worker thread: it walks the whole store)."""
        transfer = self._transfer_dir()
        path = transfer / f"export-{new_id()}.jsonl"
        memories, forgotten = export_store(self.store, path)
        return ExportedReply(path=str(path), memories=memories, forgotten=forgotten)

    def _import(self, path: str, shown_as: str | None) -> ImportedReply:
        """Import a file from `transfer/` (a worker thread), then remove it."""
        transfer = self._transfer_dir().resolve()
        source = Path(path).resolve()
        if source.parent != transfer:
            raise InvalidInputError(
                f"an import must be a file in {transfer} (mentectl import copies it there)"
            )
        try:
            imported = import_streamed(self.store, source, shown_as=shown_as)
        finally:
            source.unlink(missing_ok=True)
        known = self.matcher.table.descriptions()
        summary = imported.summary
        return ImportedReply(
            added=summary.added,
            forgotten=summary.forgotten,
            unchanged=summary.unchanged,
            warnings=unknown_action_warnings(
                imported.actions, known, where=shown_as or str(source)
            ),
        )

    def _sync(self, init_remote: str | None) -> SyncedReply:
        """Set sync up (with `init_remote`) and sync now (a worker thread)."""
        if init_remote is not None:
            self.syncer.init(init_remote)
        result = self.syncer.sync(self.store)
        log.info(
            "synced",
            written=result.written,
            added=result.added,
            forgotten=result.forgotten,
            pushed=result.pushed,
        )
        for problem in result.skipped:
            log.warning("sync_skipped_file", problem=problem)
        return SyncedReply(
            remote=self.syncer.remote() or "",
            written=result.written,
            added=result.added,
            forgotten=result.forgotten,
            pushed=result.pushed,
            skipped=result.skipped,
        )

    def _note_change(self) -> None:
        self._writes_since_sync += 1
        self._wake_sync.set()

    async def _sync_by_itself(self) -> None:
        """`[sync]`: sync every `interval_s`, and `after_change` a few seconds after a write.

        Off the request path: git runs in a worker thread, with its timeouts. A failure
        is logged and kept for `status`; the next turn retries it. Writes and reloads
        wake this loop, so that a reload that turns sync on takes effect at once.
        """
        last = trio.current_time()
        while True:
            settings = self.config.sync
            if settings.interval_s > 0:
                wait = max(0.0, last + settings.interval_s - trio.current_time())
            else:
                wait = _SYNC_CHECK_S
            with trio.move_on_after(wait):
                await self._wake_sync.wait()
            self._wake_sync = trio.Event()
            settings = self.config.sync
            due = settings.interval_s > 0 and trio.current_time() >= last + settings.interval_s
            if settings.after_change and self._writes_since_sync:
                due = True
                await trio.sleep(_SYNC_SETTLE_S)  # a burst of writes: one sync
            if not due or not self.syncer.configured:
                continue
            self._writes_since_sync = 0
            self.syncer.timeout_s = settings.timeout_s
            try:
                synced = await trio.to_thread.run_sync(
                    functools.partial(self._indexed, self._sync, None), abandon_on_cancel=True
                )
                self.events.publish_batch("synced", added=synced.added, forgotten=synced.forgotten)
            except (SyncError, StoreError) as exc:
                log.warning("sync_failed", error=str(exc))
                self._writes_since_sync += 1  # still to push: retried at the next turn
            except Exception:  # noqa: BLE001 - a bug in a sync must never end the daemon
                log.exception("sync_failed")
            last = trio.current_time()

    def _transfer_dir(self) -> Path:
        transfer = self.options.data_dir / "transfer"
        transfer.mkdir(mode=0o700, exist_ok=True)
        return transfer

    # ------------------------------------------------- pinned rules and facts

    def _note_recall_use(self) -> None:
        self._recall_used.set()

    async def _recall_last_fire(self) -> None:
        """`status`'s "last rules" after a restart: the newest fire of the record that
        handed rules over (among the last few: a worker thread reads them)."""
        try:
            fires, _ = await trio.to_thread.run_sync(
                self.activity.query, FireFilter(), LAST_FIRE_LOOKBACK
            )
        except Exception as exc:  # noqa: BLE001 - `status` says "none yet", as before
            log.warning("last_fire_unread", error=repr(exc))
            return
        handed = next((fire for fire in fires if fire.delivery != "none"), None)
        if handed is not None:
            self.hooks.recall_last_fire(handed)

    def _fired(self, fire: FireRecord) -> None:
        """A hook fire, once its answer was sent: recorded, and told to subscribers."""
        self.activity.append(fire)
        self.events.publish_fire(fire)

    def _note_compliance_waits(self) -> None:
        self._compliance_waits.set()

    async def _flush_compliance_soon(self) -> None:
        """Write the record's waiting events `FLUSH_S` after the first of them: a crash
        after a quiet spell loses no more (an idle daemon wakes for no timer of its own)."""
        while True:
            await self._compliance_waits.wait()
            self._compliance_waits = trio.Event()
            await trio.sleep(COMPLIANCE_FLUSH_S)
            self.compliance.flush()

    async def _release_recall_when_idle(self) -> None:
        """Let Tantivy go once the recall index has been unused for `_RECALL_IDLE_S`
        (`RecallIndex.release`): an idle daemon wakes for no timer of its own."""
        while True:
            await self._recall_used.wait()
            # Each use in the meantime sets the event again and so restarts the wait.
            idle = False
            while not idle:
                self._recall_used = trio.Event()
                with trio.move_on_after(_RECALL_IDLE_S) as waited:
                    await self._recall_used.wait()
                idle = waited.cancelled_caught
            if self.recall is not None:
                await trio.to_thread.run_sync(self.recall.release, abandon_on_cancel=True)

    async def _catch_up_recall(self) -> None:
        """Open the recall index and bring it up to date off the start-up path, once
        the first answer is sent (or a moment after the start, if no client comes): a
        first start on a big store rebuilds it (about 10,000 facts a second), and rules
        need no index. A recall meanwhile waits for it."""
        with trio.move_on_after(_RECALL_OPEN_AFTER_S):
            await self._answered.wait()
        await self._open_recall_once()
        recall = self.recall
        if recall is None:
            return
        self._note_recall_use()
        try:
            await trio.to_thread.run_sync(recall.catch_up, abandon_on_cancel=True)
        except (ValueError, OSError, StoreError) as exc:  # Tantivy raises ValueError
            log.warning("recall_index_behind", error=str(exc))
        self._note_recall_use()

    async def _open_recall_once(self) -> None:
        """Open the recall index in a worker thread, the first time it is wanted: the
        first request that uses it, or `_catch_up_recall`. Importing Tantivy and
        opening its files are then no part of what the first hook waits for."""
        if self._recall_tried:
            return
        async with self._recall_opening:
            if not self._recall_tried:
                await trio.to_thread.run_sync(self._open_recall)
                self._recall_tried = True

    def _open_recall(self) -> None:
        from mented.recall import RecallError, RecallIndex  # noqa: PLC0415 - see _open_recall_once

        try:
            self.recall = RecallIndex(self.options.data_dir / "recall", self.store, catch_up=False)
        except RecallError as exc:
            self.recall, self.recall_error = None, str(exc)
            log.error("recall_unavailable", error=str(exc))
        else:
            self.recall_error = None

    def _recall_index(self) -> RecallIndex:
        if self.recall is None:
            raise RecallUnavailableError(
                f"facts cannot be recalled: {self.recall_error}. Rules work as before; "
                "`mentectl reindex` tries again"
            )
        return self.recall

    def _indexed(self, write: Callable[..., T], *args: object) -> T:
        """`write(*args)` on the store, then the recall index brought up to date.

        Runs in a worker thread. The write stands whatever the index does: an
        index that fails to catch up now does so before its next search.
        """
        result = write(*args)
        if self.recall is not None:
            try:
                self.recall.catch_up()
            except (ValueError, OSError, StoreError) as exc:  # Tantivy raises ValueError
                log.warning("recall_index_behind", error=str(exc))
        return result

    def _store_memory(self, request: StoreRequest) -> Memory:
        """Store a memory; a pinned rule only within the cap (`mented.pinned`)."""
        checks = rule_checks(request.checks, request.tags, self.matcher.table)
        store = functools.partial(
            self._indexed,
            functools.partial(
                self.store.store,
                request.content,
                memory_type=request.memory_type,
                tags=request.tags,
                agent=request.agent,
                project=request.project,
                checks=checks,
            ),
        )
        if not any(_is_pinned_tag(tag) for tag in request.tags):
            return store()
        with self._pinned_lock:
            new = _pinned_stand_in(request.content, request.agent, request.project)
            check_cap(self.store.pinned_rules(), new, self.config.pinned)
            return store()

    def _supersede(self, request: SupersedeRequest) -> tuple[Memory, Memory]:
        """Supersede a memory; a pinned rule's new version only within the cap."""
        old = self.store.get(request.id)
        tags = old.tags if request.tags is None else tuple(request.tags)
        table = self.matcher.table
        checks = None if request.checks is None else rule_checks(request.checks, tags, table)
        if checks is None and request.tags is not None and old.checks:
            rule_checks(old.checks, tags, table)  # the old checks must fit the new actions too
        supersede = functools.partial(
            self._indexed,
            functools.partial(
                self.store.supersede,
                request.id,
                request.content,
                tags=request.tags,
                agent=request.agent,
                project=request.project,
                checks=checks,
            ),
        )
        if not any(_is_pinned_tag(tag) for tag in tags):
            return supersede()
        with self._pinned_lock:
            new = _pinned_stand_in(
                request.content,
                old.agent if request.agent is None else request.agent,
                old.project if request.project is None else request.project,
            )
            # It replaces `old` and, when `old` is one side of a fork, the other sides too.
            replaced = {version.id for version in self.store.history(old.id) if version.is_live}
            check_cap(self.store.pinned_rules(), new, self.config.pinned, replaced=replaced)
            return supersede()

    def _reindex(self) -> RebuildSummary:
        """Rebuild the recall index (opening it again if it could not be) and the pinned index."""
        if self.recall is None:
            self._open_recall()
        index = self._recall_index()
        try:
            return index.rebuild()
        except ValueError as exc:  # Tantivy's errors (a full disk among them)
            raise RecallUnavailableError(
                f"the recall index could not be rebuilt: {exc}. Rules work as before; "
                "`mentectl reindex` tries again (free some space first if the disk is full)"
            ) from exc

    def reload(self) -> str | None:
        """Re-read the config file; keep the current settings when it is bad.

        Returns:
            None when reloaded, else the error message (also logged).
        """
        if self.options.on_reloading:
            self.options.on_reloading()
        error = self._reload_config()
        self.config_error = error
        config = self.options.config_path
        self.events.publish_config(str(config) if config else None, error)
        if self.options.on_reloaded:
            self.options.on_reloaded(error)
        return error

    def _load_settings_or_defaults(self) -> tuple[Config, Matcher]:
        """The config file's settings; the built-in ones when the file is invalid.

        A daemon that refused to start over its config file would leave every agent
        without rules until someone noticed: a service manager restarting it (after
        a crash, at login) would only fail again. So it starts on the built-in
        settings, says why in `status` (unhealthy) and `doctor`, and `reload`
        applies the file once it is fixed. (`mentectl restart` checks the file
        first and leaves a running daemon alone when it is invalid.)
        """
        try:
            return self._load_settings()
        except ConfigError as exc:
            log.error("config_invalid_using_defaults", error=str(exc))
            self._on_defaults = True
            self.config_error = f"{exc} {_ON_DEFAULTS}"
            self.problems.note(CONFIG_DEFAULTS, *config_defaults(self.options.config_path))
            config = Config(path=self.options.config_path)
            return config, Matcher(load_action_table(config))

    def _in_force(self) -> str:
        """What serves while the file on disk is invalid, for its error message."""
        return _ON_DEFAULTS if self._on_defaults else _PREVIOUS_IN_FORCE

    def _load_settings(self) -> tuple[Config, Matcher]:
        """The config file and the matcher built from its action table.

        Raises:
            ConfigError: the file is unreadable or invalid.
        """
        self._config_stamp = _file_stamp(self.options.config_path)
        config = load_config(self.options.config_path)
        return config, Matcher(load_action_table(config))

    def _check_config_on_disk(self) -> None:
        """Notice a config file edited since it was loaded and say whether it is valid.

        Only checked, not applied: applying is `reload`'s job (SIGHUP, `mentectl reload`).
        """
        stamp = _file_stamp(self.options.config_path)
        if stamp == self._config_stamp:
            return
        self._config_stamp = stamp
        try:
            load_action_table(load_config(self.options.config_path))
        except ConfigError as exc:
            self.config_error = f"{exc} {self._in_force()}"
        else:
            self.config_error = None

    def _reload_config(self) -> str | None:
        try:
            config, matcher = self._load_settings()
        except ConfigError as exc:
            log.error("reload_failed", error=str(exc))
            return f"{exc} {self._in_force()}"
        except Exception as exc:  # noqa: BLE001 - a reload (SIGHUP too) must never end the daemon
            log.exception("reload_failed")
            return f"cannot reload the configuration: {exc!r} {self._in_force()}"
        self._on_defaults = False
        self.problems.clear(CONFIG_DEFAULTS)
        self.config = config
        self.matcher = matcher
        self.syncer.timeout_s = config.sync.timeout_s
        self.syncer.max_fetch_bytes = config.sync.max_fetch_mib << 20
        self._wake_sync.set()
        self.hooks.reconfigure(matcher, config)
        self.activity.reconfigure(config.activity)
        log.info("reloaded", config=str(self.options.config_path))
        return None

    def _rule_or_none(self, rule_id: str) -> Memory | None:
        """A rule version for the report: yours, or a trusted project's; None when gone."""
        try:
            return self.store.get(rule_id)
        except (StoreError, InvalidInputError):
            found = self.projects.find_rule(rule_id)
            return found[1] if found is not None else None

    def status(self) -> StatusReply:
        self._check_config_on_disk()
        stats = self.store.stats()
        sync_state = self.syncer.state() if self.syncer.configured else None
        chars_per_session, sessions = self.hooks.chars_per_session()
        pinned = self.store.pinned_rules()
        week = self.compliance.summary(since=time.time() - 7 * 86_400).total
        since = self.loop_lag.take()
        return StatusReply(
            checks_7d=report_row("7d", week),
            version=__version__,
            pid=os.getpid(),
            uptime_s=time.time() - self.stats.started,
            socket=str(self.options.socket_path),
            data_dir=str(self.options.data_dir),
            db_bytes=stats.db_bytes,
            map_bytes=stats.map_bytes,
            memories=stats.memories,
            live_rules=stats.live_rules,
            actions_with_rules=stats.actions_with_rules,
            requests_served=self.stats.requests,
            p50_us=self.stats.percentile(0.5),
            p99_us=self.stats.percentile(0.99),
            loop_lag_ms=self.loop_lag.worst.seconds * 1000,
            loop_lag_task=self.loop_lag.worst.task,
            loop_lag_recent_ms=self.loop_lag.recent.seconds * 1000,
            loop_lag_since_ms=since.seconds * 1000,
            loop_lag_since_task=since.task,
            last_hook_fire=self.hooks.last_fire,
            hook_chars_per_session=chars_per_session,
            hook_sessions=sessions,
            config=str(self.options.config_path) if self.options.config_path else None,
            config_error=self.config_error,
            config_in_force=self.config.text if self.config_error else None,
            socket_activated=self.options.inherited_socket is not None,
            started_by=self.options.started_by,
            sync_remote=sync_state.remote if sync_state else None,
            sync_last_ok=sync_state.last_ok if sync_state else None,
            sync_error=sync_state.last_error if sync_state else None,
            sync_skipped=sync_state.skipped if sync_state else [],
            sync_skipped_total=sync_state.skipped_total if sync_state else 0,
            forks=[[tip.id for tip in fork.tips] for fork in self.store.forks()],
            untrusted_projects=self.projects.untrusted(),
            recall_error=self.recall_error,
            problems=self._problems_now(),
            subscribers=self.events.subscribers,
            pinned_live=len(pinned),
            pinned_max_rules=self.config.pinned.max_rules,
            pinned_max_chars=self.config.pinned.max_chars,
            pinned_over_cap=over_cap(pinned, self.config.pinned),
        )

    def _problems_now(self) -> list[Problem]:
        """The fallbacks in force, the data directory's free space looked at now."""
        data_dir = self.options.data_dir
        free = free_bytes(data_dir)
        if free is not None and free < FULL_BELOW_BYTES:
            self.problems.note(DATA_DIR_FULL, *data_dir_full(data_dir, f"{free} bytes free"))
        elif self._store_full is not None:  # a quota, say: the file system has room
            self.problems.note(DATA_DIR_FULL, *data_dir_full(data_dir, self._store_full))
        else:
            self.problems.clear(DATA_DIR_FULL)
        return self.problems.current()


class _Connection:
    """One client's socket and what the daemon holds for it.

    Straight on the trio socket: trio.SocketStream adds what one task per
    connection does not need (conflict detection, a TCP option tried on every
    Unix socket, error translation) and costs ~8% of a lookup's round trip; a
    peer that goes away raises OSError, which `_serve_connection` handles.
    """

    __slots__ = (
        "held",
        "hook_answer",
        "hook_deadline",
        "pending",
        "sock",
        "subscription",
        "untimed",
    )

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.pending = b""  # bytes received past the last frame (pipelined requests)
        self.held = 0  # bytes counted for it in `_HeldBytes`
        self.subscription: Subscription | None = None  # set by `subscribe`
        self.untimed = False  # the request being answered is long by design (`_UNTIMED`)
        # The hook answer being sent, and when its caller stops waiting (time.monotonic).
        self.hook_answer: HookAnswer | None = None
        self.hook_deadline = 0.0


class _HeldBytes:
    """What clients make the daemon hold, counted against one daemon-wide limit.

    A request counts from the first read that leaves it incomplete until its
    answer is sent; an answer counts while the client has not read it (at most
    `send_timeout_s`). A frame that arrives whole and an answer the kernel takes
    at once are not counted: they are held only while the daemon works on them.
    Without the bound, every connection could hold a 4 MiB frame or answer for as
    long as its client likes, and thousands of them several GiB.

    Freed buffers of many sizes leave the C allocator's heap fragmented, so that
    memory stays with the process after the clients are gone; once enough has
    been released it is handed back (`malloc_trim`, where the C library has it).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._released = 0  # bytes released since memory was last handed back

    def has_room(self, size: int) -> bool:
        return self.total + size <= self.limit

    def reserve(self, conn: _Connection, size: int) -> None:
        """Count `size` more bytes for `conn`.

        Raises:
            ServerBusyError: they would take the total past the limit.
        """
        if not self.has_room(size):
            raise ServerBusyError
        self.total += size
        conn.held += size

    def take(self, size: int) -> bool:
        """Count `size` more bytes held for no one connection (a subscriber's queued
        events, `mented.events`); False, counting nothing, when there is no room."""
        if not self.has_room(size):
            return False
        self.total += size
        return True

    def give_back(self, size: int) -> None:
        """Stop counting `size` bytes counted by `take`."""
        self.total -= size

    def release(self, conn: _Connection) -> None:
        """Stop counting what `conn` held; hand memory back after a large release."""
        if not conn.held:
            return
        self.total -= conn.held
        self._released += conn.held
        conn.held = 0
        # After a large release, and when the last holder is done (however little was
        # released since: a flood's tail is freed by its last few connections).
        if self._released >= _TRIM_AFTER or (
            not self.total and self._released >= _TRIM_AFTER // 16
        ):
            self._released = 0
            _give_memory_back()


def _load_malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has no such call."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # musl has no malloc_trim
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_malloc_trim = _load_malloc_trim()


def _give_memory_back() -> None:
    """Return the C heap's free pages to the system (glibc), e.g. after a flood of
    large requests: without it, RSS stayed 130 MiB up after 2,000 of 64 KiB left."""
    if _malloc_trim is not None:
        started = time.perf_counter()
        _malloc_trim(0)
        log.debug("memory_trimmed", ms=round((time.perf_counter() - started) * 1000, 2))


def _listing_reply(listing: Callable[[], list[Memory]]) -> Reply:
    """The answer to a `list`, judged too large in the worker thread that scanned it:
    encoding tens of MiB only to refuse them would hold the trio thread (and every
    hook) for a tenth of a second."""
    memories = listing()
    # A lower bound on the encoded size: every memory's fields and punctuation take
    # more than _MEMORY_OVERHEAD bytes, and its content at least a byte per character.
    least = sum(len(memory.content) + _MEMORY_OVERHEAD for memory in memories)
    if least <= MAX_FRAME:
        return MemoriesReply(memories=memories)
    count = len(memories)
    # Freed in one go, 200,000 memories held the GIL for a third of a second.
    while memories:
        del memories[-1000:]
    return ErrorReply(
        code=ErrorCode.FRAME_TOO_LARGE,
        message=f"the answer would hold {count} memories, over the {MAX_FRAME}-byte "
        "frame limit; ask for fewer (a limit, e.g. `mentectl rule list -k 100`, or a filter)",
    )


def _frame_end(buffer: bytes) -> int | None:
    """Where the first frame in `buffer` ends; None while its header is incomplete.

    Raises:
        FrameTooLargeError: the announced length exceeds MAX_FRAME.
    """
    if len(buffer) < HEADER.size:
        return None
    (length,) = HEADER.unpack_from(buffer)
    if length > MAX_FRAME:
        raise FrameTooLargeError(length)
    return int(HEADER.size + length)


def _file_stamp(path: Path | None) -> tuple[int, int] | None:
    """(mtime, size) of a file, to notice edits cheaply; None when absent."""
    if path is None:
        return None
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


async def _in_thread(call: Callable[[], T], limiter: trio.CapacityLimiter | None = None) -> T:
    """Run blocking store work (a write waits for fsync; a scan is long) off the trio
    thread; `limiter`: how many may run at once (None: trio's default)."""
    result = await trio.to_thread.run_sync(_capture, call, limiter=limiter)
    if not isinstance(result, _Failed):
        return result
    error = result.error
    del result
    try:
        raise error
    finally:
        del error  # this frame joins the traceback: no cycle through its locals


@dataclass(frozen=True, slots=True)
class _Failed:
    error: Exception


def _capture(call: Callable[[], T]) -> T | _Failed:
    """`call()`, or the exception it raised, stripped of the worker thread's frames.

    Raised out of a trio worker thread, an exception sits in a reference cycle with
    trio's thread machinery (its traceback's frames reach back through `f_back`),
    and those frames hold the request until the cyclic GC happens to run: a client
    sending refused 4 MiB writes grew the daemon by hundreds of MiB. Without its
    frames it holds nothing; a bug keeps its traceback as text for the log.
    """
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - handed back whole to the trio thread
        if not isinstance(exc, InvalidInputError | StoreError):
            exc.add_note("".join(traceback.format_tb(exc.__traceback__)).rstrip())
        link: BaseException | None = exc
        seen: set[int] = set()
        while link is not None and id(link) not in seen:
            seen.add(id(link))
            link.__traceback__ = None
            link = link.__cause__ or link.__context__
        return _Failed(exc)


def _is_pinned_tag(tag: object) -> bool:
    return isinstance(tag, str) and tag.strip().lower() == PINNED_TAG


def _stop_writing_to_the_terminal() -> None:
    """Point stdout and stderr at /dev/null: every write to a hung-up terminal fails."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (1, 2):
            os.dup2(null, fd)
    finally:
        os.close(null)


def _pinned_stand_in(content: str, agent: str | None, project: str | None) -> Memory:
    """The pinned rule a store or supersede would write, for the cap check before it
    (`project` normalized as the store keeps it; the store refuses a relative one itself)."""
    return Memory(
        id="",
        content=content,
        tags=(PINNED_TAG,),
        agent=agent,
        project=None if project is None else os.path.normpath(project),
        created_at=0.0,
    )


def _open_sessions(data_dir: Path, config: Config, problems: Problems) -> SessionMemory | None:
    """The session memory; None when it cannot be opened (then no command is ever
    stopped: without it, nothing would keep a stop from coming twice; `problems` says so)."""
    try:
        return SessionMemory(data_dir / "sessions", ttl_s=config.hook.session_ttl_s)
    except SessionMemoryError as exc:
        log.error("sessions_unavailable", error=str(exc))
        problems.note(SESSION_MEMORY, *session_memory_unavailable(str(exc), reopens=False))
        return None


def _try_open_spare() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return None


def _connection_limit() -> int:
    """Connections served at once: MAX_CONNECTIONS, or fewer when the descriptor limit
    less a reserve (for the store, the listener and logging) is lower, so that the
    accept loop itself never runs dry."""
    import resource  # noqa: PLC0415 - start-up only

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return min(MAX_CONNECTIONS, max(8, soft - DESCRIPTOR_RESERVE))
