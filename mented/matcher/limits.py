"""The matcher's caps and CPU budgets: what one command may cost it.

Each bound has its reason beside it; `mented.matcher` (the package docstring) says
how the budgets are spent and what is noted when one is reached.
"""

from __future__ import annotations

# Longer commands are not analyzed at all: no action, a note saying why. A command
# up to `MAX_HEREDOC_SCAN_CHARS` is first read once for its heredocs, whose bodies
# are data: without them it may fit (a long commit message in a heredoc).
MAX_COMMAND_CHARS = 128 * 1024
MAX_HEREDOC_SCAN_CHARS = 8 * MAX_COMMAND_CHARS  # the shim passes at most 1 MiB
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
