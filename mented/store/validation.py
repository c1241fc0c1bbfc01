"""What a memory must be to be stored: its text, tags, type, scope and time, each checked."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mented.memory import (
    MAX_CONTENT_BYTES,
    InvalidInputError,
    Memory,
    MemoryType,
    check_checks_shape,
    new_id,
    normalize_tag,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

MAX_TAGS = 64
MAX_TAG_LENGTH = 256
MAX_AGENT_LENGTH = 64
MAX_PROJECT_LENGTH = 4096  # PATH_MAX on Linux
_ID_LENGTH = 26
_CROCKFORD = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def _check_changes(  # noqa: PLR0913, PLR0917 - what a new version may change
    old: Memory,
    content: str,
    tags: tuple[str, ...] | None,
    agent: str | None,
    project: str | None,
    checks: tuple[str, ...] | None = None,
) -> None:
    """Refuse a new version identical to `old`: it would only lengthen the history.

    Raises:
        InvalidInputError: the same text, tags and scope as `old`.
    """
    if (
        content == old.content
        and tags in (None, old.tags)
        and agent in (None, old.agent)
        and project in (None, old.project)
        and checks in (None, old.checks)
    ):
        raise InvalidInputError(
            f"memory {old.id} already says exactly that; nothing changed "
            "(give a different text, or a new --agent or --project)"
        )


def _check_content(content: str) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidInputError("memory content cannot be empty; give the text of the memory")
    size = len(content.encode())
    if size > MAX_CONTENT_BYTES:
        raise InvalidInputError(
            f"memory content is {size} bytes; the limit is {MAX_CONTENT_BYTES} bytes. "
            "Keep a rule short, or split it into several memories."
        )
    return content


def _check_tags(tags: Iterable[str]) -> tuple[str, ...]:
    if isinstance(tags, str):
        raise InvalidInputError(f"tags must be a list of strings, not the string {tags!r}")
    normalized: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInputError(f"a tag must be a string, not {tag!r}")
        if len(tag) > MAX_TAG_LENGTH:
            raise InvalidInputError(
                f"tag {tag[:40]!r}... is {len(tag)} characters; the limit is {MAX_TAG_LENGTH}"
            )
        name = normalize_tag(tag)
        if not name.isprintable():  # one C call: checks every character
            raise InvalidInputError(f"tag {tag!r} contains control characters")
        normalized[name] = None
    if len(normalized) > MAX_TAGS:
        raise InvalidInputError(f"a memory can have at most {MAX_TAGS} tags, not {len(normalized)}")
    return tuple(normalized)


def _check_memory_type(memory_type: MemoryType | str) -> MemoryType:
    try:
        return MemoryType(memory_type)
    except ValueError:
        kinds = ", ".join(kind.value for kind in MemoryType)
        raise InvalidInputError(
            f"unknown memory type {memory_type!r}; use one of: {kinds}"
        ) from None


def _check_agent(agent: str | None) -> str | None:
    if agent is None:
        return None
    name = agent.strip() if isinstance(agent, str) else ""
    if not name:
        raise InvalidInputError(
            "an agent name cannot be blank; leave it out for a memory every agent sees"
        )
    if len(name) > MAX_AGENT_LENGTH:
        raise InvalidInputError(
            f"agent name is {len(name)} characters long; the limit is {MAX_AGENT_LENGTH}"
        )
    if any(not ch.isprintable() for ch in name):
        raise InvalidInputError(f"agent name {agent!r} contains control characters")
    return name


def _check_project(project: str | None) -> str | None:
    if project is None:
        return None
    if not isinstance(project, str) or not project.strip():
        raise InvalidInputError(
            "a project directory cannot be blank; leave it out for a memory seen everywhere"
        )
    if "\0" in project or len(project) > MAX_PROJECT_LENGTH:
        raise InvalidInputError(f"project directory {project[:80]!r} is not a usable path")
    if not Path(project).is_absolute():
        raise InvalidInputError(
            f"project directory {project!r} must be an absolute path (e.g. /home/me/src/app)"
        )
    return os.path.normpath(project)


def _check_created_at(created_at: float | None) -> float:
    if created_at is None:
        return time.time()
    if not isinstance(created_at, int | float) or not 0 <= created_at < 1 << 40:
        raise InvalidInputError(f"created_at {created_at!r} is not a Unix time in seconds")
    return float(created_at)


def _new_memory(  # noqa: PLR0913 - the fields of a memory
    content: str,
    *,
    memory_type: MemoryType | str,
    tags: Iterable[str],
    agent: str | None,
    project: str | None,
    created_at: float | None = None,
    supersedes: str | None = None,
    checks: Sequence[str] = (),
) -> Memory:
    """A validated, normalized record, not yet stored."""
    content = _check_content(content)
    kind = _check_memory_type(memory_type)
    normalized_tags = _check_tags(tags)
    scope_agent = _check_agent(agent)
    scope_project = _check_project(project)
    now = _check_created_at(created_at)
    return Memory(
        id=new_id(now),
        content=content,
        memory_type=kind,
        tags=normalized_tags,
        agent=scope_agent,
        project=scope_project,
        created_at=now,
        supersedes=supersedes,
        checks=check_checks_shape(list(checks)),
    )


def _check_id(memory_id: str, field: str) -> None:
    if len(memory_id) != _ID_LENGTH or not _CROCKFORD.issuperset(memory_id):
        raise InvalidInputError(
            f"{field} {memory_id!r} is not a memory id (26 characters of Crockford base32)"
        )
