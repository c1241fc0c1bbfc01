"""`mentectl`: the command line for mented.

This module only parses arguments. Each group of verbs lives in
`mented_client.commands.<group>` and registers itself through `register()`;
each handler takes the parsed arguments and returns the exit status.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mented.protocol import ErrorCode
from mented_client.commands import COMMAND_MODULES
from mented_client.commands.output import CommandError, fail
from mented_client.connection import DaemonError, NotRunningError, ProtocolError

_STORE_FAILURES = frozenset({ErrorCode.STORE_FULL, ErrorCode.STORE_DAMAGED, ErrorCode.STORE_FAILED})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mentectl",
        description="Manage mented: action rules for AI coding agents.",
    )
    socket_help = "the daemon's socket (default: $MENTED_SOCKET, else the per-user runtime path)"
    json_help = "print machine-readable JSON"
    parser.add_argument("--socket", metavar="PATH", help=socket_help)
    parser.add_argument("--json", action="store_true", help=json_help)
    # The same options after the verb too (`mentectl status --json --socket X`).
    # SUPPRESS keeps a verb's parser from resetting what was given before the verb.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=json_help)
    common.add_argument("--socket", metavar="PATH", default=argparse.SUPPRESS, help=socket_help)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMAND_MODULES:
        module.register(subparsers, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
    except NotRunningError as exc:
        return fail(str(exc))
    except DaemonError as exc:
        if exc.code in _STORE_FAILURES:  # not a refusal: the daemon could not do it
            return fail(f"{exc.message} ({exc.code})")
        return fail(f"mented refused: {exc.message} ({exc.code})")
    except ProtocolError as exc:
        return fail(str(exc))
    except CommandError as exc:
        return fail(str(exc), status=exc.status)
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
