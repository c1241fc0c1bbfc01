""" "Did you mean ...?" for a word that is not one of the names mentectl knows."""

from __future__ import annotations

from collections.abc import Iterable


def close_match(word: str, names: Iterable[str]) -> str | None:
    """The one of `names` that `word` most likely meant: one it starts (`claude` for
    `claude-code`), else the closest spelling (`stauts` for `status`); None when none
    is close."""
    import difflib  # noqa: PLC0415 - only when something was mistyped

    known = sorted(set(names))
    lowered = word.strip().lower()
    starting = [name for name in known if lowered and name.startswith(lowered)]
    if len(starting) == 1:
        return starting[0]
    matches = difflib.get_close_matches(lowered, known, n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, names: Iterable[str]) -> str:
    """` (did you mean 'NAME'?)`, or nothing when no name is close to `word`."""
    match = close_match(word, names)
    return f" (did you mean {match!r}?)" if match else ""
