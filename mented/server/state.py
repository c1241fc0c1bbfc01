"""What one daemon holds: its options, settings, store, handlers, limits and counters."""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from mented.activity import ActivityLog
from mented.compliance import ComplianceRecord
from mented.config import Config
from mented.events import EventHub
from mented.first_answers import Handover
from mented.hooks import HookHandler
from mented.lockfile import DataDirLock
from mented.looplag import LoopLag
from mented.matcher import Matcher
from mented.problems import Problems
from mented.replies import percentile
from mented.server.bounds import HOOK_SHARE, _connection_limit, _HeldBytes
from mented.server.options import ServerOptions
from mented.sessions import SessionMemory
from mented.store import Store
from mented.sync import GitSync
from mented.team import ProjectRules, RuleLookup
from mented.team_reads import ProjectReads

if TYPE_CHECKING:
    # Imported when the index is first opened (`_open_recall_once`): Tantivy is no
    # part of what the first hook after a start waits for.
    from mented.recall import RecallIndex

_LATENCY_WINDOW = 4096  # requests kept for the p50/p99 in `status`
_SLOW_MATCHES = 2  # worker threads matching slow commands at once
_SEARCHES = 2  # worker threads recalling facts at once (the others wait, off the loop)


@dataclass
class _Stats:
    started: float = field(default_factory=time.time)
    requests: int = 0
    latencies_us: deque[float] = field(default_factory=lambda: deque(maxlen=_LATENCY_WINDOW))

    def percentile(self, fraction: float) -> float | None:
        return percentile(self.latencies_us, fraction)


class _State:
    """The daemon's state, made empty; `open` fills it (see `_Lifecycle`)."""

    # Set by `open` (or `_take_over`), with the store they read.
    projects: ProjectRules
    project_reads: ProjectReads
    rules: RuleLookup
    activity: ActivityLog
    compliance: ComplianceRecord
    _compliance_waits: trio.Event

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
