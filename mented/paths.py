"""Where mented keeps things: socket, data directory, config file, state.

Each path is resolved the same way everywhere: an explicit argument wins, then an
environment variable, then the platform default. The hook shim repeats the socket
rule in stdlib-only form (`mented_client.shim.socket_path`); a test keeps the two
in step.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SOCKET_ENV = "MENTED_SOCKET"
DATA_DIR_ENV = "MENTED_DATA_DIR"
CONFIG_ENV = "MENTED_CONFIG"
SOCKET_NAME = "mented.sock"
# The kernel's limit on a Unix socket's path (sun_path), less the terminating NUL
# (Linux 108, macOS 104): the daemon cannot listen at a longer path, nor a hook connect.
MAX_SOCKET_PATH = 103 if sys.platform == "darwin" else 107


def home() -> Path:
    """The user's home directory: `$HOME`, else the password database's entry."""
    return Path(os.environ.get("HOME") or Path("~").expanduser())


def runtime_dir() -> Path:
    """The private per-user directory that holds the socket."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "mented"
    # No per-user runtime dir (macOS, containers): a per-uid directory in the
    # temporary directory, created 0700 by the daemon and checked for ownership.
    tmp = os.environ.get("TMPDIR") or "/tmp"  # noqa: S108 - per-uid, 0700, ownership-checked
    return Path(tmp) / f"mented-{os.getuid()}"


def socket_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The daemon's socket: `explicit`, else `$MENTED_SOCKET`, else the default."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(SOCKET_ENV)
    if env:
        return Path(env)
    return runtime_dir() / SOCKET_NAME


def data_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The LMDB data directory: `explicit`, else `$MENTED_DATA_DIR`, else the default."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env)
    if sys.platform == "darwin":
        return home() / "Library" / "Application Support" / "mented"
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else home() / ".local" / "share") / "mented"


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The user's config file: `explicit`, else `$MENTED_CONFIG`, else the default."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else home() / ".config") / "mented" / "config.toml"


def state_dir() -> Path:
    """Where a detached daemon writes its log file."""
    if sys.platform == "darwin":
        return home() / "Library" / "Logs" / "mented"
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else home() / ".local" / "state") / "mented"
