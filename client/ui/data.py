"""What the page shows, asked of the daemon as mentectl asks it, as JSON-able values.

Every read is one of mentectl's socket requests (`mented_client.connection.Client`):
the page has no other way into the store. The rule verbs (add, supersede, forget)
run `mentectl rule ...` itself, in this process (`run_mentectl`): the page checks
what the command line checks and says what it says, word for word.

These functions block (a socket round trip, a doctor run): the app calls them from
worker threads.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import msgspec

from mented.memory import Memory, origin_of, short_handle
from mented.protocol import (
    ActionsReply,
    ActionsRequest,
    FireEvent,
    FireRecord,
    HistoryRequest,
    ListRequest,
    LogReply,
    LogRequest,
    MemoriesReply,
    ReportReply,
    ReportRequest,
    ReportRow,
    StatusReply,
    StatusRequest,
    event_decoder,
)
from mented_client.commands.log import DELIVERED
from mented_client.commands.output import describe_scope, untrusted_note
from mented_client.connection import Client, DaemonError

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator, Sequence
    from pathlib import Path

JSON = dict[str, Any]
# The daemon keeps this many fires (mented.server's log); a filtered look asks for all.
LOG_KEPT = 500
# The fields `mentectl log` filters on. Sent with the `log` request: a daemon that knows
# them filters there; one older than them ignores fields it does not know
# (`mented.protocol`: `forbid_unknown_fields=False`), so they are applied here as well.
LOG_FILTERS = ("session", "agent", "project", "action")
KEPT_DAYS_MAX = 90  # mented.compliance keeps 90 days
DAY_S = 86_400.0


def memory_json(memory: Memory, synced: Collection[str] = ()) -> JSON:
    """A memory as the page shows it: its fields, handle, scope in words and origin.

    `synced`: the ids a sync brought from another machine (the reply's `synced`);
    `from` is "yours", "team" or "synced" (`mented.memory.origin_of`).
    """
    shown: JSON = msgspec.to_builtins(memory)
    shown["handle"] = short_handle(memory.id)
    shown["actions"] = list(memory.actions)
    shown["pinned"] = memory.is_pinned
    shown["live"] = memory.is_live
    shown["scope"] = describe_scope(memory.agent, memory.project)
    shown["from"] = origin_of(memory, synced)
    return shown


def rules(socket: str | Path | None, cwd: str | None = None) -> JSON:
    """The live rules, by action (pinned ones apart), and the forks among them.

    `cwd`: as seen from this directory (`rule list --cwd`): a trusted project's team
    rules are listed with yours, and a note says when a project's are not trusted.
    Each says where it comes from (`from`: yours, team, or synced from another
    machine, which the daemon's per-machine index tells); the tips of a fork (a rule
    superseded on two machines while apart) are marked `fork`.
    """
    with Client(socket) as client:
        listing = client.expect(ListRequest(rules_only=True, cwd=cwd), MemoriesReply)
        status = client.expect(StatusRequest(), StatusReply)
    memories = listing.memories
    forked = {tip for tips in status.forks for tip in tips}
    by_action: dict[str, list[JSON]] = {}
    pinned: list[JSON] = []
    synced = set(listing.synced)
    for memory in memories:
        shown = memory_json(memory, synced)
        shown["fork"] = memory.id in forked
        if memory.is_pinned:
            pinned.append(shown)
        for action in memory.actions:
            by_action.setdefault(action, []).append(shown)
    return {
        "actions": [{"action": name, "rules": by_action[name]} for name in sorted(by_action)],
        "pinned": pinned,
        "forks": status.forks,
        "sync_remote": status.sync_remote,
        "cwd": cwd,
        "untrusted": None if listing.untrusted is None else untrusted_note(listing.untrusted),
    }


def history(socket: str | Path | None, memory_id: str) -> JSON:
    """Every kept version of a rule, oldest first, with what replaced what."""
    with Client(socket) as client:
        reply = client.expect(HistoryRequest(id=memory_id), MemoriesReply)
    versions = reply.memories
    kept = {version.id for version in versions}
    synced = set(reply.synced)
    shown = []
    for version in versions:
        one = memory_json(version, synced)
        links = [version.supersedes, version.superseded_by, *version.merges]
        one["forgotten_links"] = [link for link in links if link and link not in kept]
        shown.append(one)
    current = [version.id for version in versions if version.is_live]
    return {"versions": shown, "current": current, "fork": len(current) > 1}


def actions(socket: str | Path | None) -> JSON:
    """The action table in force, for the form that adds a rule."""
    with Client(socket) as client:
        reply = client.expect(ActionsRequest(), ActionsReply)
    return {"actions": msgspec.to_builtins(reply.actions)}


def delivered(mode: str, delivery: str) -> str:
    """How rules reached the model, in `mentectl log`'s words."""
    return DELIVERED.get((mode, delivery), "nothing")


def fire_json(fire: FireRecord) -> JSON:
    shown: JSON = msgspec.to_builtins(fire)
    shown["delivered"] = delivered(fire.mode, fire.delivery)
    shown["handles"] = [short_handle(rule) for rule in fire.rule_ids]
    return shown


def log(socket: str | Path | None, n: int = 100, filters: dict[str, str] | None = None) -> JSON:
    """The recent fires, newest first, filtered, and grouped by session."""
    wanted = {key: value for key, value in (filters or {}).items() if key in LOG_FILTERS and value}
    # The daemon filters (mented.activity); doctor's and setup's test fires are not the
    # user's activity.
    request = LogRequest(
        n=max(1, min(n, LOG_KEPT)),
        session=wanted.get("session"),
        agent=wanted.get("agent"),
        project=wanted.get("project"),
        action=wanted.get("action"),
        include_tests=False,
    )
    with Client(socket) as client:
        reply = client.expect(request, LogReply)
    fires = reply.fires
    sessions: dict[str, JSON] = {}
    for fire in fires:
        key = fire.session or ""
        group = sessions.setdefault(
            key,
            {"session": fire.session, "agent": fire.agent, "cwd": fire.cwd, "fires": []},
        )
        group["fires"].append(fire_json(fire))
    return {"fires": [fire_json(fire) for fire in fires], "sessions": list(sessions.values())}


_COUNTS = (
    "handed",
    "checked",
    "passed_first",
    "passed",
    "stopped",
    "let_through",
    "told",
    "failed_after",
    "retry_changed",
    "retry_same",
)


def kept(socket: str | Path | None, days: int = 14, agent: str | None = None) -> JSON:
    """Each rule's figures per day, over the last `days` days, oldest day first.

    The daemon reports counts since a time (`report`); one report per day back, and
    the difference of two neighbours is that day's counts.
    """
    days = max(1, min(days, KEPT_DAYS_MAX))
    with Client(socket) as client:
        reports = [
            client.expect(ReportRequest(since_s=day * DAY_S, agent=agent), ReportReply)
            for day in range(days + 1)
        ]
    now = time.time()
    series: dict[str, JSON] = {}
    for day in range(days, 0, -1):  # the day from `day` days ago to `day - 1` days ago
        newer = {row.key: row for row in reports[day - 1].rules}
        for row in reports[day].rules:
            counts = _difference(row, newer.get(row.key))
            entry = series.setdefault(
                row.key,
                {
                    "id": row.key,
                    "handle": short_handle(row.key),
                    "content": row.content,
                    "actions": row.actions,
                    "days": [],
                },
            )
            entry["days"].append({"start": now - day * DAY_S, **counts})
    for entry in series.values():  # days without a record of the rule count zero
        seen = {round(one["start"]) for one in entry["days"]}
        for day in range(days, 0, -1):
            start = now - day * DAY_S
            if round(start) not in seen:
                entry["days"].append({"start": start, **dict.fromkeys(_COUNTS, 0)})
        entry["days"].sort(key=lambda one: one["start"])
    total = msgspec.to_builtins(reports[days].total)
    return {"days": days, "rules": list(series.values()), "total": total, "now": now}


def _difference(older: ReportRow, newer: ReportRow | None) -> dict[str, int]:
    """The counts of `older` (a longer window) less those of `newer` (the shorter one)."""
    return {
        name: getattr(older, name) - (getattr(newer, name) if newer is not None else 0)
        for name in _COUNTS
    }


def health(socket: str | Path | None) -> JSON:
    """What `mentectl doctor` checks, as its checks say it, by agent; and sync's state."""
    # Doctor imports the agents, the service manager and the installers: only here.
    from mented import paths  # noqa: PLC0415 - see above
    from mented.agents import AGENTS  # noqa: PLC0415
    from mented_client.commands.doctor import run_checks  # noqa: PLC0415

    checks = run_checks(paths.socket_path(socket))
    groups: dict[str, list[JSON]] = {}
    for check in checks:
        words = check.link.split()
        agent = words[1] if len(words) > 1 and words[1] in AGENTS else None
        groups.setdefault(agent or "mented", []).append(asdict(check))
    status: StatusReply | None = None
    with (
        contextlib.suppress(ConnectionError, DaemonError),
        Client(socket, connect_timeout=2.0, timeout=2.0) as client,
    ):
        status = client.expect(StatusRequest(), StatusReply)
    sync = None
    if status is not None:
        sync = {
            "remote": status.sync_remote,
            "last_ok": status.sync_last_ok,
            "error": status.sync_error,
            "skipped": status.sync_skipped,
            "forks": status.forks,
        }
    return {
        "ok": not any(check.state == "fail" for check in checks),
        "groups": [{"name": name, "checks": found} for name, found in groups.items()],
        "sync": sync,
        "daemon": None
        if status is None
        else {"pid": status.pid, "version": status.version, "started_by": status.started_by},
    }


def event_json(body: bytes) -> JSON:
    """An event from the daemon as the page gets it; a fire says how the rules went."""
    event = event_decoder.decode(body)
    shown: JSON = msgspec.to_builtins(event)
    if isinstance(event, FireEvent):
        shown["delivered"] = delivered(event.mode, event.delivery)
    return shown


def events(
    socket: str | Path | None, reader_gone: int, subscribed: Callable[[], None]
) -> Iterator[JSON]:
    """The daemon's events as they come, until it closes or `reader_gone` is closed.

    `reader_gone` is the write end of a pipe: closing its read end ends the wait at
    once (`Client.events`' `output`), as a closed page ends its stream. `subscribed`
    is called once the daemon has subscribed this stream (events from then on come).
    """
    from mented.protocol import SubscribeRequest  # noqa: PLC0415 - the stream only

    with Client(socket) as client:
        for body in client.events(SubscribeRequest(), output=reader_gone, subscribed=subscribed):
            yield event_json(body)


# --------------------------------------------------------- the rule verbs, as mentectl

# One `mentectl` at a time in this process: it prints on the process's own streams.
_MENTECTL = threading.Lock()


def run_mentectl(socket: str | Path | None, words: Sequence[str], stdin_text: str = "") -> JSON:
    """`mentectl WORDS` run here, as the command line runs it: its exit status and what
    it printed on stdout and stderr (argparse's refusals as well).

    `stdin_text` is what `-` reads (a rule whose text is `-` is then itself).
    """
    from mented_client.cli import main  # noqa: PLC0415 - the rule verbs only

    argv = [*(["--socket", str(socket)] if socket is not None else []), *words]
    out, err = io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(stdin_text.encode()), encoding="utf-8")
    with _MENTECTL:
        saved_stdin = sys.stdin
        sys.stdin = stdin
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    status = main(argv)
                except SystemExit as exc:  # argparse's usage errors
                    status = exc.code if isinstance(exc.code, int) else 2
        finally:
            sys.stdin = saved_stdin
    return {"status": status, "stdout": out.getvalue(), "stderr": _usage_cut(err.getvalue())}


def _usage_cut(said: str) -> str:
    """argparse's refusal without the usage lines above it: the page has its form."""
    lines = said.splitlines()
    errors = [line for line in lines if ": error: " in line]
    return "\n".join(errors) if errors and lines[0].startswith("usage:") else said


def add_words(form: JSON) -> tuple[list[str], str]:
    """`rule add`'s words for the page's form (and what `-` would read)."""
    text = str(form.get("text", ""))
    words = ["rule", "add"]
    if form.get("agent"):
        words.append(f"--agent={form['agent']}")
    if form.get("project"):
        words.append(f"--project={form['project']}")
    words += [f"--check={check}" for check in _checks(form)]
    if form.get("pinned"):
        return [*words, "--pinned", "--", text], text
    return [*words, "--", str(form.get("action", "")), text], text


def supersede_words(form: JSON) -> tuple[list[str], str]:
    text = str(form.get("text", ""))
    words = ["rule", "supersede"]
    if form.get("no_checks"):
        words.append("--no-checks")
    words += [f"--check={check}" for check in _checks(form)]
    return [*words, "--", str(form.get("id", "")), text], text


def forget_words(form: JSON) -> list[str]:
    return ["rule", "forget", "--", str(form.get("id", ""))]


def _checks(form: JSON) -> list[str]:
    checks = form.get("checks") or []
    if isinstance(checks, str):
        checks = checks.splitlines()
    return [str(check) for check in checks if str(check).strip()]
