"""The LMDB store: action-rule lookup, visibility, supersession, durability, growth."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lmdb
import pytest

import mented.store as store_module
from mented.memory import MAX_CONTENT_BYTES, InvalidInputError, Memory, MemoryType, short_handle
from mented.store import (
    SCHEMA_VERSION,
    ConflictError,
    NotFoundError,
    Store,
    StoreDamagedError,
    StoreError,
    StoreFailedError,
    StoreFullError,
    StoreItem,
    StoreOpenError,
    visible_to,
)

T0 = 1_700_000_000.0  # a fixed creation time for rules whose order a test checks


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    # sync=False only to keep the suite fast; durability has its own tests below.
    db = Store(tmp_path / "data", sync=False)
    yield db
    db.close()


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


# ------------------------------------------------------------------ lookup


def test_only_the_matching_trigger_comes_back(store: Store) -> None:
    store.store("commit: one line, conventional prefix", tags=["trigger:git-commit"])
    store.store("PRs: draft first", tags=["trigger:pr-create"])
    store.store("commits are signed", tags=["trigger:git-commit-amend"])
    store.store("the repo uses trunk-based development")

    assert contents(store.recall_for_action("git-commit")) == [
        "commit: one line, conventional prefix"
    ]
    assert contents(store.recall_for_action("pr-create")) == ["PRs: draft first"]


def test_a_plain_tag_is_not_a_trigger(store: Store) -> None:
    store.store("notes about commits", tags=["git-commit"])
    store.store("also not a rule", tags=["triggers:git-commit", "trigger"])

    assert store.recall_for_action("git-commit") == []
    assert store.list(rules_only=True) == []
    assert store.stats().live_rules == 0


def test_trigger_tags_are_normalized_on_write_and_lookup(store: Store) -> None:
    memory = store.store("one line", tags=["Trigger:Git-Commit", " trigger:GIT-COMMIT ", "Team"])

    assert memory.tags == ("trigger:git-commit", "Team")
    for spelling in ("git-commit", "Git-Commit", "GIT-COMMIT", "  git-commit\n"):
        assert store.recall_for_action(spelling) == [memory]


def test_newest_first_and_capped_at_k(store: Store) -> None:
    store.store_many(rule("git-commit", f"rule {n}", T0 + n) for n in range(10))

    assert contents(store.recall_for_action("git-commit", k=3)) == ["rule 9", "rule 8", "rule 7"]
    assert len(store.recall_for_action("git-commit")) == 6  # the default k
    assert len(store.recall_for_action("git-commit", k=100)) == 10


def test_rules_made_at_the_same_time_are_ordered_by_id(store: Store) -> None:
    ids = store.store_many(rule("git-commit", f"rule {n}", T0) for n in range(8))

    recalled = store.recall_for_action("git-commit", k=8)

    assert [memory.id for memory in recalled] == sorted(ids, reverse=True)


@pytest.mark.parametrize(
    ("action", "k"),
    [
        ("no-such-action", 6),
        ("", 6),
        ("   ", 6),
        ("git commit", 6),
        ("git-commit\x00", 6),
        ("x" * 10_000, 6),
        ("git-commit", 0),
        ("git-commit", -1),
    ],
)
def test_unknown_unusable_or_empty_lookups_return_nothing(
    store: Store, action: str, k: int
) -> None:
    store.store("one line", tags=["trigger:git-commit"])

    assert store.recall_for_action(action, k=k) == []


def test_lookups_write_nothing(store: Store) -> None:
    first = store.store("one line", tags=["trigger:git-commit"])
    store.supersede(first.id, "one line, no emoji")
    env = store._env
    before = env.info()["last_txnid"]

    store.recall_for_action("git-commit", agent="claude-code", cwd="/work/app")
    store.recall_for_action("never-stored")
    store.get(first.id)
    store.get(short_handle(first.id))
    store.history(first.id)
    store.list(include_superseded=True)
    store.list(action="git-commit")
    store.stats()

    assert env.info()["last_txnid"] == before


# -------------------------------------------------------------- visibility


def test_agent_isolation(store: Store) -> None:
    store.store("for everyone", tags=["trigger:git-commit"])
    store.store("for claude", tags=["trigger:git-commit"], agent="claude-code")
    store.store("for codex", tags=["trigger:git-commit"], agent="codex")

    assert set(contents(store.recall_for_action("git-commit", agent="claude-code"))) == {
        "for everyone",
        "for claude",
    }
    assert set(contents(store.recall_for_action("git-commit", agent="codex"))) == {
        "for everyone",
        "for codex",
    }
    assert contents(store.recall_for_action("git-commit", agent="aider")) == ["for everyone"]
    assert len(store.recall_for_action("git-commit")) == 3  # no caller agent: sees all


@pytest.mark.parametrize(
    ("cwd", "sees_project_rule"),
    [
        ("/work/app", True),  # the directory itself
        ("/work/app/", True),
        ("/work/app/src/deep", True),  # inside it
        ("/work/app/src/../lib", True),  # lexically inside
        ("/work/app2", False),  # a prefix, not a parent
        ("/work/ap", False),
        ("/work/other", False),  # a sibling
        ("/work", False),  # the parent
        ("/work/app/../app2", False),
        (None, True),  # no cwd given: not filtered
    ],
)
def test_project_scoping(store: Store, cwd: str | None, sees_project_rule: bool) -> None:
    store.store("everywhere", tags=["trigger:git-commit"])
    store.store("only in app", tags=["trigger:git-commit"], project="/work/app")

    seen = set(contents(store.recall_for_action("git-commit", cwd=cwd)))

    assert seen == ({"everywhere", "only in app"} if sees_project_rule else {"everywhere"})


def test_project_paths_are_normalized_when_stored(store: Store) -> None:
    memory = store.store("x", tags=["trigger:git-commit"], project="/work/app/./src/../")

    assert memory.project == "/work/app"
    assert store.recall_for_action("git-commit", cwd="/work/app/src") == [memory]


def test_a_project_rule_is_seen_through_a_link_to_its_directory(
    store: Store, tmp_path: Path
) -> None:
    # Stored resolved (`rule add --project` through a link stores its target): a
    # command run from the link's path, or inside it, is in that project.
    real = tmp_path / "real" / "app"
    (real / "src").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    store.store("app only", tags=["trigger:git-commit"], project=str(real))

    assert contents(store.recall_for_action("git-commit", cwd=str(link / "src"))) == ["app only"]
    assert contents(store.list(cwd=str(link))) == ["app only"]
    assert store.recall_for_action("git-commit", cwd=str(tmp_path / "real")) == []


def test_visible_to_is_one_predicate_over_both_scopes() -> None:
    both = Memory(id="X" * 26, content="x", created_at=T0, agent="codex", project="/work/app")
    root = Memory(id="Y" * 26, content="y", created_at=T0, project="/")

    assert visible_to(both, "codex", "/work/app/x")
    assert not visible_to(both, "claude-code", "/work/app/x")  # right place, wrong agent
    assert not visible_to(both, "codex", "/work/app2")  # right agent, wrong place
    assert visible_to(both, None, None)
    assert visible_to(root, "anyone", "/anywhere/at/all")


def test_list_uses_the_same_visibility(store: Store) -> None:
    store.store("everywhere")
    store.store("codex only", agent="codex")
    store.store("app only", project="/work/app")

    assert set(contents(store.list(agent="claude-code", cwd="/work/app2"))) == {"everywhere"}
    assert set(contents(store.list(agent="codex", cwd="/work/app/src"))) == {
        "everywhere",
        "codex only",
        "app only",
    }


def test_list_by_action_hides_other_projects_and_agents_rules(store: Store) -> None:
    # `mentectl rule list --action X` from a project: the same rules the hook would
    # hand over there, never another project's or another agent's (mutation testing
    # found the action path of `list` could drop the place and no test noticed).
    store.store_many(
        [
            rule("git-commit", "everywhere", T0 + 1),
            rule("git-commit", "app only", T0 + 2, project="/work/app"),
            rule("git-commit", "codex only", T0 + 3, agent="codex"),
            StoreItem(
                content="app, team-tagged",
                memory_type=MemoryType.PROCEDURAL,
                tags=("trigger:git-commit", "team"),
                created_at=T0 + 4,
                project="/work/app",
            ),
        ]
    )

    assert contents(store.list(action="git-commit", agent="claude-code", cwd="/work/app2")) == [
        "everywhere"
    ]
    assert contents(store.list(action="git-commit", agent="codex", cwd="/work/app/src")) == [
        "app, team-tagged",
        "codex only",
        "app only",
        "everywhere",
    ]
    # With a tag or a type as well, the same places, and only what has the tag.
    assert contents(store.list(action="git-commit", tag="team", cwd="/work/app")) == [
        "app, team-tagged"
    ]
    assert store.list(action="git-commit", tag="team", cwd="/work/other") == []
    procedural = MemoryType.PROCEDURAL
    assert contents(store.list(action="git-commit", memory_type=procedural, cwd="/work/app")) == [
        "app, team-tagged"
    ]
    assert store.list(action="git-commit", memory_type=procedural, cwd="/elsewhere") == []
    assert store.list(action="git-commit", limit=0) == []


def test_list_also_shows_a_projects_rules_only_where_they_apply(store: Store) -> None:
    # `also`: a project's committed rules, listed with yours under the same filters.
    store.store_many([rule("git-commit", "mine, old", T0 + 1), rule("git-commit", "mine", T0 + 3)])
    team = Memory(
        id="7" * 26,
        content="team rule",
        created_at=T0 + 2,
        tags=("trigger:git-commit",),
        project="/work/app",
    )

    assert contents(store.list(action="git-commit", cwd="/work/app", also=[team])) == [
        "mine",
        "team rule",
        "mine, old",
    ]
    assert contents(store.list(action="git-commit", cwd="/work/app", also=[team], limit=2)) == [
        "mine",
        "team rule",
    ]
    assert contents(store.list(action="git-commit", cwd="/work/app2", also=[team])) == [
        "mine",
        "mine, old",
    ]
    assert contents(store.list(action="pr-create", cwd="/work/app", also=[team])) == []


def test_a_capped_listing_is_the_newest_even_within_one_millisecond(store: Store) -> None:
    # Ids are random within a millisecond: the walk must finish the millisecond of
    # its last match before it cuts, or `rule list --limit k` misses a newer one.
    store.store_many(StoreItem(content=f"memory {n}", created_at=T0 + n * 1e-5) for n in range(24))
    everything = contents(store.list())
    assert everything == [f"memory {n}" for n in reversed(range(24))]
    for k in (1, 2, 3, 5, 8):
        assert contents(store.list(limit=k)) == everything[:k]


# ------------------------------------------------------------ supersession


def test_a_superseded_rule_stops_firing_and_its_history_is_whole(store: Store) -> None:
    first = store.store(
        "squash-merge PRs",
        memory_type=MemoryType.PROCEDURAL,
        tags=["trigger:pr-merge", "git"],
        agent="codex",
        project="/work/app",
    )
    second, retired = store.supersede(first.id, "rebase-merge PRs")
    third, _ = store.supersede(second.id, "rebase-merge PRs, delete the branch")

    recalled = store.recall_for_action("pr-merge", agent="codex", cwd="/work/app")
    assert contents(recalled) == ["rebase-merge PRs, delete the branch"]
    # The new version inherits tags, type and scope.
    assert (third.tags, third.memory_type, third.agent, third.project) == (
        first.tags,
        first.memory_type,
        first.agent,
        first.project,
    )
    assert retired.superseded_by == second.id
    assert retired.valid_until is not None
    assert third.supersedes == second.id
    for member in (first, second, third):
        assert [m.id for m in store.history(member.id)] == [first.id, second.id, third.id]
    assert store.get(first.id).superseded_by == second.id
    assert store.stats().live_rules == 1


def test_superseding_a_superseded_rule_names_the_current_one(store: Store) -> None:
    first = store.store("squash-merge PRs", tags=["trigger:pr-merge"])
    second, _ = store.supersede(first.id, "rebase-merge PRs")
    third, _ = store.supersede(second.id, "merge commits")

    with pytest.raises(ConflictError, match=third.id):
        store.supersede(first.id, "fast-forward only")
    assert contents(store.recall_for_action("pr-merge")) == ["merge commits"]


def test_supersede_with_new_tags_and_scope(store: Store) -> None:
    old = store.store("run the linter before committing", tags=["trigger:git-commit"])

    new, _ = store.supersede(
        old.id, "run the linter before pushing", tags=["trigger:Git-Push"], agent="codex"
    )

    assert new.tags == ("trigger:git-push",)
    assert store.recall_for_action("git-commit") == []
    assert store.recall_for_action("git-push", agent="codex") == [new]
    assert store.recall_for_action("git-push", agent="claude-code") == []


def test_supersede_refuses_bad_input_and_unknown_ids(store: Store) -> None:
    old = store.store("one line", tags=["trigger:git-commit"])

    with pytest.raises(InvalidInputError, match="empty"):
        store.supersede(old.id, "  ")
    with pytest.raises(NotFoundError, match="01ARZ3NDEKTSV4RRFFQ69G5FAV"):
        store.supersede("01ARZ3NDEKTSV4RRFFQ69G5FAV", "x")
    assert store.recall_for_action("git-commit") == [old]  # nothing changed


# ------------------------------------------------------------------ forget


def test_forget_removes_the_record_and_its_index_entries(store: Store) -> None:
    kept = store.store("kept", tags=["trigger:git-commit"])
    gone = store.store("gone", tags=["trigger:git-commit", "trigger:git-push"])

    assert store.forget(short_handle(gone.id)) == gone

    assert store.recall_for_action("git-commit") == [kept]
    assert store.recall_for_action("git-push") == []
    with pytest.raises(NotFoundError, match=gone.id):
        store.get(gone.id)
    with pytest.raises(NotFoundError):
        store.get(short_handle(gone.id))
    with pytest.raises(NotFoundError):
        store.forget(gone.id)
    assert (store.stats().memories, store.stats().live_rules) == (1, 1)
    assert store.stats().actions_with_rules == 1


def test_forgetting_inside_a_chain_keeps_the_rest_linked(store: Store) -> None:
    first = store.store("v1", tags=["trigger:git-commit"])
    second, _ = store.supersede(first.id, "v2")
    third, _ = store.supersede(second.id, "v3")

    store.forget(second.id)
    assert contents(store.history(first.id)) == ["v1", "v3"]
    assert contents(store.history(third.id)) == ["v1", "v3"]

    store.forget(third.id)  # the current version: the old one must not come back
    assert store.recall_for_action("git-commit") == []
    assert contents(store.history(first.id)) == ["v1"]
    with pytest.raises(ConflictError, match="forgotten"):
        store.supersede(first.id, "v4")


# ------------------------------------------------------------------ handles


def test_short_handles_resolve(store: Store) -> None:
    memory = store.store("one line", tags=["trigger:git-commit"])
    handle = short_handle(memory.id)

    assert handle == memory.id[-8:].lower()
    for name in (memory.id, memory.id.lower(), handle, handle.upper(), memory.id[-6:]):
        assert store.get(name) == memory
    with pytest.raises(InvalidInputError, match="at least 6"):
        store.get(memory.id[-5:])
    with pytest.raises(NotFoundError, match="ZZZZZZZZ"):
        store.get("ZZZZZZZZ")


def test_an_ambiguous_handle_lists_the_candidates(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    first_id = "01H" + "Z" * 17 + "ABC123"
    second_id = "01H" + "Y" * 17 + "ABC123"
    crafted = iter([first_id, second_id])
    monkeypatch.setattr(store_module, "new_id", lambda _now=None: next(crafted))
    first = store.store("one")
    second = store.store("two")

    with pytest.raises(InvalidInputError, match="several") as ambiguous:
        store.get("abc123")
    assert first_id in str(ambiguous.value)
    assert second_id in str(ambiguous.value)
    assert store.get("zabc123") == first
    assert store.get("YABC123") == second


# ----------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": ""}, "content cannot be empty"),
        ({"content": " \n\t "}, "content cannot be empty"),
        ({"content": "x" * (MAX_CONTENT_BYTES + 1)}, f"limit is {MAX_CONTENT_BYTES} bytes"),
        ({"content": "é" * (MAX_CONTENT_BYTES // 2 + 1)}, "limit is"),  # bytes, not characters
        ({"tags": ["trigger:"]}, "action name cannot be empty"),
        ({"tags": ["trigger:   "]}, "action name cannot be empty"),
        ({"tags": ["trigger:git commit"]}, "whitespace or control characters"),
        ({"tags": ["trigger:git\x07commit"]}, "whitespace or control characters"),
        ({"tags": ["trigger:" + "a" * 65]}, "the limit is 64"),
        ({"tags": [""]}, "tag cannot be empty"),
        ({"tags": "trigger:git-commit"}, "list of strings"),
        ({"memory_type": "opinion"}, "use one of: episodic, semantic"),
        ({"agent": "  "}, "agent name cannot be blank"),
        ({"agent": "a\nb"}, "control characters"),
        ({"project": "work/app"}, "must be an absolute path"),
        ({"project": ""}, "cannot be blank"),
    ],
)
def test_invalid_input_is_refused_with_a_clear_message(
    store: Store, kwargs: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"content": "a rule"} | kwargs
    content = arguments.pop("content")

    with pytest.raises(InvalidInputError, match=message):
        store.store(content, **arguments)
    assert store.stats().memories == 0


def test_store_many_is_all_or_nothing_and_names_the_bad_item(store: Store) -> None:
    items = [StoreItem(content="fine"), StoreItem(content="also fine"), StoreItem(content=" ")]

    with pytest.raises(InvalidInputError, match="item 2: memory content cannot be empty"):
        store.store_many(items)
    assert store.stats().memories == 0


# -------------------------------------------------------------- list, stats


def test_list_filters_and_orders_newest_first(store: Store) -> None:
    store.store_many(
        [
            StoreItem(content="fact", tags=("team",), created_at=T0 + 1),
            StoreItem(
                content="rule v1",
                memory_type=MemoryType.PROCEDURAL,
                tags=("trigger:git-commit", "team"),
                created_at=T0 + 2,
            ),
            StoreItem(content="episode", memory_type=MemoryType.EPISODIC, created_at=T0 + 3),
            rule("pr-create", "pr rule", T0 + 4),
        ]
    )
    old = store.list(action="git-commit")[0]
    store.supersede(old.id, "rule v2")

    assert contents(store.list()) == ["rule v2", "pr rule", "episode", "fact"]
    assert contents(store.list(include_superseded=True, limit=3)) == [
        "rule v2",
        "pr rule",
        "episode",
    ]
    assert contents(store.list(tag="team")) == ["rule v2", "fact"]
    assert contents(store.list(tag="TRIGGER:Git-Commit", include_superseded=True)) == [
        "rule v2",
        "rule v1",
    ]
    assert contents(store.list(memory_type=MemoryType.EPISODIC)) == ["episode"]
    assert contents(store.list(rules_only=True)) == ["rule v2", "pr rule"]
    assert contents(store.list(action="Git-Commit")) == ["rule v2"]
    assert contents(store.list(action="git-commit", include_superseded=True)) == [
        "rule v2",
        "rule v1",
    ]
    assert store.list(limit=0) == []
    assert store.list(action="not an action") == []


def test_list_with_an_action_is_recall_for_action(store: Store) -> None:
    store.store_many(rule("git-commit", f"rule {n}", T0 + n % 4) for n in range(12))
    store.store_many(rule("git-commit", f"codex {n}", T0 + n, agent="codex") for n in range(3))

    for agent in (None, "codex", "claude-code"):
        for k in (1, 5, 100):
            assert store.list(action="git-commit", agent=agent, limit=k) == (
                store.recall_for_action("git-commit", agent=agent, k=k)
            )
    assert len(store.list(action="git-commit")) == 15  # limit None: all


def test_stats_count_rules_once_and_follow_every_write(store: Store) -> None:
    two_actions = store.store("x", tags=["trigger:git-commit", "trigger:git-push"])
    store.store("y", tags=["trigger:git-commit"])
    store.store("not a rule")

    stats = store.stats()
    assert (stats.memories, stats.live_rules, stats.actions_with_rules) == (3, 2, 2)
    assert 0 < stats.db_bytes <= stats.map_bytes

    store.supersede(two_actions.id, "x2", tags=["trigger:git-commit"])
    stats = store.stats()
    assert (stats.memories, stats.live_rules, stats.actions_with_rules) == (4, 2, 1)


# ------------------------------------------------- durability, files, growth


def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    first = Store(tmp_path / "data")
    rule_v1 = first.store("one line", tags=["trigger:git-commit"], agent="codex")
    rule_v2, _ = first.supersede(rule_v1.id, "one line, no emoji")
    first.close()

    again = Store(tmp_path / "data")
    try:
        assert again.recall_for_action("git-commit", agent="codex") == [rule_v2]
        assert [m.id for m in again.history(rule_v1.id)] == [rule_v1.id, rule_v2.id]
        assert again.stats().live_rules == 1
    finally:
        again.close()


def test_writes_are_synced_and_survive_a_killed_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from mented.store import Store\n"
        "store = Store(Path(sys.argv[1]))\n"
        "flags = store._env.flags()\n"
        "assert flags['sync'] and flags['metasync'], flags\n"
        "memory = store.store('survives', tags=['trigger:git-commit'])\n"
        "store.recall_for_action('git-commit')\n"
        "print(memory.id, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(data)], capture_output=True, check=False, timeout=60
    )
    assert done.returncode == -9, done.stderr.decode()
    memory_id = done.stdout.decode().strip()

    reopened = Store(data)
    try:
        assert contents(reopened.recall_for_action("git-commit")) == ["survives"]
        assert reopened.get(memory_id).content == "survives"
    finally:
        reopened.close()


def test_the_map_grows_instead_of_filling_up(tmp_path: Path) -> None:
    tiny = 64 * 1024
    db = Store(tmp_path / "data", map_size=tiny, sync=False)
    try:
        for n in range(300):  # many writes
            db.store(f"{n:04} " + "r" * 4000, tags=["trigger:git-commit"])
        big = [StoreItem(content="b" * (MAX_CONTENT_BYTES - 1)) for _ in range(100)]
        db.store_many(big)  # one large write: ~6.5 MB in one transaction
        stats = db.stats()
        assert stats.map_bytes >= 8 * 1024 * 1024 > tiny
        assert stats.memories == 400
        assert len(db.recall_for_action("git-commit", k=1000)) == 300
    finally:
        db.close()

    reopened = Store(tmp_path / "data", map_size=tiny, sync=False)
    try:
        reopened.store("one more", tags=["trigger:git-commit"])
        assert reopened.stats().memories == 401
    finally:
        reopened.close()


def test_lookups_run_while_another_thread_grows_the_map(tmp_path: Path) -> None:
    db = Store(tmp_path / "data", map_size=64 * 1024, sync=False)
    first = db.store("seed", tags=["trigger:git-commit"])
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for n in range(200):
                db.store(f"{n} " + "w" * 8000, tags=["trigger:git-push"])
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    lookups = 0
    while writer.is_alive() or lookups == 0:
        assert db.recall_for_action("git-commit") == [first]
        lookups += 1
    writer.join()
    try:
        assert errors == []
        assert db.stats().map_bytes > 64 * 1024
        assert len(db.recall_for_action("git-push", k=500)) == 200
    finally:
        db.close()


def test_a_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Store(data).close()
    env = lmdb.open(str(data), max_dbs=8)
    with env.begin(write=True) as txn:
        txn.put(b"schema_version", str(SCHEMA_VERSION + 1).encode(), db=env.open_db(b"meta", txn))
    env.close()
    before = file_digest(data / "data.mdb")

    with pytest.raises(StoreOpenError) as refused:
        Store(data)

    message = str(refused.value)
    assert str(data) in message
    assert f"schema {SCHEMA_VERSION + 1}" in message
    assert f"reads up to {SCHEMA_VERSION}" in message
    assert "upgrade mented" in message
    assert file_digest(data / "data.mdb") == before


def test_a_file_that_is_not_lmdb_is_refused_and_left_untouched(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    foreign = data / "data.mdb"
    foreign.write_bytes(b"my precious notes, not a database\n" * 500)
    before = file_digest(foreign)

    with pytest.raises(StoreOpenError, match="not an LMDB database file") as refused:
        Store(data)

    assert str(foreign) in str(refused.value)
    assert file_digest(foreign) == before
    assert sorted(path.name for path in data.iterdir()) == ["data.mdb"]  # not even a lock file


def test_an_lmdb_environment_of_another_program_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = lmdb.open(str(data))
    with env.begin(write=True) as txn:
        txn.put(b"someone", b"else's data")
    env.close()
    before = file_digest(data / "data.mdb")

    with pytest.raises(StoreOpenError, match="not a mented store"):
        Store(data)
    assert file_digest(data / "data.mdb") == before


def test_a_data_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("oops")

    with pytest.raises(StoreOpenError, match="not a directory"):
        Store(data)
    assert data.read_text() == "oops"


def test_a_store_open_twice_in_one_process_is_refused(store: Store) -> None:
    with pytest.raises(StoreOpenError, match="already open"):
        Store(store.path)
    assert store.recall_for_action("git-commit") == []  # the first one still works


def test_a_new_data_dir_is_private(tmp_path: Path) -> None:
    data = tmp_path / "nested" / "data"
    Store(data).close()

    assert data.stat().st_mode & 0o777 == 0o700
    assert (data / "data.mdb").stat().st_mode & 0o077 == 0


def test_a_closed_store_says_so(tmp_path: Path) -> None:
    db = Store(tmp_path / "data")
    db.close()
    db.close()  # idempotent

    with pytest.raises(StoreError, match="closed"):
        db.recall_for_action("git-commit")
    with pytest.raises(StoreError, match="closed"):
        db.store("x")


# ----------------------------------------------------------------- failures


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed store of 3,000 rules (about 2.6 MB), to copy and damage."""
    data = tmp_path_factory.mktemp("real") / "data"
    db = Store(data, sync=False)
    db.store_many(rule("git-commit", f"{n:05} " + "r" * 200, T0 + n) for n in range(3000))
    db.close()
    return data


def _open_in_child(data: Path) -> subprocess.CompletedProcess[str]:
    """Open the store and look up a rule in another process: a SIGBUS must not end the tests."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from mented.store import Store, StoreOpenError\n"
        "try:\n"
        "    store = Store(Path(sys.argv[1]))\n"
        "except StoreOpenError as exc:\n"
        "    sys.exit(f'refused: {exc}')\n"
        "print(len(store.recall_for_action('git-commit', k=10000)))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, str(data)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize(
    "keep",
    [
        pytest.param(lambda size: 100, id="inside-the-first-header"),
        pytest.param(lambda size: 4096, id="one-header-page"),
        pytest.param(lambda size: 8192, id="headers-only"),
        pytest.param(lambda size: size // 2, id="half"),
        pytest.param(lambda size: size - 4096, id="last-page-missing"),
        pytest.param(lambda size: size - 1, id="one-byte-short"),
    ],
)
def test_a_data_file_cut_short_is_refused_at_open_and_left_untouched(
    real_store: Path, tmp_path: Path, keep: Callable[[int], int]
) -> None:
    data = tmp_path / "data"
    shutil.copytree(real_store, data)
    data_file = data / "data.mdb"
    os.truncate(data_file, keep(data_file.stat().st_size))
    before = file_digest(data_file)

    opened = _open_in_child(data)

    assert opened.returncode == 1, f"exit {opened.returncode}: {opened.stderr}"
    message = opened.stderr
    assert message.startswith(f"refused: the store file {data_file} is ")
    assert "cut short" in message or "header is unreadable" in message
    assert f"mv {data_file} {data_file}.damaged" in message
    assert "from a backup" in message
    assert file_digest(data_file) == before


def test_a_whole_copy_of_the_same_store_opens(real_store: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(real_store, data)

    opened = _open_in_child(data)

    assert (opened.returncode, opened.stdout.strip()) == (0, "3000"), opened.stderr


_CUT_SHORT_WHILE_OPEN = r"""
import os, sys
from pathlib import Path
from mented.store import Store, StoreError, StoreItem
store = Store(Path(sys.argv[1]), sync=False)
store.store_many(StoreItem(content=f"{n} " + "r" * 500) for n in range(500))
os.truncate(store.data_file, 16384)  # by another process, a restore gone wrong...
# Only calls that check the file first: a lookup would touch a page that is gone.
for call in (lambda: store.store("one more"), store.stats):
    try:
        call()
    except StoreError as exc:
        print(type(exc).__name__, exc)
print(store.failure is not None)
store.close()
"""


def test_a_data_file_cut_short_while_open_stops_the_store(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CUT_SHORT_WHILE_OPEN, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )

    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    write, status, dead = done.stdout.splitlines()
    assert write.startswith(f"StoreFailedError the store file {tmp_path / 'data'}/data.mdb")
    assert "changed under mented: it has 16384 bytes but its header says" in write
    assert status.startswith("StoreFailedError")
    assert dead == "True"


def test_a_damaged_record_is_reported_as_damage_and_the_others_still_read(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    db = Store(data, sync=False)
    victim = db.store("the damaged one", tags=["trigger:git-push"])
    other = db.store("an intact one", tags=["trigger:git-commit"])
    db.close()
    raw = (data / "data.mdb").read_bytes()
    record = store_module._encoder.encode(victim)
    assert record in raw  # (in an older page too: LMDB copies a page on write)
    # 0xC1 is the one byte msgpack never uses: the record no longer decodes.
    (data / "data.mdb").write_bytes(raw.replace(record, b"\xc1" + record[1:]))

    db = Store(data, sync=False)
    try:
        with pytest.raises(StoreDamagedError) as damaged:
            db.get(victim.id)
        assert f"the store file {data / 'data.mdb'} is damaged" in str(damaged.value)
        assert "Stop mented, then restore" in str(damaged.value)
        assert db.get(other.id) == other
        assert db.recall_for_action("git-commit") == [other]
        assert db.failure is None  # damage is not a dead store
    finally:
        db.close()


_FILL_TO_THE_LIMIT = r"""
import resource, sys
from pathlib import Path
from mented.store import Store, StoreError
store = Store(Path(sys.argv[1]), map_size=1 << 20, sync=False)
stored = [store.store("seed", tags=["trigger:git-commit"]).id]
with open("/proc/self/status") as status:
    vm = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize"))
# Room for the 1 MiB map to double a few times, not for it to reach 64 MiB.
resource.setrlimit(resource.RLIMIT_AS, (vm + (24 << 20), resource.RLIM_INFINITY))
try:
    for n in range(100_000):
        stored.append(store.store(f"{n} " + "x" * 2000).id)
except StoreError as exc:
    print(type(exc).__name__, exc, sep="\n")
calls = (store.stats, lambda: store.recall_for_action("git-commit"), lambda: store.get(stored[0]))
for call in calls:
    try:
        call()
    except StoreError as exc:
        print(type(exc).__name__)
print(store.failure is not None)
store.close()
print(len(stored))
"""


def test_a_map_that_cannot_grow_stops_the_store_with_a_clear_error(tmp_path: Path) -> None:
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the address space used from /proc")
    data = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "-c", _FILL_TO_THE_LIMIT, str(data)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    kind, message, *after, dead, acknowledged = done.stdout.splitlines()
    assert kind == "StoreFailedError"
    assert f"cannot use the store at {data} any more" in message
    assert "memory map could not grow" in message
    assert "ulimit -v" in message
    assert after == ["StoreFailedError"] * 3  # not "closed/deleted/dropped object"
    assert dead == "True"

    reopened = Store(data, sync=False)  # without the limit: every acknowledged write is there
    try:
        assert reopened.stats().memories == int(acknowledged)
    finally:
        reopened.close()


def test_a_full_disk_refuses_the_write_and_loses_nothing(small_tmpfs: Path) -> None:
    db = Store(small_tmpfs / "data")
    acknowledged = []
    with pytest.raises(StoreFullError) as full:
        for n in range(10_000):
            memory = db.store(f"{n} " + "f" * 3000, tags=["trigger:git-commit"])
            acknowledged.append(memory)
    assert 100 < len(acknowledged) < 10_000
    assert str(full.value).startswith(
        f"cannot write the store at {small_tmpfs / 'data'}: no space left on device."
    )
    assert "Nothing was written and nothing is lost" in str(full.value)
    # Reads go on. A forget may or may not fit in the pages LMDB has free (it also
    # keeps what travels of the forget: mented/store.py, `forgotten`); refused, it
    # is refused the same way, and either way nothing else is lost.
    assert db.failure is None
    assert len(db.recall_for_action("git-commit", k=20_000)) == len(acknowledged)
    assert db.get(acknowledged[-1].id) == acknowledged[-1]
    forgot = 1
    try:
        db.forget(acknowledged[0].id)
    except StoreFullError:
        forgot = 0
    assert db.failure is None
    db.close()

    reopened = Store(small_tmpfs / "data")
    try:
        assert reopened.stats().memories == len(acknowledged) - forgot
    finally:
        reopened.close()


class _CommitFails:
    """An environment whose write transactions fail at commit with `code` (an errno)."""

    def __init__(self, env: lmdb.Environment, code: int) -> None:
        self._env = env
        self._code = code

    def begin(self, *, write: bool = False) -> Any:
        txn = self._env.begin(write=write)
        return _FailingCommit(txn, self._code) if write else txn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


class _FailingCommit:
    def __init__(self, txn: lmdb.Transaction[bytes], code: int) -> None:
        self._txn = txn
        self._code = code

    def __enter__(self) -> lmdb.Transaction[bytes]:
        return self._txn

    def __exit__(self, *exc_info: object) -> None:
        self._txn.abort()
        error = lmdb.Error(f"mdb_txn_commit: {os.strerror(self._code)}")
        error.code = self._code  # type: ignore[attr-defined]  # as py-lmdb sets it
        raise error


@pytest.mark.parametrize(
    ("nearly_full_bytes", "expected"),
    [
        pytest.param(1 << 62, StoreFullError, id="disk-full"),
        pytest.param(0, StoreFailedError, id="disk-failing"),
    ],
)
def test_an_io_error_at_commit_is_a_full_disk_only_when_the_disk_is_full(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    nearly_full_bytes: int,
    expected: type[StoreError],
) -> None:
    # LMDB reports a write cut short by a full disk as EIO, like a failing disk.
    kept = store.store("kept", tags=["trigger:git-commit"])
    monkeypatch.setattr(store_module, "_NEARLY_FULL_BYTES", nearly_full_bytes)
    real_env = store._env
    store._env = _CommitFails(real_env, errno.EIO)  # type: ignore[assignment]

    with pytest.raises(expected):
        store.store("lost", tags=["trigger:git-commit"])

    store._env = real_env
    if expected is StoreFullError:
        assert store.failure is None
        assert store.recall_for_action("git-commit") == [kept]
    else:
        assert store.failure is not None
        assert "Input/output error" in store.failure
        with pytest.raises(StoreFailedError):
            store.recall_for_action("git-commit")


# ---------------------------------------------------------------- at scale


class _CountingCursor:
    """Counts every cursor move; any other cursor method fails the test."""

    def __init__(self, cursor: lmdb.Cursor[bytes], counts: dict[str, int]) -> None:
        self._cursor = cursor
        self._counts = counts

    def set_range(self, key: bytes) -> bool:
        self._counts["moves"] += 1
        return self._cursor.set_range(key)

    def next(self) -> bool:
        self._counts["moves"] += 1
        return self._cursor.next()

    def key(self) -> bytes:
        return self._cursor.key()

    def value(self) -> bytes:
        return self._cursor.value()


class _CountingTxn:
    """Counts record reads and hands out counting cursors."""

    def __init__(self, txn: lmdb.Transaction[bytes], counts: dict[str, int]) -> None:
        self._txn = txn
        self._counts = counts

    def get(self, key: bytes, default: bytes | None = None, db: Any = None) -> bytes | None:
        self._counts["gets"] += 1
        return self._txn.get(key, default, db=db)

    def cursor(self, db: Any = None) -> _CountingCursor:
        return _CountingCursor(self._txn.cursor(db), self._counts)

    def abort(self) -> None:
        self._txn.abort()


class _CountingEnv:
    def __init__(self, env: lmdb.Environment) -> None:
        self._env = env
        self.counts = {"moves": 0, "gets": 0, "write_txns": 0}

    def begin(self, *, write: bool = False) -> _CountingTxn:
        if write:
            self.counts["write_txns"] += 1
        return _CountingTxn(self._env.begin(write=write), self.counts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


@pytest.fixture(scope="module")
def crowded_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """5 rules for git-commit among 100,000 other memories, many of them near it."""
    db = Store(tmp_path_factory.mktemp("crowded") / "data", sync=False)
    neighbours = ["git", "git-commi", "git-commit-amend", "git-commit0", "git-commiu", "pr-create"]
    others: list[StoreItem] = []
    for n in range(100_000):
        created = T0 - 50_000 + n  # older and newer than the target rules
        if n % 5 == 0:
            others.append(StoreItem(content=f"note {n}", tags=("git-commit",), created_at=created))
        else:
            action = neighbours[n % len(neighbours)]
            others.append(rule(action, f"{action} {n}", created))
    db.store_many(others)
    db.store_many(
        [
            rule("git-commit", "oldest, for all", T0 + 1),
            rule("git-commit", "claude only", T0 + 2, agent="claude-code"),
            rule("git-commit", "codex only", T0 + 3, agent="codex"),
            rule("git-commit", "newest, for all", T0 + 4),
            rule("git-commit", "elsewhere", T0 + 5, project="/work/other"),
        ]
    )
    yield db
    db.close()


def test_a_lookup_among_100000_memories_reads_only_its_action_range(
    crowded_store: Store,
) -> None:
    assert crowded_store.stats().memories == 100_005
    real_env = crowded_store._env
    counting = _CountingEnv(real_env)
    crowded_store._env = counting  # type: ignore[assignment]
    try:
        recalled = crowded_store.recall_for_action(
            "git-commit", agent="claude-code", cwd="/work/app", k=6
        )
        seen_all = crowded_store.recall_for_action("git-commit", k=6)
    finally:
        crowded_store._env = real_env

    assert contents(recalled) == ["newest, for all", "claude only", "oldest, for all"]
    assert contents(seen_all) == [
        "elsewhere",
        "newest, for all",
        "codex only",
        "claude only",
        "oldest, for all",
    ]
    # Two lookups over an index range of 5 rules: per lookup one set_range and at
    # most 5 next() calls, and one record read per rule in the range.
    assert counting.counts["moves"] <= 2 * (1 + 5)
    assert counting.counts["gets"] == 2 * 5
    assert counting.counts["write_txns"] == 0


def test_a_capped_lookup_stops_early(crowded_store: Store) -> None:
    real_env = crowded_store._env
    counting = _CountingEnv(real_env)
    crowded_store._env = counting  # type: ignore[assignment]
    try:
        recalled = crowded_store.recall_for_action("git-commit", k=1)
    finally:
        crowded_store._env = real_env

    assert contents(recalled) == ["elsewhere"]
    assert (counting.counts["moves"], counting.counts["gets"]) == (1, 1)
