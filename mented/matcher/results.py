"""What the matcher answers: each simple command found, its matches, the explanation."""

from __future__ import annotations

from typing import Literal

import msgspec

from mented.actions import Shape

Parser = Literal["bashlex", "fallback", "none"]


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
