"""The agents' own rule files, found and read for `mentectl adopt` (mented.adopt).

Each agent reads its rules from its own files, with its own front-matter keys:

- `CLAUDE.md`, `CLAUDE.local.md`, `AGENTS.md`, `GEMINI.md`, `.github/copilot-instructions.md`,
  `.cursorrules`, `.windsurfrules`: plain Markdown, for everything in the project;
- `.github/instructions/*.instructions.md`: `applyTo: "**/*.ts,**/*.tsx"` (one string, commas);
- `.cursor/rules/*.mdc` (and the `.md` users write by mistake): `globs: *.ts, src/**` (commas,
  unquoted, or a list), `alwaysApply: true`, `description`;
- `.claude/rules/*.md`: `paths:` a list (or one string) of globs, brace forms `*.{ts,tsx}`;
- `.windsurf/rules/*.md`: `trigger: glob|always_on|model_decision|manual`, `globs`.

A file's globs become `.gitignore` patterns (mented.path_patterns): a brace form is expanded
(at most `MAX_EXPANSIONS` patterns), comma-separated lists split outside braces.

Every file is read with mented.untrusted (no link followed, regular files only, at most
`MAX_SOURCE_BYTES`), decoded as UTF-8; a file that cannot be read is a `Refused` with the
reason, never an exception out of `read_source`. The front matter is read by a small bounded
reader (`parse_front_matter`) of the flat `key: value` and list forms these files use: PyYAML is
no dependency, and nesting is no part of any agent's format (a nested line is ignored, and
named in `Source.notes`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from mented.untrusted import Refused, list_names, open_directory, read_file, shown

MAX_SOURCE_BYTES = 256 * 1024  # a rule file larger than this is no rule file
MAX_FRONT_MATTER_LINES = 64
MAX_EXPANSIONS = 64  # patterns one brace glob may expand to
MAX_DIRECTORY_FILES = 256  # files read from one rules directory

# The files of a project (relative to its root), in the order they are read.
PROJECT_FILES = (
    "CLAUDE.md",
    "CLAUDE.local.md",
    ".claude/CLAUDE.md",
    "AGENTS.md",
    "GEMINI.md",
    ".github/copilot-instructions.md",
    ".cursorrules",
    ".windsurfrules",
)
# Directories of rule files (relative to a project's root, or the home directory) and the
# names read in them.
PROJECT_DIRECTORIES = (
    (".github/instructions", (".instructions.md",)),
    (".cursor/rules", (".mdc", ".md")),
    (".claude/rules", (".md",)),
    (".windsurf/rules", (".md",)),
)
# The user's own files, relative to the home directory (Codex: $CODEX_HOME).
USER_FILES = (".claude/CLAUDE.md", ".codex/AGENTS.md", ".gemini/GEMINI.md")
USER_DIRECTORIES = ((".claude/rules", (".md",)),)

FrontValue = str | list[str]


@dataclass
class Source:
    """One rule file, read: its body, and what its front matter scopes it to."""

    path: str  # as given or found (absolute for the ones found)
    text: str  # the body, front matter removed
    first_line: int  # the line of the file the body starts at (1-based)
    front: dict[str, FrontValue] = field(default_factory=dict)
    globs: tuple[str, ...] = ()  # .gitignore patterns the file is scoped to; () for all files
    always: bool = False  # `alwaysApply: true` / `trigger: always_on`
    notes: list[str] = field(default_factory=list)  # what was ignored in it, for the user


def find_sources(project: Path | None, home: Path | None) -> tuple[list[Path], list[str]]:
    """The agent rule files of the user (`home`) and of a project (its root), and refusals.

    Files that do not exist are left out; a rules directory that is a link (or holds
    one) is refused, named in the second list.
    """
    found: list[Path] = []
    refused: list[str] = []
    if home is not None:
        codex = os.environ.get("CODEX_HOME")
        for name in USER_FILES:
            path = (
                Path(codex) / "AGENTS.md" if codex and name.startswith(".codex/") else home / name
            )
            if os.path.lexists(path):
                found.append(path)
        _directories(home, USER_DIRECTORIES, found, refused)
    if project is not None:
        found.extend(project / name for name in PROJECT_FILES if os.path.lexists(project / name))
        _directories(project, PROJECT_DIRECTORIES, found, refused)
    return found, refused


def files_in(directory: Path) -> tuple[list[Path], list[str]]:
    """The rule files a directory given on the command line holds (a project or a rules dir)."""
    own, refused = find_sources(directory, None)
    if own:
        return own, refused
    try:
        fd = open_directory(directory)
    except (Refused, OSError) as exc:
        return [], [str(exc)]
    try:
        listing = list_names(fd, suffixes=(".md", ".mdc"), limit=MAX_DIRECTORY_FILES)
    finally:
        os.close(fd)
    return [directory / name for name in listing.names], [
        f"{shown(str(directory))}/{item}" for item in listing.refused
    ]


def _directories(
    root: Path,
    directories: tuple[tuple[str, tuple[str, ...]], ...],
    found: list[Path],
    refused: list[str],
) -> None:
    for relative, suffixes in directories:
        directory = root / relative
        if not os.path.lexists(directory):
            continue
        try:
            fd = open_directory(directory)
        except (Refused, OSError) as exc:
            refused.append(str(exc))
            continue
        try:
            listing = list_names(fd, suffixes=suffixes, limit=MAX_DIRECTORY_FILES)
        finally:
            os.close(fd)
        found.extend(directory / name for name in listing.names)
        refused.extend(f"{shown(str(directory))}/{item}" for item in listing.refused)


def read_source(path: Path) -> Source:
    """The file at `path`, read safely, its front matter parsed and its globs made patterns.

    Raises:
        Refused: it is a link, not a regular file, too large, missing or not UTF-8.
    """
    try:
        data = read_file(path, limit=MAX_SOURCE_BYTES)
    except FileNotFoundError:
        raise Refused(f"{shown(str(path))}: no such file") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(
            f"{shown(str(path))}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "save it as UTF-8"
        ) from None
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    front, body_start, notes = parse_front_matter(text)
    lines = text.split("\n")
    source = Source(
        path=str(path),
        text="\n".join(lines[body_start:]),
        first_line=body_start + 1,
        front=front,
        notes=notes,
    )
    _scope(source)
    return source


def _scope(source: Source) -> None:
    """Set the source's globs and `always` from its front matter's keys, by agent."""
    front = source.front
    raw: list[str] = []
    for key in ("globs", "paths", "applyTo"):
        value = front.get(key)
        if isinstance(value, list):
            raw.extend(value)
        elif value:
            raw.append(value)
    always = str(front.get("alwaysApply", "")).lower() == "true"
    trigger = str(front.get("trigger", "")).lower()
    if trigger == "always_on":
        always = True
    elif trigger in {"model_decision", "manual"} and not raw:
        source.notes.append(f"trigger: {trigger} (read as a rule for everything)")
    patterns: list[str] = []
    for item in raw:
        for glob in split_globs(item):
            patterns.extend(expand_braces(glob, source.notes))
    # `applyTo: "**"` (Copilot) or `globs: **/*` is every file: no path scope.
    everything = {"**", "**/*", "*", "/**"}
    if patterns and not all(p in everything for p in patterns):
        source.globs = tuple(dict.fromkeys(p for p in patterns if p not in everything))
    source.always = always and not source.globs


def split_globs(value: str) -> list[str]:
    """Comma-separated globs (`*.ts, src/**/*.{js,jsx}`), split outside braces, trimmed."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in value:
        if char == "{":
            depth += 1
        elif char == "}":
            depth = max(0, depth - 1)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip().strip("'\"").strip() for part in parts if part.strip().strip("'\"")]


_BRACE = re.compile(r"\{([^{}]*)\}")


def expand_braces(glob: str, notes: list[str]) -> list[str]:
    """`src/*.{ts,tsx}` as `src/*.ts`, `src/*.tsx`: .gitignore patterns have no braces.

    At most `MAX_EXPANSIONS` patterns; past that the glob is dropped and named in `notes`.
    """
    pending = [glob]
    done: list[str] = []
    while pending:
        item = pending.pop()
        match = _BRACE.search(item)
        if match is None:
            done.append(item)
            continue
        choices = match.group(1).split(",")
        pending.extend(item[: match.start()] + c + item[match.end() :] for c in reversed(choices))
        if len(pending) + len(done) > MAX_EXPANSIONS:
            notes.append(f"glob {shown(glob)!r}: more than {MAX_EXPANSIONS} patterns, left out")
            return []
    return sorted(dict.fromkeys(done), key=done.index)


_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]{0,63})\s*:\s*(.*)$")


def parse_front_matter(text: str) -> tuple[dict[str, FrontValue], int, list[str]]:
    """The `---` front matter at the top of `text`: its keys, the body's first line index, notes.

    The forms read: `key: value` (quoted or not), `key: [a, "b"]`, and `key:` followed by
    `  - item` lines. Anything else (a nested mapping, a block scalar) is left out and noted.
    No front matter (or one never closed within `MAX_FRONT_MATTER_LINES`): `({}, 0, ...)`.
    """
    lines = text.split("\n", MAX_FRONT_MATTER_LINES + 2)
    if not lines or lines[0].strip() != "---":
        return {}, 0, []
    end = next(
        (
            i
            for i in range(1, min(len(lines), MAX_FRONT_MATTER_LINES + 2))
            if lines[i].strip() == "---"
        ),
        None,
    )
    if end is None:
        return {}, 0, ["a front matter `---` that is never closed: read as text"]
    front: dict[str, FrontValue] = {}
    notes: list[str] = []
    current: str | None = None
    for line in lines[1:end]:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        stripped = line.strip()
        if stripped.startswith("- ") and current is not None:
            items = front.setdefault(current, [])
            if isinstance(items, list):
                items.append(_unquote(stripped[2:]))
            continue
        match = _KEY.match(line)
        if match is None or line[0].isspace():
            notes.append(f"front matter line {shown(stripped[:60])!r} left out")
            continue
        key, value = match.group(1), match.group(2).strip()
        current = None
        if not value:
            current = key
            front[key] = []
        elif value.startswith("[") and value.endswith("]"):
            front[key] = [_unquote(v) for v in split_globs(value[1:-1])]
        elif value[0] in "|>":
            notes.append(f"front matter key {key!r}: a block scalar, left out")
        else:
            front[key] = _unquote(value)
    return front, end + 1, notes


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
