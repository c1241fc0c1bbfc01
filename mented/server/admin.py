"""What the daemon says of itself (`status`), and how it is asked to stop."""

from __future__ import annotations

from mented.log import log
from mented.protocol import ErrorCode, ErrorReply, OkReply, Reply, StatusReply
from mented.replies import LoopFigures, Served, problems_now, status_reply
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
        since = self.loop_lag.take()
        return status_reply(
            Served(
                socket_path=self.options.socket_path,
                data_dir=self.options.data_dir,
                config_path=self.options.config_path,
                socket_activated=self.options.inherited_socket is not None,
                started_by=self.options.started_by,
                started=self.stats.started,
                requests=self.stats.requests,
                p50_us=self.stats.percentile(0.5),
                p99_us=self.stats.percentile(0.99),
                config_error=self.config_error,
                recall_error=self.recall_error,
            ),
            LoopFigures(
                lag_ms=self.loop_lag.worst.seconds * 1000,
                lag_task=self.loop_lag.worst.task,
                recent_ms=self.loop_lag.recent.seconds * 1000,
                since_ms=since.seconds * 1000,
                since_task=since.task,
                subscribers=self.events.subscribers,
            ),
            config=self.config,
            store=self.store,
            hooks=self.hooks,
            compliance=self.compliance,
            syncer=self.syncer,
            projects=self.projects,
            problems=problems_now(self.problems, self.options.data_dir, self._store_full),
        )
