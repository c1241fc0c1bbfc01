"""The daemon's life: start-up (or taking over from the first answers), serving, stopping."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Self

import trio

from mented import __version__
from mented.activity import ActivityLog
from mented.compliance import ComplianceRecord
from mented.config import Config
from mented.first_answers import FirstAnswers
from mented.hooks import HookHandler
from mented.listener import ListenerError, bind_socket, remove_socket_if_ours, socket_identity
from mented.lockfile import DataDirBusyError, DataDirLock
from mented.log import log
from mented.problems import SESSION_MEMORY, Problems, session_memory_unavailable
from mented.server.options import StartupError
from mented.server.transport import _Transport
from mented.service import has_controlling_terminal
from mented.sessions import SessionMemory, SessionMemoryError
from mented.store import Store, StoreError
from mented.sync import GitSync
from mented.team import ProjectRules, RuleLookup
from mented.team_reads import ProjectReads

# How long a thread holding the GIL keeps it from another that wants it (Python's
# default: 5 ms). Shorter, so that the event loop waits less behind a slow match.
_GIL_SWITCH_INTERVAL_S = 0.0005


def _stop_writing_to_the_terminal() -> None:
    """Point stdout and stderr at /dev/null: every write to a hung-up terminal fails."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (1, 2):
            os.dup2(null, fd)
    finally:
        os.close(null)


def _open_sessions(data_dir: Path, config: Config, problems: Problems) -> SessionMemory | None:
    """The session memory; None when it cannot be opened (then no command is ever
    stopped: without it, nothing would keep a stop from coming twice; `problems` says so)."""
    try:
        return SessionMemory(data_dir / "sessions", ttl_s=config.hook.session_ttl_s)
    except SessionMemoryError as exc:
        log.error("sessions_unavailable", error=str(exc))
        problems.note(SESSION_MEMORY, *session_memory_unavailable(str(exc), reopens=False))
        return None


class _Lifecycle(_Transport):
    """`open`, `serve` and `close`, and the tasks that run beside the connections."""

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
        self.syncer = first.syncer or GitSync(
            opts.data_dir,
            timeout_s=self.config.sync.timeout_s,
            max_fetch_bytes=self.config.sync.max_fetch_mib << 20,
        )
        self.stats.started = first.started  # `status`'s uptime: since the first answers'
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

    async def serve(self, *, task_status: trio.TaskStatus[Self] = trio.TASK_STATUS_IGNORED) -> None:
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
        self, listener: trio.socket.SocketType, task_status: trio.TaskStatus[Self]
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
