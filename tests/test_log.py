"""mented.log: the daemon's JSON lines, written without structlog, as structlog wrote them;
readable lines on a terminal, coloured unless NO_COLOR."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
import structlog

from mented.log import configure_logging

PYTHON = sys.executable

LINES = """
import pathlib, sys
from mented.log import configure_logging, log
configure_logging("info")
log.info("ready", socket="/run/x.sock", n=3, path=pathlib.Path("/a"), raw=b"\\xff", word="é…")
log.debug("not shown")
try:
    1 / 0
except ZeroDivisionError as exc:
    log.warning("hook_failed", error=repr(exc), exc_info=True)
    log.exception("request_failed", request="StatusRequest")
log.error("store_failed", error="disk full", exc_info=True)  # no exception being handled
print(sorted({"structlog", "asyncio"} & set(sys.modules)))
"""

# The same lines through structlog, set up as mented.log set it up before.
STRUCTLOG = """
import logging, os, structlog, sys
def add_pid(_, __, event_dict):
    event_dict.setdefault("pid", os.getpid())
    return event_dict
structlog.configure(
    processors=[add_pid, structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.format_exc_info, structlog.processors.JSONRenderer()],
    wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
    logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
)
import mented.log
mented.log.configure_logging = lambda level: None
mented.log.log.use(structlog.get_logger("mented"))
"""


def lines(code: str) -> tuple[list[dict[str, object]], str]:
    result = subprocess.run(
        [PYTHON, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    entries = [json.loads(line) for line in result.stderr.splitlines()]
    for entry in entries:
        assert isinstance(entry.pop("pid"), int)
        assert str(entry.pop("timestamp")).endswith("Z")
        if "exception" in entry:  # the same code, at another line of the script
            entry["exception"] = re.sub(r"line \d+", "line N", str(entry["exception"]))
    return entries, result.stdout


def test_the_daemons_log_lines_are_structlogs_without_importing_it() -> None:
    ours, imported = lines(LINES)
    theirs, _ = lines(STRUCTLOG + LINES)
    assert ours == theirs
    assert [entry["event"] for entry in ours] == [
        "ready",
        "hook_failed",
        "request_failed",
        "store_failed",
    ]
    assert "ZeroDivisionError" in str(ours[1]["exception"])
    # structlog and asyncio cost a fifth of a start: the daemon does without them.
    assert imported.strip() == "[]"


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
