"""Agent tools as actions: which action an MCP tool call performs, by its name.

An action may name `tools`: `SERVER/TOOL` patterns of the MCP tools that
perform it (`pr-create`: `*/create_pull_request`, the GitHub MCP server's tool
whatever the user named the server). Each agent spells an MCP tool its own way
(Claude Code `mcp__github__create_pull_request`); its adapter in
`mented.agents` turns that into `github/create_pull_request`, so one table
serves every agent. Patterns are shell-style globs (`fnmatch`), case-sensitive.
"""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mented.actions import ActionTable


class ToolMatcher:
    """Names the actions an MCP tool call performs, from the table's `tools`."""

    def __init__(self, table: ActionTable) -> None:
        self._globs = [(action.name, action.tools) for action in table.actions() if action.tools]
        self._patterns = [
            (name, re.compile("|".join(fnmatch.translate(glob) for glob in globs)))
            for name, globs in self._globs
        ]

    def __bool__(self) -> bool:
        """Whether any action is performed by an MCP tool."""
        return bool(self._patterns)

    def actions_for(self, tool: str) -> tuple[str, ...]:
        """The actions calling `tool` (`server/tool`) performs, in table order."""
        return tuple(name for name, pattern in self._patterns if pattern.fullmatch(tool))

    def explain(self, tool: str) -> list[tuple[str, str]]:
        """Each (action, glob) whose glob takes `tool` (`server/tool`), in table order."""
        return [
            (name, glob)
            for name, globs in self._globs
            for glob in globs
            if fnmatch.fnmatchcase(tool, glob)
        ]
