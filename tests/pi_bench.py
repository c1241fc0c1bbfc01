"""What mented's pi extension adds per tool call, against the spawned hook shim.

`python -m tests.pi_bench [ROUNDS]` (needs node and pi from the real-agent cache,
`tests/real_agents.py`): a daemon with one `git-commit` rule, the extension as
`mentectl hooks install pi` writes it, loaded by pi's own jiti in node
(tests/pi_harness.mjs), its `tool_call` and `tool_result` handlers called in a
loop; the shim (`python -I -S shim.py pi SOCKET`, the real interpreter) spawned
with the same events, interleaved. Prints the Markdown rows of docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mented.memory import MemoryType, trigger_tag
from mented.protocol import StoredReply, StoreRequest
from mented_client.hook_settings import installed_shim, real_interpreter
from tests.conftest import DaemonProcess
from tests.real_agents import PI, cache_dir, install

BATCH = 50


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main(rounds: int) -> int:
    install(PI)
    root = Path(tempfile.mkdtemp(prefix="pib-", dir="/tmp"))
    daemon = DaemonProcess(root)
    daemon.start()
    try:
        with daemon.client() as client:
            rule = StoreRequest(
                content="commit messages: single line",
                memory_type=MemoryType.PROCEDURAL,
                tags=[trigger_tag("git-commit")],
            )
            client.expect(rule, StoredReply)
        daemon.mentectl("hooks", "install", "pi")
        extension = daemon.home / ".pi" / "agent" / "extensions" / "mented.ts"
        node = shutil.which("node")
        assert node is not None
        jiti = cache_dir() / PI.cache_name / "node_modules" / "jiti"
        harness = Path(__file__).parent / "pi_harness.mjs"
        proc = subprocess.Popen(
            [node, str(harness), str(jiti), str(extension)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=daemon.env,
            text=True,
        )
        assert proc.stdin is not None
        assert proc.stdout is not None
        cwd = str(root)
        cases = {
            "ls": ("tool_call", {"command": "ls -la"}),
            "git commit, before": ("tool_call", {"command": 'git commit -m "fix: x"'}),
            "git commit, after": ("tool_result", {"command": 'git commit -m "fix: x"'}),
        }
        figures: dict[str, dict[str, list[float]]] = {
            name: {"ext": [], "shim": []} for name in cases
        }
        shim = [
            str(real_interpreter()),
            "-I",
            "-S",
            str(installed_shim()),
            "pi",
            str(daemon.socket),
        ]
        for index in range(rounds):
            for name, (on, tool_input) in cases.items():
                event = {"toolName": "bash", "toolCallId": f"c{index}", "input": tool_input}
                request = {
                    "on": on,
                    "event": event,
                    "cwd": cwd,
                    "session": "bench",
                    "repeat": BATCH,
                }
                proc.stdin.write(json.dumps(request) + "\n")
                proc.stdin.flush()
                answer = json.loads(proc.stdout.readline())
                figures[name]["ext"].extend(us / 1000 for us in answer["us"])
                wire = {
                    "event": on,
                    "session_id": "bench",
                    "cwd": cwd,
                    "tool_name": "bash",
                    "tool_call_id": f"c{index}",
                    "input": tool_input,
                }
                for _ in range(BATCH // 5):
                    started = time.perf_counter()
                    subprocess.run(
                        shim, input=json.dumps(wire).encode(), capture_output=True, check=True
                    )
                    figures[name]["shim"].append((time.perf_counter() - started) * 1000)
        proc.stdin.close()
        proc.wait(timeout=30)
    finally:
        daemon.stop()
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"load average (1 min) after: {load:.2f}; {rounds} rounds")
    print("| tool call | extension p50 | extension p99 | shim spawned p50 | shim spawned p99 |")
    print("|---|--:|--:|--:|--:|")
    for name, samples in figures.items():
        ext50, ext99 = _percentiles(samples["ext"])
        shim50, shim99 = _percentiles(samples["shim"])
        print(f"| {name} | {ext50:.2f} ms | {ext99:.2f} ms | {shim50:.1f} ms | {shim99:.1f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10))
