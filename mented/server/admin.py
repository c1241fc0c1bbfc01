"""What the daemon says of itself (`status`), and how it is asked to stop."""

from __future__ import annotations

import os
import time

from mented import __version__
from mented.compliance import report_row
from mented.log import log
from mented.pinned import over_cap
from mented.problems import DATA_DIR_FULL, FULL_BELOW_BYTES, data_dir_full, free_bytes
from mented.protocol import ErrorCode, ErrorReply, OkReply, Problem, Reply, StatusReply
from mented.server.settings import _Settings


class _Admin(_Settings):
    """`status`, `reload` and `shutdown` requests; a stop when the store fails."""

    def _answer_reload(self) -> Reply:
        error = self.reload()
        if error:
            return ErrorReply(code=ErrorCode.INVALID, message=error)
        return OkReply(message="configuration reloaded")

    def _answer_shutdown(self) -> OkReply:
        self.request_shutdown()
        return OkReply(message="shutting down")

    def request_shutdown(self) -> None:
        self._shutdown.set()

    def _stop_for_store_failure(self) -> None:
        """Stop serving: a process that can no longer use its store would answer
        every request with an error while its service manager, seeing it up, never
        restarts it. It stops as for a shutdown and `mented` exits non-zero."""
        if self.store_failure is None:
            self.store_failure = self.store.failure or "the store failed"
            log.error("store_failed", error=self.store_failure)
            self.request_shutdown()

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
