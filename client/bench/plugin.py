"""What mented's opencode plugin adds to a tool call, against the spawned hook shim.

`python -m mented_client.bench.plugin [RUNTIME ...]` starts a daemon of its own (one rule
for git-commit), then times, interleaved in one loop, the plugin's
`tool.execute.before` as opencode calls it, in each JavaScript runtime given (default:
`node`; opencode's own Bun is `BUN_BE_BUN=1 .../opencode`, see docs/benchmarks.md),
and the shim spawned as the agents spawn it (the real interpreter, `-I -S`), on the
same events: a command that names no action (`ls -la`) and a `git commit` whose rule
the session was handed already (the daemon answers nothing before the tool: the usual
case). Prints a Markdown table; p50 and p99 over the rounds. Last, the daemon's own
share: the same events through `HookHandler.handle` in this process, no socket (a
store of its own with the same rule, the same folder), at the same pause.

`MENTED_BENCH_BASELINE=FILE` (an earlier `opencode_plugin.js`, e.g. from `git show
main:mented/agents/opencode_plugin.js`) times that plugin too, in the same runtime
process, interleaved call by call with this one (each first in every other round):
rows marked "(baseline)", for a before and after on the same load.

Calls are `MENTED_BENCH_PAUSE_MS` apart (default 20): an agent's tool calls are a
model turn apart, and what the daemon does once an answer is sent (the fire log,
the session's record) is then done before the next call. Back to back, each call
would also pay for the one before it (`0` times them so).
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from mented.actions import load_action_table
from mented.agents.opencode import plugin_source, tool_event
from mented.config import Config
from mented.hooks import HookHandler
from mented.matcher import Matcher
from mented.protocol import HookRequest, StoredReply, StoreRequest, encode, recv_frame
from mented.sessions import SessionMemory
from mented.store import Store
from mented_client.bench.processes import Daemon
from mented_client.bench.timing import Summary, summarize
from mented_client.connection import Client
from mented_client.hook_settings import installed_shim, real_interpreter

Times = dict[str, list[int]]  # per command, the ns of each call
ROUNDS = 400
PAUSE_MS = 20  # between two calls: a model turn is far longer
SESSION = "ses_bench"
COMMANDS = {"no action (ls -la)": "ls -la", "commit, rule handed": 'git commit -m "fix: x"'}

# Runs the hook `rounds` times per command, interleaved; prints the ns of each call.
DRIVER = """
const [rounds, commands, plugins, pauseMs] = [
  Number(process.argv[2]), JSON.parse(process.argv[3]), JSON.parse(process.argv[5]),
  Number(process.argv[6]),
]
const pause = () => new Promise((done) => setTimeout(done, pauseMs))
const hooks = []
for (const file of plugins) {
  hooks.push(await (await import(file)).MentedPlugin({ directory: process.argv[4] }))
}
const times = Object.fromEntries(
  plugins.flatMap((file) => commands.map((c) => [`${file} ${c}`, []])),
)
let call = 0
for (let round = 0; round < rounds; round++) {
  for (const command of commands) {
    // Each plugin first in turn: a call's place in the round is not its cost.
    const turn = round % 2 === 0 ? [...hooks.entries()] : [...hooks.entries()].reverse()
    for (const [index, plugin] of turn) {
      await pause()
      const started = process.hrtime.bigint()
      try {
        await plugin["tool.execute.before"](
          { tool: "bash", sessionID: "ses_bench", callID: `call_${call++}` },
          { args: { command, description: "d" } },
        )
      } catch {}
      times[`${plugins[index]} ${command}`].push(Number(process.hrtime.bigint() - started))
    }
  }
}
console.log(JSON.stringify(times))
"""
PLUGINS = ["./mented.mjs"]
BASELINE = "./baseline.mjs"


def _plugin_times(
    runtime: list[str], folder: Path, rounds: int, env: dict[str, str], plugins: list[str]
) -> dict[str, list[int]]:
    """Per plugin file and command (`"FILE COMMAND"`), the ns of each call."""
    commands = list(COMMANDS.values())
    result = subprocess.run(  # noqa: S603 - the runtime the user named
        [
            *runtime,
            str(folder / "driver.mjs"),
            str(rounds),
            json.dumps(commands),
            str(folder),
            json.dumps(plugins),
            str(_pause_s() * 1000),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    times: dict[str, list[int]] = json.loads(result.stdout.strip().splitlines()[-1])
    return times


def _pause_s() -> float:
    """The pause between two timed calls, in seconds (`MENTED_BENCH_PAUSE_MS`)."""
    return float(os.environ.get("MENTED_BENCH_PAUSE_MS") or PAUSE_MS) / 1000


def _timed(folder: Path, rounds: int, prefix: str, call: Callable[[bytes], object]) -> Times:
    """Per command, the ns of each `call(event)`, on the plugin's events, a pause apart."""
    times: Times = {command: [] for command in COMMANDS.values()}
    calls = 0
    for _ in range(rounds):
        for command in COMMANDS.values():
            calls += 1
            call_id = f"{prefix}{calls}"
            event = tool_event(command, cwd=str(folder), session=SESSION, call_id=call_id)
            time.sleep(_pause_s())
            started = time.perf_counter_ns()
            call(event)
            times[command].append(time.perf_counter_ns() - started)
    return times


def _shim_times(socket: Path, folder: Path, rounds: int) -> Times:
    argv = [str(real_interpreter()), "-I", "-S", str(installed_shim()), "opencode", str(socket)]

    def spawn(event: bytes) -> None:
        subprocess.run(argv, input=event, capture_output=True, check=False)  # noqa: S603

    return _timed(folder, rounds, "shim_", spawn)


def _floor_times(socket_path: Path, folder: Path, rounds: int) -> Times:
    """The same request from Python on a fresh connection: the daemon's part, the floor."""

    def ask(event: bytes) -> None:
        request = HookRequest(agent="opencode", event=msgspec.Raw(event), deadline=time.time() + 5)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(socket_path))
            sock.sendall(encode(request))
            recv_frame(sock)

    return _timed(folder, rounds, "raw_", ask)


def _handler_times(folder: Path, rounds: int) -> Times:
    """The same events through the daemon's handler in this process: its share of a call."""
    store = Store(folder / "handler-data", sync=False)
    sessions = SessionMemory(folder / "handler-sessions", ttl_s=3600)
    try:
        store.store("commit messages: single line", tags=["trigger:git-commit"])
        config = Config()
        hooks = HookHandler(store, Matcher(load_action_table(config)), config, sessions)
        commit = COMMANDS["commit, rule handed"]
        # The session is handed the commit's rule once (a stop), before timing.
        hooks.handle("opencode", tool_event(commit, cwd=str(folder), session=SESSION))
        return _timed(folder, rounds, "in_", functools.partial(hooks.handle, "opencode"))
    finally:
        sessions.close()
        store.close()


def _label(runtime: list[str]) -> str:
    """How a runtime is named in the table: opencode's Bun, or the program's name."""
    if any(part.startswith("BUN_BE_BUN=") for part in runtime):
        return "Bun (opencode's own)"
    return Path(runtime[0]).name


def _row(name: str, summary: Summary) -> str:
    return f"| {name} | {summary.p50_us / 1000:.2f} ms | {summary.p99_us / 1000:.2f} ms |"


def main(argv: list[str]) -> int:
    runtimes = [shlex.split(spec) for spec in argv] or [["node"]]
    rounds = int(os.environ.get("MENTED_BENCH_ROUNDS") or ROUNDS)
    with tempfile.TemporaryDirectory(prefix="mented-plugin-bench-") as name:
        root = Path(name)
        root.chmod(0o700)
        config = root / "config.toml"
        config.write_text("")
        daemon = Daemon(root, "daemon", config)
        daemon.start()
        try:
            with Client(daemon.socket) as client:
                request = StoreRequest(
                    content="commit messages: single line", tags=["trigger:git-commit"]
                )
                client.expect(request, StoredReply)
            (root / "mented.mjs").write_text(plugin_source())
            (root / "driver.mjs").write_text(DRIVER)
            plugins = list(PLUGINS)
            baseline = os.environ.get("MENTED_BENCH_BASELINE")
            if baseline:
                (root / BASELINE).write_text(Path(baseline).read_text())
                plugins.append(BASELINE)
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("MENTED_")},
                "MENTED_SOCKET": str(daemon.socket),
            }
            # The session is handed the commit's rule once (a stop), before timing.
            _plugin_times(runtimes[0], root, 1, env, plugins)
            print("| per tool call | p50 | p99 |")
            print("|---|--:|--:|")
            for runtime in runtimes:
                label = _label(runtime)
                times = _plugin_times(runtime, root, rounds, env, plugins)
                for plugin in plugins:
                    which = " (baseline)" if plugin == BASELINE else ""
                    for command_name, command in COMMANDS.items():
                        samples = times[f"{plugin} {command}"]
                        print(_row(f"plugin{which} in {label}, {command_name}", summarize(samples)))
            for command_name, samples in zip(
                COMMANDS, _shim_times(daemon.socket, root, rounds).values(), strict=True
            ):
                print(_row(f"shim spawned, {command_name}", summarize(samples)))
            for command_name, samples in zip(
                COMMANDS, _floor_times(daemon.socket, root, rounds).values(), strict=True
            ):
                print(_row(f"floor: the request from Python, {command_name}", summarize(samples)))
            for command_name, samples in zip(
                COMMANDS, _handler_times(root, rounds).values(), strict=True
            ):
                summary = summarize(samples)
                print(
                    f"| the daemon's handler in-process, {command_name} | "
                    f"{summary.p50_us / 1000:.3f} ms | {summary.p99_us / 1000:.3f} ms |"
                )
        finally:
            daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
