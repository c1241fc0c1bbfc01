"""Shared output helpers for `mentectl` commands: JSON or text, errors to stderr.

Text from users and events (rule content, commands, directories, session ids,
settings and config files) goes through `escape_controls` before it reaches the
terminal: a rule is written by whoever can reach the daemon, an agent included,
and a terminal acts on some characters instead of showing them.
"""

from __future__ import annotations

import shlex
import sys
import unicodedata
from typing import TYPE_CHECKING, Any

import msgspec

from mented.memory import Memory, Origin, origin_of, short_handle
from mented_client.errors import COMMAND_FAILED, CommandError

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from mented.protocol import UntrustedProject

# CommandError is defined apart from commands/ (see mented_client.errors); commands import it here.
__all__ = [
    "CommandError",
    "describe_scope",
    "error_document",
    "escape_controls",
    "fail",
    "format_memory",
    "format_time",
    "json_line",
    "print_json",
    "untrusted_note",
]


def fail(
    message: str, status: int = 1, *, code: str = COMMAND_FAILED, as_json: bool = False
) -> int:
    """Say `message` on stderr, or with `as_json` (`--json`) as an error object on stdout.

    With `--json` the error is the one JSON document printed, where `| jq` reads it:
    `{"error": {"code": CODE, "message": MESSAGE}}`; `code` is stable for programs
    (the daemon's `ErrorCode` or one of `mented_client.errors`). One line, so that it
    also ends a stream of JSON lines (`watch --json`) as a line of it. Returns `status`.
    """
    if as_json:
        print(json_line(msgspec.json.encode(error_document(code, message))))
    else:
        # Error messages quote what was refused: an id, a file's content, the daemon's words.
        print(f"mentectl: {escape_controls(message)}", file=sys.stderr)
    return status


def error_document(code: str, message: str) -> dict[str, dict[str, str]]:
    """What `--json` prints for a failure (`status --json` adds it to its figures)."""
    return {"error": {"code": code, "message": message}}


def print_json(data: Any) -> None:  # noqa: ANN401 - anything msgspec can encode
    text = msgspec.json.format(msgspec.json.encode(data), indent=2).decode()
    sys.stdout.write(text.translate(_JSON_ESCAPES) + "\n")


def json_line(body: bytes) -> str:
    """A compact JSON document from the daemon (one line) with the characters a terminal
    acts on escaped: still the same JSON."""
    return body.decode().translate(_JSON_ESCAPES)


# ------------------------------------------------------- terminal control characters

# The characters a terminal may act on instead of showing, by Unicode category:
# controls (Cc: ESC starts sequences such as OSC 52, which writes the clipboard;
# BEL rings; CR and BS overwrite what is shown; the C1 set, CSI among it), format
# characters (Cf: the bidi overrides and isolates such as RLO, which reorder a line,
# and the zero-width and tag characters, which hide text), line and paragraph
# separators (Zl, Zp) and lone surrogates (Cs, which stdout cannot even encode).
# The interpreter's Unicode database decides what is in each category, not a list
# kept here; no library does this without a terminal toolkit behind it (and rich,
# for one, strips only a few C0 codes), so a translate table it is.
_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _is_terminal_control(char: str) -> bool:
    return unicodedata.category(char) in _CONTROL_CATEGORIES


def _python_escape(code: int) -> str:
    """The escape Python's repr() writes: \\r, \\n, \\x1b, \\u202e, \\U000e0041."""
    named = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
    if code in named:
        return named[code]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _json_escape(code: int) -> str:
    """The same character as a JSON string escape (a surrogate pair past U+FFFF)."""
    if code < 0x10000:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


class _EscapeTable(dict[int, str]):
    """A `str.translate` table filled on first sight of each character."""

    def __init__(self, escape: Callable[[int], str], keep: str) -> None:
        super().__init__()
        self.escape = escape
        self.keep = frozenset(map(ord, keep))

    def __missing__(self, code: int) -> str:
        char = chr(code)
        shown = char
        if code not in self.keep and _is_terminal_control(char):
            shown = self.escape(code)
        self[code] = shown
        return shown


_TEXT_ESCAPES = _EscapeTable(_python_escape, keep="\n\t")
_LINE_ESCAPES = _EscapeTable(_python_escape, keep="\t")
# In JSON these characters can only stand inside strings (JSON's own whitespace is
# kept), where an escape decodes to the same text: the output stays exact JSON.
_JSON_ESCAPES = _EscapeTable(_json_escape, keep="\n\t\r ")


def escape_controls(text: str, *, keep_lines: bool = True) -> str:
    """`text` as a terminal can show it: each control character as its escape.

    Backslashes are left alone: this is for reading, and `--json` gives the exact text.

    Args:
        text: text that came from a user or an event.
        keep_lines: keep newlines (the text's own lines, as in a rule); False for a
            value shown within one line (a session id, a directory), so that it
            cannot pass for lines of the output.
    """
    if text.isprintable():  # the common case, at C speed
        return text
    return text.translate(_TEXT_ESCAPES if keep_lines else _LINE_ESCAPES)


def describe_scope(agent: str | None, project: str | None) -> str:
    """Who sees a memory: `agent=... project=...`, or `everywhere`."""
    parts = [f"agent={agent}"] if agent else []
    if project:
        parts.append(f"project={project}")
    return " ".join(parts) or "everywhere"


FORGOTTEN_MARK = " (forgotten)"
# Where a rule comes from (`mented.memory.origin_of`), in `rule show`'s words.
ORIGIN_WORDS: dict[Origin, str] = {
    "yours": "yours (made on this machine)",
    "team": "the project's .mented/ folder",
    "synced": "synced from another machine",
}
# ... and after `rule list`'s line: nothing for yours.
_ORIGIN_MARKS: dict[Origin, str] = {
    "yours": "",
    "team": "  [the project's: .mented/]",
    "synced": "  [synced from another machine]",
}


def format_memory(
    memory: Memory,
    *,
    verbose: bool = False,
    kept: Collection[str] | None = None,
    synced: Collection[str] = (),
) -> str:
    """One memory as a line (or a block with `verbose`), control characters escaped.

    `kept`: the ids of every version of its rule the store still has (its
    history); a link to any other id, a forgotten version, is marked so, and
    the line form names the versions it replaces. None: links shown as they are.
    `synced`: the ids a sync brought from another machine (a reply's `synced`):
    its origin (`origin_of`) is said, the line form marking any but yours.
    """

    def link(memory_id: str, *, handle: bool = False) -> str:
        shown = short_handle(memory_id) if handle else memory_id
        return shown + (FORGOTTEN_MARK if kept is not None and memory_id not in kept else "")

    state = "" if memory.is_live else f"  [superseded by {link(memory.superseded_by or '')}]"
    if kept is not None and (memory.supersedes or memory.merges):
        replaced = [memory.supersedes] if memory.supersedes else []
        replaced += memory.merges
        state += f"  [replaces {' and '.join(link(r, handle=True) for r in replaced)}]"
    actions = ",".join(memory.actions)
    scope = describe_scope(memory.agent, memory.project)
    handle = f"[{short_handle(memory.id)}]"
    content = escape_controls(memory.content)  # a rule's own lines stay lines
    if not verbose:
        origin = _ORIGIN_MARKS[origin_of(memory, synced)]
        kind = actions or ("pinned" if memory.is_pinned else memory.memory_type)
        head = f"{handle}  {memory.id}  {kind}  ({scope}){state}{origin}"
        # Every line of the rule under its header, so that a multi-line rule reads as one.
        body = "\n".join(f"    {line}" for line in content.split("\n"))
        body += "".join(
            f"\n    check: {escape_controls(check, keep_lines=False)}" for check in memory.checks
        )
        return f"{escape_controls(head, keep_lines=False)}\n{body}"
    fields = {
        "id": memory.id,
        "handle": f"{handle} (what the agent is shown; accepted wherever an id is)",
        "type": memory.memory_type,
        "tags": ", ".join(memory.tags) or "-",
        "scope": scope,
        "from": ORIGIN_WORDS[origin_of(memory, synced)],
        "created_at": format_time(memory.created_at),
    }
    if memory.valid_until is not None:
        fields["valid_until"] = format_time(memory.valid_until)
    if memory.supersedes:
        fields["supersedes"] = link(memory.supersedes)
    if memory.merges:
        fields["merges"] = ", ".join(map(link, memory.merges)) + " (it settled a fork)"
    if memory.superseded_by:
        fields["superseded_by"] = link(memory.superseded_by)
        if fields["superseded_by"].endswith(FORGOTTEN_MARK):
            fields["superseded_by"] += ": nothing replaces this version now; it stays retired"
    lines = [
        f"{name + ':':<15}{escape_controls(value, keep_lines=False)}"
        for name, value in fields.items()
    ]
    lines.insert(1, f"{'content:':<15}{content}")
    lines[2:2] = [
        f"{'check:':<15}{escape_controls(check, keep_lines=False)}" for check in memory.checks
    ]
    return "\n".join(lines)


def untrusted_note(untrusted: UntrustedProject) -> str:
    """A line saying a project's committed rules are not used here, and the command to fix it."""
    root = escape_controls(untrusted.root, keep_lines=False)
    trust = f"`mentectl trust {shlex.quote(untrusted.root)}`"
    if untrusted.problem:
        problem = escape_controls(untrusted.problem, keep_lines=False)
        return (
            f"note: the project rules in {root}/.mented/ are not used ({problem}): "
            f"fix the file, then run {escape_controls(trust, keep_lines=False)}"
        )
    count = (
        f"1 project rule in {root}/.mented/ is"
        if untrusted.rules == 1
        else (f"{untrusted.rules} project rules in {root}/.mented/ are")
    )
    return (
        f"note: {count} not trusted, so not used (not listed here, never handed to an "
        f"agent): read {'it' if untrusted.rules == 1 else 'them'}, then run "
        f"{escape_controls(trust, keep_lines=False)}"
    )


def format_time(timestamp: float) -> str:
    import datetime as dt  # noqa: PLC0415 - only for human output

    return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
