"""One daemon per data directory: an exclusive `flock` on `mented.lock`.

The lock file holds the owner's pid and socket, so a second daemon can say who
holds the directory. The kernel drops the lock when the owner dies, even by
SIGKILL, so a crash never leaves the directory locked.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_NAME = "mented.lock"


class DataDirBusyError(Exception):
    """Another live daemon serves this data directory."""


class DataDirLock:
    """Holds the data directory's lock for the life of the daemon."""

    def __init__(self, data_dir: Path, socket_path: Path) -> None:
        """Take the lock.

        Raises:
            DataDirBusyError: another daemon holds it (the message names its pid and socket).
        """
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = data_dir / LOCK_NAME
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").split("\n")
            os.close(fd)
            pid = holder[0] if holder and holder[0] else "?"
            where = holder[1] if len(holder) > 1 and holder[1] else "?"
            raise DataDirBusyError(
                f"another mented (pid {pid}, socket {where}) already serves {data_dir}; "
                "stop it first (`mentectl stop`) or use another --data-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{socket_path}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
