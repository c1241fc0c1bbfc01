"""With the real pi (`@mariozechner/pi-coding-agent` from npm): mented's extension, in-process.

pi gets `mentectl hooks install pi` in a private `PI_CODING_AGENT_DIR`, the mock
model as a custom Anthropic-compatible provider of its `models.json`, and runs
once per test with `pi -p` in a fresh repository (`AgentSession`). The tests are
the real-agent module's own, for the links pi has: one session (`test_session_cost`)
where `ls` gets nothing, the first commit is stopped with the rules before it ran
and its retry lands once, and ten commits hand the full text over once; a stopped
daemon leaving pi silent; a pinned rule in the first model request. Then the
extension alone, loaded as pi loads it (jiti), on events the tests choose: an
edit's path, a daemon that never answers.

Opt-in, as the other real agents: the `agents` marker (`MENTED_AGENT_TESTS=1`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real_agents import PI, AgentSession, cache_dir
from tests.real_agents import agent_session as shared_agent_session
from tests.test_real_agents import (
    check_pinned_rule_at_session_start,
    session,
    test_session_cost,
    test_with_the_daemon_stopped_the_commit_runs_quietly,
)

pytestmark = pytest.mark.agents

__all__ = [
    "session",
    "test_session_cost",
    "test_with_the_daemon_stopped_the_commit_runs_quietly",
]

HARNESS = Path(__file__).parent / "pi_harness.mjs"


def test_pinned_rules_reach_the_model_at_session_start(session: AgentSession) -> None:
    check_pinned_rule_at_session_start(session)


@pytest.fixture(scope="module")
def agent_session() -> Iterator[AgentSession]:
    """pi, with mented's extension installed and a daemon of its own."""
    yield from shared_agent_session(PI.name)


# ------------------------------------------------------------ the extension alone


class Harness:
    """The installed extension, loaded by pi's own jiti in node, its handlers called."""

    def __init__(self, extension: Path, env: dict[str, str]) -> None:
        jiti = cache_dir() / PI.cache_name / "node_modules" / "jiti"
        node = shutil.which("node")
        assert node is not None
        self.proc = subprocess.Popen(
            [node, str(HARNESS), str(jiti), str(extension)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )

    def call(self, on: str, event: dict[str, Any], cwd: str, repeat: int = 1) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        request = {"on": on, "event": event, "cwd": cwd, "session": "harness", "repeat": repeat}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def test_an_edit_sends_its_path_and_never_its_content(
    agent_session: AgentSession, tmp_path: Path
) -> None:
    """A recording socket in the daemon's place: what reaches it for `edit` and `write`."""
    path = tmp_path / "rec.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    frames: list[dict[str, Any]] = []

    def serve() -> None:
        for _ in range(2):
            conn, _ = server.accept()
            with conn:
                size = int.from_bytes(conn.recv(4, socket.MSG_WAITALL), "big")
                frames.append(json.loads(conn.recv(size, socket.MSG_WAITALL)))
                conn.sendall(b"\0\0\0\0")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    extension = agent_session.config_dir / "extensions" / "mented.ts"
    opened = Harness(extension, {**agent_session.daemon.env, "MENTED_SOCKET": str(path)})
    try:
        edit = {"toolName": "edit", "toolCallId": "c1", "input": {"path": "a.py", "edits": []}}
        write = {"toolName": "write", "toolCallId": "c2", "input": {"path": "b.py", "content": "S"}}
        assert opened.call("tool_call", edit, "/repo")["result"] is None
        assert opened.call("tool_call", write, "/repo")["result"] is None
    finally:
        opened.close()
        thread.join(timeout=10)
        server.close()
    events = [frame["event"] for frame in frames]
    assert [event["input"] for event in events] == [{"path": "a.py"}, {"path": "b.py"}]
    assert [event["tool_name"] for event in events] == ["edit", "write"]


def test_a_daemon_that_never_answers_costs_the_budget_and_says_nothing(
    agent_session: AgentSession, tmp_path: Path
) -> None:
    path = tmp_path / "mute.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)  # accepted by the kernel, never read
    extension = agent_session.config_dir / "extensions" / "mented.ts"
    env = {**agent_session.daemon.env, "MENTED_SOCKET": str(path), "MENTED_HOOK_BUDGET_MS": "200"}
    opened = Harness(extension, env)
    try:
        call = {"toolName": "bash", "toolCallId": "c1", "input": {"command": "git commit -m x"}}
        started = time.monotonic()
        answer = opened.call("tool_call", call, str(tmp_path))
        waited = time.monotonic() - started
    finally:
        opened.close()
        server.close()
    assert answer == {"result": None, "threw": False, "us": answer["us"]}
    assert waited >= 0.2  # it waited for the daemon, up to its budget, and not forever


def test_a_kept_connection_the_daemon_closed_is_replaced_within_the_same_call(
    agent_session: AgentSession, tmp_path: Path
) -> None:
    """The extension keeps its connection between calls; the daemon closes one idle for
    `[daemon] connection_idle_s`. A request that meets such a close is sent again on a
    new connection, so the stop still reaches the model."""
    path = tmp_path / "closing.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    stop = json.dumps({"block": True, "reason": "the rules"}).encode()
    frames: list[bytes] = []

    def serve() -> None:
        for _ in range(2):
            conn, _ = server.accept()
            with conn:
                size = int.from_bytes(conn.recv(4, socket.MSG_WAITALL), "big")
                frames.append(conn.recv(size, socket.MSG_WAITALL))
                conn.sendall(len(stop).to_bytes(4, "big") + stop)
                # The next request on this connection is read, then the connection closed.
                size = int.from_bytes(conn.recv(4, socket.MSG_WAITALL), "big")
                if size:
                    frames.append(conn.recv(size, socket.MSG_WAITALL))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    extension = agent_session.config_dir / "extensions" / "mented.ts"
    opened = Harness(extension, {**agent_session.daemon.env, "MENTED_SOCKET": str(path)})
    call = {"toolName": "bash", "toolCallId": "c1", "input": {"command": "git commit -m x"}}
    try:
        first = opened.call("tool_call", call, str(tmp_path))
        second = opened.call("tool_call", call, str(tmp_path))
    finally:
        opened.close()
        thread.join(timeout=10)
        server.close()
    blocked = {"block": True, "reason": "the rules"}
    assert (first["result"], second["result"]) == (blocked, blocked)
    assert len(frames) == 3  # the second request went twice: on the kept connection, then anew


@pytest.mark.parametrize("whose", ["another user's socket", "a folder anyone may write to"])
def test_the_command_goes_to_no_socket_another_user_could_hold(
    agent_session: AgentSession, tmp_path: Path, whose: str
) -> None:
    """Node has no SO_PEERCRED: the extension checks the socket and its folder instead."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = folder / "mented.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    server.setblocking(False)
    if whose == "another user's socket":
        if os.geteuid() != 0:
            pytest.skip("chown to another user needs root")
        os.chown(path, 65534, 65534)
    else:
        folder.chmod(0o777)  # writable by all, not sticky: anyone could have bound it
    extension = agent_session.config_dir / "extensions" / "mented.ts"
    opened = Harness(extension, {**agent_session.daemon.env, "MENTED_SOCKET": str(path)})
    call = {"toolName": "bash", "toolCallId": "c1", "input": {"command": "git commit -m x"}}
    try:
        answer = opened.call("tool_call", call, str(tmp_path))
    finally:
        opened.close()
    with pytest.raises(BlockingIOError):
        server.accept()  # nothing connected (the call returned: a connection would be queued)
    server.close()
    assert answer["result"] is None
    assert not answer["threw"]


def test_a_call_over_a_mebibyte_is_not_sent(agent_session: AgentSession, tmp_path: Path) -> None:
    """As the shim's stdin cap: the daemon would refuse such a frame anyway."""
    path = tmp_path / "mented.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    server.setblocking(False)
    extension = agent_session.config_dir / "extensions" / "mented.ts"
    opened = Harness(extension, {**agent_session.daemon.env, "MENTED_SOCKET": str(path)})
    command = "git commit -m " + "x" * (1 << 21)
    call = {"toolName": "bash", "toolCallId": "c1", "input": {"command": command}}
    try:
        answer = opened.call("tool_call", call, str(tmp_path))
    finally:
        opened.close()
    with pytest.raises(BlockingIOError):
        server.accept()
    server.close()
    assert (answer["result"], answer["threw"]) == (None, False)
