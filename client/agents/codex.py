"""Codex CLI: mented's hook entries in `hooks.json` (`SettingsHooks`), Codex's trust in
them, and mented's MCP server in its config.toml.

Codex runs a hook only once the user has trusted it in its `/hooks` view, and keeps
that trust in its config.toml by the entry's place in hooks.json
(`mented_client.codex_trust`): an uninstall takes those records out with the
entries, and `setup` names trusting them as the step left to the user.

Its MCP servers are tables of the same config.toml (`$CODEX_HOME/config.toml`):
`mcp install codex` adds or replaces the `[mcp_servers.mented]` table's lines and
nothing else, every other byte stays; the edit is refused unless the file, parsed
again, differs only by that table.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

from mented.agents import Agent
from mented.agents.codex import AGENT, TRUST_FIX
from mented_client.agents.settings_hooks import SettingsHooks
from mented_client.commands.mcp import (
    SERVER_NAME,
    Registration,
    Writer,
    check_command,
    entry_command,
    gone_lines,
    registered_note,
)
from mented_client.commands.output import CommandError
from mented_client.files import remove_file, write_atomically


class CodexHooks(SettingsHooks):
    """Codex's hook entries, the trust Codex keeps in them, and its MCP table."""

    trust_records = "Codex's trust entries"

    def trust_keys(self, places: list[Path]) -> set[str]:
        from mented_client import codex_trust  # noqa: PLC0415 - it imports this module

        return {key for path in places for key in codex_trust.mented_state_keys(path)}

    def user_trust_keys(self) -> set[str]:
        """The user's hooks.json as Codex names it in its keys (`$CODEX_HOME` resolved)."""
        from mented_client import codex_trust  # noqa: PLC0415 - it imports this module

        return codex_trust.mented_state_keys()

    def forget_trust(self, keys: set[str]) -> list[str]:
        from mented_client import codex_trust  # noqa: PLC0415 - it imports this module

        return codex_trust.forget_trust(keys)

    def trust_step(self) -> str | None:
        return TRUST_FIX

    def mcp_writer(self) -> Writer:
        return CODEX_TOML


# ------------------------------------------------------------- the MCP table


_OUR_HEADER = re.compile(
    r"^[ \t]*\[[ \t]*mcp_servers[ \t]*\.[ \t]*"
    r"""(?:mented|"mented"|'mented')[ \t]*\][ \t]*(?:#.*)?$""",
    re.MULTILINE,
)
_ANY_HEADER = re.compile(r"^[ \t]*\[", re.MULTILINE)
_BLANK_OR_COMMENT = re.compile(r"[ \t]*(?:#.*)?")


def toml_string(value: str) -> str:
    """`value` as a TOML basic string."""
    out = ['"']
    for ch in value:
        if ch in {'"', "\\"}:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def codex_table(command: list[str]) -> str:
    """Our `[mcp_servers.mented]` table, as written into config.toml."""
    args = ", ".join(toml_string(arg) for arg in command[1:])
    return f"[mcp_servers.{SERVER_NAME}]\ncommand = {toml_string(command[0])}\nargs = [{args}]\n"


def parse_config(text: str, path: Path | str) -> dict[str, Any]:
    """Codex's config.toml as a table, or the error that says to fix it first."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CommandError(
            f"{path} is not valid TOML ({exc}); fix it first, then run this again"
        ) from exc


def _our_entry(doc: dict[str, Any]) -> dict[str, Any] | None:
    servers = doc.get("mcp_servers")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    return entry if isinstance(entry, dict) else None


def _table_span(text: str) -> tuple[int, int] | None:
    """Where our table's lines are: its header to its last key line (trailing comments stay)."""
    headers = list(_OUR_HEADER.finditer(text))
    if not headers:
        return None
    if len(headers) > 1:
        raise CommandError(
            f"[mcp_servers.{SERVER_NAME}] appears {len(headers)} times; keep one and run this again"
        )
    return table_span(text, headers[0])


def table_span(text: str, header: re.Match[str]) -> tuple[int, int]:
    """Where the TOML table whose `header` line matched is: from the header to its
    last key line (blank lines and comments before the next table stay with it)."""
    start = header.start()
    body = text.index("\n", header.end()) + 1 if "\n" in text[header.end() :] else len(text)
    following = _ANY_HEADER.search(text, body)
    end = following.start() if following else len(text)
    # Blank lines and comments just above the next table belong to that table.
    lines = text[body:end].splitlines(keepends=True)
    while lines and _BLANK_OR_COMMENT.fullmatch(lines[-1].rstrip("\r\n")):
        end -= len(lines.pop())
    return start, end


def _other_settings(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` without our table (for comparing everything else)."""
    copy = dict(doc)
    servers = copy.get("mcp_servers")
    if isinstance(servers, dict):
        copy["mcp_servers"] = {k: v for k, v in servers.items() if k != SERVER_NAME}
        if not copy["mcp_servers"] and SERVER_NAME in servers:
            del copy["mcp_servers"]
    return copy


def with_codex_server(text: str, command: list[str], path: Path | str = "config.toml") -> str:
    """`text` with our table added or replaced; every other byte unchanged.

    Raises:
        CommandError: the file is not TOML, or our entry is written in a form
            (inline table, dotted keys) that cannot be replaced line by line.
    """
    doc = parse_config(text, path)
    entry = _our_entry(doc)
    if entry is not None and entry_command(entry) == command:
        return text
    table = codex_table(command)
    span = _table_span(text)
    if span is not None:
        start, end = span
        tail = text[end:]
        new = text[:start] + table + ("\n" if tail and not tail.startswith("\n") else "") + tail
    elif entry is not None:
        raise CommandError(
            f"{path} defines mcp_servers.{SERVER_NAME} without a [mcp_servers.{SERVER_NAME}] "
            "header (inline table or dotted keys); remove that entry and run this again"
        )
    else:
        separator = "" if not text.strip() else ("\n" if text.endswith("\n") else "\n\n")
        new = text + separator + table
    _check_edit(doc, new, command, path)
    return new


def without_codex_server(text: str, path: Path | str = "config.toml") -> str:
    """`text` without our table (and the blank line set before it when it was appended)."""
    doc = parse_config(text, path)
    if _our_entry(doc) is None:
        return text
    span = _table_span(text)
    if span is None:
        raise CommandError(
            f"{path} defines mcp_servers.{SERVER_NAME} without a [mcp_servers.{SERVER_NAME}] "
            "header (inline table or dotted keys); remove it by hand"
        )
    start, end = span
    if not text[end:].strip() and text[:start].endswith("\n\n"):
        start -= 1  # the blank line `with_codex_server` put before an appended table
    new = text[:start] + text[end:]
    if _other_settings(doc) != _other_settings(parse_config(new, path)):
        raise CommandError(
            f"removing [mcp_servers.{SERVER_NAME}] from {path} would change other settings; "
            "remove it by hand"
        )
    return new


def _check_edit(old: dict[str, Any], new_text: str, command: list[str], path: Path | str) -> None:
    """The edit changed our entry's command and nothing else, or it is refused."""
    try:
        new = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise CommandError(
            f"adding [mcp_servers.{SERVER_NAME}] to {path} would make it invalid ({exc}), "
            "e.g. because mcp_servers is an inline table; add the table by hand:\n"
            + codex_table(command)
        ) from exc
    entry = _our_entry(new)
    if (
        entry is None
        or entry_command(entry) != command
        or _other_settings(old) != _other_settings(new)
    ):
        raise CommandError(
            f"cannot edit {path} safely line by line; add or replace this table by hand:\n"
            + codex_table(command)
        )


def _write_codex(path: Path, text: str) -> None:
    try:
        # A new config.toml is private: Codex keeps MCP servers' environment (tokens) in it.
        write_atomically(path, text, mode=0o600)
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc}") from exc


def _read_codex(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from exc


def codex_registration(agent: Agent) -> Registration:
    path = agent.mcp_config_path()
    try:
        doc = parse_config(_read_codex(path), path)
    except CommandError as exc:
        return Registration(agent.name, registered=False, where=str(path), problem=str(exc))
    entry = _our_entry(doc)
    if entry is None:
        return Registration(agent.name, registered=False, where=str(path))
    command = entry_command(entry)
    problem = check_command(command)
    if entry.get("enabled") is False:
        problem = "it is switched off (enabled = false)"
    return Registration(
        agent.name, registered=True, where=str(path), command=command, problem=problem
    )


def _install_codex(agent: Agent, command: list[str]) -> str:
    path = agent.mcp_config_path()
    text = _read_codex(path)
    new = with_codex_server(text, command, path)
    if new == text:
        return f"the MCP server is already registered with {agent.title} ({path})"
    _write_codex(path, new)
    return f"registered the MCP server with {agent.title} in {path}: {shlex.join(command)}\n" + (
        registered_note(agent)
    )


def _uninstall_codex(agent: Agent) -> str:
    path = agent.mcp_config_path()
    text = _read_codex(path)
    new = without_codex_server(text, path)
    if new == text:
        return f"the MCP server is not registered in {path}: nothing to do"
    if new.strip() or path.is_symlink():
        _write_codex(path, new)
        return f"removed [mcp_servers.{SERVER_NAME}] from {path}"
    # The table was all the file held (the install created it): no empty file is left.
    try:
        directories = remove_file(path, up_to=agent.config_dir())
    except OSError as exc:
        raise CommandError(f"cannot remove {path}: {exc}") from exc
    return f"removed {path}: it held only [mcp_servers.{SERVER_NAME}]" + gone_lines(directories)


CODEX_TOML = Writer(codex_registration, _install_codex, _uninstall_codex)
CLIENT = CodexHooks(AGENT)
