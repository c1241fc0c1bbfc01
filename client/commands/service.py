"""The daemon's lifecycle: `mentectl start|stop|restart` and `mentectl service ...`.

The verbs mean one thing each (as in mypy's dmypy):

- `start` refuses when a daemon already answers; otherwise it starts the
  installed service, or, where there is none (a container, CI), runs `mented`
  detached -- a new session, stdin from /dev/null, output appended to a log
  file -- and waits until it answers.
- `stop` asks the daemon to shut down (a `shutdown` request), waits, and sends
  SIGTERM if it is still there after the timeout. A stopped daemon is not an
  error: it says so and exits 0.
- `restart` is stop, then start. Under systemd the socket stays open meanwhile,
  so hook calls wait for the new daemon rather than finding no socket.
- `reload` asks the daemon to re-read its config file (as SIGHUP does).
- `service install|uninstall|start|stop|restart|status` drive systemd --user or
  launchd (see `mented_client.service_manager`) and say what they did.

`start`, `stop` and `restart` go through the service manager when the service
is installed and listens on the socket this mentectl talks to; otherwise they
handle a detached daemon.

Whatever would replace a running daemon (`restart`, `service restart`,
`service install`) first loads the config file the new daemon would read, with
the daemon's own code: when it is invalid it refuses, and the running daemon
keeps its configuration (`--force` replaces it anyway). A daemon started with an
invalid file runs on the built-in settings and reports the error in `status`,
so `start`, with no daemon to keep, starts one and warns.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mented import paths
from mented.actions import load_table_in_force
from mented.protocol import OkReply, ReloadRequest, ShutdownRequest, StatusReply
from mented.service import STARTED_BY_ENV
from mented_client.commands.output import CommandError, escape_controls, print_json
from mented_client.commands.status import fetch_status, started_by
from mented_client.connection import Client, DaemonError, NotRunningError, ProtocolError
from mented_client.scope import daemon_table
from mented_client.service_manager import (
    Manager,
    daemon_interpreter,
    detect,
    no_manager_reason,
)

if TYPE_CHECKING:
    from collections.abc import Callable

START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0  # the daemon drains requests for up to 5 s before it exits
TERM_TIMEOUT_S = 5.0
LOG_NAME = "mented.log"
_POLL_S = 0.05


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    start = subparsers.add_parser(
        "start",
        parents=[common],
        help="start the daemon (the service if installed, else a detached process)",
        description="When a daemon already answers, says so (and how it was started) and exits "
        "0. Without an installed service, runs `mented` detached with its log in "
        f"{paths.state_dir() / LOG_NAME}. With an invalid config file the daemon starts on "
        "the built-in settings, with a warning.",
    )
    _detached_option(start)
    _timeout_option(start, START_TIMEOUT_S, "how long to wait for it to answer")
    start.set_defaults(handler=run_start)

    stop = subparsers.add_parser(
        "stop",
        parents=[common],
        help="stop the daemon (the service if installed, else a detached process)",
        description="With the service installed on this socket, stops it through the service "
        "manager (systemd: the service and its socket; launchd: bootout), then stops any "
        "detached mented still answering there. Otherwise asks the daemon to shut down "
        "and sends SIGTERM if it is still there after the timeout. Exits 0 when the "
        "daemon is stopped, including when it was not running.",
    )
    _timeout_option(stop, STOP_TIMEOUT_S, "how long to wait before SIGTERM")
    stop.set_defaults(handler=run_stop)

    restart = subparsers.add_parser(
        "restart",
        parents=[common],
        help="stop the daemon, then start it",
        description="Checks the config file first: when it is invalid, refuses, and the "
        "running daemon keeps its configuration.",
    )
    _detached_option(restart)
    _force_option(restart)
    _timeout_option(restart, START_TIMEOUT_S, "how long to wait at each step")
    restart.set_defaults(handler=run_restart)

    reload = subparsers.add_parser(
        "reload",
        parents=[common],
        help="make the daemon re-read its config file",
        description="A bad file is refused with its error; the daemon keeps its settings.",
    )
    reload.set_defaults(handler=run_reload)

    service = subparsers.add_parser(
        "service",
        help="install mented as a per-user service (systemd --user or launchd)",
        description="The service manager starts mented at login or on the first connection "
        "and restarts it if it fails.",
    )
    verbs = service.add_subparsers(dest="verb", metavar="VERB", required=True)
    install = verbs.add_parser(
        "install", parents=[common], help="write the unit files (or plist), enable and start"
    )
    install.add_argument(
        "--on-demand",
        action="store_true",
        help="start mented only on the first connection (socket activation), not at login",
    )
    _force_option(install)
    install.set_defaults(handler=run_service_install)
    for verb, handler, text in (
        ("uninstall", run_service_uninstall, "stop the service and remove its files"),
        ("start", run_service_start, "start the service"),
        ("stop", run_service_stop, "stop the service (and its socket)"),
        ("restart", run_service_restart, "restart the service"),
        ("status", run_service_status, "whether the service is installed, enabled and running"),
    ):
        parser = verbs.add_parser(verb, parents=[common], help=text)
        if verb == "restart":
            _force_option(parser)
        parser.set_defaults(handler=handler)


def _detached_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--detached",
        action="store_true",
        help="handle a detached daemon even when a service is installed",
    )


def _force_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace the running daemon even when the config file is invalid (the new one "
        "runs on the built-in settings until the file is fixed and reloaded)",
    )


def _timeout_option(parser: argparse.ArgumentParser, default: float, what: str) -> None:
    parser.add_argument(
        "--timeout",
        type=float,
        default=default,
        metavar="SECONDS",
        help=f"{what} (default: {default:g})",
    )


# ------------------------------------------------------------------- probing


def answering(socket: Path, timeout: float = 1.0) -> StatusReply | None:
    """The daemon's status when one answers on `socket`, else None."""
    try:
        status: StatusReply = fetch_status(str(socket), timeout=timeout)
    except (NotRunningError, ProtocolError, DaemonError):
        return None
    return status


def wait_until_answering(
    socket: Path, timeout: float, *, gave_up: Callable[[], str | None] | None = None
) -> StatusReply:
    """Poll until a daemon answers on `socket`.

    Raises:
        CommandError: `gave_up()` returned a reason, or `timeout` passed.
    """
    deadline = time.monotonic() + timeout
    while True:
        status = answering(socket, timeout=min(1.0, timeout))
        if status is not None:
            return status
        reason = gave_up() if gave_up else None
        if reason:
            raise CommandError(reason)
        if time.monotonic() > deadline:
            raise CommandError(f"mented did not answer on {socket} within {timeout:g} s")
        time.sleep(_POLL_S)


def service_for(socket: Path) -> Manager | None:
    """The installed service manager serving `socket`, if any."""
    manager = detect()
    if manager is None or not manager.installed() or manager.socket_path() != socket:
        return None
    return manager


def report(manager: Manager, *, as_json: bool, extra: dict[str, object] | None = None) -> None:
    """Say what the manager did, one line per step."""
    if as_json:
        print_json({"manager": manager.name, "done": manager.done, **(extra or {})})
        return
    for step in manager.done:
        print(f"  {step}")


def check_config_first(
    path: Path, running: StatusReply | None, *, force: bool = False, verb: str = "restarted"
) -> str | None:
    """Load the config file a new daemon would read, as the daemon does; None when valid.

    Returns:
        Why the file is invalid, when no daemon runs or `force`: the new daemon will
        run on the built-in settings, and the caller says so.

    Raises:
        CommandError: the file is invalid and a daemon runs: it is left alone.
    """
    problem = load_table_in_force(path).problem
    if problem is None or running is None or force:
        return problem
    raise CommandError(
        f"{problem}\nnot {verb}: the running daemon (pid {running.pid}) keeps its "
        "configuration. Fix the file (then `mentectl reload` applies it, no restart needed), "
        "or add --force to replace the daemon with one on the built-in settings."
    )


def warn_built_in_settings(problem: str | None) -> None:
    """Say that the daemon just started runs on the built-in settings, and why."""
    if problem is not None:
        print(
            f"mentectl: warning: {escape_controls(problem)}\n"
            "  mented runs on the built-in settings until you fix the file and run "
            "`mentectl reload`.",
            file=sys.stderr,
        )


def config_of(running: StatusReply | None) -> Path:
    """The config file the running daemon reads (a service restarted reads it again)."""
    if running is not None and running.config:
        return Path(running.config)
    return paths.config_path()


# ------------------------------------------------------------- the detached daemon


def start_detached(socket: Path, *, explicit_socket: str | None, timeout: float) -> StatusReply:
    """Run `mented` in a new session with its output appended to the log; wait until it answers.

    Raises:
        CommandError: it exited or did not answer in time (with the end of its log).
    """
    log_path = paths.state_dir() / LOG_NAME
    log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    argv = [str(daemon_interpreter()), "-m", "mented.daemon"]
    if explicit_socket:
        argv += ["--socket", str(socket)]
    with log_path.open("ab") as log:
        offset = log.tell()
        # A new session: no controlling terminal, and a Ctrl-C in this shell (or
        # its exit) does not reach the daemon. cwd "/" keeps no directory busy.
        process = subprocess.Popen(  # noqa: S603 - our interpreter and module
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            cwd="/",
            env=os.environ | {STARTED_BY_ENV: "mentectl"},  # for `status` (started_by)
        )

    def exited() -> str | None:
        if process.poll() is None:
            return None
        return f"mented exited with status {process.returncode} before answering:\n" + _log_since(
            log_path, offset
        )

    try:
        status = wait_until_answering(socket, timeout, gave_up=exited)
    except CommandError:
        if process.poll() is None:
            process.terminate()
        raise
    if status.pid != process.pid:
        # Another start won the race; ours finds the data directory taken and exits.
        print(f"mentectl: another mented (pid {status.pid}) started meanwhile", file=sys.stderr)
    # The daemon outlives us on purpose: forget it without the "still running" warning.
    process.returncode = 0
    return status


def _log_since(path: Path, offset: int, limit: int = 4000) -> str:
    """What the daemon wrote to its log since `offset`, its errors as plain sentences."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            text = handle.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [_readable(line) for line in text[-limit:].rstrip().splitlines()]
    return "\n".join([*lines, f"(log: {path})"])


def _readable(line: str) -> str:
    """A JSON log line with an `error` as `mented: ERROR`; any other line as it is."""
    if not line.startswith("{"):
        return line
    try:
        record = json.loads(line)
    except ValueError:
        return line
    error = record.get("error") if isinstance(record, dict) else None
    return f"mented: {error}" if isinstance(error, str) else line


class _Process:
    """A process to wait for and signal, by pidfd where there is one (no pid reuse race)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self.fd = os.pidfd_open(pid)

    def gone(self, timeout: float) -> bool:
        """Wait up to `timeout` for the process to end."""
        deadline = time.monotonic() + timeout
        while True:
            if self.fd is not None:
                readable, _, _ = select.select([self.fd], [], [], max(0.0, min(_POLL_S, timeout)))
                if readable:
                    return True
            elif _pid_gone(self.pid):
                return True
            if time.monotonic() >= deadline:
                return False
            if self.fd is None:
                time.sleep(_POLL_S)

    def terminate(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, signal.SIGTERM)
            else:
                os.kill(self.pid, signal.SIGTERM)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    # A zombie still has its pid: on Linux, /proc tells it apart.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in {"Z", "X"}


def stop_detached(socket: Path, timeout: float) -> StatusReply | None:
    """Stop the daemon answering on `socket`; its last status, or None when none answered.

    Raises:
        CommandError: it was still running after SIGTERM.
    """
    status = answering(socket)
    if status is None:
        return None
    process = _Process(status.pid)
    try:
        with (
            contextlib.suppress(NotRunningError, ProtocolError, DaemonError),
            Client(socket, connect_timeout=2.0, timeout=5.0) as client,
        ):
            client.expect(ShutdownRequest(), OkReply)
        if process.gone(timeout):
            return status
        print(
            f"mentectl: mented (pid {status.pid}) still runs after {timeout:g} s; sending SIGTERM",
            file=sys.stderr,
        )
        process.terminate()
        if process.gone(TERM_TIMEOUT_S):
            return status
    finally:
        process.close()
    raise CommandError(
        f"mented (pid {status.pid}) is still running after SIGTERM; "
        f"`kill -KILL {status.pid}` ends it (the store stays consistent)"
    )


# -------------------------------------------------------------------- verbs


def already_running(status: StatusReply, socket: Path, *, service_manager: bool) -> str:
    """`mented is already running (...)`, with how it was started and what that means.

    Args:
        status: the running daemon's.
        socket: where it answers.
        service_manager: whether there is one here to install the service with.
    """
    how = started_by(status)
    line = f"mented is already running (pid {status.pid}, socket {socket}"
    line += f"; started {how})." if how else ")."
    if status.started_by == "terminal":
        instead = (
            "`mentectl service install` replaces it with the service"
            if service_manager
            else "`mentectl restart` replaces it with a detached one that outlives the terminal"
        )
        line += f"\n  To keep one running: {instead}."
    return line


def run_start(args: argparse.Namespace) -> int:
    socket = paths.socket_path(args.socket)
    running = answering(socket)
    if running is not None:
        # Like `systemctl start` on an active unit: what was asked for holds.
        if args.json:
            print_json(
                {
                    "running": True,
                    "already_running": True,
                    "pid": running.pid,
                    "socket": str(socket),
                    "started_by": running.started_by,
                }
            )
        else:
            manager_here = running.started_by == "terminal" and detect() is not None
            print(already_running(running, socket, service_manager=manager_here))
        return 0
    problem = check_config_first(paths.config_path(), None)
    manager = None if args.detached else service_for(socket)
    if manager is not None:
        manager.start()
        status = wait_until_answering(socket, args.timeout)
        how = f"through {manager.name}"
    else:
        status = start_detached(socket, explicit_socket=args.socket, timeout=args.timeout)
        how = f"detached, log in {paths.state_dir() / LOG_NAME}"
    if args.json:
        extra = {"done": manager.done} if manager else {}
        print_json(
            {
                "running": True,
                "pid": status.pid,
                "socket": str(socket),
                "how": how,
                "config_error": problem,
                **extra,
            }
        )
    else:
        print(f"mented is running (pid {status.pid}, socket {socket}; {how})")
        if manager is not None:
            report(manager, as_json=False)
    warn_built_in_settings(problem)
    return 0


def run_stop(args: argparse.Namespace) -> int:
    socket = paths.socket_path(args.socket)
    manager = service_for(socket)
    if manager is not None:
        manager.stop()
        # With its socket closed, whatever still answers there is a detached daemon.
        stray = stop_detached(socket, args.timeout)
        if stray is not None:
            manager.done.append(f"stopped a detached mented (pid {stray}) on the same socket")
        if args.json:
            report(manager, as_json=True, extra={"stopped": True})
        else:
            print(f"stopped the {manager.name} service; `mentectl start` starts it again")
            report(manager, as_json=False)
        return 0
    stopped = stop_detached(socket, args.timeout)
    pid = stopped.pid if stopped else None
    if args.json:
        print_json({"stopped": pid is not None, "was_running": pid is not None, "pid": pid})
    elif pid is None:
        print(f"mented is not running (nothing answers on {socket}); nothing to stop")
    else:
        print(f"stopped mented (pid {pid})")
    return 0


def run_restart(args: argparse.Namespace) -> int:
    socket = paths.socket_path(args.socket)
    manager = None if args.detached else service_for(socket)
    running = answering(socket)
    if manager is not None:
        problem = check_config_first(config_of(running), running, force=args.force)
        manager.restart()
        status = wait_until_answering(socket, args.timeout)
        if args.json:
            report(manager, as_json=True, extra={"pid": status.pid, "config_error": problem})
        else:
            print(f"restarted the {manager.name} service (pid {status.pid})")
            report(manager, as_json=False)
        warn_built_in_settings(problem)
        return 0
    # The new daemon is started from here: it reads the file this mentectl finds.
    problem = check_config_first(paths.config_path(), running, force=args.force)
    old = stop_detached(socket, args.timeout)
    status = start_detached(socket, explicit_socket=args.socket, timeout=args.timeout)
    if args.json:
        print_json(
            {
                "stopped": old.pid if old else None,
                "pid": status.pid,
                "socket": str(socket),
                "config_error": problem,
            }
        )
    else:
        before = f"stopped pid {old.pid}, " if old else "was not running; "
        print(f"restarted mented ({before}now pid {status.pid}, detached)")
    warn_built_in_settings(problem)
    return 0


def run_reload(args: argparse.Namespace) -> int:
    # The installers' code only for reload among this module's verbs.
    from mented_client.commands.hooks import registration_warnings  # noqa: PLC0415

    socket = paths.socket_path(args.socket)
    with Client(socket) as client:
        reply = client.expect(ReloadRequest(), OkReply)  # a bad file: DaemonError, its message
        # The table just put in force may name commands an installed hook was not
        # registered for (Claude Code's filters are computed at install).
        warnings = registration_warnings(daemon_table(client))
    if args.json:
        print_json({"reloaded": True, "message": reply.message, "warnings": warnings})
    else:
        print(f"mented: {escape_controls(reply.message)}")
    for warning in warnings:
        print(f"mentectl: warning: {escape_controls(warning)}", file=sys.stderr)
    return 0


def _manager_or_fail() -> Manager:
    manager = detect()
    if manager is None:
        raise CommandError(
            f"no service manager here ({no_manager_reason()}); "
            "`mentectl start` runs a detached daemon instead"
        )
    return manager


def install_service(
    manager: Manager,
    *,
    socket: Path,
    on_demand: bool,
    timeout: float = START_TIMEOUT_S,
    force: bool = False,
) -> StatusReply | None:
    """Install, enable and start the service; None when on demand and not started yet.

    A daemon on the service's socket that is not the service's (detached, or in a
    terminal) is stopped first: the service's daemon could not take the data
    directory otherwise. Installing restarts a running service: refused when the
    config file is invalid, unless `force` (see `check_config_first`).

    Raises:
        CommandError: the config file is invalid and a daemon runs, or the manager failed.
    """
    python = daemon_interpreter()
    service_socket = manager.socket_path()
    running = answering(service_socket)
    check_config_first(config_of(running), running, force=force, verb="installed")
    if not manager.active():
        replaced = stop_detached(service_socket, STOP_TIMEOUT_S)
        if replaced is not None:
            how = started_by(replaced)
            manager.done.append(
                f"stopped mented (pid {replaced.pid}, started {how}): the service replaces it"
                if how
                else f"stopped the mented (pid {replaced.pid}) the service replaces"
            )
    manager.install(python=python, data_dir=paths.data_dir(), on_demand=on_demand)
    if service_socket != socket:
        manager.done.append(
            f"note: the service listens on {service_socket}, not on {socket} "
            f"(${paths.SOCKET_ENV} or --socket): unset it to use the service"
        )
        return None
    # Also the first connection for an on-demand service: it starts it.
    return wait_until_answering(socket, timeout)


def run_service_install(args: argparse.Namespace) -> int:
    manager = _manager_or_fail()
    socket = paths.socket_path(args.socket)
    status = install_service(manager, socket=socket, on_demand=args.on_demand, force=args.force)
    if args.json:
        report(manager, as_json=True, extra={"pid": status.pid if status else None})
        return 0
    when = "on the first connection" if args.on_demand else "at login"
    print(f"installed mented as a {manager.name} service; it starts {when}:")
    report(manager, as_json=False)
    if status is not None:
        print(f"mented is running (pid {status.pid}, socket {socket})")
    return 0


def run_service_uninstall(args: argparse.Namespace) -> int:
    manager = _manager_or_fail()
    if not manager.installed():
        manager.uninstall()  # leftovers, if any
        if args.json:
            report(manager, as_json=True, extra={"installed": False})
        else:
            print(f"mented is not installed as a {manager.name} service; nothing to remove")
        return 0
    manager.uninstall()
    if args.json:
        report(manager, as_json=True, extra={"installed": False})
    else:
        print(f"removed the {manager.name} service:")
        report(manager, as_json=False)
    return 0


def _service_verb(args: argparse.Namespace, verb: str) -> int:
    manager = _manager_or_fail()
    if not manager.installed():
        raise CommandError(
            f"mented is not installed as a {manager.name} service; `mentectl service install`"
        )
    problem = None
    running = None if verb == "stop" else answering(manager.socket_path())
    if verb == "restart" or (verb == "start" and running is None):
        # A `start` of a running service changes nothing: only a new daemon reads the file.
        problem = check_config_first(
            config_of(running), running, force=getattr(args, "force", False)
        )
    getattr(manager, verb)()
    status = None
    if verb != "stop":
        status = wait_until_answering(manager.socket_path(), START_TIMEOUT_S)
    if args.json:
        report(manager, as_json=True, extra={"pid": status.pid if status else None})
    else:
        done = {"start": "started", "stop": "stopped", "restart": "restarted"}[verb]
        print(f"{done} the {manager.name} service" + (f" (pid {status.pid})" if status else ""))
        report(manager, as_json=False)
    warn_built_in_settings(problem)
    return 0


def run_service_start(args: argparse.Namespace) -> int:
    return _service_verb(args, "start")


def run_service_stop(args: argparse.Namespace) -> int:
    return _service_verb(args, "stop")


def run_service_restart(args: argparse.Namespace) -> int:
    return _service_verb(args, "restart")


def run_service_status(args: argparse.Namespace) -> int:
    manager = detect()
    if manager is None:
        reason = no_manager_reason()
        if args.json:
            print_json({"manager": None, "reason": reason})
        else:
            print(f"no service manager here ({reason}); `mentectl start` runs a detached daemon")
        return 1
    installed = manager.installed()
    enabled = installed and manager.enabled()
    active = installed and manager.active()
    interpreter = manager.interpreter() if installed else None
    problems = []
    if not installed:
        problems.append("not installed: `mentectl service install`")
    elif not enabled:
        problems.append("installed but not enabled: `mentectl service install` enables it")
    if interpreter is not None and not interpreter.exists():
        problems.append(f"its interpreter {interpreter} is gone: `mentectl service install`")
    if args.json:
        print_json(
            {
                "manager": manager.name,
                "installed": installed,
                "enabled": enabled,
                "active": active,
                "files": [str(path) for path in manager.files()],
                "interpreter": str(interpreter) if interpreter else None,
                "socket": str(manager.socket_path()),
                "problems": problems,
            }
        )
        return 1 if problems else 0
    print(f"{manager.name}: " + ("; ".join(problems) or "installed and enabled"))
    if installed:
        print(manager.describe())
    return 1 if problems else 0
