"""The hook's cache of the matcher's answers (`mented.matcher.cache`)."""

from __future__ import annotations

import gc
import hashlib
import tracemalloc
from typing import Any

import pytest

from mented.actions import load_action_table
from mented.config import Config
from mented.matcher import Explanation, Matcher


def test_a_repeated_command_is_answered_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    matcher = Matcher(load_action_table(Config()))
    matched: list[str] = []
    match = matcher._explain

    def counting(command: str, deadline: float | None, **kwargs: Any) -> tuple[Explanation, object]:
        matched.append(command)
        return match(command, deadline, **kwargs)

    monkeypatch.setattr(matcher, "_explain", counting)
    assert matcher.actions_in("git commit -m cached") == ("git-commit",)
    assert matcher.actions_in("git commit -m cached") == ("git-commit",)
    assert matched == ["git commit -m cached"]


def test_the_cache_is_bounded_in_bytes_whatever_the_commands_length() -> None:
    limit = 32 * 1024  # about 130 entries
    matcher = Matcher(load_action_table(Config()), cache_bytes=limit)
    matcher.actions_in("git push")  # regexes compiled, bashlex warm: not counted
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        # Each 8 KiB long (read by the fallback tokenizer, quickly); each kept as a digest.
        # 330: the cache fills 2.5 times over, and had it not counted an entry's own
        # weight, all 330 (some 50 KB) would be held.
        for number in range(330):
            assert matcher.actions_in(f"git push origin {'x' * 8192}{number}") == ("git-push",)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert matcher.cache_bytes <= limit
    # What the cache counts is what it holds: its entries' weight is measured, not guessed.
    assert held <= 1.25 * limit, held


def test_the_cache_keeps_the_most_recently_used() -> None:
    matcher = Matcher(load_action_table(Config()), cache_bytes=3 * 256)
    for command in ("git push a", "git push b", "git push a", "git push c", "git push d"):
        matcher.actions_in(command)
    assert matcher.cache_bytes <= 3 * 256
    hits = {
        command: matcher._cache.get(_digest(command)) is not None
        for command in ("git push a", "git push b", "git push d")
    }
    assert hits == {"git push a": True, "git push b": False, "git push d": True}


def _digest(command: str) -> bytes:
    return hashlib.blake2b(command.encode(), digest_size=16).digest()
