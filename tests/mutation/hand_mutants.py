"""Hand-made mutation testing: apply listed mutants one at a time, run a command, restore.

For what mutmut cannot reach or cannot finish on a busy machine (docs/testing.md):
the shim (run as a file by its tests), and the big modules whose whole test file
takes minutes per mutant. Usage, from the repository's root:

    .venv/bin/python tests/mutation/hand_mutants.py client/shim.py \\
        tests/mutation/shim.txt -- .venv/bin/pytest -n 0 -q -x tests/test_shim.py

A list holds blocks separated by a line `====`: a name line, the text to find
(exactly once across the files given, comma-separated), a line `----`, and its
replacement. `ONLY=name,name` runs just those. Each mutant is KILLED when the
command fails or outlives `TIMEOUT` seconds (default 600: a mutant that turns a
deadline into an hour hangs its test), SURVIVED when it passes. The files are put
back after each run and on SIGTERM; run it in a copy of the tree when other work
uses the same files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    split = sys.argv.index("--")
    files = [Path(name) for name in sys.argv[1].split(",")]
    blocks = [b for b in Path(sys.argv[2]).read_text().split("\n====\n") if b.strip()]
    command = sys.argv[split + 1 :]
    only = set(filter(None, os.environ.get("ONLY", "").split(",")))
    timeout = float(os.environ.get("TIMEOUT", "600"))
    originals = {path: path.read_text() for path in files}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    killed = survived = 0
    try:
        for block in blocks:
            name, rest = block.strip("\n").split("\n", 1)
            if only and name not in only:
                continue
            old, new = rest.split("\n----\n")
            hits = [path for path in files if originals[path].count(old) == 1]
            if len(hits) != 1 or sum(text.count(old) for text in originals.values()) != 1:
                print(f"SKIP {name}: its text is not found exactly once", flush=True)
                continue
            target = hits[0]
            target.write_text(originals[target].replace(old, new))
            started = time.monotonic()
            try:
                done = subprocess.run(
                    command, capture_output=True, text=True, check=False, timeout=timeout
                )
                returncode, lines = done.returncode, done.stdout.strip().splitlines()
            except subprocess.TimeoutExpired:
                returncode, lines = -1, [f"timed out after {timeout:.0f} s"]
            target.write_text(originals[target])
            failed = [line for line in lines if line.startswith("FAILED")][:1]
            status = "KILLED" if returncode else "SURVIVED"
            killed += bool(returncode)
            survived += not returncode
            took = time.monotonic() - started
            print(
                f"{status} {name} ({took:.0f} s) {lines[-1] if lines else ''} {failed}", flush=True
            )
    finally:
        for path, text in originals.items():
            path.write_text(text)
    print(f"TOTAL {killed + survived}: {killed} killed, {survived} survived", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
