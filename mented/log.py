"""Logging: JSON lines on stderr, human-readable when stderr is a terminal
(coloured, unless `NO_COLOR` is set).

Every line carries the daemon's pid: two daemons started on one data directory
(the second exits: the directory is taken) or one after another may append to
the same log file (`mentectl start` appends), and the pid tells their lines apart.

`log.info("event", key=value, ...)` everywhere. The daemon's JSON lines are
written here, with the standard library: structlog (with asyncio and logging,
which it imports) costs a fifth of a start, and a start is inside a hook's budget
under socket activation. The lines are structlog's own (its JSON renderer's keys
and values, in its order). On a terminal, and in a process that never called
`configure_logging` (a test, `mentectl`), structlog renders them, imported then.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def configure_logging(level: str = "info") -> None:
    """Set up logging once for the daemon process."""
    if sys.stderr.isatty():
        log.use(_console_logger(level))
    else:
        log.use(_JsonLines(LEVELS[level.lower()], os.getpid()))


class _Log:
    """The daemon's logger: `log.info("event", **fields)`, and so on for each level."""

    __slots__ = ("_logger",)

    def __init__(self) -> None:
        self._logger: Any = None  # structlog's default logger until configured

    def use(self, logger: object) -> None:
        self._logger = logger

    def _target(self) -> Any:  # noqa: ANN401 - structlog's loggers are untyped
        if self._logger is None:
            import structlog  # noqa: PLC0415 - only where logging was never configured

            self._logger = structlog.get_logger("mented")
        return self._logger

    def debug(self, event: str, **fields: object) -> None:
        self._target().debug(event, **fields)

    def info(self, event: str, **fields: object) -> None:
        self._target().info(event, **fields)

    def warning(self, event: str, **fields: object) -> None:
        self._target().warning(event, **fields)

    def error(self, event: str, **fields: object) -> None:
        self._target().error(event, **fields)

    def exception(self, event: str, **fields: object) -> None:
        """An error with the exception being handled, and its traceback."""
        self._target().exception(event, **fields)


class _JsonLines:
    """One JSON object a line on stderr, as structlog's JSONRenderer writes it."""

    __slots__ = ("_minimum", "_pid")

    def __init__(self, minimum: int, pid: int) -> None:
        self._minimum = minimum
        self._pid = pid  # a stored value, no system call (the daemon never forks)

    def _write(self, level: str, event: str, fields: dict[str, Any]) -> None:
        if LEVELS[level] < self._minimum:
            return
        entry: dict[str, Any] = {**fields, "event": event}
        entry.setdefault("pid", self._pid)
        entry["level"] = level
        entry["timestamp"] = datetime.now(tz=UTC).isoformat().replace("+00:00", "Z")
        exc_info = entry.pop("exc_info", None)
        if exc_info and (text := _traceback_text(exc_info)) is not None:
            entry["exception"] = text
        try:
            sys.stderr.write(json.dumps(entry, default=repr) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # stderr closed or full: logging must never be why the daemon fails

    def debug(self, event: str, **fields: Any) -> None:  # noqa: ANN401 - any value, as repr
        self._write("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:  # noqa: ANN401
        self._write("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:  # noqa: ANN401
        self._write("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:  # noqa: ANN401
        self._write("error", event, fields)

    def exception(self, event: str, **fields: Any) -> None:  # noqa: ANN401
        fields.setdefault("exc_info", True)
        self._write("error", event, fields)


def _traceback_text(exc_info: object) -> str | None:
    """The traceback `exc_info` names (True: the exception being handled), as text."""
    import traceback  # noqa: PLC0415 - only for a line that carries one

    exc: BaseException | None
    if isinstance(exc_info, BaseException):
        exc = exc_info
    elif isinstance(exc_info, tuple) and len(exc_info) == 3:
        exc = exc_info[1]
    else:
        exc = sys.exc_info()[1]
    if exc is None:
        return None  # no exception being handled: structlog writes none either
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text.removesuffix("\n")


def _console_logger(level: str) -> object:
    """structlog, set up to render readable lines on a terminal."""
    import logging  # noqa: PLC0415 - on a terminal only

    import structlog  # noqa: PLC0415

    structlog.configure(
        processors=[
            _PidAdder(os.getpid()),
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            # https://no-color.org: set and not empty, no colours.
            structlog.dev.ConsoleRenderer(colors=not os.environ.get("NO_COLOR")),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    return structlog.get_logger("mented")


log = _Log()


class _PidAdder:
    """Adds `pid` to every line: a dict store, no system call (the daemon never forks)."""

    __slots__ = ("pid",)

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __call__(self, _logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
        event_dict.setdefault("pid", self.pid)
        return event_dict
