"""The recall index: BM25 ranking, visibility, supersession, consistency with the store."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mented.memory import InvalidInputError
from mented.recall import RecallIndex, query_words
from mented.store import Store


@pytest.fixture
def index(store: Store) -> Iterator[RecallIndex]:
    opened = RecallIndex(store.path / "recall", store)
    try:
        yield opened
    finally:
        opened.close()


def found(index: RecallIndex, query: str, **caller: str | int) -> list[str]:
    return [hit.memory.content for hit in index.search(query, **caller)]  # type: ignore[arg-type]


def test_bm25_ranks_rarer_and_more_words_higher(store: Store, index: RecallIndex) -> None:
    store.store("The staging database is stg-db-2, read-only for us", tags=["staging"])
    store.store("The production database is prod-db-1")
    store.store("Database backups run nightly")
    for n in range(20):
        store.store(f"note {n} about the database")
    index.catch_up()
    results = found(index, "staging databases", k=3)
    # "staging" is rare and a tag; "databases" matches "database" by its stem.
    assert results[0] == "The staging database is stg-db-2, read-only for us"
    assert len(results) == 3
    scores = [hit.score for hit in index.search("staging database", k=5)]
    assert scores == sorted(scores, reverse=True)
    assert found(index, "kubernetes") == []


def test_rules_are_not_facts(store: Store, index: RecallIndex) -> None:
    store.store("commit messages: one line about the database", tags=["trigger:git-commit"])
    store.store("answer about the database in British English", tags=["pinned"])
    store.store("the database is postgres")
    index.catch_up()
    assert found(index, "database") == ["the database is postgres"]


def test_visibility_is_the_stores(store: Store, index: RecallIndex) -> None:
    store.store("deploys happen on tuesdays", project="/work/app")
    store.store("codex deploys with make", agent="codex")
    store.store("deploys need a ticket")
    index.catch_up()
    assert sorted(found(index, "deploys", cwd="/work/app/src", agent="claude-code")) == [
        "deploys happen on tuesdays",
        "deploys need a ticket",
    ]
    assert sorted(found(index, "deploys", cwd="/work/app2", agent="codex")) == [
        "codex deploys with make",
        "deploys need a ticket",
    ]
    assert len(found(index, "deploys")) == 3  # no caller named: no filter


def test_k_visible_facts_even_when_most_matches_are_hidden(
    store: Store, index: RecallIndex
) -> None:
    for n in range(200):
        store.store(f"secret deploy note {n}", project="/work/other")
    store.store("deploy from main only", project="/work/app")
    index.catch_up()
    assert found(index, "deploy note", cwd="/work/app", k=3) == ["deploy from main only"]


def test_k_distinct_hits_come_back_when_most_matches_are_hidden(
    store: Store, index: RecallIndex
) -> None:
    # Ranked above the caller's own (shorter texts, the same words), the hidden facts
    # filled every page; paging by offset could then repeat one hit and miss another.
    for n in range(300):
        store.store(f"deploy note {n}", project="/work/other", agent="codex")
    mine = [f"deploy note for the app, number {n}, with some more words about it" for n in range(6)]
    for content in mine:
        store.store(content, project="/work/app")
    index.catch_up()
    results = found(index, "deploy note", cwd="/work/app/src", agent="claude-code", k=5)
    assert len(results) == 5
    assert len(set(results)) == 5, results
    assert set(results) <= set(mine)
    # The other agent sees its own facts from anywhere they are scoped, and mine not here.
    theirs = found(index, "deploy note", cwd="/work/other", agent="codex", k=10)
    assert len(set(theirs)) == 10
    assert not set(theirs) & set(mine)


def test_a_fact_found_only_by_its_tag_is_found(store: Store, index: RecallIndex) -> None:
    store.store("the cluster config lives in infra/", tags=["kubernetes"])
    store.store("unrelated note")
    index.catch_up()
    assert found(index, "kubernetes") == ["the cluster config lives in infra/"]


def test_visibility_follows_a_symlinked_working_directory(
    store: Store, index: RecallIndex, tmp_path: Path
) -> None:
    real = tmp_path / "real" / "app"
    real.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real")
    store.store("deploys go through the queue", project=str(real))
    index.catch_up()
    assert found(index, "deploys", cwd=str(link / "app" / "src")) == [
        "deploys go through the queue"
    ]
    assert found(index, "deploys", cwd=str(tmp_path / "real" / "app2")) == []


def test_a_megabyte_working_directory_costs_no_more_than_a_real_one(
    store: Store, index: RecallIndex
) -> None:
    store.store("deploy note for everyone")
    store.store("deploy note for /a", project="/a")
    index.catch_up()
    # `realpath` and walking up such a path cost its length squared: minutes.
    assert sorted(found(index, "deploy note", cwd="/a" * 500_000)) == [
        "deploy note for /a",
        "deploy note for everyone",
    ]


def test_superseded_and_forgotten_facts_are_not_recalled(store: Store, index: RecallIndex) -> None:
    old = store.store("the staging database is stg-db-2")
    index.catch_up()
    new, _ = store.supersede(old.id, "the staging database is stg-db-3")
    # Even before the index catches up, the store's word is final.
    assert found(index, "staging") == ["the staging database is stg-db-3"]
    store.forget(new.id)
    assert found(index, "staging") == []
    assert len(index) == 0


def test_queries_are_words_never_query_syntax(store: Store, index: RecallIndex) -> None:
    store.store('quote " and NEAR( and col: stay text')
    index.catch_up()
    for query in ['a" b', "NEAR(", "content:x OR", "a AND", "x*", "stay) (text"]:
        index.search(query)  # no syntax error from the query parser
    assert found(index, 'quote" NEAR(') == ['quote " and NEAR( and col: stay text']
    assert query_words("Staging DB staging AND") == ["staging", "db", "and"]
    with pytest.raises(InvalidInputError, match="no words"):
        index.search("!!! ???")
    with pytest.raises(InvalidInputError, match="k must be between"):
        index.search("x", k=0)


def test_a_crash_before_the_index_caught_up_is_repaired_at_open(tmp_path: Path) -> None:
    store = Store(tmp_path / "data", sync=False)
    index = RecallIndex(store.path / "recall", store)
    kept = store.store("the staging database is stg-db-2")
    index.catch_up()
    # The daemon dies after these commits to the store, before the index applied them.
    gone = store.store("the old build server is ci-1")
    store.store("the new build server is ci-2")
    store.forget(gone.id)
    store.supersede(kept.id, "the staging database is stg-db-3")
    index.close()
    store.close()

    store = Store(tmp_path / "data", sync=False)
    index = RecallIndex(store.path / "recall", store)
    try:
        assert found(index, "build server") == ["the new build server is ci-2"]
        assert found(index, "staging") == ["the staging database is stg-db-3"]
        assert len(index) == len([m for m in store.list() if not m.is_rule])
    finally:
        index.close()
        store.close()


def test_a_lost_damaged_or_foreign_index_is_rebuilt(tmp_path: Path) -> None:
    store = Store(tmp_path / "data", sync=False)
    store.store("the staging database is stg-db-2")
    RecallIndex(store.path / "recall", store).close()
    directory = store.path / "recall"

    shutil.rmtree(directory)
    index = RecallIndex(directory, store)
    assert found(index, "staging") == ["the staging database is stg-db-2"]
    index.close()

    (directory / "meta.json").write_text("this is not Tantivy's metadata")
    index = RecallIndex(directory, store)
    assert found(index, "staging") == ["the staging database is stg-db-2"]
    assert (store.path / "recall.damaged").is_dir()
    index.close()

    # Another store's index, copied in: rebuilt, not trusted.
    other = Store(tmp_path / "other", sync=False)
    other.store("the staging database of another machine")
    RecallIndex(other.path / "recall", other).close()
    other.close()
    shutil.rmtree(directory)
    shutil.copytree(other.path / "recall", directory)
    index = RecallIndex(directory, store)
    assert found(index, "staging") == ["the staging database is stg-db-2"]
    index.close()
    store.close()


def test_an_index_behind_a_dropped_log_is_rebuilt(tmp_path: Path) -> None:
    store = Store(tmp_path / "data", sync=False)
    directory = store.path / "recall"
    index = RecallIndex(directory, store)
    store.store("first fact about staging")
    index.catch_up()
    index.close()
    shutil.copytree(directory, tmp_path / "backup")
    index = RecallIndex(directory, store)
    for n in range(5):
        store.store(f"fact {n} about staging")
        index.catch_up()  # applied entries are dropped from the log by the next write
    store.store("last fact about staging")
    index.close()
    # An old copy of the index: the log no longer holds what it missed.
    shutil.rmtree(directory)
    shutil.copytree(tmp_path / "backup", directory)
    index = RecallIndex(directory, store)
    try:
        assert len(found(index, "staging", k=10)) == 7
    finally:
        index.close()
        store.close()


def test_the_change_log_stays_short(store: Store, index: RecallIndex) -> None:
    for n in range(80):
        store.store(f"fact {n}")
        index.catch_up()
    with store._env.begin() as txn:
        assert txn.stat(store._changes)["entries"] < 70


def test_rebuild_also_rebuilds_the_pinned_index(store: Store, index: RecallIndex) -> None:
    store.store("answer in British English", tags=["pinned"])
    store.store("a fact")
    summary = index.rebuild()
    assert (summary.facts, summary.pinned) == (1, 1)


def test_the_store_is_walked_for_facts_a_batch_at_a_time(store: Store) -> None:
    facts = [store.store(f"fact {n}").id for n in range(7)]
    store.store("a rule", tags=["trigger:git-commit"])
    head, batch, after = store.live_facts(limit=3)
    walked = [fact.id for fact in batch]
    while after is not None:
        _, batch, after = store.live_facts(after, limit=3)
        walked += [fact.id for fact in batch]
    assert sorted(walked) == sorted(facts)
    assert head == store.fact_changes(0).upto


class _Panic(BaseException):
    """What a Rust panic in Tantivy arrives as (pyo3's PanicException is a BaseException)."""


class _WriterOutOfDescriptors:
    """A writer whose commit fails (EMFILE) and whose rollback then panics, as Tantivy's did."""

    def __getattr__(self, name: str) -> object:
        return lambda *_args, **_kwargs: None

    def commit(self) -> None:
        raise OSError(24, "Too many open files")

    def rollback(self) -> None:
        raise _Panic("The IndexWriter does not have any lock")


def test_a_writer_broken_by_a_failed_commit_is_let_go_and_the_next_write_works(
    store: Store, index: RecallIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.store("The staging database is stg-db-2")
    index.release()  # the real writer goes: the broken one stands in for it
    monkeypatch.setattr(index, "_writer", _WriterOutOfDescriptors())
    with pytest.raises(OSError, match="Too many open files"):
        index.catch_up()
    # The broken writer is gone: the next catch-up makes a new one, and stopping
    # (which used to panic on the broken writer's rollback) goes quietly.
    index.catch_up()
    assert found(index, "staging") == ["The staging database is stg-db-2"]
    index.close()
