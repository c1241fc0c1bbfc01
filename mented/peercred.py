"""Who is at the other end of a Unix socket: the check both sides of the socket make.

The daemon serves only its own user, and clients send rules and commands only to
a daemon of their own user (where the socket sits in a shared directory such as
/tmp, another user could listen first). Both ask the kernel for the peer's
credentials rather than trusting file modes alone. Standard library only: the
client side imports this too. The hook shim keeps a stdlib copy of `peer_uid`
(`client/shim.py`, `_peer_uid`), as it imports nothing of ours.
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Protocol

_UCRED = struct.Struct("3i")  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}
_LOCAL_PEERCRED = 0x001  # macOS <sys/un.h>; returns struct xucred
_XUCRED_HEAD = struct.Struct("Ii")  # cr_version, cr_uid
_XUCRED_SIZE = 76


class _Socket(Protocol):
    """A connected socket, blocking or trio's: all we need is `getsockopt`."""

    def getsockopt(self, level: int, optname: int, buflen: int, /) -> bytes: ...


def peer_uid(sock: _Socket) -> int | None:
    """The uid of the process at the other end of a connected Unix socket; None if unknown."""
    try:
        if hasattr(socket, "SO_PEERCRED"):
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
            return int(_UCRED.unpack(raw)[1])
        # macOS (getpeereid is built on this): SOL_LOCAL is 0.
        raw = sock.getsockopt(0, _LOCAL_PEERCRED, _XUCRED_SIZE)
        return int(_XUCRED_HEAD.unpack_from(raw)[1])
    except OSError:
        return None


def peer_pid(sock: _Socket) -> int | None:
    """The pid of the process at the other end (Linux's SO_PEERCRED); None elsewhere or unknown.

    Which client a connection comes from, to bound what one client holds (subscriptions).
    """
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except OSError:
        return None
    return int(_UCRED.unpack(raw)[0]) or None


def is_own_user(sock: _Socket) -> bool:
    """True when the process at the other end runs as our user (unknown counts as not)."""
    return peer_uid(sock) == os.getuid()
