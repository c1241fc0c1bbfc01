"""The machine the figures were taken on: CPU, cores, OS, Python, and its load."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
from pathlib import Path

import msgspec


class Machine(msgspec.Struct, frozen=True, kw_only=True):
    cpu: str
    cores: int
    os: str
    python: str
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    if sys.platform == "darwin":
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            return subprocess.run(
                ["/usr/sbin/sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True,
                text=True,
                check=True,
                timeout=5,
            ).stdout.strip()
    return platform.processor() or platform.machine() or "unknown"


def load_average() -> tuple[float, float, float]:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)
    return (round(one, 2), round(five, 2), round(fifteen, 2))


def describe_machine() -> Machine:
    """CPU, cores, OS and Python of this machine, and its load right now."""
    return Machine(
        cpu=_cpu_model(),
        cores=os.cpu_count() or 1,
        os=platform.platform(),
        python=f"{platform.python_implementation()} {platform.python_version()}",
        load_before=load_average(),
    )
