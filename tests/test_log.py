"""The daemon's log: JSON lines, or readable lines on a terminal, coloured unless NO_COLOR."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator

import pytest
import structlog

from mented.log import configure_logging


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def terminal() -> Iterator[_Terminal]:
    """A terminal for stderr (set in the test: pytest puts its own stderr back for it)."""
    yield _Terminal()
    structlog.reset_defaults()


@pytest.mark.parametrize(("no_color", "coloured"), [(None, True), ("1", False), ("", True)])
def test_the_terminal_log_is_coloured_unless_no_color_is_set(
    terminal: _Terminal, monkeypatch: pytest.MonkeyPatch, no_color: str | None, coloured: bool
) -> None:
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    monkeypatch.setattr(sys, "stderr", terminal)
    configure_logging()
    structlog.get_logger("mented").warning("config_invalid_using_defaults", error="line 2")
    written = terminal.getvalue()
    assert "config_invalid_using_defaults" in written
    assert ("\x1b[" in written) is coloured
