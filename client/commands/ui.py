"""`mentectl ui`: a local page over the daemon (rules, activity, kept, health).

Only argparse here: the page's server (`mented_client.ui`, with Starlette and
uvicorn from the optional extra `mented[ui]`) is imported when the verb runs, so
no other verb pays for it, and without the extra the verb says how to install it.
"""

from __future__ import annotations

import argparse
import importlib.util

from mented_client.commands.output import CommandError

INSTALL = "pip install 'mented[ui]'"
DEFAULT_IDLE_MINUTES = 10.0


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    ui = subparsers.add_parser(
        "ui",
        parents=[common],
        help="a local page: your rules and their history, what reached each agent, "
        "whether rules are kept, health",
        description=(
            "Serve a page on 127.0.0.1 and print its address, with a secret token: open it "
            "in your browser. It asks the daemon what mentectl asks it. It stops with Ctrl-C, "
            "or once the page has been closed for --idle minutes. Needs the optional extra: "
            f"{INSTALL}."
        ),
    )
    ui.add_argument("--open", action="store_true", help="open the page in the browser")
    ui.add_argument(
        "--port",
        type=_port,
        default=0,
        help="listen on this port of 127.0.0.1 (default: a free one)",
    )
    ui.add_argument(
        "--idle",
        type=_minutes,
        default=DEFAULT_IDLE_MINUTES,
        metavar="MINUTES",
        help=f"stop once the page has been closed this long (default: {DEFAULT_IDLE_MINUTES:g})",
    )
    ui.set_defaults(handler=run_ui)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        msg = f"{text!r} is not a port: give a number from 1 to 65535 (0: a free one)"
        raise argparse.ArgumentTypeError(msg)
    return port


def _minutes(text: str) -> float:
    try:
        minutes = float(text)
    except ValueError:
        minutes = -1.0
    if not minutes > 0:
        msg = f"{text!r} is not a number of minutes: give e.g. 10 or 0.5"
        raise argparse.ArgumentTypeError(msg)
    return minutes


def run_ui(args: argparse.Namespace) -> int:
    missing = [name for name in ("starlette", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise CommandError(
            f"`mentectl ui` needs {' and '.join(missing)}, which {verb} not installed: {INSTALL}"
        )
    from mented.protocol import StatusReply, StatusRequest  # noqa: PLC0415 - see the docstring
    from mented_client.connection import Client  # noqa: PLC0415
    from mented_client.ui.app import serve  # noqa: PLC0415

    with Client(args.socket) as client:  # a page over no daemon would only show errors
        client.expect(StatusRequest(), StatusReply)
    return serve(
        args.socket,
        port=args.port,
        open_browser=args.open,
        idle_s=args.idle * 60,
        as_json=args.json,
    )
