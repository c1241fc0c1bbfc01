"""mented's plugin file for an agent that runs plugins in its own process (opencode).

Such an agent has no settings entry to splice: `hooks install` writes one file of
mented's own, the plugin shipped in the package (`mented.agents.opencode`) with the
agent's name and the socket written in, into the agent's plugin folder. The file is
mented's only while it starts with the plugin's marker line; then an install
replaces it and an uninstall removes it. Anything else at that path is the user's:

- a symbolic link is never followed, written through or removed (a dotfiles
  checkout may link it; the user decides what it points to);
- a file without the marker, or not the user's own, is never overwritten nor
  removed: the install stops and says what is there;
- a FIFO, a device or a directory is refused without being opened.
"""

from __future__ import annotations

import errno
import json
import stat
from dataclasses import dataclass
from pathlib import Path

from mented.agents.opencode import PLUGIN_MARKER, OpencodeAgent, plugin_protocol, plugin_source
from mented.untrusted import Refused, describe_kind, owned_by_user, read_file, shown
from mented_client.files import display_path, remove_file, write_atomically

# The plugin is a few KiB; a file over this at its path is not ours.
MAX_PLUGIN_BYTES = 256 * 1024
_AGENT_LINE = 'const AGENT = "opencode"'
_SOCKET_LINE = "const FALLBACK_SOCKET = null"


class PluginError(Exception):
    """The plugin's path holds something mented must not touch; the message says what."""


def plugin_text(agent: OpencodeAgent, socket: Path) -> str:
    """The plugin file as `hooks install` writes it: the agent and the fallback socket in."""
    source = plugin_source()
    assert _AGENT_LINE in source, "the shipped template's line"
    assert _SOCKET_LINE in source, "the shipped template's line"
    return source.replace(_AGENT_LINE, f"const AGENT = {json.dumps(agent.name)}").replace(
        _SOCKET_LINE, f"const FALLBACK_SOCKET = {json.dumps(str(socket))}"
    )


@dataclass(frozen=True)
class Found:
    """What is at the plugin's path.

    `text` is the file's content when it is a regular file of the user's with the marker
    (mented's); `problem` says why anything else there is not mented's to touch.
    """

    path: Path
    exists: bool
    text: str | None = None
    problem: str | None = None

    @property
    def ours(self) -> bool:
        return self.text is not None

    @property
    def protocol(self) -> int | None:
        return plugin_protocol(self.text) if self.text is not None else None

    def socket(self) -> str | None:
        """The fallback socket written in at install; None when it names none."""
        for line in (self.text or "").splitlines():
            if line.startswith("const FALLBACK_SOCKET = "):
                value = json.loads(line.removeprefix("const FALLBACK_SOCKET = "))
                return value if isinstance(value, str) else None
        return None


def inspect(path: Path) -> Found:
    """What is at `path`, read without following a link, bounded."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return Found(path, exists=False)
    except OSError as exc:
        return Found(path, True, problem=f"cannot look at it: {exc.strerror or exc}")
    where = shown(display_path(path))
    if stat.S_ISLNK(info.st_mode):
        target = shown(str(path.readlink()))
        return Found(
            path,
            True,
            problem=f"{where} is a symbolic link (to {target}); mented does not write "
            "through links: remove the link, or point it at a file of your own",
        )
    if not stat.S_ISREG(info.st_mode):
        return Found(
            path,
            True,
            problem=f"{where} is {describe_kind(info.st_mode)}, not a file mented wrote: "
            "move it away first",
        )
    if not owned_by_user(info):
        return Found(
            path,
            True,
            problem=f"{where} belongs to uid {info.st_uid} (or others may write it), so it is "
            "not mented's: move it away first",
        )
    try:
        data = read_file(path, limit=MAX_PLUGIN_BYTES, shown_as=where)
    except (Refused, FileNotFoundError) as exc:
        return Found(path, True, problem=f"{exc}")
    text = data.decode("utf-8", "replace")
    if not text.startswith(PLUGIN_MARKER):
        return Found(
            path,
            True,
            problem=f"{where} is a file mented did not write; it is left as it is: rename "
            "it if you want mented's plugin there",
        )
    return Found(path, True, text=text)


def install(path: Path, text: str) -> str:
    """Write the plugin at `path`: "installed", "updated" or "unchanged".

    Raises:
        PluginError: something that is not mented's is at `path`.
        OSError: it cannot be written.
    """
    found = inspect(path)
    if found.problem is not None:
        raise PluginError(f"{found.problem}; nothing was written")
    if found.text == text:
        return "unchanged"
    write_atomically(path, text, mode=0o644)
    return "updated" if found.exists else "installed"


def remove(path: Path, *, up_to: Path | None) -> tuple[bool, list[Path]]:
    """Remove mented's plugin at `path` (and the folders that leaves empty, up to `up_to`).

    Returns whether a plugin was removed, and the directories removed with it. A file
    that is not mented's stays, and is no error: there is nothing of ours to remove.

    Raises:
        OSError: it cannot be removed.
    """
    found = inspect(path)
    if not found.ours:
        return False, []
    try:
        return True, remove_file(path, up_to=up_to)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False, []
        raise
