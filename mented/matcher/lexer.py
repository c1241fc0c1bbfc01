"""The lexer: a quote-aware shell tokenizer that also computes the rewrites bashlex needs.

It reads what bashlex cannot (heredocs, `$((...))`, `[[ ]]`, `time`, arrays, `$'...'`)
into words, redirections and control operators, and records for each construct an
edit of the text (`_Lexer.edits`) after which bashlex parses it; where bashlex still
fails, its tokens feed the fallback splitter (`mented.matcher.fallback`).
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from mented.matcher.limits import MAX_ARITHMETIC_CHARS, MAX_NESTING, MAX_TOKENS

if TYPE_CHECKING:
    from mented.matcher.clock import _Clock


class _Word:
    """A shell word: its value after quote removal, and what it holds."""

    __slots__ = (
        "assignment",
        "bare",
        "end",
        "given",
        "literal",
        "raw",
        "start",
        "sub_spans",
        "subs",
        "value",
    )

    def __init__(  # noqa: PLR0913 - a record
        self,
        value: str,
        *,
        literal: bool = True,
        bare: bool = True,
        assignment: bool = False,
        subs: list[list[_Token]] | None = None,
        sub_spans: list[tuple[int, int]] | None = None,
        start: int = 0,
        end: int = 0,
    ) -> None:
        self.value = value
        self.literal = literal  # no expansion: the value is what the program receives
        self.bare = bare  # neither quoted nor expanded: can be a reserved word
        self.assignment = assignment
        self.subs = subs or []  # tokens of $(...), `...`, <(...) inside the word
        self.sub_spans = sub_spans or []
        self.start = start
        self.end = end
        # For `explain`: the word as the command gave it, where a rewrite for bashlex
        # changed it (a heredoc's delimiter and body); None when `value` is that.
        self.given: str | None = None
        # For `mented.fields`: the word as written in the command (set while collecting
        # `matched_commands`), to read a `$(cat <<'EOF' ... EOF)` body from.
        self.raw: str | None = None


class _Redirect:
    __slots__ = ("op", "target")

    def __init__(self, op: str, target: _Word | None) -> None:
        self.op = op
        self.target = target


_Token = _Word | _Redirect | str  # a str is a control operator, "\n" included

_BLANKS = re.compile(r"[ \t]+")
_PLAIN_RUN = re.compile(r"[^ \t\n'\"\\$`<>|&;()]+")
_DQ_RUN = re.compile(r'[^"\\$`]+')
_OPERATOR = re.compile(r";;&|;;|;&|&&|\|\||\|&|[;&|()]")
_REDIRECT = re.compile(r"<<<|<<-|<<|<>|<&|>&|>>|>\||&>>|&>|<|>")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!\-]")
_ANSI_C = re.compile(r"(?:[^'\\]|\\.)*", re.DOTALL)
_BACKTICK_BODY = re.compile(r"(?:[^`\\]|\\.)*", re.DOTALL)
_BACKTICK_ESCAPES = re.compile(r"\\([\\`$])")
_PARENS = re.compile(r"[()]")
_DIGITS = re.compile(r"[0-9]+")
_WORD_END = frozenset(" \t\n;&|()<>")
# Words that open or continue a compound command: the next word starts a command.
_COMMAND_PREFIX_WORDS = frozenset(
    {"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "fi", "done", "esac"}
)
_REWRITE_TRIGGER = re.compile(r"<<|\$\(\(|\[\[|\btime\b|=\(|\$'")


class _WordState:
    __slots__ = ("dynamic", "parts", "quoted", "sub_spans", "subs")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.subs: list[list[_Token]] = []
        self.sub_spans: list[tuple[int, int]] = []
        self.dynamic = False
        self.quoted = False


class _Lexer:
    """A quote-aware shell tokenizer that also computes rewrites that make bashlex succeed.

    It never raises: an unterminated quote or substitution runs to the end of the
    input (as data), nesting deeper than `MAX_NESTING` is skipped over and noted.
    Every piece it reads (a token, a quoted part, an expansion) is counted against
    `budget` and passes a clock checkpoint; past either, it stops reading.
    """

    def __init__(
        self,
        text: str,
        *,
        depth: int = 0,
        record_edits: bool = True,
        budget: int = MAX_TOKENS,
        clock: _Clock | None = None,
    ) -> None:
        self.text = text
        self.n = len(text)
        self.pos = 0
        self.depth = depth
        self.record_edits = record_edits
        self.edits: list[tuple[int, int, str]] = []
        self.rewrites: set[str] = set()  # what the edits did, for `explain`
        self.too_deep = False
        self.budget = budget  # pieces left to read; then the rest of the input is ignored
        self.clock = clock
        self.truncated = False  # stopped early: out of budget or out of time
        self._pending_heredocs: list[tuple[_Word, bool]] = []
        self.heredoc_bodies: list[tuple[int, int]] = []  # (start, end) of each body read
        # Per body: whether its delimiter was quoted (no expansion) and `<<-` (tabs cut).
        self.heredoc_forms: list[tuple[bool, bool]] = []

    def tokens(self) -> list[_Token]:
        return self._lex(nested=False)

    def _spend(self) -> bool:
        """Count one piece read; past the budget or the time, skip the rest and say False."""
        self.budget -= 1
        if self.budget >= 0 and (self.clock is None or not self.clock.tick()):
            return True
        self.truncated = True
        self.pos = self.n
        return False

    # ---------------------------------------------------------------- token level

    def _lex(self, *, nested: bool) -> list[_Token]:  # noqa: PLR0915 - one scanner loop
        text, n = self.text, self.n
        tokens: list[_Token] = []
        parens = 0
        command_start = True
        dbracket: tuple[int, list[tuple[int, int]]] | None = None  # start, substitutions
        while self.pos < n:
            ch = text[self.pos]
            if ch in " \t":
                self.pos = _BLANKS.match(text, self.pos).end()  # type: ignore[union-attr]
                continue
            if not self._spend():
                break
            if ch == "\n":
                tokens.append("\n")
                self.pos += 1
                self._read_heredocs()
                command_start = dbracket is None
                continue
            if ch == "\\" and text.startswith("\\\n", self.pos):
                self.pos += 2
                continue
            if ch == "#":  # a comment: only ever seen at the start of a token here
                eol = text.find("\n", self.pos)
                self.pos = n if eol < 0 else eol
                continue
            if ch in "<>" and text.startswith("(", self.pos + 1):
                word = self._read_word()
                tokens.append(word)
                if dbracket is not None:
                    dbracket[1].extend(word.sub_spans)
                command_start = False
                continue
            if ch in "<>" or (ch == "&" and text.startswith(">", self.pos + 1)):
                tokens.append(self._read_redirect(dbracket))
                continue
            if ch in ";&|()":
                match = _OPERATOR.match(text, self.pos)
                op = match.group() if match else ch
                self.pos += len(op)
                if op == "(":
                    parens += 1
                elif op == ")":
                    if parens:
                        parens -= 1
                    elif nested:
                        return tokens
                tokens.append(op)
                command_start = dbracket is None
                continue
            word = self._read_word()
            if word.end == word.start:  # a lone character no rule consumed: skip it
                self.pos += 1
                continue
            if (
                word.literal
                and _DIGITS.fullmatch(text, word.start, word.end)
                and self.pos < n
                and text[self.pos] in "<>"
            ):
                continue  # `2>&1`: the digits name a file descriptor
            tokens.append(word)
            if dbracket is not None:
                dbracket[1].extend(word.sub_spans)
                if word.value == "]]" and word.bare:
                    self._edit_dbracket(dbracket, word.end)
                    dbracket = None
                continue
            if command_start and word.literal and word.start < word.end:
                raw = text[word.start : word.end]
                if raw == "time":
                    self._edit(word.start, word.end, "\\time", "`time` read as a wrapper")
                elif raw == "[[":
                    dbracket = (word.start, [])
                    continue
            command_start = word.assignment or text[word.start : word.end] in _COMMAND_PREFIX_WORDS
        return tokens  # at the end of input an unterminated substitution ends too

    def _read_redirect(self, dbracket: tuple[int, list[tuple[int, int]]] | None) -> _Redirect:
        text = self.text
        match = _REDIRECT.match(text, self.pos)
        op = match.group() if match else text[self.pos]
        self.pos += len(op)
        while self.pos < self.n and text[self.pos] in " \t":
            self.pos += 1
        target = None
        if self.pos < self.n and text[self.pos] not in _WORD_END:
            target = self._read_word()
            if dbracket is not None:
                dbracket[1].extend(target.sub_spans)
        if op in ("<<", "<<-") and target is not None:
            self._pending_heredocs.append((target, op == "<<-"))
        return _Redirect(op, target)

    def _read_heredocs(self) -> None:
        """Skip the bodies of the heredocs opened on the line just ended: they are data."""
        text, n = self.text, self.n
        pending, self._pending_heredocs = self._pending_heredocs, []
        for delimiter_word, strip_tabs in pending:
            if not self._spend():  # a piece each: a line may open a thousand of them
                return
            body_start = self.pos
            indent = "\t*" if strip_tabs else ""
            # Inside `$(...)` bash also ends the body at `EOF)`, which agents write.
            end = "(?=\\))|$" if self.depth else "$"
            terminator = re.compile(
                f"^{indent}{re.escape(delimiter_word.value)}(?:{end})", re.MULTILINE
            )
            found = terminator.search(text, self.pos)
            self.heredoc_bodies.append((body_start, n if found is None else found.start()))
            self.heredoc_forms.append((not delimiter_word.bare, strip_tabs))
            if found is None:
                self.pos = n
            elif text.startswith("\n", found.end()):
                self.pos = found.end() + 1
            else:
                self.pos = found.end()
            # bashlex needs an unquoted delimiter and gains nothing from the body.
            self._edit(delimiter_word.start, delimiter_word.end, "EOF", "")
            self._edit(body_start, self.pos, "EOF\n", "heredoc bodies (data) emptied")

    def _edit(self, start: int, end: int, replacement: str, what: str) -> None:
        if self.record_edits:
            self.edits.append((start, end, replacement))
            if what:
                self.rewrites.add(what)

    def _edit_dbracket(self, dbracket: tuple[int, list[tuple[int, int]]], end: int) -> None:
        """`[[ ... ]]` becomes `:` plus the substitutions it holds (they still run)."""
        start, spans = dbracket
        held = " ".join(self.text[s:e] for s, e in spans)
        self._edit(start, end, f": {held}" if held else ":", "`[[ ... ]]` read as `:`")

    # ----------------------------------------------------------------- word level

    def _read_word(self) -> _Word:
        text, n = self.text, self.n
        start = self.pos
        match = _PLAIN_RUN.match(text, start)
        if match:  # the common case, a word without quotes or expansions: quickly
            end = match.end()
            if end >= n or (text[end] in _WORD_END and text[end] != "("):
                self.pos = end
                value = match.group()
                assignment = _ASSIGNMENT.match(value) is not None
                return _Word(value, assignment=assignment, start=start, end=end)
        state = _WordState()
        parts = state.parts
        while self.pos < n and self._spend():
            match = _PLAIN_RUN.match(text, self.pos)
            if match:
                parts.append(match.group())
                self.pos = match.end()
                continue
            ch = text[self.pos]
            if ch == "'":
                end = text.find("'", self.pos + 1)
                end = n if end < 0 else end
                parts.append(text[self.pos + 1 : end])
                self.pos = min(end + 1, n)
                state.quoted = True
            elif ch == '"':
                self._read_double_quoted(state)
            elif ch == "\\":
                if self.pos + 1 < n:
                    if text[self.pos + 1] != "\n":
                        parts.append(text[self.pos + 1])
                        state.quoted = True
                    self.pos += 2
                else:
                    parts.append("\\")
                    self.pos += 1
            elif ch == "$":
                self._read_dollar(state, in_double_quotes=False)
            elif ch == "`":
                self._read_backtick(state)
            elif ch in "<>" and self.pos == start and text.startswith("(", self.pos + 1):
                sub_start = self.pos
                self.pos += 2
                self._read_substitution(state, sub_start)
            elif (
                ch == "("
                and not state.quoted
                and not state.dynamic
                and _ASSIGNMENT.fullmatch("".join(parts))
            ):
                self._read_array(state)
            else:
                break
        return _Word(
            "".join(parts),
            literal=not state.dynamic,
            bare=not (state.dynamic or state.quoted),
            # NAME= is unquoted by construction: quotes are not name characters.
            assignment=_ASSIGNMENT.match(text, start, self.pos) is not None,
            subs=state.subs,
            sub_spans=state.sub_spans,
            start=start,
            end=self.pos,
        )

    def _read_double_quoted(self, state: _WordState) -> None:
        text, n = self.text, self.n
        state.quoted = True
        self.pos += 1
        while self.pos < n and self._spend():
            match = _DQ_RUN.match(text, self.pos)
            if match:
                state.parts.append(match.group())
                self.pos = match.end()
                continue
            ch = text[self.pos]
            if ch == '"':
                self.pos += 1
                return
            if ch == "\\":
                following = text[self.pos + 1 : self.pos + 2]
                if following in ("$", "`", '"', "\\"):
                    state.parts.append(following)
                elif following != "\n":
                    state.parts.append("\\" + following)
                self.pos += 2
            elif ch == "$":
                self._read_dollar(state, in_double_quotes=True)
            else:  # a backtick
                self._read_backtick(state)

    def _read_dollar(self, state: _WordState, *, in_double_quotes: bool) -> None:
        if not self._spend():
            return
        text, n = self.text, self.n
        start = self.pos
        following = text[start + 1 : start + 2]
        if following == "(":
            state.dynamic = True
            if text.startswith("((", start + 1):
                end = _arithmetic_end(text, start + 3)
                if end is not None:
                    state.parts.append(text[start:end])
                    self.pos = end
                    self._edit(start, end, "0", "`$((...))` read as 0")
                    return
            self.pos = start + 2
            self._read_substitution(state, start)
        elif following == "{":
            state.dynamic = True
            end = _brace_end(text, start + 2)
            state.parts.append(text[start:end])
            self.pos = end
        elif following == "'" and not in_double_quotes:
            match = _ANSI_C.match(text, start + 2)
            end = match.end() if match else start + 2
            value = _ansi_c_value(text[start + 2 : end])
            state.parts.append(value)
            state.quoted = True
            self.pos = min(end + 1, n)
            self._edit(start, self.pos, shlex.quote(value), "`$'...'` read as '...'")
        elif following == '"' and not in_double_quotes:
            self.pos = start + 1
            self._read_double_quoted(state)
        else:
            match = _PARAMETER.match(text, start + 1)
            if match:
                state.dynamic = True
                state.parts.append(text[start : match.end()])
                self.pos = match.end()
            else:
                state.parts.append("$")
                self.pos = start + 1

    def _read_substitution(self, state: _WordState, start: int) -> None:
        """`$(...)` or `<(...)`: the position is just after the opening parenthesis."""
        state.dynamic = True
        if self.depth >= MAX_NESTING:
            self.too_deep = True
            self.pos = _paren_end(self.text, self.pos)
        else:
            self.depth += 1
            try:
                state.subs.append(self._lex(nested=True))
            finally:
                self.depth -= 1
        state.parts.append(self.text[start : self.pos])
        state.sub_spans.append((start, self.pos))

    def _read_backtick(self, state: _WordState) -> None:
        if not self._spend():
            return
        text = self.text
        start = self.pos
        match = _BACKTICK_BODY.match(text, start + 1)
        end = match.end() if match else start + 1
        self.pos = min(end + 1, self.n)
        state.dynamic = True
        state.parts.append(text[start : self.pos])
        state.sub_spans.append((start, self.pos))
        if self.depth >= MAX_NESTING:
            self.too_deep = True
            return
        inner = _Lexer(
            _BACKTICK_ESCAPES.sub(r"\1", text[start + 1 : end]),
            depth=self.depth + 1,
            record_edits=False,
            budget=self.budget,
            clock=self.clock,
        )
        state.subs.append(inner.tokens())
        self.budget = inner.budget
        self.too_deep = self.too_deep or inner.too_deep
        if inner.truncated:  # the budget or the time ran out in there: stop here too
            self.truncated = True
            self.pos = self.n

    def _read_array(self, state: _WordState) -> None:
        """`name=(a b $(c))`: the elements are data; substitutions inside still run."""
        start = self.pos
        self.pos += 1
        if self.depth >= MAX_NESTING:
            self.too_deep = True
            self.pos = _paren_end(self.text, self.pos)
            return
        self.depth += 1
        try:
            elements = self._lex(nested=True)
        finally:
            self.depth -= 1
        spans: list[tuple[int, int]] = []
        for token in elements:
            if isinstance(token, _Word):
                state.subs.extend(token.subs)
                spans.extend(token.sub_spans)
        state.sub_spans.extend(spans)
        state.parts.append(self.text[start : self.pos])
        held = "".join(self.text[s:e] for s, e in spans)
        self._edit(start, self.pos, held, "array elements dropped")


def _arithmetic_end(text: str, pos: int) -> int | None:
    """The end of `$((...))` whose body starts at `pos`, or None when it is not arithmetic."""
    depth = 0
    # Bounded, so that many unclosed `$((` cannot make the scan quadratic.
    for match in _PARENS.finditer(text, pos, min(len(text), pos + MAX_ARITHMETIC_CHARS)):
        if match.group() == "(":
            depth += 1
        elif depth:
            depth -= 1
        elif text.startswith("))", match.start()):
            return match.start() + 2
        else:
            return None
    return None


def _paren_end(text: str, pos: int) -> int:
    """Just past the parenthesis closing an opening one before `pos` (counted naively)."""
    depth = 1
    for match in _PARENS.finditer(text, pos):
        depth += 1 if match.group() == "(" else -1
        if depth == 0:
            return match.end()
    return len(text)


def _brace_end(text: str, pos: int) -> int:
    depth = 1
    for index in range(pos, len(text)):
        ch = text[index]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return index + 1
    return len(text)


def _ansi_c_value(body: str) -> str:
    """The value of `$'...'`, for the escapes that matter to a program name."""
    simple = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"', "e": "\x1b", "a": "\a"}
    return re.sub(r"\\(.)", lambda m: simple.get(m.group(1), m.group(0)), body, flags=re.DOTALL)
