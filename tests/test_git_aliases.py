"""The user's git aliases (`mented.git_aliases`), as the matcher expands them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mented import git_aliases
from mented.actions import load_action_table
from mented.agents.opencode import tool_event
from mented.config import Config
from mented.git_aliases import GitAliases
from mented.matcher import Matcher
from mented.sessions import SessionMemory
from mented.store import Store
from tests.test_more_agents import handler


@pytest.fixture(scope="module")
def matcher() -> Matcher:
    return Matcher(load_action_table(Config()))


@pytest.fixture
def git_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with a ~/.gitconfig of aliases, and no system or XDG config in the way."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (home / ".gitconfig").write_text(
        '[user]\n\tname = x\n[alias]\n\tci = commit -v\n\tpf = "push --force-with-lease"  # mine\n'
        "[include]\n\tpath = ~/.gitaliases\n"
    )
    (home / ".gitaliases").write_text("[alias]\n\tpub = !npm publish\n")
    return home


def test_git_aliases_from_the_users_config_files(
    matcher: Matcher, git_home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[core]\n\tbare = false\n[alias]\n\tsh = push\n")
    (repo / "src").mkdir()
    aliases = GitAliases().for_directory(str(repo / "src"))
    assert matcher.actions_in("git ci -m x", aliases=aliases) == ("git-commit",)
    assert matcher.actions_in("git pf", aliases=aliases) == ("git-push", "git-push-force")
    assert matcher.actions_in("git pub", aliases=aliases) == ("package-publish",)
    assert matcher.actions_in("git sh origin main", aliases=aliases) == ("git-push",)
    # Outside the repository its alias is not in force; the user's still are.
    outside = GitAliases().for_directory(str(tmp_path))
    assert matcher.actions_in("git sh origin main", aliases=outside) == ()
    assert matcher.actions_in("git ci -m x", aliases=outside) == ("git-commit",)
    (step,) = matcher.explain("git ci -m x", aliases=aliases).commands
    assert step.via == ("git alias ci = commit -v",)


def test_git_aliases_are_cached_until_a_config_file_changes(
    git_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    reads: list[Path] = []
    real_read = git_aliases._read

    def counting(path: Path) -> str | None:
        reads.append(path)
        return real_read(path)

    monkeypatch.setattr(git_aliases, "_read", counting)
    lookup = GitAliases()
    first = lookup.for_directory(str(repo))
    assert first.table == {
        "ci": "commit -v",
        "pf": "push --force-with-lease",
        "pub": "!npm publish",
    }
    read_once = len(reads)
    assert lookup.for_directory(str(repo)) is first
    assert len(reads) == read_once  # nothing read again
    # A repository appears (git init), then the user adds an alias to it.
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_text("[alias]\n\tsh = push\n")
    assert lookup.for_directory(str(repo)).table["sh"] == "push"
    (git_home / ".gitconfig").write_text("[alias]\n\tci = status\n")
    assert lookup.for_directory(str(repo)).table["ci"] == "status"


def test_git_alias_lookup_costs_little_next_to_matching(
    matcher: Matcher, git_home: Path, tmp_path: Path
) -> None:
    # The hook looks the aliases up for every command that mentions git: a cached
    # lookup (a few stats) must stay small next to matching the command itself.
    deep = tmp_path / "repo" / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (tmp_path / "repo" / ".git").mkdir()
    lookup = GitAliases()
    lookup.for_directory(str(deep))
    # CPU time of this thread (its stats' system time included): what each costs,
    # whatever else the machine runs.
    rounds = 300
    started = time.thread_time()
    for _ in range(rounds):
        lookup.for_directory(str(deep))
    lookup_s = (time.thread_time() - started) / rounds
    uncached = Matcher(matcher.table, cache_bytes=0)
    started = time.thread_time()
    for _ in range(rounds):
        uncached.actions_in("git ci -m 'fix the parser' && git push origin HEAD")
    match_s = (time.thread_time() - started) / rounds
    assert lookup_s < match_s * 2, (lookup_s, match_s)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[alias]\n\tco = checkout\n", {"co": "checkout"}),
        (
            '[Alias]\n  LG = "log --graph ; --oneline" ; comment\n',
            {"lg": "log --graph ; --oneline"},
        ),
        ("[alias]\n\tx = one \\\n two\n", {"x": "one  two"}),
        (
            '[alias] st = status\n[alias "sub"]\n\tno = push\n[core]\n\tci = commit\n',
            {"st": "status"},
        ),
        ("[alias]\n\tflag\n", {"flag": "true"}),
    ],
)
def test_git_config_reader(text: str, expected: dict[str, str]) -> None:
    assert git_aliases.parse_config(text)[0] == expected


def test_git_alias_lookup_never_blocks_nor_fails_on_odd_places(
    git_home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    os.mkfifo(repo / ".git" / "config")  # opened as is, it would block the daemon
    lookup = GitAliases()
    assert lookup.for_directory(str(repo)).table["ci"] == "commit -v"
    assert lookup.for_directory("/" + "s" * 100_000).table["ci"] == "commit -v"
    assert lookup.for_directory("/tmp/a\0b").table["ci"] == "commit -v"


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_hooks_lookup_takes_its_answer_for_the_bound_then_sees_a_change(
    git_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(git_aliases, "_now", clock)
    stats: list[str] = []
    real_stamp = git_aliases._stamp

    def counting(path: str | Path) -> tuple[int, int] | None:
        stats.append(str(path))
        return real_stamp(path)

    monkeypatch.setattr(git_aliases, "_stamp", counting)
    lookup = GitAliases(recheck_s=git_aliases.RECHECK_S)
    repo = tmp_path / "repo"
    repo.mkdir()
    assert lookup.for_directory(str(repo)).table["ci"] == "commit -v"
    stats.clear()
    (git_home / ".gitconfig").write_text("[alias]\n\tci = status\n")
    clock.now += git_aliases.RECHECK_S / 2
    # Within the bound (a call's second event): the answer as it was, no stat at all.
    assert lookup.for_directory(str(repo)).table["ci"] == "commit -v"
    assert stats == []
    clock.now += git_aliases.RECHECK_S / 2
    assert lookup.for_directory(str(repo)).table["ci"] == "status"
    # A look that finds every file the same starts the bound again.
    stats.clear()
    clock.now += git_aliases.RECHECK_S
    assert lookup.for_directory(str(repo)).table["ci"] == "status"
    looked = len(stats)
    assert looked > 0
    clock.now += git_aliases.RECHECK_S / 2
    assert lookup.for_directory(str(repo)).table["ci"] == "status"
    assert len(stats) == looked
    # Another directory has a bound of its own.
    other = tmp_path / "other"
    other.mkdir()
    (git_home / ".gitconfig").write_text("[alias]\n\tci = commit\n")
    assert lookup.for_directory(str(other)).table["ci"] == "commit"


def test_a_new_alias_in_the_gitconfig_stops_the_first_hook_after_the_bound(
    git_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    store: Store,
    sessions: SessionMemory,
) -> None:
    clock = _Clock()
    monkeypatch.setattr(git_aliases, "_now", clock)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    store.store("commit messages: single line", tags=["trigger:git-commit"])
    hooks = handler(store, sessions)

    def commit_via(alias: str, call: str) -> bytes:
        event = tool_event(f"git {alias} -m x", cwd=str(repo), session="s", call_id=call)
        return hooks.handle("opencode", event)

    assert commit_via("sv", "c1") == b""  # no such alias: no commit
    (git_home / ".gitconfig").write_text("[alias]\n\tsv = commit\n")
    clock.now += git_aliases.RECHECK_S
    assert b"commit messages: single line" in commit_via("sv", "c2")
