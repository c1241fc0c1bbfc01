"""EditMatcher: which actions an edit of some files performs, by .gitignore-style pattern."""

from __future__ import annotations

from pathlib import Path

from mented.actions import load_action_table
from mented.config import Config
from mented.edits import EditMatcher


def matcher(**paths: list[str]) -> EditMatcher:
    actions = {name: {"description": name, "paths": patterns} for name, patterns in paths.items()}
    return EditMatcher(load_action_table(Config(actions=actions)))


def test_paths_match_relative_to_the_repository_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    edits = matcher(**{"db-migration": ["**/migrations/**"], "changelog": ["/CHANGELOG.md"]})
    cwd = str(repo / "src")  # the agent works in a subdirectory
    assert edits.actions_for([str(repo / "db/migrations/0042_x.sql")], cwd) == ("db-migration",)
    assert edits.actions_for(["../migrations/1.sql"], cwd) == ("db-migration",)
    assert edits.actions_for([str(repo / "CHANGELOG.md")], cwd) == ("changelog",)
    # Anchored at the root: a CHANGELOG.md deeper down is another file.
    assert edits.actions_for([str(repo / "docs/CHANGELOG.md")], cwd) == ()
    assert edits.actions_for([str(repo / "src/app.py")], cwd) == ()


def test_without_a_repository_the_working_directory_is_the_root(tmp_path: Path) -> None:
    edits = matcher(changelog=["/CHANGELOG.md"])
    assert edits.actions_for(["CHANGELOG.md"], str(tmp_path)) == ("changelog",)
    assert edits.actions_for([str(tmp_path / "CHANGELOG.md")], str(tmp_path)) == ("changelog",)


def test_no_path_actions_means_nothing_is_looked_at() -> None:
    edits = EditMatcher(load_action_table(Config()))
    assert not edits
    assert edits.actions_for(["/anything/migrations/1.sql"], "/") == ()


def test_odd_paths_never_raise(tmp_path: Path) -> None:
    edits = matcher(anything=["**"])
    assert edits.actions_for(["bad\x00path", "", "/"], str(tmp_path)) == ("anything",)


def test_a_patch_touching_a_migration_and_another_file_performs_the_migration(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    edits = matcher(**{"db-migration": ["**/migrations/**"]})
    touched = [str(repo / "src/app.py"), str(repo / "db/migrations/0042_x.sql")]
    assert edits.actions_for(touched, str(repo)) == ("db-migration",)
    assert edits.actions_for(list(reversed(touched)), str(repo)) == ("db-migration",)


def test_a_pattern_that_backtracked_is_matched_in_linear_time(tmp_path: Path) -> None:
    # Accepted by the config, it held the event loop 3.3 to 4.2 s on a 90-level path
    # (pathspec's regex backtracks; 95 s with one more `a`).
    edits = matcher(deep=["**/a/**/a/**/a/**/a/**/b"])
    deep = "/".join(["a"] * 90)
    assert edits.actions_for([deep + "/c"], str(tmp_path)) == ()
    assert edits.actions_for([deep + "/b"], str(tmp_path)) == ("deep",)
    assert edits.explain([deep + "/b"], str(tmp_path)) == [
        ("deep", "**/a/**/a/**/a/**/a/**/b", deep + "/b")
    ]


def test_a_path_no_file_can_have_performs_nothing(tmp_path: Path) -> None:
    edits = matcher(anything=["**/b"])
    assert edits.actions_for(["a/" * 3000 + "b"], str(tmp_path)) == ()
    assert edits.actions_for(["/".join(["a"] * 300) + "/b"], str(tmp_path)) == ()
    assert edits.actions_for(["a/b"], str(tmp_path)) == ("anything",)
