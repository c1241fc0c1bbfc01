"""Memories that travel: export, import, and git sync (asked for, and by itself)."""

from __future__ import annotations

import functools
from pathlib import Path

import trio

from mented.log import log
from mented.memory import InvalidInputError, new_id
from mented.portable import export_store, import_streamed, unknown_action_warnings
from mented.protocol import ExportedReply, ImportedReply, Reply, SyncedReply, SyncRequest
from mented.server.facts import _Facts
from mented.server.workers import _in_thread
from mented.store import StoreError
from mented.sync import SyncError

_SYNC_CHECK_S = 60.0  # with [sync] off, how often to look whether a reload turned it on
_SYNC_SETTLE_S = 2.0  # after a write, wait this long for more before syncing them together


class _Travel(_Facts):
    """`export`, `import` and `sync`, and the sync that runs by itself."""

    async def _answer_import(self, path: str, shown_as: str | None) -> ImportedReply:
        imported = await self._scan(functools.partial(self._indexed, self._import, path, shown_as))
        self._note_change()
        self.events.publish_batch("imported", added=imported.added, forgotten=imported.forgotten)
        return imported

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
