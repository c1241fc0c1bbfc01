"""Counted nouns for messages: "1 record", "2 records".

Shared by the daemon and the command-line client, so that every message counts
the same way; a one-line rule needs no library.
"""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, the noun plural unless the count is one (`plural` if irregular)."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {plural or noun + 's'}"
