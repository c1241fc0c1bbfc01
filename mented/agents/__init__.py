"""Agent adapters: one module per agent, each knowing three things about it.

- how to decode its hook event into the shell command it is about to run,
- how to render the exact bytes it expects on the hook's stdout,
- where its hook settings live and what our entry in them looks like.

Claude Code and Codex CLI share one `PreToolUse` shape (`pretooluse.py`); each
module only names its differences. Copilot CLI speaks it too (under its
PascalCase event names) and Gemini CLI with its own event names and answers;
Cursor has a shape of its own; Qwen Code is the shared shape with its own shell
tool. `AGENTS` maps the names used on the shim's command line (and in rule
scopes) to the adapters; `DEFAULT_AGENT` is the one assumed where none is named.
"""

from __future__ import annotations

from mented.agents import claude_code, codex, copilot_cli, cursor, gemini_cli, qwen_code
from mented.agents.pretooluse import ContextEmptied, PreToolUseAgent, SessionStarted, ToolCall

Agent = PreToolUseAgent

AGENTS: dict[str, Agent] = {
    agent.name: agent
    for agent in (
        claude_code.AGENT,
        codex.AGENT,
        gemini_cli.AGENT,
        copilot_cli.AGENT,
        cursor.AGENT,
        qwen_code.AGENT,
    )
}

# The agent a command serves when none is named (`mentectl explain`, `mentectl mcp`).
DEFAULT_AGENT = claude_code.AGENT.name

__all__ = ["AGENTS", "DEFAULT_AGENT", "Agent", "ContextEmptied", "SessionStarted", "ToolCall"]
