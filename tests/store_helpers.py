"""What the store's test modules share: rules made at given times, contents, a file's digest."""

from __future__ import annotations

import hashlib
from pathlib import Path

from mented.memory import Memory
from mented.store import StoreItem

T0 = 1_700_000_000.0  # a fixed creation time for rules whose order a test checks


def contents(memories: list[Memory]) -> list[str]:
    return [memory.content for memory in memories]


def rule(
    action: str,
    content: str,
    created_at: float,
    *,
    agent: str | None = None,
    project: str | None = None,
) -> StoreItem:
    return StoreItem(
        content=content,
        tags=(f"trigger:{action}",),
        created_at=created_at,
        agent=agent,
        project=project,
    )


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
