"""`mented`: run the daemon in the foreground.

It never forks itself: run it in a terminal, or let systemd/launchd supervise
it (see systemd/ and launchd/), or `mentectl start` for a detached one.

Under a service manager it takes over the listening socket the manager holds
(socket activation), tells systemd when it is ready, reloading and stopping,
and may exit after an idle time (`--idle-timeout`, `[daemon] idle_timeout_s`)
to be started again by the next connection. See `mented.service`.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import gc
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mented import __version__, paths, service
from mented.listener import DESCRIPTOR_RESERVE, MAX_CONNECTIONS
from mented.log import configure_logging, log

if TYPE_CHECKING:
    from mented.first_answers import FirstAnswers

    # Imported once the first hooks are answered (`mented.first_answers`): trio takes
    # longer to import than a hook's whole budget on a busy machine.
    from mented.server import Server, ServerOptions

# EX_IOERR from sysexits.h: systemd shows it as "74/IOERR".
STORE_FAILED_EXIT = 74


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
        "--idle-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="with socket activation, exit after this long without a client; the service "
        "manager starts mented again on the next connection (default: the config file's "
        "[daemon] idle_timeout_s; 0: never)",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="least severe log level written to stderr (default: info)",
    )
    parser.add_argument("--version", action="version", version=f"mented {__version__}")
    return parser


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def options_from_args(
    args: argparse.Namespace,
    inherited: socket.socket | None = None,
    started_by: str = "unknown",
    first: FirstAnswers | None = None,
) -> ServerOptions:
    from mented.server import ServerOptions  # noqa: PLC0415 - imports trio: see above

    socket_path = _socket_path(args, inherited)

    def reloaded(error: str | None) -> None:
        # After a failed reload the previous configuration serves on: ready either way.
        service.notify_ready(f"reload failed: {error}" if error else _serving(socket_path))

    return ServerOptions(
        socket_path=socket_path,
        data_dir=paths.data_dir(args.data_dir),
        config_path=paths.config_path(args.config),
        inherited_socket=inherited,
        idle_timeout_s=args.idle_timeout,
        on_ready=lambda: service.notify_ready(_serving(socket_path)),
        on_reloading=service.notify_reloading,
        on_reloaded=reloaded,
        on_stopping=service.notify_stopping,
        started_by=started_by,
        first_answers=first,
    )


def _socket_path(args: argparse.Namespace, inherited: socket.socket | None) -> Path:
    if inherited is not None:
        # The manager's socket is the one clients reach: report its real path.
        name = inherited.getsockname()
        if isinstance(name, str) and name.startswith("/"):
            return Path(name)
    return paths.socket_path(args.socket)


def _serving(socket_path: Path) -> str:
    return f"serving on {socket_path}"


def main(argv: Sequence[str] | None = None) -> int:
    # No collection while starting: the modules, the action table and bashlex's tables
    # are made to last, and the collector's passes over them (generation 2 among them)
    # were a tenth of the first hook's time. Enabled again once the server runs,
    # with what start-up made frozen out of its passes (`_serve`).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run(argv)
    except KeyboardInterrupt:
        # Ctrl-C while starting, before the server takes SIGINT as "stop" (or while
        # closing): the process ends as asked, with a word rather than a traceback.
        print("mented: interrupted; stopped", file=sys.stderr)
        return 128 + signal.SIGINT
    finally:
        if collecting:
            gc.enable()


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level)
    # What answers the first hooks, imported with the collector off (see `main`).
    from mented import parser_tables  # noqa: PLC0415

    if parser_tables.BUILDS:  # at import, before logging was set up: said now
        log.info("parser_tables_built", why=parser_tables.problem)
    # A fatal signal (SIGBUS when the data file is cut short under the open store,
    # SIGSEGV) then leaves a Python traceback on stderr, in the service's log,
    # instead of a silent exit.
    with contextlib.suppress(RuntimeError, ValueError):  # no usable stderr: nothing to say
        faulthandler.enable()
    raise_descriptor_limit()
    try:
        inherited = service.inherited_listener()
    except service.ServiceError as exc:
        return _cannot_start(str(exc))
    if args.idle_timeout and inherited is None:
        # Without a manager holding the socket, an idle exit would leave hooks with
        # nothing to answer them until someone starts mented again.
        log.warning("idle_timeout_ignored", reason="no socket from a service manager")
    started_by = service.how_started()
    # A stop asked for before the trio server listens for signals (while it answers
    # the first hooks, or imports trio) is kept, and asked again once it listens:
    # killed by it there, the daemon would stop with a hook half answered.
    # So is a SIGHUP (a reload, or the terminal gone): `status` is answered before trio
    # too, so a client may take the daemon for ready and ask for a reload by signal.
    stopped_early: list[int] = []
    for kept in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(kept, lambda signum, _frame: stopped_early.append(signum))
    first = _answer_first_hooks(args, inherited, started_by)
    if first is not None and first.store.failure is not None:
        failure = first.store.failure
        first.close()
        service.notify(f"STATUS=stopped: {failure}")
        print(f"mented: {failure}", file=sys.stderr)
        return STORE_FAILED_EXIT
    try:
        server = _trio_server(options_from_args(args, inherited, started_by, first), stopped_early)
    except BaseException:
        if first is not None:
            first.close()
        raise
    return _serve(server)


def _trio_server(options: ServerOptions, stopped_early: list[int]) -> Server:
    """The trio server (trio imported now), which asks for a stop (or a reload) kept meanwhile
    once ready."""
    import dataclasses  # noqa: PLC0415 - as trio

    from mented.server import Server  # noqa: PLC0415 - imports trio: after the first answers

    ready = options.on_ready

    def on_ready() -> None:
        if ready is not None:
            ready()
        for signum in dict.fromkeys(stopped_early):  # each once, in turn
            os.kill(os.getpid(), signum)  # now to the server's own signal watch

    return Server(dataclasses.replace(options, on_ready=on_ready))


def _serve(server: Server) -> int:
    import trio  # noqa: PLC0415 - after the first answers (see _answer_first_hooks)

    from mented.server import StartupError  # noqa: PLC0415 - as trio

    try:
        server.open()
    except StartupError as exc:
        return _cannot_start(str(exc))
    except KeyboardInterrupt:
        server.close()  # what it opened so far: the lock, the store, the socket
        raise
    # What start-up made (the action table, bashlex's tables, the modules) lives as
    # long as the daemon: kept out of the collector's full passes, which walked it
    # all on the event loop (41 to 126 ms a pass, issue 24; a hook under load waited
    # 170 ms for one). Cheap: no collection, the objects only change lists.
    gc.freeze()
    gc.enable()  # off while starting (see `main`)
    try:
        trio.run(server.serve)
    finally:
        server.close()
        log.info("stopped")
    if server.store_failure is not None:
        # Non-zero, so that systemd (Restart=on-failure) or launchd starts a new
        # process, which checks the data file again when it opens it.
        service.notify(f"STATUS=stopped: {server.store_failure}")
        print(f"mented: {server.store_failure}", file=sys.stderr)
        return STORE_FAILED_EXIT
    return 0


def _answer_first_hooks(
    args: argparse.Namespace, inherited: socket.socket | None, started_by: str
) -> FirstAnswers | None:
    """Open what a hook needs and answer the hooks waiting, before trio is imported.

    None when something is amiss: `Server.open` then opens everything itself and
    says what (mented.first_answers).
    """
    from mented import first_answers  # noqa: PLC0415 - with the collector off (see `main`)

    first = first_answers.open_first_answers(
        socket_path=_socket_path(args, inherited),
        data_dir=paths.data_dir(args.data_dir),
        config_path=paths.config_path(args.config),
        inherited_socket=inherited,
        started_by=started_by,
    )
    if first is None:
        return None
    try:
        first.answer_waiting()
    except BaseException:
        first.close()
        raise
    log.debug("first_answers", answered=first.answered, handed_over=len(first.handed_over))
    return first


def raise_descriptor_limit(wanted: int = MAX_CONNECTIONS + DESCRIPTOR_RESERVE) -> None:
    """Lift the soft open-files limit towards the hard one, as far as the daemon's
    connection limit needs (no further: each connection costs memory too).

    Service managers start us at a soft limit of 1024, which a thousand idle
    editor or agent connections would exhaust before the hook's next connection.
    """
    import resource  # noqa: PLC0415 - start-up only

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("descriptor_limit_unchanged", soft=soft, hard=hard, error=str(exc))


def _cannot_start(reason: str) -> int:
    """Say once why the daemon cannot start: plainly in a terminal, as a log line elsewhere.

    Elsewhere is a log file (`mentectl start`, which shows the reason from it) or
    the journal; a terminal gets the sentence without the log line's fields.
    """
    if sys.stderr.isatty():
        print(f"mented: {reason}", file=sys.stderr)
    else:
        log.error("cannot_start", error=reason)
    service.notify(f"STATUS=cannot start: {reason}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
