"""`mentectl log`: the recent hook fires, what reached the model, and why."""

from __future__ import annotations

import argparse

import msgspec

from mented.protocol import FireRecord, LogReply, LogRequest
from mented_client.commands.output import escape_controls, format_time, print_json
from mented_client.connection import Client
from mented_client.scope import count_option

# How the rules went, in words: (mode, delivery) as the daemon records them.
DELIVERED = {
    ("stop", "full"): "stopped once",
    ("gate", "full"): "stopped once",  # a record of mented 0.1
    ("context", "full"): "context",
    ("context", "pointer"): "pointer",
}
COLUMNS = ("TIME", "AGENT", "DELIVERED", "ACTIONS", "RULES", "CHARS", "LATENCY")
TEST_FIRE = "test fire (`mentectl doctor` or `setup`): not counted as your agent's activity"


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    log = subparsers.add_parser(
        "log",
        parents=[common],
        help="recent hook fires: which command, which rules, how they reached the model",
        description=(
            "The most recent hook fires, newest first (the daemon keeps the last 500, in "
            "memory). DELIVERED says what reached the model: `stopped once` (the command was "
            "stopped with the rules as the reason, before it ran), `context` (the rules as "
            "extra context, which the agent shows after the command ran), `pointer` (one line: "
            "the session already had the rules) or `nothing`; the line below says why."
        ),
    )
    log.add_argument(
        "-n", type=count_option, default=20, metavar="N", help="how many (default: 20)"
    )
    log.set_defaults(handler=run_log)


def run_log(args: argparse.Namespace) -> int:
    with Client(args.socket) as client:
        reply = client.expect(LogRequest(n=args.n), LogReply)
    if args.json:
        print_json({"fires": msgspec.to_builtins(reply.fires)})
        return 0
    if not reply.fires:
        print("no hook fires yet")
        return 0
    print(format_fires(reply.fires))
    return 0


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
