"""Name the actions a shell command performs: parse it, then match the action table.

Parse, don't grep. The command is parsed with bashlex and every simple command in
the tree is checked on its own, wherever it stands (lists, pipelines, subshells,
`if`/`while`/`for` bodies, functions, `$(...)`, backticks, `<(...)`). Quoted text,
heredoc bodies, comments and other programs' arguments are data and never fire.

For each simple command: leading `NAME=value` words are skipped, wrappers are
peeled with knowledge of their own options (`sudo -u x`, `env -i`, `timeout 5`,
...), shell `-c` strings and `eval` are parsed again (to `MAX_SHELL_DEPTH`),
`python -m pip` becomes `pip`, the program is taken by basename, its global options
are skipped by arity, and the shapes of the action table are tried in table order.

bashlex 0.18 cannot parse all that agents send, so two things come first:

* `_Lexer`, a small quote-aware shell tokenizer. When the command holds a construct
  bashlex rejects it computes safe rewrites: heredoc bodies are emptied and their
  delimiters unquoted (bodies are data), `$((...))` becomes `0`, a leading `time`
  becomes `\\time` (a plain word, peeled as a wrapper), `[[ ... ]]` becomes `:`
  followed by the command substitutions it held, `a=(...)` keeps only its
  substitutions.
* When bashlex still fails (`case`, `select`, ...), or the input is too long or too
  deeply nested for it, the lexer's tokens are split into simple commands on the
  control operators by `_fallback_commands`, which honours quotes, heredocs,
  `case` patterns, `[[ ]]` and `for` headers.

The matcher never raises, its input is capped (`MAX_COMMAND_CHARS`), nesting is
bounded without recursing past `MAX_NESTING`, and the hook's answers (the actions
only) are cached by the command's digest in an LRU bounded in bytes (`CACHE_BYTES`).
A longer command (up to `MAX_HEREDOC_SCAN_CHARS`) is first read once by the lexer,
within the same budgets as below, for its heredocs: their bodies are data, and a
command that fits the cap without them (a long commit message in a heredoc) is
analyzed without them. One that does not fit is not analyzed, and says so
(`Explanation.too_long`, `Matcher.too_long` for the hook's log).

The daemon matches on its one event-loop thread, so a command that takes long to
match delays every other session's hook. bashlex costs 50-100 us a token and more
on some shapes (a word of 2,700 backtick substitutions took a second), and no
count of words or characters done before parsing predicts it. So each command
gets a time budget in CPU time of the matching thread (its garbage collections
left out: `mented.cputime`), checked at cheap points
inside bashlex (its character reader and parameter expansion, patched below) and
inside our own tokenizer and analysis:

* bashlex may spend `BASHLEX_CPU_BUDGET_S` on all the strings of one command
  together (nested `bash -c` strings included); past it, the string it was reading
  and every later one go to the fallback tokenizer;
* the whole match stops at `MATCH_CPU_BUDGET_S`: the actions found so far are the
  answer (each of them is in the command: careful, never a guess), with a note.

A caller may add a wall-clock `deadline` (the hook's: its shim has given up by
then); matching stops there too, and such a cut answer is not cached.
`quick_actions_in` matches within a smaller budget or says it could not: the
daemon answers most commands that way on its event loop, and matches the rest
with `actions_in` in a worker thread (the cache is shared, under a lock).
"""

from __future__ import annotations

import fnmatch
import hashlib
import math
import re
import shlex
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import msgspec

from mented import git_aliases, parser_tables
from mented.actions import ANY_WORD, ActionTable, ProgramSpec, Shape, WrapperSpec
from mented.cputime import own_cpu_time
from mented.git_aliases import NO_ALIASES, Aliases

parser_tables.install()  # before bashlex builds its parser: it reads the tables instead
import bashlex  # noqa: E402 - after install(), see above

# Longer commands are not analyzed at all: no action, a note saying why. A command
# up to `MAX_HEREDOC_SCAN_CHARS` is first read once for its heredocs, whose bodies
# are data: without them it may fit (a long commit message in a heredoc).
MAX_COMMAND_CHARS = 128 * 1024
MAX_HEREDOC_SCAN_CHARS = 8 * MAX_COMMAND_CHARS  # the shim passes at most 1 MiB
# Over-long commands remembered with their length, for the hook's log (`too_long`).
_TOO_LONG_REMEMBERED = 64
# bashlex is slow on long input (about 1 ms per KiB) and recurses on nesting, so
# longer or deeper (rewritten) commands go straight to the fallback parser.
BASHLEX_MAX_CHARS = 8 * 1024
# bashlex takes up to about 35 µs a word: words it may read for one command, nested
# `bash -c` strings included (whitespace-separated chunks, counted before parsing).
BASHLEX_MAX_WORDS = 1024
BASHLEX_MAX_PAREN_DEPTH = 12
# Command substitutions nested deeper than this are skipped (and noted).
MAX_NESTING = 24
# `bash -c "bash -c '...'"`: how many command strings deep to follow.
MAX_SHELL_DEPTH = 4
# Wrappers peeled from one simple command (`sudo env nice timeout 5 git push`).
MAX_WRAPPERS = 16
# Words of one simple command looked at (wrappers, options, shapes); the rest are ignored.
MAX_WORDS = 512
# Simple commands analyzed in one command (nested ones included); the rest are skipped.
MAX_SIMPLE_COMMANDS = 512
# Pieces (tokens, and the quoted parts and expansions within words) read from one
# command, nested strings included; the rest of the input is ignored (and noted).
MAX_TOKENS = 4096
# `$((...))` longer than this is read as `$( (...) )`.
MAX_ARITHMETIC_CHARS = 1024
# CPU time (of the matching thread) one command may take, all strings in it together:
# bashlex gets the first part, the fallback tokenizer and the analysis the rest.
MATCH_CPU_BUDGET_S = 0.050
BASHLEX_CPU_BUDGET_S = 0.025
# Checkpoints passed between two looks at the clock (a look costs about 1 us, a
# checkpoint in bashlex stands for a character read: 1-3 us of its work).
_CHECK_EVERY = 32
# Bytes the hook's cache (command digest -> actions) may hold, each entry weighed by
# `_CACHE_ENTRY_BYTES` and 8 bytes an action (the names are the table's own strings).
CACHE_BYTES = 1 << 20
# Characters of words `matched_commands` keeps (for the checks of rules, mented.prechecks).
MATCHED_CACHE_CHARS = 1 << 20
_CACHE_ENTRY_BYTES = 240  # measured: the dict slot and list node, a 16-byte digest, a tuple

Parser = Literal["bashlex", "fallback", "none"]


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


class _Clock:
    """The time limits of one match, looked at every `_CHECK_EVERY` checkpoints.

    CPU time of this thread for the command's own budgets (what a command costs, the
    same on a busy machine; without garbage collections, `mented.cputime`),
    wall-clock time for the caller's deadline.
    """

    __slots__ = (
        "bashlex_cut",
        "bashlex_until",
        "cpu_until",
        "late",
        "out_of_time",
        "ticks",
        "wall_until",
    )

    def __init__(self, deadline: float | None, cpu_budget_s: float = MATCH_CPU_BUDGET_S) -> None:
        now = own_cpu_time()
        self.cpu_until = now + cpu_budget_s
        self.bashlex_until = now + cpu_budget_s * (BASHLEX_CPU_BUDGET_S / MATCH_CPU_BUDGET_S)
        self.wall_until = math.inf if deadline is None else deadline
        self.ticks = _CHECK_EVERY
        self.out_of_time = False  # the command used up its own budget
        self.bashlex_cut = False  # bashlex used up its part of it
        self.late = False  # the caller's deadline passed

    def expired(self) -> bool:
        """Whether matching must stop now (own budget used up, or the deadline passed)."""
        if not (self.out_of_time or self.late):
            if time.monotonic() >= self.wall_until:
                self.late = True
            elif own_cpu_time() >= self.cpu_until:
                self.out_of_time = True
        return self.out_of_time or self.late

    def tick(self) -> bool:
        """`expired()`, looked at only every `_CHECK_EVERY` calls (cheap in between)."""
        self.ticks -= 1
        if self.ticks > 0:
            return self.out_of_time or self.late
        self.ticks = _CHECK_EVERY
        return self.expired()

    def bashlex_expired(self) -> bool:
        if self.expired():
            return True
        if own_cpu_time() >= self.bashlex_until:
            self.bashlex_cut = True
        return self.bashlex_cut


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


class ShapeMatch(msgspec.Struct, frozen=True, kw_only=True):
    """An action a simple command performs, and the shape that said so."""

    action: str
    shape: str


class SimpleCommand(msgspec.Struct, frozen=True, kw_only=True):
    """One simple command found in the input, and what it performs or why nothing."""

    words: tuple[str, ...]
    program: str | None
    via: tuple[str, ...] = ()
    matches: tuple[ShapeMatch, ...] = ()
    reason: str = ""
    parser: Parser = "bashlex"


class MatchedCommand(msgspec.Struct, frozen=True, kw_only=True):
    """A simple command that performs actions, as `mented.fields` reads it.

    `args`: the words after the program, each as the program receives it, or None
    when it is only known when the command runs (`$X`, `$(date)`); a word that is a
    `$(cat <<'EOF' ... EOF)` substitution is its heredoc's body. `stdin`: the body
    of a heredoc fed to the command (`git commit -F - <<'EOF'`), None without one.
    """

    program: str
    args: tuple[str | None, ...]
    actions: tuple[str, ...]
    stdin: str | None = None
    # The shape of each action (same order) that matched: how the fields read the words.
    shapes: tuple[Shape, ...] = ()


class Explanation(msgspec.Struct, frozen=True, kw_only=True):
    """What `Matcher.explain` found: the actions, each simple command, how it was parsed.

    `too_long`: the command's length (without its heredoc bodies) when that is over
    `MAX_COMMAND_CHARS`, so that it was not analyzed; None when it was.
    """

    actions: tuple[str, ...]
    commands: tuple[SimpleCommand, ...] = ()
    parser: Parser = "bashlex"
    fallback_used: bool = False
    notes: tuple[str, ...] = ()
    too_long: int | None = None


class Matcher:
    """Names the actions in shell commands, with one action table and the hook's cache."""

    def __init__(self, table: ActionTable, cache_bytes: int = CACHE_BYTES) -> None:
        self.table = table
        # Only what the hook needs, by a digest of the command: a cached 128 KiB
        # command costs as little as a short one (`explain` is not cached).
        self._cache: OrderedDict[bytes, tuple[str, ...]] = OrderedDict()
        self._cache_limit = max(0, cache_bytes)
        self._cache_used = 0
        # The daemon matches slow commands in a worker thread, the rest on its own.
        self._cache_lock = threading.Lock()
        self._too_long: OrderedDict[bytes, int] = OrderedDict()  # under the cache's lock
        # `matched_commands`' answers (under the cache's lock). With `keep_matched` set
        # (a rule with checks exists), every match fills it as it goes: the hook's one
        # parse of a command also serves its checks.
        self.keep_matched = False
        self._matched: OrderedDict[bytes, tuple[tuple[MatchedCommand, ...], int]] = OrderedDict()
        self._matched_used = 0

    @property
    def cache_bytes(self) -> int:
        """What the cache holds now, weighed as it counts against `CACHE_BYTES`."""
        return self._cache_used

    def actions_in(
        self, command: str, *, deadline: float | None = None, aliases: Aliases = NO_ALIASES
    ) -> tuple[str, ...]:
        """The actions `command` performs, de-duplicated, in command order. Never raises.

        Args:
            command: the shell command.
            deadline: a `time.monotonic()` value after which the answer is of no use
                (the hook's shim has given up by then): matching stops there, and an
                answer cut short by it is not cached.
            aliases: the user's git aliases where the command runs (`git_aliases`).
        """
        if not isinstance(command, str) or len(command) > MAX_HEREDOC_SCAN_CHARS:
            return ()
        key = _cache_key(command, aliases)
        cached = self._cached(key)
        if cached is not None:
            return cached
        explanation, clock = self._explain(command, deadline, aliases=aliases)
        if clock is None or not clock.late:
            self._remember(key, explanation)
        return explanation.actions

    def too_long(self, command: str, *, aliases: Aliases = NO_ALIASES) -> int | None:
        """The length of `command`, not analyzed for being over `MAX_COMMAND_CHARS` even
        without its heredoc bodies (that length), as the last `actions_in` found; else None.

        For the hook's log: it says why such a command fired nothing.
        """
        if not isinstance(command, str) or len(command) <= MAX_COMMAND_CHARS:
            return None
        if len(command) > MAX_HEREDOC_SCAN_CHARS:
            return len(command)
        with self._cache_lock:
            return self._too_long.get(_cache_key(command, aliases))

    def _cached(self, key: bytes) -> tuple[str, ...] | None:
        """The cached actions for a command's key, marked as just used; None when not cached."""
        with self._cache_lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
            return cached

    def quick_actions_in(
        self,
        command: str,
        cpu_budget_s: float,
        *,
        deadline: float | None = None,
        aliases: Aliases = NO_ALIASES,
    ) -> tuple[str, ...] | None:
        """`actions_in`, if matching takes under `cpu_budget_s` of CPU; else None.

        For the event loop: it answers ordinary commands at once, and leaves a slow
        one (None, nothing cached) to `actions_in` in a worker thread.
        """
        if not isinstance(command, str) or len(command) > MAX_HEREDOC_SCAN_CHARS:
            return ()
        key = _cache_key(command, aliases)
        cached = self._cached(key)
        if cached is not None:
            return cached
        explanation, clock = self._explain(command, deadline, cpu_budget_s, aliases=aliases)
        if clock is not None and (clock.out_of_time or clock.bashlex_cut):
            return None
        if clock is None or not clock.late:
            self._remember(key, explanation)
        return explanation.actions

    def explain(
        self, command: str, *, deadline: float | None = None, aliases: Aliases = NO_ALIASES
    ) -> Explanation:
        """Every simple command in `command` and what it performs. Never raises.

        Within the same time budget as `actions_in` (see the module docstring).
        """
        return self._explain(command, deadline, aliases=aliases, as_given=True)[0]

    def matched_commands(
        self, command: str, *, deadline: float | None = None, aliases: Aliases = NO_ALIASES
    ) -> tuple[MatchedCommand, ...]:
        """Each simple command in `command` that performs an action, with its words.

        For `mented.fields` (what a commit's message is), within the same time budget
        as `actions_in`; kept by the command's digest in an LRU bounded by the characters
        of its words (`MATCHED_CACHE_CHARS`), unless cut short. Never raises.
        """
        if not isinstance(command, str) or len(command) > MAX_HEREDOC_SCAN_CHARS:
            return ()
        key = _cache_key(command, aliases)
        with self._cache_lock:
            kept = self._matched.get(key)
            if kept is not None:
                self._matched.move_to_end(key)
                return kept[0]
        seen: list[MatchedCommand] = []
        _, clock = self._explain(command, deadline, aliases=aliases, on_match=seen.append)
        self._keep_matched(key, seen, clock)
        return tuple(seen)

    def _keep_matched(self, key: bytes, seen: list[MatchedCommand], clock: _Clock | None) -> None:
        """Keep what `matched_commands` answers for `key`, unless cut short."""
        if clock is not None and (clock.late or clock.out_of_time or clock.bashlex_cut):
            return
        weight = _CACHE_ENTRY_BYTES + sum(
            len(word or "") + 8 for found in seen for word in (*found.args, found.stdin)
        )
        if weight > MATCHED_CACHE_CHARS:
            return
        with self._cache_lock:
            if key in self._matched:
                return
            self._matched[key] = (tuple(seen), weight)
            self._matched_used += weight
            while self._matched_used > MATCHED_CACHE_CHARS:
                _, (_, dropped) = self._matched.popitem(last=False)
                self._matched_used -= dropped

    def _remember(self, key: bytes, explanation: Explanation) -> None:
        actions = explanation.actions
        weight = _CACHE_ENTRY_BYTES + 8 * len(actions)
        if explanation.too_long is not None:
            with self._cache_lock:
                self._too_long[key] = explanation.too_long
                self._too_long.move_to_end(key)
                while len(self._too_long) > _TOO_LONG_REMEMBERED:
                    self._too_long.popitem(last=False)
        if weight > self._cache_limit:
            return
        with self._cache_lock:
            if key in self._cache:
                return
            self._cache[key] = actions
            self._cache_used += weight
            while self._cache_used > self._cache_limit:
                _, evicted = self._cache.popitem(last=False)
                self._cache_used -= _CACHE_ENTRY_BYTES + 8 * len(evicted)

    def _explain(  # noqa: PLR0913 - the options of one match
        self,
        command: str,
        deadline: float | None,
        cpu_budget_s: float = MATCH_CPU_BUDGET_S,
        *,
        aliases: Aliases = NO_ALIASES,
        as_given: bool = False,
        on_match: Callable[[MatchedCommand], None] | None = None,
    ) -> tuple[Explanation, _Clock | None]:
        """The explanation, and the clock that timed it (None: there was nothing to time).

        `as_given`: show each word as the command gave it, not as rewritten for bashlex
        (`explain`; the hook needs only the actions).
        """
        if not isinstance(command, str):
            return Explanation(actions=(), parser="none", notes=("not a string",)), None
        clock = _Clock(deadline, cpu_budget_s)
        given_command = command
        stripped_note = None
        if len(command) > MAX_COMMAND_CHARS:
            # Heredoc bodies are data: without them, a long commit message still commits.
            stripped = (
                _without_heredoc_bodies(command, clock)
                if len(command) <= MAX_HEREDOC_SCAN_CHARS
                else command
            )
            if len(stripped) > MAX_COMMAND_CHARS:
                without = (
                    f" ({len(stripped)} without its heredoc bodies)"
                    if len(stripped) < len(command)
                    else ""
                )
                return Explanation(
                    actions=(),
                    parser="none",
                    notes=(
                        f"command is {len(command)} characters long{without}; commands over "
                        f"{MAX_COMMAND_CHARS} are not analyzed",
                    ),
                    too_long=len(stripped),
                ), clock
            stripped_note = (
                f"heredoc bodies (data) left out before the analysis: the command is "
                f"{len(command)} characters, {len(stripped)} without them (the cap is "
                f"{MAX_COMMAND_CHARS})"
            )
            command = stripped
        if not command.strip():
            return Explanation(actions=(), parser="none", notes=("empty command",)), None
        kept: list[MatchedCommand] | None = None
        if on_match is None and self.keep_matched and not as_given:
            kept = []
            on_match = kept.append
        analysis = _Analysis(self.table, clock, aliases)
        analysis.as_given = as_given
        analysis.on_match = on_match
        if stripped_note is not None:
            analysis.note(stripped_note)
        try:
            parser = analysis.run(command, via=(), shell_depth=0)
        except Exception as exc:  # noqa: BLE001 - the matcher never raises; say what broke
            return Explanation(
                actions=(),
                parser="none",
                notes=(f"internal error while matching: {type(exc).__name__}: {exc}",),
            ), clock
        if clock.late:
            analysis.note("matching stopped at the caller's deadline: the rest was not analyzed")
        elif clock.out_of_time:
            analysis.note(
                f"matching stopped at its time budget ({MATCH_CPU_BUDGET_S * 1000:.0f} ms of "
                "CPU): the rest of the command was not analyzed"
            )
        if kept is not None:
            self._keep_matched(_cache_key(given_command, aliases), kept, clock)
        return Explanation(
            actions=tuple(analysis.actions),
            commands=tuple(analysis.commands),
            parser=parser,
            fallback_used=analysis.fallback_used,
            notes=tuple(analysis.notes),
        ), clock


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


def _cache_key(command: str, aliases: Aliases = NO_ALIASES) -> bytes:
    """The command's digest; with git aliases in force, theirs too (`git ci` differs by them)."""
    digest = hashlib.blake2b(command.encode("utf-8", "surrogatepass"), digest_size=16)
    if aliases.digest:
        digest.update(aliases.digest)
    return digest.digest()


# ======================================================================== lexer


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


def _paren_depth(text: str) -> int:
    depth = deepest = 0
    for match in _PARENS.finditer(text):
        if match.group() == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif depth:
            depth -= 1
    return deepest


# ============================================================ fallback grouping

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


# ==================================================================== analysis


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
        matches, reason, shapes = self._match(program, argv)
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

    def _match(
        self, program: str, argv: list[str]
    ) -> tuple[tuple[ShapeMatch, ...], str, tuple[Shape, ...]]:
        """The actions `argv` performs, why none (or ""), and the shape each matched by."""
        rules = self.table.shapes_for(program)
        if not rules:
            return (), f"no action involves {program!r}", ()
        spec = self.table.program(program)
        first = _first_word(spec, argv)
        found: list[ShapeMatch] = []
        shapes: list[Shape] = []
        near = ""
        for action, shape in rules:
            if any(match.action == action for match in found):
                continue
            if (
                first is not None
                and shape.subcommand
                and not shape.options_with_value
                and not _word_matches(shape.subcommand[0], first)
            ):
                continue  # what `_shape_failure` would say, "subcommand X", at a fraction of it
            failure = _shape_failure(spec, shape, argv)
            if failure is None:
                found.append(ShapeMatch(action=action, shape=shape.describe()))
                shapes.append(shape)
            elif failure.startswith("!") and not near:
                near = f"{shape.describe()} [{action}]: {failure[1:]}"
        if found:
            return tuple(found), "", tuple(shapes)
        if near:
            return (), near, ()
        index, _ = _scan_options(argv, 0, spec.options_with_value)
        subcommand = argv[index] if index < len(argv) else ""
        if subcommand:
            return (), f"no action for {program} {subcommand!r}", ()
        return (), f"no action for {program} without a subcommand", ()


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


# ------------------------------------------------------------------- wrappers


class _RunsString:
    __slots__ = ("label", "text")

    def __init__(self, text: str, label: str) -> None:
        self.text = text
        self.label = label


def _read_option(
    words: Sequence[str], index: int, with_value: frozenset[str]
) -> tuple[int, list[tuple[str, str | None]]]:
    """The option word at `index` (getopt-style) and the index after it and its value.

    `--opt=value`, `--opt value` (when `--opt` takes one), clusters `-abc`, and
    `-ovalue` / `-o value` for a short option that takes one.
    """
    word = words[index]
    index += 1
    if word[1] == word[0]:  # --long, --long=value
        name, equals, value = word.partition("=")
        if equals:
            return index, [(name, value)]
        if name in with_value:
            return index + 1, [(name, words[index] if index < len(words) else None)]
        return index, [(name, None)]
    seen: list[tuple[str, str | None]] = []
    for position in range(1, len(word)):
        option = word[0] + word[position]
        if option in with_value:
            rest = word[position + 1 :]
            if rest:
                seen.append((option, rest))
            elif index < len(words):
                seen.append((option, words[index]))
                index += 1
            else:
                seen.append((option, None))
            break
        seen.append((option, None))
    return index, seen


def _is_option(word: str, prefixes: Sequence[str] = ("-",)) -> bool:
    return len(word) > 1 and word[0] in prefixes


def _scan_options(
    words: Sequence[str],
    start: int,
    with_value: frozenset[str],
    prefixes: Sequence[str] = ("-",),
    stop_after: str | None = None,
) -> tuple[int, list[tuple[str, str | None]]]:
    """The options from `start` up to the first other word, or just past `--`.

    Returns the index of the first word after them, and each option with its value.
    `stop_after` ends the options too (`python -m mod --version`: --version is mod's).
    """
    index = start
    seen: list[tuple[str, str | None]] = []
    while index < len(words):
        word = words[index]
        if word == "--":
            return index + 1, seen
        if not _is_option(word, prefixes):
            break
        index, found = _read_option(words, index, with_value)
        seen.extend(found)
        if stop_after is not None and any(option == stop_after for option, _ in found):
            break
    return index, seen


def _peel(
    spec: WrapperSpec, name: str, args: list[_Word]
) -> tuple[list[_Word], str] | _RunsString | str:
    """What a wrapper runs: the command's words, a command string, or why nothing."""
    values = [word.value for word in args]
    with_value = spec.options_with_value | spec.string_options | spec.split_string_options
    if spec.module_option:
        with_value |= {spec.module_option}
    index, seen = _scan_options(
        values, 1, with_value, spec.option_prefixes, stop_after=spec.module_option
    )
    for option, _ in seen:
        if option in spec.no_command_flags:
            return f"{name} {option}: runs no command that can be named"
    if spec.kind == "eval":  # `positionals`: words before the command (ssh's host)
        return _RunsString(" ".join(values[index + spec.positionals :]), name)
    if spec.kind == "interpreter":
        module = next((value for option, value in seen if option == spec.module_option), None)
        if module is None:
            return f"{name} runs a script or reads standard input: not analyzed"
        return [_Word(module), *args[index:]], f"{name} {spec.module_option}"
    if spec.kind == "shell":
        if spec.string_options:  # su: options may follow the user name
            found = _string_option(values, spec)
            if found is not None:
                return _RunsString(found[1], f"{name} {found[0]}")
        if spec.command_flag and any(option == spec.command_flag for option, _ in seen):
            if index < len(values):
                return _RunsString(values[index], f"{name} {spec.command_flag}")
            return f"{name} {spec.command_flag} without a command string"
        return f"{name} runs a script or reads standard input: not analyzed"
    rest = list(args[index:])
    for option, value in seen:
        if option in spec.split_string_options and value is not None:
            rest = [
                token
                for token in _Lexer(value, record_edits=False, budget=MAX_WORDS).tokens()
                if isinstance(token, _Word)
            ] + rest
    if spec.assignments:
        while rest and rest[0].literal and _ASSIGNMENT.match(rest[0].value):
            rest.pop(0)
    if spec.positionals:
        rest = rest[spec.positionals :]
    if (
        spec.appends_input
        and rest
        and not any(option in spec.replace_options for option, _ in seen)
    ):
        rest.append(_Word("<input>", literal=False, bare=False))  # xargs adds its input
    return rest, name


def _string_option(values: Sequence[str], spec: WrapperSpec) -> tuple[str, str] | None:
    """The first command-string option anywhere in the arguments (`su - bob -c '...'`)."""
    with_value = spec.options_with_value | spec.string_options
    index = 1
    while index < len(values):
        word = values[index]
        if word == "--":
            return None
        if not _is_option(word, spec.option_prefixes):
            index += 1
            continue
        index, seen = _read_option(values, index, with_value)
        for option, value in seen:
            if option in spec.string_options and value is not None:
                return option, value
    return None


# --------------------------------------------------------------------- shapes


def _word_matches(expected: str | tuple[str, ...], word: str) -> bool:
    if isinstance(expected, str):
        return expected in (word, ANY_WORD)
    return word in expected or ANY_WORD in expected


def _first_word(spec: ProgramSpec, argv: list[str]) -> str | None:
    """The subcommand's first word as `_shape_failure` finds it for a shape with no
    options of its own; None when it would stop before (help asked, no word)."""
    index = 0
    while True:
        index, seen = _scan_options(argv, index, spec.options_with_value)
        if any(option in spec.help_flags for option, _ in seen):
            return None
        if index < len(argv) and any(argv[index].startswith(p) for p in spec.skip_prefixes):
            index += 1
            continue
        return argv[index] if index < len(argv) else None


def _shape_failure(spec: ProgramSpec, shape: Shape, argv: list[str]) -> str | None:
    """None when `argv` (the words after the program) has this shape, else why not.

    A reason starting with "!" means the subcommand matched and a condition failed.
    """
    extra = frozenset(shape.options_with_value)
    global_with_value = spec.options_with_value | extra if extra else spec.options_with_value
    index = 0
    matched: list[str] = []
    for expected in shape.subcommand:
        while True:
            index, seen = _scan_options(argv, index, global_with_value)
            if any(option in spec.help_flags for option, _ in seen):
                return "!asks for help"
            if index < len(argv) and any(argv[index].startswith(p) for p in spec.skip_prefixes):
                index += 1
                continue
            break
        if index >= len(argv):
            return "no subcommand"
        if not _word_matches(expected, argv[index]):
            return f"subcommand {argv[index]!r}"
        matched.append(argv[index])
        index += 1
    sub = spec.subcommands.get(" ".join(matched)) if matched else None
    with_value = (sub.options_with_value if sub else frozenset()) | extra
    if not shape.subcommand:
        with_value |= spec.options_with_value
    flags, positionals, values, paths = _parse_arguments(argv, index, with_value)
    if flags & spec.help_flags:
        return "!asks for help"
    if shape.any_flag and not flags.intersection(shape.any_flag):
        return f"!needs one of {', '.join(shape.any_flag)}"
    if shape.no_flag:
        present = sorted(flags.intersection(shape.no_flag))
        if present:
            return f"!has {', '.join(present)}"
    if len(positionals) < shape.min_positionals:
        return f"!needs {shape.min_positionals} positional argument(s), has {len(positionals)}"
    if shape.max_positionals is not None and len(positionals) > shape.max_positionals:
        return (
            f"!takes at most {shape.max_positionals} positional argument(s), has {len(positionals)}"
        )
    if shape.positional_starts_with is not None and not any(
        word.startswith(shape.positional_starts_with) for word in positionals
    ):
        return f"!needs an argument starting with {shape.positional_starts_with!r}"
    if shape.positional_matches is not None and not any(
        fnmatch.fnmatchcase(word, shape.positional_matches) for word in positionals
    ):
        return f"!needs an argument like {shape.positional_matches!r}"
    if shape.no_positional_matches is not None:
        unwanted = [w for w in positionals if fnmatch.fnmatchcase(w, shape.no_positional_matches)]
        if unwanted:
            return f"!has the argument {unwanted[0]!r}"
    if shape.last_positional_matches is not None and not (
        positionals and fnmatch.fnmatchcase(positionals[-1], shape.last_positional_matches)
    ):
        return f"!needs a last argument like {shape.last_positional_matches!r}"
    if shape.paths_after_double_dash and not paths:
        return "!needs paths after --"
    if shape.any_value and not values.intersection(shape.any_value):
        return f"!needs one of {', '.join(shape.any_value)}"
    if shape.no_value:
        present = sorted(values.intersection(shape.no_value))
        if present:
            return f"!has {', '.join(present)}"
    return None


def _parse_arguments(
    argv: Sequence[str], index: int, with_value: frozenset[str]
) -> tuple[set[str], list[str], set[str], int]:
    """The options present (by name), the positional arguments, `OPTION=VALUE` of
    each option given a value, from `index` on, and how many arguments follow `--`."""
    flags: set[str] = set()
    positionals: list[str] = []
    values: set[str] = set()
    while index < len(argv):
        word = argv[index]
        if word == "--":
            positionals.extend(argv[index + 1 :])
            return flags, positionals, values, len(argv) - index - 1
        if _is_option(word):
            index, seen = _read_option(argv, index, with_value)
            flags.update(option for option, _ in seen)
            values.update(f"{option}={value}" for option, value in seen if value is not None)
        else:
            positionals.append(word)
            index += 1
    return flags, positionals, values, 0
