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
