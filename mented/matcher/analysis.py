"""The walk of one command: bashlex's trees or the fallback's tokens, each simple command.

For each simple command: leading `NAME=value` words are skipped, wrappers are
peeled (`mented.matcher.wrappers`), shell `-c` strings, `eval` and git aliases
that run a shell are analyzed again (to `MAX_SHELL_DEPTH`), and the program's
words are matched against the table (`mented.matcher.shapes`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from mented import git_aliases
from mented.git_aliases import NO_ALIASES, Aliases
from mented.matcher.bashlex_guard import _GUARD, _OutOfTimeError, bashlex
from mented.matcher.fallback import _fallback_commands
from mented.matcher.heredocs import _known_value
from mented.matcher.lexer import _PARENS, _REWRITE_TRIGGER, _Lexer, _Token, _Word
from mented.matcher.limits import (
    BASHLEX_CPU_BUDGET_S,
    BASHLEX_MAX_CHARS,
    BASHLEX_MAX_PAREN_DEPTH,
    BASHLEX_MAX_WORDS,
    MAX_NESTING,
    MAX_SHELL_DEPTH,
    MAX_SIMPLE_COMMANDS,
    MAX_TOKENS,
    MAX_WORDS,
    MAX_WRAPPERS,
)
from mented.matcher.options import _scan_options
from mented.matcher.results import MatchedCommand, Parser, ShapeMatch, SimpleCommand
from mented.matcher.rewrites import _apply_edits, _GivenText, _Source
from mented.matcher.shapes import _match_shapes
from mented.matcher.wrappers import _peel, _RunsString

if TYPE_CHECKING:
    from mented.actions import ActionTable
    from mented.matcher.clock import _Clock


class _Analysis:
    """One `explain` run: collects simple commands, actions and notes in command order."""

    def __init__(self, table: ActionTable, clock: _Clock, aliases: Aliases = NO_ALIASES) -> None:
        self.table = table
        self.clock = clock
        self.aliases = aliases
        self.commands: list[SimpleCommand] = []
        self.actions: dict[str, None] = {}
        self.notes: list[str] = []
        self.fallback_used = False
        self.as_given = False  # words shown as given, not as rewritten (`Matcher._explain`)
        # Called with each simple command that performs an action (`matched_commands`).
        self.on_match: Callable[[MatchedCommand], None] | None = None
        # Budgets for the whole run, nested command strings included, so that the
        # time spent on one command stays bounded whatever its shape.
        self._budget = MAX_SIMPLE_COMMANDS
        self._tokens_left = MAX_TOKENS
        self._bashlex_words_left = BASHLEX_MAX_WORDS

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    # ------------------------------------------------------------------ parsing

    def run(self, text: str, *, via: tuple[str, ...], shell_depth: int) -> Parser:  # noqa: PLR0915
        """Analyze one command string; returns the parser that read it."""
        lexer: _Lexer | None = None
        tokens: list[_Token] = []
        source = text
        if _REWRITE_TRIGGER.search(text):
            lexer, tokens = self._lex(text)
            source = _apply_edits(text, lexer.edits)
            if lexer.rewrites:
                self.note(f"rewritten for bashlex: {', '.join(sorted(lexer.rewrites))}")
        trees = None
        words = len(source.split()) if len(source) <= BASHLEX_MAX_CHARS else 0
        if len(source) > BASHLEX_MAX_CHARS:
            why = f"the command is over {BASHLEX_MAX_CHARS} characters"
        elif words > self._bashlex_words_left:
            why = f"the command has over {BASHLEX_MAX_WORDS} words"
        elif lexer is not None and (lexer.too_deep or lexer.truncated):
            why = "the command is too long or too deeply nested for bashlex"
        elif _paren_depth(source) > BASHLEX_MAX_PAREN_DEPTH:
            why = "the command is nested too deeply for bashlex"
        elif self.clock.bashlex_expired():
            why = f"bashlex used its {BASHLEX_CPU_BUDGET_S * 1000:.0f} ms for this command"
        else:
            self._bashlex_words_left -= words
            outer, _GUARD.clock = _GUARD.clock, self.clock
            try:
                trees = bashlex.parse(source)
            except _OutOfTimeError:
                why = f"bashlex took over {BASHLEX_CPU_BUDGET_S * 1000:.0f} ms"
            except Exception as exc:  # noqa: BLE001 - any bashlex failure means: fall back
                why = f"bashlex could not parse it ({type(exc).__name__}: {exc})"
            finally:
                _GUARD.clock = outer
        if trees is not None:
            given = None
            if (self.as_given or self.on_match) and lexer is not None and lexer.edits:
                given = _GivenText(text, lexer.edits)
            source_of = None
            if self.on_match is not None:
                source_of = _Source(text, given, lexer)
            self._walk_bashlex(trees, via, shell_depth, given, source_of)
            return "bashlex"
        self.fallback_used = True
        self.note(f"used the fallback tokenizer: {_shorten(why)}")
        if lexer is None:
            lexer, tokens = self._lex(text)
        if lexer.too_deep:
            self.note(f"command substitutions nested over {MAX_NESTING} deep were not analyzed")
        if lexer.truncated and not self.clock.expired():
            self.note(f"only the first {MAX_TOKENS} tokens were analyzed")
        if self.on_match is not None:
            for token in tokens:
                if isinstance(token, _Word) and not token.literal:
                    token.raw = text[token.start : token.end]
        self._walk_tokens(tokens, via, shell_depth)
        return "fallback"

    def _lex(self, text: str) -> tuple[_Lexer, list[_Token]]:
        """Tokens of `text`, within what is left of this run's token budget."""
        lexer = _Lexer(text, budget=self._tokens_left, clock=self.clock)
        tokens = lexer.tokens()
        self._tokens_left = max(0, lexer.budget)
        return lexer, tokens

    def _walk_tokens(self, tokens: list[_Token], via: tuple[str, ...], shell_depth: int) -> None:
        # A stack of generators, not recursion: nesting never deepens Python's stack.
        # A command comes before the substitutions in it, and those before the next
        # command, which is the order of the text.
        stack = [iter(_fallback_commands(tokens))]
        while stack:
            item = next(stack[-1], None)
            if item is None:
                stack.pop()
                continue
            words, subs = item
            if words:
                self._simple(words, via, shell_depth, "fallback")
            stack.extend(iter(_fallback_commands(sub)) for sub in reversed(subs))

    def _walk_bashlex(
        self,
        trees: Sequence[bashlex.ast.node],
        via: tuple[str, ...],
        shell_depth: int,
        given: _GivenText | None = None,
        source_of: _Source | None = None,
    ) -> None:
        """Every simple command in bashlex's trees; `given`: how to show rewritten words;
        `source_of`: the command as written, for `on_match`."""
        heredocs: list[tuple[int, int]] = []
        stack: list[bashlex.ast.node] = list(reversed(trees))
        while stack:
            node = stack.pop()
            kind = node.kind
            if kind in ("commandsubstitution", "processsubstitution"):
                start = node.pos[0]
                if not any(low <= start < high for low, high in heredocs):
                    stack.append(node.command)
                continue
            if kind == "command":
                words: list[_Word] = []
                children: list[bashlex.ast.node] = []
                stdin = None
                for part in node.parts:
                    if part.kind in ("word", "assignment"):
                        word = _word_from_node(part)
                        if given is not None:
                            word.given = given.word_at(*part.pos)
                        if source_of is not None and not word.literal:
                            word.raw = source_of.text_at(*part.pos)
                        words.append(word)
                        children.extend(part.parts)
                    elif part.kind == "redirect":
                        heredoc = getattr(part, "heredoc", None)
                        if heredoc is not None:
                            heredocs.append(heredoc.pos)
                            if source_of is not None:
                                stdin = source_of.heredoc_at(heredoc.pos[0])
                        target = part.output
                        if isinstance(target, bashlex.ast.node) and target.kind == "word":
                            children.extend(target.parts)
                if words:
                    self._simple(words, via, shell_depth, "bashlex", stdin)
                stack.extend(reversed(children))
                continue
            if kind == "redirect":
                heredoc = getattr(node, "heredoc", None)
                if heredoc is not None:
                    heredocs.append(heredoc.pos)
                target = node.output
                if isinstance(target, bashlex.ast.node) and target.kind == "word":
                    stack.extend(reversed(target.parts))
                continue
            children = getattr(node, "parts", None) or getattr(node, "list", None) or []
            stack.extend(reversed(children))

    # --------------------------------------------------------- simple commands

    def _simple(  # noqa: PLR0915 - one walk through the words, each way out said
        self,
        words: list[_Word],
        via: tuple[str, ...],
        shell_depth: int,
        parser: Parser,
        stdin: str | None = None,
    ) -> None:
        if self._budget <= 0:
            self.note(f"only the first {MAX_SIMPLE_COMMANDS} simple commands were analyzed")
            return
        if self.clock.tick():
            return  # out of time: `Matcher._explain` says so once
        self._budget -= 1
        words = words[:MAX_WORDS]
        shown = tuple(word.value if word.given is None else word.given for word in words)
        index = 0
        while index < len(words) and words[index].assignment:
            index += 1
        args = words[index:]
        if not args:
            self._record(shown, None, via, reason="only variable assignments", parser=parser)
            return
        peeled = via
        for _ in range(MAX_WRAPPERS):
            head = args[0]
            if not head.literal:
                self._record(
                    shown,
                    None,
                    peeled,
                    parser=parser,
                    reason=f"the program {head.value!r} is only known when the command runs",
                )
                return
            name = _basename(head.value)
            wrapper = self.table.wrapper(name)
            if wrapper is None:
                break
            outcome = _peel(wrapper, name, args)
            if isinstance(outcome, _RunsString):
                if shell_depth >= MAX_SHELL_DEPTH:
                    self._record(
                        shown,
                        name,
                        peeled,
                        parser=parser,
                        reason=f"command strings nested over {MAX_SHELL_DEPTH} deep "
                        "are not analyzed",
                    )
                    return
                self._record(
                    shown,
                    name,
                    peeled,
                    parser=parser,
                    reason=f"runs a command string ({outcome.label}): analyzed below",
                )
                self.run(outcome.text, via=(*peeled, outcome.label), shell_depth=shell_depth + 1)
                return
            if isinstance(outcome, str):
                self._record(shown, name, peeled, reason=outcome, parser=parser)
                return
            args, label = outcome
            peeled = (*peeled, label)
            if not args:
                self._record(
                    shown, name, peeled, reason=f"{name} runs no command here", parser=parser
                )
                return
        else:
            self._record(shown, None, peeled, reason="too many wrappers", parser=parser)
            return
        program = _basename(args[0].value)
        argv = args_values = [word.value for word in args[1:]]
        if program == "git":
            index, _ = _scan_options(argv, 0, self.table.program(program).options_with_value)
            expansion = git_aliases.expand(argv, index, self.aliases)
            if expansion is not None:
                peeled = (*peeled, f"git alias {expansion.alias}")
                if expansion.shell is not None:
                    if shell_depth >= MAX_SHELL_DEPTH:
                        reason = (
                            f"command strings nested over {MAX_SHELL_DEPTH} deep are not analyzed"
                        )
                        self._record(shown, program, peeled, parser=parser, reason=reason)
                        return
                    reason = "the alias runs a shell command: analyzed below"
                    self._record(shown, program, peeled, parser=parser, reason=reason)
                    self.run(expansion.shell, via=peeled, shell_depth=shell_depth + 1)
                    return
                argv = expansion.argv
        matches, reason, shapes = _match_shapes(self.table, program, argv)
        self._record(shown, program, peeled, matches=matches, reason=reason, parser=parser)
        if matches and self.on_match is not None:
            known: tuple[str | None, ...]
            if argv is not args_values:  # a git alias: its words, or none known
                known = tuple(argv) if all(word.literal for word in args[1:]) else ()
            else:
                known = tuple(_known_value(word) for word in args[1:])
            self.on_match(
                MatchedCommand(
                    program=program,
                    args=known,
                    actions=tuple(match.action for match in matches),
                    stdin=stdin,
                    shapes=shapes,
                )
            )

    def _record(  # noqa: PLR0913 - fields of the record
        self,
        words: tuple[str, ...],
        program: str | None,
        via: tuple[str, ...],
        *,
        parser: Parser,
        matches: tuple[ShapeMatch, ...] = (),
        reason: str = "",
    ) -> None:
        for match in matches:
            self.actions.setdefault(match.action, None)
        self.commands.append(
            SimpleCommand(
                words=words, program=program, via=via, matches=matches, reason=reason, parser=parser
            )
        )


def _paren_depth(text: str) -> int:
    depth = deepest = 0
    for match in _PARENS.finditer(text):
        if match.group() == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif depth:
            depth -= 1
    return deepest


def _word_from_node(node: bashlex.ast.node) -> _Word:
    dynamic = any(
        part.kind in ("parameter", "commandsubstitution", "processsubstitution")
        for part in node.parts
    )
    return _Word(node.word, literal=not dynamic, assignment=node.kind == "assignment")


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1] if "/" in word else word


def _shorten(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
