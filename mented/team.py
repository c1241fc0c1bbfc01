"""Team rules: rules a project commits in `.mented/` at its root, served once trusted.

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

The hook's cost: finding a command's repository walks up from its directory once
(cached per directory for `ROOT_TTL_S`); a project's rules are parsed once and
kept while `.mented/` and its files keep their modification times and sizes (a
`stat` each). Visibility is the store's one predicate, `visible_to`: a project
rule is scoped to its repository (and to an agent, when it names one).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented.digest_cache import DigestCache
from mented.memory import (
    MIN_HANDLE_LENGTH,
    ORIGIN_PROJECT,
    Forgotten,
    InvalidInputError,
    Memory,
    MemoryType,
    normalize_action,
    short_handle,
    trigger_tag,
)
from mented.portable import FormatError, parse_line
from mented.store import visible_to

if TYPE_CHECKING:
    from mented.store import Store

FOLDER = ".mented"
RULES_FILE = "rules.jsonl"  # where `mentectl rule add --team` writes
ROOT_TTL_S = 5.0  # how long "this directory is in that repository" is believed
MAX_FILES = 64
MAX_FILE_BYTES = 1 << 20
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_MAX_ROOTS_CACHED = 4096
_MAX_ROOTS_BYTES = 4 << 20  # the roots cache, keyed by the working directory's digest


class AuthoredRule(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """The authoring form of a rule: an action (or several) and a text."""

    text: str
    action: str | None = None
    actions: list[str] = []
    agent: str | None = None
    type: MemoryType = MemoryType.PROCEDURAL


@dataclass
class Project:
    """One repository's `.mented/`: its rules, their digest, whether they are trusted."""

    root: str
    digest: str
    rules: list[Memory] = field(default_factory=list)
    problem: str | None = None  # a file that could not be read: nothing is served
    trusted: bool = False
    stamp: tuple[tuple[str, int, int], ...] = ()
    files: dict[str, str] = field(default_factory=dict)  # rule id -> `.mented/NAME.jsonl`

    def file_of(self, rule: Memory) -> str:
        """The file a rule of this project is written in, as a path from the filesystem root."""
        return f"{self.root}/{self.files.get(rule.id, FOLDER + '/')}"


class ProjectRuleError(InvalidInputError):
    """A rule that lives in a project's `.mented/` files: changed there, not through mented."""

    def __init__(self, rule: Memory, path: str) -> None:
        super().__init__(
            f"[{short_handle(rule.id)}] is a project rule from {path}: edit that file (shared "
            "with the team) and commit it; mented only reads it"
        )


class TrustError(InvalidInputError):
    """A directory that cannot be trusted: no `.mented/`, or a file in it is malformed."""


class ProjectRules:
    """Every repository's team rules the daemon has met, and what the user trusted."""

    def __init__(self, data_dir: Path) -> None:
        self._trust_path = data_dir / "trusted.json"
        self._trusted: dict[str, str] = self._load_trust()
        # By the digest of the working directory (an event's, up to 4 KiB), bounded in bytes.
        self._roots: DigestCache[tuple[str | None, float]] = DigestCache(
            max_entries=_MAX_ROOTS_CACHED, max_bytes=_MAX_ROOTS_BYTES
        )
        self._projects: dict[str, Project] = {}
        self._lock = threading.Lock()  # `trust` runs in a worker thread

    # ----------------------------------------------------------- the hook path

    def recall_for_action(
        self, action: str, *, agent: str | None, cwd: str | None, k: int
    ) -> list[Memory]:
        """The trusted project rules for `action` that the caller may see, in file order."""
        project = self.project_of(cwd)
        if project is None or not project.trusted or k <= 0:
            return []
        try:
            tag = trigger_tag(action)
        except InvalidInputError:
            return []
        found = []
        for rule in project.rules:
            if tag in rule.tags and visible_to(rule, agent, cwd):
                found.append(rule)
                if len(found) == k:
                    break
        return found

    def project_of(self, cwd: str | None) -> Project | None:
        """The project (with a `.mented/` folder) that `cwd` is in, parsed; None outside one."""
        if not cwd:
            return None
        root = self._root_of(os.path.normpath(cwd))
        if root is None:
            return None
        project = self._projects.get(root)
        stamp = _stamp(root, project.stamp if project is not None else ())
        if project is not None and project.stamp == stamp:
            return project
        if not stamp:  # the folder went away
            self._projects.pop(root, None)
            return None
        project = _read_project(root, stamp)
        project.trusted = self._trusted.get(root) == project.digest and project.problem is None
        self._projects[root] = project
        return project

    def find_rule(self, memory_id: str) -> tuple[Project, Memory] | None:
        """The project rule a full id or handle names (as `Store.get` reads them), and its project.

        Looked for in the projects met since the daemon started and in the trusted
        ones (the only ones whose rules reach an agent, so the only handles a model
        is shown): a `stat` or two each. None when no project has it.
        """
        if not isinstance(memory_id, str):
            return None
        wanted = memory_id.strip().strip("[]").strip().upper()
        if len(wanted) < MIN_HANDLE_LENGTH:
            return None
        for root in dict.fromkeys([*self._projects, *self._trusted]):
            project = self.project_of(root)
            if project is None:
                continue
            for rule in project.rules:
                if rule.id.startswith(wanted) or rule.id.endswith(wanted):
                    return project, rule
        return None

    def refuse_project_rule(self, memory_id: str) -> None:
        """Raise `ProjectRuleError` when `memory_id` names a project rule (else nothing).

        For a request that would change a rule: a project's rules change in its files.
        """
        found = self.find_rule(memory_id)
        if found is not None:
            project, rule = found
            raise ProjectRuleError(rule, project.file_of(rule))

    def untrusted(self) -> list[str]:
        """The projects met whose rules are not trusted (or not readable), with why."""
        found = []
        for project in self._projects.values():
            if project.problem:
                found.append(f"{project.root}: {project.problem}")
            elif not project.trusted and project.rules:
                found.append(
                    f"{project.root}: {len(project.rules)} project rules not trusted "
                    f"(`mentectl trust {project.root}` after reading {FOLDER}/)"
                )
        return sorted(found)

    def _root_of(self, cwd: str) -> str | None:
        now = time.monotonic()
        cached = self._roots.get(cwd)
        if cached is not None and cached[1] > now:
            return cached[0]
        root = find_root(cwd)
        self._roots.put(cwd, (root, now + ROOT_TTL_S), len(root or ""))
        return root

    # ------------------------------------------------------------------ trust

    def trust(self, directory: str) -> Project:
        """Trust the current content of the `.mented/` of the project `directory` is in.

        Raises:
            TrustError: no `.mented/` there or above, or a file in it is malformed.
        """
        root = find_root(os.path.normpath(directory))
        if root is None:
            raise TrustError(f"no {FOLDER}/ folder in {directory} or above it: nothing to trust")
        project = _read_project(root, _stamp(root))
        if project.problem:
            raise TrustError(f"not trusted: {project.problem}")
        with self._lock:
            trusted = dict(self._trusted)
            trusted[root] = project.digest
            _write_json(self._trust_path, trusted)
            self._trusted = trusted
        project.trusted = True
        self._projects[root] = project
        self._roots.clear()
        return project

    def _load_trust(self) -> dict[str, str]:
        try:
            data = msgspec.json.decode(self._trust_path.read_bytes(), type=dict[str, str])
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return {}
        return data


def find_root(cwd: str) -> str | None:
    """The nearest directory at or above `cwd` with a `.mented/` folder (a `stat` per level)."""
    path = cwd
    while True:
        if os.path.isdir(os.path.join(path, FOLDER)):  # noqa: PTH112, PTH118 - one stat, no Path
            return path
        parent = os.path.dirname(path)  # noqa: PTH120 - hot path: no Path objects
        if parent == path:
            return None
        path = parent


def _stamp(
    root: str, before: tuple[tuple[str, int, int], ...] = ()
) -> tuple[tuple[str, int, int], ...]:
    """(name, mtime, size) of `.mented/` and each rule file: what says it changed.

    A `stat` of the folder and one of each file; the folder is listed again only when
    its own modification time changed (a file added, removed or renamed).
    """
    folder = os.path.join(root, FOLDER)  # noqa: PTH118 - hot path: no Path objects
    try:
        info = os.stat(folder)  # noqa: PTH116 - hot path: no Path objects
        if before and before[0][1:] == (info.st_mtime_ns, info.st_size):
            names = [name for name, _, _ in before[1:]]
        else:
            listing = os.listdir(folder)  # noqa: PTH208 - hot path: names, no Path objects
            names = sorted(name for name in listing if name.endswith(".jsonl"))
    except OSError:
        return ()
    stamp = [("", info.st_mtime_ns, info.st_size)]
    for name in names[:MAX_FILES]:
        try:
            file_info = os.stat(os.path.join(folder, name))  # noqa: PTH116, PTH118
        except OSError:
            continue
        stamp.append((name, file_info.st_mtime_ns, file_info.st_size))
    return tuple(stamp)


def _read_project(root: str, stamp: tuple[tuple[str, int, int], ...]) -> Project:
    """Read and check every rule file of a project; a problem means nothing is served."""
    folder = Path(root) / FOLDER
    digest = hashlib.sha256()
    rules: list[Memory] = []
    files: dict[str, str] = {}
    problem = None
    for name, _, size in stamp[1:]:
        path = folder / name
        shown = f"{FOLDER}/{name}"
        try:
            if size > MAX_FILE_BYTES:
                msg = f"{shown}: {size} bytes, over the {MAX_FILE_BYTES}-byte limit"
                raise FormatError(msg)  # noqa: TRY301 - one way out for every problem
            data = path.read_bytes()
            digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
            found = _rules_in(data, shown, root, mtime=os.stat(path).st_mtime)  # noqa: PTH116
            rules += found
            files.update(dict.fromkeys((rule.id for rule in found), shown))
        except FormatError as exc:
            problem = str(exc)
            rules = []
            break
        except OSError as exc:
            problem = f"{shown}: cannot read it: {exc.strerror or exc}"
            rules = []
            break
    if problem:
        files = {}
    return Project(
        root=root,
        digest=digest.hexdigest(),
        rules=rules,
        problem=problem,
        stamp=stamp,
        files=files,
    )


def _rules_in(data: bytes, shown: str, root: str, *, mtime: float) -> list[Memory]:
    rules = []
    for number, raw in enumerate(data.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(b'{"mented"'):
            continue
        where = f"{shown}:{number}"
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
        """The rules of the trusted project `cwd` is in (none outside one, or untrusted).

        Called on the event loop: `ProjectRules` keeps its caches unlocked.
        """
        project = self.projects.project_of(cwd)
        return list(project.rules) if project is not None and project.trusted else []

    def pinned_rules(self, *, agent: str | None = None, cwd: str | None = None) -> list[Memory]:
        """Your pinned rules; a project's committed rules are not handed over at session start."""
        return self.store.pinned_rules(agent=agent, cwd=cwd)

    def untrusted_project(self, cwd: str | None) -> Project | None:
        """The project `cwd` is in when it has rules that are not served until trusted."""
        project = self.projects.project_of(cwd)
        if project is None or project.trusted or not (project.rules or project.problem):
            return None
        return project
