"""The plugin file mented writes for an in-process agent (pi), and only that file.

`mentectl hooks install pi` copies the extension shipped in this package
(`pi_extension.ts`, package data) into pi's plugin folder, with the socket
mentectl uses written in as its fallback, and ends it with a line of its own::

    // mented-digest: sha256:<hex of every byte above this line>

That line is how mentectl knows the file is the one it wrote, unchanged: an
install replaces only such a file (or writes where there is none), an uninstall
removes only such a file. Anything else at that path -- the user's own
`mented.ts`, our file edited since, a symlink, a named pipe -- is left as it is,
and the user is told what was found and what to do. Nothing here follows a
symlink: the file and the plugin folders mented creates are refused when they
are links, and the file is replaced by a rename, which replaces a link rather
than writing through it.

The file also carries the protocol version it speaks (`MENTED_PROTOCOL_VERSION`),
which `doctor` compares with the running daemon's.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from mented import paths
from mented.untrusted import Refused, owned_by_user, read_file, shown
from mented_client.commands.output import CommandError
from mented_client.files import display_path

if TYPE_CHECKING:
    from mented.agents.in_process import ExtensionAgent

DIGEST_PREFIX = "// mented-digest: sha256:"
SOCKET_PLACEHOLDER = '"@MENTED_SOCKET@"'
_PROTOCOL = re.compile(r"^export const MENTED_PROTOCOL_VERSION = (\d+);$", re.MULTILINE)
_SOCKET = re.compile(r'^const SOCKET_WRITTEN_IN = ("(?:[^"\\]|\\.)*");$', re.MULTILINE)
# Our file is a few kilobytes; a larger one at the path is not ours (and is not read whole).
MAX_EXTENSION_BYTES = 1 << 20


class Found(StrEnum):
    """What is at the extension's path."""

    MISSING = "not installed"
    OURS = "installed"
    CHANGED = "changed since mented wrote it"
    FOREIGN = "not mented's"


@dataclass(frozen=True)
class ExtensionFile:
    """The file at an extension path, as found."""

    path: Path
    found: Found
    protocol: int | None = None  # the protocol version it speaks, when it is ours
    socket: str | None = None  # the socket written in at install
    problem: str | None = None  # why it cannot be read (a link, a pipe, ...)


def shipped_text(agent: ExtensionAgent) -> str:
    """The extension as shipped in this package."""
    resource = importlib.resources.files("mented_client") / agent.extension_resource
    return resource.read_text(encoding="utf-8")


def installed_text(agent: ExtensionAgent, socket: str | None) -> str:
    """The file `hooks install` writes: the shipped text, the socket, then our digest line."""
    fallback = str(paths.socket_path(socket).absolute())
    body = shipped_text(agent).replace(SOCKET_PLACEHOLDER, json.dumps(fallback), 1)
    if not body.endswith("\n"):
        body += "\n"
    return body + DIGEST_PREFIX + hashlib.sha256(body.encode()).hexdigest() + "\n"


def classify(text: str) -> Found:
    """Whether `text` is a file mented wrote, unchanged."""
    body, _, last = text.rstrip("\n").rpartition("\n")
    if not last.startswith(DIGEST_PREFIX):
        return Found.CHANGED if DIGEST_PREFIX in text else Found.FOREIGN
    digest = last.removeprefix(DIGEST_PREFIX)
    return (
        Found.OURS
        if hashlib.sha256((body + "\n").encode()).hexdigest() == digest
        else (Found.CHANGED)
    )


def protocol_of(text: str) -> int | None:
    """The protocol version an extension file says it speaks."""
    match = _PROTOCOL.search(text)
    return int(match.group(1)) if match else None


def socket_of(text: str) -> str | None:
    """The socket written into an extension file at install, if any."""
    match = _SOCKET.search(text)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return None
    return value if isinstance(value, str) and not value.startswith("@") else None


def inspect(path: Path) -> ExtensionFile:
    """What is at `path`, read without following a link."""
    try:
        data = read_file(path, limit=MAX_EXTENSION_BYTES)
    except FileNotFoundError:
        return ExtensionFile(path, Found.MISSING)
    except Refused as exc:
        return ExtensionFile(path, Found.FOREIGN, problem=str(exc))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return ExtensionFile(path, Found.FOREIGN, problem=f"{shown(str(path))}: not UTF-8 text")
    found = classify(text)
    if found is Found.FOREIGN:
        return ExtensionFile(path, found)
    with contextlib.suppress(OSError):
        info = path.lstat()
        if not owned_by_user(info):
            return ExtensionFile(
                path,
                Found.FOREIGN,
                problem=f"{shown(str(path))}: owned by uid {info.st_uid} or writable by anyone, "
                "not a file of yours",
            )
    return ExtensionFile(path, found, protocol_of(text), socket_of(text))


def _linked_directory(path: Path, top: Path) -> Path | None:
    """The first directory from `top` down to `path`'s folder that is a symlink, if any."""
    directory = path.parent
    chain = []
    while directory != top and directory.is_relative_to(top):
        chain.append(directory)
        directory = directory.parent
    for folder in reversed(chain):
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISLNK(folder.lstat().st_mode):
                return folder
    return None


def refusal(agent: ExtensionAgent, file: ExtensionFile, verb: str) -> str:
    """Why `verb` leaves the file at `file.path` alone, and what the user can do."""
    where = shown(display_path(file.path))
    if file.problem:
        return f"{file.problem}; {verb} leaves it alone"
    if file.found is Found.CHANGED:
        return (
            f"{where} was changed since mented wrote it, so {verb} leaves it alone: "
            f"move it away (your changes are in it), then `mentectl hooks install {agent.name}` "
            "writes mented's again"
        )
    return (
        f"{where} exists and is not mented's, so {verb} leaves it alone: rename it (pi loads "
        f"every .ts file in that folder), then `mentectl hooks install {agent.name}`"
    )


def install(agent: ExtensionAgent, path: Path, socket: str | None, top: Path) -> str:
    """Write the extension at `path`; "installed", "updated" or "unchanged".

    `top`: the highest directory mented may find as it is (the agent's config
    directory, or the project); every folder below it on the way is checked.

    Raises:
        CommandError: something that is not mented's file is at `path`, a folder on
            the way is a symlink, or the file cannot be written; nothing was written.
    """
    linked = _linked_directory(path, top)
    if linked is not None:
        raise CommandError(
            f"{shown(display_path(linked))} is a symbolic link; mented does not write through "
            "links: nothing was written. Replace it with a folder, or install by hand."
        )
    current = inspect(path)
    if current.found in (Found.CHANGED, Found.FOREIGN):
        raise CommandError(refusal(agent, current, "the install") + "; nothing was written")
    text = installed_text(agent, socket)
    if current.found is Found.OURS and read_file(path, limit=MAX_EXTENSION_BYTES) == text.encode():
        return "unchanged"
    try:
        _write(path, text)
    except OSError as exc:
        raise CommandError(f"{display_path(path)}: cannot write it: {exc}") from exc
    return "updated" if current.found is Found.OURS else "installed"


def _write(path: Path, text: str) -> None:
    """`text` at `path` by a rename (which replaces a link, never writes through one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode())
            handle.flush()
            os.fsync(handle.fileno())
        Path(name).chmod(0o644)
        Path(name).replace(path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def uninstall(agent: ExtensionAgent, path: Path) -> tuple[bool, str]:
    """Remove the extension at `path` if it is the one mented wrote, unchanged.

    Returns whether it was removed, and what was done, for people.

    Raises:
        CommandError: it is ours but cannot be removed.
    """
    current = inspect(path)
    where = display_path(path)
    if current.found is Found.MISSING:
        return False, f"No mented extension for {agent.title} in {where}; nothing changed."
    if current.found is not Found.OURS:
        return False, refusal(agent, current, "the uninstall")
    try:
        path.unlink()
    except OSError as exc:
        raise CommandError(f"{where}: cannot remove it: {exc}") from exc
    return True, f"Removed mented's extension {where}; nothing else changed."
