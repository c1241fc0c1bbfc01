"""`mentectl watch`: the daemon's events as they happen, one line each.

It subscribes on the socket (docs/protocol.md, `subscribe`) and prints each event:
for people a line with the time, the kind and the essentials, every value from an
event passed through `escape_controls`; with `--json` the event as on the wire, one
object per line, for scripts.

When the daemon drops the watch (it fell 1,000 events behind: whatever reads its
output is too slow), it says so and exits 3 rather than subscribing again: events
were lost in between, and a script reading the stream must know; a reader that
slow would fall behind again anyway. When the daemon stops, it exits 1.
"""

from __future__ import annotations

import argparse
import sys
import time

from mented.memory import short_handle
from mented.protocol import (
    EVENT_KINDS,
    ConfigEvent,
    DroppedEvent,
    Event,
    FireEvent,
    RuleEvent,
    SubscribeRequest,
    event_decoder,
)
from mented_client.commands.log import DELIVERED
from mented_client.commands.output import CommandError, escape_controls, json_line
from mented_client.connection import Client, ProtocolError
from mented_client.errors import DAEMON_STOPPED, WATCH_DROPPED
from mented_client.scope import project_option

DROPPED_STATUS = 3  # the daemon dropped the watch: events were missed


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    watch = subparsers.add_parser(
        "watch",
        parents=[common],
        help="show hook fires, rule changes and config reloads as they happen",
        description=(
            "Show the daemon's events as they happen, one line each, until Ctrl-C: hook fires "
            "(agent, directory, actions, rule handles, how they reached the model), rule "
            "changes (added, superseded, forgotten, imported, synced) and config reloads. "
            "With --json, each event as the daemon sends it (docs/protocol.md), one JSON "
            "object per line. Exits 3 if the daemon drops the watch for falling behind."
        ),
    )
    watch.add_argument(
        "--project",
        type=project_option,
        metavar="DIR",
        help="only what concerns this directory: fires in it, rules that apply there, "
        "imports, syncs and reloads",
    )
    watch.add_argument(
        "--kind",
        action="append",
        choices=EVENT_KINDS,
        help="only these events (repeat for several; default: all)",
    )
    watch.set_defaults(handler=run_watch)


def run_watch(args: argparse.Namespace) -> int:
    kinds = list(dict.fromkeys(args.kind or EVENT_KINDS))
    request = SubscribeRequest(kinds=kinds, project=args.project)
    with Client(args.socket) as client:
        for body in client.events(request, output=sys.stdout.fileno()):
            try:
                event = event_decoder.decode(body)
            except Exception as exc:
                raise ProtocolError(f"unreadable event from mented: {exc}") from exc
            if isinstance(event, DroppedEvent):
                sys.stdout.flush()
                raise CommandError(
                    f"mented dropped this watch: {event.message} (events were missed)",
                    DROPPED_STATUS,
                    code=WATCH_DROPPED,
                )
            line = json_line(body) if args.json else format_event(event)
            print(line, flush=True)
    raise CommandError(
        "mented closed the connection (it stopped); run `mentectl watch` again",
        code=DAEMON_STOPPED,
    )


def format_event(event: Event) -> str:
    """One event as one line for a person, every value from the event escaped."""
    clock = time.strftime("%H:%M:%S", time.localtime(event.time))
    match event:
        case FireEvent():
            what = _fire(event)
        case RuleEvent():
            what = _rule(event)
        case ConfigEvent():
            what = _config(event)
        case DroppedEvent(message=message):
            what = f"dropped  {message}"
    return f"{clock}  {escape_controls(what, keep_lines=False)}"


def _fire(event: FireEvent) -> str:
    handles = " ".join(f"[{handle}]" for handle in event.handles) or "no rules"
    delivered = DELIVERED.get((event.mode, event.delivery), "nothing")
    command = _first_line(event.command)
    return (
        f"fire     {event.agent} in {event.cwd or '?'}: {','.join(event.actions)} "
        f"{handles} ({delivered})  $ {command}"
    )


def _rule(event: RuleEvent) -> str:
    if not isinstance(event.id, str):  # a batch: imported, synced
        return (
            f"rule     {event.change}: {event.added or 0} added, {event.forgotten or 0} forgotten"
        )
    actions = event.actions if isinstance(event.actions, list) else []
    kind = ",".join(actions) or "fact"
    replaces = f" (replaces [{short_handle(event.replaces)}])" if event.replaces else ""
    scope = [f"agent={event.agent}"] if isinstance(event.agent, str) else []
    if isinstance(event.project, str):
        scope.append(f"project={event.project}")
    where = f" ({' '.join(scope)})" if scope else ""
    content = _first_line(event.content if isinstance(event.content, str) else "")
    return f"rule     {event.change} [{event.handle}]{replaces} {kind}{where}: {content}"


def _config(event: ConfigEvent) -> str:
    config = event.config or "the built-in settings"
    if event.error:
        return f"config   not reloaded, the previous one stays: {event.error}"
    return f"config   reloaded {config}"


def _first_line(text: str) -> str:
    first, newline, _ = text.partition("\n")
    return first + (" …" if newline else "")
