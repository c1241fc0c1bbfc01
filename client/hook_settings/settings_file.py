"""A settings file read and written safely: bounded, not out of a project, its backup settled.

A project's settings file is the repository's: `read_project_settings` reads it
without leaving the project, non-blocking, only a regular file, bounded.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from mented.agents.pretooluse import PreToolUseAgent
from mented.untrusted import Refused, describe_kind, read_file, shown
from mented_client.files import backup_path, display_path, remove_file, write_atomically
from mented_client.hook_settings.json_text import SettingsError
from mented_client.hook_settings.mcp import MCP_SERVER_NAME, without_mcp_server
from mented_client.hook_settings.removal import remove_hooks

if TYPE_CHECKING:
    from collections.abc import Callable


# A settings file is a few KiB; past this it is not one (and is not read into memory).
MAX_SETTINGS_BYTES = 4 * 1024 * 1024


def without_mented(
    text: str, path: Path, agent: PreToolUseAgent, *, enable_added: bool | None = None
) -> str:
    """`text` without anything of mented's the agent's files hold: its hook entries
    (`remove_hooks`), and its MCP server's entry when `path` is the agent's JSON MCP
    config."""
    text = remove_hooks(text, path, None, agent.layout, enable_added=enable_added)[0]
    if agent.mcp.how == "json" and path == agent.mcp_config_path():
        text = without_mcp_server(text, path, MCP_SERVER_NAME)
    return text


def holds_nothing(text: str | None) -> bool:
    """Whether a settings text holds nothing at all: missing, blank, or `{}`."""
    if text is None or not text.strip():
        return True
    try:
        return bool(json.loads(text) == {})
    except ValueError:
        return False


def unchanged_except(before: str, after: str, path: Path, ours: set[str]) -> None:
    """Check an edit: every top-level member but `ours` is as it was.

    Raises:
        SettingsError: some other member changed (the edit would lose the user's
            settings); the file is left alone.
    """
    old, new = json.loads(before or "{}"), json.loads(after or "{}")
    others = (set(old) | set(new)) - ours
    changed = sorted(key for key in others if old.get(key) != new.get(key))
    if changed:
        raise SettingsError(
            f"{path}: removing mented's entries would change {', '.join(changed)}; "
            "the file was not changed: remove them by hand"
        )


def read_settings(path: Path) -> str | None:
    """The file's text, or None when it does not exist.

    Only a regular file is read, and only up to `MAX_SETTINGS_BYTES`: a settings
    path that leads to a device (`/dev/zero`), a pipe or a huge file is refused
    with a message instead of being read without end.

    Raises:
        SettingsError: it exists but is not a regular file, is too large, or
            cannot be read as UTF-8 text.
    """
    try:
        # O_NONBLOCK: opening a named pipe nobody writes to returns at once.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SettingsError(
                f"{path}: not a regular file ({describe_kind(info.st_mode)}); a settings file "
                "must be a JSON file: remove or replace it, then run this again"
            )
        data = handle.read(MAX_SETTINGS_BYTES + 1)
    if len(data) > MAX_SETTINGS_BYTES:
        raise SettingsError(
            f"{path}: over {MAX_SETTINGS_BYTES // (1024 * 1024)} MiB, too large for a settings "
            "file; check what it holds (move it aside if it is not yours), then run this again"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: cannot read it: not UTF-8 text ({exc})") from exc


def read_project_settings(path: Path, project: Path) -> str | None:
    """A project's settings file (`path` inside `project`), read as mented reads what it
    does not own (`mented.untrusted.read_file`); None when it does not exist.

    A project comes with a `git clone`: its files are the repository's. A link that
    leads out of the project (to `~/.ssh/...`, `/dev/zero`) is refused, not followed;
    one that stays inside is the project's own layout (a shared config directory).
    The file itself is opened without following a link, non-blocking, and only a
    regular file of at most `MAX_SETTINGS_BYTES` is read.

    Raises:
        SettingsError: it leads out of the project, is not a regular file, is too
            large, or cannot be read as UTF-8 text.
    """
    target = outside_link(path, project)
    if target is not None:
        raise SettingsError(
            f"{shown(str(path))} leads outside the project, to {shown(str(target))}; it was "
            "not read: mented reads a project's settings only inside the project"
        )
    try:
        data = read_file(os.path.realpath(path), limit=MAX_SETTINGS_BYTES, shown_as=str(path))
    except FileNotFoundError:
        return None
    except Refused as exc:
        raise SettingsError(str(exc)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{shown(str(path))}: cannot read it: not UTF-8 text ({exc})") from None


def read_settings_at(path: Path, project: Path | None) -> str | None:
    """`read_project_settings` for a file inside `project`, else `read_settings` (the
    user's own file, which may be a link into a dotfiles checkout)."""
    if project is not None and path.is_relative_to(project):
        return read_project_settings(path, project)
    return read_settings(path)


def settle_backup(
    path: Path, result: str | None, without_ours: Callable[[str], str]
) -> Path | None:
    """After mented's entries were taken out of `path`: its backup, unless it is redundant.

    A backup (`<file>.mented-bak`, written by an install) is there to give the
    user back what they had. It holds nothing of theirs that the file does not
    when, with mented's entries taken out of both (`without_ours`: its hooks and
    its MCP server's entry), it is the file as it is now (`result`; None when
    the file is gone), byte for byte: then it is deleted. Otherwise (the user
    changed the file since, or the backup cannot be read as settings) it stays,
    and is returned so the user can be told.
    """
    saved = backup_path(path.resolve() if path.is_symlink() else path)
    try:
        kept = read_settings(saved)
        if kept is None:
            return None
        left = without_ours(kept)
        now = without_ours(result) if result and result.strip() else None
    except (SettingsError, ValueError):
        return saved if saved.exists() else None
    if left == now or (holds_nothing(left) and holds_nothing(now)):
        saved.unlink(missing_ok=True)
        return None
    return saved


def backup_kept(backup: Path) -> str:
    """What to tell the user about a backup that stays after an uninstall (`settle_backup`)."""
    return (
        f"{display_path(backup)}, the copy saved when mented last changed the file, differs "
        "from it (it may hold changes of yours): kept; delete it when you do not need it"
    )


def write_without_ours(  # noqa: PLR0913 - the file, its two texts, and what may change
    path: Path,
    before: str,
    after: str,
    ours: set[str],
    agent: PreToolUseAgent,
    *,
    up_to: Path | None,
    enable_added: bool | None = None,
) -> tuple[Path | None, list[Path] | None]:
    """Put `after` (the file's text `before`, mented's part taken out) in place at `path`.

    Every member but `ours` must be as it was (`unchanged_except`). A file left
    holding nothing is removed, with the directories that leaves empty up to
    `up_to`; a symlinked file (a dotfiles checkout) is written instead. The
    install's backup goes once it is redundant (`settle_backup`).

    Returns: the backup kept (None: there is none), and the directories removed
        with the file (None: the file stays, written).

    Raises:
        SettingsError: some other member would change; the file is left alone.
        OSError: it cannot be written or removed.
    """
    unchanged_except(before, after, path, ours)
    gone = holds_nothing(after) and not path.is_symlink()
    backup = settle_backup(
        path,
        None if gone else after,
        lambda kept: without_mented(kept, path, agent, enable_added=enable_added),
    )
    if gone:
        return backup, remove_file(path, up_to=up_to)
    write_atomically(path, after)
    return backup, None


def outside_link(path: Path, root: Path) -> Path | None:
    """Where `path` leads when a symlink on the way takes it out of `root`, else None.

    Follows every link, a dangling one too (to where it would create the file).
    """
    target = Path(os.path.realpath(path))
    return None if target.is_relative_to(os.path.realpath(root)) else target
