"""The real opencode (npm `opencode-ai`) with mented's plugin, against the mock model.

Behind the `agents` marker, as tests/test_real_agents.py. The plugin is installed as
a user does it (`mentectl hooks install opencode`, into `$XDG_CONFIG_HOME/opencode/
plugins/`); the model is an OpenAI-compatible provider on loopback, given in
`OPENCODE_CONFIG_CONTENT`. Two runs of `opencode run` serve every check (each costs
tens of seconds of start-up on a loaded machine).

Start-up offline took about 70 s: opencode fetches models.dev (`OPENCODE_DISABLE_MODELS_FETCH`
turns that off) and, in every config folder it reads, installs `@opencode-ai/plugin` with
npm in the background and waits for it before it loads a plugin; it skips that when the
folder's `package-lock.json` already lists every dependency of its `package.json` and
`node_modules/` exists (`Npm.install` in its shipped code), which `_no_npm_install` writes.
mented's plugin imports nothing of that package.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mented.memory import PINNED_TAG, MemoryType, trigger_tag
from mented.protocol import StoredReply, StoreRequest
from tests.conftest import DaemonProcess
from tests.model_server import ModelServer, Script, Turn
from tests.real_agents import NpmAgent, commit_count, install, make_repo

pytestmark = pytest.mark.agents

OPENCODE = NpmAgent("opencode", "opencode-ai", "1.18.33", "opencode")
RULE = "commit messages: single line, conventional prefix, no emojis"
PINNED = "Never push to main without asking the user first."
PROMPT = "Commit the change."
RUN_TIMEOUT_S = 180


def commit(n: int) -> str:
    return f'git commit --allow-empty -m "fix: change {n}"'


def _no_npm_install(folder: Path) -> None:
    """Mark `folder`'s plugin dependencies as installed, so that opencode runs no npm."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "node_modules").mkdir(exist_ok=True)
    dependencies = {"@opencode-ai/plugin": OPENCODE.version}
    (folder / "package.json").write_text(json.dumps({"dependencies": dependencies}))
    lock = {"packages": {"": {"dependencies": dependencies}}}
    (folder / "package-lock.json").write_text(json.dumps(lock))


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    binary = install(OPENCODE)
    root = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    process = DaemonProcess(root)
    process.binary = binary  # type: ignore[attr-defined]
    process.start()
    process.mentectl("hooks", "install", "opencode")
    _no_npm_install(Path(process.env["XDG_CONFIG_HOME"]) / "opencode")
    try:
        yield process
    finally:
        if process.proc is not None:
            process.stop()
        shutil.rmtree(root, ignore_errors=True)


def store(daemon: DaemonProcess, text: str, tag: str) -> str:
    with daemon.client() as client:
        request = StoreRequest(content=text, memory_type=MemoryType.PROCEDURAL, tags=[tag])
        return client.expect(request, StoredReply).id


def run(daemon: DaemonProcess, repo: Path, commands: list[str]) -> tuple[list[Turn], str]:
    """`opencode run PROMPT` in `repo` through `commands`; the model's requests, its output."""
    script = Script(commands=commands, probe=lambda: commit_count(repo))
    with ModelServer(script) as server:
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Mock",
            "options": {"baseURL": f"{server.base_url}/v1", "apiKey": "sk-mock"},
            "models": {"mock-model": {"name": "Mock", "tool_call": True}},
        }
        config = {"model": "mock/mock-model", "provider": {"mock": provider}}
        env = {
            **{k: v for k, v in daemon.env.items() if not k.startswith("OPENCODE")},
            "OPENCODE_CONFIG_CONTENT": json.dumps(config),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "MENTED_HOOK_BUDGET_MS": "3000",  # a loaded machine must not turn into silence
            # `opencode run` finds a project's .opencode/ from $PWD, not from its cwd.
            "PWD": str(repo),
        }
        result = subprocess.run(
            [str(daemon.binary), "run", PROMPT],  # type: ignore[attr-defined]
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert not server.recording.errors, server.recording.errors
    assert server.turns, f"opencode never asked the model:\n{output}"
    assert server.turns[-1].reply.startswith("text:"), f"the script did not end:\n{output}"
    return server.turns, output


def test_the_plugin_stops_the_first_commit_once_and_says_nothing_for_ls(
    daemon: DaemonProcess,
) -> None:
    store(daemon, RULE, trigger_tag("git-commit"))
    store(daemon, PINNED, PINNED_TAG)
    repo = make_repo(daemon.root / "repo1")
    turns, _ = run(daemon, repo, [commit(1), "ls -la", commit(2), commit(3)])
    # The first request of the session already has the pinned rule, in the system prompt.
    assert PINNED in turns[0].conversation_text()
    stopped = turns[1].result
    assert stopped is not None
    assert stopped.is_error, f"the first commit was not stopped: {stopped.text[:300]}"
    assert RULE in stopped.text
    assert turns[1].probe == 0, "the commit ran before the model read the rules"
    retried = turns[2].result
    assert retried is not None
    assert not retried.is_error
    assert turns[2].probe == 1, "the retry did not land"
    listed = turns[3].result
    assert listed is not None
    assert not listed.is_error
    assert "mented" not in listed.text
    assert commit_count(repo) == 3, "not exactly one commit per command"
    last = turns[-1].conversation_text()
    assert last.count(RULE) == 1, "the full rule was handed over more than once"


def test_with_the_daemon_stopped_the_commit_runs_and_nothing_is_said(
    daemon: DaemonProcess,
) -> None:
    daemon.stop()
    try:
        repo = make_repo(daemon.root / "repo2")
        turns, output = run(daemon, repo, [commit(1)])
    finally:
        daemon.start()
    assert commit_count(repo) == 1
    assert len(turns) == 2, "the commit was not run exactly once"
    assert turns[1].result is not None
    assert not turns[1].result.is_error
    assert "mented" not in turns[-1].conversation_text()
    assert "error" not in output.lower(), output
