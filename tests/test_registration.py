"""mented/registration.py and the installers: the hook for exactly the calls that need it."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from mented.actions import load_action_table, load_table_in_force
from mented.agents import AGENTS
from mented.agents.pretooluse import InstalledEntry, matcher_takes, patched_files
from mented.config import Config
from mented.matcher import Matcher
from mented.registration import (
    HookNeeds,
    _subsumes,
    glob_to_regex,
    hook_needs,
    sample_name,
    wildcard_matches,
)
from mented_client.cli import main
from tests.conftest import DaemonProcess

# The acceptance rows (../shared/acceptance/commands.jsonl) and the matcher's own.
ROWS = [Path(__file__).parent / "data" / name for name in ("commands.jsonl", "more_commands.jsonl")]
BUILTIN = load_action_table(Config())
NEEDS = hook_needs(BUILTIN)

# Commands that perform an action through a wrapper, a path, a prefix or a shell string.
WRAPPED = [
    "sudo git commit -m x",
    "env FOO=1 git commit -m x",
    "FOO=1 git commit -m x",
    "time git commit -m x",
    "/usr/bin/git commit -m x",
    'bash -c "git commit -m x"',
    "bash -c 'cd r;git\tcommit -m x'",
    "git -c user.name='A B' -C /tmp/r commit -m x",
    "python3 -m pip install requests",
    "nohup npm publish",
    "xargs git commit -m x",
    "pnpm add left-pad",
    "cargo +nightly add serde",
    "echo x | sudo -u ci env A=1 gh pr create --fill",
]
UNRELATED = ["ls -la", "cat README.md", "pytest -q", "npm test", "make", "make -j4 all"]


def action_commands() -> list[str]:
    rows = [json.loads(line) for path in ROWS for line in path.read_text().splitlines() if line]
    return [row["command"] for row in rows if row["actions"]] + WRAPPED


@pytest.mark.parametrize("command", action_commands())
def test_every_command_that_names_an_action_passes_the_filter(command: str) -> None:
    assert Matcher(BUILTIN).actions_in(command), "the row should name an action"
    # Claude Code matches the words as its parser unquotes them (`g'i't` is `git`).
    seen = [command]
    with contextlib.suppress(ValueError):
        seen.append(" ".join(shlex.split(command)))
    patterns = NEEDS.command_patterns()
    assert any(wildcard_matches(pattern, text) for pattern in patterns for text in seen)


@pytest.mark.parametrize("command", UNRELATED)
def test_reads_tests_and_builds_pass_no_filter(command: str) -> None:
    assert not any(wildcard_matches(pattern, command) for pattern in NEEDS.command_patterns())


def test_a_pattern_another_one_covers_is_left_out() -> None:
    patterns = NEEDS.command_patterns()
    assert "*npm*i*" in patterns
    assert "*npm*install*" not in patterns  # every line it takes has `npm` ... `i`
    assert "*pnpm*add*" not in patterns  # `npm` ... `add` takes it
    assert "*git*commit*" in patterns


def test_a_user_action_adds_its_words_tools_and_edits() -> None:
    config = Config(
        actions={
            "deploy": {"shapes": [{"program": "kubectl", "subcommand": ["apply"]}]},
            "db-migration": {"paths": ["**/migrations/**"]},
            "pr-create": {"tools": ["github/open_pr"]},
        }
    )
    needs = hook_needs(load_action_table(config))
    assert "*kubectl*apply*" in needs.command_patterns()
    assert needs.edits
    assert "github/open_pr" in needs.mcp_tools


def test_glob_to_regex_reads_the_same_in_the_agents() -> None:
    assert glob_to_regex("*") == ".*"
    assert glob_to_regex("git-hub.x?") == "git\\-hub\\.x."
    assert glob_to_regex("[!a]b") == "[^a]b"


# ----------------------------------------------------------- the agents' settings


def test_claude_code_filters_commands_and_matches_the_other_tools_exactly() -> None:
    needs = HookNeeds(
        commands=(("git", "commit"),), mcp_tools=("*/create_pull_request",), edits=True
    )
    shell, tools = AGENTS["claude-code"].hook_groups("CMD", 5, needs)["PreToolUse"]
    assert shell["matcher"] == "Bash"
    assert [hook["if"] for hook in shell["hooks"]] == ["Bash(*git*commit*)"]
    matcher = tools["matcher"]
    for tool in ("Edit", "Write", "MultiEdit", "NotebookEdit", "mcp__github__create_pull_request"):
        assert matcher_takes(matcher, tool)
    for tool in ("Bash", "Read", "mcp__github__create_pull_request_review", "xEdit"):
        assert not matcher_takes(matcher, tool)


def test_codex_has_no_filter_and_names_apply_patch() -> None:
    needs = HookNeeds(
        commands=(("git", "commit"),), mcp_tools=("*/merge_pull_request",), edits=True
    )
    (group,) = AGENTS["codex"].hook_groups("CMD", 5, needs)["PreToolUse"]
    assert "if" not in group["hooks"][0]
    for tool in ("Bash", "apply_patch", "mcp__gitlab__merge_pull_request"):
        assert matcher_takes(group["matcher"], tool)
    assert not matcher_takes(group["matcher"], "BashOutput")


def test_all_commands_leaves_the_filter_out() -> None:
    groups = AGENTS["claude-code"].hook_groups("CMD", 5, NEEDS, prefilter=False)
    (group,) = groups["PreToolUse"]
    assert "if" not in group["hooks"][0]
    assert matcher_takes(group["matcher"], "Bash")


def installed(agent: str, groups: list[dict[str, object]]) -> list[InstalledEntry]:
    return [
        InstalledEntry(Path("/s"), "PreToolUse", g, h, hook, group.get("matcher"))  # type: ignore[arg-type]
        for g, group in enumerate(groups)
        for h, hook in enumerate(group["hooks"])  # type: ignore[arg-type]
    ]


def test_an_older_registration_misses_the_mcp_tools() -> None:
    agent = AGENTS["claude-code"]
    old = installed("claude-code", [agent.hook_group("CMD", 5)])  # matcher Bash, every command
    gaps = agent.registration_gaps(old, NEEDS)
    assert gaps == [f"MCP tool {glob}" for glob in NEEDS.mcp_tools]
    current = installed("claude-code", agent.hook_groups("CMD", 5, NEEDS)["PreToolUse"])
    assert agent.registration_gaps(current, NEEDS) == []


def test_a_filter_without_a_program_is_a_gap() -> None:
    agent = AGENTS["claude-code"]
    needs = HookNeeds(commands=(("git", "commit"), ("kubectl", "apply")))
    only_git = installed(
        "claude-code",
        agent.hook_groups("CMD", 5, HookNeeds(commands=(("git", "commit"),)))["PreToolUse"],
    )
    assert agent.registration_gaps(only_git, needs) == ["shell commands (kubectl apply)"]


def test_hundreds_of_git_aliases_are_each_registered_and_a_missing_one_is_a_gap() -> None:
    # One condition per alias: `hooks status` checks each command against hundreds of
    # entries. `*git*zq*` also takes `git xzqy`, which gets no condition of its own.
    agent = AGENTS["claude-code"]
    aliases = [f"al{i}x" for i in range(300)] + ["zq", "xzqy"]
    needs = hook_needs(load_action_table(Config()), aliases)
    patterns = needs.command_patterns()
    assert {"*git*al0x*", "*git*al299x*", "*git*zq*"} <= set(patterns)
    assert "*git*xzqy*" not in patterns
    assert "*git*al1x*" in patterns  # not taken by `*git*al11x*` nor taking it
    entries = installed("claude-code", agent.hook_groups("CMD", 5, needs)["PreToolUse"])
    assert len(entries) > 300
    assert agent.registration_gaps(entries, needs) == []
    without_one = [entry for entry in entries if entry.handler.get("if") != "Bash(*git*al7x*)"]
    assert agent.registration_gaps(without_one, needs) == ["shell commands (git al7x)"]
    without_zq = [entry for entry in entries if entry.handler.get("if") != "Bash(*git*zq*)"]
    assert agent.registration_gaps(without_zq, needs) == ["shell commands (git xzqy, git zq)"]


def test_kiro_reads_no_condition_a_shell_matcher_covers_every_command() -> None:
    agent = AGENTS["kiro-cli"]
    needs = HookNeeds(commands=(("git", "commit"), ("kubectl", "apply")), edits=True)
    entries = [
        InstalledEntry(Path("/s"), "preToolUse", i, -1, entry, entry["matcher"])
        for i, entry in enumerate(agent.hook_groups("CMD", 5, needs)["preToolUse"])
    ]
    assert agent.registration_gaps(entries, needs) == []
    shell = min(agent.shell_tools)
    no_shell = [entry for entry in entries if entry.matcher != shell]
    assert agent.registration_gaps(no_shell, needs) == [
        "shell commands (git commit, kubectl apply)"
    ]


# --------------------------------------------------------------- Codex's apply_patch


PATCH = """*** Begin Patch
*** Add File: db/migrations/0042_x.sql
+create table x ();
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet():
-print("Hi")
+print("Hello")
*** Delete File: obsolete.txt
*** End Patch
"""


def test_an_apply_patch_names_the_files_it_writes() -> None:
    assert patched_files(PATCH) == (
        "db/migrations/0042_x.sql",
        "src/app.py",
        "src/main.py",
        "obsolete.txt",
    )
    event = json.dumps(
        {
            "hook_event_name": "PreToolUse",
            "session_id": "s",
            "cwd": "/repo",
            "tool_name": "apply_patch",
            "tool_input": {"command": PATCH},
            "tool_use_id": "call-1",
        }
    ).encode()
    call = AGENTS["codex"].decode(event)
    assert call is not None
    assert getattr(call, "edited", ()) == patched_files(PATCH)


# ---------------------------------------------------- install and status, end to end


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "MENTED_SOCKET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MENTED_SOCKET", str(tmp_path / "no-daemon.sock"))
    monkeypatch.setenv("MENTED_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.chdir(tmp_path)
    return home


def test_a_new_tool_trigger_shows_in_status_until_installed_again(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hooks", "install", "claude-code"]) == 0
    assert main(["hooks", "status"]) == 0
    capsys.readouterr()
    (tmp_path / "config.toml").write_text(
        '[actions.deploy]\ntools = ["infra/deploy_*"]\npaths = ["deploy/**"]\n'
    )
    assert load_table_in_force(tmp_path / "config.toml").problem is None
    assert main(["hooks", "status"]) == 1
    out = capsys.readouterr().out
    edits = "file edits (Edit, MultiEdit, NotebookEdit, Write)"
    assert f"not registered for {edits}; MCP tool infra/deploy_*" in out
    assert "mentectl hooks install claude-code` again" in out
    assert main(["hooks", "install", "claude-code"]) == 0
    assert "Updated" in capsys.readouterr().out
    assert main(["hooks", "status"]) == 0
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    matcher = settings["hooks"]["PreToolUse"][1]["matcher"]
    assert matcher_takes(matcher, "mcp__infra__deploy_prod")
    assert matcher_takes(matcher, "Write")


# --------------------------------------------------------------- the other agents


def test_gemini_registers_the_tools_the_table_names_and_reports_an_older_install() -> None:
    agent = AGENTS["gemini-cli"]
    needs = HookNeeds(
        commands=(("git", "commit"),), mcp_tools=("*/create_pull_request",), edits=True
    )
    groups = agent.hook_groups("CMD", 5, needs)
    (before,) = groups["BeforeTool"]
    assert groups["AfterTool"][0]["matcher"] == before["matcher"]
    for tool in ("run_shell_command", "write_file", "replace", "mcp_github_create_pull_request"):
        assert matcher_takes(before["matcher"], tool), tool
    for tool in ("read_file", "run_shell_command_x", "mcp_github_list_issues"):
        assert not matcher_takes(before["matcher"], tool), tool
    entries = [
        InstalledEntry(Path("/s"), event, 0, 0, group[0]["hooks"][0], group[0].get("matcher"))
        for event, group in groups.items()
    ]
    assert agent.registration_gaps(entries, needs) == []
    old = [
        InstalledEntry(Path("/s"), "BeforeTool", 0, 0, {}, agent.hook_group("CMD", 5)["matcher"])
    ]
    assert agent.registration_gaps(old, needs) == [
        "file edits (replace, write_file)",
        "MCP tool */create_pull_request",
    ]


@pytest.mark.parametrize("name", ["copilot-cli", "cursor"])
def test_flat_agents_register_every_shell_command_whatever_the_table(name: str) -> None:
    agent = AGENTS[name]
    assert agent.hook_groups("CMD", 5, NEEDS) == agent.hook_groups("CMD", 5)
    assert all(len(entries) == 1 for entries in agent.hook_groups("CMD", 5, NEEDS).values())
    assert "every shell command" in agent.registration_summary(NEEDS)


def test_the_users_git_aliases_and_inline_ones_still_reach_the_hook() -> None:
    # `git ci` is a commit for a user with `[alias] ci = commit`.
    patterns = hook_needs(load_action_table(Config()), ["ci", "pushf"]).command_patterns()
    for command in ("git ci -m x", "git -c alias.c=commit c -m x", "sudo git pushf"):
        assert any(wildcard_matches(pattern, command) for pattern in patterns), command
    assert not any(wildcard_matches(pattern, "git status") for pattern in patterns)


def claude_code_filter(needs: HookNeeds) -> list[str]:
    """The `Bash(...)` conditions Claude Code would hold, as installed."""
    shell = AGENTS["claude-code"].hook_groups("CMD", 5, needs)["PreToolUse"][0]
    return [hook["if"].removeprefix("Bash(").removesuffix(")") for hook in shell["hooks"]]


@pytest.mark.parametrize("aliases", [["g"], ["c", "p"], ["ci"], ["co", "st", "g", "pushf"]])
def test_a_users_short_git_aliases_never_drop_another_actions_command(aliases: list[str]) -> None:
    # An alias `g` becomes `*git*g*`, which can stand for `*git*merge*` (merge has a
    # g) but not for `*git*commit*`: leaving out the wrong one loses its rules.
    patterns = claude_code_filter(hook_needs(BUILTIN, aliases))
    commands = [c for c in action_commands() if c.lstrip().startswith("git ")]
    for command in ["git commit -m x", "git push origin main", "git tag v1", *commands]:
        assert any(wildcard_matches(pattern, command) for pattern in patterns), (aliases, command)
    for alias in aliases:
        assert any(wildcard_matches(pattern, f"git {alias} x") for pattern in patterns)


@pytest.mark.parametrize(
    ("general", "specific", "expected"),
    [
        ("*git*g*", "*git*commit*", False),  # "git commit" has no g after git
        ("*git*g*", "*git*merge*", True),
        ("*git*c*", "*git*commit*", True),
        ("*git*ci*", "*git*commit*", False),
        ("*git*it*", "*git*commit*", True),  # inside commit
        ("*git*it*", "*git*push*", False),  # "git" own "it" is not after "git"
        ("*npm*i*", "*npm*install*", True),
        ("*git*commit*", "*git*commit*", True),
        ("*git*push*", "*git*", False),
        ("*stash*drop*", "*git*stash*drop*", True),
        ("*sh*drop*", "*git*stash*", False),
        ("*ab*", "*a*b*", False),  # text may come between a and b
    ],
)
def test_a_pattern_stands_for_another_only_when_every_line_it_takes_matches(
    general: str, specific: str, *, expected: bool
) -> None:
    assert _subsumes(general, specific) is expected
    if expected:  # a line the specific pattern takes, shortest form: the general one too
        sample = " ".join(part for part in specific.split("*") if part)
        assert wildcard_matches(general, sample)


def test_an_action_with_many_subcommand_alternatives_still_starts_the_hook() -> None:
    # 5 x 5 = 25 word sequences, past MAX_SEQUENCES_PER_SHAPE: filtered on the
    # program alone, never left out.
    config = Config(
        actions={
            "ship": {
                "shapes": [{"program": "shipit", "subcommand": [list("abcde"), list("vwxyz")]}]
            }
        }
    )
    patterns = claude_code_filter(hook_needs(load_action_table(config)))
    for command in ("shipit a v", "shipit e z", "sudo shipit c x --now"):
        assert Matcher(load_action_table(config)).actions_in(command) == ("ship",)
        assert any(wildcard_matches(pattern, command) for pattern in patterns), command
    assert not any(wildcard_matches(pattern, "ls -la") for pattern in patterns)


def test_reload_and_rule_add_say_when_the_installed_filter_misses_a_new_action(
    daemon: DaemonProcess,
) -> None:
    daemon.mentectl("hooks", "install", "claude-code")
    again = "run `mentectl hooks install claude-code` again"
    assert again not in daemon.mentectl("reload").stderr
    daemon.write_config(
        '[actions.release-notes]\ndescription = "build the release notes"\n'
        'shapes = [{ program = "towncrier", subcommand = ["build"] }]\n'
    )
    reloaded = daemon.mentectl("reload")
    assert "configuration reloaded" in reloaded.stdout
    assert "the hook is not registered for shell commands (towncrier build)" in reloaded.stderr
    assert again in reloaded.stderr
    assert json.loads(daemon.mentectl("--json", "reload").stdout)["warnings"] == [
        reloaded.stderr.removeprefix("mentectl: warning: ").strip()
    ]

    added = daemon.mentectl("rule", "add", "release-notes", "past tense, one line each")
    assert "added rule" in added.stdout
    assert again in added.stderr
    # A rule for an action the filter covers says nothing.
    assert again not in daemon.mentectl("rule", "add", "git-commit", "one line").stderr
    assert again in daemon.mentectl("hooks", "status", check=False).stdout

    daemon.mentectl("hooks", "install", "claude-code")
    assert again not in daemon.mentectl("reload").stderr
    assert again not in daemon.mentectl("rule", "add", "release-notes", "no emojis").stderr


# MCP tool globs as an action's `tools` may name them, and tool names to read them with.
TOOL_GLOBS = ["github", "git*", "?ithub", "[gh]ub", "[!a]x", "[!a-w]*", "a[\\]b", "[]x]", "x[0-9]"]
TOOL_NAMES = ["github", "gitlab", "hub", "gub", "ax", "bx", "xx", "a\\b", "]", "x", "x5", "git"]


@pytest.mark.parametrize("glob", TOOL_GLOBS)
def test_a_tool_glob_reads_in_the_agents_regex_as_the_glob_does(glob: str) -> None:
    # The installed matcher (`mcp__SERVER__TOOL`) takes the names the glob takes, no
    # other; and `hooks status` checks it with a name the glob takes (else it would
    # say the tool is not registered, however often it is installed).
    regex = re.compile(glob_to_regex(glob))
    for name in TOOL_NAMES:
        assert (regex.fullmatch(name) is not None) is fnmatchcase(name, glob), (glob, name)
    if not glob.startswith("[]"):  # (a class opening with `]` is never named in a sample)
        assert fnmatchcase(sample_name(glob), glob), sample_name(glob)
        assert regex.fullmatch(sample_name(glob)), sample_name(glob)


def test_a_tool_name_with_underscores_is_matched_as_written() -> None:
    # Codex reads the matcher with Rust's regex crate, which refuses `\_`.
    assert glob_to_regex("create_pull_request") == "create_pull_request"
    assert AGENTS["claude-code"].mcp_tool_pattern("my_server/create_*") == (
        "mcp__my_server__create_.*"
    )


def test_hooks_status_finds_an_installed_tool_named_by_a_negated_class() -> None:
    agent = AGENTS["claude-code"]
    needs = HookNeeds(mcp_tools=("linear/[!a]*",))
    current = installed("claude-code", agent.hook_groups("CMD", 5, needs)["PreToolUse"])
    assert agent.registration_gaps(current, needs) == []


def test_hooks_install_names_what_it_registered_in_words() -> None:
    needs = HookNeeds(
        commands=(("git", "commit"), ("gh", "pr", "create"), ("git", "push")),
        mcp_tools=("github/create_pull_request", "linear/*"),
        edits=True,
    )
    assert needs.summary() == (
        "shell commands of gh, git; MCP tools github/create_pull_request, linear/*; file edits"
    )
    assert HookNeeds(edits=True).summary() == "file edits"
    assert HookNeeds().summary() == "nothing (the action table names no trigger)"


def test_an_action_with_sixteen_subcommand_alternatives_keeps_its_words_in_the_filter() -> None:
    # 4 x 4 = 16 word sequences, at MAX_SEQUENCES_PER_SHAPE: each is its own
    # pattern, so the program's other commands start no hook.
    config = Config(
        actions={
            "ship": {"shapes": [{"program": "shipit", "subcommand": [list("abcd"), list("efgh")]}]}
        }
    )
    patterns = claude_code_filter(hook_needs(load_action_table(config), only={"ship"}))
    assert len(patterns) == 16
    for command in ("shipit a e", "shipit d h", "sudo shipit c f --now"):
        assert any(wildcard_matches(pattern, command) for pattern in patterns), command
    assert not any(wildcard_matches(pattern, "shipit status") for pattern in patterns)


def test_a_subcommand_word_that_may_be_any_word_does_not_narrow_the_filter() -> None:
    # `["*", "now"]` takes any word, as the matcher reads it: `shipit later go` performs
    # the action and must reach the hook.
    config = Config(
        actions={"ship": {"shapes": [{"program": "shipit", "subcommand": [["*", "now"], "go"]}]}}
    )
    table = load_action_table(config)
    patterns = claude_code_filter(hook_needs(table, only={"ship"}))
    for command in ("shipit later go", "shipit now go"):
        assert Matcher(table).actions_in(command) == ("ship",)
        assert any(wildcard_matches(pattern, command) for pattern in patterns), (command, patterns)
