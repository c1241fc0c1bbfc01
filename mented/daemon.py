"""`mented`: run the daemon in the foreground.

It never forks itself: run it in a terminal, or let systemd/launchd supervise
it (see systemd/ and launchd/), or `mentectl start` for a detached one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import trio

from mented import __version__, paths
from mented.log import configure_logging, log
from mented.server import Server, ServerOptions, StartupError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mented",
        description="The mented daemon: serves action rules to AI coding agents' hooks.",
    )
    parser.add_argument(
        "--socket",
        metavar="PATH",
        help=f"Unix socket to listen on (default: ${paths.SOCKET_ENV}, else {paths.socket_path()})",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"LMDB data directory (default: ${paths.DATA_DIR_ENV}, else {paths.data_dir()})",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help=f"config file (default: ${paths.CONFIG_ENV}, else {paths.config_path()})",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="least severe log level written to stderr (default: info)",
    )
    parser.add_argument("--version", action="version", version=f"mented {__version__}")
    return parser


def options_from_args(args: argparse.Namespace) -> ServerOptions:
    return ServerOptions(
        socket_path=paths.socket_path(args.socket),
        data_dir=paths.data_dir(args.data_dir),
        config_path=paths.config_path(args.config),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level)
    server = Server(options_from_args(args))
    try:
        server.open()
    except StartupError as exc:
        log.error("cannot_start", error=str(exc))
        print(f"mented: {exc}", file=sys.stderr)
        return 1
    try:
        trio.run(server.serve)
    finally:
        server.close()
        log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
