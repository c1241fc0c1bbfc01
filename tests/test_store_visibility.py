"""Who sees a memory (`mented.store.visibility`): agents, projects, links, listings."""

from __future__ import annotations

from pathlib import Path

import pytest

from mented.memory import Memory, MemoryType
from mented.store import Store, StoreItem, visibility, visible_to
from tests.store_helpers import T0, contents, rule

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


def test_a_link_pointed_elsewhere_is_followed_at_the_next_lookup(
    store: Store, tmp_path: Path
) -> None:
    # Resolved paths are kept between lookups (`_Resolved`): a link that now leads to
    # another project, or a directory made anew behind it, must not keep the old answer.
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    link = tmp_path / "link"
    link.symlink_to(one)
    store.store("one only", tags=["trigger:git-commit"], project=str(one))
    store.store("two only", tags=["trigger:git-commit"], project=str(two))
    assert contents(store.recall_for_action("git-commit", cwd=str(link))) == ["one only"]
    assert contents(store.recall_for_action("git-commit", cwd=str(link))) == ["one only"]

    link.unlink()
    link.symlink_to(two)
    assert contents(store.recall_for_action("git-commit", cwd=str(link))) == ["two only"]

    # The directory itself moved, and a link left where it was: its new place is seen
    # (as well as the rules stored with the old path, seen from it as given).
    assert contents(store.recall_for_action("git-commit", cwd=str(two))) == ["two only"]
    two.rename(tmp_path / "three")
    two.symlink_to(tmp_path / "three")
    store.store("three only", tags=["trigger:git-commit"], project=str(tmp_path / "three"))
    seen = contents(store.recall_for_action("git-commit", cwd=str(two)))
    assert sorted(seen) == ["three only", "two only"]
    # A path that is no directory (yet) is resolved each time, never kept.
    missing = tmp_path / "later"
    assert store.recall_for_action("git-commit", cwd=str(missing)) == []
    missing.symlink_to(one)
    assert contents(store.recall_for_action("git-commit", cwd=str(missing))) == ["one only"]


def test_resolved_directories_are_bounded_by_digest_and_bytes(tmp_path: Path) -> None:
    # Keyed by what the agent sent: 300 working directories of 3,000 characters stay
    # within the bound in bytes (under the one in number).
    resolved = visibility._Resolved()
    deep = tmp_path.joinpath(*[str(n % 10) * 250 for n in range(12)])
    deep.mkdir(parents=True)
    for n in range(300):
        place = deep / f"{n:04d}"
        place.mkdir()
        assert resolved.real(str(place)) == str(place.resolve())
    assert 0 < len(resolved._cache) < resolved.MAX_ENTRIES  # the bytes bound, first
    assert resolved._cache.bytes <= resolved.MAX_BYTES


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
