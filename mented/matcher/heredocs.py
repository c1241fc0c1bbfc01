"""Heredoc bodies are data: left out of a long command, read as what they feed a command."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mented.matcher.lexer import _Lexer, _Redirect, _Word
from mented.matcher.limits import MAX_WORDS

if TYPE_CHECKING:
    from mented.matcher.clock import _Clock


def _without_heredoc_bodies(command: str, clock: _Clock) -> str:
    """`command` without the bodies of its heredocs (their delimiter lines kept): data.

    One pass of the quote-aware lexer, within `MAX_TOKENS` pieces and `clock`: a
    body is skipped by one search for its delimiter, so the pass is linear in the
    command. Where the pass stops early, the rest is kept as it is.
    """
    lexer = _Lexer(command, record_edits=False, clock=clock)
    lexer.tokens()
    if not lexer.heredoc_bodies:
        return command
    pieces = []
    cursor = 0
    for start, end in lexer.heredoc_bodies:  # in order: the lexer only moves forward
        pieces.append(command[cursor:start])
        cursor = end
    pieces.append(command[cursor:])
    return "".join(pieces)


def _heredoc_value(body: str, *, quoted: bool, strip_tabs: bool) -> str | None:
    """What a heredoc feeds its command: the body, unless the shell expands it (None)."""
    if strip_tabs:
        body = "".join(line.lstrip("\t") for line in body.splitlines(keepends=True))
    if not quoted and any(ch in body for ch in "$`\\"):
        return None
    return body


def _known_value(word: _Word) -> str | None:
    """A word as its program receives it, or None when only the running shell knows.

    A word that is nothing but `$(cat <<'EOF' ... EOF)` (quoted or not) is the body
    of that heredoc, without its trailing newlines, as the substitution gives it.
    """
    if word.literal:
        return word.value
    raw = word.raw
    if raw is None:
        return None
    inner = raw[1:-1] if len(raw) >= 2 and raw[0] == raw[-1] == '"' else raw
    if not (inner.startswith("$(") and inner.endswith(")")):
        return None
    lexer = _Lexer(inner, record_edits=False, budget=MAX_WORDS)
    sub = lexer._read_word()  # noqa: SLF001 - the lexer's own reader, on one word
    if lexer.pos != len(inner) or sub.sub_spans != [(0, len(inner))] or len(sub.subs) != 1:
        return None
    tokens = [token for token in sub.subs[0] if token != "\n"]  # noqa: S105 - an operator
    if (
        len(tokens) != 2  # `cat` and its heredoc
        or not isinstance(tokens[0], _Word)
        or tokens[0].value != "cat"
        or not tokens[0].literal
        or not isinstance(tokens[1], _Redirect)
        or tokens[1].op not in ("<<", "<<-")
        or len(lexer.heredoc_bodies) != 1
    ):
        return None
    start, end = lexer.heredoc_bodies[0]
    quoted, strip_tabs = lexer.heredoc_forms[0]
    body = _heredoc_value(inner[start:end], quoted=quoted, strip_tabs=strip_tabs)
    return None if body is None else body.rstrip("\n")
