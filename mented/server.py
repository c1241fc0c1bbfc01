"""The trio server: accept connections, read frames, dispatch requests, reply.

`Server.open()` does the synchronous start-up (lock the data directory, read the
config, open the store, bind or adopt the socket) and reports any problem as a
`StartupError` with a message for the user. `Server.serve()` runs until a
signal or a `shutdown` request, then stops accepting, lets requests in flight
finish (up to a grace period), and `Server.close()` releases everything.

Reads (lookups, hook requests) run on the trio thread: they take microseconds.
Writes run in a worker thread because a durable commit waits for fsync.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import socket
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import trio

from mented import __version__
from mented.actions import load_action_table
from mented.agents import AGENTS, ToolCall
from mented.config import Config, ConfigError, load_config
from mented.hooks import HookHandler
from mented.listener import (
    ListenerError,
    bind_socket,
    remove_socket_if_ours,
    socket_identity,
)
from mented.lockfile import DataDirBusyError, DataDirLock
from mented.log import log
from mented.matcher import Matcher
from mented.memory import InvalidInputError
from mented.peercred import is_own_user, peer_uid
from mented.protocol import (
    HEADER,
    MAX_FRAME,
    ErrorCode,
    ErrorReply,
    ForgetRequest,
    ForgottenReply,
    FrameTooLargeError,
    GetRequest,
    HistoryRequest,
    HookRequest,
    ListRequest,
    LogReply,
    LogRequest,
    MemoriesReply,
    MemoryReply,
    OkReply,
    RecallRequest,
    ReloadRequest,
    Reply,
    Request,
    ShutdownRequest,
    StatusReply,
    StatusRequest,
    StoredReply,
    StoreRequest,
    SupersededReply,
    SupersedeRequest,
    decode_request,
    encode,
    frame,
)
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

T = TypeVar("T")

_RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_LATENCY_WINDOW = 4096  # requests kept for the p50/p99 in `status`
_RECV_SIZE = 64 * 1024
_SMALL_FRAME = 64 * 1024  # frames up to this size are not counted against the buffer limit
_BUSY_FRAME = encode(
    ErrorReply(code=ErrorCode.BUSY, message="mented serves too many connections; retry shortly")
)
_BUSY_RECEIVING_FRAME = encode(
    ErrorReply(
        code=ErrorCode.BUSY,
        message="mented is receiving too many large requests at once; retry shortly",
    )
)
_HOOK_PREFIX = b'{"type":"hook"'  # how the shim starts every envelope
# CPU a command may take to match on the event loop; a slower one goes to a worker.
# Ordinary commands take 0.1 to 1 ms (docs/benchmarks.md, section 7).
_QUICK_MATCH_S = 0.005
_SLOW_MATCHES = 2  # worker threads matching slow commands at once
# How long a thread holding the GIL keeps it from another that wants it (Python's
# default: 5 ms). Shorter, so that the event loop waits less behind a slow match.
_GIL_SWITCH_INTERVAL_S = 0.0005


class ServerBusyError(Exception):
    """Too much is being received at once: this request is refused with `busy`."""


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
    shutdown_grace_s: float = 5.0
    # Large frames being received at once, all connections together (see _reserve_buffer).
    buffered_limit_bytes: int = 64 * 1024 * 1024
    handle_signals: bool = True
    on_ready: Callable[[], None] | None = None
    on_stopping: Callable[[], None] | None = None
    on_reloading: Callable[[], None] | None = None
    on_reloaded: Callable[[str | None], None] | None = None  # gets reload()'s result
    # With an inherited socket: exit after this many seconds without a connection;
    # the service manager keeps the socket and starts a daemon for the next client.
    # None: the config file's `[daemon] idle_timeout_s`; 0: never.
    idle_timeout_s: float | None = None


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
        self._lock: DataDirLock | None = None
        self._listen_sock: socket.socket | None = None
        self._socket_identity: tuple[int, int] | None = None
        self._stopping = False
        self._shutdown = trio.Event()
        self._idle_scopes: set[trio.CancelScope] = set()
        self._connections = 0
        self._buffered_bytes = 0  # large frames being received, all connections together
        self._last_activity = 0.0  # trio clock: the last connection opened or closed
        self._drained = trio.Event()  # set when the last connection closes during shutdown
        self._max_connections = _connection_limit()
        self._slow_matches = trio.CapacityLimiter(_SLOW_MATCHES)
        self.config = Config()
        self.config_error: str | None = None  # why the config on disk is unusable, for `status`
        self._config_stamp: tuple[int, int] | None = None
        # Set when the store became unusable: the daemon stops, and exits non-zero.
        self.store_failure: str | None = None
        self.store: Store
        self.matcher: Matcher
        self.hooks: HookHandler
        self.sessions: SessionMemory | None = None

    # ---------------------------------------------------------------- start-up

    def open(self) -> None:
        """Lock the data directory, read the config, open the store, bind the socket.

        Raises:
            StartupError: with a message naming what is wrong and what to do.
        """
        opts = self.options
        try:
            self._lock = DataDirLock(opts.data_dir, opts.socket_path)
            self.config, self.matcher = self._load_settings()
            self.store = Store(opts.data_dir)
        except (DataDirBusyError, ConfigError, StoreError) as exc:
            self._release_lock()
            raise StartupError(str(exc)) from exc
        except OSError as exc:  # e.g. a --data-dir that is a file, or not writable
            self._release_lock()
            raise StartupError(
                f"cannot use the data directory {opts.data_dir}: {exc.strerror or exc}; "
                "choose another with --data-dir or MENTED_DATA_DIR"
            ) from exc
        self.sessions = _open_sessions(opts.data_dir, self.config)
        self.hooks = HookHandler(self.store, self.matcher, self.config, self.sessions)
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

    def close(self) -> None:
        """Release the socket, the store and the lock (in that order: a client that
        connects during shutdown finds no socket rather than a half-closed store)."""
        if self._listen_sock is not None:
            self._listen_sock.close()
            self._listen_sock = None
            if self.options.inherited_socket is None:
                remove_socket_if_ours(self.options.socket_path, self._socket_identity)
        if hasattr(self, "store"):
            self.store.close()
        if self.sessions is not None:
            self.sessions.close()
            self.sessions = None
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
        async with trio.open_nursery() as nursery:
            if self.options.handle_signals:
                await nursery.start(self._watch_signals)
            if self.options.inherited_socket is not None:
                nursery.start_soon(self._exit_when_idle)
            async with trio.open_nursery() as connections:
                connections.start_soon(self._accept_loop, listener, connections)
                log.info(
                    "ready",
                    socket=str(self.options.socket_path),
                    data_dir=str(self.options.data_dir),
                    pid=os.getpid(),
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
                if signum == signal.SIGHUP:
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

    async def _serve_connection(self, sock: trio.socket.SocketType) -> None:
        try:
            if not is_own_user(sock):
                log.warning("peer_refused", peer_uid=peer_uid(sock))
                return
            stream = _SocketStream(sock)
            buffer = bytearray()
            while not self._stopping:
                try:
                    body = await self._read_frame(stream, buffer)
                except FrameTooLargeError as exc:
                    await stream.send_all(
                        encode(ErrorReply(code=ErrorCode.FRAME_TOO_LARGE, message=str(exc)))
                    )
                    return
                except ServerBusyError:
                    await stream.send_all(_BUSY_RECEIVING_FRAME)
                    return
                if body is None:
                    return
                started = time.perf_counter()
                reply = await self._dispatch(body)
                self.stats.requests += 1
                self.stats.latencies_us.append((time.perf_counter() - started) * 1e6)
                await stream.send_all(reply)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
            pass  # the client went away or stalled mid-frame; nothing to answer
        except OSError as exc:
            log.debug("connection_error", error=str(exc))
        except Exception:  # noqa: BLE001 - a bug must cost one connection, never the daemon
            # Without this, an exception escaping here (as RecursionError from the
            # decoder once did) ends the connections nursery and with it the daemon.
            log.exception("connection_failed")
        finally:
            self._connections -= 1
            self._last_activity = trio.current_time()
            sock.close()
            if self._stopping and not self._connections:
                self._drained.set()

    def _reserve_buffer(self, size: int) -> int:
        """Count a large frame being received against the daemon-wide buffer limit.

        Each connection may buffer one frame of up to MAX_FRAME; this bounds them all
        together, so many clients sending large frames at once cannot exhaust memory.

        Returns:
            The bytes reserved (0 for a small frame), to give back when it is read.

        Raises:
            ServerBusyError: the limit is reached; the client should retry shortly.
        """
        if size <= _SMALL_FRAME:
            return 0
        if self._buffered_bytes + size > self.options.buffered_limit_bytes:
            raise ServerBusyError
        self._buffered_bytes += size
        return size

    async def _read_frame(self, stream: _SocketStream, buffer: bytearray) -> bytes | None:
        """The next frame's body; None at end of stream, idle timeout or shutdown.

        Raises:
            FrameTooLargeError: the announced length exceeds MAX_FRAME.
            trio.TooSlowError: a started frame did not complete in time.
        """
        if not buffer:
            idle = self.options.connection_idle_s
            if idle is None:
                idle = self.config.daemon.connection_idle_s
            with trio.move_on_after(idle) as scope:
                self._idle_scopes.add(scope)
                try:
                    chunk = await stream.receive_some(_RECV_SIZE)
                finally:
                    self._idle_scopes.discard(scope)
            if scope.cancelled_caught or not chunk:
                return None
            buffer += chunk
        end = _frame_end(buffer)
        if end is None or len(buffer) < end:
            # The frame is incomplete: wait for the rest, under the request timeout.
            # Most requests arrive in one piece and skip this cancel scope: entering
            # and leaving one costs ~10% of a lookup's round trip (docs/benchmarks.md).
            reserved = 0
            try:
                with trio.fail_after(self.options.request_timeout_s):
                    while len(buffer) < HEADER.size:
                        chunk = await stream.receive_some(_RECV_SIZE)
                        if not chunk:
                            return None
                        buffer += chunk
                    end = _frame_end(buffer)
                    assert end is not None
                    reserved = self._reserve_buffer(end)
                    while len(buffer) < end:
                        chunk = await stream.receive_some(max(_RECV_SIZE, end - len(buffer)))
                        if not chunk:
                            return None
                        buffer += chunk
            finally:
                self._buffered_bytes -= reserved
        body = bytes(buffer[HEADER.size : end])
        del buffer[:end]
        return body

    # ---------------------------------------------------------------- requests

    async def _dispatch(self, body: bytes) -> bytes:
        """The complete reply frame for one request body."""
        received = time.monotonic()
        request = decode_request(body)
        if isinstance(request, HookRequest):
            # The hook's reply is raw stdout bytes; HookHandler never raises. Its shim
            # gives up at its budget (`[hook] budget_ms`, as set for the shim): an answer
            # after that is read by nobody, so the work stops there.
            deadline = received + self.config.hook.budget_ms / 1000
            answer = frame(await self._answer_hook(request, deadline))
            if self.store.failure is not None:  # silenced by the hook: noticed here
                self._stop_for_store_failure()
            return answer
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
        except ConflictError as exc:
            reply = ErrorReply(code=ErrorCode.CONFLICT, message=str(exc))
        except StoreFullError as exc:
            reply = ErrorReply(code=ErrorCode.STORE_FULL, message=str(exc))
        except StoreDamagedError as exc:
            reply = ErrorReply(code=ErrorCode.STORE_DAMAGED, message=str(exc))
        except StoreFailedError as exc:
            reply = ErrorReply(code=ErrorCode.STORE_FAILED, message=str(exc))
            self._stop_for_store_failure()
        except (InvalidInputError, StoreError) as exc:
            reply = ErrorReply(code=ErrorCode.INVALID, message=str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug must cost one request, never the daemon
            log.exception("request_failed", request=type(request).__name__)
            reply = ErrorReply(code=ErrorCode.INTERNAL, message=f"internal error: {exc!r}")
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

    def _stop_for_store_failure(self) -> None:
        """Stop serving: a process that can no longer use its store would answer
        every request with an error while its service manager, seeing it up, never
        restarts it. It stops as for a shutdown and `mented` exits non-zero."""
        if self.store_failure is None:
            self.store_failure = self.store.failure or "the store failed"
            log.error("store_failed", error=self.store_failure)
            self.request_shutdown()

    async def _answer_hook(self, request: HookRequest, deadline: float) -> bytes:
        """The hook's stdout bytes; a command slow to match is matched off the event loop.

        Most commands match in well under a millisecond, here. One that takes longer
        (built to be slow: issue 12) is matched again in a worker thread, up to the
        matcher's budget, so that other sessions' hooks are answered meanwhile; at most
        `_SLOW_MATCHES` at a time, and one that waited past its deadline is not matched.
        """
        event = bytes(request.event)
        adapter = AGENTS.get(request.agent)
        call = adapter.decode(event) if adapter is not None else None
        command = call.command if isinstance(call, ToolCall) else None
        matcher = self.matcher
        if command and matcher.quick_actions_in(command, _QUICK_MATCH_S) is None:
            async with self._slow_matches:
                if time.monotonic() >= deadline:
                    return b""
                # Cached by the matcher for the handler's lookup below.
                await trio.to_thread.run_sync(
                    functools.partial(matcher.actions_in, command, deadline=deadline)
                )
        return self.hooks.handle(request.agent, event, deadline=deadline)

    async def _answer(self, request: Request) -> Reply:
        store = self.store
        match request:
            case RecallRequest(action=action, agent=agent, cwd=cwd, k=k):
                return MemoriesReply(
                    memories=store.recall_for_action(action, agent=agent, cwd=cwd, k=k)
                )
            case GetRequest(id=memory_id):
                return MemoryReply(memory=store.get(memory_id))
            case ListRequest():
                return MemoriesReply(
                    memories=store.list(
                        action=request.action,
                        agent=request.agent,
                        cwd=request.cwd,
                        tag=request.tag,
                        memory_type=request.memory_type,
                        rules_only=request.rules_only,
                        include_superseded=request.include_superseded,
                        limit=request.limit,
                    )
                )
            case HistoryRequest(id=memory_id):
                return MemoriesReply(memories=store.history(memory_id))
            case StoreRequest():
                memory = await _in_thread(
                    functools.partial(
                        store.store,
                        request.content,
                        memory_type=request.memory_type,
                        tags=request.tags,
                        agent=request.agent,
                        project=request.project,
                    )
                )
                return StoredReply(id=memory.id)
            case SupersedeRequest():
                new, old = await _in_thread(
                    functools.partial(
                        store.supersede,
                        request.id,
                        request.content,
                        tags=request.tags,
                        agent=request.agent,
                        project=request.project,
                    )
                )
                return SupersededReply(id=new.id, old=old)
            case ForgetRequest(id=memory_id):
                forgotten = await _in_thread(functools.partial(store.forget, memory_id))
                return ForgottenReply(id=forgotten.id)
            case StatusRequest():
                return self.status()
            case LogRequest(n=n):
                return LogReply(fires=self.hooks.recent_fires(max(0, n)))
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

    def reload(self) -> str | None:
        """Re-read the config file; keep the current settings when it is bad.

        Returns:
            None when reloaded, else the error message (also logged).
        """
        if self.options.on_reloading:
            self.options.on_reloading()
        error = self._reload_config()
        self.config_error = error
        if self.options.on_reloaded:
            self.options.on_reloaded(error)
        return error

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
            self.config_error = f"{exc} (the previous configuration stays in force)"
        else:
            self.config_error = None

    def _reload_config(self) -> str | None:
        try:
            config, matcher = self._load_settings()
        except ConfigError as exc:
            log.error("reload_failed", error=str(exc))
            return f"{exc} (the previous configuration stays in force)"
        except Exception as exc:  # noqa: BLE001 - a reload (SIGHUP too) must never end the daemon
            log.exception("reload_failed")
            return f"cannot reload the configuration: {exc!r} (the previous one stays in force)"
        self.config = config
        self.matcher = matcher
        self.hooks.reconfigure(matcher, config)
        log.info("reloaded", config=str(self.options.config_path))
        return None

    def status(self) -> StatusReply:
        self._check_config_on_disk()
        stats = self.store.stats()
        chars_per_session, sessions = self.hooks.chars_per_session()
        return StatusReply(
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
            last_hook_fire=self.hooks.last_fire,
            hook_chars_per_session=chars_per_session,
            hook_sessions=sessions,
            config=str(self.options.config_path) if self.options.config_path else None,
            config_error=self.config_error,
            socket_activated=self.options.inherited_socket is not None,
        )


class _SocketStream:
    """The two calls a connection needs, straight on the trio socket.

    trio.SocketStream adds what one task per connection does not need (conflict
    detection, a TCP option tried on every Unix socket, error translation) and costs
    ~8% of a lookup's round trip; here a peer that goes away raises OSError, which
    `_serve_connection` handles like any other connection error.
    """

    __slots__ = ("_sock",)

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self._sock = sock

    async def receive_some(self, max_bytes: int) -> bytes:
        return await self._sock.recv(max_bytes)

    async def send_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            sent = await self._sock.send(view)
            view = view[sent:]


def _frame_end(buffer: bytearray) -> int | None:
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


async def _in_thread(call: Callable[[], T]) -> T:
    """Run a blocking store write (it waits for fsync) off the trio thread."""
    result = await trio.to_thread.run_sync(_capture, call)
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


def _open_sessions(data_dir: Path, config: Config) -> SessionMemory | None:
    """The session memory; None when it cannot be opened (then no command is ever
    stopped: without it, nothing would keep a stop from coming twice)."""
    try:
        return SessionMemory(data_dir / "sessions", ttl_s=config.hook.session_ttl_s)
    except SessionMemoryError as exc:
        log.error("sessions_unavailable", error=str(exc))
        return None


def _try_open_spare() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return None


def _connection_limit() -> int:
    """Connections served at once: the descriptor limit less a reserve for the store,
    the listener and logging, so that the accept loop itself never runs dry."""
    import resource  # noqa: PLC0415 - start-up only

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 65536
    return max(8, soft - 32)
