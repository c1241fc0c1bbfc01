"""The commit a command just made, read from the repository's files: git is not run.

After a commit whose message was unknown before it ran (the editor, `-F -`,
`--amend` alone, `-C`), mented checks the message of the commit it made
(`mented.afterchecks`). Asking git (`git log -1`) would run git in a directory
mented does not own, and a repository's `.git/config` chooses programs git starts
there (`core.fsmonitor` on any index read, a pager, ...). So the commit is read as
git stores it:

- `HEAD` in the git directory (a worktree's own), a symbolic ref followed through
  at most `MAX_SYMREF_HOPS` refs: a loose ref in the git directory, then in the
  common directory, then `packed-refs`;
- the commit, a loose object `objects/xx/yyyy...` in the common directory:
  zlib-deflated `commit <size>\\0<headers>\\n\\n<message>`. A commit just made is
  loose; one already packed (a `gc` ran in between) is not looked for: unknown.

Every file is read with `mented.untrusted.read_file`: no link followed at the last
step, regular files only, bounded (`MAX_REF_BYTES`, `MAX_OBJECT_BYTES`), and the
object inflated to at most `MAX_COMMIT_BYTES`: a deflate bomb is cut, never
inflated in full. Anything unexpected is None (unknown), never an exception.
"""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mented import untrusted
from mented.git_aliases import find_repository

if TYPE_CHECKING:
    from mented.git_aliases import Repository

MAX_REF_BYTES = 4096  # HEAD or a loose ref: one line
MAX_PACKED_REFS_BYTES = 8 * 1024 * 1024
MAX_OBJECT_BYTES = 1024 * 1024  # a commit's deflated object
MAX_COMMIT_BYTES = 1024 * 1024  # inflated: headers and message
MAX_SYMREF_HOPS = 5
MAX_DIRECTORY_CHARS = 4096

_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_REF_NAME = re.compile(r"refs/[A-Za-z0-9._/+@-]{1,400}")


@dataclass(frozen=True)
class Commit:
    """A commit as stored: its id, the time git recorded for the committer, its message."""

    oid: str
    committed_at: int | None
    message: str


def head(directory: str | None) -> str | None:
    """The commit `HEAD` names in the repository holding `directory`; None when unknown
    (no repository, no commit yet, a file that cannot be read safely)."""
    repository = _repository(directory)
    return None if repository is None else _resolve(repository)


def head_commit(directory: str | None) -> Commit | None:
    """The commit `HEAD` names, with its message; None when it cannot be read."""
    repository = _repository(directory)
    if repository is None:
        return None
    oid = _resolve(repository)
    return None if oid is None else read_commit(repository, oid)


def read_commit(repository: Repository, oid: str) -> Commit | None:
    """The loose commit object `oid`; None when it is not one (packed, damaged, too big)."""
    if not _OID.fullmatch(oid):
        return None
    path = os.path.join(repository.common_dir, "objects", oid[:2], oid[2:])  # noqa: PTH118
    data = _read(path, MAX_OBJECT_BYTES)
    if data is None:
        return None
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data, MAX_COMMIT_BYTES + 1)
    except zlib.error:
        return None
    if len(raw) > MAX_COMMIT_BYTES:
        return None
    header, nul, body = raw.partition(b"\0")
    if not nul or not header.startswith(b"commit "):
        return None
    headers, blank, message = body.partition(b"\n\n")
    if not blank:
        return None
    return Commit(oid, _committed_at(headers), message.decode("utf-8", "replace"))


def _committed_at(headers: bytes) -> int | None:
    for line in headers.split(b"\n"):
        if line.startswith(b"committer "):
            parts = line.rsplit(b" ", 2)
            if len(parts) == 3 and parts[1].isdigit():
                return int(parts[1])
    return None


def _repository(directory: str | None) -> Repository | None:
    if not directory or len(directory) > MAX_DIRECTORY_CHARS:
        return None
    try:
        return find_repository(directory)
    except (OSError, ValueError):  # a NUL byte, a name too long
        return None


def _resolve(repository: Repository) -> str | None:
    """The commit id `HEAD` leads to, following symbolic refs a few hops."""
    name = "HEAD"
    for _ in range(MAX_SYMREF_HOPS):
        text = _ref_text(repository, name)
        if text is None:
            return None
        if text.startswith("ref:"):
            name = text[len("ref:") :].strip()
            if not _REF_NAME.fullmatch(name) or ".." in name:
                return None
            continue
        return text if _OID.fullmatch(text) else None
    return None


def _ref_text(repository: Repository, name: str) -> str | None:
    """A ref's one line: loose in the git directory, then the common one, then packed."""
    places = [repository.git_dir] if name == "HEAD" else [repository.git_dir, repository.common_dir]
    for place in dict.fromkeys(places):
        data = _read(os.path.join(place, name), MAX_REF_BYTES)  # noqa: PTH118
        if data is not None:
            return data.decode("ascii", "replace").strip()
    if name == "HEAD":
        return None
    packed = _read(os.path.join(repository.common_dir, "packed-refs"), MAX_PACKED_REFS_BYTES)  # noqa: PTH118
    if packed is None:
        return None
    wanted = name.encode()
    for line in packed.splitlines():
        oid, _, ref = line.partition(b" ")
        if ref == wanted:
            text = oid.decode("ascii", "replace")
            return text if _OID.fullmatch(text) else None
    return None


def _read(path: str, limit: int) -> bytes | None:
    try:
        return untrusted.read_file(path, limit=limit)
    except (OSError, untrusted.Refused, ValueError):
        return None
