"""The store's records, their indexes and the lookups on them: recall, handles, listings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb
import pytest

import mented.store.validation as validation_module
from mented.memory import InvalidInputError, Memory, MemoryType, origin_of, short_handle
from mented.store import NotFoundError, Store, StoreItem
from tests.store_helpers import T0, contents, rule


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    # sync=False only to keep the suite fast; durability has its own tests below.
    db = Store(tmp_path / "data", sync=False)
    yield db
    db.close()


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
    monkeypatch.setattr(validation_module, "new_id", lambda _now=None: next(crafted))
    first = store.store("one")
    second = store.store("two")

    with pytest.raises(InvalidInputError, match="several") as ambiguous:
        store.get("abc123")
    assert first_id in str(ambiguous.value)
    assert second_id in str(ambiguous.value)
    assert store.get("zabc123") == first
    assert store.get("YABC123") == second


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
    """5 rules for git-commit among 20,000 other memories, many of them near it."""
    db = Store(tmp_path_factory.mktemp("crowded") / "data", sync=False)
    neighbours = ["git", "git-commi", "git-commit-amend", "git-commit0", "git-commiu", "pr-create"]
    others: list[StoreItem] = []
    for n in range(20_000):
        created = T0 - 10_000 + n  # older and newer than the target rules
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


def test_a_lookup_among_20000_memories_reads_only_its_action_range(
    crowded_store: Store,
) -> None:
    assert crowded_store.stats().memories == 20_005
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


# --------------------------------------------------- where a memory came from


def from_elsewhere(text: str, memory_id: str, *, supersedes: str | None = None) -> Memory:
    """A record as a sync brings it from another machine."""
    return Memory(
        id=memory_id,
        content=text,
        tags=("trigger:git-commit",),
        created_at=T0,
        supersedes=supersedes,
    )


def origins(store: Store) -> dict[str, str]:
    rules = store.list(include_superseded=True)
    synced = store.synced_among(rules)
    return {memory.content: origin_of(memory, synced) for memory in rules}


def test_a_record_that_forges_the_id_of_your_rule_leaves_it_yours(store: Store) -> None:
    mine = store.store("single line", tags=["trigger:git-commit"])
    forged = from_elsewhere("anything goes", mine.id)
    summary = store.import_records([forged], synced=True)
    assert summary.added == 0
    assert store.get(mine.id) == mine
    assert origins(store) == {"single line": "yours"}
    # A file import (`mentectl import`) is not a sync: what it adds is taken for yours.
    store.import_records([from_elsewhere("from a file", "01JDQ8Z5K3M4N5P6Q7R8S9T0A1")])
    assert origins(store) == {"single line": "yours", "from a file": "yours"}


@pytest.mark.parametrize("junk_entries", [3, 300])  # fewer, then more, than the rules listed
def test_junk_in_the_synced_index_neither_breaks_listing_nor_hides_your_rules(
    store: Store, junk_entries: int
) -> None:
    mine = [store.store(f"rule {n}", tags=["trigger:git-commit"]) for n in range(20)]
    came = from_elsewhere("from the desk", "01JDQ8Z5K3M4N5P6Q7R8S9T0A1")
    store.import_records([came], synced=True)
    gone = store.store("forgotten since", tags=["trigger:git-commit"])
    store.forget(gone.id)

    def junk(txn: lmdb.Transaction[bytes]) -> None:
        txn.put(gone.id.encode(), b"", db=store._synced)  # an id whose record is gone
        txn.put(b"\xff\xfe not an id", b"\x00" * 4096, db=store._synced)
        txn.put(b"x" * 500, b"", db=store._synced)
        for n in range(junk_entries - 3):
            txn.put(f"01JDQ8Z5K3M4N5P6Q7R8S{n:05d}".encode(), b"", db=store._synced)

    store._write(junk)
    listed = store.list(rules_only=True)
    assert len(listed) == len(mine) + 1  # nothing hidden
    assert store.synced_among(listed) == [came.id]
    assert origins(store) == {**{m.content: "yours" for m in mine}, "from the desk": "synced"}
    assert store.synced_among([]) == []


def test_a_store_older_than_the_synced_index_takes_every_memory_for_yours(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    old = Store(data, sync=False)
    old.store("single line", tags=["trigger:git-commit"])
    old.close()
    env = lmdb.open(str(data), max_dbs=12)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"synced", txn=txn), delete=True)  # as an older mented left it
    env.close()
    reopened = Store(data, sync=False)
    try:
        assert origins(reopened) == {"single line": "yours"}
        came = from_elsewhere("from the desk", "01JDQ8Z5K3M4N5P6Q7R8S9T0A1")
        reopened.import_records([came], synced=True)
        assert origins(reopened) == {"single line": "yours", "from the desk": "synced"}
    finally:
        reopened.close()
