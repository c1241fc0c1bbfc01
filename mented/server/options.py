"""What the daemon serves and where (`ServerOptions`), and why it could not start."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mented.first_answers import FirstAnswers


class StartupError(Exception):
    """The daemon cannot start; the message says why and what to do."""


@dataclass(frozen=True, kw_only=True)
class ServerOptions:
    """What the daemon serves and where."""

    socket_path: Path
    data_dir: Path
    config_path: Path | None = None
    # A listening socket handed over by systemd or launchd instead of binding our own.
    inherited_socket: socket.socket | None = None
    connection_idle_s: float | None = None  # None: the config file's value
    request_timeout_s: float = 10.0  # a started frame must be complete within this
    send_timeout_s: float = 10.0  # an answer must be read by the client within this
    shutdown_grace_s: float = 5.0
    # Requests being received or answered and answers not yet read, all connections
    # together (see _HeldBytes).
    held_limit_bytes: int = 64 * 1024 * 1024
    handle_signals: bool = True
    on_ready: Callable[[], None] | None = None
    on_stopping: Callable[[], None] | None = None
    on_reloading: Callable[[], None] | None = None
    on_reloaded: Callable[[str | None], None] | None = None  # gets reload()'s result
    # With an inherited socket: exit after this many seconds without a connection;
    # the service manager keeps the socket and starts a daemon for the next client.
    # None: the config file's `[daemon] idle_timeout_s`; 0: never.
    idle_timeout_s: float | None = None
    # Who started the daemon, for `status` (see mented.service.how_started).
    started_by: str = "unknown"
    # What answered the first hooks before trio was imported: `open` serves on with it.
    first_answers: FirstAnswers | None = None
