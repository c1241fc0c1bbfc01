"""The daemon's listening socket: a private directory, a 0600 socket.

The order of operations matters for security, so it lives in one place:

1. The socket's directory is created 0700 (or checked: ours, not a symlink, no
   group/other access). Refusing a directory someone else controls is what keeps
   another user from swapping the socket under us.
2. An existing socket path is probed: a live daemon answering there is refused;
   a stale socket file (nothing listening) is removed; anything that is not a
   socket, or a symlink, is refused rather than followed or deleted.
3. The socket is bound under umask 0o177, so it is 0600 from the moment it
   exists: there is no window where it is reachable by others before a chmod.

Each connection is then checked for the peer's uid (`mented.peercred`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from pathlib import Path

from mented.paths import MAX_SOCKET_PATH

# Connections served at once, whatever the descriptor limit: an idle connection
# costs the daemon ~6 KiB (its task, socket and scopes), so this bounds them to
# ~48 MiB. Hooks connect for milliseconds; long-lived clients are a few per agent.
MAX_CONNECTIONS = 8192
DESCRIPTOR_RESERVE = 32  # descriptors kept for the store, the listener and logging


class ListenerError(Exception):
    """The socket cannot be set up; the message says why and what to do."""


def ensure_private_dir(directory: Path) -> None:
    """Create `directory` 0700, or check that an existing one is private and ours.

    Raises:
        ListenerError: it is a symlink, owned by someone else, or open to others.
    """
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=False)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ListenerError(f"cannot create the socket directory {directory}: {exc}") from exc
    info = directory.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ListenerError(
            f"{directory} is not a plain directory (a symlink?); remove it or choose another "
            "socket path with --socket"
        )
    if info.st_uid != os.getuid():
        raise ListenerError(
            f"{directory} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}); "
            "choose another socket path with --socket or MENTED_SOCKET"
        )
    _check_parent(directory)
    if info.st_mode & 0o077:
        raise ListenerError(
            f"{directory} is open to other users (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"run `chmod 700 {directory}` or choose another socket path"
        )


def _check_parent(directory: Path) -> None:
    """Refuse a socket directory whose parent lets another user swap it.

    Whoever owns the parent, or may write to it without the sticky bit, can rename
    our private directory away and put their own in its place.
    """
    parent = directory.parent
    info = parent.stat()
    uid = os.getuid()
    if info.st_uid not in (uid, 0):
        raise ListenerError(
            f"{parent} belongs to uid {info.st_uid}, who could replace {directory.name}/ in it; "
            "choose a socket path under a directory of yours with --socket or MENTED_SOCKET"
        )
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise ListenerError(
            f"{parent} is writable by other users and not sticky, so they could replace "
            f"{directory.name}/ in it; choose another socket path with --socket or MENTED_SOCKET"
        )


def probe(path: Path, timeout: float = 0.5) -> bool:
    """True when something accepts connections on the socket at `path`."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except OSError:
        return False
    else:
        return True
    finally:
        sock.close()


def clear_stale_socket(path: Path) -> None:
    """Remove a stale socket file at `path`; refuse a live daemon or a non-socket.

    Raises:
        ListenerError: a daemon answers there, or the path is not a socket.
    """
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise ListenerError(f"{path} is a symlink; refusing to follow it. Remove it first.")
    if not stat.S_ISSOCK(info.st_mode):
        raise ListenerError(f"{path} exists and is not a socket; remove it or choose another path")
    if probe(path):
        raise ListenerError(
            f"mented is already running on {path}; stop it with `mentectl stop` first"
        )
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def bind_socket(path: Path) -> socket.socket:
    """A listening Unix socket at `path`, 0600 from birth, in a private directory.

    Raises:
        ListenerError: the path is too long, the directory is unsafe, or a daemon
            already answers there.
    """
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise ListenerError(
            f"socket path {path} is {len(os.fsencode(path))} bytes long; Unix sockets allow "
            f"{MAX_SOCKET_PATH}. Choose a shorter --socket path."
        )
    ensure_private_dir(path.parent)
    clear_stale_socket(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ListenerError(f"{path} is in use by another process") from exc
        raise ListenerError(f"cannot bind {path}: {exc}") from exc
    finally:
        os.umask(old_umask)
    sock.listen(512)
    return sock


def socket_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the socket file, to remove only our own at shutdown."""
    try:
        info = path.lstat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def remove_socket_if_ours(path: Path, identity: tuple[int, int] | None) -> None:
    """Unlink the socket file unless another daemon has since replaced it."""
    if identity is not None and socket_identity(path) == identity:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
