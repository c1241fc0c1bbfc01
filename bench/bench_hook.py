# ruff: noqa: INP001 - a script, not a package
"""Benchmark: the hook as the agent runs it, against the bare interpreter.

Each sample is a whole process, spawn to exit: the command line that
`mentectl hooks install` wrote, with a PreToolUse event on stdin, against a real
daemon. The baseline is `<same interpreter> -I -S -c pass` with the same stdin.
Hook and baseline runs are interleaved (in a shuffled order each round) so that
machine load hits both alike.

Cases: a command that matches no action, a commit with 6 rules, a Claude-style
heredoc commit (6 rules), and the daemon down.

    .venv/bin/python bench/bench_hook.py [--rounds 300] [--json]

Target: the hook's median within 1.3x of the bare interpreter's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mented_client.bench import install_hook
from mented_client.connection import Client, NotRunningError, ProtocolError

from mented.memory import MemoryType
from mented.protocol import StatusReply, StatusRequest, StoredReply, StoreRequest

HEREDOC_COMMIT = """git commit -m "$(cat <<'EOF'
fix: handle empty input

The parser returned None for an empty file; return an empty list instead.

Co-Authored-By: Claude <noreply@anthropic.com>
EOF
)\""""
CASES = {
    "no action (ls -la)": "ls -la",
    "commit, 6 rules": 'git -c commit.gpgsign=false commit -m "fix: x"',
    "heredoc commit, 6 rules": HEREDOC_COMMIT,
}
DOWN = "daemon down"


def event(command: str, n: int) -> bytes:
    return json.dumps(
        {
            "session_id": "bench-session",
            "transcript_path": "/home/u/.claude/projects/repo/bench-session.jsonl",
            "cwd": "/home/u/repo",
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command, "description": "benchmark"},
            "tool_use_id": f"toolu_{n:08d}",
        }
    ).encode()


def timed(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, bytes]:
    started = time.perf_counter()
    result = subprocess.run(argv, input=stdin, capture_output=True, env=env, check=False)  # noqa: S603
    return (time.perf_counter() - started) * 1000, result.stdout


def start_daemon(root: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mented.daemon", "--log-level", "warning"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=(root / "mented.log").open("ab"),
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            with Client(env["MENTED_SOCKET"], connect_timeout=1, timeout=5) as client:
                client.expect(StatusRequest(), StatusReply)
                return proc
        except (NotRunningError, ProtocolError):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise
            time.sleep(0.05)


def summarize(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
    }


def run(rounds: int) -> tuple[str, dict[str, dict[str, float]]]:
    """The interpreter benchmarked, and the figures per case."""
    root = Path(tempfile.mkdtemp(prefix="mb-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MENTED_", "XDG_"))} | {
        "HOME": str(root),
        "MENTED_SOCKET": str(root / "mented.sock"),
        "MENTED_DATA_DIR": str(root / "data"),
        "MENTED_CONFIG": str(root / "config.toml"),
    }
    proc = start_daemon(root, env)
    results: dict[str, dict[str, float]] = {}
    try:
        with Client(env["MENTED_SOCKET"]) as client:
            for n in range(6):
                client.expect(
                    StoreRequest(
                        content=f"commit rule {n}: single line, conventional prefix, no emojis",
                        memory_type=MemoryType.PROCEDURAL,
                        tags=["trigger:git-commit"],
                    ),
                    StoredReply,
                )
        hook = shlex.split(install_hook(root, Path(env["MENTED_SOCKET"])))
        bare = [hook[0], "-I", "-S", "-c", "pass"]
        for command in CASES.values():  # warm up the daemon's caches and the page cache
            timed(hook, event(command, 0), env)
        _, out = timed(hook, event(CASES["commit, 6 rules"], 1), env)
        assert b"commit rule 5" in out, out
        _, out = timed(hook, event(CASES["no action (ls -la)"], 2), env)
        assert out == b"", out

        samples: dict[str, dict[str, list[float]]] = {
            name: {"hook": [], "bare": []} for name in [*CASES, DOWN]
        }
        counter = 10
        for _ in range(rounds):
            jobs = [(name, kind) for name in CASES for kind in ("hook", "bare")]
            random.shuffle(jobs)
            for name, kind in jobs:
                counter += 1
                payload = event(CASES[name], counter)
                elapsed, _ = timed(hook if kind == "hook" else bare, payload, env)
                samples[name][kind].append(elapsed)
        proc.terminate()
        proc.wait(timeout=10)
        down_event = event(CASES["commit, 6 rules"], 0)
        for _ in range(rounds):
            kinds = ["hook", "bare"]
            random.shuffle(kinds)
            for kind in kinds:
                elapsed, out = timed(hook if kind == "hook" else bare, down_event, env)
                assert out == b""
                samples[DOWN][kind].append(elapsed)
        for name, by_kind in samples.items():
            hook_stats = summarize(by_kind["hook"])
            bare_stats = summarize(by_kind["bare"])
            results[name] = {
                "hook_median_ms": hook_stats["median_ms"],
                "hook_p99_ms": hook_stats["p99_ms"],
                "bare_median_ms": bare_stats["median_ms"],
                "bare_p99_ms": bare_stats["p99_ms"],
                "ratio": hook_stats["median_ms"] / bare_stats["median_ms"],
            }
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return hook[0], results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300, help="samples per case and kind")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    interpreter, results = run(args.rounds)
    if args.json:
        meta = {"interpreter": interpreter, "rounds": args.rounds}
        print(json.dumps({"meta": meta, "cases": results}, indent=2))
        return 0
    print(f"interpreter: {interpreter}  rounds: {args.rounds}")
    print(
        f"{'case':<26} {'hook median':>11} {'hook p99':>9} {'bare median':>11} "
        f"{'bare p99':>9} {'ratio':>6}"
    )
    for name, row in results.items():
        print(
            f"{name:<26} {row['hook_median_ms']:>9.2f}ms {row['hook_p99_ms']:>7.2f}ms "
            f"{row['bare_median_ms']:>9.2f}ms {row['bare_p99_ms']:>7.2f}ms {row['ratio']:>6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
