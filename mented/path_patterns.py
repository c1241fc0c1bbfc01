"""Path patterns matched in time linear in the path: .gitignore patterns without backtracking.

An action's `paths` are .gitignore patterns (`mented.edits`). `pathspec` turns
each into a regular expression, and Python's backtracking engine can take
exponential time on one: `**/a/**/a/**/a/**/a/**/b` against a 90-level path held
the event loop 3.3 to 4.2 s, 95 s with one more `a`. Here a pattern is a list of
segments, matched against the path's segments by an automaton kept as a set of
states (the Thompson construction): each path segment moves every state at
once, so the cost is the path's segments times the pattern's, whatever the
pattern. Within a segment, a glob is matched by `fnmatch`'s translation, whose
stars do not backtrack into each other (Python 3.9 and later), over at most a
file name's bytes.

The semantics are pathspec's `GitIgnoreSpec` (tests/test_path_patterns.py checks
them against it): a pattern without a slash but at its end matches at any depth;
one with a slash elsewhere is anchored at the root; a trailing `/` takes
directories only; `**` as a whole segment is any number of directories; a
pattern that matches a directory matches everything inside it; `!` negates, and
the last pattern that matches decides, but a pattern that takes the path only
through a directory above it (a directory pattern, or `a` for `a/b`) never undoes
one that takes the path itself, whether it includes or excludes (pathspec 1.x).

Bounds: a pattern of more than `MAX_PATTERN_CHARS` characters or
`MAX_PATTERN_SEGMENTS` segments is refused at load; a path longer than
`MAX_PATH_CHARS` or deeper than `MAX_PATH_DEPTH` is matched by no pattern.
`path_pattern_problem` says why a pattern is refused, for the action table's checks
at load (`mented.actions`) and for `mentectl adopt`.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

MAX_PATTERN_CHARS = 1024
MAX_PATTERN_SEGMENTS = 64
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux
MAX_PATH_DEPTH = 256  # directories a matched path may have above its file
MAX_SEGMENT_CHARS = 1024  # longer than any file name (255 bytes): matched by no glob

_ANY_DEPTH = None  # a `**` segment: any number of directories, none included


class PathPatternError(ValueError):
    """A path pattern that cannot be used (the message names it and says why)."""


@dataclass(frozen=True, slots=True)
class PathPattern:
    """One compiled .gitignore pattern."""

    pattern: str  # as written
    include: bool  # False for a `!` pattern
    # Each a compiled segment glob, or None for `**` (any number of directories).
    segments: tuple[re.Pattern[str] | None, ...]
    # A trailing `/`: only a directory above the file matches (the segments say so
    # already); its match ranks below a file pattern's (`PathSpec`).
    directory_only: bool
    open_end: bool = False  # a trailing `/**`: whatever is inside, at any depth
    everything: bool = False  # `**` (or `*`) alone: every path

    def match_file(self, path: str) -> bool:
        """Whether this pattern takes `path` (relative, `/`-separated), ignoring `include`."""
        parts = _path_segments(path)
        return parts is not None and bool(self.rank(parts))

    def rank(self, parts: list[str]) -> int:
        """0: no match; 1: a directory of the path matches (by a directory pattern, or
        by a pattern that takes the path only through a directory of it); 2: the path
        itself matches. pathspec ranks its matches so (its regex's directory mark)."""
        if self.everything:
            if self.directory_only:
                return 1 if len(parts) > 1 else 0
            return 2
        segments = self.segments
        end = len(segments)
        found = 0
        states = _closure(segments, {0})
        for depth, part in enumerate(parts, start=1):
            moved: set[int] = set()
            for state in states:
                if state == end:
                    continue
                glob = segments[state]
                if glob is None:
                    moved.add(state)  # `**` takes this directory and stays
                elif glob.match(part):
                    moved.add(state + 1)
            states = _closure(segments, moved)
            if end in states:
                if self.directory_only:
                    return 1
                if self.open_end or depth == len(parts):
                    return 2
                found = 1  # through a directory: the whole path may still match
            if not states:
                break
        return found


def _closure(segments: tuple[re.Pattern[str] | None, ...], states: set[int]) -> set[int]:
    """`states` and those reached past `**` segments that take no directory."""
    reached = set(states)
    pending = list(states)
    while pending:
        state = pending.pop()
        if state < len(segments) and segments[state] is None and state + 1 not in reached:
            reached.add(state + 1)
            pending.append(state + 1)
    return reached


def _path_segments(path: str) -> list[str] | None:
    """The path's segments, or None past the bounds (no pattern matches it then)."""
    if len(path) > MAX_PATH_CHARS:
        return None
    parts = [part for part in path.split("/") if part]
    if not parts or len(parts) > MAX_PATH_DEPTH + 1:
        return None
    if any(len(part) > MAX_SEGMENT_CHARS for part in parts):
        return None
    return parts


def compile_pattern(pattern: str) -> PathPattern | None:
    """`pattern` compiled; None for a line that matches nothing (blank, a comment, `/`).

    Raises:
        PathPatternError: too long, too many segments, or not a valid pattern.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PathPatternError(
            f"path pattern {pattern[:60]!r}… has {len(pattern)} characters, over the "
            f"{MAX_PATTERN_CHARS} a pattern may have; shorten it"
        )
    text = pattern if pattern.endswith("\\ ") else pattern.rstrip()
    if not text or text.startswith("#") or text == "/":
        return None
    include = not text.startswith("!")
    if not include:
        text = text[1:]
    segments = text.split("/")
    if len(segments) > MAX_PATTERN_SEGMENTS:
        raise PathPatternError(
            f"path pattern {pattern!r} has {len(segments)} segments, over the "
            f"{MAX_PATTERN_SEGMENTS} a pattern may have; shorten it"
        )
    directory_only = not segments[-1]
    if not segments[0]:
        del segments[0]  # a leading `/`: anchored at the root
    elif (len(segments) == 1 or (len(segments) == 2 and not segments[1])) and segments[0] != "**":
        segments.insert(0, "**")  # no slash but at the end: at any depth
    if not segments:
        raise PathPatternError(f"path pattern {pattern!r} matches nothing")
    if not segments[-1]:
        segments[-1] = "**"
    collapsed: list[str] = []
    for segment in segments:
        if not (segment == "**" and collapsed and collapsed[-1] == "**"):
            collapsed.append(segment)
    if collapsed in (["**"], ["**", "*"]):
        return PathPattern(pattern, include, (), directory_only, everything=True)
    open_end = collapsed[-1] == "**"
    if open_end:
        # A trailing `**`: at least one more segment (what is inside, not the thing).
        collapsed[-1] = "*"
    return PathPattern(
        pattern,
        include,
        tuple(_ANY_DEPTH if seg == "**" else _segment_glob(seg, pattern) for seg in collapsed),
        directory_only,
        open_end=open_end and not directory_only,
    )


def _segment_glob(segment: str, pattern: str) -> re.Pattern[str]:
    r"""One segment's glob as a regular expression (`\x` is a literal x, as in git)."""
    if segment.endswith("\\") and not segment.endswith("\\\\"):
        raise PathPatternError(f"path pattern {pattern!r} ends with a lone backslash")
    parts = re.split(r"(\\.)", segment)
    glob = "".join(
        f"[{part[1]}]" if part.startswith("\\") and len(part) == 2 else part for part in parts
    )
    return re.compile(fnmatch.translate(glob), re.DOTALL)


def path_pattern_problem(pattern: str, *, bounds_only: bool = False) -> str | None:
    """Why `pattern` is not a usable path pattern, or None.

    `bounds_only`: this module's own checks alone, for the built-in table
    (tests/test_path_patterns.py checks its patterns against pathspec too): pathspec
    is then not imported at start, only when a config file names path patterns.
    """
    try:
        compile_pattern(pattern)  # the bounds first: pathspec's check is a regex too
        if bounds_only:
            return None
        import pathspec  # noqa: PLC0415 - see the docstring

        pathspec.GitIgnoreSpec.from_lines([pattern])
    except ValueError as exc:  # both raise ValueError subclasses for bad patterns
        return str(exc)
    return None


class PathSpec:
    """Patterns in order; a path matches when the last pattern that takes it includes it."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        compiled = (compile_pattern(pattern) for pattern in patterns)
        self.patterns = [pattern for pattern in compiled if pattern is not None]

    def match_file(self, path: str) -> bool:
        parts = _path_segments(path)
        if parts is None:
            return False
        matched, priority = False, 0
        for pattern in self.patterns:
            # As `GitIgnoreSpec` (pathspec 1.x): a match through a directory (rank 1)
            # never undoes a match of the path itself (2); among equals the last decides.
            rank = pattern.rank(parts)
            if rank and rank >= priority:
                matched, priority = pattern.include, rank
        return matched
