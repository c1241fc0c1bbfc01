"""What mented's text costs the model: sessions of commits, and a session start.

`bench_session_cost` is part of `mentectl bench` (in process, the daemon's own
hook handler); `session_start_cost` is part of the `lookups` benchmark run by
hand (a real daemon, pinned rules).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import msgspec

from mented.actions import load_action_table
from mented.agents.pretooluse import text_of_answer
from mented.config import Config
from mented.hooks import HookHandler
from mented.matcher import Matcher
from mented.memory import MemoryType, trigger_tag
from mented.protocol import StoredReply, StoreRequest
from mented.sessions import SessionMemory
from mented.store import Store
from mented_client.bench.corpus import RULES_PER_REPLY, hook_event, rule_text
from mented_client.bench.processes import Daemon
from mented_client.connection import Client


class SessionCost(msgspec.Struct, frozen=True, kw_only=True):
    """What a session of commits costs in mented text, with the default delivery."""

    commits: int
    rules: int
    chars: int  # mented's own text handed to the model over the session
    full_chars: int  # one full text of the rules
    full_texts: int  # answers that carried every rule's text
    stops: int  # commands stopped: each costs the model one extra turn


SESSION_COMMITS = (1, 10)


def bench_session_cost(root: Path) -> list[SessionCost]:
    """Sessions of 1 and 10 commits with RULES_PER_REPLY commit rules, in process.

    The daemon's own hook handler on the default configuration, as Claude Code
    drives it: a stopped command is run again at once. Counts mented's text in
    what the model is handed; docs/agents-e2e.md measures the same with the
    real agents, wrapping included.
    """
    data_dir = root / "session-cost"
    store = Store(data_dir, sync=False)
    sessions = SessionMemory(data_dir / "sessions", ttl_s=3600)
    try:
        for number in range(RULES_PER_REPLY):
            store.store(
                rule_text(number, "git-commit"),
                memory_type=MemoryType.PROCEDURAL,
                tags=[trigger_tag("git-commit")],
            )
        config = Config()
        handler = HookHandler(store, Matcher(load_action_table(config)), config, sessions)
        return [_session_cost(handler, commits) for commits in SESSION_COMMITS]
    finally:
        sessions.close()
        store.close()


def _session_cost(handler: HookHandler, commits: int) -> SessionCost:
    chars = full_chars = full_texts = stops = 0
    calls = 0
    for number in range(commits):
        command = f'git commit -m "fix: change {number}"'
        while True:  # the command, and its retry when it was stopped
            calls += 1
            out = handler.handle(
                "claude-code", hook_event(command, f"toolu_{calls}", session=f"cost-{commits}")
            )
            text = text_of_answer(out) or ""
            chars += len(text)
            if all(rule_text(n, "git-commit") in text for n in range(RULES_PER_REPLY)):
                full_texts += 1
                full_chars = len(text)
            if b'"permissionDecision":"deny"' not in out:
                break
            stops += 1
    return SessionCost(
        commits=commits,
        rules=RULES_PER_REPLY,
        chars=chars,
        full_chars=full_chars,
        full_texts=full_texts,
        stops=stops,
    )


def session_start_cost() -> tuple[int, int]:
    """Characters handed over at session start: one short rule, and the default cap full.

    Through a real daemon's hook request, as the `lookups` benchmark run by hand
    measures it (docs/benchmarks.md, "Pinned rules and facts recalled by topic").
    """
    with tempfile.TemporaryDirectory(prefix="mdb-", dir="/tmp") as tmp:
        root = Path(tmp)
        daemon = Daemon(root, "data", root / "config.toml")
        daemon.start()
        try:
            with Client(daemon.socket) as client:

                def hand_over(session: str) -> int:
                    event = json.dumps(
                        {
                            "hook_event_name": "SessionStart",
                            "source": "startup",
                            "session_id": session,
                            "cwd": "/work/app",
                        }
                    ).encode()
                    return len(text_of_answer(client.hook("claude-code", event)) or "")

                def pin(text: str) -> None:
                    client.expect(
                        StoreRequest(
                            content=text, memory_type=MemoryType.PROCEDURAL, tags=["pinned"]
                        ),
                        StoredReply,
                    )

                pin("Answer in British English.")
                one = hand_over("one")
                # The rest of the cap: five rules of 1,200 characters together.
                for n in range(4):
                    pin(f"Pinned rule {n}: " + "x" * (1174 // 4 - 16))
                full = hand_over("full")
        finally:
            daemon.stop()
    return one, full
