"""Which tool calls need the hook at all: the action table read as a registration.

An agent spawns the hook process for every tool call its registration names,
and each spawn costs tens of milliseconds before the daemon says anything. So
the installers register the hook for exactly the tool calls that can perform an
action, and nothing else:

- shell commands, but only those that mention the words some command shape
  needs, in order (`git` ... `commit`), where the agent can filter on that
  before it spawns anything (Claude Code's `if`);
- the agent's file-writing tools, when some action names `paths`;
- the MCP tools some action names in `tools` (`*/create_pull_request`).

`hook_needs` computes that from the action table, with no agent in it; each
agent module turns it into its own settings (a tool-name matcher, conditions),
and `mentectl hooks status` / `doctor` compare what is installed with it.

The command filter must be a *superset* of what the matcher names: a command the
matcher would name that the filter drops would lose its rules without a trace.
So each shape becomes a pattern of its words with anything around and between
them, `*git*commit*`: the program may come after `sudo`, `env A=1`, `time`, a
path (`/usr/bin/git`) or inside `bash -c "..."`, global options may sit before
the subcommand (`git -c a=b commit`), and whatever follows may be a space, a
tab or a `;`. The price is an occasional spawn for a command that only mentions
the words (`echo "git commit"`), which the daemon answers with silence.
`npm test`, `ls`, `pytest`, `make` mention none and start nothing.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mented.actions import ANY_WORD

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

    from mented.actions import Action, ActionTable, Shape


@dataclass(frozen=True, slots=True)
class HookNeeds:
    """The tool calls that can perform an action, by kind.

    Attributes:
        commands: for each way a shape can be written, the words a command
            line must hold, in order (`("git", "commit")`, one tuple per
            alternative of a subcommand word; `*` words left out).
        mcp_tools: the SERVER/TOOL globs of the MCP tools that perform an action.
        edits: whether some action is performed by a file edit (`paths`).
        after: the word sequences of the commands whose effect is checked once they
            ran (`CHECKED_AFTER`): what the event after a tool ran is registered for.
    """

    commands: tuple[tuple[str, ...], ...] = ()
    mcp_tools: tuple[str, ...] = ()
    edits: bool = False
    after: tuple[tuple[str, ...], ...] = ()

    def command_patterns(self) -> list[str]:
        """The command-line patterns (`*` any text) that together catch every action command.

        One per word sequence, `*git*commit*`, without those another one
        already catches (`*npm*i*` catches every line `*npm*install*` does).
        """
        patterns = list(dict.fromkeys("*" + "*".join(words) + "*" for words in self.commands))
        kept = _KeptPatterns()
        for pattern in sorted(patterns, key=lambda p: (len(p), p)):
            if not any(_subsumes(other, pattern) for other in kept.candidates(pattern)):
                kept.add(pattern)
        return sorted(kept.patterns)

    def programs(self) -> list[str]:
        """The programs whose commands can perform an action, sorted."""
        return sorted({words[0] for words in self.commands})

    def summary(self) -> str:
        """The tool calls in a few words, as `hooks install` says what it registered."""
        parts = []
        if self.commands:
            parts.append(f"shell commands of {', '.join(self.programs())}")
        if self.mcp_tools:
            parts.append(f"MCP tools {', '.join(self.mcp_tools)}")
        if self.edits:
            parts.append("file edits")
        return "; ".join(parts) or "nothing (the action table names no trigger)"


# A shape whose subcommand alternatives multiply past this is filtered on its
# program alone (a looser filter, never a wrong one).
MAX_SEQUENCES_PER_SHAPE = 16
# git subcommands may be the user's aliases (`git ci`, mented.git_aliases): the
# installer adds the alias names it finds (`git_aliases`), and `git -c alias.X=Y X`
# is caught by its `alias.` word.
GIT_INLINE_ALIAS = ("git", "alias.")
# The actions whose commands are checked again once they ran (the keys of
# mented.afterchecks.AFTER_FIELDS: a commit's message is read from the commit made).
CHECKED_AFTER = frozenset({"git-commit"})


def hook_needs(
    table: ActionTable, git_aliases: Iterable[str] = (), *, only: Collection[str] | None = None
) -> HookNeeds:
    """The tool calls in `table` that need the hook (see the module docstring).

    `git_aliases`: the names of the user's git aliases (their global config's, as
    the installer reads them): a command `git NAME` may perform an action too.
    `only`: the tool calls of these actions alone (a rule just added for one).
    """
    actions = [action for action in table.actions() if only is None or action.name in only]
    git_aliases = list(git_aliases)  # read twice
    tools: dict[str, None] = {}
    edits = False
    for action in actions:
        tools.update(dict.fromkeys(action.tools))
        edits = edits or bool(action.paths)
    after = [action for action in actions if action.name in CHECKED_AFTER]
    return HookNeeds(
        commands=_command_words(actions, git_aliases),
        mcp_tools=tuple(tools),
        edits=edits,
        after=_command_words(after, git_aliases),
    )


def _command_words(
    actions: list[Action], git_aliases: Iterable[str]
) -> tuple[tuple[str, ...], ...]:
    """The word sequences of the commands that can perform one of `actions`."""
    commands: dict[tuple[str, ...], None] = {}
    if any(shape.program == "git" for action in actions for shape in action.shapes):
        commands[GIT_INLINE_ALIAS] = None
        commands.update(dict.fromkeys(("git", name) for name in sorted(git_aliases)))
    for action in actions:
        for shape in action.shapes:
            commands.update(dict.fromkeys(_word_sequences(shape)))
    return tuple(commands)


def _word_sequences(shape: Shape) -> list[tuple[str, ...]]:
    """The word sequences a command of `shape` holds: program, then its subcommand words."""
    sequences: list[tuple[str, ...]] = [(shape.program,)]
    for word in shape.subcommand:
        alternatives = (word,) if isinstance(word, str) else word
        if ANY_WORD in alternatives:
            continue  # any word (alone or among others, as the matcher reads it): none to look for
        grown = [(*sequence, a) for sequence in sequences for a in alternatives]
        if len(grown) > MAX_SEQUENCES_PER_SHAPE:
            return [(shape.program,)]
        sequences = grown
    return sequences


class _KeptPatterns:
    """The `*a*b*` patterns kept so far, by their last literal part.

    A pattern can subsume `specific` only when each of its parts, the last one
    too, stands inside one of `specific`'s parts: the candidates are found by
    looking up the pieces of `specific`'s parts, not by trying every pattern kept
    (hundreds with many git aliases).
    """

    def __init__(self) -> None:
        self.patterns: list[str] = []
        self._by_last: dict[str, list[str]] = {}
        self._bare: list[str] = []  # no literal part: they take every text

    def add(self, pattern: str) -> None:
        self.patterns.append(pattern)
        parts = [part for part in pattern.split("*") if part]
        (self._by_last.setdefault(parts[-1], []) if parts else self._bare).append(pattern)

    def candidates(self, specific: str) -> list[str]:
        """The kept patterns that may subsume `specific` (all those that do, and others)."""
        parts = [part for part in specific.split("*") if part]
        if sum(len(part) * (len(part) + 1) // 2 for part in parts) > len(self.patterns):
            return self.patterns  # looking up every piece would cost more
        found = list(self._bare)
        pieces = {p[i:j] for p in parts for i in range(len(p)) for j in range(i + 1, len(p) + 1)}
        for piece in pieces:
            found.extend(self._by_last.get(piece, ()))
        return found


def _subsumes(general: str, specific: str) -> bool:
    """Whether every text `specific` matches is matched by `general` (both `*a*b*` patterns).

    `general`'s literal parts must each fit inside one of `specific`'s, in
    order: text may be inserted between `specific`'s parts, so a part of
    `general` spanning two of them would not always be there.
    """
    wanted = [part for part in general.split("*") if part]
    have = [part for part in specific.split("*") if part]
    i, at = 0, 0
    for part in wanted:
        while i < len(have):
            found = have[i].find(part, at)
            if found != -1:
                at = found + len(part)
                break
            i, at = i + 1, 0
        else:
            return False
    return True


# ------------------------------------------------------------ reading patterns


def wildcard_matches(pattern: str, text: str) -> bool:
    """Whether `text` matches `pattern` whole, `*` standing for any text (newlines too).

    How Claude Code reads the inside of `Bash(...)` in a hook's `if`, for
    checking an installed condition against the table.
    """
    return wildcard_regex(pattern).fullmatch(text) is not None


def wildcard_regex(pattern: str) -> re.Pattern[str]:
    """`pattern` (`*` any text, newlines too) as a regular expression, for `fullmatch`."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


def glob_to_regex(glob: str) -> str:
    """A glob (`*`, `?`, `[...]`) as a regular expression that JavaScript and Rust read alike."""
    out = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[" and (end := glob.find("]", i + 2)) != -1:
            body = glob[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        elif char.isalnum() or char == "_":
            out.append(char)
        else:
            out.append("\\" + char)
        i += 1
    return "".join(out)


def sample_name(glob: str) -> str:
    """A name the glob matches (`*` as `x`), to check an installed matcher against."""
    return re.sub(r"\[!?[^\]][^\]]*\]", _class_member, glob).replace("*", "x").replace("?", "x")


def _class_member(found: re.Match[str]) -> str:
    """A character the glob's `[...]` takes: its first, or for `[!...]` one it leaves out."""
    klass = found.group(0)
    if not klass.startswith("[!"):
        return klass[1]
    taken = re.compile(glob_to_regex(klass))
    return next((char for char in "x" + string.printable if taken.fullmatch(char)), "x")
