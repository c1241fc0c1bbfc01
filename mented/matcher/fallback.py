"""The fallback splitter: simple commands in the lexer's tokens, where bashlex fails."""

from __future__ import annotations

from collections.abc import Iterable

from mented.matcher.lexer import _COMMAND_PREFIX_WORDS, _Redirect, _Token, _Word

_FOR_WORDS = frozenset({"for", "select"})


def _fallback_commands(  # noqa: PLR0915 - one state machine, easier to read whole
    tokens: list[_Token],
) -> Iterable[tuple[list[_Word], list[list[_Token]]]]:
    """Simple commands in a token stream, each with the substitutions to analyze after it.

    Splits on control operators and understands enough grammar to keep data out:
    `case` patterns, `for`/`select` headers, `[[ ... ]]` and function headers.
    """
    words: list[_Word] = []
    subs: list[list[_Token]] = []
    state = "command"  # or: case-word, pattern, for-header, dbracket, function-name
    case_depth = 0
    for token in tokens:
        if isinstance(token, str):
            if state == "dbracket":
                continue
            if words or subs:
                yield words, subs
                words, subs = [], []
            if case_depth and token in (";;", ";&", ";;&"):
                state = "pattern"
            elif state == "pattern":
                if token == ")":  # noqa: S105 - a shell operator, not a password
                    state = "command"
            elif state in ("for-header", "function-name") and token in (";", "\n"):
                state = "command"
            continue
        if isinstance(token, _Redirect):
            if token.target is not None:
                subs.extend(token.target.subs)
            continue
        word = token
        subs.extend(word.subs)
        keyword = word.value if word.bare else None
        if state == "command" and not words:
            if keyword in _COMMAND_PREFIX_WORDS:
                if keyword == "esac" and case_depth:
                    case_depth -= 1
                continue
            if keyword == "case":
                state = "case-word"
                case_depth += 1
                continue
            if keyword in _FOR_WORDS:
                state = "for-header"
                continue
            if keyword == "[[":
                state = "dbracket"
                continue
            if keyword == "function":
                state = "function-name"
                continue
        if state == "command":
            words.append(word)
        elif state == "case-word":
            if keyword == "in":
                state = "pattern"
        elif state == "pattern":
            if keyword == "esac":
                case_depth -= 1
                state = "command"
        elif state == "for-header":
            if keyword == "do":
                state = "command"
        elif state == "dbracket":
            if keyword == "]]":
                state = "command"
        elif state == "function-name":
            state = "command"
    if words or subs:
        yield words, subs
