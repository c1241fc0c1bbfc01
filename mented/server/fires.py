"""Hook fires recorded: the activity log (`mentectl log`) and the compliance report."""

from __future__ import annotations

import time

import trio

from mented.activity import FireFilter
from mented.compliance import FLUSH_S as COMPLIANCE_FLUSH_S
from mented.compliance import report as compliance_report
from mented.log import log
from mented.memory import InvalidInputError, Memory
from mented.protocol import FireRecord, ReportReply, ReportRequest
from mented.server.admin import _Admin
from mented.server.workers import _PROJECT_READ_S
from mented.store import StoreError

LAST_FIRE_LOOKBACK = 50  # fires of the record looked at for `status`'s "last rules" at start


class _Fires(_Admin):
    """The records of hook fires, and the requests that read them."""

    async def _answer_report(self, request: ReportRequest) -> ReportReply:
        """Whether rules are kept (mented.compliance), since `since_s` ago."""
        since_s, agent = request.since_s, request.agent
        await self.project_reads.known_ready(time.monotonic() + _PROJECT_READ_S)
        return compliance_report(
            self.compliance,
            since=time.time() - max(0.0, since_s),
            agent=agent,
            rule_of=self._rule_or_none,
        )

    def _fired(self, fire: FireRecord) -> None:
        """A hook fire, once its answer was sent: recorded, and told to subscribers."""
        self.activity.append(fire)
        self.events.publish_fire(fire)

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

    def _rule_or_none(self, rule_id: str) -> Memory | None:
        """A rule version for the report: yours, or a trusted project's; None when gone."""
        try:
            return self.store.get(rule_id)
        except (StoreError, InvalidInputError):
            found = self.projects.find_rule(rule_id)
            return found[1] if found is not None else None
