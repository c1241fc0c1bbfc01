"""The real Claude Code starts mented's hook only for the commands that can name an action.

`mentectl hooks install claude-code` writes one handler per command shape, each
with an `if` condition (`Bash(*git*commit*)`, mented/registration.py). This runs
the real agent (tests/real_agents.py; opt-in, `MENTED_AGENT_TESTS=1`) through
every command of the acceptance file that names an action, and a sample of
reads, tests and builds, in ONE session, and counts the hook processes it spawns:

- the installed hook command is wrapped by a script that keeps each event it is
  handed (one file per spawn), then runs the real one;
- a second hook, installed next to ours, denies every command (exit 2), so that
  nothing runs for real (`git push`, `npm publish`, ...) and the model moves on.

Every action command must spawn the hook and get its rules (the daemon's fire
log), and no unrelated command may spawn it. `python -m tests.test_real_prefilter`
prints the spawn figures for docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from mented.actions import load_action_table
from mented.config import Config
from mented.matcher import Matcher
from mented.memory import MemoryType, trigger_tag
from mented.protocol import LogReply, LogRequest, StoredReply, StoreRequest
from tests.conftest import AGENT_TESTS_ENV, DaemonProcess
from tests.model_server import ModelServer, Script
from tests.real_agents import CLAUDE_CODE, REPORT_ENV, AgentSession, install, record_figures

pytestmark = pytest.mark.agents

DATA = Path(__file__).parent / "data"
PROMPT = "Run the commands."
# Reads, tests and builds, as an agent runs them between its edits.
UNRELATED = [
    "ls -la",
    "cat README.md",
    "pytest -q",
    "npm test",
    "make",
    "git status",
    "git diff --stat",
    "grep -rn TODO src",
    "python -m pytest tests/test_x.py",
    "cargo build",
]
DENY_ALL = "echo 'sandbox: not run' >&2; exit 2"

# 100 commands of a realistic session: mostly reads, tests and builds, a few commits
# and pushes (docs/benchmarks.md, "Hook processes per 100 commands").
REALISTIC_SESSION = (
    ["ls", "ls -la src", "cat README.md", "cat pyproject.toml", "head -50 src/app.py"] * 5
    + ["python --version", "node --version", "pip list"]
    + ["grep -rn 'def login' src", "rg TODO", "find . -name '*.py' | head", "sed -n 1,80p x.py"] * 3
    + ["git status", "git diff", "git diff --stat", "git log --oneline -5"] * 4
    + ["pytest -q", "pytest tests/test_auth.py -x", "npm test", "go test ./...", "cargo test"] * 4
    + ["make", "npm run build", "cargo build", "tsc --noEmit", "python -m build"] * 3
    + ["git add -A"] * 3
    + ['git commit -m "fix: login"', 'git commit -m "test: auth"', 'git commit -m "docs: x"']
    + ["git push", "git push origin feature"]
    + ["npm install left-pad"]
)
assert len(REALISTIC_SESSION) == 100


def action_rows() -> list[tuple[str, list[str]]]:
    rows = [json.loads(line) for line in (DATA / "commands.jsonl").read_text().splitlines()]
    return [(row["command"], row["actions"]) for row in rows if row["actions"]]


def wrap_hook(settings: Path, spawns: Path) -> None:
    """Make every hook entry of ours keep its event in `spawns` before it runs."""
    doc = json.loads(settings.read_text())
    wrapper = spawns.parent / "count-spawn.sh"
    command = doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    wrapper.write_text(
        "#!/bin/sh\n"
        f'event=$(mktemp "{spawns}/spawn.XXXXXX")\n'
        'cat > "$event"\n'
        # The installed line is a shell command line (`[ -f SHIM ] && exec ...; exit 0`):
        # it runs as written, with the event on its standard input.
        'exec < "$event"\n'
        f"{command}\n"
    )
    wrapper.chmod(0o755)
    text = settings.read_text().replace(json.dumps(command), json.dumps(str(wrapper)))
    doc = json.loads(text)
    doc["hooks"]["PreToolUse"].append(
        {"matcher": "Bash", "hooks": [{"type": "command", "command": DENY_ALL}]}
    )
    settings.write_text(json.dumps(doc, indent=2))


def spawned_commands(spawns: Path) -> list[str]:
    """The command of every PreToolUse event the hook was spawned for."""
    found = []
    for path in spawns.iterdir():
        event = json.loads(path.read_text())
        if event.get("hook_event_name") == "PreToolUse":
            found.append(event.get("tool_input", {}).get("command", ""))
    return found


def filtered_session(root: Path, daemon: DaemonProcess, *, every_command: bool) -> AgentSession:
    """Claude Code with mented's hook as installed (or `--all-commands`), wrapped to count."""
    binary = install(CLAUDE_CODE)
    session = AgentSession(CLAUDE_CODE, binary, daemon)
    if every_command:
        daemon.mentectl("hooks", "install", CLAUDE_CODE.name, "--all-commands")
    spawns = root / "spawns"
    spawns.mkdir()
    wrap_hook(session.config_dir / "settings.json", spawns)
    return session


def test_the_hook_starts_for_every_action_command_and_for_nothing_else() -> None:
    root = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    daemon = DaemonProcess(root)
    daemon.start()
    try:
        session = filtered_session(root, daemon, every_command=False)
        spawns = root / "spawns"
        rows = action_rows()
        with daemon.client() as client:
            for action in sorted({action for _, actions in rows for action in actions}):
                request = StoreRequest(
                    content=f"rule for {action}",
                    memory_type=MemoryType.PROCEDURAL,
                    tags=[trigger_tag(action)],
                )
                client.expect(request, StoredReply)
        commands = [command for command, _ in rows] + UNRELATED
        script = Script(commands=commands, max_retries=0)
        with ModelServer(script) as server:
            result = session.run(server, PROMPT)
        assert result.returncode == 0, result.stderr
        assert server.turns[-1].reply.startswith("text:"), "the script did not run to its end"
        spawned = spawned_commands(spawns)
        with daemon.client() as client:
            fires = client.expect(LogRequest(n=500), LogReply).fires
        handed = {fire.command for fire in fires if fire.delivery != "none"}
        missed = [command for command, _ in rows if command not in spawned]
        assert missed == [], "action commands the filter kept from the hook"
        assert [command for command, _ in rows if command not in handed] == []
        assert [command for command in UNRELATED if command in spawned] == []
        record_figures(
            "prefilter",
            agent=CLAUDE_CODE.name,
            version=CLAUDE_CODE.version,
            commands=len(commands),
            action_commands=len(rows),
            spawns=len(spawned),
            seconds=round(result.seconds, 1),
        )
    finally:
        if daemon.proc is not None:
            daemon.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("every_command", [True, False], ids=["every-command", "filtered"])
def test_spawns_per_100_commands_of_a_realistic_session(every_command: bool) -> None:
    """The figure for docs/benchmarks.md; run when measuring (`MENTED_AGENT_REPORT` set)."""
    if not os.environ.get(REPORT_ENV):
        pytest.skip(f"a measurement: set {REPORT_ENV} (python -m tests.test_real_prefilter)")
    root = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    daemon = DaemonProcess(root)
    daemon.start()
    try:
        session = filtered_session(root, daemon, every_command=every_command)
        script = Script(commands=REALISTIC_SESSION, max_retries=0)
        with ModelServer(script) as server:
            result = session.run(server, PROMPT)
        assert result.returncode == 0, result.stderr
        spawned = spawned_commands(root / "spawns")
        action = [
            c for c in REALISTIC_SESSION if Matcher(load_action_table(Config())).actions_in(c)
        ]
        assert all(command in spawned for command in action)
        record_figures(
            "realistic",
            hook="every command" if every_command else "filtered",
            commands=len(REALISTIC_SESSION),
            action_commands=len(action),
            spawns=len(spawned),
            seconds=round(result.seconds, 1),
        )
    finally:
        if daemon.proc is not None:
            daemon.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    env = {**os.environ, AGENT_TESTS_ENV: "1"}
    env.setdefault(REPORT_ENV, "/dev/stdout")
    sys.exit(
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", __file__],
            env=env,
            check=False,
        ).returncode
    )
