"""Reading what mented does not own: a project's `.mented/`, its agent settings, a sync clone.

Every byte that comes from a repository, a sync remote or another user's directory is
hostile until checked. This module is the one way mented reads such places:

- `read_file` opens with `O_NOFOLLOW | O_NONBLOCK` (a symlink is refused, a named
  pipe never blocks), checks with `fstat` that it opened a regular file, and reads at
  most `limit` bytes: `/dev/zero`, a FIFO or a huge file is refused, never read.
- `list_names` lists a directory opened without following a link, and returns only the
  entries that are regular files with names that decode as UTF-8 (git stores names as
  bytes; a clone can carry any); the rest come back as refusals that name them.
- `check_nesting` bounds how deep a JSON document nests before a parser recurses into it.
- `owned_by_user` says whether a file or directory is the user's own and not writable by
  others (another user's `/tmp/.mented/` is not).
- `shown` makes a name from such a place safe to put in a message: control characters
  (a terminal escape, a bidi override) become visible escapes.

Failures are `Refused` errors with a message that names the path and says what to do;
callers turn them into a *problem* reported for that project or record, never an
exception that escapes to a request and never a reason to serve less of the user's own
rules.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from collections.abc import Iterable

# How deep a JSON document from an untrusted place may nest: a rule needs three levels.
MAX_NESTING = 32

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_DIRECTORY
_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_TARGET_SHOWN = 200  # characters of a link's target put in a message (PATH_MAX is 4096)


class Refused(Exception):  # noqa: N818 - "refused" is what the user is told
    """An untrusted file or directory that mented would not read, and why (for the user)."""


class Listing(msgspec.Struct, frozen=True):
    """A directory's regular files (decoded names, sorted) and the entries refused."""

    names: list[str]
    refused: list[str]


def shown(text: str | bytes) -> str:
    """`text` safe for a message: each control character (ESC, BEL, bidi overrides...) escaped.

    Bytes that are not UTF-8 (a file name from a clone) are shown as `\\xNN`.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(
        char.encode("unicode_escape").decode("ascii")
        if unicodedata.category(char) in _CONTROL_CATEGORIES
        else char
        for char in text
    )


def describe_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words ("a named pipe")."""
    kinds = [
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _link_target(path: str | bytes | os.PathLike[str], dir_fd: int | None) -> str:
    """Where a link points, safe for a message (`shown`) and cut to `_TARGET_SHOWN`
    characters: what a repository tried to reach, never followed."""
    try:
        target = os.readlink(os.fsencode(path), dir_fd=dir_fd)
    except OSError:
        return "?"
    text = shown(target)
    return text if len(text) <= _TARGET_SHOWN else text[: _TARGET_SHOWN - 3] + "..."


def read_file(
    path: str | os.PathLike[str], *, limit: int, dir_fd: int | None = None, shown_as: str = ""
) -> bytes:
    """The bytes of a regular file, at most `limit` of them, never through a link.

    Args:
        path: the file (relative to `dir_fd` when one is given).
        limit: the most bytes accepted; a larger file is refused, not cut.
        dir_fd: a directory opened with `open_directory`, so that the file is looked up in
            it and no link above it can be swapped in between.
        shown_as: how to name the file in a message (default: the path).

    Raises:
        Refused: it is a symlink, not a regular file, larger than `limit`, or unreadable.
        FileNotFoundError: it does not exist.
    """
    name = shown(shown_as or os.fspath(path))
    try:
        fd = os.open(path, _OPEN_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        info = _lstat(path, dir_fd)
        if info is not None and stat.S_ISLNK(info.st_mode):
            target = _link_target(path, dir_fd)
            raise Refused(
                f"{name}: a symbolic link (to {target}); mented does not follow links "
                "in files it does not own: replace it with the file itself"
            ) from None
        raise Refused(f"{name}: cannot read it: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(
                f"{name}: {describe_kind(info.st_mode)}, not a regular file; "
                "only regular files are read: remove or replace it"
            )
        if info.st_size > limit:
            raise Refused(f"{name}: {info.st_size} bytes, over the {limit}-byte limit")
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise Refused(f"{name}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > limit:  # it grew while read
        raise Refused(f"{name}: over the {limit}-byte limit")
    return data


def _lstat(path: str | os.PathLike[str], dir_fd: int | None) -> os.stat_result | None:
    try:
        return os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None


def open_directory(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> int:
    """A file descriptor of a directory opened without following a link (close it after).

    Raises:
        Refused: it is a symlink or not a directory.
        FileNotFoundError: it does not exist.
    """
    try:
        return os.open(path, _DIRECTORY_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        name = shown(os.fspath(path))
        info = _lstat(path, dir_fd)
        if info is not None and stat.S_ISLNK(info.st_mode):
            target = _link_target(path, dir_fd)
            raise Refused(
                f"{name}: a symbolic link (to {target}); mented does not follow links "
                "in places it does not own: replace it with the directory itself"
            ) from None
        if info is not None and not stat.S_ISDIR(info.st_mode):
            raise Refused(f"{name}: {describe_kind(info.st_mode)}, not a directory") from None
        raise Refused(f"{name}: cannot open it: {exc.strerror or exc}") from None


def list_names(directory_fd: int, *, suffixes: Iterable[str] = (), limit: int = 1024) -> Listing:
    """The regular files of an open directory whose names end with one of `suffixes`.

    Entries are checked without following links; a link (named with where it points),
    a pipe, a device or a name that is not UTF-8 is refused (and named), never opened.
    At most `limit` names are looked at, the rest refused together.
    """
    wanted = tuple(suffixes)
    names: list[str] = []
    refused: list[str] = []
    with os.scandir(os.dup(directory_fd)) as entries:
        for count, entry in enumerate(entries):
            raw = os.fsencode(entry.name)
            if count >= limit:
                refused.append(f"more than {limit} entries: the rest were not read")
                break
            try:
                name = raw.decode("utf-8")
            except UnicodeDecodeError:
                refused.append(f"{shown(raw)}: the name is not UTF-8 text; rename the file")
                continue
            if wanted and not name.endswith(wanted):
                continue
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                target = _link_target(raw, directory_fd)
                refused.append(
                    f"{shown(name)}: a symbolic link (to {target}), not a regular file; "
                    "mented does not follow links here: replace it with the file itself"
                )
                continue
            if not stat.S_ISREG(mode):
                refused.append(f"{shown(name)}: {describe_kind(mode)}, not a regular file")
                continue
            names.append(name)
    names.sort()
    return Listing(names, refused)


def owned_by_user(info: os.stat_result) -> bool:
    """Whether a file or directory is the user's own and nobody else may write it."""
    return info.st_uid == os.geteuid() and not info.st_mode & stat.S_IWOTH


def check_nesting(data: bytes, *, limit: int = MAX_NESTING, shown_as: str = "") -> None:
    """Refuse a JSON document that nests deeper than `limit` before a parser recurses.

    Brackets inside strings do not count (a rule's text may hold any). The strings are
    dropped by a regular expression and what is left is scanned bracket by bracket.

    Raises:
        Refused: it nests deeper than `limit`.
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return  # the common case: it cannot nest that deep at all
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        depth += 1 if byte in _OPENING else -1
        if depth > limit:
            where = f"{shown(shown_as)}: " if shown_as else ""
            raise Refused(f"{where}nested more than {limit} levels deep")


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_OPENING = frozenset(b"[{")
