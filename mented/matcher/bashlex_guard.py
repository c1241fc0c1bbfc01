"""bashlex as the matcher runs it: our prebuilt parser tables, time checkpoints inside.

Importing this module imports bashlex, after `parser_tables.install()` (its parser
reads the tables instead of building them), and patches two of its functions: its
character reader and its parameter expansion pass a checkpoint of the clock of the
parse running on this thread (`_GUARD.clock`), and an unclosed `${` is refused.
Every module of the matcher that needs bashlex takes it from here.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from mented import parser_tables
from mented.matcher.limits import _CHECK_EVERY

if TYPE_CHECKING:
    from mented.matcher.clock import _Clock

parser_tables.install()  # before bashlex builds its parser: it reads the tables instead
import bashlex  # noqa: E402 - after install(), see above

__all__ = ["_GUARD", "_OutOfTimeError", "bashlex"]


def _checked_paramexpand(parserobj: object, string: str, sindex: int) -> object:
    """bashlex 0.18's `${` expansion, refusing an unclosed `${` instead of looping.

    With no `}` after `${` in a word, bashlex's `_paramexpand` returns index 0 and
    `_expandwordinternal` starts the word over, for ever, growing a list until memory
    runs out (found by fuzzing). Bash itself calls this a bad substitution.
    """
    _bashlex_checkpoint()
    if string.startswith("${", sindex) and string.find("}", sindex + 2) < 0:
        raise bashlex.errors.ParsingError("bad substitution: no closing '}'", string, sindex)
    return _bashlex_paramexpand(parserobj, string, sindex)


class _OutOfTimeError(Exception):
    """Raised inside bashlex at a checkpoint once its time for this command is up."""


class _BashlexGuard(threading.local):
    """The clock of the bashlex parse running on this thread, if any."""

    clock: _Clock | None = None


_GUARD = _BashlexGuard()


def _bashlex_checkpoint() -> None:
    """Stop the bashlex parse running on this thread once its time is up."""
    clock = _GUARD.clock
    if clock is None:
        return
    clock.ticks -= 1
    if clock.ticks <= 0:
        clock.ticks = _CHECK_EVERY
        if clock.bashlex_expired():
            raise _OutOfTimeError


def _checked_getc(tokenizer: object, remove_quoted_newline: bool = True) -> str | None:
    """bashlex's character reader with a checkpoint: everything it parses is read here.

    The checkpoint is written out, not called: this runs for every character.
    """
    clock = _GUARD.clock
    if clock is not None:
        clock.ticks -= 1
        if clock.ticks <= 0:
            clock.ticks = _CHECK_EVERY
            if clock.bashlex_expired():
                raise _OutOfTimeError
    return _bashlex_getc(tokenizer, remove_quoted_newline)  # type: ignore[no-any-return]


_bashlex_paramexpand = bashlex.subst._paramexpand  # noqa: SLF001 - patched below, see above
bashlex.subst._paramexpand = _checked_paramexpand  # noqa: SLF001
_bashlex_getc = bashlex.tokenizer.tokenizer._getc  # noqa: SLF001 - patched: a checkpoint
bashlex.tokenizer.tokenizer._getc = _checked_getc  # noqa: SLF001
