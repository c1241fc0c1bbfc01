"""Service-manager glue: socket activation and readiness, standard library only.

systemd (see sd_listen_fds(3) and sd_notify(3)):

- Socket activation: systemd binds the socket, starts the daemon on the first
  connection and passes the listening socket as file descriptor 3, with
  `LISTEN_FDS` (how many) and `LISTEN_PID` (for whom: a variable inherited by
  a child must not make the child think the sockets are its own).
- Notification: with `Type=notify` the daemon sends `READY=1` once it serves,
  `RELOADING=1` ... `READY=1` around a reload and `STOPPING=1` at shutdown, as
  datagrams to `$NOTIFY_SOCKET` (a path, or an abstract name spelled `@name`).

launchd: a LaunchAgent with a `Sockets` entry holds the socket; the daemon asks
for it with `launch_activate_socket(3)` through ctypes. That call exists only on
macOS; it is kept to one small function that the tests drive with a stand-in.

Nothing here forks, double-forks or writes pid files: the daemon runs in the
foreground and the service manager supervises it.

`how_started()` tells, from the environment the daemon was started with, who
started it (a service manager, `mentectl start`, a terminal): `status` reports
it, so that `mentectl setup` and `doctor` can say whether the daemon will
outlive the terminal it may have been typed in.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import time
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import ctypes

SD_LISTEN_FDS_START = 3  # the first passed descriptor (after stdin, stdout, stderr)
LAUNCHD_SOCKET_NAME = "Listeners"  # the key under `Sockets` in the LaunchAgent plist


def launch_activate_socket_type() -> type[ctypes._CFunctionType]:
    """The C type of `int launch_activate_socket(const char *name, int **fds, size_t *cnt)`
    (0 or an errno value). Built when asked: ctypes is not imported at each start."""
    import ctypes  # noqa: PLC0415 - launchd only (and its tests)

    return ctypes.CFUNCTYPE(
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.POINTER(ctypes.c_int)),
        ctypes.POINTER(ctypes.c_size_t),
    )


STARTED_BY_ENV = "MENTED_STARTED_BY"  # set by `mentectl start` for the daemon it runs detached

StartedBy = Literal["systemd", "launchd", "mentectl", "terminal", "other"]


class ServiceError(Exception):
    """The service manager handed over something the daemon cannot use; the message says what."""


# ------------------------------------------------------------ socket activation


def listen_fds(
    *, environ: MutableMapping[str, str] | None = None, unset_environment: bool = True
) -> list[socket.socket]:
    """The sockets systemd passed to this process; empty when it passed none.

    Like sd_listen_fds(3): the sockets count only when `LISTEN_PID` is our pid;
    they start at descriptor 3 and are marked close-on-exec here. The variables
    are removed (`unset_environment`) so that no child process inherits them.

    Raises:
        ServiceError: the variables are malformed, or a passed descriptor is not a socket.
    """
    env = os.environ if environ is None else environ
    pid, count = env.get("LISTEN_PID"), env.get("LISTEN_FDS")
    if unset_environment:
        for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
            env.pop(name, None)
    if pid is None or count is None:
        return []
    try:
        for_pid, how_many = int(pid), int(count)
    except ValueError:
        raise ServiceError(
            f"LISTEN_PID={pid!r} / LISTEN_FDS={count!r} are not numbers; "
            "check the unit's environment"
        ) from None
    if for_pid != os.getpid() or how_many <= 0:
        return []  # meant for the process that started us, not for us
    sockets = []
    for fd in range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + how_many):
        os.set_inheritable(fd, False)
        try:
            sockets.append(socket.socket(fileno=fd))
        except OSError as exc:
            raise ServiceError(f"descriptor {fd} passed by the service manager: {exc}") from exc
    return sockets


def launchd_sockets(
    name: str = LAUNCHD_SOCKET_NAME,
    *,
    activate: Callable[..., int] | None = None,
    free: Callable[..., object] | None = None,
) -> list[socket.socket]:
    """The sockets launchd holds for us under `Sockets` -> `name`; empty when not launched so.

    `activate` and `free` default to libSystem's `launch_activate_socket` and
    `free` (macOS only); tests pass stand-ins.

    Raises:
        ServiceError: launchd refused for another reason than "not ours".
    """
    if (activate is None or free is None) and sys.platform != "darwin":
        return []
    import ctypes  # noqa: PLC0415 - launchd only: not imported at each start elsewhere

    if activate is None or free is None:
        libc = ctypes.CDLL(None)  # libSystem: launch_activate_socket and free live there
        activate = launch_activate_socket_type()(("launch_activate_socket", libc))
        c_free = libc.free
        c_free.argtypes = [ctypes.c_void_p]
        free = c_free
    fds = ctypes.POINTER(ctypes.c_int)()
    count = ctypes.c_size_t(0)
    error = activate(name.encode(), ctypes.pointer(fds), ctypes.pointer(count))
    if error in (errno.ESRCH, errno.ENOENT):
        # ESRCH: not started by launchd; ENOENT: no socket of that name in the plist.
        return []
    if error:
        raise ServiceError(f"launch_activate_socket({name!r}) failed: {os.strerror(error)}")
    try:
        numbers = [fds[i] for i in range(count.value)]
    finally:
        free(fds)  # the array is malloc'ed by launchd for us
    sockets = []
    for fd in numbers:
        os.set_inheritable(fd, False)
        sockets.append(socket.socket(fileno=fd))
    return sockets


def inherited_listener() -> socket.socket | None:
    """The listening Unix socket a service manager handed over (systemd, then launchd).

    Raises:
        ServiceError: it handed over several sockets or one mented cannot serve on.
    """
    sockets = listen_fds() or launchd_sockets()
    if not sockets:
        return None
    if len(sockets) > 1:
        for sock in sockets:
            sock.close()
        raise ServiceError(
            f"the service manager passed {len(sockets)} sockets; mented serves one "
            "(a single ListenStream= in mented.socket, one entry under Sockets in the plist)"
        )
    sock = sockets[0]
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        sock.close()
        raise ServiceError(
            "the service manager passed a socket that is not a Unix stream socket; "
            "use ListenStream=%t/mented/mented.sock (systemd) or SockType stream (launchd)"
        )
    return sock


# ------------------------------------------------------------------ sd_notify


def notify(state: str, *, environ: MutableMapping[str, str] | None = None) -> bool:
    """Send `state` (e.g. "READY=1") to systemd; False when there is no one to tell.

    Silent without `$NOTIFY_SOCKET` (not started by systemd, or not `Type=notify`)
    and on send errors: a lost notification must not stop the daemon.
    """
    env = os.environ if environ is None else environ
    address = env.get("NOTIFY_SOCKET", "")
    if address.startswith("@"):
        address = "\0" + address[1:]  # the abstract namespace
    elif not address.startswith("/"):
        return False  # unset, or a transport we do not speak (vsock:)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.settimeout(1.0)  # systemd reads at once; never hang the daemon on it
        try:
            sock.connect(address)
            sock.sendall(state.encode())
        except OSError:
            return False
    return True


def notify_ready(status: str) -> None:
    """Tell systemd we serve (also after a reload), with a line for `systemctl status`."""
    notify(f"READY=1\nSTATUS={status}\nMAINPID={os.getpid()}")


def notify_reloading() -> None:
    """Tell systemd a reload starts; `notify_ready` ends it."""
    # MONOTONIC_USEC lets systemd tell this reload from an older one (Type=notify-reload).
    usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    notify(f"RELOADING=1\nMONOTONIC_USEC={usec}")


def notify_stopping() -> None:
    """Tell systemd we are shutting down (so it does not take the exit for a crash)."""
    notify("STOPPING=1\nSTATUS=stopping")


# ------------------------------------------------------------- who started us


def how_started(
    *, environ: MutableMapping[str, str] | None = None, has_terminal: bool | None = None
) -> StartedBy:
    """Who started this daemon, told by the environment it was started with.

    - `mentectl`: `mentectl start` (or `setup`) ran it detached; it says so in
      `$MENTED_STARTED_BY`, removed here so that no child inherits it.
    - `terminal`: it has a controlling terminal (typed in a shell): it ends with
      that terminal.
    - `systemd`: systemd sets `$INVOCATION_ID` for every unit it starts.
    - `launchd`: launchd names the job in `$XPC_SERVICE_NAME` (a shell in Terminal
      has `0` there, or an app's name) and is our parent, pid 1.
    - `other`: none of these: started by hand outside a terminal (a script,
      `nohup`, a container's entrypoint).
    """
    env = os.environ if environ is None else environ
    if env.pop(STARTED_BY_ENV, None) == "mentectl":
        return "mentectl"
    if has_terminal is None:
        has_terminal = has_controlling_terminal()
    if has_terminal:
        return "terminal"
    if env.get("INVOCATION_ID"):
        return "systemd"
    if env.get("XPC_SERVICE_NAME", "0") != "0" and os.getppid() == 1:
        return "launchd"
    return "other"


def has_controlling_terminal() -> bool:
    """Whether this process has a controlling terminal: /dev/tty opens only then."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False
    os.close(fd)
    return True
