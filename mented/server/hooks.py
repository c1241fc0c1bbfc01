"""Hook requests: an agent's event answered within its deadline, slow matches off the loop."""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

import trio

from mented.agents import AGENTS, ToolCall
from mented.first_answers import hook_deadline as _hook_deadline
from mented.git_aliases import NO_ALIASES
from mented.hooks import HookAnswer, decode_event
from mented.peercred import peer_pid
from mented.process_session import no_peer, with_process_session
from mented.protocol import HookRequest, frame
from mented.server.rule_writes import _RuleWrites

if TYPE_CHECKING:
    from collections.abc import Callable

    from mented.server.transport import _Connection

# CPU a command may take to match on the event loop; a slower one goes to a worker.
# Ordinary commands take 0.1 to 1 ms (docs/benchmarks.md, section 7).
_QUICK_MATCH_S = 0.005


class _Hooks(_RuleWrites):
    """The answer to a hook, and whether it was handed over in time."""

    async def _answer_hook_request(
        self, request: HookRequest, received: float, conn: _Connection
    ) -> bytes:
        """The reply frame for a hook request `received` at that time (time.monotonic)."""
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
