"""The user's git aliases, so that `git ci` is matched as the `git commit` it runs.

Git expands an alias (`[alias] ci = commit -v` in a config file, or `git -c
alias.ci=commit ci ...` on the command line) before it runs anything; the
matcher sees only the alias. `expand` rewrites the words after `git` the way git
does; `GitAliases.for_directory` finds the aliases in force in a directory.

Where they are read, and why not with `git config --get-regexp alias`: the
lookup happens for the hook, on the daemon's event loop, before the command
runs. Starting git costs milliseconds and can hang on a slow disk or a network
home; reading the few config files with the small reader below costs tens of
microseconds. The files are those git reads, in its order (a later definition
wins): the system file (`$GIT_CONFIG_SYSTEM`, else `/etc/gitconfig`; none with
`$GIT_CONFIG_NOSYSTEM`), the global ones (`$GIT_CONFIG_GLOBAL`, else
`$XDG_CONFIG_HOME/git/config` then `~/.gitconfig`), the repository's `config`
(found from the directory upwards: `.git` as a directory, or a `.git` file's
`gitdir:`, through a worktree's `commondir`) and `config.worktree`. `[include]
path = ...` is followed; `[includeIf ...]` is not (its conditions need git's
own state), so aliases defined only there are not seen.

Each file is read at most `MAX_CONFIG_BYTES`, includes at most `MAX_INCLUDE_DEPTH`
deep. The answer for a directory is cached and kept while every file it came
from (and every file that could appear, such as a repository's config) has the
same modification time and size: one `stat` per file on a cache hit. The daemon's
hook handler checks those at most once per `RECHECK_S` per directory (`recheck_s`):
a tool call's second event (opencode's after the tool ran) and a quick next command
take the answer as it was; a config file changed is seen by the first hook after that.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented.digest_cache import DigestCache

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

MAX_CONFIG_BYTES = 256 * 1024
MAX_INCLUDE_DEPTH = 4
# Directories whose answers are kept (an agent works in a handful).
MAX_CACHED_DIRECTORIES = 256
MAX_CACHED_BYTES = 4 << 20  # what those answers hold together (paths, aliases)
# How long the hook handler takes a directory's answer without a `stat` of its files:
# well under a model's turn, longer than most commands between a call's two events.
RECHECK_S = 0.5
# `git a` where `a = b`, `b = c`, ...: git follows chains too, and stops at a loop.
MAX_ALIAS_CHAIN = 8
# How far up from the working directory a repository is looked for, from how long a path.
MAX_PARENTS = 64
MAX_DIRECTORY_CHARS = 4096

# Git's own commands: an alias with one of these names is never used by git.
GIT_COMMANDS = frozenset(
    """add am annotate apply archive bisect blame branch bundle cat-file check-attr
    check-ignore check-mailmap check-ref-format checkout checkout-index cherry cherry-pick
    citool clean clone column commit commit-graph commit-tree config count-objects
    credential describe diff diff-files diff-index diff-tree difftool fast-export
    fast-import fetch fetch-pack filter-branch fmt-merge-msg for-each-ref for-each-repo
    format-patch fsck gc get-tar-commit-id grep gui hash-object help hook index-pack init
    instaweb interpret-trailers log ls-files ls-remote ls-tree mailinfo mailsplit
    maintenance merge merge-base merge-file merge-index merge-tree mergetool mktag mktree
    multi-pack-index mv name-rev notes pack-objects pack-refs patch-id prune prune-packed
    pull push range-diff read-tree rebase reflog remote repack replace request-pull rerere
    reset restore rev-list rev-parse revert rm send-email send-pack shortlog show
    show-branch show-index show-ref sparse-checkout stage stash status stripspace
    submodule switch symbolic-ref tag update-index update-ref update-server-info var
    verify-commit verify-pack verify-tag version whatchanged worktree write-tree""".split()  # noqa: SIM905 - as `git help -a` lists them
)


class Aliases(msgspec.Struct, frozen=True):
    """Alias name (lower case, as git compares them) to its value, and a digest of them all."""

    table: Mapping[str, str]
    digest: bytes = b""

    @classmethod
    def of(cls, table: Mapping[str, str]) -> Aliases:
        text = "\0".join(f"{name}\0{value}" for name, value in sorted(table.items()))
        return cls(dict(table), hashlib.blake2b(text.encode(), digest_size=8).digest())


NO_ALIASES = Aliases({})


class Expansion(msgspec.Struct, frozen=True):
    """The words after `git` with the alias replaced, or the shell command it runs."""

    argv: list[str]
    alias: str  # "ci = commit -v", for explain
    shell: str | None = None  # a `!command` alias: this command line, the arguments appended


def expand(argv: Sequence[str], index: int, aliases: Aliases) -> Expansion | None:
    """`argv` (the words after `git`) with the alias at `index` expanded; None when none is.

    `index` is where the subcommand stands, after git's global options. `-c
    alias.NAME=VALUE` among those options wins over the config files. An alias
    naming another alias is followed, as git does (`MAX_ALIAS_CHAIN`); one with
    the name of a git command is ignored, as git ignores it.
    """
    table = dict(aliases.table)
    for position in range(index):
        word = argv[position]
        setting = argv[position + 1] if word == "-c" and position + 1 < index else None
        if word.startswith("-c") and len(word) > 2:
            setting = word[2:]
        if setting is not None:
            key, equals, given = setting.partition("=")
            section, _, name = key.partition(".")
            if section.lower() == "alias" and name:
                table[name.lower()] = given if equals else "true"
    words = list(argv)
    used: list[str] = []
    said: list[str] = []
    for _ in range(MAX_ALIAS_CHAIN):
        if index >= len(words):
            break
        name = words[index]
        value = None if name in GIT_COMMANDS else table.get(name.lower())
        if value is None or name.lower() in used:
            break
        used.append(name.lower())
        said.append(f"{name} = {value}")
        rest = words[index + 1 :]
        if value.startswith("!"):
            shell = " ".join([value[1:], *map(shlex.quote, rest)])
            return Expansion(words, ", ".join(said), shell=shell)
        try:
            replacement = shlex.split(value)
        except ValueError:
            break
        if not replacement:
            break
        words = [*words[:index], *replacement, *rest]
    if not said:
        return None
    return Expansion(words, ", ".join(said))


# ------------------------------------------------------------------ config files


def parse_config(text: str) -> tuple[dict[str, str], list[str]]:
    """The `[alias]` entries of a git config text, and its `[include] path` values, in order.

    Git's syntax: `[section]`, `[section "sub"]`, `name = value` (a name alone
    means true), values with `"..."` quoting and `\\"`, `\\\\`, `\\n`, `\\t`
    escapes, `#`/`;` comments outside quotes, and a `\\` at a line's end joining
    the next line. Names and sections are case-insensitive.
    """
    aliases: dict[str, str] = {}
    includes: list[str] = []
    for section, key, value in config_entries(text):
        if section == "alias" and key:
            aliases[key] = value
        elif section == "include" and key == "path":
            includes.append(value)
    return aliases, includes


def config_entries(text: str) -> list[tuple[str, str, str]]:
    """Every `(section, name, value)` of a git config text, in order (`parse_config`'s syntax;
    section and name in lower case, a subsection as `section.sub`)."""
    entries: list[tuple[str, str, str]] = []
    section = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            header, _, rest = line[1:].partition("]")
            name, _, sub = header.strip().partition(" ")
            section = name.lower() + ("." + sub.strip().strip('"') if sub.strip() else "")
            line = rest.strip()
            if not line or line[0] in "#;":
                continue
        key, equals, raw = line.partition("=")
        key = key.strip().lower()
        value = "true"
        if equals:
            value, i = _value(raw, lines, i)
        entries.append((section, key, value))
    return entries


def _value(raw: str, lines: list[str], i: int) -> tuple[str, int]:
    """A value as git reads it from `raw` on (and the lines after a `\\` ending one).

    As git's config.c `parse_value`: leading and trailing blanks go, blanks inside
    stay, quotes are removed, escapes are taken, a comment ends the value.
    Returns the value and the index of the next line to read.
    """
    escapes = {"n": "\n", "t": "\t", "b": "\b", '"': '"', "\\": "\\"}
    out: list[str] = []
    spaces = 0
    quoted = False
    text = raw
    pos = 0
    while True:
        if pos >= len(text):
            return "".join(out), i
        char = text[pos]
        pos += 1
        if char in " \t" and not quoted:
            spaces += 1 if out else 0
            continue
        if char in "#;" and not quoted:
            return "".join(out), i
        out.append(" " * spaces)
        spaces = 0
        if char == "\\":
            if pos >= len(text):  # the value goes on on the next line
                if i >= len(lines):
                    return "".join(out), i
                text, pos, i = lines[i], 0, i + 1
                continue
            out.append(escapes.get(text[pos], text[pos]))
            pos += 1
        elif char == '"':
            quoted = not quoted
        else:
            out.append(char)


def _read(path: Path) -> str | None:
    """The start of a regular file's text; None for anything else (a named pipe never blocks)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = handle.read(MAX_CONFIG_BYTES)
        except OSError:
            return None
    return data.decode("utf-8", "replace")


# The clock of `recheck_s` (a name of its own, for the tests).
_now = time.monotonic


def _stamp(path: str | Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)  # noqa: PTH116 - checked per hook: a str path, no Path method
    except (OSError, ValueError):
        return None
    return info.st_mtime_ns, info.st_size


def _global_files() -> list[Path]:
    files: list[Path] = []
    if not os.environ.get("GIT_CONFIG_NOSYSTEM"):
        files.append(Path(os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"))
    explicit = os.environ.get("GIT_CONFIG_GLOBAL")
    if explicit:
        files.append(Path(explicit))
    else:
        home = Path(os.environ.get("HOME") or Path("~").expanduser())
        xdg = os.environ.get("XDG_CONFIG_HOME")
        files.append((Path(xdg) if xdg else home / ".config") / "git" / "config")
        files.append(home / ".gitconfig")
    return files


class Repository(msgspec.Struct, frozen=True):
    """Where a directory's repository is: its work tree, git directory and common directory."""

    work_tree: Path
    git_dir: Path
    common_dir: Path  # a worktree's shared directory (`commondir`); else the git directory


def find_repository(directory: str | Path) -> Repository | None:
    """The repository `directory` is in, found upwards as git finds it; None: none.

    Read from the files alone (`.git`, a `.git` file's `gitdir:`, `commondir`), without
    running git: git in a directory mented does not own would run what its config names.
    """
    current = Path(directory)
    for _ in range(MAX_PARENTS):
        git_dir = _git_dir(current / ".git")
        if git_dir is not None:
            common = git_dir
            commondir = _read(git_dir / "commondir")
            if commondir and commondir.strip():
                common = git_dir / commondir.strip()
            return Repository(current, git_dir, common)
        if current.parent == current:
            return None
        current = current.parent
    return None


def global_config_files() -> list[Path]:
    """The system and global config files git reads, in its order (a later value wins)."""
    return _global_files()


def config_file_values(path: Path, name: str, depth: int = 0) -> list[str]:
    """The values of `name` (`section.key`, lower case) in a config file and its includes."""
    text = _read(path)
    if text is None:
        return []
    section, _, key = name.rpartition(".")
    values: list[str] = []
    for entry_section, entry_key, value in config_entries(text):
        if (entry_section, entry_key) == (section, key):
            values.append(value)
        elif (entry_section, entry_key) == ("include", "path") and depth < MAX_INCLUDE_DEPTH:
            target = Path(value).expanduser()
            values.extend(
                config_file_values(
                    target if target.is_absolute() else path.parent / target, name, depth + 1
                )
            )
    return values


def repository_files(directory: str) -> tuple[list[Path], list[Path]]:
    """The repository config files for `directory`, and the paths whose change could alter them.

    The second list holds every missing `.git` looked at on the way up (and a
    worktree's `.git` file), so that a repository created later (`git init`) is noticed.
    """
    watched: list[Path] = []
    current = Path(directory)
    for _ in range(MAX_PARENTS):
        dot_git = current / ".git"
        git_dir = _git_dir(dot_git)
        if git_dir is not dot_git:
            # A `.git` directory's own time changes with every commit; its config's does not.
            watched.append(dot_git)
        if git_dir is not None:
            common = git_dir
            commondir = _read(git_dir / "commondir")
            if commondir and commondir.strip():
                common = git_dir / commondir.strip()
                watched.append(git_dir / "commondir")
            return [common / "config", git_dir / "config.worktree"], watched
        if current.parent == current:
            break
        current = current.parent
    return [], watched


def _git_dir(dot_git: Path) -> Path | None:
    if dot_git.is_dir():
        return dot_git
    text = _read(dot_git) if dot_git.is_file() else None
    if text and text.startswith("gitdir:"):
        target = Path(text[len("gitdir:") :].strip())
        return target if target.is_absolute() else dot_git.parent / target
    return None


class _Cached(msgspec.Struct):
    """A directory's aliases, the stamps of the files they depend on, and when those
    were last found the same (`time.monotonic`)."""

    stamps: tuple[tuple[str, tuple[int, int] | None], ...]
    aliases: Aliases
    checked: float


class GitAliases:
    """The git aliases in force per working directory, cached by the files' times and sizes.

    `recheck_s`: how long an answer is taken without a `stat` of its files (0: at every
    lookup, for a one-off such as `mentectl explain`; the hook handler: `RECHECK_S`).
    """

    def __init__(self, *, recheck_s: float = 0.0) -> None:
        # The watched paths as strings: checked at each hook, a `stat` is faster on one.
        # By the directory's digest (an event's, up to 4 KiB), bounded in bytes too.
        self._cache: DigestCache[_Cached]
        self._cache = DigestCache(max_entries=MAX_CACHED_DIRECTORIES, max_bytes=MAX_CACHED_BYTES)
        self._lock = threading.Lock()
        self.recheck_s = recheck_s

    def for_directory(self, directory: str | None) -> Aliases:
        """The aliases git would use for a command run in `directory` (None: the global ones)."""
        key = directory or ""
        now = _now()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None:
            if now - cached.checked < self.recheck_s:
                return cached.aliases
            if all(_stamp(path) == stamp for path, stamp in cached.stamps):
                cached.checked = now
                return cached.aliases
        aliases, watched = self._load(directory)
        stamps = tuple((os.fspath(path), _stamp(path)) for path in watched)
        weight = sum(len(path) for path, _ in stamps) + sum(
            len(name) + len(value) for name, value in aliases.table.items()
        )
        with self._lock:
            self._cache.put(key, _Cached(stamps, aliases, now), weight)
        return aliases

    def _load(self, directory: str | None) -> tuple[Aliases, list[Path]]:
        files = _global_files()
        watched: list[Path] = []
        if directory and len(directory) <= MAX_DIRECTORY_CHARS:
            try:
                local, looked_at = repository_files(directory)
            except (OSError, ValueError):  # a name too long, a NUL byte: no repository here
                local, looked_at = [], []
            files.extend(local)
            watched.extend(looked_at)
        table: dict[str, str] = {}
        for path in files:
            watched.extend(_merge(path, table, depth=0))
        return Aliases.of(table) if table else NO_ALIASES, [*files, *watched]


def _merge(path: Path, table: dict[str, str], depth: int) -> list[Path]:
    """Add `path`'s aliases (and its includes') to `table`; the included files read."""
    text = _read(path)
    if text is None:
        return []
    aliases, includes = parse_config(text)
    table.update(aliases)
    read: list[Path] = []
    if depth >= MAX_INCLUDE_DEPTH:
        return read
    for include in includes:
        target = Path(include).expanduser()
        if not target.is_absolute():
            target = path.parent / target
        read.append(target)
        read.extend(_merge(target, table, depth + 1))
    return read
