"""Ctrl-C while the daemon starts: one line, no traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import PYTHON, ctrl_c_reaches_children, isolated_env

# Ctrl-C lands in the middle of `Server.open` (the store opened, the socket not bound).
_INTERRUPTED_OPEN = """
import os, signal, sys
import mented.server as server
opened = server.Server.open
def open_then_interrupted(self):
    opened(self)
    os.kill(os.getpid(), signal.SIGINT)
server.Server.open = open_then_interrupted
from mented.daemon import main
sys.exit(main([]))
"""


def test_ctrl_c_while_the_daemon_starts_prints_one_line(short_tmp: Path) -> None:
    env = isolated_env(short_tmp)
    with ctrl_c_reaches_children():
        result = subprocess.run(
            [PYTHON, "-c", _INTERRUPTED_OPEN],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 130
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == "mented: interrupted; stopped"
    assert not Path(env["MENTED_SOCKET"]).exists()  # what it had opened is closed
