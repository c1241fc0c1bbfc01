"""mented's MCP server in an agent's JSON settings: the member `mcpServers.mented`.

The agents whose MCP config is JSON (Gemini CLI, Copilot CLI, Cursor, Qwen Code)
get mented's MCP server as the hooks are: the member spliced in and out
(`with_mcp_server`, `without_mcp_server`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mented_client.hook_settings.json_text import (
    SettingsError,
    _insert_child,
    _Node,
    _remove_child,
    _render,
    _root,
    _set_member,
)

# Where the agents with a JSON MCP config (`McpSettings.how` "json") list their servers,
# and the name mented's server has there (and in every agent's configuration).
MCP_SERVERS = "mcpServers"


MCP_SERVER_NAME = "mented"


def _servers(text: str, path: Path) -> tuple[_Node, _Node | None]:
    """The root object and its `mcpServers` object (None when there is none)."""
    root = _root(text, path)
    servers = root.member(MCP_SERVERS)
    if servers is not None and servers.kind != "object":
        raise SettingsError(f"{path}: `{MCP_SERVERS}` is not a JSON object; fix it by hand first")
    return root, servers


def mcp_server(text: str, path: Path, name: str) -> dict[str, Any] | None:
    """The entry `mcpServers.<name>` in the settings `text`; None when there is none.

    Raises:
        SettingsError: the text is not a JSON object, or the entry is not an object.
    """
    _, servers = _servers(text, path)
    if servers is None or servers.member(name) is None:
        return None
    entry = json.loads(text)[MCP_SERVERS][name]
    if not isinstance(entry, dict):
        raise SettingsError(
            f"{path}: `{MCP_SERVERS}.{name}` is not a JSON object; fix or remove it by hand first"
        )
    return entry


def with_mcp_server(text: str, path: Path, name: str, entry: dict[str, Any]) -> str:
    """`text` with `entry`'s members written into `mcpServers.<name>` (unchanged when they are).

    Members of an existing entry that `entry` does not name (the user's `env`,
    `timeout`, `trust`) stay; every other byte of the file too.

    Raises:
        SettingsError: the text is not a JSON object, or `mcpServers` or our entry
            is not an object.
    """
    if not text.strip():
        text = "{}\n"
    current = mcp_server(text, path, name)
    root, servers = _servers(text, path)
    if servers is None:
        return _insert_child(
            text,
            root,
            lambda indent, unit: (
                json.dumps(MCP_SERVERS) + ": " + _render({name: entry}, indent, unit)
            ),
        )
    if current is None:
        return _insert_child(
            text,
            servers,
            lambda indent, unit: json.dumps(name) + ": " + _render(entry, indent, unit),
        )
    for key, value in entry.items():
        if key in current and current[key] == value:
            continue
        _, servers = _servers(text, path)
        assert servers is not None
        node = servers.member(name)
        assert node is not None
        text = _set_member(text, node, key, value)
    return text


def without_mcp_server(text: str, path: Path, name: str) -> str:
    """`text` without `mcpServers.<name>`, and without `mcpServers` when that was all it held.

    Raises:
        SettingsError: the text is not a JSON object, or `mcpServers` is not an object.
    """
    if not text.strip():
        return text
    root, servers = _servers(text, path)
    if servers is None:
        return text
    names = [key for key, _, _ in servers.members]
    if name not in names:
        return text
    for index in reversed([i for i, key in enumerate(names) if key == name]):
        text = _remove_child(text, _servers(text, path)[1] or servers, index)
    root, servers = _servers(text, path)
    if servers is not None and not servers.members:
        text = _remove_child(text, root, [k for k, _, _ in root.members].index(MCP_SERVERS))
    return text
