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

* `_Lexer` (`lexer.py`), a small quote-aware shell tokenizer. When the command
  holds a construct bashlex rejects it computes safe rewrites: heredoc bodies are
  emptied and their delimiters unquoted (bodies are data), `$((...))` becomes `0`,
  a leading `time` becomes `\\time` (a plain word, peeled as a wrapper),
  `[[ ... ]]` becomes `:` followed by the command substitutions it held,
  `a=(...)` keeps only its substitutions.
* When bashlex still fails (`case`, `select`, ...), or the input is too long or too
  deeply nested for it, the lexer's tokens are split into simple commands on the
  control operators by `_fallback_commands` (`fallback.py`), which honours quotes,
  heredocs, `case` patterns, `[[ ]]` and `for` headers.

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
left out: `mented.cputime`), checked at cheap points inside bashlex (its character
reader and parameter expansion, patched in `bashlex_guard.py`) and inside our own
tokenizer and analysis:

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

Layout (imports point down the list; only `matching` imports `analysis` and `cache`):

- `matching.py`   `Matcher`: `actions_in`, `quick_actions_in`, `explain`, `matched_commands`.
- `cache.py`      the hook's caches by the command's digest, bounded in bytes (a mixin).
- `analysis.py`   the walk of one command: bashlex's trees or the fallback's tokens.
- `shapes.py`     a program's words against the shapes of the action table.
- `wrappers.py`   what a wrapper runs (`sudo`, `env`, `timeout`, `bash -c`, `python -m`).
- `options.py`    getopt-style reading of options, for wrappers and shapes.
- `rewrites.py`   the edits applied for bashlex, and mapped back to the command as given.
- `heredocs.py`   heredoc bodies: left out of long commands, read as a command's input.
- `fallback.py`   simple commands in the lexer's tokens, where bashlex fails.
- `lexer.py`      the quote-aware tokenizer that computes the rewrites.
- `bashlex_guard.py` bashlex with our parser tables and its time checkpoints.
- `results.py`    the answers: `Explanation`, `SimpleCommand`, `MatchedCommand`.
- `clock.py`      the time limits of one match (CPU budget, the caller's deadline).
- `limits.py`     the caps and budgets.
"""

from __future__ import annotations

from mented.matcher.cache import CACHE_BYTES, MATCHED_CACHE_CHARS
from mented.matcher.limits import (
    BASHLEX_CPU_BUDGET_S,
    MATCH_CPU_BUDGET_S,
    MAX_COMMAND_CHARS,
    MAX_HEREDOC_SCAN_CHARS,
    MAX_SHELL_DEPTH,
)
from mented.matcher.matching import Matcher
from mented.matcher.results import Explanation, MatchedCommand, Parser, ShapeMatch, SimpleCommand

# What the rest of mented (and its tests) use; the other bounds stay in `limits`.
__all__ = [
    "BASHLEX_CPU_BUDGET_S",
    "CACHE_BYTES",
    "MATCHED_CACHE_CHARS",
    "MATCH_CPU_BUDGET_S",
    "MAX_COMMAND_CHARS",
    "MAX_HEREDOC_SCAN_CHARS",
    "MAX_SHELL_DEPTH",
    "Explanation",
    "MatchedCommand",
    "Matcher",
    "Parser",
    "ShapeMatch",
    "SimpleCommand",
]
