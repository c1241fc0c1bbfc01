"""Cline CLI: mented's hook is an executable file of its own, `Hooks/PreToolUse` (`HookFile`)."""

from __future__ import annotations

from mented.agents.cline_cli import AGENT
from mented_client.agents.hook_file import HookFile

CLIENT = HookFile(AGENT)
