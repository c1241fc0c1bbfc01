"""Fields of an action, read from the parsed command (mented.fields, Matcher.matched_commands)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from mented.actions import load_table_in_force
from mented.fields import FIELDS, Fields, fields_in, fields_of_tool
from mented.matcher import Matcher

if TYPE_CHECKING:
    from pathlib import Path

TABLE = load_table_in_force(None).table
MATCHER = Matcher(TABLE)


def fields(command: str, action: str = "git-commit", cwd: str | None = None) -> Fields:
    found = fields_in(TABLE, MATCHER.matched_commands(command), [action], cwd or "/nowhere")
    assert len(found) == 1, found
    return found[0]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    "command",
    [
        'git commit -m "fix: login bug"',
        "git commit -am 'fix: login bug'",
        "git commit --message='fix: login bug'",
        'sudo -u me env A=1 git -C /x -c a=b commit -m "fix: login bug"',
        "bash -c 'git commit -m \"fix: login bug\"'",
        'cd /x && git add . && git commit -m "fix: login bug" && git push',
        'case y in y) git commit -m "fix: login bug";; esac',
        'timeout 5 git commit -m "fix: login bug"',
    ],
)
def test_the_message_is_the_same_whatever_stands_around_the_commit(command: str) -> None:
    found = fields(command)
    assert found.values["message"] == "fix: login bug"
    assert found.values["subject"] == "fix: login bug"
    assert found.values["body"] == ""


def test_repeated_m_are_paragraphs_as_git_joins_them() -> None:
    found = fields('git commit -m "feat: x" -m "why it matters" -m "Closes: #4"')
    assert found.values["message"] == "feat: x\n\nwhy it matters\n\nCloses: #4"
    assert found.values["subject"] == "feat: x"
    assert found.values["body"] == "why it matters"
    assert found.values["trailers"] == ("Closes: #4",)


def test_a_heredoc_substitution_is_its_body() -> None:
    command = (
        "git commit -m \"$(cat <<'EOF'\nFixed the login bug 🎉\n\nIt was broken.\n\n"
        'Co-Authored-By: Bot <b@x>\nEOF\n)"'
    )
    found = fields(command)
    assert found.values["subject"] == "Fixed the login bug 🎉"
    assert found.values["body"] == "It was broken."
    assert found.values["trailers"] == ("Co-Authored-By: Bot <b@x>",)


def test_a_heredoc_on_standard_input_is_the_message_of_f_dash() -> None:
    found = fields("git commit -F - <<'EOF'\nfix: from stdin\n\nmore\nEOF\n")
    assert found.values["message"] == "fix: from stdin\n\nmore"


def test_an_expanded_heredoc_is_unknown_not_guessed() -> None:
    found = fields('git commit -m "$(cat <<EOF\nfix: $USER\nEOF\n)"')
    assert "message" not in found.values
    assert "only known when the command runs" in found.unknown["message"]


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("git commit", "editor"),
        ("git commit --amend", "editor"),
        ("git commit --amend --no-edit", "--no-edit"),
        ("git commit -C HEAD", "another commit"),
        ("git commit --reuse-message=HEAD", "another commit"),
        ("git commit -F -", "standard input"),
        ('git commit -m "$msg"', "only known when the command runs"),
        ('git commit -m "fix: $(date)"', "only known when the command runs"),
        ("git commit -e -m 'fix: x'", "editor"),
        ("git revert HEAD", "own message"),
    ],
)
def test_messages_git_or_the_shell_writes_are_unknown(command: str, why: str) -> None:
    found = fields(command)
    assert "message" not in found.values
    assert why in found.unknown["message"]


def test_flags_carry_long_names_of_short_ones() -> None:
    found = fields("git commit -nm 'fix: x' --amend")
    assert {"-n", "--no-verify", "--amend"} <= set(found.values["flags"])


def test_f_reads_a_file_inside_the_working_tree(tree: Path) -> None:
    (tree / "msg.txt").write_text("feat: from a file\n\n\n\nbody  \n")
    found = fields("git commit -F msg.txt", cwd=str(tree))
    assert found.values["message"] == "feat: from a file\n\nbody"


def test_f_outside_the_working_tree_is_not_read(
    tree: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "msg"
    outside.write_text("fix: outside")
    found = fields(f"git commit -F {outside}", cwd=str(tree))
    assert "outside the working tree" in found.unknown["message"]
    found = fields("git commit -F ../../../etc/passwd", cwd=str(tree))
    assert "outside the working tree" in found.unknown["message"]


def test_hostile_message_files_are_refused_not_read(tree: Path) -> None:
    (tree / "link").symlink_to("/etc/passwd")
    os.mkfifo(tree / "fifo")
    (tree / "big").write_bytes(b"x" * (1 << 20))
    (tree / "bad").write_bytes(b"fix: \xff\xfe")
    for name, why in [
        ("link", "symbolic link"),
        ("fifo", "named pipe"),
        ("big", "limit"),
        ("bad", "not UTF-8"),
        ("missing", "does not exist"),
    ]:
        found = fields(f"git commit -F {name}", cwd=str(tree))
        assert why in found.unknown["message"], (name, found.unknown)


def test_only_the_fields_asked_for_are_read_and_no_file_for_the_others(tree: Path) -> None:
    # The hook asks for the fields its rules' checks test: a rule on the flags alone
    # reads no message file (here one that would be refused), nor works out the body.
    (tree / "msg.txt").write_text("feat: from a file\n\nbody\n")
    commands = MATCHER.matched_commands("git commit -n -F msg.txt")
    (flags,) = fields_in(
        TABLE, commands, ["git-commit"], str(tree), only={"git-commit": frozenset({"flags"})}
    )
    assert "--no-verify" in flags.values["flags"]
    assert "message" not in flags.values
    assert not flags.from_file  # the file was not looked at: its fields may be kept
    (subject,) = fields_in(
        TABLE, commands, ["git-commit"], str(tree), only={"git-commit": frozenset({"subject"})}
    )
    assert subject.values["subject"] == "feat: from a file"
    assert "body" not in subject.values
    assert subject.from_file


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a file to another user")
def test_another_users_message_file_is_not_read(tree: Path) -> None:
    path = tree / "theirs"
    path.write_text("fix: theirs")
    os.chown(path, 65534, 65534)
    found = fields("git commit -F theirs", cwd=str(tree))
    assert "another user's file" in found.unknown["message"]


def test_git_c_directory_is_where_f_is_read(tree: Path) -> None:
    (tree / "sub").mkdir()
    (tree / "sub" / "m").write_text("docs: in sub")
    found = fields("git -C sub commit -F m", cwd=str(tree))
    assert found.values["message"] == "docs: in sub"


def test_gh_pr_create_fields(tree: Path) -> None:
    (tree / "body.md").write_text("the body\n")
    found = fields(
        'gh pr create --title "feat: x" --body-file body.md -B main -H topic --draft',
        "pr-create",
        cwd=str(tree),
    )
    assert found.values == {
        "title": "feat: x",
        "body": "the body\n",
        "base": "main",
        "head": "topic",
        "draft": "true",
    }


def test_gh_pr_create_fill_leaves_title_unknown() -> None:
    found = fields("gh pr create --fill", "pr-create")
    assert "--fill" in found.unknown["title"]
    assert found.values["draft"] == "false"


def test_glab_and_hub_and_the_api() -> None:
    found = fields('glab mr create -t "T" -d "D" -b main -s topic', "pr-create")
    assert (found.values["title"], found.values["body"], found.values["base"]) == ("T", "D", "main")
    found = fields('hub pull-request -m "Title" -m "Body text"', "pr-create")
    assert (found.values["title"], found.values["body"]) == ("Title", "Body text")
    found = fields(
        "gh api -X POST repos/o/r/pulls -f title='feat: api' -f base=main -f head=x", "pr-create"
    )
    assert found.values["title"] == "feat: api"


def test_mcp_pull_request_arguments() -> None:
    found = fields_of_tool("pr-create", {"title": "feat: t", "body": "b", "base": "main"})
    assert found is not None
    assert found.values["title"] == "feat: t"
    assert "head" in found.unknown
    gitlab = fields_of_tool("pr-create", {"title": "T", "description": "D", "draft": True})
    assert gitlab is not None
    assert (gitlab.values["body"], gitlab.values["draft"]) == ("D", "true")


def test_other_actions_fields() -> None:
    assert fields("git checkout -b feature/x", "git-branch-create").values["branch"] == "feature/x"
    assert fields("git switch -c fix/y", "git-branch-create").values["branch"] == "fix/y"
    tag = fields('git tag -a v1.2 -m "release 1.2"', "git-tag")
    assert (tag.values["tag"], tag.values["message"]) == ("v1.2", "release 1.2")
    push = fields("git push -f origin main topic", "git-push-force")
    assert push.values["remote"] == "origin"
    assert push.values["refs"] == ("main", "topic")
    assert "--force" in push.values["flags"]
    assert "upstream" in fields("git push", "git-push").unknown["remote"]
    assert fields("pip install requests flask", "package-install").values["packages"] == (
        "requests",
        "flask",
    )
    release = fields('gh release create v1 -t "V1" -n "notes"', "release-create")
    assert (release.values["tag"], release.values["title"], release.values["notes"]) == (
        "v1",
        "V1",
        "notes",
    )


def test_every_action_with_fields_is_in_the_table() -> None:
    assert set(FIELDS) <= set(TABLE.names())


def test_two_commits_in_one_command_give_two_messages() -> None:
    found = fields_in(
        TABLE,
        MATCHER.matched_commands('git commit -m "a: one" && git commit -m "b: two"'),
        ["git-commit"],
        None,
    )
    assert [item.values["message"] for item in found] == ["a: one", "b: two"]
