"""The commands people really run (issue 26): each shape the table knows, with its no-op forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mented.actions import load_action_table
from mented.config import Config, ConfigError, load_config
from mented.matcher import Matcher
from mented.registration import hook_needs

DATA = Path(__file__).parent / "data" / "everyday_commands.jsonl"
ROWS = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def matcher() -> Matcher:
    return Matcher(load_action_table(Config()))


@pytest.mark.parametrize("row", [pytest.param(row, id=row["command"][:60]) for row in ROWS])
def test_everyday_command_row(matcher: Matcher, row: dict[str, Any]) -> None:
    assert sorted(matcher.actions_in(row["command"])) == sorted(row["actions"]), row.get("why", "")


def test_git_add_ons_can_be_switched_off(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[matching]\ngit_add_ons = false\n", encoding="utf-8")
    matcher = Matcher(load_action_table(load_config(config)))
    assert list(matcher.actions_in("git create-branch feature-x")) == []
    assert list(matcher.actions_in("git flow feature finish login")) == []
    # git's own commands stay.
    assert list(matcher.actions_in("git commit -m x")) == ["git-commit"]


def test_a_misspelt_matching_setting_is_refused_with_its_line(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[matching]\ngit_addons = false\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config\.toml:2: bad \[matching\] section"):
        load_config(config)


def test_explain_says_which_add_on_a_command_belongs_to(matcher: Matcher) -> None:
    explanation = matcher.explain("git create-branch feature-x")
    (command,) = explanation.commands
    assert [match.shape for match in command.matches] == [
        "git create-branch|fresh-branch (with 1 positional argument; git-extras add-on)"
    ]


def test_hub_runs_a_users_git_command_only_through_the_built_ins(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[actions.git-commit]\nshapes = [{ program = "git", subcommand = ["save"] }]\n',
        encoding="utf-8",
    )
    matcher = Matcher(load_action_table(load_config(config)))
    assert list(matcher.actions_in("git save")) == ["git-commit"]
    assert list(matcher.actions_in("hub commit -m x")) == ["git-commit"]
    assert list(matcher.actions_in("hub save")) == []


def test_the_agents_hook_filter_lets_every_new_command_through() -> None:
    patterns = hook_needs(load_action_table(Config())).command_patterns()

    def passes(command: str) -> bool:
        import fnmatch

        return any(fnmatch.fnmatchcase(command, pattern) for pattern in patterns)

    for row in ROWS:
        if row["actions"]:
            assert passes(row["command"]), row["command"]
    # The filter stays narrow: a test run or a build starts no hook.
    for quiet in ("npm test", "pytest -q", "make", "cargo build", "ls -la"):
        assert not passes(quiet), quiet


def test_the_corpus_measure_labels_from_descriptions_and_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mented_client.bench import command_corpus

    pages = tmp_path / "pages" / "common"
    pages.mkdir(parents=True)
    (pages / "git-push.md").write_text(
        "# git push\n\n> Push commits.\n\n"
        "- Send local changes to the default remote:\n\n`git push --quiet`\n\n"
        "- Push to a specific remote and branch:\n\n`git push {{origin}} {{main}}`\n\n"
        "- Show what would be pushed, without pushing (dry run):\n\n"
        "`git push {{[-n|--dry-run]}} origin`\n",
        encoding="utf-8",
    )
    (pages / "ls.md").write_text("# ls\n\n- List files:\n\n`ls`\n", encoding="utf-8")
    assert command_corpus.main([str(tmp_path), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert set(figures) == {"git", "all"}  # ls is no program of the table
    assert figures["git"]["examples"] == 3
    assert figures["git"]["perform"] == 1  # "Push to ..." (the first says "Send", unlabelled)
    assert figures["git"]["named"] == 2  # `git push --quiet` and `git push origin main`
