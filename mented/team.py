"""Team rules: rules a project commits in `.mented/`, served once trusted.

A repository may hold `.mented/*.jsonl`: lines of the portable format
(mented/portable.py), or its authoring form, one rule per line::

    {"action": "git-commit", "text": "commit messages: conventional prefix, imperative"}
    {"actions": ["pr-create", "pr-merge"], "text": "link the issue", "agent": "codex"}

They are reviewed in pull requests like any file. The daemon serves them for
commands run inside that repository, after the user's own rules (yours win: they
come first and take the `k` places first), each marked as the project's.

Trust: text from a cloned repository reaches the agent only once the user trusted
that exact content (`mentectl trust [DIR]`, like `direnv allow`): the digest of
every file in `.mented/` is recorded in `<data dir>/trusted.json`, and any change
to the files needs trusting again. Untrusted rules are never served; `status`
names the projects that have them.

Where `.mented/` folders are looked for (`find_roots`): in the command's directory
and each parent, up to the repository's root (the directory holding `.git`; past a
submodule's root to its superproject's), or up to `/` outside a repository. Every
folder found on the way counts, each trusted apart: a vendored dependency's
`.mented/` inside a repository adds its rules once trusted and never hides the
repository's own. A `.mented/` (or a file in it) that is not the user's, or that
others may write (another user's `/tmp/.mented/`), is ignored.

How it is read (`read_project`, through mented/untrusted.py): no link followed (a
`.mented` or a rule file that is a link is a *problem* naming where it points),
regular files only (a FIFO or `/dev/zero` is refused, never opened for reading),
names that are UTF-8, lines nested at most `MAX_NESTING` deep, at most
`MAX_FILES` files, `MAX_PROJECT_BYTES` and `MAX_PROJECT_RULES` rules per project.
A project with a problem serves nothing and cannot be trusted until it is fixed;
the user's own rules are served there as anywhere. Reading never raises.

The hook's cost: finding a command's `.mented/` folders walks up from its
directory once (cached per directory for `ROOT_TTL_S`); a project is read once and
kept while `.mented/` and its files keep their modification times and sizes (a
`stat` each). The daemon reads projects off its event loop (mented/team_reads.py,
`read_inline=False` here); the projects kept are bounded by `MAX_CACHED_BYTES`,
the least recently used dropped first. Visibility is the store's one predicate,
`visible_to`: a project rule is scoped to its repository (and to an agent, when it
names one).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented.digest_cache import DigestCache
from mented.log import log
from mented.memory import (
    MIN_HANDLE_LENGTH,
    ORIGIN_PROJECT,
    Forgotten,
    InvalidInputError,
    Memory,
    MemoryType,
    check_checks_shape,
    normalize_action,
    short_handle,
    trigger_tag,
)
from mented.portable import FormatError, parse_line
from mented.store import visible_to
from mented.untrusted import (
    MAX_NESTING,
    Refused,
    check_nesting,
    list_names,
    open_directory,
    owned_by_user,
    read_file,
    shown,
)

if TYPE_CHECKING:
    from mented.store import Store

FOLDER = ".mented"
RULES_FILE = "rules.jsonl"  # where `mentectl rule add --team` writes
ROOT_TTL_S = 5.0  # how long "this directory is in that repository" is believed
MAX_FILES = 32  # rule files in one `.mented/`
MAX_ENTRIES = 1024  # entries of one `.mented/` looked at
MAX_PROJECT_BYTES = 256 << 10  # of rule files in one `.mented/`: a team's rules fit in a few KiB
MAX_FILE_BYTES = MAX_PROJECT_BYTES
MAX_PROJECT_RULES = 256
MAX_FOLDERS = 8  # `.mented/` folders that apply in one directory (nested ones included)
MAX_PARENTS = 64  # how far up a `.mented/` is looked for
MAX_CACHED_BYTES = 16 << 20  # of projects kept, as counted by `_cost`
_RULE_OVERHEAD_BYTES = 512  # what a parsed rule costs beyond its file's bytes
_GIT_FILE_BYTES = 4096  # a submodule's `.git` file: one `gitdir:` line
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_MAX_ROOTS_CACHED = 4096
_MAX_ROOTS_BYTES = 4 << 20  # the roots cache, keyed by the working directory's digest

# (name, mtime_ns, ctime_ns, size, inode) of `.mented/` (name "") and of each rule file.
Stamp = tuple[tuple[str, int, int, int, int], ...]


class AuthoredRule(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """The authoring form of a rule: an action (or several) and a text."""

    text: str
    action: str | None = None
    actions: list[str] = []
    agent: str | None = None
    type: MemoryType = MemoryType.PROCEDURAL
    checks: list[str] = []  # checks on the action's fields (mented.checks)


class Project(msgspec.Struct):
    """One `.mented/` folder: its rules, their digest, and why it cannot be used (if so)."""

    root: str
    digest: str
    rules: list[Memory] = msgspec.field(default_factory=list)
    problem: str | None = None  # why nothing is served (safe to print: controls escaped)
    stamp: Stamp = ()
    files: dict[str, str] = msgspec.field(default_factory=dict)  # rule id -> `.mented/NAME.jsonl`
    size: int = 0  # bytes of rule files read

    def file_of(self, rule: Memory) -> str:
        """The file a rule of this project is written in, as a path from the filesystem root."""
        return f"{self.root}/{self.files.get(rule.id, FOLDER + '/')}"


class ProjectRuleError(InvalidInputError):
    """A rule that lives in a project's `.mented/` files: changed there, not through mented."""

    def __init__(self, rule: Memory, path: str) -> None:
        super().__init__(
            f"[{short_handle(rule.id)}] is a project rule from {shown(path)}: edit that file "
            "(shared with the team) and commit it; mented only reads it"
        )


class TrustError(InvalidInputError):
    """A directory that cannot be trusted: no `.mented/`, or a file in it is malformed."""


class ProjectRules:
    """Every repository's team rules the daemon has met, and what the user trusted.

    Args:
        data_dir: where `trusted.json` is.
        read_inline: whether the hook's lookups read a project not read yet (or changed)
            themselves. The daemon passes False and reads them off its event loop first
            (`stale`, `read_project`, `install`: mented/team_reads.py).
    """

    def __init__(self, data_dir: Path, *, read_inline: bool = True) -> None:
        self._trust_path = data_dir / "trusted.json"
        self._trusted: dict[str, str] = self._load_trust()
        # By the digest of the working directory (an event's, up to 4 KiB), bounded in bytes.
        self._roots: DigestCache[tuple[tuple[str, ...], float]] = DigestCache(
            max_entries=_MAX_ROOTS_CACHED, max_bytes=_MAX_ROOTS_BYTES
        )
        self._projects: OrderedDict[str, Project] = OrderedDict()  # least recently used first
        self._cached_bytes = 0
        # The daemon looks up on its event loop, and a large recall in a worker thread.
        self._cache_lock = threading.RLock()
        self._lock = threading.Lock()  # `trust` runs in a worker thread
        self.read_inline = read_inline

    # ----------------------------------------------------------- the hook path

    def recall_for_action(
        self, action: str, *, agent: str | None, cwd: str | None, k: int
    ) -> list[Memory]:
        """The trusted project rules for `action` that the caller may see, in file order.

        The repository's own `.mented/` comes first, then the ones nested inside it.
        """
        if k <= 0:
            return []
        try:
            tag = trigger_tag(action)
        except InvalidInputError:
            return []
        found: list[Memory] = []
        for project in self.trusted_projects(cwd):
            for rule in project.rules:
                if tag in rule.tags and visible_to(rule, agent, cwd):
                    found.append(rule)
                    if len(found) == k:
                        return found
        return found

    def trusted_projects(self, cwd: str | None) -> list[Project]:
        """The trusted projects whose rules apply in `cwd`, the outermost first."""
        return [project for project in self.projects_of(cwd) if self.is_trusted(project)]

    def projects_of(self, cwd: str | None) -> list[Project]:
        """Every project (a `.mented/` folder) that applies in `cwd`, read; the outermost first.

        With `read_inline` False, a project not read yet (or changed since) is left out.
        """
        if not cwd:
            return []
        found = []
        for root in reversed(self.roots_of(cwd)):
            project, unread = self._cached(root)
            if unread and self.read_inline:
                project = self.install(read_project(root))
            if project is not None:
                found.append(project)
        return found

    def project_of(self, cwd: str | None) -> Project | None:
        """The nearest project `cwd` is in (the innermost `.mented/`), read; None outside one."""
        projects = self.projects_of(cwd)
        return projects[-1] if projects else None

    def stale(self, cwd: str | None) -> list[str]:
        """The roots of the projects that apply in `cwd` and must be read (a `stat` each)."""
        if not cwd:
            return []
        return [root for root in self.roots_of(cwd) if self._cached(root)[1]]

    def is_trusted(self, project: Project) -> bool:
        """Whether the user trusted this exact content (and it has no problem)."""
        return project.problem is None and self._trusted.get(project.root) == project.digest

    def install(self, project: Project) -> Project | None:
        """Keep a project read by `read_project` (None: its folder is gone), dropping the
        least recently used ones past `MAX_CACHED_BYTES`. On the thread that looks up."""
        with self._cache_lock:
            old = self._projects.pop(project.root, None)
            if old is not None:
                self._cached_bytes -= _cost(old)
            if not project.stamp:
                return None
            self._projects[project.root] = project
            self._cached_bytes += _cost(project)
            while self._cached_bytes > MAX_CACHED_BYTES and len(self._projects) > 1:
                _, dropped = self._projects.popitem(last=False)
                self._cached_bytes -= _cost(dropped)
            return project

    def _cached(self, root: str) -> tuple[Project | None, bool]:
        """The kept project at `root` if still current, and whether it must be read."""
        project = self._projects.get(root)
        stamp = _stamp(root, project.stamp if project is not None else ())
        if project is not None and project.stamp == stamp:
            with self._cache_lock:
                if root in self._projects:
                    self._projects.move_to_end(root)
            return project, False
        if not stamp:  # the folder went away
            if project is not None:
                self.install(Project(root=root, digest=""))
            return None, False
        return None, True

    def find_rule(self, memory_id: str) -> tuple[Project, Memory] | None:
        """The project rule a full id or handle names (as `Store.get` reads them), and its project.

        Looked for in the projects met since the daemon started and in the trusted
        ones (the only ones whose rules reach an agent, so the only handles a model
        is shown): a `stat` or two each, and, with `read_inline`, a read of one not
        kept (the daemon reads those first, off its event loop: `known_stale`). None
        when no project has it.
        """
        if not isinstance(memory_id, str):
            return None
        wanted = memory_id.strip().strip("[]").strip().upper()
        if len(wanted) < MIN_HANDLE_LENGTH:
            return None
        for root in self._known_roots():
            project, unread = self._cached(root)
            if unread and self.read_inline:
                project = self.install(read_project(root))
            if project is None:
                continue
            for rule in project.rules:
                if rule.id.startswith(wanted) or rule.id.endswith(wanted):
                    return project, rule
        return None

    def known_stale(self) -> list[str]:
        """The roots `find_rule` looks in that must be read first (a `stat` or two each)."""
        return [root for root in self._known_roots() if self._cached(root)[1]]

    def _known_roots(self) -> list[str]:
        with self._cache_lock:
            return list(dict.fromkeys([*self._projects, *self._trusted]))

    def refuse_project_rule(self, memory_id: str) -> None:
        """Raise `ProjectRuleError` when `memory_id` names a project rule (else nothing).

        For a request that would change a rule: a project's rules change in its files.
        """
        found = self.find_rule(memory_id)
        if found is not None:
            project, rule = found
            raise ProjectRuleError(rule, project.file_of(rule))

    def untrusted(self) -> list[str]:
        """The projects met whose rules are not trusted (or not readable), with why and what
        to do; safe to print (controls escaped)."""
        found = []
        with self._cache_lock:
            kept = list(self._projects.values())
        for project in kept:
            root = shown(project.root)
            if project.problem:
                found.append(f"{root}: {project.problem}; {fix_of_problem(project.root)}")
            elif not self.is_trusted(project) and project.rules:
                found.append(
                    f"{root}: {len(project.rules)} project rules not trusted "
                    f"(`mentectl trust {shown(shlex.quote(project.root))}` after reading "
                    f"{FOLDER}/)"
                )
        return sorted(found)

    def roots_of(self, cwd: str) -> tuple[str, ...]:
        """The directories at or above `cwd` whose `.mented/` applies there, the innermost first."""
        cwd = os.path.normpath(cwd)
        now = time.monotonic()
        cached = self._roots.get(cwd)
        if cached is not None and cached[1] > now:
            return cached[0]
        roots = tuple(find_roots(cwd))
        self._roots.put(cwd, (roots, now + ROOT_TTL_S), sum(map(len, roots)))
        return roots

    # ------------------------------------------------------------------ trust

    def trust(self, directory: str) -> Project:
        """Trust the current content of the nearest `.mented/` at or above `directory`.

        Runs in a worker thread: it reads the project itself and leaves the kept ones
        alone (the next lookup sees the new trust).

        Raises:
            TrustError: no `.mented/` there or above (or only ignored ones), or it has a
                problem (a malformed file, a link, over a limit).
        """
        directory = os.path.normpath(directory)
        roots = find_roots(directory)
        if not roots:
            ignored = _ignored_folders(directory)
            if ignored:
                raise TrustError(f"not trusted: {ignored[0]}")
            raise TrustError(
                f"no {FOLDER}/ folder in {shown(directory)} or above it: nothing to trust"
            )
        project = read_project(roots[0])
        if project.problem:
            raise TrustError(f"not trusted: {project.problem}")
        with self._lock:
            trusted = dict(self._trusted)
            trusted[project.root] = project.digest
            _write_json(self._trust_path, trusted)
            self._trusted = trusted
        return project

    def _load_trust(self) -> dict[str, str]:
        try:
            data = msgspec.json.decode(self._trust_path.read_bytes(), type=dict[str, str])
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return {}
        return data


def fix_of_problem(root: str) -> str:
    """What to do about a project whose `.mented/` has a problem (trusting it is refused)."""
    return (
        "fix that in the repository (or ask its maintainers to), then run "
        f"`mentectl trust {shown(shlex.quote(root))}`"
    )


def untrusted_notice(root: str, problem: str | None) -> str:
    """The hook's notice to the user about a project whose rules are not used; names escaped."""
    if problem:
        return (
            f"mented: the project rules in {shown(root)}/{FOLDER}/ are not used "
            f"({shown(problem)}); {fix_of_problem(root)}"
        )
    return (
        f"mented: the project rules in {shown(root)}/{FOLDER}/ are not used (not trusted yet); "
        f"review them, then run `mentectl trust {shown(shlex.quote(root))}`"
    )


def _cost(project: Project) -> int:
    return project.size + _RULE_OVERHEAD_BYTES * (len(project.rules) + 1)


# ------------------------------------------------------------- finding them


def find_roots(cwd: str) -> list[str]:
    """The directories at or above `cwd` with a `.mented/` of the user's, the innermost first.

    The walk stops at the repository's root (the directory holding `.git`), or goes on
    from a submodule's root to its superproject's. A `.mented/` not owned by the user
    or writable by others is passed over. Two `lstat` calls per level.
    """
    roots: list[str] = []
    path = cwd
    for _ in range(MAX_PARENTS):
        if _is_users_folder(path):
            roots.append(path)
            if len(roots) == MAX_FOLDERS:
                break
        if _is_repository_root(path) and not _is_submodule_root(path):
            break
        parent = os.path.dirname(path)  # noqa: PTH120 - hot path: no Path objects
        if parent == path:
            break
        path = parent
    return roots


def find_root(cwd: str) -> str | None:
    """The nearest directory at or above `cwd` whose `.mented/` applies (see `find_roots`)."""
    roots = find_roots(cwd)
    return roots[0] if roots else None


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path, follow_symlinks=False)  # noqa: PTH116 - hot path: no Path objects
    except (OSError, ValueError):
        return None


def _is_users_folder(path: str) -> bool:
    """Whether `path/.mented` is a folder of the user's that others may not write.

    A link of the user's counts too (reading it is then refused, and named).
    """
    info = _lstat(os.path.join(path, FOLDER))  # noqa: PTH118 - hot path: no Path objects
    if info is None:
        return False
    if stat.S_ISLNK(info.st_mode):
        return info.st_uid == os.geteuid()
    return stat.S_ISDIR(info.st_mode) and owned_by_user(info)


def _ignored_folders(directory: str) -> list[str]:
    """Why each `.mented/` at or above `directory` that `find_roots` passes over is ignored."""
    found = []
    path = directory
    for _ in range(MAX_PARENTS):
        folder = os.path.join(path, FOLDER)  # noqa: PTH118 - like find_roots
        info = _lstat(folder)
        if info is not None and stat.S_ISDIR(info.st_mode) and not owned_by_user(info):
            whose = (
                "writable by others"
                if info.st_uid == os.geteuid()
                else (f"owned by another user (uid {info.st_uid})")
            )
            found.append(
                f"{shown(folder)}/ is {whose}: mented ignores it (only a folder of yours "
                "that others cannot write is read)"
            )
        if _is_repository_root(path):
            break
        parent = os.path.dirname(path)  # noqa: PTH120 - like find_roots
        if parent == path:
            break
        path = parent
    return found


def _is_repository_root(path: str) -> bool:
    return _lstat(os.path.join(path, ".git")) is not None  # noqa: PTH118 - hot path


def _is_submodule_root(path: str) -> bool:
    """Whether `path/.git` is a submodule's file pointing into a superproject above it.

    A worktree's `.git` file points elsewhere: its root ends the walk like a repository's.
    """
    git = os.path.join(path, ".git")  # noqa: PTH118 - hot path
    info = _lstat(git)
    if info is None or not stat.S_ISREG(info.st_mode):
        return False
    try:
        data = read_file(git, limit=_GIT_FILE_BYTES)
    except (OSError, Refused):
        return False
    line = data.split(b"\n", 1)[0].strip()
    if not line.startswith(b"gitdir:"):
        return False
    target = os.path.normpath(
        os.path.join(path, os.fsdecode(line[len(b"gitdir:") :].strip()))  # noqa: PTH118
    )
    marker = "/.git/modules/"
    superproject = target[: target.find(marker)] if marker in target else None
    return superproject is not None and path.startswith(superproject.rstrip("/") + "/")


def _stamp(root: str, before: Stamp = ()) -> Stamp:
    """(name, mtime, ctime, size, inode) of `.mented/` and each rule file: what says it changed.

    An `lstat` of the folder and one of each file; the folder is listed again only when
    it changed (a file added, removed or renamed). Empty when the folder is gone.
    """
    folder = os.path.join(root, FOLDER)  # noqa: PTH118 - hot path: no Path objects
    info = _lstat(folder)
    if info is None:
        return ()
    head = ("", info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino)
    if not stat.S_ISDIR(info.st_mode):
        return (head,)  # a link, or no longer a folder: `read_project` says what is wrong
    if before and before[0] == head:
        names = [entry[0] for entry in before[1:]]
    else:
        names = _rule_file_names(folder)
    stamp = [head]
    for name in names:
        file_info = _lstat(os.path.join(folder, name))  # noqa: PTH118
        if file_info is not None:
            stamp.append(
                (
                    name,
                    file_info.st_mtime_ns,
                    file_info.st_ctime_ns,
                    file_info.st_size,
                    file_info.st_ino,
                )
            )
    return tuple(stamp)


def _rule_file_names(folder: str) -> list[str]:
    """The names ending `.jsonl` in `folder` (at most one past `MAX_FILES`, to notice more)."""
    names: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_ENTRIES or len(names) > MAX_FILES:
                    break
                if entry.name.endswith(".jsonl"):
                    names.append(entry.name)
    except OSError:
        return []
    return sorted(names)


# ------------------------------------------------------------------ reading


def read_project(root: str) -> Project:
    """Read and check the `.mented/` of `root` (any thread); a problem means nothing is served.

    Never raises: whatever goes wrong is the project's problem, named for the user.
    """
    stamp = _stamp(root)
    if not stamp:
        return Project(root=root, digest="")
    try:
        return _read_project(root, stamp)
    except Exception as exc:  # noqa: BLE001 - a repository's files must never break a hook
        log.warning("project_unreadable", root=shown(root), error=repr(exc))
        return _broken(root, stamp, f"{FOLDER}/ cannot be read: {type(exc).__name__}: {exc}")


def _broken(root: str, stamp: Stamp, problem: str) -> Project:
    return Project(root=root, digest="", problem=shown(problem), stamp=stamp)


def _read_project(root: str, stamp: Stamp) -> Project:
    try:
        folder_fd = open_directory(os.path.join(root, FOLDER))  # noqa: PTH118
    except FileNotFoundError:
        return Project(root=root, digest="", stamp=stamp)
    except Refused as exc:
        return _broken(root, stamp, str(exc))
    try:
        return _read_folder(root, stamp, folder_fd)
    except (Refused, FormatError) as exc:
        return _broken(root, stamp, str(exc))
    except OSError as exc:
        return _broken(root, stamp, f"{FOLDER}/: cannot read it: {exc.strerror or exc}")
    finally:
        os.close(folder_fd)


def _read_folder(root: str, stamp: Stamp, folder_fd: int) -> Project:
    if not owned_by_user(os.fstat(folder_fd)):  # changed since it was found
        return Project(root=root, digest="", stamp=stamp)
    listing = list_names(folder_fd, suffixes=(".jsonl",), limit=MAX_ENTRIES)
    if listing.refused:
        more = f" (and {len(listing.refused) - 1} more)" if len(listing.refused) > 1 else ""
        return _broken(root, stamp, f"in {FOLDER}/: {listing.refused[0]}{more}")
    if len(listing.names) > MAX_FILES:
        return _broken(
            root,
            stamp,
            f"{FOLDER}/ holds {len(listing.names)} rule files, over the limit of {MAX_FILES} "
            "for a project: put the rules in fewer files",
        )
    digest = hashlib.sha256()
    rules: list[Memory] = []
    files: dict[str, str] = {}
    size = 0
    for name in listing.names:
        where = f"{FOLDER}/{name}"
        info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        if not owned_by_user(info):
            continue  # another user's file, or one anyone may write: not the project's word
        if size + info.st_size > MAX_PROJECT_BYTES:
            return _broken(root, stamp, _over_bytes(where))
        try:
            data = read_file(name, dir_fd=folder_fd, limit=MAX_PROJECT_BYTES - size, shown_as=where)
        except Refused as exc:
            if "-byte limit" in str(exc):  # it grew while read
                return _broken(root, stamp, _over_bytes(where))
            raise
        size += len(data)
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        found = _rules_in(data, where, root, mtime=info.st_mtime)
        rules += found
        if len(rules) > MAX_PROJECT_RULES:
            return _broken(
                root,
                stamp,
                f"{FOLDER}/ holds more than {MAX_PROJECT_RULES} rules (the limit for a project; "
                f"{where} passes it): keep the team's rules few, or split the project",
            )
        files.update(dict.fromkeys((rule.id for rule in found), where))
    return Project(
        root=root, digest=digest.hexdigest(), rules=rules, stamp=stamp, files=files, size=size
    )


def _over_bytes(where: str) -> str:
    return (
        f"{FOLDER}/ holds more than {MAX_PROJECT_BYTES} bytes of rules (the limit for a "
        f"project; {where} passes it): keep the team's rules short"
    )


def _rules_in(data: bytes, name: str, root: str, *, mtime: float) -> list[Memory]:
    """The rules of one file; a line nested deeper than a rule needs is refused unparsed.

    Raises:
        FormatError: naming the file and line.
    """
    rules = []
    for number, raw in enumerate(data.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(b'{"mented"'):
            continue
        where = f"{name}:{number}"
        try:
            check_nesting(line, limit=MAX_NESTING, shown_as=where)
        except Refused as exc:
            raise FormatError(str(exc)) from None
        if line.startswith(b'{"kind"') or (b'"kind"' in line and b'"id"' in line):
            record = parse_line(line, where)
            if isinstance(record, Forgotten) or record is None:
                continue
            rules.append(msgspec.structs.replace(record, project=root, origin=ORIGIN_PROJECT))
            continue
        rules.append(_authored(line, where, root, mtime=mtime))
    return rules


def _authored(line: bytes, where: str, root: str, *, mtime: float) -> Memory:
    try:
        rule = msgspec.json.decode(line, type=AuthoredRule)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise FormatError(f'{where}: {exc} (a rule is {{"action": ..., "text": ...}})') from None
    names = ([rule.action] if rule.action else []) + list(rule.actions)
    if not names:
        raise FormatError(f"{where}: a rule needs an `action` (e.g. git-commit)")
    if not rule.text.strip():
        raise FormatError(f"{where}: a rule needs a `text`")
    try:
        tags = tuple(trigger_tag(normalize_action(name)) for name in names)
        checks = check_checks_shape(rule.checks)
    except InvalidInputError as exc:
        raise FormatError(f"{where}: {exc}") from None
    return Memory(
        id=_id_of(root, line),
        content=rule.text,
        memory_type=rule.type,
        tags=tags,
        agent=rule.agent,
        project=root,
        created_at=mtime,
        origin=ORIGIN_PROJECT,
        checks=checks,
    )


def _id_of(root: str, line: bytes) -> str:
    """A stable id for an authored rule: the same text in the same project, the same id.

    A changed text is a new id, so an agent session is handed it as a new rule.
    """
    value = int.from_bytes(hashlib.sha256(root.encode() + b"\0" + line).digest()[:17], "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "7" + "".join(chars)[1:]  # the largest first character an id may have


def _write_json(path: Path, data: object) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(msgspec.json.format(msgspec.json.encode(data)))
    partial.replace(path)


class RuleLookup:
    """The hook's lookup: your own rules from the store, then the project's (trusted).

    Yours win: they come first and take the `k` places first; the project's fill
    the rest. Both are filtered by the store's one visibility predicate.
    """

    def __init__(self, store: Store, projects: ProjectRules) -> None:
        self.store = store
        self.projects = projects

    def recall_for_action(
        self, action: str, *, agent: str | None = None, cwd: str | None = None, k: int = 6
    ) -> list[Memory]:
        yours = self.store.recall_for_action(action, agent=agent, cwd=cwd, k=k)
        if len(yours) >= k:
            return yours
        return yours + self.projects.recall_for_action(
            action, agent=agent, cwd=cwd, k=k - len(yours)
        )

    def trusted_rules(self, cwd: str | None) -> list[Memory]:
        """The rules of the trusted projects `cwd` is in (none outside one, or untrusted).

        Called on the event loop (a project not read yet is left out, see `ProjectReads`).
        """
        return [rule for project in self.projects.trusted_projects(cwd) for rule in project.rules]

    def pinned_rules(self, *, agent: str | None = None, cwd: str | None = None) -> list[Memory]:
        """Your pinned rules; a project's committed rules are not handed over at session start."""
        return self.store.pinned_rules(agent=agent, cwd=cwd)

    def untrusted_projects(self, cwd: str | None) -> list[Project]:
        """The projects `cwd` is in whose rules are not served (not trusted, or a problem),
        the innermost first."""
        return [
            project
            for project in reversed(self.projects.projects_of(cwd))
            if (project.rules or project.problem) and not self.projects.is_trusted(project)
        ]

    def untrusted_project(self, cwd: str | None) -> Project | None:
        """The nearest project `cwd` is in whose rules are not served until trusted (or fixed)."""
        found = self.untrusted_projects(cwd)
        return found[0] if found else None
