"""1. The installed hook, spawn to exit, against the bare interpreter, interleaved."""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from mented.agents.pretooluse import text_of_answer
from mented.store import Store, StoreItem
from mented_client.bench.corpus import HEREDOC_COMMIT, RULES_PER_REPLY, hook_event, rule_text
from mented_client.bench.plans import Plan, Progress
from mented_client.bench.processes import Daemon
from mented_client.bench.timing import BenchError, Summary, summarize
from mented_client.hook_settings import command_argv


class HookCase(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    command: str  # the shell command in the agent's event
    daemon_up: bool
    stdout_bytes: int  # what the hook printed (the last run)
    time: Summary
    ratio: float  # median over the bare interpreter's median, same rounds


class HookSection(msgspec.Struct, frozen=True, kw_only=True):
    command_line: str  # as installed by `mentectl hooks install`
    baseline: str
    rounds: int
    bare: Summary
    cases: list[HookCase]


def fill_hook_store(data_dir: Path) -> None:
    """A small, realistic store: 6 commit rules, a few for other actions, other memories."""
    items = [
        StoreItem(content=rule_text(n, "git-commit"), tags=("trigger:git-commit",))
        for n in range(RULES_PER_REPLY)
    ]
    items += [
        StoreItem(content=rule_text(n, action), tags=(f"trigger:{action}",))
        for action in ("git-push", "pr-create", "git-push-force")
        for n in range(3)
    ]
    items += [
        StoreItem(
            content=f"The staging database is db-{n}.internal; use read replicas for reports."
        )
        for n in range(200)
    ]
    store = Store(data_dir)
    try:
        store.store_many(items)
    finally:
        store.close()


def install_hook(root: Path, socket_path: Path) -> str:
    """Install the Claude Code hook the way a user does; the command line it wrote.

    Runs `mentectl hooks install claude-code --settings FILE` as a process, with the
    benchmark's socket in the environment (it becomes the command line's fallback
    socket argument), and reads the command back from the settings file.
    """
    settings = root / "settings.json"
    home = root / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MENTED_", "XDG_"))}
    env.update(HOME=str(home), MENTED_SOCKET=str(socket_path))
    done = subprocess.run(  # noqa: S603 - our own interpreter and module
        [
            sys.executable,
            "-m",
            "mented_client.cli",
            "hooks",
            "install",
            "claude-code",
            "--settings",
            str(settings),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        raise BenchError(f"mentectl hooks install failed: {done.stderr or done.stdout}")
    document = json.loads(settings.read_text())
    for group in document.get("hooks", {}).get("PreToolUse", []):
        for hook in group.get("hooks", []):
            if "shim.py" in hook.get("command", ""):
                return str(hook["command"])
    raise BenchError(f"no mented hook in {settings} after installing it")


def _spawn(argv: Sequence[str], stdin: bytes, env: dict[str, str]) -> tuple[int, bytes]:
    """Run `argv` with `stdin`; (nanoseconds from spawn to exit, stdout)."""
    started = time.perf_counter_ns()
    done = subprocess.run(  # noqa: S603 - the installed hook or the bare interpreter
        argv, input=stdin, capture_output=True, env=env, check=False, timeout=30
    )
    took = time.perf_counter_ns() - started
    if done.returncode != 0:
        raise BenchError(f"{shlex.join(argv)} exited {done.returncode}: {done.stderr!r}")
    return took, done.stdout


def has_commit_rules(stdout: bytes) -> bool:
    """Whether the hook handed the agent every commit rule of `fill_hook_store`."""
    text = text_of_answer(stdout)
    return text is not None and all(
        rule_text(n, "git-commit") in text for n in range(RULES_PER_REPLY)
    )


@dataclass(frozen=True)
class _SpawnCase:
    name: str
    command: str  # the shell command in the event ("" for the bare interpreter)
    daemon_up: bool
    expect_output: bool


HOOK_CASES = (
    _SpawnCase(
        "no match", "ls -la src/ && git status --short", daemon_up=True, expect_output=False
    ),
    _SpawnCase(
        "commit, 6 rules",
        "git commit -m 'fix: handle an empty config file'",
        daemon_up=True,
        expect_output=True,
    ),
    _SpawnCase("heredoc commit", HEREDOC_COMMIT, daemon_up=True, expect_output=True),
    _SpawnCase(
        "daemon down",
        "git commit -m 'fix: handle an empty config file'",
        daemon_up=False,
        expect_output=False,
    ),
)


def bench_hook(plan: Plan, root: Path, daemon: Daemon, progress: Progress) -> HookSection:
    """Spawn the installed hook and the bare interpreter, interleaved, in shuffled order."""
    command_line = install_hook(root, daemon.socket)
    # The words the command line `exec`s (the agent's shell costs the same with or
    # without mented; its two file tests, measured in docs/benchmarks.md, next to nothing).
    run_words = command_argv(command_line)
    if run_words is None:
        raise BenchError(f"cannot read the installed hook command line {command_line!r}")
    hook_argv = run_words.argv
    # The same binary the hook runs, so the difference is the shim and nothing else.
    bare_argv = [hook_argv[0], "-I", "-S", "-c", "pass"]
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("MENTED_", "PYTHON"))}
    # No $MENTED_SOCKET: the installed command line's socket argument finds the daemon.
    # With it pointing at nothing, the hook meets a daemon that is down.
    down_env = {**base_env, "MENTED_SOCKET": str(root / "down" / "mented.sock")}
    samples: dict[str, list[int]] = {"bare": []}
    outputs: dict[str, int] = {}
    for case in HOOK_CASES:
        samples[case.name] = []
    for case in HOOK_CASES:  # warm the daemon's caches and the page cache; not counted
        _spawn(hook_argv, hook_event(case.command, "toolu_warmup", f"warmup-{case.name}"), base_env)
    rng = random.Random(6)  # noqa: S311 - order shuffling, not cryptography
    runs: list[_SpawnCase | None] = [None, *HOOK_CASES]  # None: the bare interpreter
    for index in range(plan.hook_rounds):
        # A new tool_use_id each round: the daemon answers a repeated event only once.
        event_id = f"toolu_bench_{index:06d}"
        rng.shuffle(runs)
        for run in runs:
            if run is None:  # the same stdin as the hook gets, unread
                took, _ = _spawn(bare_argv, hook_event(HOOK_CASES[1].command, event_id), base_env)
                samples["bare"].append(took)
                continue
            event = hook_event(run.command, event_id, session=f"bench-{event_id}-{run.name}")
            took, out = _spawn(hook_argv, event, base_env if run.daemon_up else down_env)
            if has_commit_rules(out) != run.expect_output or (out and not run.expect_output):
                wanted = f"all {RULES_PER_REPLY} rules" if run.expect_output else "silence"
                raise BenchError(
                    f"hook case {run.name!r}: expected {wanted} on stdout, got {out[:200]!r}"
                )
            samples[run.name].append(took)
            outputs[run.name] = len(out)
        if (index + 1) % max(plan.hook_rounds // 5, 1) == 0:
            progress(f"  hook: {index + 1} of {plan.hook_rounds} rounds")
    bare = summarize(samples["bare"])
    cases = []
    for case in HOOK_CASES:
        summary = summarize(samples[case.name])
        cases.append(
            HookCase(
                name=case.name,
                command=case.command,
                daemon_up=case.daemon_up,
                stdout_bytes=outputs.get(case.name, 0),
                time=summary,
                ratio=summary.p50_us / bare.p50_us,
            )
        )
    return HookSection(
        command_line=command_line,
        baseline=shlex.join(bare_argv),
        rounds=plan.hook_rounds,
        bare=bare,
        cases=cases,
    )
