"""Supersession and forgetting (`mented.store.history`): versions, links, history."""

from __future__ import annotations

import pytest

from mented.memory import InvalidInputError, MemoryType, short_handle
from mented.store import ConflictError, NotFoundError, Store
from tests.store_helpers import contents

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
