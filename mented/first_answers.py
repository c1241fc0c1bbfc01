"""The daemon's first answers, before trio is imported: hooks answered with the standard library.

Under socket activation (systemd, launchd) the connection that started the daemon
waits in the listen backlog while it starts, and the hook behind it has 250 ms in
all. Importing trio alone takes longer than that on a busy machine, so `mented`
opens what a hook needs (the lock, the config and its matcher, the store, the
session memory, the handler: the same objects the trio server then serves with),
answers the hooks that are already waiting, and only then imports trio and hands
everything over (`Server.open` takes it: `ServerOptions.first_answers`).

What this phase answers, and what it leaves alone:

- It accepts on the listening socket, refuses another user's connection as the
  trio server does (`mented.peercred`), and reads at most `READ_BYTES` of each.
- A connection whose first frame is a complete hook request within those bytes
  is answered here, with the server's own steps (`decode_event`, the project's
  rules read by half the deadline, `HookHandler.answer_decoded`) and its rules:
  the deadline is the caller's (`hook_deadline`), an answer too late is empty,
  and what it hands over counts only once it was sent in time.
- So are `mentectl explain`'s two questions, `status` (the daemon's config file,
  for its table) and `recall_for_action` (the rules of an action found), with the
  trio server's own replies (`mented.replies`): unless the config file changed
  since it was read, the recall is a scan, or its projects are not read within
  `PROJECT_READ_S` -- then the trio server answers.
- An answered connection waits `NEXT_WAIT_S` for its next request (`explain`
  asks the rules a few tens of ms after the table), answered here if it is one
  of those, else the connection is handed over.
- Everything else -- another request, a frame not complete within
  `FRAME_WAIT_S`, one larger than `READ_BYTES` or than `MAX_FRAME` -- is left
  to the trio server with the bytes read so far (`Handover.pending`), which
  then applies its own bounds (frame size, request timeout, held bytes).

Nothing is lost or answered twice: a connection is either answered here once and
handed over with what follows its frame, or handed over with everything read from
it; the ones not accepted yet wait in the backlog for the trio server's accept.

The phase is bounded: it ends after `IDLE_S` with no connection waiting, at
`PHASE_S`, after `MAX_ANSWERS` answers, with `MAX_HELD` connections held, or as
soon as a request waits that only the trio server answers (it has waited long
enough). Each wait (a frame, an answer's send) ends by then too. It runs on the
main thread before trio is imported, not beside the import: on two cores a
thread importing trio took the GIL from the answer (see docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented.actions import load_action_table
from mented.agents import AGENTS, ToolCall
from mented.compliance import ComplianceRecord
from mented.config import Config, ConfigError, load_config
from mented.git_aliases import NO_ALIASES
from mented.hooks import HookAnswer, HookHandler, decode_event
from mented.listener import ListenerError, bind_socket, socket_identity
from mented.lockfile import DataDirBusyError, DataDirLock
from mented.log import log
from mented.matcher import Matcher
from mented.peercred import is_own_user, peer_pid, peer_uid
from mented.problems import Problems
from mented.process_session import no_peer, with_process_session
from mented.protocol import (
    HEADER,
    MAX_FRAME,
    ErrorReply,
    FireRecord,
    HookRequest,
    RecallRequest,
    Reply,
    StatusRequest,
    decode_request,
    encode,
    frame,
)
from mented.replies import (
    SCAN_ABOVE,
    LoopFigures,
    Served,
    percentile,
    problems_now,
    recall_reply,
    status_reply,
)
from mented.sessions import SessionMemory, SessionMemoryError
from mented.store import Store, StoreError
from mented.team import Project, ProjectRules, RuleLookup, read_project

if TYPE_CHECKING:
    from mented.sync import GitSync

HOOK_PREFIX = b'{"type":"hook"'  # how the shim starts every envelope
MAX_HOOK_WAIT_S = 10.0  # the longest a hook's caller says it waits (the shim's MAX_BUDGET_MS)
READ_BYTES = 64 * 1024  # a hook's event is a few KiB; a larger frame is the trio server's
FRAME_WAIT_S = 0.05  # the shim sends its request as it connects
# An answered connection's next request: `mentectl explain` asks the rules for the
# actions it found a few tens of ms after the daemon's table (`status`).
NEXT_WAIT_S = 0.1
PROJECT_READ_S = 0.1  # a `recall_for_action` whose projects take longer is the trio server's
IDLE_S = 0.02  # no connection for this long: the trio server takes over
PHASE_S = 1.0
MAX_ANSWERS = 64
MAX_HELD = 64  # connections accepted here and not yet handed over


def hook_deadline(caller_deadline: float | None, received: float, budget_ms: int) -> float:
    """When a hook's caller stops waiting, as a `time.monotonic()` value.

    The caller's own deadline (Unix seconds, sent in the request) says it even for a
    request that waited unread in the socket while the event loop was held; at most
    `MAX_HOOK_WAIT_S` from now (the shim's longest budget: a client whose clock is
    off cannot make the daemon hold an answer longer). Without one (a client older
    than the field), `budget_ms` (`[hook] budget_ms`) from when the request was read.
    """
    if caller_deadline is None:
        return received + budget_ms / 1000
    left = min(caller_deadline - time.time(), MAX_HOOK_WAIT_S)
    return time.monotonic() + left


class Handover(msgspec.Struct):
    """A connection accepted before trio, for the trio server to serve on."""

    sock: socket.socket
    pending: bytes = b""  # read from it and not answered: the start of its next request


class _Waiting(msgspec.Struct):
    sock: socket.socket
    give_up: float  # time.monotonic(): no complete frame by then, it is handed over
    data: bytes = b""


class FirstAnswers(msgspec.Struct):
    """What answers a hook, opened without trio, and the connections it took."""

    lock: DataDirLock
    config: Config
    config_stamp: tuple[int, int] | None
    matcher: Matcher
    store: Store
    sessions: SessionMemory
    problems: Problems
    projects: ProjectRules
    rules: RuleLookup
    hooks: HookHandler
    compliance: ComplianceRecord
    listen_sock: socket.socket
    socket_identity: tuple[int, int] | None  # of a socket we bound (None: inherited)
    relay: Relay
    socket_path: Path
    data_dir: Path
    config_path: Path | None
    socket_activated: bool = False  # listening on a socket the service manager handed over
    started_by: str = "unknown"
    started: float = msgspec.field(default_factory=time.time)  # for `status`'s uptime
    syncer: GitSync | None = None  # made by the first `status` answered here
    answered: int = 0
    latencies_us: list[float] = msgspec.field(default_factory=list)
    handed_over: list[Handover] = msgspec.field(default_factory=list)

    def take_connections(self) -> list[Handover]:
        """The connections for the trio server, once: it serves them from now on."""
        taken, self.handed_over = self.handed_over, []
        return taken

    def close(self) -> None:
        """Release everything (when the trio server never takes over)."""
        for handover in self.take_connections():
            handover.sock.close()
        self.listen_sock.close()
        self.store.close()
        self.sessions.close()
        self.compliance.close()
        self.lock.release()

    # ------------------------------------------------------------- answering

    def answer_waiting(
        self,
        *,
        phase_s: float = PHASE_S,
        idle_s: float = IDLE_S,
        max_answers: int = MAX_ANSWERS,
        frame_wait_s: float = FRAME_WAIT_S,
        next_wait_s: float = NEXT_WAIT_S,
    ) -> None:
        """Answer the hooks that arrive until the phase ends (see the module doc)."""
        started = time.monotonic()
        phase_end = started + phase_s
        idle_until = started + idle_s
        listener = self.listen_sock
        listener.setblocking(False)
        poller = select.poll()
        poller.register(listener.fileno(), select.POLLIN)
        waiting: dict[int, _Waiting] = {}
        accepting = True
        try:
            while self.answered < max_answers and self.store.failure is None:
                now = time.monotonic()
                if now >= phase_end or (not waiting and (not accepting or now >= idle_until)):
                    return
                until = min([phase_end, *(w.give_up for w in waiting.values())])
                if not waiting:
                    until = min(until, idle_until)
                ready = poller.poll(max(0.0, until - now) * 1000)
                now = time.monotonic()
                for fd, _ in ready:
                    if self.answered >= max_answers:
                        break  # the rest, read or not, are the trio server's
                    if fd == listener.fileno():
                        if not self._accept(poller, waiting, now + frame_wait_s):
                            # As many held as it may: the rest wait in the backlog.
                            accepting = False
                            poller.unregister(fd)
                    elif not self._read(poller, waiting, waiting[fd], phase_end, next_wait_s):
                        return  # a request that only the trio server answers waits
                if ready:
                    idle_until = time.monotonic() + idle_s
                for conn in list(waiting.values()):
                    if time.monotonic() >= conn.give_up:
                        self._hand_over(poller, waiting, conn)
        finally:
            for conn in list(waiting.values()):
                self._hand_over(poller, waiting, conn)

    def _accept(self, poller: select.poll, waiting: dict[int, _Waiting], give_up: float) -> bool:
        """Accept what waits on the listener; False when no more may be (held or failed)."""
        while len(waiting) + len(self.handed_over) < MAX_HELD:
            try:
                sock, _ = self.listen_sock.accept()
            except (BlockingIOError, InterruptedError):
                return True
            except OSError as exc:
                # Out of descriptors, say: the trio server's accept loop knows what to do.
                log.debug("first_answers_accept_failed", error=os.strerror(exc.errno or 0))
                return False
            if not is_own_user(sock):
                log.warning("peer_refused", peer_uid=peer_uid(sock))
                sock.close()
                continue
            sock.setblocking(False)
            waiting[sock.fileno()] = _Waiting(sock, give_up=give_up)
            poller.register(sock.fileno(), select.POLLIN)
        return False

    def _read(
        self,
        poller: select.poll,
        waiting: dict[int, _Waiting],
        conn: _Waiting,
        phase_end: float,
        next_wait_s: float,
    ) -> bool:
        """Read what `conn` sent; answer its complete requests. False when the phase should end."""
        try:
            chunk = conn.sock.recv(READ_BYTES - len(conn.data))
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            chunk = b""
        if not chunk:  # gone (or reset) before a whole request: nothing to answer
            poller.unregister(conn.sock.fileno())
            del waiting[conn.sock.fileno()]
            conn.sock.close()
            return True
        conn.data += chunk
        return self._serve_frames(poller, waiting, conn, phase_end, next_wait_s)

    def _serve_frames(
        self,
        poller: select.poll,
        waiting: dict[int, _Waiting],
        conn: _Waiting,
        phase_end: float,
        next_wait_s: float,
    ) -> bool:
        """Answer the complete requests `conn` sent, in turn, while they are ones this phase
        answers; then it waits for its next one (`NEXT_WAIT_S`). False when the phase should
        end: a request waits that only the trio server answers."""
        while len(conn.data) >= HEADER.size:
            (length,) = HEADER.unpack_from(conn.data)
            end = HEADER.size + length
            if length > MAX_FRAME or end > READ_BYTES:
                self._hand_over(poller, waiting, conn)  # its answer (or refusal) is the server's
                return True
            if len(conn.data) < end:
                return True
            try:
                answered = self._answer(conn.sock, conn.data[HEADER.size : end], phase_end)
            except Exception:  # noqa: BLE001 - a bug must cost one connection, never the daemon
                log.exception("connection_failed")
                answered = False
            if answered is None:  # nothing sent: the request, whole, is the trio server's
                self._hand_over(poller, waiting, conn)
                return False
            if not answered:
                poller.unregister(conn.sock.fileno())
                del waiting[conn.sock.fileno()]
                conn.sock.close()
                return True
            conn.data = conn.data[end:]
            conn.give_up = time.monotonic() + next_wait_s
        return True

    def _hand_over(self, poller: select.poll, waiting: dict[int, _Waiting], conn: _Waiting) -> None:
        poller.unregister(conn.sock.fileno())
        del waiting[conn.sock.fileno()]
        self.handed_over.append(Handover(conn.sock, conn.data))

    def _answer(self, sock: socket.socket, body: bytes, phase_end: float) -> bool | None:
        """Answer one request on `sock`: whether the connection may go on; None, with
        nothing sent, for a request that only the trio server answers."""
        started = time.perf_counter()
        received = time.monotonic()
        request = decode_request(body)
        answer: HookAnswer | None = None
        deadline = received + MAX_HOOK_WAIT_S
        if isinstance(request, HookRequest):
            deadline = hook_deadline(request.deadline, received, self.config.hook.budget_ms)
            answer = self._answer_hook(request, deadline, functools.partial(peer_pid, sock))
            if time.monotonic() >= deadline:
                answer.dropped()
                answer, reply = None, frame(b"")
            else:
                reply = frame(answer.out)
        elif isinstance(request, ErrorReply) and body.startswith(HOOK_PREFIX):
            # A hook envelope around stdin that was not JSON: answered with silence.
            reply = frame(b"")
        else:
            early = self._answer_early(request, min(phase_end, received + PROJECT_READ_S))
            if early is None:
                return None
            reply = encode(early)
        self.answered += 1
        self.latencies_us.append((time.perf_counter() - started) * 1e6)
        sent = _send_all(sock, reply, min(deadline, phase_end))
        if answer is not None:
            if sent and time.monotonic() < deadline:
                answer.sent()
            else:
                answer.dropped()
        return sent

    def _answer_early(self, request: object, until: float) -> Reply | None:
        """The reply to the other requests answered here (`mentectl explain`'s: the daemon's
        table, from `status`, and the rules of the actions it found), as the trio server
        replies; None for every other one, or when the trio server should answer it: the
        config file changed since it was read (`status` says whether it is valid), a
        recall is a scan, or its projects are not read by `until`."""
        if isinstance(request, StatusRequest):
            if file_stamp(self.config_path) != self.config_stamp:
                return None
            return self._status()
        if isinstance(request, RecallRequest) and request.k <= SCAN_ABOVE:
            if not self._read_projects(request.cwd, until):
                return None
            return recall_reply(self.rules, self.store, request)
        return None

    def _status(self) -> Reply:
        from mented.sync import GitSync  # noqa: PLC0415 - status only: not for the first hook

        if self.syncer is None:
            self.syncer = GitSync(
                self.data_dir,
                timeout_s=self.config.sync.timeout_s,
                max_fetch_bytes=self.config.sync.max_fetch_mib << 20,
            )
        served = Served(
            socket_path=self.socket_path,
            data_dir=self.data_dir,
            config_path=self.config_path,
            socket_activated=self.socket_activated,
            started_by=self.started_by,
            started=self.started,
            requests=self.answered,
            p50_us=percentile(self.latencies_us, 0.5),
            p99_us=percentile(self.latencies_us, 0.99),
        )
        return status_reply(
            served,
            LoopFigures(),  # no event loop yet: nothing held it
            config=self.config,
            store=self.store,
            hooks=self.hooks,
            compliance=self.compliance,
            syncer=self.syncer,
            projects=self.projects,
            problems=problems_now(self.problems, self.data_dir, None),
        )

    def _answer_hook(
        self, request: HookRequest, deadline: float, peer: Callable[[], int | None] = no_peer
    ) -> HookAnswer:
        """`Server._answer_hook` without an event loop to keep free: the same steps, in turn."""
        call = decode_event(request.agent, bytes(request.event))
        call = with_process_session(request.agent, call, peer)  # Kiro CLI: no session id
        if isinstance(call, ToolCall) and call.ran and AGENTS[request.agent].checks_only_after:
            return self.hooks.answer_decoded(
                request.agent, call, deadline=deadline, test=request.test
            )
        if isinstance(call, ToolCall):  # its project's rules, read by half the budget at most
            self._read_projects(call.cwd, (time.monotonic() + deadline) / 2)
        command = call.command if isinstance(call, ToolCall) else None
        aliases = self.hooks.git_aliases_for(call) if isinstance(call, ToolCall) else NO_ALIASES
        if command and time.monotonic() < deadline:
            # Matched up to the deadline (cached for the handler's lookup below): the
            # trio server first tries a quick match on its loop, then this in a worker.
            self.matcher.actions_in(command, deadline=deadline, aliases=aliases)
        return self.hooks.answer_decoded(
            request.agent, call, deadline=deadline, aliases=aliases, test=request.test
        )

    def _read_projects(self, cwd: str | None, until: float) -> bool:
        """`ProjectReads.ready` with a thread: each project read waits until `until` at most;
        one that takes longer is left to the trio server (which reads it again). Whether
        every one was read."""
        for root in self.projects.stale(cwd):
            read: list[Project] = []
            reader = threading.Thread(
                target=_read_into,
                args=(root, read),
                name="mented-first-project-read",
                daemon=True,
            )
            reader.start()
            reader.join(max(0.0, until - time.monotonic()))
            if not read:
                return False
            self.projects.install(read[0])
        return True


class Relay:
    """Where the handler's fires and the record's first waiting event go: kept until
    the trio server runs (it records them in the activity log), then to it."""

    def __init__(self) -> None:
        self._fires_to: Callable[[FireRecord], None] | None = None
        self._kept: list[FireRecord] = []  # at most MAX_ANSWERS
        self.compliance_waited = False  # the trio server flushes the record soon

    def fires_to(self, target: Callable[[FireRecord], None]) -> None:
        """From now on, send the fires to `target`, the kept ones first."""
        self._fires_to = target
        kept, self._kept = self._kept, []
        for fire in kept:
            target(fire)

    def fired(self, fire: FireRecord) -> None:
        if self._fires_to is None:
            self._kept.append(fire)
        else:
            self._fires_to(fire)

    def compliance_waits(self) -> None:
        self.compliance_waited = True


def _read_into(root: str, read: list[Project]) -> None:
    read.append(read_project(root))


def _send_all(sock: socket.socket, data: bytes, until: float) -> bool:
    """Send `data` whole by `until` (time.monotonic()); False if it could not be."""
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view) :]
        except (BlockingIOError, InterruptedError):
            left = until - time.monotonic()
            if left <= 0:
                return False
            select.select([], [sock], [], left)
        except OSError:
            return False
    return True


def open_first_answers(
    *,
    socket_path: Path,
    data_dir: Path,
    config_path: Path | None,
    inherited_socket: socket.socket | None,
    started_by: str = "unknown",
) -> FirstAnswers | None:
    """Open what answers a hook, as `Server.open` does; None when anything is amiss.

    Whatever it would have to report (a busy or unusable data directory, an invalid
    config file, a socket it cannot bind) it leaves, closed again, to `Server.open`,
    which opens it all again and reports it, or serves on the built-in settings.
    """
    opened: list[DataDirLock | Store | SessionMemory | ComplianceRecord] = []
    try:
        lock = DataDirLock(data_dir, socket_path)
        opened.append(lock)
        stamp = file_stamp(config_path)
        config = load_config(config_path)
        matcher = Matcher(load_action_table(config))
        store = Store(data_dir)
        opened.append(store)
        sessions = SessionMemory(data_dir / "sessions", ttl_s=config.hook.session_ttl_s)
        opened.append(sessions)
        problems = Problems()
        projects = ProjectRules(data_dir, read_inline=False)
        rules = RuleLookup(store, projects)
        compliance = ComplianceRecord(data_dir)
        opened.append(compliance)
        identity = None
        listen_sock = inherited_socket
        if listen_sock is None:
            listen_sock = bind_socket(socket_path)
            identity = socket_identity(socket_path)
    except (DataDirBusyError, StoreError, ConfigError, SessionMemoryError, ListenerError, OSError):
        for thing in reversed(opened):
            with contextlib.suppress(Exception):
                (thing.release if isinstance(thing, DataDirLock) else thing.close)()
        return None
    relay = Relay()
    hooks = HookHandler(rules, matcher, config, sessions, on_fire=relay.fired, problems=problems)
    compliance.on_waiting = relay.compliance_waits
    hooks.prechecks.compliance = compliance
    return FirstAnswers(
        lock=lock,
        config=config,
        config_stamp=stamp,
        matcher=matcher,
        store=store,
        sessions=sessions,
        problems=problems,
        projects=projects,
        rules=rules,
        hooks=hooks,
        compliance=compliance,
        listen_sock=listen_sock,
        socket_identity=identity,
        relay=relay,
        socket_path=socket_path,
        data_dir=data_dir,
        config_path=config_path,
        socket_activated=inherited_socket is not None,
        started_by=started_by,
    )


def file_stamp(path: Path | None) -> tuple[int, int] | None:
    """(mtime, size) of a file, to notice edits cheaply (the config, here and in `Server`);
    None when absent."""
    if path is None:
        return None
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size
