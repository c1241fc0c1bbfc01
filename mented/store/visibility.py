"""Who sees a memory: the one visibility predicate, over agents and project places."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mented.store.validation import MAX_PROJECT_LENGTH

if TYPE_CHECKING:
    from mented.memory import Memory


def visible_to(memory: Memory, agent: str | None, cwd: str | None) -> bool:
    """Whether a caller (`agent`, working directory `cwd`) may see `memory`.

    The one visibility rule, used by every lookup: a memory scoped to an agent is
    seen only by that agent; one scoped to a project directory only from that
    directory or inside it (whole path components: /work/app2 is not inside
    /work/app); unscoped memories by everyone. A caller that leaves `agent` or
    `cwd` as None is not filtered on that axis. `cwd` is taken as given and
    through its symlinks (see `_places`): a project directory is stored resolved.
    """
    return _sees_from(memory, agent, _places(cwd))


def _places(cwd: str | None) -> tuple[str, ...] | None:
    """`cwd` normalized, and resolved through its symlinks when that differs.

    Project directories are stored resolved (`mentectl rule add --project` through
    a link stores its target), so a command run through the link sees them; rules
    stored before that, with the link's path, are still seen from the link. Done
    once per lookup: a few `lstat` calls.
    """
    if cwd is None:
        return None
    lexical = os.path.normpath(cwd)
    if len(lexical) > MAX_PROJECT_LENGTH:
        # No directory has such a path (the kernel refuses it), and `realpath` of one
        # costs its length squared: 5 minutes for a megabyte of `/a/a/...`.
        return (lexical,)
    real = os.path.realpath(lexical)
    return (lexical,) if real == lexical else (lexical, real)


def _sees_from(memory: Memory, agent: str | None, places: tuple[str, ...] | None) -> bool:
    """`visible_to` with the working directory already in `_places` form."""
    if places is None:
        return _sees(memory, agent, None)
    return any(_sees(memory, agent, place) for place in places)


def _sees(memory: Memory, agent: str | None, cwd: str | None) -> bool:
    """`visible_to` for one normalized working directory."""
    if agent is not None and memory.agent is not None and memory.agent != agent:
        return False
    if cwd is None or memory.project is None:
        return True
    project = memory.project  # normalized when it was written
    if cwd == project:
        return True
    return cwd.startswith(project if project.endswith(os.sep) else project + os.sep)
