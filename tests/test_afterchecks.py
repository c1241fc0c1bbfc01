"""After the command: a commit whose message was unknown before it ran is checked once made."""

from __future__ import annotations

import json
import os
import subprocess
import zlib
from typing import TYPE_CHECKING

import pytest

from mented import compliance, git_commits
from mented.actions import load_action_table
from mented.agents import AGENTS
from mented.agents.pretooluse import POST_TOOL_USE, pretooluse_event
from mented.compliance import ComplianceRecord
from mented.config import Config
from mented.hooks import HookHandler
from mented.matcher import Matcher
from mented.memory import short_handle
from mented.registration import hook_needs
from mented_client.commands.report import format_report, status_line
from tests.test_hooks import event

if TYPE_CHECKING:
    from pathlib import Path

    from mented.sessions import SessionMemory
    from mented.store import Store

RULE = "commit messages: single line, conventional prefix, no emojis"
CHECKS = [
    "message single-line",
    r"subject matches ^(feat|fix|docs|chore|refactor|test)(\(.+\))?!?: ",
    "message no-emoji",
]
# The editor git opens writes the message: the command line does not say it.
EDITOR_COMMIT = "git commit --allow-empty"


def handler(store: Store, sessions: SessionMemory) -> tuple[HookHandler, ComplianceRecord]:
    config = Config()
    hooks = HookHandler(store, Matcher(load_action_table(config)), config, sessions)
    record = ComplianceRecord(None)
    hooks.prechecks.compliance = record
    return hooks, record


def repository(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def git_commit(repo: Path, message: str, *args: str) -> None:
    """`git commit ARGS` in `repo`, with an editor that writes `message`."""
    (repo / ".message").write_text(message)
    editor = f"cp {repo / '.message'}"
    subprocess.run(
        ["git", "-c", "user.name=u", "-c", "user.email=u@example.com", "commit", *args],
        cwd=repo,
        env={**os.environ, "GIT_EDITOR": editor},
        check=True,
        capture_output=True,
    )


def after(command: str, repo: Path, agent: str = "claude-code") -> bytes:
    """The event the agent sends once `command` ran."""
    name = AGENTS[agent].post_tool_event
    return pretooluse_event(
        command,
        cwd=str(repo),
        session="session-1",
        tool_use_id="toolu_after",
        hook_event_name=name,
        tool_response={"stdout": "", "stderr": "", "interrupted": False},
    )


def note_of(out: bytes) -> str:
    specific = json.loads(out)["hookSpecificOutput"]
    assert specific["hookEventName"] == POST_TOOL_USE
    return str(specific["additionalContext"])


def run_before(hooks: HookHandler, command: str, repo: Path, agent: str = "claude-code") -> None:
    """The events before `command` runs: stopped once to hand the rule over, then its retry."""
    for _ in range(2):
        hooks.handle(agent, event(command, cwd=str(repo)))


def test_a_commit_written_in_the_editor_that_breaks_a_check_gets_a_note(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    rule = store.store(RULE, tags=["trigger:git-commit"], checks=CHECKS)
    hooks, record = handler(store, sessions)
    repo = repository(tmp_path / "repo")
    run_before(hooks, EDITOR_COMMIT, repo)
    git_commit(repo, "Fixed the login bug 🎉\n\nwith a body\n", "--allow-empty")
    note = note_of(hooks.handle("claude-code", after(EDITOR_COMMIT, repo)))
    assert note.startswith("mented: the commit you just made (")
    assert f"breaks [{short_handle(rule.id)}] {RULE}: " in note
    assert RULE in note
    assert "amend it." in note
    assert "emoji" in note
    assert "lines" in note  # single-line, said as what is wrong
    counts = record.summary().total
    assert (counts.checked, counts.failed_after, counts.passed_first) == (1, 1, 0)
    # Said once: the same event again (a hook installed twice) finds nothing left to say.
    assert hooks.handle("claude-code", after(EDITOR_COMMIT, repo)) == b""


def test_a_commit_from_the_editor_that_keeps_the_rule_is_counted_and_not_noted(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    store.store(RULE, tags=["trigger:git-commit"], checks=CHECKS)
    hooks, record = handler(store, sessions)
    repo = repository(tmp_path / "repo")
    run_before(hooks, EDITOR_COMMIT, repo)
    git_commit(repo, "fix: login bug\n", "--allow-empty")
    assert hooks.handle("claude-code", after(EDITOR_COMMIT, repo)) == b""
    counts = record.summary().total
    assert (counts.checked, counts.passed_first, counts.failed_after) == (1, 1, 0)


def test_an_amend_without_a_message_is_checked_on_the_amended_commit(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    store.store(RULE, tags=["trigger:git-commit"], checks=CHECKS)
    hooks, _ = handler(store, sessions)
    repo = repository(tmp_path / "repo")
    git_commit(repo, "Fixed it 🎉\n", "--allow-empty")  # stopped had it said so; it did not
    (repo / "file").write_text("more\n")
    subprocess.run(["git", "add", "file"], cwd=repo, check=True)
    command = "git commit --amend --no-edit"
    run_before(hooks, command, repo)
    git_commit(repo, "unused\n", "--amend", "--no-edit")
    assert "emoji" in note_of(hooks.handle("claude-code", after(command, repo)))


def test_a_commit_that_did_not_happen_gets_no_note(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    store.store(RULE, tags=["trigger:git-commit"], checks=CHECKS)
    hooks, record = handler(store, sessions)
    repo = repository(tmp_path / "repo")
    git_commit(repo, "Broke it 🎉\n", "--allow-empty")  # an old commit that breaks the rule
    run_before(hooks, "git commit", repo)
    # `git commit` with nothing staged fails: HEAD is where it was, nothing was made.
    assert hooks.handle("claude-code", after("git commit", repo)) == b""
    assert record.summary().total.failed_after == 0


def test_a_message_known_before_is_not_checked_again_after(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    store.store(RULE, tags=["trigger:git-commit"], checks=CHECKS)
    hooks, _ = handler(store, sessions)
    repo = repository(tmp_path / "repo")
    command = 'git commit --allow-empty -m "fix: login bug"'
    run_before(hooks, command, repo)
    git_commit(repo, "unused", "--allow-empty", "-m", "fix: login bug")
    assert hooks.handle("claude-code", after(command, repo)) == b""
    assert hooks.afterchecks._pending == {}


def test_without_checks_the_event_after_the_command_costs_nothing(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    store.store(RULE, tags=["trigger:git-commit"])  # a rule without checks
    hooks, _ = handler(store, sessions)
    repo = repository(tmp_path / "repo")
    run_before(hooks, EDITOR_COMMIT, repo)
    assert hooks.afterchecks._pending == {}  # nothing remembered, nothing read after
    git_commit(repo, "Fixed 🎉\n", "--allow-empty")
    assert hooks.handle("claude-code", after(EDITOR_COMMIT, repo)) == b""
    # Nor was the command matched again: the event is answered before any parse.
    assert hooks.recent_fires(10)[0].command == EDITOR_COMMIT
    assert len(hooks.recent_fires(10)) == 2


def test_gemini_cli_gets_the_note_with_what_its_after_event_says(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    store.store(RULE, tags=["trigger:git-commit"], checks=CHECKS)
    hooks, _ = handler(store, sessions)
    repo = repository(tmp_path / "repo")
    before = pretooluse_event(
        EDITOR_COMMIT,
        cwd=str(repo),
        session=None,
        tool_name="run_shell_command",
        hook_event_name="BeforeTool",
    )
    # No session id: nothing can be stopped, so the rule goes after the tool ran, in full.
    assert hooks.handle("gemini-cli", before) == b""
    git_commit(repo, "Fixed the login bug 🎉\n", "--allow-empty")
    out = hooks.handle(
        "gemini-cli",
        pretooluse_event(
            EDITOR_COMMIT,
            cwd=str(repo),
            session=None,
            tool_name="run_shell_command",
            hook_event_name="AfterTool",
        ),
    )
    specific = json.loads(out)["hookSpecificOutput"]
    assert specific["hookEventName"] == "AfterTool"
    text = specific["additionalContext"]
    assert text.startswith("mented: the commit you just made")
    assert RULE in text.split("\n\n", 1)[1]  # then the rule itself, as the event says it


def test_copilot_cli_gets_the_note_in_its_own_answer_shape(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    """Copilot CLI 1.0.102 drops Claude Code's `hookSpecificOutput` after a tool ran; the
    note goes as its own `{"additionalContext": ...}`, which reaches the model."""
    rule = store.store(RULE, tags=["trigger:git-commit"], checks=CHECKS)
    hooks, record = handler(store, sessions)
    repo = repository(tmp_path / "repo")
    run_before(hooks, EDITOR_COMMIT, repo, agent="copilot-cli")
    git_commit(repo, "Fixed the login bug 🎉\n", "--allow-empty")
    out = json.loads(hooks.handle("copilot-cli", after(EDITOR_COMMIT, repo, "copilot-cli")))
    assert list(out) == ["additionalContext"]
    assert out["additionalContext"].startswith("mented: the commit you just made (")
    assert f"[{short_handle(rule.id)}]" in out["additionalContext"]
    assert record.summary().total.failed_after == 1
    assert hooks.handle("copilot-cli", after(EDITOR_COMMIT, repo, "copilot-cli")) == b""


# ------------------------------------------------------------------ installing


@pytest.mark.parametrize("name", ["claude-code", "codex"])
def test_the_event_after_a_command_is_installed_for_shell_commands(name: str) -> None:
    agent = AGENTS[name]
    needs = hook_needs(load_action_table(Config()))
    groups = agent.hook_groups("CMD", 5, needs)
    assert POST_TOOL_USE in agent.hook_events
    after = groups[POST_TOOL_USE]
    assert [group["matcher"] for group in after] == ["Bash"]  # no MCP tools, no edits
    hooks = [hook for group in after for hook in group["hooks"]]
    assert {hook["statusMessage"] for hook in hooks} == {"mented: checking what the command did"}
    if name == "claude-code":  # pre-filtered: the commands that can make a commit alone
        before = {hook.get("if") for hook in groups["PreToolUse"][0]["hooks"]}
        conditions = {hook.get("if") for hook in hooks}
        assert "Bash(*git*commit*)" in conditions
        assert conditions != before
        assert "Bash(*gh*pr*create*)" in before - conditions


def test_copilot_cli_gets_the_event_after_a_command_for_its_shell_tool() -> None:
    agent = AGENTS["copilot-cli"]
    groups = agent.hook_groups("CMD", 5, hook_needs(load_action_table(Config())))
    assert POST_TOOL_USE in agent.hook_events
    after = groups[POST_TOOL_USE]
    assert [(entry["matcher"], entry["bash"]) for entry in after] == [("bash", "CMD")]


# ------------------------------------------------------------ reading the commit


def test_the_commit_is_read_from_a_worktree_and_packed_refs(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    git_commit(repo, "fix: one\n", "--allow-empty")
    subprocess.run(["git", "pack-refs", "--all"], cwd=repo, check=True)
    subprocess.run(["git", "worktree", "add", "-q", str(tmp_path / "wt")], cwd=repo, check=True)
    for place in (repo, tmp_path / "wt"):
        commit = git_commits.head_commit(str(place))
        assert commit is not None
        assert commit.message == "fix: one\n"


def test_a_repository_config_chooses_no_program(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    git_commit(repo, "fix: one\n", "--allow-empty")
    marker = tmp_path / "ran"
    with (repo / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marker}\n\tpager = touch {marker}\n")
    assert git_commits.head_commit(str(repo)) is not None
    assert not marker.exists()


def test_hostile_git_files_are_unknown_never_followed_or_waited_on(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    git_commit(repo, "fix: one\n", "--allow-empty")
    oid = git_commits.head(str(repo))
    assert oid is not None
    obj = repo / ".git" / "objects" / oid[:2] / oid[2:]
    # A deflate bomb in place of the commit: cut at the bound, never inflated in full.
    obj.chmod(0o644)
    obj.write_bytes(zlib.compress(b"commit 99999999\0" + b"\0" * (64 * 1024 * 1024), 9))
    assert git_commits.head_commit(str(repo)) is None
    # A named pipe: refused at once, not waited on.
    obj.unlink()
    os.mkfifo(obj)
    assert git_commits.head_commit(str(repo)) is None
    # HEAD a symbolic link, or naming a ref outside refs/: unknown.
    head = repo / ".git" / "HEAD"
    head.unlink()
    (tmp_path / "elsewhere").write_text(oid + "\n")
    head.symlink_to(tmp_path / "elsewhere")
    assert git_commits.head(str(repo)) is None
    head.unlink()
    head.write_text("ref: refs/../../../elsewhere\n")
    assert git_commits.head(str(repo)) is None
    head.write_text("ref: refs/heads/\udcff\n", errors="surrogateescape")
    assert git_commits.head(str(repo)) is None


# ------------------------------------------------------------------ the record


def test_the_report_shows_what_failed_after_the_fact(tmp_path: Path) -> None:
    record = ComplianceRecord(tmp_path)
    for what in ("checked", "failed_after"):
        record.note("01JRULE0000000000000000000", "claude-code", what)
    reply = compliance.report(record, since=0.0, agent=None, rule_of=lambda _: None)
    header, row = format_report(reply).splitlines()[1:3]
    column = header.index("FAILED AFTER")
    assert row[column:].split()[0] == "1"
    assert status_line(reply.total) == (
        "checked 1 commands in 7 days: 0% passed first time, 0 stopped, 0 let through, "
        "1 failed after the fact"
    )
    record.close()
    assert ComplianceRecord(tmp_path).summary().total.failed_after == 1  # kept across a restart


@pytest.mark.parametrize("agent", ["opencode", "pi"])
def test_an_in_process_plugin_gets_the_note_and_the_rule_it_was_handed(
    store: Store, sessions: SessionMemory, tmp_path: Path, agent: str
) -> None:
    """The note after a commit comes with the rule the plugin's after-tool answer
    carries, read in the plugin's own answer shape, not dropped for it."""
    store.store(RULE, tags=["trigger:git-commit"], checks=CHECKS)
    hooks, _ = handler(store, sessions)
    repo = repository(tmp_path / "repo")
    adapter = AGENTS[agent]
    # No session id: nothing can be stopped, so the rule goes after the tool ran, in full.
    no_session = adapter.sample_event(EDITOR_COMMIT, cwd=str(repo), session="")
    assert hooks.handle(agent, no_session) == b""
    git_commit(repo, "Fixed the login bug 🎉\n", "--allow-empty")
    ran = json.loads(no_session)
    ran["hook_event_name" if agent == "opencode" else "event"] = adapter.after_event
    out = hooks.handle(agent, json.dumps(ran).encode())
    text = adapter.answer_text(out)
    assert text is not None
    assert text.startswith("mented: the commit you just made")
    assert RULE in text.split("\n\n", 1)[1]
