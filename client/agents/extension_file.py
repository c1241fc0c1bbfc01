"""pi: mented's extension file, run in pi's own process, known by its digest line.

The extension shipped in this package (`pi_extension.ts`), with the socket written
in, ending with a line of its own::

    // mented-digest: sha256:<hex of every byte above this line>

That line is how mentectl knows the file is the one it wrote, unchanged. Anything
else at its path is the user's (see `in_process`).
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
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from mented import paths
from mented.agents.in_process import ExtensionAgent
from mented.protocol import LogReply, LogRequest
from mented.untrusted import Refused, owned_by_user, read_file, shown
from mented_client.agents.base import ClientAgent, cleanup_root, install_report, print_outcome
from mented_client.agents.findings import DoctorFindings
from mented_client.agents.in_process import not_installed, sample_event
from mented_client.commands.output import CommandError, escape_controls, print_json
from mented_client.connection import Client, DaemonError, NotRunningError, ProtocolError
from mented_client.files import display_path, remove_file

if TYPE_CHECKING:
    import argparse

    from mented.protocol import StatusReply
    from mented.registration import HookNeeds
    from mented_client.commands.doctor import Check, FireTarget

DIGEST_PREFIX = "// mented-digest: sha256:"
SOCKET_PLACEHOLDER = '"@MENTED_SOCKET@"'
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


def inspect_extension(agent: ExtensionAgent, path: Path) -> ExtensionFile:
    """What is at `path`, read without following a link; its protocol line read by `agent`,
    whose file format it is."""
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
    return ExtensionFile(path, found, agent.protocol_of(text), socket_of(text))


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


def write_extension(agent: ExtensionAgent, path: Path, socket: str | None, top: Path) -> str:
    """Write the extension at `path`: "installed", "updated" or "unchanged".

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
    current = inspect_extension(agent, path)
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


def remove_extension(
    agent: ExtensionAgent, path: Path, *, up_to: Path | None
) -> tuple[bool, list[Path], str]:
    """Remove the extension at `path` if it is the one mented wrote, unchanged, and the
    folders that leaves empty up to `up_to` (the plugin folder the install created).

    Returns whether it was removed, the folders removed with it, and what was done,
    for people.

    Raises:
        CommandError: it is ours but cannot be removed.
    """
    current = inspect_extension(agent, path)
    where = display_path(path)
    if current.found is Found.MISSING:
        return False, [], f"No mented extension for {agent.title} in {where}; nothing changed."
    if current.found is not Found.OURS:
        return False, [], refusal(agent, current, "the uninstall")
    try:
        directories = remove_file(path, up_to=up_to)
    except OSError as exc:
        raise CommandError(f"{where}: cannot remove it: {exc}") from exc
    return True, directories, f"Removed mented's extension {where}; nothing else changed."


# Checked by `doctor` as the shim's fire is: a sample commit event, marked as a test.
SAMPLE_COMMAND = 'git commit -m "mented doctor: sample commit"'


class InProcessPlugin(ClientAgent):
    """An agent that runs mented's extension in its own process (pi).

    `--settings PATH` names the extension file, `--project DIR` the project's plugin
    folder.
    """

    agent: ExtensionAgent

    def __init__(self, agent: ExtensionAgent) -> None:
        super().__init__(agent)

    def place_of(self, args: argparse.Namespace) -> tuple[Path, Path]:
        """The extension file a verb works on, and the top folder found as it is."""
        agent = self.agent
        if getattr(args, "settings", None):
            path = Path(args.settings).expanduser().absolute()
            return path, path.parent
        project = getattr(args, "project", None)
        if project:
            return agent.project_settings_path(project), project
        return agent.settings_path(), agent.config_dir()

    def install(self, args: argparse.Namespace) -> int:
        agent = self.agent
        path, top = self.place_of(args)
        outcome = write_extension(agent, path, args.socket, top)
        socket = str(paths.socket_path(args.socket).absolute())
        if args.json:
            print_json(
                {
                    **install_report(agent, path, outcome),
                    "socket": socket,
                    "registered_for": agent_coverage(agent),
                }
            )
            return 0
        if not print_outcome("mented's extension", agent, path, outcome):
            return 0
        print(f"  for: {agent_coverage(agent)}, in {agent.title}'s own process (no hook process)")
        print(f"  socket: {socket} (unless the agent's $MENTED_SOCKET names another)")
        print(f"  {agent.title} loads it when a session starts (`/reload` in a running one).")
        return 0

    def refuse_command(self) -> Exception | None:
        return CommandError(
            f"{self.title} runs mented in its own process: there is no hook command line. "
            f"`mentectl hooks install {self.name}` writes mented's extension.",
            status=2,
        )

    def _remove(self, path: Path, project: Path | None) -> list[str]:
        """The extension at `path` out, and the folders that leaves empty up to the
        agent's config directory (a project's: its top folder); what was done."""
        up_to = cleanup_root(self.agent, path, project)
        _, directories, said = remove_extension(self.agent, path, up_to=up_to)
        return [said] + [
            f"  {display_path(directory)} was left empty: removed too" for directory in directories
        ]

    def uninstall(self, args: argparse.Namespace) -> int:
        agent = self.agent
        path, _ = self.place_of(args)
        up_to = cleanup_root(agent, path, getattr(args, "project", None))
        removed, directories, said = remove_extension(agent, path, up_to=up_to)
        if args.json:
            print_json({"agent": agent.name, "settings": str(path), "removed": int(removed)})
        else:
            print(said)
            for directory in directories:
                print(f"  {display_path(directory)} was left empty: removed too")
        return 0

    def undo_user(self) -> tuple[list[str], list[str]]:
        """`mentectl uninstall pi`: the user's extension out, if it is mented's."""
        try:
            return self._remove(self.agent.settings_path(), None), []
        except CommandError as exc:
            return [], [f"extension: {exc}"]

    def undo_mcp(self) -> str:
        """Nothing: the agent has no MCP server of mented's to remove."""
        return ""

    def project_hooks(self, project: Path) -> list[Path]:
        """mented's extension in `project`, if it is there (`uninstall` names it, and
        leaves it)."""
        file = inspect_extension(self.agent, self.agent.project_settings_path(project))
        return [file.path] if file.found is Found.OURS else []

    def hook_for_user(self) -> bool:
        return inspect_extension(self.agent, self.agent.settings_path()).found is Found.OURS

    def set_up_for_user(self) -> bool:
        return self.hook_for_user()

    def status(self, extra: str | None, needs: HookNeeds | None) -> tuple[object, bool]:  # noqa: ARG002 - it hands over every call
        found = [
            {
                "settings": str(file.path),
                "exists": file.found is not Found.MISSING,
                "state": str(file.found),
                "protocol": file.protocol,
                "socket": file.socket,
                "error": file.problem,
            }
            for file in extension_files(self.agent, extra)
        ]
        broken = any(
            item["error"] or item["state"] not in ("installed", "not installed") for item in found
        )
        return found, broken

    def print_status(self, extra: str | None, needs: HookNeeds | None) -> bool:  # noqa: ARG002
        agent = self.agent
        print(f"{agent.name} ({agent.title})")
        broken = False
        for file in extension_files(self.agent, extra):
            where = escape_controls(display_path(file.path), keep_lines=False)
            if file.found is Found.OURS:
                print(f"  {where}: extension installed, protocol {file.protocol}, ok")
                print(f"    socket: {file.socket or 'the agent $MENTED_SOCKET, else the default'}")
                continue
            if file.found is Found.MISSING:
                print(f"  {where}: not installed (no such file)")
                continue
            broken = True
            problem = status_problem(agent, file) or ""
            print(f"  {where}: {escape_controls(problem, keep_lines=False)}")
        return broken

    def registration_warnings(self, needs: HookNeeds) -> list[str]:  # noqa: ARG002
        """None: the extension hands every call of its tools to the daemon."""
        return []

    def doctor(
        self,
        target: FireTarget,
        status: StatusReply | None,
        needs: HookNeeds | None,  # noqa: ARG002 - it hands over every call
        expected: dict[tuple[str, str], str],  # noqa: ARG002 - no command line to compare
    ) -> DoctorFindings:
        checks = doctor_checks(self.agent, target.socket, status)
        return DoctorFindings(checks, installed=any(c.state in ("ok", "fail") for c in checks))


def agent_coverage(agent: ExtensionAgent) -> str:
    """The tool calls the extension hands to mented, in a few words."""
    return (
        f"every {'/'.join(sorted(agent.shell_tools))} command and file write "
        f"({', '.join(sorted(agent.edit_tools))}); the pinned rules with each prompt"
    )


def status_problem(agent: ExtensionAgent, file: ExtensionFile) -> str | None:
    """What keeps this file from handing rules over, for `hooks status`."""
    if file.found is Found.OURS:
        return None
    if file.found is Found.MISSING:
        return "not installed"
    return refusal(agent, file, "mentectl")


def extension_files(agent: ExtensionAgent, extra: str | None = None) -> list[ExtensionFile]:
    """The user's extension file, the project's here (when there is one) and `extra`."""
    found = [inspect_extension(agent, agent.settings_path())]
    project = inspect_extension(agent, agent.project_settings_path(Path.cwd()))
    if project.found is not Found.MISSING and project.path != found[0].path:
        found.append(project)
    if extra:
        found.append(inspect_extension(agent, Path(extra).expanduser().absolute()))
    return found


def doctor_checks(agent: ExtensionAgent, socket: Path, status: StatusReply | None) -> list[Check]:
    """`doctor`'s lines for the agent's extension: installed, its protocol the daemon's, a
    sample event answered."""
    from mented_client.commands.doctor import Check  # noqa: PLC0415 - doctor imports this

    link = f"hook {agent.name}"
    checks: list[Check] = []
    files = extension_files(agent)
    installed = [file for file in files if file.found is Found.OURS]
    checks.extend(
        Check(link, "warn", refusal(agent, file, "mentectl"))
        for file in files
        if file.found in (Found.CHANGED, Found.FOREIGN)
    )
    if not installed:
        if not checks:
            checks.append(not_installed(agent))
        return checks
    for file in installed:
        where = display_path(file.path)
        if status is not None and file.protocol != status.protocol:
            checks.append(
                Check(
                    link,
                    "fail",
                    f"{where} speaks protocol {file.protocol}, the daemon {status.protocol}",
                    fix=f"`mentectl hooks install {agent.name}` writes this version's extension",
                )
            )
        elif file.socket is not None and file.socket != str(socket.absolute()):
            checks.append(
                Check(
                    link,
                    "warn",
                    f"{where} falls back to the socket {file.socket}, but mentectl uses {socket} "
                    f"(unless {agent.title}'s environment names $MENTED_SOCKET)",
                    fix=f"`mentectl hooks install {agent.name}` writes this socket in",
                )
            )
        else:
            checks.append(Check(link, "ok", f"extension installed in {where}"))
    if status is not None:
        checks.append(fire(agent, socket))
    return checks


def fire(agent: ExtensionAgent, socket: Path) -> Check:
    """A sample commit event, as the extension sends it, marked as a test fire."""
    from mented_client.commands.doctor import Check  # noqa: PLC0415 - doctor imports this

    link = f"fire {agent.name}"
    session, event = sample_event(agent, SAMPLE_COMMAND)
    started = time.perf_counter()
    try:
        with Client(socket, connect_timeout=2.0, timeout=2.0) as client:
            client.hook(agent.name, event, test=True)
            took = (time.perf_counter() - started) * 1000
            fires = client.expect(LogRequest(n=50), LogReply).fires
    except (NotRunningError, ProtocolError, DaemonError) as exc:
        return Check(link, "fail", f"the daemon did not answer a sample event: {exc}")
    if not any(record.session == session for record in fires):
        return Check(
            link, "fail", "the daemon answered a sample event but did not log it", fix=None
        )
    return Check(link, "ok", f"a sample `git commit` event was answered in {took:.1f} ms")
