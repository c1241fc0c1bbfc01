"""`mentectl trust [DIR]` and `mentectl rule add --team`: rules a project commits in `.mented/`.

A project's rules reach the agent only after you trusted their exact content
(mented/team.py). `rule add --team` writes a rule there for you to commit; the
daemon reads the files, this module only appends a line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented.memory import TRIGGER_PREFIX, InvalidInputError, Memory, short_handle
from mented.protocol import TrustedReply, TrustRequest
from mented.team import FOLDER, RULES_FILE
from mented.untrusted import Refused, describe_kind, open_directory, owned_by_user, shown
from mented.words import counted
from mented_client.commands.output import CommandError, format_memory, print_json
from mented_client.connection import Client
from mented_client.scope import daemon_table

if TYPE_CHECKING:  # argparse's class is not subscriptable at run time
    from collections.abc import Iterator

    from mented.actions import TableInForce

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]  # noqa: SLF001 - argparse's own type


def register(subparsers: SubParsers, common: argparse.ArgumentParser) -> None:
    trust = subparsers.add_parser(
        "trust",
        parents=[common],
        help="let the rules in a project's .mented/ folder reach your agents",
        description=(
            "Read the files in .mented/ first: their text goes into your agent's context. "
            "Trust covers their exact content; a change to them needs `mentectl trust` again."
        ),
    )
    trust.add_argument("dir", nargs="?", default=".", help="the project (default: here)")
    trust.set_defaults(handler=run_trust)


def run_trust(args: argparse.Namespace) -> int:
    directory = str(Path(args.dir).resolve())
    with Client(args.socket) as client:
        reply = client.expect(TrustRequest(dir=directory), TrustedReply)
        in_force = daemon_table(client)
    if args.json:
        print_json(msgspec.to_builtins(reply))
    else:
        print(f"trusted {counted(len(reply.rules), 'rule')} in {shown(reply.root)}/{FOLDER}/:")
        for rule in reply.rules:
            print(format_memory(rule))
    for warning in unknown_actions(reply.rules, in_force):
        print(f"mentectl: warning: {warning}", file=sys.stderr)
    return 0


def unknown_actions(rules: list[Memory], in_force: TableInForce) -> list[str]:
    """A warning for each project rule whose action mented does not know (it never fires),
    with the closest names, as `rule add` refuses such a rule."""
    from mented.actions import check_action  # noqa: PLC0415 - as `rule add` loads it

    warnings = []
    for rule in rules:
        for tag in rule.tags:
            if not tag.startswith(TRIGGER_PREFIX):
                continue
            try:
                check_action(in_force.table, tag[len(TRIGGER_PREFIX) :], problem=in_force.problem)
            except InvalidInputError as exc:
                warnings.append(
                    f"project rule [{short_handle(rule.id)}]: {shown(str(exc))} Fix its action "
                    f"in the project's {FOLDER}/ file."
                )
    return warnings


def project_root(start: Path) -> Path:
    """The project `start` is in: the nearest directory with .mented or .git above it.

    Looked for without following links (`.mented` may be one: the writer refuses it).

    Raises:
        CommandError: `start` is in no project.
    """
    for path in (start, *start.parents):
        if os.path.lexists(path / FOLDER) or os.path.lexists(path / ".git"):
            return path
    raise CommandError(
        f"{shown(str(start))} is not inside a project (no {FOLDER}/ or .git/ here or above); "
        "run it in the repository the rule is for",
        status=2,
    )


# Opened for appending, never through a link (a dangling one included: O_CREAT does not
# create its target), never blocking on a FIFO.
_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def add_team_rule(
    action: str, text: str, agent: str | None, checks: list[str] | None = None
) -> Path:
    """Append the rule to `<project>/.mented/rules.jsonl`; the file it wrote.

    The file is reached from the project's root by descriptors, never through a link:
    a `.mented` or a `rules.jsonl` that is a symbolic link (a repository can commit
    one that points to `~/.bashrc`) is refused, saying where it points, and nothing
    is written outside `<project>/.mented/`.

    Raises:
        CommandError: no text, no project, or the folder or file cannot be written safely.
    """
    if not text.strip():
        raise CommandError("a rule needs a text", status=2)
    root = project_root(Path(os.getcwd()))  # noqa: PTH109 - the user's directory, as given
    line: dict[str, str | list[str]] = {"action": action, "text": text}
    if agent:
        line["agent"] = agent
    if checks:
        line["checks"] = checks
    path = root / FOLDER / RULES_FILE
    with _team_folder(root, "cannot write a team rule") as folder_fd:
        _append(folder_fd, path, msgspec.json.encode(line) + b"\n")
    return path


@contextlib.contextmanager
def _team_folder(root: Path, refusal: str) -> Iterator[int]:
    """`<root>/.mented/`, created if missing, opened by descriptors from the root, no link.

    Raises:
        CommandError: `refusal` and why, when the root or the folder cannot be opened safely.
    """
    try:
        root_fd = open_directory(root)
    except (Refused, OSError) as exc:
        raise CommandError(f"{refusal} in {shown(str(root))}: {exc}", 1) from None
    try:
        folder_fd = _open_folder(root_fd, root)
        try:
            yield folder_fd
        finally:
            os.close(folder_fd)
    finally:
        os.close(root_fd)


def _open_folder(root_fd: int, root: Path) -> int:
    """`.mented/` in the project, created if missing, opened without following a link."""
    shown_as = shown(str(root / FOLDER))
    try:
        os.mkdir(FOLDER, mode=0o755, dir_fd=root_fd)
    except FileExistsError:
        pass  # a folder already (or a link: refused below)
    except OSError as exc:
        raise CommandError(f"cannot create {shown_as}: {exc.strerror or exc}", 1) from None
    try:
        folder_fd = open_directory(FOLDER, dir_fd=root_fd)
    except (Refused, OSError) as exc:
        raise CommandError(f"not written: {shown_as}: {_without_name(exc)}", 1) from None
    if not owned_by_user(os.fstat(folder_fd)):
        os.close(folder_fd)
        raise CommandError(
            f"not written: {shown_as} is not yours or others may write it, so mented "
            "ignores it: fix its owner and mode (`chmod o-w`)",
            1,
        )
    return folder_fd


def _append(folder_fd: int, path: Path, line: bytes) -> None:
    """Append `line` to the rule file in `folder_fd`, after a newline if its last line lacks one."""
    shown_as = shown(str(path))
    try:
        fd = os.open(RULES_FILE, _APPEND_FLAGS, 0o644, dir_fd=folder_fd)
    except OSError as exc:
        info = _lstat(RULES_FILE, folder_fd)
        if info is not None and stat.S_ISLNK(info.st_mode):
            target = shown(os.readlink(RULES_FILE, dir_fd=folder_fd))
            raise CommandError(
                f"not written: {shown_as} is a symbolic link (to {target}); mented does not "
                "follow links in a project's files: replace it with the file itself",
                1,
            ) from None
        raise CommandError(f"not written: {shown_as}: {exc.strerror or exc}", 1) from None
    try:
        info = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(info.st_mode):
            problem = f"{describe_kind(info.st_mode)}, not a regular file"
        elif info.st_nlink > 1:  # a hard link: the same file is somewhere else too
            problem = f"a file with {info.st_nlink} names (hard links)"
        elif not owned_by_user(info):
            problem = "not yours or others may write it, so mented ignores it"
        if problem:
            raise CommandError(f"not written: {shown_as} is {problem}: replace it", 1)
        if info.st_size and os.pread(fd, 1, info.st_size - 1) != b"\n":
            line = b"\n" + line
        os.write(fd, line)
    finally:
        os.close(fd)


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None


def _without_name(exc: Exception) -> str:
    """The reason of a `Refused` about `.mented` (its message starts with the bare name)."""
    message = str(exc)
    return message.removeprefix(f"{FOLDER}: ")


def write_team_file(root: Path, name: str, data: bytes) -> Path:
    """Replace `<root>/.mented/NAME` with `data`, atomically; the file it wrote.

    Reached by descriptors as `add_team_rule` does: a `.mented` that is a link, or not
    the user's, is refused; the file is written under a temporary name and renamed over
    the old one (a link there is replaced, never followed).

    Raises:
        CommandError: the folder or file cannot be written safely.
    """
    path = root / FOLDER / name
    temporary = f".{name}.{os.getpid()}.tmp"
    with _team_folder(root, "cannot write team rules") as folder_fd:
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temporary, flags, 0o644, dir_fd=folder_fd)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder_fd)
            problem = exc.strerror or exc
            raise CommandError(f"not written: {shown(str(path))}: {problem}", 1) from None
    return path
