"""The one error type mentectl shows the user as it is: `CommandError`.

Apart from `commands/`, so that the modules below the commands (the service
manager, ...) can raise it without importing the command layer. `cli.main`
prints its message and exits with its status.
"""

from __future__ import annotations


class CommandError(Exception):
    """A failure the user can act on; the message says what to do."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status
