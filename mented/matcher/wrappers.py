"""Wrappers peeled: what `sudo -u x`, `env -i`, `timeout 5`, `bash -c`, `python -m` run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mented.matcher.lexer import _ASSIGNMENT, _Lexer, _Word
from mented.matcher.limits import MAX_WORDS
from mented.matcher.options import _is_option, _read_option, _scan_options

if TYPE_CHECKING:
    from mented.actions import WrapperSpec


class _RunsString:
    __slots__ = ("label", "text")

    def __init__(self, text: str, label: str) -> None:
        self.text = text
        self.label = label


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
    """The first command-string option anywhere in the arguments (`su - bob -c '...'`).

    su reads options on both sides of the user name; after `--` it reads none, and
    what follows the user goes to the user's shell: `su -- bob -c '...'` has that
    shell run the string (util-linux and shadow's su alike).
    """
    with_value = spec.options_with_value | spec.string_options
    index = 1
    user_seen = False
    while index < len(values):
        word = values[index]
        if word == "--":
            shell_args = values[index + 1 + (not user_seen) :]
            return _shell_string(shell_args)
        if not _is_option(word, spec.option_prefixes):
            user_seen |= word != "-"  # `su -`: a login shell, not a user named "-"
            index += 1
            continue
        index, seen = _read_option(values, index, with_value)
        for option, value in seen:
            if option in spec.string_options and value is not None:
                return option, value
    return None


def _shell_string(args: Sequence[str]) -> tuple[str, str] | None:
    """The command string of a shell run with `args` (`-c '...'`, `-lc '...'`), if any."""
    if len(args) > 1 and _is_option(args[0]) and args[0][1] != "-" and "c" in args[0][1:]:
        return args[0], args[1]
    return None
