"""The one error type mentectl shows the user as it is: `CommandError`.

Apart from `commands/`, so that the modules below the commands (the service
manager, ...) can raise it without importing the command layer. `cli.main`
prints its message and exits with its status; with `--json`, as
`{"error": {"code": ..., "message": ...}}` on stdout, so the codes below are
for programs and stay stable (the daemon's own codes are `ErrorCode`'s).
"""

from __future__ import annotations

# mentectl's own error codes, next to the daemon's (`mented.protocol.ErrorCode`).
INVALID_ARGUMENT = "invalid_argument"  # what was given cannot be used (exit status 2)
COMMAND_FAILED = "command_failed"  # the command could not do it (exit status 1)
NOT_RUNNING = "not_running"  # no daemon answers on the socket
BAD_REPLY = "bad_reply"  # something answers on the socket, not as mented does
CONFIG_INVALID = "config_invalid"  # `status`: the daemon runs, its config file is invalid
DEGRADED = "degraded"  # `status`: the daemon runs on a fallback (`problems` says which)
WATCH_DROPPED = "dropped"  # `watch`: the daemon dropped a reader that fell behind
DAEMON_STOPPED = "daemon_stopped"  # `watch`: the daemon closed the connection


class CommandError(Exception):
    """A failure the user can act on; the message says what to do.

    `code`: for `--json`; by default `invalid_argument` for status 2 (what was
    given is wrong), else `command_failed`.
    """

    def __init__(self, message: str, status: int = 1, *, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or (INVALID_ARGUMENT if status == 2 else COMMAND_FAILED)
