"""The action table: built-ins, the user's [actions] section, and clear errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mented.actions import (
    BUILTIN,
    ActionTable,
    Shape,
    check_action,
    load_action_table,
    load_table_in_force,
)
from mented.config import Config, ConfigError, load_config
from mented.memory import InvalidInputError

BUILT_INS = [
    "discard-changes",
    "docker-push",
    "git-branch-create",
    "git-commit",
    "git-merge",
    "git-push",
    "git-push-force",
    "git-rebase",
    "git-tag",
    "infra-deploy",
    "issue-create",
    "package-install",
    "package-publish",
    "pr-create",
    "pr-merge",
    "release-create",
]


def table_from(tmp_path: Path, text: str) -> ActionTable:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_action_table(load_config(path))


def error_from(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        table_from(tmp_path, text)
    return str(caught.value)


def test_the_built_in_actions_are_exactly_the_documented_ones() -> None:
    table = load_action_table(Config())
    assert table.names() == BUILT_INS
    assert all(table.source_of(name) == BUILTIN for name in BUILT_INS)
    assert table.disabled() == {}


def test_every_built_in_action_has_a_description_and_a_shape() -> None:  # and maybe tools
    for action in load_action_table(Config()).actions():
        assert action.description, action.name
        assert action.shapes, action.name


def test_built_in_actions_are_documented_in_docs_actions_md() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "actions.md").read_text(encoding="utf-8")
    for name in BUILT_INS:
        assert f"`{name}`" in docs


def test_a_user_action_comes_from_the_config_file(tmp_path: Path) -> None:
    table = table_from(
        tmp_path,
        '[actions.Deploy]\ndescription = "roll out"\n'
        'shapes = [{ program = "make", subcommand = ["deploy"] }]\n',
    )
    assert "deploy" in table.names()  # normalized to lower case
    assert table.source_of("deploy") == str(tmp_path / "config.toml")
    (action,) = [a for a in table.actions() if a.name == "deploy"]
    assert action.description == "roll out"
    assert action.shapes == (Shape(program="make", subcommand=("deploy",)),)


def test_shapes_in_array_of_tables_form(tmp_path: Path) -> None:
    table = table_from(
        tmp_path,
        '[[actions.deploy.shapes]]\nprogram = "make"\nsubcommand = ["deploy"]\n\n'
        '[[actions.deploy.shapes]]\nprogram = "just"\nsubcommand = ["deploy"]\n',
    )
    (action,) = [a for a in table.actions() if a.name == "deploy"]
    assert [shape.program for shape in action.shapes] == ["make", "just"]


def test_shapes_added_to_a_built_in_keep_its_own(tmp_path: Path) -> None:
    config = str(tmp_path / "config.toml")
    table = table_from(
        tmp_path, '[actions.git-commit]\nshapes = [{ program = "but", subcommand = ["commit"] }]\n'
    )
    (action,) = [a for a in table.actions() if a.name == "git-commit"]
    assert [shape.program for shape in action.shapes][-1] == "but"
    assert action.shape_sources == (*[BUILTIN] * (len(action.shapes) - 1), config)
    assert table.source_of("git-commit") == BUILTIN
    assert action.description == "record changes to the repository"


def test_replace_swaps_the_built_in_shapes(tmp_path: Path) -> None:
    table = table_from(
        tmp_path,
        "[actions.git-push]\nreplace = true\n"
        'shapes = [{ program = "git", subcommand = ["push"], no_flag = ["-n", "--dry-run"] }]\n',
    )
    (action,) = [a for a in table.actions() if a.name == "git-push"]
    assert action.shapes == (
        Shape(program="git", subcommand=("push",), no_flag=("-n", "--dry-run")),
    )
    assert table.source_of("git-push") == str(tmp_path / "config.toml")


def test_enabled_false_switches_a_built_in_off(tmp_path: Path) -> None:
    table = table_from(tmp_path, "[actions.docker-push]\nenabled = false\n")
    assert "docker-push" not in table.names()
    assert table.disabled() == {"docker-push": str(tmp_path / "config.toml")}
    with pytest.raises(KeyError):
        table.source_of("docker-push")


def test_no_config_file_means_the_built_ins(tmp_path: Path) -> None:
    table = load_action_table(load_config(tmp_path / "missing.toml"))
    assert table.names() == BUILT_INS


# ------------------------------------------------------------------- errors


def test_an_unknown_key_names_file_line_and_action(tmp_path: Path) -> None:
    message = error_from(
        tmp_path,
        '[hook]\nk = 3\n\n[actions.deploy]\nshapes = [{ programm = "make" }]\n',
    )
    assert message.startswith(f"{tmp_path / 'config.toml'}:4:")
    assert "'deploy'" in message
    assert "programm" in message


def test_a_new_action_without_shapes_is_an_error(tmp_path: Path) -> None:
    message = error_from(tmp_path, '[actions.deploy]\ndescription = "x"\n')
    assert ":1:" in message
    assert "'deploy' has no shapes" in message


def test_switching_off_an_unknown_action_is_an_error(tmp_path: Path) -> None:
    message = error_from(tmp_path, "[actions.git-comit]\nenabled = false\n")
    assert "no built-in 'git-comit'" in message
    assert "git-commit" in message  # the list of built-ins helps spot the typo


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ('{ program = "/usr/bin/git" }', "matched by basename; write 'git'"),
        ('{ program = "git commit" }', "must be one word"),
        ('{ program = "gh", subcommand = ["pr create"] }', 'subcommand = ["pr", "create"]'),
        ('{ program = "git", any_flag = ["force"] }', "'force' must be an option"),
        ('{ program = "git", no_flag = ["--x=1"] }', "'--x=1' must be an option"),
        ('{ program = "git", min_positionals = -1 }', "cannot be negative"),
        ('{ program = "git", positional_starts_with = "" }', "cannot be empty"),
        ('{ program = "git", subcommand = [[]] }', "at least one alternative"),
        ('{ program = "git", min_positionals = "1" }', "Expected `int`"),
        ('{ program = "gh", any_value = ["-X"] }', "'-X' must be an option and its value"),
        ('{ program = "gh", no_value = ["X=GET"] }', "'X=GET' must be an option and its value"),
        ('{ program = "git", min_positionals = 2, max_positionals = 1 }', "below min_positionals"),
        ('{ program = "gh", positional_matches = "" }', "cannot be empty"),
    ],
)
def test_a_bad_shape_is_reported_with_its_number(tmp_path: Path, shape: str, expected: str) -> None:
    message = error_from(
        tmp_path,
        '[actions.ok]\nshapes = [{ program = "x" }]\n\n'
        f'[actions.bad]\nshapes = [{{ program = "y" }}, {shape}]\n',
    )
    assert message.startswith(f"{tmp_path / 'config.toml'}:4:")
    assert "'bad'" in message
    assert expected in message


def test_an_action_that_is_not_a_table_is_an_error(tmp_path: Path) -> None:
    message = error_from(tmp_path, '[actions]\ndeploy = "make deploy"\n')
    assert ":2:" in message
    assert "must be a table" in message


def test_a_bad_action_name_is_an_error(tmp_path: Path) -> None:
    message = error_from(tmp_path, '[actions."my deploy"]\nshapes = [{ program = "x" }]\n')
    assert ":1:" in message
    assert "whitespace" in message


def test_the_same_action_twice_in_different_case_is_an_error(tmp_path: Path) -> None:
    message = error_from(
        tmp_path,
        '[actions.Deploy]\nshapes = [{ program = "x" }]\n'
        '[actions.deploy]\nshapes = [{ program = "y" }]\n',
    )
    assert "defined twice" in message


def test_replace_on_a_new_action_is_an_error(tmp_path: Path) -> None:
    message = error_from(
        tmp_path, '[actions.deploy]\nreplace = true\nshapes = [{ program = "x" }]\n'
    )
    assert "only applies to a built-in" in message


def test_replace_with_no_shapes_is_an_error(tmp_path: Path) -> None:
    message = error_from(tmp_path, "[actions.git-push]\nreplace = true\n")
    assert "enabled = false" in message


def test_shape_describe_reads_like_the_command() -> None:
    shape = Shape(
        program="npm",
        subcommand=(("install", "i"),),
        no_flag=("--dry-run",),
        min_positionals=1,
    )
    assert shape.describe() == "npm install|i (without --dry-run; with 1 positional argument)"


# ------------------------------------------------------- names a person gives


def test_check_action_normalizes_known_names() -> None:
    table = load_action_table(Config())
    assert check_action(table, "git-commit") == "git-commit"
    assert check_action(table, " Git-Commit ") == "git-commit"
    assert check_action(table, "trigger:PR-Create") == "pr-create"


def test_an_unknown_action_is_refused_with_the_closest_known_ones() -> None:
    table = load_action_table(Config())
    with pytest.raises(InvalidInputError) as caught:
        check_action(table, "git-comit")
    message = str(caught.value)
    assert "'git-comit' is not an action mented knows, so a rule for it would never fire" in message
    assert "Did you mean: git-commit" in message
    assert "[actions.<name>]" in message


def test_a_user_action_is_known_and_a_broken_file_says_why_it_is_not(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[actions.deploy]\nshapes = [{ program = "make", subcommand = ["deploy"] }]\n')
    in_force = load_table_in_force(path)
    assert in_force.problem is None
    assert check_action(in_force.table, "deploy") == "deploy"

    path.write_text("[actions.deploy]\nshapes = 'make deploy'\n")
    broken = load_table_in_force(path)
    assert broken.problem is not None
    assert str(path) in broken.problem
    assert broken.table.names() == BUILT_INS  # the built-ins, the closest a client can get
    with pytest.raises(InvalidInputError) as caught:
        check_action(broken.table, "deploy", problem=broken.problem)
    assert "only the built-in actions are known" in str(caught.value)
    assert broken.problem in str(caught.value)


def test_descriptions_come_from_the_table_and_the_config_file(tmp_path: Path) -> None:
    table = table_from(tmp_path, '[actions.git-commit]\ndescription = "our commit"\n')
    descriptions = table.descriptions()
    assert descriptions["git-commit"] == "our commit"
    assert descriptions["pr-create"]  # built-ins describe themselves
    assert set(descriptions) == set(table.names())


# ------------------------------------------------------- tool and path triggers


def test_actions_can_be_performed_by_mcp_tools_and_file_edits(tmp_path: Path) -> None:
    table = table_from(
        tmp_path,
        '[actions.db-migration]\ndescription = "change the database schema"\n'
        'paths = ["**/migrations/**"]\n\n'
        '[actions.pr-create]\ntools = ["forge/open_change"]\n',
    )
    migration = next(a for a in table.actions() if a.name == "db-migration")
    assert (migration.shapes, migration.tools, migration.paths) == ((), (), ("**/migrations/**",))
    assert migration.triggers() == ("file edit **/migrations/**",)
    pr = next(a for a in table.actions() if a.name == "pr-create")
    assert pr.tools == ("*/create_pull_request", "*/create_merge_request", "forge/open_change")
    assert "MCP tool forge/open_change" in pr.triggers()
    assert "gh pr create|new" in pr.triggers()


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('tools = ["create_pull_request"]', "must be SERVER/TOOL"),
        ('tools = ["github/a/b"]', "must be SERVER/TOOL"),
        ('paths = [""]', "must be a pattern of the files"),
        ('paths = ["!keep.sql"]', "must be a pattern of the files"),
    ],
)
def test_bad_tool_and_path_triggers_name_file_line_and_action(
    tmp_path: Path, line: str, said: str
) -> None:
    message = error_from(tmp_path, f"[actions.deploy]\n{line}\n")
    assert f"{tmp_path / 'config.toml'}:1" in message
    assert "'deploy'" in message
    assert said in message


def test_an_action_with_no_trigger_at_all_is_refused(tmp_path: Path) -> None:
    message = error_from(tmp_path, '[actions.deploy]\ndescription = "x"\n')
    assert "has no shapes, tools or paths" in message


def test_the_action_table_loads_without_the_edit_matcher() -> None:
    # `mented.actions` and `mented.edits` imported each other (issue 28); the check of a
    # path pattern is `mented.path_patterns`', which imports nothing of ours.
    code = "import sys, mented.actions; print([m for m in ('mented.edits',) if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stderr
