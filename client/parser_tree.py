"""mentectl's argparse parser as a plain tree: what shell completion and the man page are
made of, so that neither can drift from the options the parser takes.

Only argparse's public names where it has them; the actions and the subparsers are
read from its (stable, long-unchanged) private lists, as `mented_client.cli` does.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field


@dataclass
class Option:
    """An option: its spellings, whether it takes a value, its choices, its help."""

    strings: list[str]
    takes_value: bool
    choices: list[str]
    metavar: str | None
    help: str


@dataclass
class Positional:
    name: str
    choices: list[str]
    help: str


@dataclass
class Command:
    """One verb (the root is `mentectl` itself); `path` is its words from the root."""

    path: list[str]
    help: str
    description: str
    usage: str
    options: list[Option] = field(default_factory=list)
    positionals: list[Positional] = field(default_factory=list)
    commands: dict[str, Command] = field(default_factory=dict)

    def walk(self) -> list[Command]:
        """This command and every one below it, depth first, in the parser's order."""
        found = [self]
        for command in self.commands.values():
            found.extend(command.walk())
        return found

    @property
    def key(self) -> str:
        return " ".join(self.path)


def command_tree(
    parser: argparse.ArgumentParser, path: list[str] | None = None, help_text: str = ""
) -> Command:
    """The tree of `parser` (built with every verb registered)."""
    path = path or [parser.prog]
    command = Command(
        path=path,
        help=help_text,
        description=parser.description or "",
        usage=" ".join(parser.format_usage().removeprefix("usage: ").split()),
    )
    for action in parser._actions:  # noqa: SLF001 - argparse lists them nowhere else
        if action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001 - as above
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}  # noqa: SLF001 - the verbs' help
            for name, sub in action.choices.items():
                command.commands[name] = command_tree(sub, [*path, name], helps.get(name, ""))
        elif action.option_strings:
            command.options.append(
                Option(
                    strings=list(action.option_strings),
                    takes_value=action.nargs != 0,
                    choices=[str(choice) for choice in action.choices or ()],
                    metavar=action.metavar if isinstance(action.metavar, str) else None,
                    help=_help(action),
                )
            )
        else:
            command.positionals.append(
                Positional(
                    name=action.metavar if isinstance(action.metavar, str) else action.dest,
                    choices=[str(choice) for choice in action.choices or ()],
                    help=_help(action),
                )
            )
    return command


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(default)" in text:
        text = text % {"default": action.default}
    return " ".join(text.split())
