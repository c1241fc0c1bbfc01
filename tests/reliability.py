"""Helpers for the reliability tests (crash safety, hostile clients, permissions).

- `record_figures`: when `MENTED_RELIABILITY_REPORT` names a file, each test
  appends what it did (rounds, writes, fuzz cases, connections) to it as one
  JSON line; `python -m tests.reliability` sets it and prints the collected figures.
- `ConstrainedDaemon`: the real `mented` started under a given umask or
  descriptor limit, set in the child before it execs the daemon;
  `start_refused`: start one that must refuse to start.
- `rss_kib`, `open_descriptors`: what /proc says about a process.

`python -m tests.reliability [--long]` runs the reliability test files and prints
their figures (docs/reliability.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from tests.conftest import PYTHON, DaemonProcess

REPORT_ENV = "MENTED_RELIABILITY_REPORT"


def record_figures(test: str, **figures: float | str) -> None:
    """Append `figures` under the name `test` when a report file was asked for."""
    target = os.environ.get(REPORT_ENV)
    if not target:
        return
    line = msgspec.json.encode({"test": test, **figures}) + b"\n"
    with Path(target).open("ab") as report:
        report.write(line)


# Sets the limits, then becomes the daemon: no preexec_fn (unsafe with threads).
_LAUNCHER = """\
import os, resource, sys
umask, nofile = sys.argv[1], sys.argv[2]
if umask:
    os.umask(int(umask, 8))
if nofile:
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(nofile), int(nofile)))
os.execv(sys.executable, [sys.executable, "-m", "mented.daemon", *sys.argv[3:]])
"""


class ConstrainedDaemon(DaemonProcess):
    """A `DaemonProcess` whose daemon runs under `umask` and/or a descriptor limit."""

    def __init__(self, root: Path, *, umask: int | None = None, nofile: int | None = None) -> None:
        super().__init__(root)
        self.umask = umask
        self.nofile = nofile

    def command(self, *extra_args: str) -> list[str]:
        umask = "" if self.umask is None else f"{self.umask:o}"
        nofile = "" if self.nofile is None else str(self.nofile)
        return [PYTHON, "-c", _LAUNCHER, umask, nofile, *extra_args]


def start_refused(daemon: DaemonProcess) -> str:
    """Start `daemon`, expect it to refuse (exit 1), and return its log."""
    proc = daemon.start(wait=False)
    assert proc.wait(timeout=30) == 1, daemon.log()
    daemon.proc = None
    return daemon.log()


def rss_kib(pid: int) -> int:
    """Resident memory of `pid` in KiB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    msg = f"no VmRSS for pid {pid}"
    raise AssertionError(msg)


def open_descriptors(pid: int) -> list[str]:
    """What each open descriptor of `pid` points at (`socket:[inode]`, paths, ...)."""
    fd_dir = Path(f"/proc/{pid}/fd")
    targets = []
    for fd in fd_dir.iterdir():
        try:
            targets.append(str(fd.readlink()))
        except FileNotFoundError:  # closed while we looked
            continue
    return targets


# ------------------------------------------------------------- the figures run

FILES = (
    "tests/test_crash_safety.py",
    "tests/test_hostile_clients.py",
    "tests/test_hostile_commands.py",
    "tests/test_permissions.py",
)
# `--long`: the same tests, ten times further (a few minutes on two cores).
LONG_RUN = {
    "MENTED_KILL_ROUNDS": "200",
    "MENTED_FUZZ_EXAMPLES": "2000",
    "MENTED_IDLE_CONNECTIONS": "4000",
    "MENTED_LOAD_SECONDS": "30",
    "MENTED_START_STOP_CYCLES": "40",
    "MENTED_FLOOD_COMMANDS": "4096",
}


def main(argv: list[str] | None = None) -> int:
    """Run the reliability tests and print what they did as a Markdown table."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.reliability",
        description="Run the crash-safety, hostile-client and permission tests; print figures.",
    )
    parser.add_argument("--long", action="store_true", help="ten times the default run")
    args = parser.parse_args(argv)
    settings = LONG_RUN if args.long else {}
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "figures.jsonl"
        env = {**os.environ, REPORT_ENV: str(report), **settings}
        started = time.monotonic()
        status = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *FILES],
            env=env,
            check=False,
        ).returncode
        elapsed = time.monotonic() - started
        lines = report.read_bytes().splitlines() if report.exists() else []
    print(f"\n{'long' if args.long else 'default'} run, pytest exit {status}, {elapsed:.0f} s")
    for name, value in settings.items():
        print(f"{name}={value}")
    print("\n| test | figures |\n|---|---|")
    for line in lines:
        entry = msgspec.json.decode(line)
        test = entry.pop("test")
        print(f"| {test} | " + ", ".join(f"{k} {v}" for k, v in entry.items()) + " |")
    return status


if __name__ == "__main__":
    sys.exit(main())
