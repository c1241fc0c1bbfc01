"""The Neovim plugin (editors/nvim) in a real headless Neovim against a real daemon.

Each test runs one scenario of tests/nvim/ through tests/nvim/harness.lua: the
scenario drives the plugin as a user would (commands, the rules buffer, the rule
editor, the statusline, the real hook shim for fires) and records what the user
sees; the assertions here are on that record and on the daemon's store.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mented.memory import short_handle
from mented.protocol import (
    ListRequest,
    MemoriesReply,
    StoredReply,
    StoreRequest,
)
from tests.conftest import PYTHON, DaemonProcess, isolated_env

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "editors" / "nvim"
HARNESS = REPO / "tests" / "nvim" / "harness.lua"
NVIM = shutil.which("nvim")

pytestmark = pytest.mark.skipif(
    NVIM is None,
    reason="nvim is not installed (Debian: `apt-get install neovim`; .ci/run installs it)",
)

NOT_RUNNING = "mented is not running"


def projects(root: Path) -> tuple[Path, Path]:
    """A git project with a file deep inside, and another project beside it."""
    project = (root / "proj").resolve()
    (project / ".git").mkdir(parents=True)
    (project / "src" / "deep").mkdir(parents=True)
    other = (root / "other").resolve()
    other.mkdir()
    return project, other


def run_scenario(name: str, env: dict[str, str], project: Path, **extra_env: str) -> dict[str, Any]:
    """Run tests/nvim/<name>.lua in a headless Neovim and return what it recorded."""
    assert NVIM is not None
    report = project.parent / f"{name}.json"
    result = subprocess.run(
        [
            NVIM,
            "--headless",
            "--clean",
            "-i",
            "NONE",
            "--cmd",
            f"set rtp^={PLUGIN}",
            "-c",
            f"luafile {HARNESS}",
            "-c",
            "cquit 3",  # reached only when the harness itself could not run
        ],
        env=env
        | {
            "MENTED_TEST_SCENARIO": name,
            "MENTED_TEST_REPORT": str(report),
            "MENTED_TEST_PYTHON": PYTHON,
            "PROJECT": str(project),
        }
        | extra_env,
        cwd=project.parent,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.exists(), f"nvim exited {result.returncode}: {result.stdout}{result.stderr}"
    seen: dict[str, Any] = json.loads(report.read_text())
    assert seen.get("error") is None, seen["error"]
    assert result.returncode == 0, result.stderr
    # No error reached the user: none printed, none in :messages.
    assert result.stderr == ""
    assert "Error" not in seen["messages"], seen["messages"]
    return seen


def add(daemon: DaemonProcess, action: str, text: str, project: Path | None = None) -> str:
    with daemon.client() as client:
        reply = client.expect(
            StoreRequest(
                content=text,
                tags=[f"trigger:{action}"],
                project=str(project) if project else None,
            ),
            StoredReply,
        )
    return reply.id


def rules_for(daemon: DaemonProcess, project: Path) -> list[Any]:
    with daemon.client() as client:
        reply = client.expect(ListRequest(rules_only=True, cwd=str(project)), MemoriesReply)
    return reply.memories


# ------------------------------------------------------------------- frames


def test_frames_are_cut_and_joined_by_hand_as_the_daemon_writes_them(short_tmp: Path) -> None:
    project, _ = projects(short_tmp)
    seen = run_scenario("frames", isolated_env(short_tmp), project)
    assert seen["header_0"] == [0, 0, 0, 0]
    assert seen["header_70000"] == [0, 1, 0x11, 0x70]
    assert seen["header_16909060"] == [1, 2, 3, 4]
    assert seen["one_byte_at_a_time"] == ['{"a":1}', "", '{"b":"é"}']
    assert seen["two_and_a_half"] == ['{"a":1}', '{"b":"é"}']
    assert seen["the_rest"] == ['{"a":1}']
    assert seen["over_the_maximum"]["refused"] is True
    assert "4194305 bytes" in seen["over_the_maximum"]["message"]
    assert seen["at_the_maximum_waits"] == 0


# ------------------------------------------------------------------ listing


def test_the_rules_buffer_lists_this_projects_rules_by_action_with_handles(
    daemon: DaemonProcess, short_tmp: Path
) -> None:
    project, other = projects(short_tmp)
    everywhere = add(daemon, "git-commit", "commit messages: single line")
    here = add(daemon, "git-commit", "no emojis\nnot even in the body", project)
    pr = add(daemon, "pr-create", "link the issue", project)
    add(daemon, "git-commit", "sign off", other)  # another project's: not listed
    # A team rule, committed in the project's .mented/ and trusted.
    for command in (["rule", "add", "--team", "git-commit", "rules live in the repo"], ["trust"]):
        subprocess.run(
            [PYTHON, "-m", "mented_client.cli", *command],
            env=daemon.env,
            cwd=project,
            capture_output=True,
            check=True,
            timeout=60,
        )

    (team,) = (rule.id for rule in rules_for(daemon, project) if rule.origin == "project")

    seen = run_scenario("listing", daemon.env, project)

    assert seen["name"] == f"mented://rules{project}"
    assert seen["modifiable"] is False
    lines = seen["lines"]
    assert lines[0] == f"Rules for {project}: 4 rules"
    assert lines[2:] == [
        "",
        "git-commit",
        f"  [{short_handle(team)}] rules live in the repo  (team rule, {project}/.mented/)",
        f"  [{short_handle(here)}] no emojis",
        "             not even in the body  (this project)",
        f"  [{short_handle(everywhere)}] commit messages: single line",
        "",
        "pr-create",
        f"  [{short_handle(pr)}] link the issue  (this project)",
    ]
    (hint,) = seen["team_rule_supersede"]
    assert hint == (
        f"mented: [{short_handle(team)}] is a team rule: change it in {project}/.mented/rules.jsonl"
        " and commit it (then `mentectl trust` again)"
    )
    after = seen["after_terminal"]
    assert after[0] == f"Rules for {project}: 5 rules"
    assert "git-push" in after
    assert "push with --force-with-lease only" in after[after.index("git-push") + 1]
    assert seen["buffers_named_rules"] == 1


def test_a_listing_larger_than_one_read_arrives_whole(
    daemon: DaemonProcess, short_tmp: Path
) -> None:
    project, _ = projects(short_tmp)
    text = " ".join(["a rule long enough to fill the socket's buffers quickly"] * 8)
    with daemon.client() as client:
        for n in range(300):
            client.expect(
                StoreRequest(content=f"{n} {text}", tags=["trigger:git-commit"]), StoredReply
            )

    seen = run_scenario("many_rules", daemon.env, project)

    assert seen["lines"][0] == f"Rules for {project}: 300 rules"
    assert len(seen["lines"]) == 2 + 2 + 300
    assert seen["lines"][-1].endswith(f"] 0 {text}")


# ------------------------------------------------------------------- adding


def test_adding_rules_inline_and_in_the_editor_with_their_scope(
    daemon: DaemonProcess, short_tmp: Path
) -> None:
    project, _ = projects(short_tmp)

    seen = run_scenario("adding", daemon.env, project)

    assert seen["actions_completed"] == ["git-push", "git-push-force"]
    assert seen["flags_completed"] == ["++project", "++everywhere"]
    assert seen["action_after_flag"] == ["pr-create"]
    assert seen["text_not_completed"] == []

    rules = {memory.content: memory for memory in rules_for(daemon, project)}
    inline = rules["commit messages: single line, no emojis"]
    assert inline.tags == ("trigger:git-commit",)
    assert inline.project == str(project)
    assert seen["inline"] == [
        f"mented: added [{short_handle(inline.id)}] for git-commit, in this project ({project})"
    ]

    assert seen["asked"] == {
        "prompt": "Where does the rule for git-push apply?",
        "items": [f"this project: {project}", "everywhere"],
    }
    assert seen["editor_name"] == "mented://add/git-push"
    assert seen["editor_lines"][0] == ""
    assert all(line.startswith("#") for line in seen["editor_lines"][1:])
    assert "applies everywhere" in "\n".join(seen["editor_lines"])
    edited = rules["never force-push\nto main"]
    assert edited.tags == ("trigger:git-push",)
    assert edited.project is None
    assert seen["from_editor"] == [
        f"mented: added [{short_handle(edited.id)}] for git-push, everywhere"
    ]
    assert seen["windows_after"] == 1

    assert len(seen["typo"]) == 1
    assert "no action 'git-comit'" in seen["typo"][0]
    assert "would never fire" in seen["typo"][0]
    assert len(rules) == 2


# -------------------------------------------------------------- superseding


def test_superseding_the_rule_under_the_cursor_and_by_handle(
    daemon: DaemonProcess, short_tmp: Path
) -> None:
    project, _ = projects(short_tmp)
    old = add(daemon, "pr-merge", "squash-merge PRs", project)

    seen = run_scenario("superseding", daemon.env, project, RULE_HANDLE=short_handle(old))

    assert seen["editor_name"] == f"mented://supersede/{short_handle(old)}"
    assert seen["editor_lines"][0] == "squash-merge PRs"
    assert f"Rewrite rule [{short_handle(old)}] (pr-merge)" in "\n".join(seen["editor_lines"])

    (current,) = rules_for(daemon, project)
    assert current.content == "rebase-merge PRs, keep the branch"
    assert current.tags == ("trigger:pr-merge",)
    assert current.project == str(project)

    (superseded,) = seen["superseded"]
    middle = superseded.split("superseded by [")[1].rstrip("]")
    assert superseded == f"mented: [{short_handle(old)}] superseded by [{middle}]"
    assert any(f"[{middle}] rebase-merge PRs; never squash" in line for line in seen["rules_after"])
    assert not any(short_handle(old) in line for line in seen["rules_after"])
    assert seen["handles_completed"] == [middle]
    assert seen["by_handle"] == [f"mented: [{middle}] superseded by [{short_handle(current.id)}]"]

    (stale,) = seen["stale"]
    assert stale.startswith("mented: ")
    assert "already superseded" in stale
    (hint,) = seen["no_rule_here"]
    assert "put the cursor on a rule in :MentedRules" in hint


# --------------------------------------------------------------- statusline


def test_the_statusline_and_notifications_show_this_projects_last_fire(
    daemon: DaemonProcess, short_tmp: Path
) -> None:
    project, other = projects(short_tmp)
    rule = add(daemon, "git-commit", "commit messages: single line")

    seen = run_scenario("statusline", daemon.env, project, OTHER_PROJECT=str(other))

    assert seen["before_any_fire"] == ""
    assert seen["after_fire"] == "mented: git-commit just now"
    # Only this project's fire is told, naming the rule that reached the agent.
    assert seen["fire_notes"] == [
        f"mented: git-commit (claude-code): [{short_handle(rule)}] handed over"
    ]
    assert seen["other_project"] == "mented: git-commit just now"


def test_the_statusline_empties_while_the_daemon_is_down_and_follows_it_back(
    daemon: DaemonProcess, short_tmp: Path
) -> None:
    project, _ = projects(short_tmp)

    seen = run_scenario("restart", daemon.env, project)

    assert seen["before"] == "mented: git-commit just now"
    assert seen["while_down"] == ""
    assert seen["notes_while_down"] == []
    # The last fire is still the last one in this project.
    assert seen["right_after"].startswith("mented: git-commit ")
    assert seen["after"] == "mented: git-push just now"
    assert seen["stopped"] == 0


# -------------------------------------------------------------- daemon down


@pytest.mark.parametrize("socket_file", ["absent", "stale"])
def test_with_no_daemon_each_command_says_so_once_and_nothing_blocks(
    short_tmp: Path, socket_file: str
) -> None:
    project, _ = projects(short_tmp)
    env = isolated_env(short_tmp)
    path = Path(env["MENTED_SOCKET"])
    path.parent.mkdir(mode=0o700)
    if socket_file == "stale":
        # A socket file nobody listens on, as a daemon killed with SIGKILL leaves.
        with socket.socket(socket.AF_UNIX) as stale:
            stale.bind(str(path))

    seen = run_scenario("daemon_down", env, project)

    assert seen["statusline"] == ""
    assert seen["statusline_later"] == ""
    for command in seen["commands"]:
        (note,) = command["notes"]
        assert note.startswith(NOT_RUNNING), command
        assert str(path) in note
        assert "`mentectl setup`" in note
        assert "`mented`" in note
        # Asynchronous: the command returns before any answer could come.
        assert command["returned_ms"] < 1000, command
    assert seen["completion"] == []
    assert seen["completion_ms"] < 1000
    assert seen["notes_later"] == []
    assert seen["windows_after"] == seen["windows_before"]


# ---------------------------------------------------------------- packaging


def test_the_help_file_answers_help_for_each_command_once_its_tags_are_made(
    short_tmp: Path,
) -> None:
    """What a plugin manager does on install: `:helptags` on doc/, then `:help`."""
    assert NVIM is not None
    plugin = short_tmp / "mented.nvim"
    shutil.copytree(PLUGIN, plugin)
    topics = [":MentedRules", ":MentedAdd", ":MentedSupersede", "mented.statusline()"]
    show = (
        "lua for _, topic in ipairs(vim.split(os.getenv('TOPICS'), ',')) do"
        " vim.cmd('help ' .. topic);"
        " io.write(vim.fn.expand('%:t'), ' ', vim.fn.getline('.'), '\\n');"
        " vim.cmd('close') end"
    )
    result = subprocess.run(
        [
            *(NVIM, "--headless", "--clean", "-i", "NONE", "--cmd", f"set rtp^={plugin}"),
            *("-c", f"helptags {plugin / 'doc'}", "-c", show, "-c", "qall!"),
        ],
        env=isolated_env(short_tmp) | {"TOPICS": ",".join(topics)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == len(topics), lines
    for topic, line in zip(topics, lines, strict=True):
        assert line.startswith("mented.txt "), (topic, line)
        assert f"*{topic}*" in line, (topic, line)
