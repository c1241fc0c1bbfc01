"""Ctrl-C during `mentectl bench`: one line, no tracebacks from its helper processes."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.conftest import PYTHON, ctrl_c_reaches_children, isolated_env


def test_ctrl_c_during_bench_prints_one_line(short_tmp: Path) -> None:
    # A session of its own, as a shell's job: the "terminal's" Ctrl-C goes to its group.
    with ctrl_c_reaches_children():
        bench = subprocess.Popen(
            [PYTHON, "-m", "mented_client.cli", "bench", "--smoke"],
            env=isolated_env(short_tmp),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    try:
        assert bench.stderr is not None
        said = []
        # Once the hook benchmark runs, its daemon and both echo servers are up.
        while not (line := bench.stderr.readline()).startswith("hook:"):
            assert line, f"bench ended before its hook benchmark: {''.join(said)}"
            said.append(line)
        os.killpg(bench.pid, signal.SIGINT)
        out, rest = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert bench.returncode == 130
    assert out == ""
    assert "Traceback" not in rest
    assert "KeyboardInterrupt" not in rest
    assert rest.strip().splitlines()[-1] == (
        "mentectl: bench interrupted: its daemons are stopped, nothing was written"
    )
