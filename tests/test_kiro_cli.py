"""Kiro CLI: a stop by exit status 2, and a session that is the Kiro process itself.

Kiro's events carry no session id (tests/data/hook_agents/kiro-cli.json): the daemon takes
the process that ran the hook's shim as the session (mented/process_session.py), read from
/proc. Here /proc is a folder of the test's making, so that one Kiro process, another
one and a reused pid can be laid out without starting any.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from mented import process_session
from mented.agents import AGENTS, ToolCall
from mented.agents.kiro_cli import BLOCK
from mented.hooks import HookHandler
from mented.memory import MemoryType
from mented.process_session import FALLBACK_WINDOW_S, with_process_session
from mented.sessions import SessionMemory
from mented.store import Store
from mented_client import shim
from tests.test_hook_agents import home, mentectl
from tests.test_more_agents import handler

__all__ = ["home"]  # a fixture of the agents built from their sources

RULE = "commit messages: single line, conventional prefix, no emojis"
KIRO = 4242  # the Kiro process's pid in the made-up /proc


def commit(message: str = "fix: x", cwd: str = "/home/u/repo") -> bytes:
    return json.dumps(
        {
            "hook_event_name": "preToolUse",
            "cwd": cwd,
            "tool_name": "execute_bash",
            "tool_input": {"command": f"git commit -m '{message}'", "summary": "Commit"},
        }
    ).encode()


def stat_line(pid: int, comm: str, ppid: int, start: int) -> str:
    """A /proc/<pid>/stat line: fields 1-22 as the kernel writes them (start time is 22nd)."""
    middle = " ".join(["0"] * 17)  # fields 5 to 21
    return f"{pid} ({comm}) S {ppid} {middle} {start} 0 0\n"


@pytest.fixture
def proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proc"
    (root / "sys" / "kernel" / "random").mkdir(parents=True)
    (root / "sys" / "kernel" / "random" / "boot_id").write_text("0b5f-1a2b\n")
    monkeypatch.setattr(process_session, "PROC", root)
    process_session._boot_id.cache_clear()
    return root


def add(proc: Path, pid: int, comm: str, ppid: int, start: int = 100) -> None:
    (proc / str(pid)).mkdir(exist_ok=True)
    (proc / str(pid) / "stat").write_text(stat_line(pid, comm, ppid, start))


def kiro_hook(proc: Path, shim_pid: int, parent: int = KIRO, start: int = 100) -> int:
    """A Kiro process `parent` (if new) running the hook `shim_pid`, as `bash -c` exec'd it."""
    if not (proc / str(parent)).exists() or start != 100:
        add(proc, parent, "kiro-cli-chat", 77, start)
    add(proc, shim_pid, "python3.11", parent)
    return shim_pid


@pytest.fixture
def store(store: Store) -> Store:
    store.store(RULE, memory_type=MemoryType.PROCEDURAL, tags=["trigger:git-commit"])
    return store


def answer(hooks: HookHandler, event: bytes, pid: int | None) -> bytes:
    """What the daemon answers Kiro's hook process `pid` (the server's two steps)."""
    call = with_process_session("kiro-cli", AGENTS["kiro-cli"].decode(event), lambda: pid)
    return hooks.handle_decoded("kiro-cli", call)


# ------------------------------------------------------------------ the session


def test_one_kiro_process_is_stopped_once_another_gets_its_own_stop(
    proc: Path, store: Store, sessions: SessionMemory
) -> None:
    hooks = handler(store, sessions)
    first = answer(hooks, commit(), kiro_hook(proc, 5001))
    assert first.startswith(BLOCK)
    assert RULE in first.decode()
    # The retry, a new hook process of the same Kiro: it runs (Kiro takes no pointer:
    # a preToolUse hook's stdout reaches no one, so nothing is said at all).
    assert answer(hooks, commit(), kiro_hook(proc, 5002)) == b""
    assert answer(hooks, commit("fix: y"), kiro_hook(proc, 5003)) == b""
    # Another Kiro process: its own stop.
    other = answer(hooks, commit(), kiro_hook(proc, 6001, parent=4300))
    assert other.startswith(BLOCK)
    assert RULE in other.decode()
    # The first Kiro's pid, reused by a new process (another start time): a new session.
    reused = answer(hooks, commit(), kiro_hook(proc, 7001, start=999))
    assert reused.startswith(BLOCK)


def test_a_shell_between_kiro_and_the_shim_is_passed_over(proc: Path) -> None:
    add(proc, KIRO, "kiro-cli-chat", 77)
    add(proc, 900, "bash", KIRO)
    add(proc, 901, "python3", 900)
    add(proc, 902, "python3", KIRO)
    assert process_session.process_session(901, "/r") == process_session.process_session(902, "/r")
    assert f"process {KIRO} " in process_session.process_session(901, "/r")


@pytest.mark.parametrize(
    "damage",
    ["symlink", "fifo", "huge", "garbage", "no parent", "init", "letters"],
)
def test_an_unreadable_or_hostile_proc_gives_the_directory_and_the_hour(
    proc: Path, tmp_path: Path, damage: str
) -> None:
    kiro_hook(proc, 5001)
    stat = proc / "5001" / "stat"
    if damage == "symlink":  # never followed, even to a real stat
        real = tmp_path / "elsewhere"
        real.write_text(stat_line(5001, "python3", KIRO, 1))
        stat.unlink()
        stat.symlink_to(real)
    elif damage == "fifo":  # must not hang
        stat.unlink()
        os.mkfifo(stat)
    elif damage == "huge":
        stat.write_text("5001 (x) S " + "1 " * 4096)
    elif damage == "garbage":
        stat.write_bytes(b"\xff\xfe not a stat line")
    elif damage == "no parent":
        (proc / str(KIRO) / "stat").unlink()
    elif damage == "init":  # Kiro is gone: the shim was handed to pid 1
        add(proc, 5001, "python3", 1)
    else:
        stat.write_text(stat_line(5001, "python3", KIRO, 1).replace(f" {KIRO} ", " 4x2 "))
    key = process_session.process_session(5001, "/home/u/repo", now=7200.5)
    assert key == "directory /home/u/repo hour 2"


def test_without_a_peer_pid_the_key_is_the_directory_for_an_hour(proc: Path) -> None:
    at = 10 * FALLBACK_WINDOW_S
    key = process_session.process_session(None, "/r", now=at)
    assert key == process_session.process_session(None, "/r", now=at + FALLBACK_WINDOW_S - 1)
    assert key != process_session.process_session(None, "/r", now=at + FALLBACK_WINDOW_S)
    assert key != process_session.process_session(None, "/other", now=at)


def test_a_command_name_with_spaces_and_parentheses_is_read_to_its_last_parenthesis(
    proc: Path,
) -> None:
    add(proc, KIRO, "a) S 1 (b", 77, start=31337)
    add(proc, 5001, "python3", KIRO)
    assert process_session.process_session(5001, "/r") == (
        f"process {KIRO} started 31337 boot 0b5f-1a2b"
    )


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="no /proc here")
def test_on_this_machine_the_session_is_this_tests_parent_or_above() -> None:
    key = process_session.process_session(os.getpid(), "/r")
    assert key == process_session.process_session(os.getpid(), "/r")
    assert key.startswith("process ")
    assert int(key.split()[1]) in {os.getppid(), *_ancestors()}


def _ancestors() -> set[int]:
    found, pid = set(), os.getppid()
    for _ in range(4):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        pid = int(fields[1])
        found.add(pid)
    return found


def test_other_agents_keep_their_own_session_and_a_given_one_is_kept(proc: Path) -> None:
    kiro_hook(proc, 5001)
    claude = ToolCall(command="git commit -m x", session=None)
    asked: list[bool] = []
    peer = lambda: asked.append(True) or 5001  # noqa: E731 - counts the system calls
    assert with_process_session("claude-code", claude, peer) is claude
    named = ToolCall(command="git commit -m x", session="doctor-1")
    assert with_process_session("kiro-cli", named, peer) is named
    assert not asked  # no peer pid asked for: no system call on other agents' hooks


# ------------------------------------------------------------------ the answer


def test_the_shim_writes_a_block_to_stderr_with_status_2_and_nothing_else_so() -> None:
    assert shim.BLOCK == BLOCK
    reason = "mented stopped this command once, before it ran: the rules"
    assert shim.destination(AGENTS["kiro-cli"].render_deny(reason)) == (2, reason.encode(), 2)
    context = b'{"hookSpecificOutput": {}}'
    assert shim.destination(context) == (1, context, 0)
    assert shim.destination(b"") == (1, b"", 0)
    assert shim.destination(BLOCK) == shim.destination(BLOCK + b" \n") == (1, b"", 0)
    # Any other typed daemon message is still silence (an older daemon's error).
    assert AGENTS["kiro-cli"].render_context("anything") == b""


def test_a_block_from_the_daemon_reaches_main_as_stderr_and_status_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written: list[tuple[int, bytes]] = []
    exits: list[int] = []
    monkeypatch.setattr(shim, "run", lambda argv, environ: BLOCK + b"the rules")
    monkeypatch.setattr(
        shim.posix, "write", lambda fd, data: written.append((fd, bytes(data))) or len(data)
    )

    def leave(status: int) -> None:
        exits.append(status)
        raise SystemExit

    monkeypatch.setattr(shim.posix, "_exit", leave)
    monkeypatch.setattr(sys, "argv", ["shim.py", "kiro-cli"])
    with pytest.raises(SystemExit):
        shim.main()
    assert (written, exits) == ([(2, b"the rules")], [2])


# ------------------------------------------------------------------ installing


def test_install_writes_an_agent_of_its_own_and_says_how_to_use_it(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = mentectl(capsys, "hooks", "install", "kiro-cli")
    assert status == 0
    path = home / ".kiro" / "agents" / "mented.json"
    assert "Installed the mented hook for Kiro CLI in ~/.kiro/agents/mented.json." in out
    assert "default agent is built in and has no file to hold a hook" in out
    assert "kiro-cli chat --agent mented" in out
    assert "kiro-cli settings chat.defaultAgent mented" in out
    doc: dict[str, Any] = json.loads(path.read_text())
    assert (doc["name"], doc["tools"], doc["useLegacyMcpJson"]) == ("mented", ["*"], True)
    entries = doc["hooks"]["preToolUse"]
    matchers = [entry["matcher"] for entry in entries]
    assert {"execute_bash", "shell"} <= set(matchers)
    assert "@*/create_pull_request" in matchers
    for entry in entries:  # the fields Kiro's Hook takes, and no approval anywhere
        assert set(entry) == {"matcher", "command", "timeout_ms", "max_output_size"}
        assert entry["timeout_ms"] == 5000
        assert "shim.py kiro-cli" in entry["command"]
    status, out, _ = mentectl(capsys, "hooks", "status", "kiro-cli")
    assert status == 0
    assert "preToolUse installed, ok" in out
    assert mentectl(capsys, "hooks", "uninstall", "kiro-cli")[0] == 0
    assert not path.exists()


def test_uninstall_keeps_what_the_user_added_to_the_agent(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mentectl(capsys, "hooks", "install", "kiro-cli")[0] == 0
    path = home / ".kiro" / "agents" / "mented.json"
    doc = json.loads(path.read_text())
    doc["model"] = "claude-sonnet-4"
    doc["hooks"]["agentSpawn"] = [{"command": "git status"}]
    path.write_text(json.dumps(doc, indent=2))
    assert mentectl(capsys, "hooks", "uninstall", "kiro-cli")[0] == 0
    left = json.loads(path.read_text())
    assert left["model"] == "claude-sonnet-4"
    assert left["hooks"] == {"agentSpawn": [{"command": "git status"}]}


def test_a_project_install_is_the_projects_agent_and_says_to_keep_it_out_of_git(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    status, out, _ = mentectl(capsys, "hooks", "install", "kiro-cli", "--project", str(project))
    assert status == 0
    assert (project / ".kiro" / "agents" / "mented.json").is_file()
    assert ".git/info/exclude" in out
    assert not (home / ".kiro").exists()
