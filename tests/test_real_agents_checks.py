"""With the real Claude Code and Codex CLI: the post's rule and its three checks.

As in tests/test_real_agents.py (its helpers and the scripted model): a real
daemon, the hook installed with `mentectl hooks install`, one run of the agent per
test in a fresh repository. Here the rule carries checks, and the model does not
retry a stopped command: it runs the next one of its script, as a model that read
why it was stopped would.

- A commit that breaks the checks is stopped with the failed checks before it
  runs; the conforming commit that follows lands, once; the report counts one
  stop and one pass.
- A commit whose message comes from the editor (unknown before it runs) is
  checked once made, and the note after the fact reaches the model.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mented.memory import MemoryType, short_handle, trigger_tag
from mented.protocol import StoredReply, StoreRequest
from tests.conftest import DaemonProcess
from tests.model_server import ModelServer, Script, Turn
from tests.real_agents import AgentSession, commit_count
from tests.real_agents import agent_session as shared_agent_session
from tests.test_real_agents import PROMPT, RULE, session

pytestmark = pytest.mark.agents

__all__ = ["session"]  # the per-test fixture, on this module's agents

CHECKS = [
    "message single-line",
    r"subject matches ^(feat|fix|docs|chore|refactor|test)(\(.+\))?!?: ",
    "message no-emoji",
]
BAD = 'git commit --allow-empty -m "Fixed the login bug 🎉"'
GOOD = 'git commit --allow-empty -m "fix: login bug"'
# git runs the editor as `sh -c 'EDITOR "$@"' EDITOR FILE`: this one writes the message.
EDITOR = "GIT_EDITOR='echo \"Fixed the login bug 🎉\" >' git commit --allow-empty"
# The agents with an event after a tool ran that mented installs for the checks.
CHECKED_AGENTS = ("claude-code", "codex")


@pytest.fixture(scope="module", params=CHECKED_AGENTS, ids=CHECKED_AGENTS)
def agent_session(request: pytest.FixtureRequest) -> Iterator[AgentSession]:
    """One daemon and one agent configuration, shared by that agent's tests."""
    yield from shared_agent_session(request.param)


def add_checked_rule(daemon: DaemonProcess) -> str:
    """The post's rule with its three checks, as `mentectl rule add ... --check` adds it."""
    request = StoreRequest(
        content=RULE,
        memory_type=MemoryType.PROCEDURAL,
        tags=[trigger_tag("git-commit")],
        checks=CHECKS,
    )
    with daemon.client() as client:
        return client.expect(request, StoredReply).id


def run(session: AgentSession, commands: list[str], *, max_retries: int) -> list[Turn]:
    script = Script(
        commands=commands, max_retries=max_retries, probe=lambda: commit_count(session.repo)
    )
    with ModelServer(script) as server:
        result = session.run(server, PROMPT)
    assert result.returncode == 0, f"{session.agent.name} failed:\n{result.stdout}\n{result.stderr}"
    assert not server.recording.errors, server.recording.errors
    assert server.turns[-1].reply.startswith("text:"), "the script did not run to its end"
    return server.turns


def messages(repo: Path) -> list[str]:
    out = subprocess.run(
        ["git", "log", "--format=%B%x00"], cwd=repo, capture_output=True, text=True, check=False
    ).stdout
    return [message.strip() for message in out.split("\0") if message.strip()]


def report(daemon: DaemonProcess) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(daemon.mentectl("report", "--json").stdout)
    return document


def test_a_commit_that_breaks_the_checks_is_stopped_and_the_fixed_one_lands(
    session: AgentSession,
) -> None:
    rule = add_checked_rule(session.daemon)
    turns = run(session, [BAD, GOOD], max_retries=0)
    stopped = next(
        (turn for turn in turns if turn.result is not None and "emoji" in turn.result.text), None
    )
    assert stopped is not None, "the failed checks never reached the model"
    assert stopped.result is not None
    assert stopped.result.is_error
    assert stopped.probe == 0, "the model read the failed checks after the commit was made"
    assert "mented stopped this command" in stopped.result.text
    assert f"[{short_handle(rule)}]" in stopped.result.text
    assert messages(session.repo) == ["fix: login bug"]
    total = report(session.daemon)["total"]
    assert total["stopped"] == 1
    assert total["passed_first"] + total["passed"] == 1
    assert total["failed_after"] == 0


def test_a_commit_written_in_the_editor_gets_the_note_after_the_fact(
    session: AgentSession,
) -> None:
    rule = add_checked_rule(session.daemon)
    # Stopped once to hand the rule over (its message is unknown: no check can stop
    # it), then run again: the commit is made, and checked once made.
    turns = run(session, [EDITOR], max_retries=1)
    assert messages(session.repo) == ["Fixed the login bug 🎉"]
    noted = [turn for turn in turns if "the commit you just made" in turn.conversation_text()]
    assert noted, "the note after the fact never reached the model"
    assert noted[0].probe == 1  # after the commit, as it must be
    text = noted[-1].conversation_text()
    assert f"breaks [{short_handle(rule)}] {RULE}: " in text
    assert "amend it." in text
    total = report(session.daemon)["total"]
    assert total["failed_after"] == 1
