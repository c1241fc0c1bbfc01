"""mented's opencode plugin itself, run under node against a socket that plays the daemon.

opencode runs it in Bun; node runs the same module (it uses `node:net`, `node:fs` and
`node:path` only). Each test imports the plugin as opencode does, calls the hooks it
returns with opencode's arguments, and prints what came of it: a stop thrown, the
tool's output, the system prompt. The daemon here is a thread that answers a frame
of our choosing, or nothing, or garbage.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mented.agents.opencode import plugin_source

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")

DRIVER = """
import { MentedPlugin } from "./mented.mjs"
const hooks = await MentedPlugin({ directory: "/repo" })
const result = {}
try {
  await hooks["tool.execute.before"](
    { tool: "bash", sessionID: "ses_1", callID: "call_1" },
    { args: { command: "git commit -m x", description: "d" } },
  )
  result.before = "ran"
} catch (error) {
  result.before = { stopped: error.message }
}
const output = { title: "", output: "out", metadata: {} }
await hooks["tool.execute.after"](
  { tool: "bash", sessionID: "ses_1", callID: "call_1", args: { command: "git commit -m x" } },
  output,
)
result.after = output.output
const system = ["base"]
await hooks["experimental.chat.system.transform"]({ sessionID: "ses_1", model: {} }, { system })
await hooks["experimental.chat.system.transform"]({ sessionID: "ses_1", model: {} }, { system })
result.system = system
await hooks.event({ event: { type: "session.compacted", properties: { sessionID: "ses_1" } } })
console.log(JSON.stringify(result))
"""


class FakeDaemon:
    """A socket in a private folder: records each request, answers with `reply(event)`."""

    def __init__(self, folder: Path, reply: object) -> None:
        folder.mkdir(mode=0o700)
        self.path = folder / "mented.sock"
        self.reply = reply
        self.requests: list[dict[str, object]] = []
        self.connections = 0
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self._server.listen(8)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self.connections += 1
            # Each connection its own thread, as the daemon serves them side by side.
            threading.Thread(target=self._serve_one, args=(conn,), daemon=True).start()

    def _serve_one(self, conn: socket.socket) -> None:
        with conn:
            self._answer_all(conn)

    def _answer_all(self, conn: socket.socket) -> None:
        """As the daemon does: one request after the other, until the client closes."""
        while True:
            header = conn.recv(4, socket.MSG_WAITALL)
            if len(header) < 4:
                return
            (length,) = struct.unpack(">I", header)
            request = json.loads(conn.recv(length, socket.MSG_WAITALL))
            self.requests.append(request)
            answer = self.reply(request["event"]) if callable(self.reply) else self.reply
            if answer is None:  # hang until the client gives up
                conn.recv(1)
                return
            conn.sendall(answer if isinstance(answer, bytes) else frame(answer))

    def close(self) -> None:
        self._server.close()


def frame(answer: object) -> bytes:
    body = json.dumps(answer).encode() if answer != {} else b""
    return struct.pack(">I", len(body)) + body


def run_plugin(tmp_path: Path, socket_path: Path, **env: str) -> dict[str, object]:
    (tmp_path / "mented.mjs").write_text(plugin_source())
    (tmp_path / "driver.mjs").write_text(DRIVER)
    assert NODE is not None
    result = subprocess.run(
        [NODE, "driver.mjs"],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "MENTED_SOCKET": str(socket_path), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    parsed: dict[str, object] = json.loads(result.stdout)
    return parsed


@pytest.fixture
def daemon_with(tmp_path: Path) -> Iterator[type[FakeDaemon]]:
    made: list[FakeDaemon] = []

    def make(reply: object, folder: str = "run") -> FakeDaemon:
        daemon = FakeDaemon(tmp_path / folder, reply)
        made.append(daemon)
        return daemon

    yield make  # type: ignore[misc]
    for daemon in made:
        daemon.close()


def answers(event: dict[str, object]) -> object:
    name = event["hook_event_name"]
    if name == "tool.execute.before":
        return {"stop": "RULES: single line"}
    if name == "tool.execute.after":
        return {"context": "CONTEXT"}
    if name == "session.start":
        return {"system": "PINNED"}
    return {}


def test_a_stop_is_thrown_context_appended_pinned_rules_in_every_request(
    tmp_path: Path, daemon_with: type[FakeDaemon]
) -> None:
    daemon = daemon_with(answers)
    result = run_plugin(tmp_path, daemon.path)
    assert result["before"] == {"stopped": "RULES: single line"}
    assert result["after"] == "out\n\nCONTEXT"
    assert result["system"] == ["base", "PINNED", "PINNED"]
    events = [request["event"] for request in daemon.requests]
    names = [event["hook_event_name"] for event in events]  # type: ignore[index]
    # The pinned rules are asked for once per session, then kept.
    assert names == [
        "tool.execute.before",
        "tool.execute.after",
        "session.start",
        "session.compacted",
    ]
    # One connection carries them all: no connect, no accept per call.
    assert daemon.connections == 1
    request = daemon.requests[0]
    assert request["type"] == "hook"
    assert request["agent"] == "opencode"
    assert isinstance(request["deadline"], float)
    assert request["event"] == {
        "hook_event_name": "tool.execute.before",
        "plugin": 1,
        "session_id": "ses_1",
        "call_id": "call_1",
        "cwd": "/repo",
        "tool": "bash",
        "args": {"command": "git commit -m x"},  # only what the daemon reads
    }


SILENT = {"before": "ran", "after": "out", "system": ["base"]}


def test_with_no_daemon_the_tool_runs_and_nothing_is_said(tmp_path: Path) -> None:
    assert run_plugin(tmp_path, tmp_path / "none" / "mented.sock") == SILENT


def test_a_daemon_that_hangs_is_given_up_at_the_deadline(
    tmp_path: Path, daemon_with: type[FakeDaemon]
) -> None:
    daemon = daemon_with(None)
    assert run_plugin(tmp_path, daemon.path, MENTED_HOOK_BUDGET_MS="50") == SILENT


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x05nope!",
        b"\xff\xff\xff\xff",
        frame({"type": "error", "code": "bad_request", "message": "old daemon"}),
        frame(["stop"]),
        frame({"stop": 7, "context": {"x": 1}, "system": None}),
        b"\x00\x00",
    ],
)
def test_a_garbled_answer_is_silence(
    tmp_path: Path, daemon_with: type[FakeDaemon], garbage: bytes
) -> None:
    daemon = daemon_with(garbage)
    assert run_plugin(tmp_path, daemon.path) == SILENT


def test_a_socket_in_a_folder_others_may_write_is_not_used(
    tmp_path: Path, daemon_with: type[FakeDaemon]
) -> None:
    daemon = daemon_with(answers, folder="shared")
    (tmp_path / "shared").chmod(0o777)
    assert run_plugin(tmp_path, daemon.path) == SILENT
    assert daemon.requests == []  # the call went to nobody


TWO_COPIES = """
import { MentedPlugin as User } from "./user/mented.mjs"
import { MentedPlugin as Project } from "./project/mented.mjs"
const copies = [await User({ directory: "/repo" }), await Project({ directory: "/repo" })]
const requests = []
for (let request = 0; request < 2; request++) {
  const system = ["base"]
  for (const hooks of copies) {
    await hooks["experimental.chat.system.transform"]({ sessionID: "ses_1", model: {} }, { system })
  }
  requests.push(system)
}
console.log(JSON.stringify(requests))
"""


def test_the_users_and_a_projects_copy_of_the_plugin_add_the_pinned_rules_once(
    tmp_path: Path, daemon_with: type[FakeDaemon]
) -> None:
    # `hooks install opencode` and `hooks install opencode --project .`: opencode loads both.
    daemon = daemon_with(answers)
    for copy in ("user", "project"):
        (tmp_path / copy).mkdir()
        (tmp_path / copy / "mented.mjs").write_text(plugin_source())
    (tmp_path / "driver.mjs").write_text(TWO_COPIES)
    assert NODE is not None
    result = subprocess.run(
        [NODE, "driver.mjs"],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "MENTED_SOCKET": str(daemon.path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [["base", "PINNED"], ["base", "PINNED"]]
