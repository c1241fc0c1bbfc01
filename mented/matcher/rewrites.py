"""The rewrites for bashlex: applied to the command, and mapped back to the command as given."""

from __future__ import annotations

from mented.matcher.heredocs import _heredoc_value
from mented.matcher.lexer import _Lexer
from mented.matcher.limits import MAX_WORDS


def _apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with non-overlapping edits applied (an edit inside another one is dropped)."""
    if not edits:
        return text
    pieces = []
    cursor = 0
    for start, end, replacement in sorted(edits, key=lambda edit: (edit[0], -edit[1])):
        if start < cursor:
            continue
        pieces.append(text[cursor:start])
        pieces.append(replacement)
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


class _GivenText:
    """Maps a span of the text rewritten for bashlex back to the command as given."""

    def __init__(self, text: str, edits: list[tuple[int, int, str]]) -> None:
        self.text = text
        # (start, end) in the rewritten text, (start, end) in the given one, per edit applied.
        self.spans: list[tuple[int, int, int, int]] = []
        shift = 0
        cursor = 0
        for start, end, replacement in sorted(edits, key=lambda edit: (edit[0], -edit[1])):
            if start < cursor:
                continue  # as `_apply_edits` drops it
            self.spans.append((start + shift, start + shift + len(replacement), start, end))
            shift += len(replacement) - (end - start)
            cursor = end

    def word_at(self, start: int, end: int) -> str | None:
        """The word at `start:end` of the rewritten text as given, when a rewrite touched
        it and it reads as one word there; else None (its value is as given)."""
        touched = [span for span in self.spans if span[0] < end and start < span[1]]
        if not touched:
            return None
        given_start = self._given(start, touched[0], inside=0)
        given_end = self._given(end, touched[-1], inside=1)
        source = self.text[given_start:given_end]
        lexer = _Lexer(source, record_edits=False, budget=MAX_WORDS)
        word = lexer._read_word()  # noqa: SLF001 - the lexer's own reader, on one word
        return word.value if lexer.pos == len(source) else None

    def _given(self, position: int, span: tuple[int, int, int, int], *, inside: int) -> int:
        """`position` of the rewritten text in the given one; inside the edit `span`, its
        start in the given text (`inside` 0, for a word's start) or its end (1)."""
        new_start, new_end, old_start, old_end = span
        if position <= new_start:
            return old_start - (new_start - position)
        if position >= new_end:
            return old_end + (position - new_end)
        return (old_start, old_end)[inside]


class _Source:
    """The command string as written, for words and heredocs bashlex read rewritten."""

    def __init__(self, text: str, given: _GivenText | None, lexer: _Lexer | None) -> None:
        self.text = text
        self.given = given
        self.lexer = lexer

    def text_at(self, start: int, end: int) -> str:
        """The text at `start:end` of what bashlex read, as written."""
        if self.given is None:
            return self.text[start:end]
        touched = [span for span in self.given.spans if span[0] < end and start < span[1]]
        if not touched:
            shift = _shift_before(self.given.spans, start)
            return self.text[start - shift : end - shift]
        return self.text[
            self.given._given(start, touched[0], inside=0) : self.given._given(  # noqa: SLF001
                end, touched[-1], inside=1
            )
        ]

    def heredoc_at(self, start: int) -> str | None:
        """The body (its value) of the heredoc bashlex read emptied at `start`; None
        when it is not known (expanded, or not found)."""
        if self.given is None or self.lexer is None:
            return None
        for new_start, _, old_start, _ in self.given.spans:
            if new_start == start:
                for (body_start, body_end), (quoted, strip_tabs) in zip(
                    self.lexer.heredoc_bodies, self.lexer.heredoc_forms, strict=False
                ):
                    if body_start == old_start:
                        return _heredoc_value(
                            self.text[body_start:body_end], quoted=quoted, strip_tabs=strip_tabs
                        )
        return None


def _shift_before(spans: list[tuple[int, int, int, int]], position: int) -> int:
    """How far the rewritten text is ahead of the given one before `position`."""
    shift = 0
    for _, new_end, _, old_end in spans:
        if new_end <= position:
            shift = new_end - old_end
    return shift
