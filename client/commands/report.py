"""`mentectl report`: whether rules are kept -- per rule version and per agent, from the hook."""

from __future__ import annotations

import argparse
import re

import msgspec

from mented.memory import short_handle
from mented.protocol import ReportReply, ReportRequest, ReportRow
from mented_client.commands.output import escape_controls, format_time, print_json
from mented_client.connection import Client
from mented_client.scope import agent_option

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
_SINCE = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw])")
COLUMNS = (
    "RULE",
    "HANDED",
    "CHECKED",
    "FIRST TRY",
    "STOPPED",
    "LET THROUGH",
    "TOLD",
    "FAILED AFTER",
    "PASSED 1ST",
    "RETRY CHANGED",
)


def since_option(text: str) -> float:
    """`7d`, `12h`, `30m`, `2w`: seconds."""
    match = _SINCE.fullmatch(text.strip())
    if match is None:
        msg = f"{text!r} is not a time span: give e.g. 7d, 12h, 30m or 2w"
        raise argparse.ArgumentTypeError(msg)
    return float(match.group(1)) * _UNITS[match.group(2)]


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    report = subparsers.add_parser(
        "report",
        parents=[common],
        help="whether your rules are kept: handed over, checked, passed, stopped, per rule",
        description=(
            "Per rule version and per agent, what the hook saw: HANDED (the rule went to the "
            "model in full), CHECKED (a command was tested on the rule's checks), FIRST TRY "
            "(it passed with no stop just before), STOPPED (a check failed: stopped), LET "
            "THROUGH (failed again after [checks] max_stops stops, and ran), TOLD (failed "
            'with [checks] mode = "tell", and ran), FAILED AFTER (a check that could not be '
            "told before the command ran, such as a message written in the editor, failed on "
            "what it did: the model was told to amend it), the share of checked commands that "
            "passed at the first attempt, and RETRY CHANGED: for a rule without checks, after "
            "the hook stopped a command to hand it over, how many of the commands that "
            "followed differed from the stopped one (2/3: two of three). The record keeps "
            "90 days (and at most 50,000 events) in the data directory; it is synced nowhere."
        ),
    )
    report.add_argument(
        "--since",
        type=since_option,
        default=7 * 86_400.0,
        metavar="SPAN",
        help="how far back, e.g. 7d (default), 24h, 2w",
    )
    report.add_argument("--agent", type=agent_option, help="only this agent's commands")
    report.set_defaults(handler=run_report)


def run_report(args: argparse.Namespace) -> int:
    with Client(args.socket) as client:
        reply = client.expect(ReportRequest(since_s=args.since, agent=args.agent), ReportReply)
    if args.json:
        print_json(msgspec.to_builtins(reply))
        return 0
    print(format_report(reply))
    return 0


def share(row: ReportRow) -> str:
    return "-" if row.share_passed_first is None else f"{row.share_passed_first:.0%}"


def format_report(reply: ReportReply) -> str:
    """The tables: one line per rule version (its text below), then per agent."""
    if not reply.rules:
        return (
            f"nothing recorded since {format_time(reply.since)}: no rule was handed over or "
            "checked (`mentectl rule add ACTION TEXT --check ...` adds a rule with checks)"
        )
    lines = [f"since {format_time(reply.since)}", _row(COLUMNS)]
    for row in reply.rules:
        lines.append(_row(_cells(f"[{short_handle(row.key)}]", row)))
        if row.content:
            text = row.content.strip().splitlines()[0]
            actions = ",".join(row.actions)
            lines.append(f"    {actions}: {text[:100]}")
    lines.append("")
    lines.append(_row(("AGENT", *COLUMNS[1:])))
    lines.extend(_row(_cells(row.key, row)) for row in reply.agents)
    lines.append(_row(_cells("total", reply.total)))
    return "\n".join(escape_controls(line, keep_lines=False) for line in lines)


def _cells(name: str, row: ReportRow) -> tuple[str, ...]:
    counts = (
        row.handed,
        row.checked,
        row.passed_first,
        row.stopped,
        row.let_through,
        row.told,
        row.failed_after,
    )
    return (name, *map(str, counts), share(row), retried(row))


def retried(row: ReportRow) -> str:
    """After stops that handed a rule without checks over: "changed/all" of the retries."""
    after = row.retry_changed + row.retry_same
    return "-" if after == 0 else f"{row.retry_changed}/{after}"


def _row(cells: tuple[str, ...]) -> str:
    widths = (14, 7, 8, 10, 8, 12, 5, 13, 10, 13)
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


def status_line(row: ReportRow | None) -> str | None:
    """`mentectl status`'s line: "checked 211 commands in 7 days: 94% passed first time, ..."."""
    if row is None:
        return None
    after = row.retry_changed + row.retry_same
    retries = f"{row.retry_changed} of {after} retries after a stop changed the command"
    if not row.checked:
        return f"{retries} (7 days)" if after else None
    return (
        f"checked {row.checked} commands in 7 days: {share(row)} passed first time, "
        f"{row.stopped} stopped, {row.let_through} let through"
        + (f", {row.told} told" if row.told else "")
        + (f", {row.failed_after} failed after the fact" if row.failed_after else "")
        + (f"; {retries}" if after else "")
    )
