"""Agents whose hook is an executable file of its own: Cline's `PreToolUse`.

Cline has no settings file for hooks: it runs every executable file named after
the event in its hooks folders (mented.agents.cline_cli). So mented's hook is a
small `sh` script there, `HEADER` then the shim's command line exactly as the
other agents' entries hold it (`guarded_command`: the real interpreter, exit 0
once the shim or interpreter is gone)::

    #!/bin/sh
    # mented hook file: ...
    [ -f /abs/shim.py ] && [ -x /abs/python3.12 ] && exec /abs/python3.12 -I -S ...; exit 0

A file there that is not ours (no `MARKER` line) is the user's: an install
refuses to touch it and says what to do, so an uninstall, which removes only a
file of ours, leaves the folder as it was. A link or anything but a regular
file is never followed, read or replaced. `HookFile` is `SettingsHooks` with
that file in place of a settings file's entries.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mented.registration import HookNeeds
from mented.untrusted import Refused, read_file
from mented_client.agents.base import Removal, hook_command, install_report, settings_paths
from mented_client.agents.settings_hooks import SettingsHooks, project_notes
from mented_client.commands.output import CommandError, print_json
from mented_client.files import display_path, remove_file
from mented_client.hook_settings import MentedEntry, SettingsError

if TYPE_CHECKING:
    import argparse

    from mented.agents import Agent

MARKER = "# mented hook file"
# A hook file of ours is a few hundred bytes: past this it is not one.
MAX_HOOK_FILE_BYTES = 64 * 1024


def hook_text(agent: Agent, command: str) -> str:
    """The hook file that runs `command` for `agent`."""
    return (
        "#!/bin/sh\n"
        f"{MARKER}: hands your rules to {agent.title} as context, never cancels a task.\n"
        f"# Written by `mentectl hooks install {agent.name}`; "
        f"`mentectl hooks uninstall {agent.name}` removes it.\n"
        f"{command}\n"
    )


def read_hook_file(path: Path) -> str | None:
    """The text of the file at `path`; None when there is none.

    Raises:
        SettingsError: it is a link, not a regular file, too large or not UTF-8 text.
    """
    try:
        data = read_file(path, limit=MAX_HOOK_FILE_BYTES)  # never through a link, bounded
    except FileNotFoundError:
        return None
    except Refused as exc:
        raise SettingsError(
            f"{exc}; mented writes its hook file only as a file of its own: move it aside "
            "(or pass --settings with another path), then run this again; nothing was written"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: not UTF-8 text ({exc}): not mented's, left as it is") from exc


def is_ours(text: str | None) -> bool:
    return text is not None and any(line.startswith(MARKER) for line in text.splitlines()[:3])


def entries_in(agent: Agent, text: str | None) -> list[MentedEntry]:
    """Our hook in a hook file's `text`, as the settings files' entries are found."""
    if not is_ours(text):
        return []
    assert text is not None
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if not lines:
        return []
    return [MentedEntry(agent.event_name, 0, -1, lines[-1], None, None, {"command": lines[-1]})]


@dataclass(frozen=True)
class Written:
    changed: bool
    replaced: bool  # an older hook file of ours was there


def install(agent: Agent, path: Path, command: str) -> Written:
    """Write our hook file at `path` (executable, by us only writable).

    Raises:
        SettingsError: a file of the user's (or a link, a directory, ...) is there.
        OSError: it cannot be written.
    """
    previous = read_hook_file(path)
    if previous is not None and not is_ours(previous):
        raise SettingsError(
            f"{path} is a {agent.title} hook of yours; mented does not change it. Rename it "
            f"(e.g. to {path.name}.sh: Cline runs both), or add this line to it yourself: "
            f"{command}; nothing was written"
        )
    text = hook_text(agent, command)
    if previous == text:
        return Written(changed=False, replaced=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.mented-{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o755)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.chmod(0o755)  # whatever the umask: Cline runs only an executable
        temporary.replace(path)  # a link put there since is replaced, not followed
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return Written(changed=True, replaced=previous is not None)


def uninstall(path: Path, *, up_to: Path | None) -> tuple[bool, list[Path]]:
    """Remove our hook file at `path`, and the folders that leaves empty up to `up_to`.

    Returns whether there was one, and the folders removed.

    Raises:
        SettingsError: the file there cannot be read (it stays).
        OSError: it cannot be removed.
    """
    if not is_ours(read_hook_file(path)):
        return False, []
    return True, remove_file(path, up_to=up_to)


class HookFile(SettingsHooks):
    """An agent whose hook is an executable file of mented's in its hooks folder."""

    def install(self, args: argparse.Namespace) -> int:
        agent = self.agent
        if args.timeout < 1:
            raise CommandError("--timeout must be at least 1 second", status=2)
        path = settings_paths(agent, args)[0]
        command = hook_command(agent, args.python, args.socket)
        try:
            written = install(agent, path, command)
        except SettingsError as exc:
            raise CommandError(str(exc)) from exc
        except OSError as exc:
            raise CommandError(f"{path}: cannot write it: {exc}") from exc
        outcome = (
            "unchanged" if not written.changed else "updated" if written.replaced else "installed"
        )
        notes = project_notes(agent, path) if args.project else []
        if args.json:
            print_json(
                {
                    **install_report(agent, path, outcome),
                    "command": command,
                    "registered_for": agent.registration_summary(HookNeeds()),
                    "notes": notes,
                }
            )
            return 0
        where = display_path(path)
        if outcome == "unchanged":
            print(f"The mented hook for {agent.title} is already in {where}; nothing changed.")
            return 0
        verb = "Updated" if written.replaced else "Installed"
        print(f"{verb} the mented hook for {agent.title}: {where}.")
        print(f"  runs: {command}")
        print(f"  for: {agent.registration_summary(HookNeeds())}")
        for note in notes:
            print(note)
        return 0

    def remove(
        self,
        path: Path,
        *,
        up_to: Path | None = None,
        project: Path | None = None,  # noqa: ARG002 - a hook file is ours or not, wherever
    ) -> Removal:
        found, emptied = uninstall(path, up_to=up_to)
        return Removal(int(found), deleted=found, directories=tuple(emptied))

    def read(self, path: Path, project: Path | None) -> str | None:  # noqa: ARG002
        try:
            return read_hook_file(path)
        except SettingsError:
            return ""  # a link, a FIFO, ...: the user's, not mented's hook

    def entries(self, text: str | None, path: Path) -> list[MentedEntry]:  # noqa: ARG002
        return entries_in(self.agent, text)

    def has_hook(self, path: Path, project: Path | None) -> bool:  # noqa: ARG002
        try:
            return is_ours(read_hook_file(path))
        except SettingsError:
            return False
