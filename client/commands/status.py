"""`mentectl status`: is the daemon up, and how is it doing."""

from __future__ import annotations

import argparse

import msgspec

from mented import paths
from mented.memory import short_handle
from mented.protocol import PinnedOverCap, StatusReply, StatusRequest
from mented.words import counted
from mented_client.commands.output import (
    error_document,
    escape_controls,
    fail,
    format_time,
    print_json,
)
from mented_client.commands.report import status_line
from mented_client.connection import Client, DaemonError, NotRunningError, ProtocolError
from mented_client.errors import BAD_REPLY, CONFIG_INVALID, DEGRADED, NOT_RUNNING


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    parser = subparsers.add_parser(
        "status",
        parents=[common],
        help="show whether the daemon runs, and its figures",
        description=(
            "Exit 0 when the daemon answers and its config file is valid; 1 with a one-line "
            "reason when it does not answer (or not as mented should), when the config "
            "file on disk is invalid (the daemon then runs on the previous one, or on the "
            "built-in settings when it started with the invalid file), or when it runs "
            "degraded (a `degraded:` line says how, and what to do)."
        ),
    )
    parser.set_defaults(handler=run_status)


def fetch_status(socket: str | None, timeout: float = 2.0) -> StatusReply:
    with Client(socket, connect_timeout=timeout, timeout=timeout) as client:
        return client.expect(StatusRequest(), StatusReply)


def run_status(args: argparse.Namespace) -> int:
    # With --json the failure is said in the one document, as `error` (see `output.fail`).
    try:
        status = fetch_status(args.socket)
    except NotRunningError as exc:
        if args.json:
            print_json(
                {"running": False, "reason": str(exc), **error_document(NOT_RUNNING, str(exc))}
            )
            return 1
        return fail(str(exc))
    except (ProtocolError, DaemonError) as exc:
        # Something holds the socket but does not answer as mented should.
        reason = f"mented at {paths.socket_path(args.socket)} is not answering properly: {exc}"
        if args.json:
            code = exc.code if isinstance(exc, DaemonError) else BAD_REPLY
            print_json(
                {
                    "running": True,
                    "healthy": False,
                    "reason": reason,
                    **error_document(code, reason),
                }
            )
            return 1
        return fail(reason)
    problem, unhealthy = _unhealthy(status)
    if args.json:
        document = {"running": True, "healthy": problem is None, **msgspec.to_builtins(status)}
        if problem is not None:
            document |= error_document(problem, unhealthy)
        print_json(document)
        return 0 if problem is None else 1
    print(render_status(status))
    if problem is not None:
        return fail(unhealthy)
    return 0


def _unhealthy(status: StatusReply) -> tuple[str | None, str]:
    """The error code and reason when `status` exits 1 (None: healthy)."""
    if status.config_error is not None:
        return CONFIG_INVALID, f"unhealthy: {status.config_error}"
    if status.problems:
        return DEGRADED, "degraded: " + "; ".join(problem.message for problem in status.problems)
    return None, ""


# How each way of starting the daemon reads in `status`, `start`, `setup` and `doctor`.
_STARTED_BY = {
    "systemd": "by systemd (the service)",
    "launchd": "by launchd (the service)",
    "mentectl": "detached, by `mentectl start`",
    "terminal": "in a terminal: it stops when that terminal closes",
    "other": "by hand, outside a terminal and a service manager",
}


def started_by(status: StatusReply) -> str | None:
    """How the daemon was started, in words; None when it does not say (an older daemon)."""
    return _STARTED_BY.get(status.started_by)


def _bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def _micros(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} µs"


def _handed(status: StatusReply) -> str:
    """Characters of rules handed to the model per agent session, on average."""
    if status.hook_chars_per_session is None:
        return "no rules handed to an agent since the daemon started"
    sessions = status.hook_sessions
    return (
        f"{status.hook_chars_per_session:.0f} characters of rules per agent session on average "
        f"({counted(sessions, 'session')} since the daemon started)"
    )


def render_status(status: StatusReply) -> str:
    fire = status.last_hook_fire
    last = (
        f"{format_time(fire.time)} {fire.agent}: {', '.join(fire.actions) or '-'}"
        if fire
        else "none yet (`mentectl log` lists every hook fire, with or without rules)"
    )
    rows = [
        ("mented", f"running (version {status.version}, protocol {status.protocol})"),
        ("pid", str(status.pid)),
        ("uptime", f"{status.uptime_s:.0f} s"),
        ("socket", status.socket + (" (socket-activated)" if status.socket_activated else "")),
        ("started", started_by(status) or status.started_by),
        ("data dir", status.data_dir),
        ("database", f"{_bytes(status.db_bytes)} of a {_bytes(status.map_bytes)} map"),
        (
            "memories",
            f"{status.memories} ({counted(status.live_rules, 'live rule')} for "
            f"{counted(status.actions_with_rules, 'action')})",
        ),
        (
            "requests",
            f"{status.requests_served} served, p50 {_micros(status.p50_us)}, "
            f"p99 {_micros(status.p99_us)}",
        ),
        ("loop", _loop_lag(status)),
        ("last rules", last),
        ("handed", _handed(status)),
    ]
    kept = status_line(status.checks_7d)  # the record of whether rules are kept
    if kept is not None:
        rows.append(("checks", kept))
    rows += pinned_rows(status)
    rows += sync_rows(status)
    if status.config_error:
        # The error says what serves meanwhile: the previous file, or the built-in settings.
        rows.append(("config", f"INVALID: {status.config_error}"))
    if status.recall_error:
        rows.append(("recall", f"UNAVAILABLE (rules work): {status.recall_error}"))
    rows.extend(("degraded", f"{p.message}; fix: {p.fix}") for p in status.problems)
    # The last fire's agent came with an event; the paths and the config error are files'.
    return "\n".join(
        f"{name + ':':<12}{escape_controls(value, keep_lines=False)}" for name, value in rows
    )


def _loop_lag(status: StatusReply) -> str:
    """The longest the event loop was held (every request waited that long)."""
    if status.loop_lag_ms is None:
        return "not measured by this daemon"
    task = status.loop_lag_task.rsplit(".", 1)[-1] if status.loop_lag_task else None
    by = f" ({task})" if task else ""
    return (
        f"held at most {status.loop_lag_ms:.1f} ms since start{by}, "
        f"{status.loop_lag_recent_ms or 0.0:.1f} ms in the last minute"
    )


def pinned_rows(status: StatusReply) -> list[tuple[str, str]]:
    """How many pinned rules are live against the cap, and the sessions over it."""
    if not status.pinned_live:
        return []
    rules = counted(status.pinned_max_rules, "rule")
    cap = f"the cap is {rules} and {status.pinned_max_chars} characters"
    rows = [("pinned", f"{counted(status.pinned_live, 'live rule')} ({cap} per session)")]
    rows.extend(
        (
            "pinned",
            "OVER THE CAP: "
            + describe_over_cap(over, status.pinned_max_rules, status.pinned_max_chars)
            + f"; {OVER_CAP_FIX}",
        )
        for over in status.pinned_over_cap
    )
    return rows


def describe_over_cap(over: PinnedOverCap, max_rules: int, max_chars: int) -> str:
    """One `over_cap` finding, in words, with the way out."""
    handles = ", ".join(short_handle(memory_id) for memory_id in over.left_out)
    return (
        f"{over.sessions} sees {over.live} pinned rules of {over.chars} characters, over "
        f"the cap of {counted(max_rules, 'rule')} and {max_chars} characters: a session start "
        f"leaves out the oldest {len(over.left_out)} ({handles})"
    )


OVER_CAP_FIX = (  # what to do about it
    "forget or merge some (`mentectl rule list --pinned`, `mentectl rule forget ID`, or "
    "supersede one with text that covers another, then forget that one), or raise "
    "[pinned] max_rules / max_chars in the config file"
)


def sync_rows(status: StatusReply) -> list[tuple[str, str]]:
    """Sync over git, and the rules two machines superseded apart (forks)."""
    rows = []
    if status.sync_remote is not None:
        last = format_time(status.sync_last_ok) if status.sync_last_ok else "never"
        state = f"FAILING ({status.sync_error}), retried" if status.sync_error else "ok"
        rows.append(("sync", f"{status.sync_remote}: last synced {last}, {state}"))
        if status.sync_skipped_total:
            rows.append(("sync", skipped_summary(status)))
    rows.extend(("fork", describe_fork(tips)) for tips in status.forks)
    rows.extend(("project", f"NOT SERVED: {why}") for why in status.untrusted_projects)
    return rows


def skipped_summary(status: StatusReply) -> str:
    """The files from the remote the last sync skipped, the first named."""
    first = status.sync_skipped[0] if status.sync_skipped else ""
    return (
        f"SKIPPED {status.sync_skipped_total} file(s) from the remote that mented would not "
        f"read (first: {first}); `mentectl log` and `mentectl sync` name them all"
    )


def describe_fork(tips: list[str]) -> str:
    """One rule with several current versions, and how to settle it."""
    return (
        f"a rule has {len(tips)} current versions ({', '.join(tips)}), superseded on "
        f"different machines; settle it with `mentectl rule supersede {tips[0]} TEXT`"
    )
