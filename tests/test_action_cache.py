"""The built-in action table kept between starts (`mented.action_cache`): read back
only from the user's own private cache, and only for the files that made it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mented import action_cache, actions


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache directory of the user's; `_builtin` forgotten before and after."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    actions._builtin.cache_clear()
    yield tmp_path / "cache" / "mented"
    actions._builtin.cache_clear()


def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the parses of actions.toml from now on."""
    counted: list[int] = []
    read = actions._read_builtin

    def counting() -> actions._BuiltinTable:
        counted.append(1)
        return read()

    monkeypatch.setattr(actions, "_read_builtin", counting)
    return counted


def start(monkeypatch: pytest.MonkeyPatch) -> tuple[actions._BuiltinTable, int]:
    """The built-in table as a new process gets it, and whether actions.toml was parsed."""
    actions._builtin.cache_clear()
    counted = parses(monkeypatch)
    return actions._builtin(), len(counted)


def test_a_start_reads_the_table_an_earlier_start_checked(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = actions._read_builtin()
    assert start(monkeypatch) == (fresh, 1)  # the first start parses, and keeps it
    (kept,) = cache.glob("actions-*.json")
    assert kept.stat().st_mode & 0o777 == 0o600
    assert start(monkeypatch) == (fresh, 0)  # the next one reads it: the same table
    # What the matcher is made of: every action, shape and program.
    assert {action.name for action in fresh.actions} >= {"git-commit", "git-push"}


@pytest.mark.parametrize("kind", ["garbage", "another table's shape", "a link", "nested deep"])
def test_a_damaged_or_hostile_cache_costs_a_parse_never_more(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str
) -> None:
    fresh, _ = start(monkeypatch)
    (kept,) = cache.glob("actions-*.json")
    kept.unlink()
    if kind == "a link":  # to a good table elsewhere: not followed
        elsewhere = tmp_path / "elsewhere.json"
        elsewhere.write_bytes(action_cache.msgspec.json.encode(fresh))
        kept.symlink_to(elsewhere)
    else:
        kept.write_bytes(
            {
                "garbage": b"\x00\xff not json",
                "another table's shape": b'{"actions": [{"name": 1}], "programs": {}}',
                "nested deep": b'{"actions": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            }[kind]
        )
    assert start(monkeypatch) == (fresh, 1)
    assert not kept.is_symlink()  # replaced by the table just parsed
    assert start(monkeypatch) == (fresh, 0)


def test_a_cache_directory_others_may_enter_is_not_read(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh, _ = start(monkeypatch)
    cache.chmod(0o777)
    try:
        assert start(monkeypatch) == (fresh, 1)
        assert start(monkeypatch) == (fresh, 1)  # nor written into
    finally:
        cache.chmod(0o700)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_another_users_cache_directory_is_not_read(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh, _ = start(monkeypatch)
    os.chown(cache, 65534, 65534)
    assert start(monkeypatch) == (fresh, 1)


def test_another_table_file_or_version_is_another_cache(tmp_path: Path) -> None:
    table = tmp_path / "actions.toml"
    table.write_text("[actions.a]\n")
    first = action_cache.digest_of([table])
    table.write_text("[actions.b]\n")
    assert action_cache.digest_of([table]) != first


def test_a_cache_that_cannot_be_made_still_gets_the_table(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.parent.write_text("a file where the cache directory would be")  # as a read-only home
    fresh = actions._read_builtin()
    assert start(monkeypatch) == (fresh, 1)
    assert start(monkeypatch) == (fresh, 1)
