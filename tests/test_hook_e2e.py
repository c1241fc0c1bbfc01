"""The hook end to end, with real processes, as the agent runs it.

A real daemon; rules added with `mentectl`; the hook command line taken from the
settings file that `mentectl hooks install` wrote; run through the shell with a
real PreToolUse payload on stdin, exactly as Claude Code or Codex would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from mented.agents.pretooluse import pretooluse_event
from mented.memory import short_handle
from mented.protocol import StatusReply, StatusRequest
from tests.conftest import DaemonProcess

COMMIT = 'git -c commit.gpgsign=false commit -m "fix: x"'
HEREDOC_COMMIT = """git commit -m "$(cat <<'EOF'
fix: handle empty input

Co-Authored-By: Claude <noreply@anthropic.com>
EOF
)\""""
# The budget is proven by the shim's fault matrix; here a loaded machine must not
# turn a slow start into a silent answer.
BUDGET_ENV = {"MENTED_HOOK_BUDGET_MS": "3000"}
PYTHON = sys.executable
_tool_use_ids = count()
_sessions = count()


class Agent:
    """Runs the installed hook the way an agent does."""

    def __init__(self, daemon: DaemonProcess, name: str, settings: Path) -> None:
        self.daemon = daemon
        self.name = name
        result = daemon.mentectl("hooks", "install", name)
        assert "Installed" in result.stdout
        doc = json.loads(settings.read_text())
        # The shell group first (with Claude Code's conditions, one handler each), all one command.
        groups = doc["hooks"]["PreToolUse"]
        assert "Bash" in groups[0]["matcher"]
        hooks = [hook for group in groups for hook in group["hooks"]]
        assert len({hook["command"] for hook in hooks}) == 1
        hook = hooks[0]
        self.command: str = hook["command"]
        self.timeout: int = hook["timeout"]

    def run(
        self,
        payload: dict[str, Any] | bytes,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        stdin = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        result = subprocess.run(
            self.command,
            shell=True,
            input=stdin,
            capture_output=True,
            env=env or (self.daemon.env | BUDGET_ENV),
            timeout=self.timeout,
            check=False,
        )
        assert result.returncode == 0
        assert result.stderr == b""
        return result

    def bash(self, command: str, *, cwd: str = "/home/u/repo", session: str | None = None) -> bytes:
        """What the agent reads back before running `command` in `cwd`.

        Each call is a new session unless one is named: a session is handed its
        rules in full once, then a pointer.
        """
        session = session or f"session-{next(_sessions)}"
        return self.run(pre_tool_use(command, cwd=cwd, session=session)).stdout


def pre_tool_use(
    command: str, *, cwd: str = "/home/u/repo", session: str = "session-1", **fields: Any
) -> bytes:
    """Claude Code's event before running `command`, each a new tool use (a repeat is muted)."""
    return pretooluse_event(
        command,
        cwd=cwd,
        session=session,
        tool_use_id=f"toolu_{next(_tool_use_ids):08d}",
        transcript_path=f"/home/u/.claude/projects/repo/{session}.jsonl",
        permission_mode="default",
        **fields,
    )


def context(out: bytes) -> str:
    """The rules text of an answer: a stop's reason or the extra context, nothing else."""
    specific = json.loads(out)["hookSpecificOutput"]
    if "permissionDecision" in specific:
        assert set(specific) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
        assert specific["permissionDecision"] == "deny"
        reason: str = specific["permissionDecisionReason"]
        return reason
    assert set(specific) == {"hookEventName", "additionalContext"}
    text: str = specific["additionalContext"]
    return text


def add_rule(daemon: DaemonProcess, action: str, text: str, *scope: str) -> str:
    out = daemon.mentectl("rule", "add", action, text, *scope, "--json").stdout
    return str(json.loads(out)["id"])


@pytest.fixture
def claude(daemon: DaemonProcess) -> Agent:
    return Agent(daemon, "claude-code", daemon.home / ".claude" / "settings.json")


def test_the_commit_rule_reaches_the_commit_and_only_the_commit(
    daemon: DaemonProcess, claude: Agent
) -> None:
    add_rule(daemon, "git-commit", "commit messages: single line, conventional prefix")
    add_rule(daemon, "pr-create", "PR descriptions list the tests run")
    text = context(claude.bash(COMMIT))
    assert "single line, conventional prefix" in text
    assert "PR descriptions" not in text
    assert "single line" in context(claude.bash(HEREDOC_COMMIT))
    assert claude.bash("git log --oneline -3") == b""
    edit = pre_tool_use(
        "", tool_name="Edit", tool_input={"file_path": "/home/u/repo/git_commit.py"}
    )
    assert claude.run(edit).stdout == b""


def fires(daemon: DaemonProcess) -> list[dict[str, Any]]:
    """The hook's recent fires, newest first, as `mentectl log --json` shows them."""
    found: list[dict[str, Any]] = json.loads(daemon.mentectl("log", "--json").stdout)["fires"]
    return found


def test_a_commit_without_rules_prints_nothing(daemon: DaemonProcess, claude: Agent) -> None:
    add_rule(daemon, "pr-create", "PR descriptions list the tests run")
    assert claude.bash(COMMIT, session="no-rules") == b""
    # Silent because there was nothing to say, not because nothing got through:
    (fire,) = fires(daemon)
    assert (fire["session"], fire["actions"], fire["mode"]) == ("no-rules", ["git-commit"], "none")
    assert "PR descriptions" in context(claude.bash("gh pr create --fill"))


@pytest.mark.parametrize("stdin", [b'"not an object"', b"{not json", b""])
def test_stdin_that_is_not_an_event_prints_nothing(
    daemon: DaemonProcess, claude: Agent, stdin: bytes
) -> None:
    add_rule(daemon, "git-commit", "single line")
    assert claude.run(stdin).stdout == b""
    assert fires(daemon) == []
    # The same hook, daemon and rule answer a real event.
    assert "single line" in context(claude.bash(COMMIT))
    assert len(fires(daemon)) == 1


def test_a_superseded_rule_is_gone_from_the_very_next_fire(
    daemon: DaemonProcess, claude: Agent
) -> None:
    old = add_rule(daemon, "git-commit", "merge with squash")
    assert f"[{short_handle(old)}] merge with squash" in context(claude.bash(COMMIT))
    out = daemon.mentectl("rule", "supersede", old, "rebase, never squash", "--json").stdout
    new = json.loads(out)["id"]
    text = context(claude.bash(COMMIT))  # a new session: named, no longer a rule
    replaces = f'(replaces [{short_handle(old)}] "merge with squash")'
    assert f"[{short_handle(new)}] {replaces} rebase, never squash" in text
    assert text.count(short_handle(old)) == text.count("merge with squash") == 1


def test_agent_and_project_scopes(daemon: DaemonProcess, claude: Agent, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    add_rule(daemon, "git-commit", "everyone's rule")
    add_rule(daemon, "git-commit", "codex-only rule", "--agent", "codex")
    add_rule(daemon, "git-commit", "claude-only rule", "--agent", "claude-code")
    add_rule(daemon, "git-commit", "project rule", "--project", str(project))
    codex = Agent(daemon, "codex", daemon.home / ".codex" / "hooks.json")

    inside = context(claude.bash(COMMIT, cwd=str(project / "src")))
    assert "claude-only rule" in inside
    assert "project rule" in inside
    assert "everyone's rule" in inside
    assert "codex-only rule" not in inside

    outside = context(codex.bash(COMMIT, cwd=str(tmp_path / "other")))
    assert "codex-only rule" in outside
    assert "everyone's rule" in outside
    assert "claude-only rule" not in outside
    assert "project rule" not in outside


def test_by_default_a_session_is_stopped_once_then_gets_one_line(
    daemon: DaemonProcess, claude: Agent
) -> None:
    add_rule(daemon, "git-commit", "commit messages: single line")

    first = json.loads(claude.bash(COMMIT, session="s-1"))["hookSpecificOutput"]
    assert first["permissionDecision"] == "deny"
    assert "single line" in first["permissionDecisionReason"]
    assert "Run it again once it follows them" in first["permissionDecisionReason"]
    assert claude.bash(COMMIT, session="s-1") == b""  # the retry: the model has the rules
    pointer = json.loads(claude.bash("git commit -m later", session="s-1"))["hookSpecificOutput"]
    assert set(pointer) == {"hookEventName", "additionalContext"}
    assert len(pointer["additionalContext"]) <= 120
    # The daemon restarts: the session still has the rules; no second stop.
    daemon.stop()
    daemon.start()
    assert "single line" not in context(claude.bash(COMMIT, session="s-1"))
    other = json.loads(claude.bash(COMMIT, session="s-2"))["hookSpecificOutput"]
    assert other["permissionDecision"] == "deny"

    fires = json.loads(daemon.mentectl("log", "-n", "10", "--json").stdout)["fires"]
    assert [(fire["session"], fire["mode"], fire["delivery"]) for fire in fires] == [
        ("s-2", "stop", "full"),
        ("s-1", "context", "pointer"),
        # Before the restart: kept on disk.
        ("s-1", "context", "pointer"),
        ("s-1", "none", "none"),  # the retry
        ("s-1", "stop", "full"),
    ]
    assert fires[0]["actions"] == ["git-commit"]
    text = daemon.mentectl("log").stdout
    assert "stopped once" in text
    assert "first time in this session" in text
    assert "this session already has them" in text


def test_context_delivery_hands_the_rules_over_after_the_command(
    daemon: DaemonProcess, claude: Agent
) -> None:
    add_rule(daemon, "git-commit", "commit messages: single line")
    daemon.write_config('[delivery]\ndefault = "context"\n')
    daemon.reload()
    out = json.loads(claude.bash(COMMIT, session="s-1"))["hookSpecificOutput"]
    assert out["additionalContext"].startswith("The command that just ran")


def test_the_fire_log_says_what_fired_and_why(daemon: DaemonProcess, claude: Agent) -> None:
    rule_id = add_rule(daemon, "git-commit", "single line")
    claude.bash(COMMIT, cwd="/home/u/repo")
    claude.bash("ls")
    (fire,) = fires(daemon)
    assert (fire["agent"], fire["command"], fire["cwd"]) == ("claude-code", COMMIT, "/home/u/repo")
    assert fire["rule_ids"] == [rule_id]
    text = daemon.mentectl("log").stdout
    assert "git-commit" in text
    assert COMMIT in text


def test_the_installed_socket_argument_is_used_without_the_environment(
    daemon: DaemonProcess, claude: Agent
) -> None:
    add_rule(daemon, "git-commit", "single line")
    env = {k: v for k, v in daemon.env.items() if k != "MENTED_SOCKET"} | BUDGET_ENV
    assert "single line" in context(claude.run(pre_tool_use(COMMIT), env=env).stdout)


def test_a_hook_installed_with_the_socket_option_needs_no_environment(
    daemon: DaemonProcess,
) -> None:
    # mentectl told where the daemon is by --socket alone; the agent knows nothing either.
    without_socket = {k: v for k, v in daemon.env.items() if k != "MENTED_SOCKET"}
    install = ["hooks", "install", "claude-code"]
    subprocess.run(
        [PYTHON, "-m", "mented_client.cli", "--socket", str(daemon.socket), *install],
        env=without_socket,
        check=True,
        capture_output=True,
        timeout=60,
    )
    settings = json.loads((daemon.home / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    add_rule(daemon, "git-commit", "single line")
    result = subprocess.run(
        command,
        shell=True,
        input=pre_tool_use(COMMIT),
        capture_output=True,
        env=without_socket | BUDGET_ENV,
        timeout=30,
        check=True,
    )
    assert "single line" in context(result.stdout)


def test_daemon_down_prints_nothing(daemon: DaemonProcess, claude: Agent) -> None:
    add_rule(daemon, "git-commit", "single line")
    daemon.stop()
    assert claude.bash(COMMIT) == b""


def served(daemon: DaemonProcess) -> int:
    """How many requests the daemon answered (this one not counted)."""
    with daemon.client() as client:
        return client.expect(StatusRequest(), StatusReply).requests_served  # type: ignore[union-attr]


def test_an_answer_the_shim_gave_up_on_is_not_counted_as_handed_over(
    daemon: DaemonProcess, claude: Agent
) -> None:
    # Issue 22, item 4: while the daemon was held up, the shim gave up and printed
    # nothing; the daemon then read the queued request, answered it, and recorded
    # "stopped once, rules handed over": the retry got nothing, the session never
    # saw the rules. The shim's deadline travels with the request now.
    add_rule(daemon, "git-commit", "commit messages: single line")
    before = served(daemon)
    os.kill(daemon.proc.pid, signal.SIGSTOP)  # held up: nothing is read or answered
    try:
        late = claude.run(
            pre_tool_use(COMMIT, session="s-late"),
            env=daemon.env | {"MENTED_HOOK_BUDGET_MS": "300"},
        )
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)
    assert late.stdout == b""  # the shim gave up
    # The daemon comes back and reads the request that waited for it.
    deadline = time.monotonic() + 30
    while served(daemon) < before + 2:  # the status above, then the queued hook
        assert time.monotonic() < deadline, "the queued hook request was never read"
        time.sleep(0.02)
    retry = json.loads(claude.bash(COMMIT, session="s-late"))["hookSpecificOutput"]
    assert retry["permissionDecision"] == "deny"
    assert "commit messages: single line" in retry["permissionDecisionReason"]
    # And the stop was recorded this time: its retry passes.
    assert claude.bash(COMMIT, session="s-late") == b""
