"""`mentectl sync` and `import` show how long they have been waiting, on a terminal only."""

from __future__ import annotations

import io
import threading

from mented_client.progress import Progress


class FakeTerminal(io.StringIO):
    def __init__(self, *, tty: bool) -> None:
        super().__init__()
        self.tty = tty
        self.wrote = threading.Event()

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> int:
        self.wrote.set()
        return super().write(text)


def test_a_long_wait_shows_what_and_for_how_long_then_erases_the_line() -> None:
    terminal = FakeTerminal(tty=True)
    with Progress("syncing", delay_s=0.0, stream=terminal):
        assert terminal.wrote.wait(30)
    shown = terminal.getvalue()
    assert "syncing... 0 s (Ctrl-C stops waiting)" in shown
    assert shown.endswith("\r\x1b[K")  # nothing left on the line


def test_nothing_is_shown_in_a_pipe_or_for_json() -> None:
    pipe = FakeTerminal(tty=False)
    with Progress("syncing", delay_s=0.0, stream=pipe):
        pass
    json_output = FakeTerminal(tty=True)
    with Progress("syncing", delay_s=0.0, stream=json_output, show=False):
        pass
    assert pipe.getvalue() == json_output.getvalue() == ""
