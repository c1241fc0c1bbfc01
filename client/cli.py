"""`mentectl`: the command line for mented.

This module only parses arguments. Each group of verbs lives in
`mented_client.commands.<group>` and registers itself through `register()`;
each handler takes the parsed arguments and returns the exit status.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from mented import __version__
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
    parser.add_argument("--version", action="version", version=f"mentectl {__version__}")
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
    _describe_verbs(parser)
    return parser


def _describe_verbs(parser: argparse.ArgumentParser) -> None:
    """Give every verb without a description its one-line help as one, for `VERB --help`."""
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its verbs nowhere else
        if not isinstance(action, argparse._SubParsersAction):  # noqa: SLF001 - as above
            continue
        for choice in action._choices_actions:  # noqa: SLF001 - the verbs' help texts
            verb = action.choices[choice.dest]
            if verb.description is None and choice.help:
                verb.description = choice.help[0].upper() + choice.help[1:] + "."
            _describe_verbs(verb)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    for word in words:
        if not _is_utf8(word):
            shown = word.encode("utf-8", "surrogateescape")
            return fail(f"an argument is not valid UTF-8 text: {shown!r}", status=2)
    parser = build_parser()
    args = parser.parse_args(words)
    try:
        status: int = args.handler(args)
        sys.stdout.flush()  # here, so that a closed pipe is seen here (see below)
    except BrokenPipeError:
        # The reader went away (`mentectl rule list | head -1`): stop quietly, as
        # programs killed by SIGPIPE do. Python would flush stdout again at exit
        # and print a second error: point it at /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE
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


def _is_utf8(word: str) -> bool:
    """False for a word with bytes that are not UTF-8 (Python keeps them as surrogates)."""
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
