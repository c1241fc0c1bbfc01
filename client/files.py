"""Writing the user's files (agent settings, Codex's config, service units) safely.

Every file mentectl writes outside its own data directory goes through
`write_atomically`: the reader (an agent starting, systemd reloading) sees the
old file or the new one, never half of one; a symlinked file (a dotfiles
checkout) stays a link and its target is updated; and the text is on disk
before mentectl says it is done. `display_path` is how mentectl names such a
file to the user.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mented import paths

BACKUP_SUFFIX = ".mented-bak"


def backup_path(path: Path) -> Path:
    """Where `write_atomically(..., backup=True)` keeps the previous version of `path`."""
    return path.with_name(path.name + BACKUP_SUFFIX)


def write_atomically(
    path: Path, text: str | bytes, *, backup: bool = False, mode: int = 0o644
) -> Path | None:
    """Replace the file at `path` with `text`: a temporary file beside it, fsync, rename.

    A symlink is followed: the file it points to is replaced and the link stays.

    Args:
        path: the file; its directory is created when missing.
        text: the new content (a str is written as UTF-8).
        backup: first save the file's current content as `<file>.mented-bak`
            beside it (the link's target, for a link), when there is a file.
        mode: the permission bits of a new file; a replaced file keeps its own.

    Returns:
        The backup's path, or None when none was written.

    Raises:
        OSError: the file or its directory cannot be read or written.
    """
    # resolve(): through every link in a chain, to the file that holds the text.
    target = path.resolve() if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        previous = None
    else:
        previous = target.read_bytes() if backup else None
    saved = None
    if previous is not None:
        saved = backup_path(target)
        _replace(saved, previous, mode)
    _replace(target, text.encode() if isinstance(text, str) else text, mode)
    return saved


def _replace(path: Path, data: bytes, mode: int) -> None:
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.chmod(mode)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    # The rename is only durable once the directory entry is on disk too.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def remove_file(path: Path, *, up_to: Path | None = None) -> list[Path]:
    """Remove the file at `path`, then the directories above it that this leaves empty.

    Args:
        path: the file (not followed when it is a link: the link goes).
        up_to: the highest directory that may go, itself included: the agent's
            config directory (`~/.gemini`), a project's `.claude`; None: only the
            file. A directory that still holds anything stays, and so does every
            one above it.

    Returns:
        The directories removed, deepest first.

    Raises:
        OSError: the file cannot be removed.
    """
    path.unlink(missing_ok=True)
    removed: list[Path] = []
    if up_to is None:
        return removed
    directory = path.parent
    while directory.is_relative_to(up_to):
        try:
            directory.rmdir()  # only when empty; never through a link
        except OSError:
            break
        removed.append(directory)
        if directory == up_to:
            break
        directory = directory.parent
    return removed


def display_path(path: Path) -> str:
    """`path` for people: under the home directory it starts with `~`."""
    home = str(paths.home())
    text = str(path)
    return "~" + text[len(home) :] if text.startswith(home + os.sep) else text
