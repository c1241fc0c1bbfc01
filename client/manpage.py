"""mentectl(1), written from its parser: `mentectl man | man -l -`.

Every verb with its usage, description and options, in the order of `mentectl
--help`; made from `parser_tree`, so it lists what the parser takes.
"""

from __future__ import annotations

from mented import __version__
from mented_client.parser_tree import Command

_ABOUT = (
    "mentectl manages mented, a per-user daemon that hands AI coding agents the "
    "user's action rules right before a shell command runs: rules tagged with the "
    "action they govern (git-commit, pr-create, ...), looked up by key when the "
    "agent's hook fires."
)


def _roff(text: str) -> str:
    """`text` safe in a roff line: backslashes and hyphens escaped, no leading dot."""
    escaped = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + escaped if escaped.startswith((".", "'")) else escaped


def manpage(root: Command, date: str) -> str:
    """The page in man(7) roff; `date` as the footer shows it (YYYY-MM-DD)."""
    lines = [
        f'.TH MENTECTL 1 "{date}" "mented {__version__}" "User Commands"',
        ".SH NAME",
        "mentectl \\- manage mented: action rules for AI coding agents",
        ".SH SYNOPSIS",
        f".B {_roff(root.usage)}",
        ".SH DESCRIPTION",
        _roff(_ABOUT),
        ".SH OPTIONS",
    ]
    lines += _options(root)
    lines.append(".SH COMMANDS")
    for command in root.walk()[1:]:
        lines += [f'.SS "{_roff(command.key)}"', _roff(command.help or command.description)]
        lines += [".PP", f".B {_roff(command.usage)}"]
        if command.description and command.description != command.help:
            lines += [".PP", _roff(command.description)]
        lines += _options(command)
    lines += [
        ".SH ENVIRONMENT",
        ".TP",
        ".B MENTED_SOCKET",
        "the daemon's socket (else $XDG_RUNTIME_DIR/mented/mented.sock)",
        ".TP",
        ".B MENTED_DATA_DIR",
        "the data directory (else $XDG_DATA_HOME/mented)",
        ".TP",
        ".B MENTED_CONFIG",
        "the config file (else $XDG_CONFIG_HOME/mented/config.toml)",
        ".SH SEE ALSO",
        "mented(1); the README and docs/ of mented",
    ]
    return "\n".join(lines) + "\n"


def _options(command: Command) -> list[str]:
    lines = []
    for option in command.options:
        spelled = ", ".join(option.strings)
        if option.takes_value:
            value = option.metavar or (
                "{" + ",".join(option.choices) + "}" if option.choices else "VALUE"
            )
            spelled += f" {value}"
        lines += [".TP", f".B {_roff(spelled)}", _roff(option.help or "")]
    for positional in command.positionals:
        lines += [".TP", f".I {_roff(positional.name)}", _roff(positional.help or "")]
    return lines
