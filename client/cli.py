"""`mentectl`: the command line for mented.

This module only parses arguments. Each group of verbs lives in
`mented_client.commands.<group>` and registers itself through `register()`;
each handler takes the parsed arguments and returns the exit status.

It stays light: `mentectl VERB` imports the one module of that verb (see
`mented_client.commands.VERBS`), and the modules behind errors only when one
happens, so that `mentectl --version` costs an interpreter start and
`mentectl status` little more than the protocol it speaks.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Iterable, Sequence

from mented import __version__
from mented_client.commands import COMMAND_MODULES, VERBS, command_module
from mented_client.errors import (
    BAD_REPLY,
    COMMAND_FAILED,
    INVALID_ARGUMENT,
    NOT_RUNNING,
    CommandError,
)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with "did you mean" for a choice mistyped (a verb, an agent).

    Every verb's parser is one too (`add_subparsers` makes them of its parser's class).
    """

    def _check_value(self, action: argparse.Action, value: object) -> None:
        if action.choices is None or value in action.choices:
            return
        from mented_client.suggest import did_you_mean  # noqa: PLC0415 - errors only

        choices = ", ".join(map(repr, action.choices))
        hint = did_you_mean(str(value), map(str, action.choices))
        raise argparse.ArgumentError(
            action, f"invalid choice: {value!r}{hint} (choose from {choices})"
        )


def build_parser(words: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `words`: with only the verb's group registered when it names one.

    Without `words`, or when they name no known verb (`--help`, a typo, a verb
    missing from `VERBS`), every group is registered, for the full listing and
    argparse's own "invalid choice" message. `--version` alone registers none.
    """
    # Typed as argparse's: the verbs' modules take its subparsers (they are `_Parser`s).
    parser: argparse.ArgumentParser = _Parser(
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
    for name in _groups_for(words):
        command_module(name).register(subparsers, common)
    _describe_verbs(parser)
    return parser


def _groups_for(words: Sequence[str] | None) -> Iterable[str]:
    """The command modules to register for `words` (see `build_parser`)."""
    if words is None:
        return COMMAND_MODULES
    verb = _verb_of(words)
    if verb in VERBS:
        return (VERBS[verb],)
    if verb is None and "--version" in words and not {"-h", "--help"} & set(words):
        return ()
    return COMMAND_MODULES


def _verb_of(words: Sequence[str]) -> str | None:
    """The first word that is not a top-level option (nor the value of `--socket`)."""
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
        elif word == "--socket":
            skip_next = True
        elif word == "--":
            return None
        elif not word.startswith("-"):
            return word
    return None


# `mentectl mcp`'s options that take a value, and the top-level one.
_MCP_VALUED = frozenset({"--socket", "--agent", "--project-dir", "--fallback-socket"})


def _serves_mcp(words: Sequence[str]) -> bool:
    """Whether `words` run the MCP server (`mentectl mcp [OPTIONS]`, no verb after it)."""
    if _verb_of(words) != "mcp" or {"-h", "--help", "--version"} & set(words):
        return False
    after = list(words)[list(words).index("mcp") + 1 :]
    skip_next = False
    for word in after:
        if skip_next:
            skip_next = False
        elif word in _MCP_VALUED:
            skip_next = True
        elif not word.startswith("-"):
            return False  # `mcp install`, `mcp status`, ...
    return True


def wake_the_daemon(explicit_socket: str | None) -> None:
    """Connect once and send nothing, so that a daemon started on demand starts now.

    Under socket activation a connection starts the daemon, which answers once it has
    started. `mentectl explain` asks it for its table and rules only after importing
    what it matches with (bashlex, the checks); woken first, the daemon starts on
    another core meanwhile instead of after. A running daemon reads the connection's
    end; where nothing listens, nothing happens.
    """
    import socket  # noqa: PLC0415 - `explain` only, which its client imports anyway

    from mented import paths  # noqa: PLC0415 - as above

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.setblocking(False)  # the backlog takes it at once, or nothing is there
        with contextlib.suppress(OSError):
            sock.connect(str(paths.socket_path(explicit_socket)))


def _socket_option(words: Sequence[str]) -> str | None:
    """The value of the last `--socket` in `words` (as argparse takes it), or None."""
    found = None
    for word, following in zip(words, [*words[1:], None], strict=True):
        if word == "--":
            break
        if word == "--socket" and following is not None:
            found = following
        elif word.startswith("--socket="):
            found = word.removeprefix("--socket=")
    return found


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
            message = f"an argument is not valid UTF-8 text: {shown!r}"
            return _fail(message, status=2, code=INVALID_ARGUMENT, as_json=_wants_json(words))
    if _serves_mcp(words):
        # The agent waits for the MCP server's first answer: it comes before the
        # imports below and the SDK's (seconds), from the front (see its module).
        from mented_client import mcp_front  # noqa: PLC0415 - `mentectl mcp` alone

        mcp_front.start()
    if _verb_of(words) == "explain" and not {"-h", "--help"} & set(words):
        wake_the_daemon(_socket_option(words))
    parser = build_parser(words)
    # argparse's own usage errors stay text on stderr: it exits here, before `--json` is known.
    args, extras = parser.parse_known_args(words)
    if extras:
        _unrecognized(parser, words, extras)
    as_json: bool = args.json
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
    except KeyboardInterrupt:
        return 130
    except CommandError as exc:
        return _fail(str(exc), status=exc.status, code=exc.code, as_json=as_json)
    except Exception as exc:  # noqa: BLE001 - the client's errors are told apart in there
        return _failure(exc, as_json=as_json)
    return status


def _unrecognized(parser: argparse.ArgumentParser, words: Sequence[str], extras: list[str]) -> None:
    """Exit with the usage of the verb the unknown arguments were given to (argparse
    leaves them to the top-level parser, which shows its own usage), and a suggestion
    for a mistyped option.
    """
    from mented_client.suggest import did_you_mean  # noqa: PLC0415 - errors only

    verb = _parser_of(parser, words)
    options = [option for action in verb._actions for option in action.option_strings]  # noqa: SLF001 - argparse lists them nowhere else
    hint = next(
        (hint for word in extras if word.startswith("-") and (hint := did_you_mean(word, options))),
        "",
    )
    verb.error(f"unrecognized arguments: {' '.join(extras)}{hint}")


def _parser_of(parser: argparse.ArgumentParser, words: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the innermost verb in `words` (`rule add`'s for `rule add ...`)."""
    current = parser
    for word in words:
        verbs = next(
            (a for a in current._actions if isinstance(a, argparse._SubParsersAction)),  # noqa: SLF001 - as above
            None,
        )
        if verbs is None:
            break
        if word in verbs.choices:
            current = verbs.choices[word]
    return current


def _wants_json(words: Sequence[str]) -> bool:
    """Whether `--json` is among `words` as an option (not after `--`), before parsing them."""
    options = words[: words.index("--")] if "--" in words else words
    return "--json" in options


def _failure(exc: Exception, *, as_json: bool) -> int:
    """The exit status for an error from the daemon or the connection, said on stderr.

    With `as_json`, said as `--json` says errors (`output.fail`): the daemon's code,
    `not_running` or `bad_reply`, and the message without the words around it.

    Raises:
        Exception: `exc` itself when it is none of those (a bug: its traceback helps).
    """
    # Only an error imports these; a command that raised one has imported them already.
    from mented.protocol import ErrorCode  # noqa: PLC0415 - see above
    from mented_client.connection import (  # noqa: PLC0415 - see above
        DaemonError,
        NotRunningError,
        ProtocolError,
    )

    if isinstance(exc, DaemonError):
        if as_json:
            return _fail(exc.message, code=exc.code, as_json=True)
        store_failures = {ErrorCode.STORE_FULL, ErrorCode.STORE_DAMAGED, ErrorCode.STORE_FAILED}
        if exc.code in store_failures:  # not a refusal: the daemon could not do it
            return _fail(f"{exc.message} ({exc.code})")
        return _fail(f"mented refused: {exc.message} ({exc.code})")
    if isinstance(exc, NotRunningError):
        return _fail(str(exc), code=NOT_RUNNING, as_json=as_json)
    if isinstance(exc, ProtocolError):
        return _fail(str(exc), code=BAD_REPLY, as_json=as_json)
    raise exc


def _fail(
    message: str, status: int = 1, *, code: str = COMMAND_FAILED, as_json: bool = False
) -> int:
    from mented_client.commands.output import fail  # noqa: PLC0415 - errors only

    return fail(message, status=status, code=code, as_json=as_json)


def _is_utf8(word: str) -> bool:
    """False for a word with bytes that are not UTF-8 (Python keeps them as surrogates)."""
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
