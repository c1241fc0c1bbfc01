"""Logging: structlog JSON lines on stderr, human-readable when stderr is a terminal
(coloured, unless `NO_COLOR` is set).

Every line carries the daemon's pid: two daemons started on one data directory
(the second exits: the directory is taken) or one after another may append to
the same log file (`mentectl start` appends), and the pid tells their lines apart.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger


def configure_logging(level: str = "info") -> None:
    """Set up structlog once for the daemon process."""
    renderer: structlog.typing.Processor = (
        # https://no-color.org: set and not empty, no colours.
        structlog.dev.ConsoleRenderer(colors=not os.environ.get("NO_COLOR"))
        if sys.stderr.isatty()
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            _PidAdder(os.getpid()),
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        # Filtering by level in the bound logger makes a disabled debug call cost
        # one method lookup: the hot path may keep its debug lines.
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


log = structlog.get_logger("mented")


class _PidAdder:
    """Adds `pid` to every line: a dict store, no system call (the daemon never forks)."""

    __slots__ = ("pid",)

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __call__(self, _logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
        event_dict.setdefault("pid", self.pid)
        return event_dict
