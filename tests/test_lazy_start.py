"""Start-up: what the daemon imports before it answers its first hook (issue 22, item 8).

The first hook after a start waits for every module the daemon imports first. The
recall index (Tantivy), pathspec (only a config file's path patterns are checked
with it) and the adapters of agents other than the hook's are no part of its
answer: they are imported when first used, or after the first answer. Counted in
a fresh interpreter, not timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON = sys.executable

# A fresh interpreter: a daemon with one commit rule answers a hook, noting which of
# the deferred modules were imported when that answer was ready; then a fact is
# stored and recalled, and an edit of a file matched by a config's path pattern is
# answered, through the same daemon.
FIRST_HOOK = """
import json, socket, sys, threading
from pathlib import Path

import msgspec
import trio

import mented.server
from mented.agents.pretooluse import pretooluse_event
from mented.protocol import (
    HookRequest, RecallFactsRequest, ShutdownRequest, StoreRequest, encode, recv_frame,
)
from mented.server import Server, ServerOptions
from mented.store import Store

WATCHED = ("tantivy", "mented.recall", "pathspec", "mented.agents.cursor", "mented.agents.codex")
root = Path(sys.argv[1])
(root / "config.toml").write_text(sys.argv[2])
store = Store(root / "data")
store.store("commit messages: one line", tags=["trigger:git-commit"])
store.store("deploy files: check the prod values", tags=["trigger:deploy-config"])
store.close()
# However slow this machine is, the index is not opened for want of a request.
mented.server.facts._RECALL_OPEN_AFTER_S = 3600.0
seen = {}
original = Server._answer_hook

async def answer_hook(self, request, deadline, *peer):
    answer = await original(self, request, deadline, *peer)
    if not seen:
        seen.update({name: name in sys.modules for name in WATCHED})
    return answer

Server._answer_hook = answer_hook
server = Server(ServerOptions(
    socket_path=root / "s", data_dir=root / "data", config_path=root / "config.toml",
    handle_signals=False,
))
server.open()

def ask(request):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(60)
        sock.connect(str(root / "s"))
        sock.sendall(encode(request))
        return recv_frame(sock).decode()

def hook(event):
    return ask(HookRequest(agent="claude-code", event=msgspec.Raw(event)))

out = {}

def client():
    try:
        command = pretooluse_event('git commit -m "fix: x"', cwd=str(root), session="s1")
        out["hook"] = hook(command)
        out["seen"] = dict(seen)
        ask(StoreRequest(content="the staging database is db-7", tags=["infra"]))
        out["recall"] = ask(RecallFactsRequest(query="staging database", cwd=str(root)))
        edit = pretooluse_event(
            "", cwd=str(root), session="s2", tool_name="Edit",
            tool_input={"file_path": str(root / "deploy" / "prod.yaml")},
        )
        out["edit"] = hook(edit)
        out["modules"] = {name: name in sys.modules for name in WATCHED}
    finally:
        ask(ShutdownRequest())

thread = threading.Thread(target=client)
thread.start()
try:
    trio.run(server.serve)
finally:
    server.close()
thread.join()
print(json.dumps(out))
"""

DEPLOY_CONFIG = """
[actions.deploy-config]
description = "edit a deployment file"
paths = ["deploy/**"]
"""


def first_hook(tmp_path: Path, config: str = "") -> dict[str, object]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    result = subprocess.run(
        [PYTHON, "-c", FIRST_HOOK, str(tmp_path), config],
        env=env,
        capture_output=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr.decode()
    # The last line: before it, the daemon's log lines (no logging set up: on stdout).
    found: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    return found


@pytest.fixture
def short_root(short_tmp: Path) -> Path:
    return short_tmp


def test_the_first_hook_is_answered_before_tantivy_or_pathspec_is_imported(
    short_root: Path,
) -> None:
    out = first_hook(short_root)
    assert "commit messages: one line" in str(out["hook"])
    # Nor the adapters of the agents other than the hook's (Claude Code's).
    assert not any(out["seen"].values()), out["seen"]  # type: ignore[attr-defined]
    # The first recall opens the index then, and finds what was stored after the start.
    assert "db-7" in str(out["recall"])
    assert out["modules"] == {
        "tantivy": True,
        "mented.recall": True,
        "pathspec": False,
        "mented.agents.cursor": False,
        "mented.agents.codex": False,
    }


def test_a_config_with_path_patterns_still_has_them_checked_and_matched(
    short_root: Path,
) -> None:
    out = first_hook(short_root, DEPLOY_CONFIG)
    assert "commit messages: one line" in str(out["hook"])
    # Only a config's own patterns are checked with pathspec (the built-in ones are
    # checked against it by tests/test_path_patterns.py).
    assert out["seen"] == {
        "tantivy": False,
        "mented.recall": False,
        "pathspec": True,
        "mented.agents.cursor": False,
        "mented.agents.codex": False,
    }
    assert "check the prod values" in str(out["edit"])
