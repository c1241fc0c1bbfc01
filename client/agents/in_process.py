"""What the agents that run mented in their own process share: one file of mented's, guarded.

Such an agent has no settings entry to splice and starts no process per tool call:
`hooks install` writes one file of mented's own into the agent's plugin folder, and
that file speaks mented's protocol on the socket itself. Two kinds, a module each:

- `plugin_file.PluginFile`: opencode, and Kilo (opencode's fork: the same plugin, in
  Kilo's folder). The file is mented's while it starts with the plugin's marker line.
- `extension_file.InProcessPlugin`: pi. The file is mented's while its last line
  holds the digest of every byte above it.

Anything else at the file's path is the user's, and is refused with a message that
says what is there and what to do, never followed, read without end or replaced:

- a symbolic link is never followed, written through or removed (a dotfiles
  checkout may link it; the user decides what it points to); nor is a plugin folder
  on the way that is a link;
- a file without the mark, or not the user's own (another user's, or one others
  may write), is never overwritten nor removed;
- a FIFO, a device or a directory is refused without being opened, and a file larger
  than any of ours is not read whole.

The file also carries the protocol version it speaks, which `doctor` compares with
the running daemon's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mented.agents.base import Agent
    from mented_client.commands.doctor import Check


def not_installed(agent: Agent) -> Check:
    """`doctor`'s line when the agent's file is in none of its places."""
    from mented_client.commands.doctor import Check  # noqa: PLC0415 - doctor imports this

    return Check(
        f"hook {agent.name}",
        "skip",
        f"not installed for {agent.title}",
        fix=f"`mentectl setup {agent.name}` if you use {agent.title}",
    )


def sample_event(agent: Agent, command: str) -> tuple[str, bytes]:
    """A doctor session of its own, and the agent's event for `command` in it."""
    session = f"mented-doctor-{os.getpid()}-{time.time_ns()}"
    return session, agent.sample_event(command, cwd=str(Path.cwd()), session=session)
