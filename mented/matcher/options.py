"""Getopt-style reading of a command's options, as the wrappers and the shapes need it."""

from __future__ import annotations

from collections.abc import Sequence


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
