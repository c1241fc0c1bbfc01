"""Who sees a memory: the one visibility predicate, over agents and project places."""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

from mented.digest_cache import DigestCache
from mented.store.validation import MAX_PROJECT_LENGTH

if TYPE_CHECKING:
    from mented.memory import Memory


def visible_to(memory: Memory, agent: str | None, cwd: str | None) -> bool:
    """Whether a caller (`agent`, working directory `cwd`) may see `memory`.

    The one visibility rule, used by every lookup: a memory scoped to an agent is
    seen only by that agent; one scoped to a project directory only from that
    directory or inside it (whole path components: /work/app2 is not inside
    /work/app); unscoped memories by everyone. A caller that leaves `agent` or
    `cwd` as None is not filtered on that axis. `cwd` is taken as given and
    through its symlinks (see `_places`): a project directory is stored resolved.
    """
    return _sees_from(memory, agent, _places(cwd))


def _places(cwd: str | None) -> tuple[str, ...] | None:
    """`cwd` normalized, and resolved through its symlinks when that differs.

    Project directories are stored resolved (`mentectl rule add --project` through
    a link stores its target), so a command run through the link sees them; rules
    stored before that, with the link's path, are still seen from the link. Done
    once per lookup, from `_resolved` while the directory is the one resolved.
    """
    if cwd is None:
        return None
    lexical = os.path.normpath(cwd)
    if len(lexical) > MAX_PROJECT_LENGTH:
        # No directory has such a path (the kernel refuses it), and `realpath` of one
        # costs its length squared: 5 minutes for a megabyte of `/a/a/...`.
        return (lexical,)
    real = _resolved.real(lexical)
    return (lexical,) if real == lexical else (lexical, real)


class _Resolved:
    """`os.path.realpath` of the working directories seen lately, by digest.

    A hook resolves its `cwd` for each rule lookup, and an agent works in a handful
    of directories: `realpath` is a `lstat` and a join per component (a tenth of a
    commit's hook). A directory's answer is kept while `stat` of the path finds the
    same directory (device, inode, and change time: a directory renamed, or one
    made anew where a link now leads, has another) and for at most `MAX_AGE_S`;
    a path that does not stat (gone, or not a directory yet) is resolved each time.
    """

    MAX_ENTRIES = 256
    MAX_BYTES = 1 << 20  # the paths together: each at most MAX_PROJECT_LENGTH
    MAX_AGE_S = 10.0

    def __init__(self) -> None:
        self._cache: DigestCache[tuple[str, tuple[int, int, int], float]]
        self._cache = DigestCache(max_entries=self.MAX_ENTRIES, max_bytes=self.MAX_BYTES)
        self._lock = threading.Lock()  # lookups run in the daemon's worker threads too

    def real(self, lexical: str) -> str:
        """`os.path.realpath(lexical)`, from the cache while it still holds."""
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(lexical)
        if cached is not None and now - cached[2] < self.MAX_AGE_S:
            found = _directory(lexical)
            if found is not None and found == cached[1]:
                return cached[0]
        real = os.path.realpath(lexical)
        # The directory `real` names itself (no link on the way): the stamp is of it.
        stamp = _directory(real)
        if stamp is not None:
            with self._lock:
                self._cache.put(lexical, (real, stamp, now), len(lexical) + len(real))
        return real


def _directory(path: str) -> tuple[int, int, int] | None:
    """Which directory `path` leads to: its device, inode and change time; None when none."""
    try:
        info = os.stat(path)  # noqa: PTH116 - per lookup: a str path, no Path object
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino, info.st_ctime_ns


_resolved = _Resolved()


def _sees_from(memory: Memory, agent: str | None, places: tuple[str, ...] | None) -> bool:
    """`visible_to` with the working directory already in `_places` form."""
    if places is None:
        return _sees(memory, agent, None)
    return any(_sees(memory, agent, place) for place in places)


def _sees(memory: Memory, agent: str | None, cwd: str | None) -> bool:
    """`visible_to` for one normalized working directory."""
    if agent is not None and memory.agent is not None and memory.agent != agent:
        return False
    if cwd is None or memory.project is None:
        return True
    project = memory.project  # normalized when it was written
    if cwd == project:
        return True
    return cwd.startswith(project if project.endswith(os.sep) else project + os.sep)
