"""The sync clone's files, written and read without following a link or leaving the clone.

A remote fills the clone: after a merge its work tree holds whatever was pushed, by
anyone who can push. A `records/<prefix>/` that is a symbolic link (to `~/.ssh`, to
`/etc`), a record that is a link to `/dev/zero`, a record nested 1,000 deep or one of
a gigabyte are all possible. So, in the clone:

- every path is walked from the clone's root one directory at a time, each opened with
  `O_NOFOLLOW | O_DIRECTORY` (mented/untrusted.py): a link anywhere on the way is
  refused, naming where it points, and nothing is written or read through it;
- a file is written as `<name>.partial` created with `O_EXCL | O_NOFOLLOW` in the
  opened directory, then renamed over the name in that same directory;
- a file is read with `untrusted.read_file` (regular files only, at most
  `MAX_RECORD_BYTES`).

The clone is mented's: nobody else's file is ever opened for writing here.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Self

from mented.untrusted import Refused, open_directory, read_file, shown

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# A record is one line: 64 KiB of text, escaped as JSON (up to 6 bytes a character for
# control characters), tags and ids. Anything larger was not written by mented.
MAX_RECORD_BYTES = 512 * 1024

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class CloneFiles:
    """Files under the clone's root, reached without following any link.

    Opened directories are kept (by their path relative to the root) until `close`,
    so that reading a thousand records of one prefix opens the prefix once.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._fds: dict[str, int] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def _directory(self, relative: str, *, create: bool) -> int:
        """The fd of the directory `relative` (a/b/c), each part opened without a link.

        Raises:
            Refused: a part is a symbolic link or not a directory (named, with its target).
            FileNotFoundError: a part is missing and `create` is False.
        """
        if relative in self._fds:
            return self._fds[relative]
        if not relative:
            fd = open_directory(self.root)
        else:
            parent_path, _, name = relative.rpartition("/")
            parent = self._directory(parent_path, create=create)
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=parent)
            try:
                fd = open_directory(name, dir_fd=parent)
            except Refused as exc:
                raise Refused(f"{shown(relative)}: {_reason(exc)}") from None
        self._fds[relative] = fd
        return fd

    def write(self, relative: str, data: bytes) -> None:
        """Write `relative` whole (a partial file renamed over it), never through a link.

        Raises:
            Refused: a directory on the way is a link or not a directory.
            OSError: the write failed (a full disk): nothing is left half-written.
        """
        folder, _, name = relative.rpartition("/")
        parent = self._directory(folder, create=True)
        partial = name + ".partial"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial, dir_fd=parent)
        fd = os.open(partial, _CREATE_FLAGS, 0o600, dir_fd=parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(partial, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(partial, dir_fd=parent)
            raise

    def remove(self, relative: str) -> None:
        """Remove the file `relative` if it is there (a link is removed, not followed).

        Raises:
            Refused: a directory on the way is a link.
        """
        folder, _, name = relative.rpartition("/")
        try:
            parent = self._directory(folder, create=False)
        except FileNotFoundError:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=parent)

    def read(self, relative: str) -> bytes:
        """The bytes of the regular file `relative`, at most `MAX_RECORD_BYTES`.

        Raises:
            Refused: it or a directory on the way is a link, not a regular file, or too big.
            FileNotFoundError: it is not there.
        """
        folder, _, name = relative.rpartition("/")
        parent = self._directory(folder, create=False)
        return read_file(name, limit=MAX_RECORD_BYTES, dir_fd=parent, shown_as=relative)


def _reason(exc: Refused) -> str:
    """A refusal's message without the leading name (the caller names the whole path)."""
    _, _, reason = str(exc).partition(": ")
    return reason or str(exc)


def batches(names: Iterator[str] | list[str], size: int) -> Iterator[list[str]]:
    """`names` in lists of at most `size`."""
    batch: list[str] = []
    for name in names:
        batch.append(name)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
