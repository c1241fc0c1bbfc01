"""Shared output helpers for `mentectl` commands: JSON or text, errors to stderr."""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from mented.memory import Memory
from mented_client.errors import CommandError

# CommandError is defined apart from commands/ (see mented_client.errors); commands import it here.
__all__ = [
    "CommandError",
    "describe_scope",
    "fail",
    "format_memory",
    "format_time",
    "print_json",
]


def fail(message: str, status: int = 1) -> int:
    print(f"mentectl: {message}", file=sys.stderr)
    return status


def print_json(data: Any) -> None:  # noqa: ANN401 - anything msgspec can encode
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(data), indent=2).decode() + "\n")


def describe_scope(agent: str | None, project: str | None) -> str:
    """Who sees a memory: `agent=... project=...`, or `everywhere`."""
    parts = [f"agent={agent}"] if agent else []
    if project:
        parts.append(f"project={project}")
    return " ".join(parts) or "everywhere"


def format_memory(memory: Memory, *, verbose: bool = False) -> str:
    """One memory as a line (or a block with `verbose`)."""
    state = "" if memory.is_live else f"  [superseded by {memory.superseded_by}]"
    actions = ",".join(memory.actions)
    scope = describe_scope(memory.agent, memory.project)
    head = f"{memory.id}  {actions or memory.memory_type}  ({scope}){state}"
    if not verbose:
        return f"{head}\n    {memory.content}"
    lines = [
        f"id:            {memory.id}",
        f"content:       {memory.content}",
        f"type:          {memory.memory_type}",
        f"tags:          {', '.join(memory.tags) or '-'}",
        f"scope:         {scope}",
        f"created_at:    {format_time(memory.created_at)}",
    ]
    if memory.valid_until is not None:
        lines.append(f"valid_until:   {format_time(memory.valid_until)}")
    if memory.supersedes:
        lines.append(f"supersedes:    {memory.supersedes}")
    if memory.superseded_by:
        lines.append(f"superseded_by: {memory.superseded_by}")
    return "\n".join(lines)


def format_time(timestamp: float) -> str:
    import datetime as dt  # noqa: PLC0415 - only for human output

    return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
