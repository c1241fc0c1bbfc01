"""Checks before the command, with a real daemon and the real shim (mented.prechecks)."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

import pytest

from mented.config import ConfigError, load_config
from mented.memory import short_handle
from tests.test_hook_e2e import Agent, context

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import DaemonProcess

POST_RULE = "commit messages: single line, conventional prefix, no emojis"
CHECKS = (
    "--check",
    "message single-line",
    "--check",
    r"subject matches ^(feat|fix|docs|chore|refactor|test)(\(.+\))?!?: ",
    "--check",
    "message no-emoji",
)
BAD = 'git commit -m "Fixed the login bug 🎉"'
GOOD = 'git commit -m "fix: login bug"'


@pytest.fixture
def claude(daemon: DaemonProcess) -> Agent:
    return Agent(daemon, "claude-code", daemon.home / ".claude" / "settings.json")


def add_post_rule(daemon: DaemonProcess, *extra: str) -> str:
    out = daemon.mentectl("rule", "add", "git-commit", POST_RULE, *CHECKS, *extra, "--json")
    return str(json.loads(out.stdout)["id"])


def decision(out: bytes) -> str:
    """ "deny", "context" or "" (silence) for a Claude Code answer."""
    if not out:
        return ""
    specific = json.loads(out)["hookSpecificOutput"]
    return "deny" if specific.get("permissionDecision") == "deny" else "context"


def test_a_violating_commit_is_stopped_up_to_the_bound_then_let_through(
    daemon: DaemonProcess, claude: Agent
) -> None:
    rule_id = add_post_rule(daemon)
    answers = [claude.bash(BAD, session="s1") for _ in range(4)]
    assert [decision(out) for out in answers[:3]] == ["deny", "deny", "deny"]
    first = context(answers[0])
    assert first.startswith("mented stopped this command: it breaks a rule of the user's.")
    assert f"[{short_handle(rule_id)}] {POST_RULE}" in first
    assert "'Fixed the login bug 🎉' does not match ^(feat|fix" in first
    assert "holds 🎉 (party popper)" in first
    assert "stop 1 of at most 3" in first
    assert "stop 3 of at most 3" in context(answers[2])
    # The fourth attempt runs: the model is told, and the log says it was let through.
    assert decision(answers[3]) == "context"
    assert "let this command run after 3 stops" in context(answers[3])
    log = json.loads(daemon.mentectl("log", "--json").stdout)
    whys = [fire["why"] for fire in log["fires"]]
    assert "let through" in whys[0]
    assert whys[1:4] == ["a check of its rules failed"] * 3


def test_a_passing_commit_is_not_stopped_for_checks(daemon: DaemonProcess, claude: Agent) -> None:
    add_post_rule(daemon)
    # A new session: the rules are handed over once (the delivery stop), never for checks.
    first = claude.bash(GOOD, session="s2")
    assert "it breaks" not in context(first)
    assert decision(claude.bash(GOOD, session="s2")) in ("", "context")
    later = claude.bash('git commit -m "docs: readme"', session="s2")
    assert decision(later) == "context"
    assert "still apply" in context(later)


def test_stopped_long_after_the_rules_were_handed_over(
    daemon: DaemonProcess, claude: Agent
) -> None:
    add_post_rule(daemon)
    claude.bash(GOOD, session="s3")  # handed over in full
    for _ in range(3):
        claude.bash('git commit -m "test: more"', session="s3")
    out = claude.bash(BAD, session="s3")
    assert decision(out) == "deny"
    reason = context(out)
    assert "does not match" in reason
    assert POST_RULE in reason


def test_a_superseded_rules_new_checks_apply_at_once(daemon: DaemonProcess, claude: Agent) -> None:
    rule_id = add_post_rule(daemon)
    claude.bash(GOOD, session="s4")  # handed over
    daemon.mentectl(
        "rule", "supersede", rule_id, "subjects at most 20 characters", "--check", "subject max 20"
    )
    out = claude.bash('git commit -m "fix: a subject of forty-one characters!!"', session="s4")
    assert decision(out) == "deny"
    subject = "fix: a subject of forty-one characters!!"
    assert f"the subject is {len(subject)} characters; at most 20" in context(out)
    # The old version's checks are gone with it: an emoji passes now.
    assert "it breaks" not in context(claude.bash('git commit -m "fix 🎉"', session="s4"))


def test_tell_mode_delivers_the_failures_and_lets_it_run(
    daemon: DaemonProcess, claude: Agent
) -> None:
    daemon.write_config('[checks]\nmode = "tell"\n')
    daemon.reload()
    add_post_rule(daemon)
    out = claude.bash(BAD, session="s5")
    assert decision(out) == "context"
    text = context(out)
    assert "This command breaks a rule of the user's; it runs anyway." in text
    assert POST_RULE in text  # the rule itself, handed over with it


def test_per_action_mode(daemon: DaemonProcess, claude: Agent) -> None:
    daemon.write_config('[checks]\nmode = "tell"\ngit-commit = "stop"\n')
    daemon.reload()
    add_post_rule(daemon)
    assert decision(claude.bash(BAD, session="s6")) == "deny"


def test_a_team_rules_checks_apply_only_once_trusted(
    daemon: DaemonProcess, claude: Agent, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    daemon.mentectl(
        "rule",
        "add",
        "--team",
        "git-commit",
        "team: short subjects",
        "--check",
        "subject max 10",
        cwd=repo,
    )
    rules_file = json.loads((repo / ".mented" / "rules.jsonl").read_text().splitlines()[-1])
    assert rules_file["checks"] == ["subject max 10"]
    long_commit = 'git commit -m "fix: this subject is long"'
    before = claude.bash(long_commit, cwd=str(repo), session="s7")
    assert b"it breaks" not in before  # not trusted: the rule and its checks are not used
    daemon.mentectl("trust", str(repo))
    out = claude.bash(long_commit, cwd=str(repo), session="s8")
    assert decision(out) == "deny"
    assert f"the subject is {len('fix: this subject is long')} characters; at most 10" in context(
        out
    )


def test_rule_add_team_refuses_a_bad_check(daemon: DaemonProcess, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    result = daemon.mentectl(
        "rule", "add", "--team", "git-commit", "x", "--check", "title max 3", cwd=repo, check=False
    )
    assert result.returncode == 2
    assert "git-commit has no field 'title'" in result.stderr
    assert not (repo / ".mented" / "rules.jsonl").exists()


def test_checks_config_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    for text, said in [
        ("[checks]\nmax_stops = 0\n", "max_stops = 0"),
        ('[checks]\nmode = "block"\n', 'take "stop"'),
        ("[checks]\nmax_stops = true\n", "whole number"),
    ]:
        path.write_text(text)
        with pytest.raises(ConfigError, match=said):
            load_config(path)
    path.write_text('[checks]\nmax_stops = 5\nmode = "tell"\ngit-push = "stop"\n')
    checks = load_config(path).checks
    assert (checks.max_stops, checks.mode_of("git-commit"), checks.mode_of("git-push")) == (
        5,
        "tell",
        "stop",
    )


def test_explain_shows_the_fields_and_each_checks_outcome(daemon: DaemonProcess) -> None:
    rule_id = add_post_rule(daemon)
    shown = daemon.mentectl("explain", BAD).stdout
    handle = short_handle(rule_id)
    assert "fields of git-commit:" in shown
    assert "  subject:  'Fixed the login bug 🎉'" in shown
    assert f"check [{handle}] 'message single-line': passed" in shown
    assert f"check [{handle}] 'message no-emoji': failed: the message" in shown
    editor = json.loads(daemon.mentectl("explain", "--json", "git commit --amend").stdout)
    (commit,) = editor["fields"]
    assert "editor" in commit["unknown"]["message"]
    assert {check["outcome"] for check in commit["checks"]} == {"unknown"}
