"""Facts: the recall index (opened late, let go when idle, kept up to date) and its searches."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from mented.log import log
from mented.protocol import RecalledReply, RecallFactsRequest, ReindexedReply
from mented.server.fires import _Fires
from mented.server.workers import T, _in_thread
from mented.store import StoreError

if TYPE_CHECKING:
    # Imported when the index is first opened (`_open_recall_once`): Tantivy is no
    # part of what the first hook after a start waits for.
    from mented.recall import RebuildSummary, RecallIndex

_RECALL_IDLE_S = 30.0  # the recall index lets go of Tantivy after this long unused
_RECALL_OPEN_AFTER_S = 1.0  # with no request by then, the recall index is opened anyway


class RecallUnavailableError(Exception):
    """Facts cannot be recalled: the index could not be opened (the message says why)."""


class _Facts(_Fires):
    """The recall index's life, the writes that keep it current, `recall` and `reindex`."""

    async def _answer_reindex(self) -> ReindexedReply:
        # As a scan: the collector paused, the GIL handed back often (it walks
        # every fact, building a document of each).
        summary = await self._scan(self._reindex)
        return ReindexedReply(facts=summary.facts, pinned=summary.pinned, seconds=summary.seconds)

    def _note_recall_use(self) -> None:
        self._recall_used.set()

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
