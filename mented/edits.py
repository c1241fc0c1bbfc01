"""File edits as actions: which actions an edit of these files performs, by path pattern.

An action may name `paths`, patterns of the files whose edits perform it
(`db-migration`: `**/migrations/**`). They are .gitignore patterns, with
`pathspec`'s semantics (the library pip and black use for the same job), matched
by `mented.path_patterns` in time linear in the path (pathspec's regular
expressions backtrack: one pattern held the event loop for seconds):
`CHANGELOG.md` matches at any depth, `/CHANGELOG.md` only at the root,
`migrations/` any directory of that name, `**` any number of directories. A path
longer than PATH_MAX, or deeper than `MAX_PATH_DEPTH`, performs no action.

Paths are matched relative to the project root: the nearest directory above
the file that holds a `.git` (a repository's top level), else the agent's
working directory. Finding it costs a few `stat` calls, cached per directory.
"""

from __future__ import annotations

import functools
import itertools
import os
import posixpath  # agents send POSIX paths; pathlib would build objects per call
from typing import TYPE_CHECKING

from mented.digest_cache import DigestCache
from mented.path_patterns import MAX_PATH_CHARS, PathSpec

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mented.actions import ActionTable

MAX_ROOTS_CACHED = 1024  # directories whose project root is remembered
MAX_ROOTS_BYTES = 1 << 20
MAX_PATHS_PER_EDIT = 64  # files looked at in one edit (a patch may touch many)


@functools.lru_cache(maxsize=256)
def _compile(patterns: tuple[str, ...]) -> PathSpec:
    return PathSpec(patterns)


def _exists(path: str) -> bool:
    try:
        os.lstat(path)
    except (OSError, ValueError):  # ValueError: a NUL in an agent's path
        return False
    return True


class EditMatcher:
    """Names the actions an edit of some files performs, from the table's `paths`."""

    def __init__(self, table: ActionTable) -> None:
        self._specs = [
            (action.name, _compile(tuple(action.paths)))
            for action in table.actions()
            if action.paths
        ]
        # By the directory's digest (an agent's path, up to 4 KiB), bounded in bytes.
        self._roots: DigestCache[tuple[str | None]] = DigestCache(
            max_entries=MAX_ROOTS_CACHED, max_bytes=MAX_ROOTS_BYTES
        )

    def __bool__(self) -> bool:
        """Whether any action is performed by a file edit."""
        return bool(self._specs)

    def actions_for(self, paths: Iterable[str], cwd: str | None) -> tuple[str, ...]:
        """The actions editing `paths` performs, in table order. Never raises."""
        if not self._specs:
            return ()
        relative = [
            self.relative_path(path, cwd) for path in itertools.islice(paths, MAX_PATHS_PER_EDIT)
        ]
        return tuple(
            name for name, spec in self._specs if any(spec.match_file(p) for p in relative if p)
        )

    def explain(self, paths: Iterable[str], cwd: str | None) -> list[tuple[str, str, str]]:
        """Each (action, pattern, path relative to its root) where the pattern takes the path."""
        found: list[tuple[str, str, str]] = []
        for path in itertools.islice(paths, MAX_PATHS_PER_EDIT):
            relative = self.relative_path(path, cwd)
            found.extend(
                (name, pattern.pattern, relative)
                for name, spec in self._specs
                for pattern in spec.patterns
                if pattern.include and pattern.match_file(relative)
            )
        return found

    def relative_path(self, path: str, cwd: str | None) -> str:
        """`path` relative to its project root (see the module doc), with `/` separators."""
        absolute = posixpath.normpath(posixpath.join(cwd or "/", path))
        if len(absolute) > MAX_PATH_CHARS:
            return ""  # no file has such a path: no pattern matches it (and no walk up)
        root = self._root_of(posixpath.dirname(absolute)) or (cwd and posixpath.normpath(cwd))
        if root and (absolute == root or absolute.startswith(root.rstrip("/") + "/")):
            return posixpath.relpath(absolute, root)
        return absolute.lstrip("/")

    def _root_of(self, directory: str) -> str | None:
        """The nearest directory from `directory` up that holds `.git`; cached."""
        cached = self._roots.get(directory)
        if cached is not None:
            return cached[0]
        root: str | None = None
        current = directory
        while True:
            if _exists(posixpath.join(current, ".git")):
                root = current
                break
            parent = posixpath.dirname(current)
            if parent == current:
                break
            current = parent
        self._roots.put(directory, (root,), len(root or ""))
        return root
