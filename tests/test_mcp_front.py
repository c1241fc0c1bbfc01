"""`mentectl mcp` answers `initialize` and lists its tools before the SDK is imported."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from mented_client import mcp_front
from mented_client.mcp_server import marked_server
from mented_client.mcp_server.wire import take_answers
from tests.conftest import isolated_env

PYTHON = sys.executable
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "codex", "version": "1.0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": "list", "method": "tools/list"}
CALL = {
    "jsonrpc": "2.0",
    "id": 3,
    "method": "tools/call",
    "params": {"name": "rules_for_action", "arguments": {"action": "git-commit"}},
}

# An SDK that is slow to import: it says so on the protocol channel, then hangs.
SLOW_SDK = """\
import os, time
os.write(1, b"the SDK was imported\\n")
time.sleep(120)
"""


class Session:
    """A process spoken to in JSON-RPC lines, each answer awaited with a generous timeout.

    A thread reads its stdout line by line: `select` on the pipe would miss a line that
    arrived in the same read as the one before it and waits in the reader's buffer.
    """

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")  # the end of its output

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def line(self, timeout: float = 120) -> bytes:
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no answer") from None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


def slow_sdk(root: Path) -> Path:
    """A site directory with an `mcp` package like the real one, but slow to import."""
    wire = json.loads(mcp_front.WIRE.read_text())
    site = root / "slow-site"
    package = site / "mcp"
    (package / "server" / "mcpserver").mkdir(parents=True)
    (package / "__init__.py").write_text(SLOW_SDK)
    (package / "server" / "__init__.py").write_text("")
    (package / "server" / "mcpserver" / "__init__.py").write_text("")
    for dist_info in wire["sdk"]:
        (site / dist_info).mkdir()
    return site


def test_initialize_and_the_tools_are_answered_before_the_sdk_is_imported(
    short_tmp: Path,
) -> None:
    # Issue 22, item 9: the SDK's import took 2.9-5.6 s; the agent's first model
    # requests went without mented's tools. The stand-in SDK writes a line when it
    # is imported: on the same channel, so it shows what came before it.
    env = isolated_env(short_tmp) | {"PYTHONPATH": str(slow_sdk(short_tmp))}
    session = Session([PYTHON, "-m", "mented_client.cli", "mcp"], env, short_tmp)
    try:
        session.send(INITIALIZE)
        initialized = json.loads(session.line())
        assert initialized["id"] == 1
        assert initialized["result"]["serverInfo"]["name"] == "mented"
        assert initialized["result"]["protocolVersion"] == "2025-06-18"
        session.send(INITIALIZED)
        session.send(LIST_TOOLS)
        listed = json.loads(session.line())
        assert listed["id"] == "list"
        tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
        assert "git-commit" in tools["remember_rule"]["description"]
        assert mcp_front.KNOWN_TEXT not in tools["remember_rule"]["description"]
        assert session.line() == b"the SDK was imported\n"  # only then
    finally:
        session.close()


def test_the_front_answers_byte_for_byte_what_the_sdk_answers(short_tmp: Path) -> None:
    env = isolated_env(short_tmp)
    table = short_tmp / "config.toml"
    # An action whose description needs escaping in JSON, as the SDK escapes it.
    table.write_text(
        '[actions.deploy-prod]\ndescription = "ship it: \\"prod\\" \\\\ now\\t→ ✓"\n'
        'shapes = [{ program = "deploy", subcommand = ["prod"] }]\n'
    )
    env["MENTED_CONFIG"] = str(table)
    asks = [INITIALIZE, INITIALIZED, LIST_TOOLS, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
    answers = []
    for command in (
        [PYTHON, "-m", "mented_client.cli", "mcp"],  # the front, then the SDK
        [
            PYTHON,
            "-c",
            "from mented_client import mcp_server; mcp_server.run("
            "agent='claude-code', socket_path=None)",
        ],  # the SDK alone
    ):
        session = Session(command, env, short_tmp)
        try:
            got = []
            for ask in asks:
                session.send(ask)
                if "id" in ask:
                    got.append(session.line())
            session.send(CALL)  # answered by the SDK, once the front handed over
            call = json.loads(session.line())
            assert call["id"] == 3
            assert "mented is not running" in json.dumps(call)
            answers.append(got)
        finally:
            session.close()
    front, sdk = answers
    assert b"deploy-prod (ship it" in front[1]
    assert front == sdk


def test_the_shipped_answers_are_the_sdks() -> None:
    # `python -m mented_client.mcp_server.wire` writes them; an SDK upgrade fails here first.
    assert take_answers(marked_server()) == json.loads(mcp_front.WIRE.read_text())


def test_with_another_sdk_the_front_stays_out(short_tmp: Path) -> None:
    site = slow_sdk(short_tmp)
    (site / json.loads(mcp_front.WIRE.read_text())["sdk"][0]).rmdir()  # another SDK version
    env = isolated_env(short_tmp) | {"PYTHONPATH": str(site)}
    session = Session([PYTHON, "-m", "mented_client.cli", "mcp"], env, short_tmp)
    try:
        session.send(INITIALIZE)
        assert session.line() == b"the SDK was imported\n"  # nothing answered before the SDK
    finally:
        session.close()
