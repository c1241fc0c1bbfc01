"""A line on the terminal while a long request runs (a sync, an import): what, and for how long.

Only when standard error is a terminal (never in a pipe, a log or `--json` output), and
only past `delay_s`, so that a quick sync prints nothing more than before. The line is
rewritten in place every second and erased at the end.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Self, TextIO


class Progress:
    """`with Progress("syncing with X"):` shows "syncing with X... 12 s" while it runs."""

    def __init__(
        self, what: str, *, delay_s: float = 1.0, stream: TextIO | None = None, show: bool = True
    ) -> None:
        self.what = what
        self.delay_s = delay_s
        self.stream = stream or sys.stderr
        self.show = show and self.stream.isatty()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._shown = False

    def __enter__(self) -> Self:
        if self.show:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def _run(self) -> None:
        started = time.monotonic()
        if self._done.wait(self.delay_s):
            return
        while True:
            elapsed = time.monotonic() - started
            self.stream.write(f"\r\x1b[K{self.what}... {elapsed:.0f} s (Ctrl-C stops waiting)")
            self.stream.flush()
            self._shown = True
            if self._done.wait(1.0):
                return
