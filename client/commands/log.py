"""`mentectl log`: the recent hook fires, what reached the model, and why."""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import datetime

import msgspec

from mented.memory import InvalidInputError, action_from_input
from mented.protocol import FireRecord, LogReply, LogRequest
from mented_client.commands.output import escape_controls, format_time, print_json
from mented_client.connection import Client
from mented_client.scope import agent_option, count_option, project_option

# How the rules went, in words: (mode, delivery) as the daemon records them.
DELIVERED = {
    ("stop", "full"): "stopped once",
    ("gate", "full"): "stopped once",  # a record of mented 0.1
    ("context", "full"): "context",
    ("context", "pointer"): "pointer",
}
COLUMNS = ("TIME", "AGENT", "DELIVERED", "ACTIONS", "RULES", "CHARS", "LATENCY")
TEST_FIRE = "test fire (`mentectl doctor` or `setup`): not counted as your agent's activity"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w)", re.IGNORECASE)
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    log = subparsers.add_parser(
        "log",
        parents=[common],
        help="recent hook fires: which command, which rules, how they reached the model",
        description=(
            "The most recent hook fires, newest first, from the daemon's activity record (kept "
            "in the data directory across restarts, bounded by `[activity]` in the config "
            "file). DELIVERED says what reached the model: `stopped once` (the command was "
            "stopped with the rules as the reason, before it ran), `context` (the rules as "
            "extra context, which the agent shows after the command ran), `pointer` (one line: "
            "the session already had the rules) or `nothing`; the line below says why. "
            "`mentectl doctor`'s and `setup`'s test fires are left out unless asked for."
        ),
    )
    log.add_argument(
        "-n", type=count_option, default=20, metavar="N", help="how many (default: 20)"
    )
    log.add_argument(
        "--session", metavar="ID", help="only this session's fires (its id, or how it begins)"
    )
    log.add_argument("--agent", type=agent_option, help="only this agent's fires")
    log.add_argument(
        "--project",
        type=project_option,
        metavar="DIR",
        help="only the fires of commands run in this directory or under it",
    )
    log.add_argument("--action", type=action_option, help="only the fires that named this action")
    log.add_argument(
        "--since",
        type=since_option,
        metavar="WHEN",
        help="only the fires since then: a time back from now (90s, 30m, 2h, 7d, 2w) or an "
        "ISO time (2026-12-01T09:00, local time unless it has an offset)",
    )
    log.add_argument(
        "--include-tests",
        action="store_true",
        help="also the test fires of `mentectl doctor` and `setup`",
    )
    log.set_defaults(handler=run_log)


def action_option(value: str) -> str:
    """argparse type for `--action`: an action name, normalized (`trigger:` dropped).

    Not checked against the table in force: the record keeps the fires of an action
    the config file no longer has.
    """
    try:
        return action_from_input(value)
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def since_option(value: str, *, now: float | None = None) -> float:
    """argparse type for `--since`: a duration back from `now` or an ISO time, as Unix seconds."""
    text = value.strip()
    if (duration := _DURATION.fullmatch(text)) is not None:
        amount, unit = duration.groups()
        return (time.time() if now is None else now) - float(amount) * _SECONDS[unit.lower()]
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        msg = (
            f"{value!r} is neither a duration nor an ISO time: give a time back from now "
            "(90s, 30m, 2h, 7d, 2w) or a date and time (2026-12-01 or 2026-12-01T09:00, "
            "local time unless it has an offset such as +01:00 or Z)"
        )
        raise argparse.ArgumentTypeError(msg) from None
    return when.timestamp()  # a naive time is local time


def run_log(args: argparse.Namespace) -> int:
    request = LogRequest(
        n=args.n,
        session=args.session or None,
        agent=args.agent,
        project=args.project,
        action=args.action,
        since=args.since,
        include_tests=args.include_tests,  # False: without them (None would be with)
    )
    with Client(args.socket) as client:
        reply = client.expect(request, LogReply)
    if args.json:
        document: dict[str, object] = {"fires": msgspec.to_builtins(reply.fires)}
        if reply.more:
            document["more"] = True
        if reply.not_kept:
            document["not_kept"] = reply.not_kept
        print_json(document)
        return 0
    if reply.not_kept:
        print(f"mentectl: note: {reply.not_kept}", file=sys.stderr)
    if not reply.fires:
        print(_nothing(request))
        return 0
    print(format_fires(reply.fires))
    if reply.more:
        print(f"(more fires than one answer holds: ask for fewer than {args.n}, or filter)")
    return 0


def _nothing(request: LogRequest) -> str:
    """What to say when no fire was found (a filter may be why)."""
    filtered = any(
        value is not None
        for value in (
            request.session,
            request.agent,
            request.project,
            request.action,
            request.since,
        )
    )
    if filtered:
        return "no hook fires match"
    if request.include_tests:
        return "no hook fires yet"
    return "no hook fires of your agents yet (`--include-tests` shows the test fires too)"


def format_fires(fires: list[FireRecord]) -> str:
    """The fires under column headers, each with its command, place and reason below."""
    rows = [COLUMNS, *(_columns(fire) for fire in fires)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS) - 1)]
    lines = []
    for index, row in enumerate(rows):
        head = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        lines.append(f"{head}  {row[-1]}".rstrip())
        if index:
            lines.extend(_details(fires[index - 1]))
    return "\n".join(lines)


def delivered(fire: FireRecord) -> str:
    """What reached the model, in words (`stopped once`, `context`, `pointer`, `nothing`)."""
    return DELIVERED.get((fire.mode, fire.delivery), "nothing")


def _columns(fire: FireRecord) -> tuple[str, ...]:
    visible = len(fire.rule_ids)
    rules = str(visible)
    if fire.delivery == "full" and len(fire.full_ids) < visible:  # some left out for room
        rules = f"{len(fire.full_ids)} of {visible}"
    return (
        format_time(fire.time),
        escape_controls(fire.agent, keep_lines=False),  # it came with the event
        delivered(fire),
        ",".join(fire.actions),
        rules,
        str(fire.chars),
        f"{fire.latency_us:.0f} µs",
    )


def _details(fire: FireRecord) -> list[str]:
    # The command, cwd and session came with the event; only a command has lines.
    where = f"    in {fire.cwd or '?'}" + (f", session {fire.session}" if fire.session else "")
    lines = [f"    $ {escape_controls(fire.command)}", escape_controls(where, keep_lines=False)]
    if fire.test:
        lines.append(f"    {TEST_FIRE}")
    if fire.why:
        lines.append(f"    why: {escape_controls(fire.why, keep_lines=False)}")
    if fire.rule_ids:
        lines.append(f"    rules: {' '.join(fire.rule_ids)}")
    return lines
