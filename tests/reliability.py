"""Helpers for the reliability tests (crash safety, hostile clients, permissions).

- `record_figures`: when `MENTED_RELIABILITY_REPORT` names a file, each test
  appends what it did (rounds, writes, fuzz cases, connections) to it as one
  JSON line; bench/reliability_run.py sets it and prints the collected figures.
- `ConstrainedDaemon`: the real `mented` started under a given umask or
  descriptor limit, set in the child before it execs the daemon.
- `rss_kib`, `open_descriptors`: what /proc says about a process.
"""

from __future__ import annotations

import os
import subprocess
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

    def start(self, *extra_args: str, wait: bool = True) -> subprocess.Popen[bytes]:
        umask = "" if self.umask is None else f"{self.umask:o}"
        nofile = "" if self.nofile is None else str(self.nofile)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [PYTHON, "-c", _LAUNCHER, umask, nofile, *extra_args],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        if wait:
            self.wait_ready()
        return self.proc


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
