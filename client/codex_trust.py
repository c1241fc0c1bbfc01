"""Codex's trust entries for mented's hooks, taken out of its config.toml at uninstall.

When the user trusts a hook in Codex's `/hooks` view, Codex records it in
`$CODEX_HOME/config.toml` as a table per entry, keyed by the hooks.json file and
the entry's position (`mented.agents.codex`)::

    [hooks.state."/home/me/.codex/hooks.json:pre_tool_use:1:0"]
    trusted_hash = "sha256:..."

Uninstalling mented's hook leaves those tables behind, naming entries that are
gone. `forget_trust` removes the tables of the positions mented's entries held
(found before the hook is removed) and nothing else: the file is edited line by
line, like the MCP server's table (`mented_client.agents.codex`), and the edit is
refused unless the file, parsed again, differs only by those keys. Entries of
other hooks are left as they are, even when removing mented's group moved them
to another position (Codex keys trust by position: it then asks to trust them
again).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from mented.agents import AGENTS
from mented.agents.codex import config_toml_path, entry_state_keys, user_hooks_path
from mented_client.agents.codex import parse_config, table_span
from mented_client.errors import CommandError
from mented_client.files import display_path, remove_file, write_atomically
from mented_client.hook_settings import SettingsError, find_entries, read_settings

# A `[hooks.state."KEY"]` header, the key a basic or a literal string.
_STATE_HEADER = re.compile(
    r"""^[ \t]*\[[ \t]*hooks[ \t]*\.[ \t]*state[ \t]*\.[ \t]*"""
    r"""("(?:[^"\\\n]|\\.)*"|'[^'\n]*')[ \t]*\][ \t]*(?:#.*)?$""",
    re.MULTILINE,
)


def mented_state_keys(hooks_json: Path | None = None) -> set[str]:
    """The `hooks.state` keys of mented's entries in a Codex hooks.json (the user's by
    default), as it is now (call it before the hook is removed: the positions are gone
    after)."""
    hooks_json = hooks_json or user_hooks_path()
    try:
        text = read_settings(hooks_json)
        entries = find_entries(text, hooks_json, None, AGENTS["codex"].layout) if text else []
    except SettingsError:
        return set()  # the hook's own uninstall says what is wrong with the file
    return {
        key
        for entry in entries
        for key in entry_state_keys(hooks_json, entry.event, entry.group, entry.hook)
    }


def without_trust(text: str, keys: set[str], path: Path | str) -> tuple[str, int]:
    """`text` without the `hooks.state` tables of `keys`, and how many went.

    Raises:
        CommandError: the file is not TOML, or one of those entries is not written as
            a table of its own (an inline table, dotted keys), or the edit would change
            anything else: the file is left as it is.
    """
    doc = parse_config(text, path)
    ours = {key for key in _states(doc) if key.strip() in keys}
    if not ours:
        return text, 0
    spans = []
    for header in _STATE_HEADER.finditer(text):
        key = _key_of(header.group(1))
        if key is not None and key in ours:
            start, end = table_span(text, header)
            if text[:start].endswith("\n\n"):
                start -= 1  # the blank line that set it apart goes with it
            spans.append((start, end))
    new = text
    for start, end in sorted(spans, reverse=True):
        new = new[:start] + new[end:]
    expected = _pruned(doc, ours)
    if len(spans) != len(ours) or _pruned(parse_config(new, path), set()) != expected:
        named = ", ".join(sorted(ours))
        raise CommandError(
            f"cannot take Codex's trust for mented's hooks ({named}) out of {path} line by "
            "line; remove those [hooks.state] entries by hand"
        )
    return new, len(ours)


def forget_trust(keys: set[str]) -> list[str]:
    """Remove Codex's trust entries of `keys` from its config.toml; what was done.

    Raises:
        CommandError: the file cannot be read, edited safely or written (left as it was).
    """
    if not keys:
        return []
    path = config_toml_path()
    try:
        text = read_settings(path)
    except SettingsError as exc:
        raise CommandError(str(exc)) from exc
    if not text:
        return []
    new, removed = without_trust(text, keys, path)
    if not removed:
        return []
    entries = "entry" if removed == 1 else "entries"
    where = display_path(path)
    try:
        if new.strip() or path.is_symlink():
            write_atomically(path, new)
            return [f"Removed Codex's trust {entries} for mented's hooks from {where}."]
        directories = remove_file(path, up_to=AGENTS["codex"].config_dir())
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc}") from exc
    lines = [f"Removed {where}: it held only Codex's trust {entries} for mented's hooks."]
    lines.extend(
        f"  {display_path(directory)} was left empty: removed too" for directory in directories
    )
    return lines


def _states(doc: dict[str, Any]) -> dict[str, Any]:
    hooks = doc.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    return state if isinstance(state, dict) else {}


def _key_of(quoted: str) -> str | None:
    """The key a header names, as TOML reads the quoted string."""
    try:
        value = tomllib.loads(f"k = {quoted}")["k"]
    except tomllib.TOMLDecodeError:
        return None
    return value if isinstance(value, str) else None


def _pruned(doc: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    """`doc` without `keys` under `hooks.state`, and without a `hooks.state` or `hooks`
    left empty (removing the last `[hooks.state."..."]` table removes them too)."""
    copy = dict(doc)
    hooks = copy.get("hooks")
    if not isinstance(hooks, dict):
        return copy
    hooks = dict(hooks)
    state = hooks.get("state")
    if isinstance(state, dict):
        state = {key: value for key, value in state.items() if key not in keys}
        if state:
            hooks["state"] = state
        else:
            del hooks["state"]
    if hooks:
        copy["hooks"] = hooks
    else:
        del copy["hooks"]
    return copy
