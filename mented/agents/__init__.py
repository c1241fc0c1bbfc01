"""Agent adapters: one module per agent, each knowing three things about it.

- how to decode its hook event into the shell command it is about to run,
- how to render the exact bytes it expects on the hook's stdout,
- where its hook settings live and what our entry in them looks like.

Claude Code and Codex CLI share one `PreToolUse` shape (`pretooluse.py`); each
module only names its differences. Copilot CLI speaks it too (under its
PascalCase event names) and Gemini CLI with its own event names and answers;
Cursor has a shape of its own; Qwen Code is the shared shape with its own shell
tool. Crush, Factory Droid and Augment Auggie read Claude Code's answers with
their own tools and files; Cline CLI runs a hook file and takes context only;
Kiro CLI's events have no session (its process is taken as one) and it takes a
stop alone, by exit status;
opencode loads mented's own plugin (`opencode.py`), Kilo Code CLI the same plugin
(`kilo.py`) and pi an extension of mented's (`pi.py`), each in the agent's own
process: their events and answers share one shape (`in_process.py`). `AGENTS` maps the names
used on the shim's command line (and in rule scopes) to the adapters; `DEFAULT_AGENT`
is the one assumed where none is named.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from mented.agents.pretooluse import ContextEmptied, PreToolUseAgent, SessionStarted, ToolCall

Agent = PreToolUseAgent

# Each agent's adapter module, in the order `mentectl` lists them.
_MODULES = {
    "claude-code": "claude_code",
    "codex": "codex",
    "gemini-cli": "gemini_cli",
    "copilot-cli": "copilot_cli",
    "cursor": "cursor",
    "qwen-code": "qwen_code",
    # Built from their sources and documents (hooks/README.md says which).
    "crush": "crush",
    "factory-droid": "factory_droid",
    "augment-auggie": "augment_auggie",
    "cline-cli": "cline_cli",
    "kiro-cli": "kiro_cli",
    # mented's own plugin or extension, in the agent's process.
    "opencode": "opencode",
    "pi": "pi",
    "kilo": "kilo",
}


class _Adapters(Mapping[str, Agent]):
    """The adapters by name, each module imported when first asked for: the daemon's
    first hook after a start waits for the one agent it serves, not for all six
    (their event and settings code, about a tenth of the daemon's imports)."""

    def __init__(self) -> None:
        self._loaded: dict[str, Agent] = {}

    def __getitem__(self, name: str) -> Agent:
        agent = self._loaded.get(name)
        if agent is None:
            module = importlib.import_module(f"mented.agents.{_MODULES[name]}")
            agent = module.AGENT
            assert agent.name == name, f"{module.__name__} serves {agent.name}, not {name}"
            self._loaded[name] = agent
        return agent

    def __iter__(self) -> Iterator[str]:
        return iter(_MODULES)

    def __len__(self) -> int:
        return len(_MODULES)

    def __contains__(self, name: object) -> bool:
        return name in _MODULES


AGENTS: Mapping[str, Agent] = _Adapters()


def module_of(name: str) -> str:
    """The name of the agent `name`'s adapter module (`mented.agents.<it>`); the client's
    module for the agent (`mented_client.agents.<it>`) has the same.

    Raises:
        KeyError: mented serves no agent of that name.
    """
    return _MODULES[name]


# The agent a command serves when none is named (`mentectl explain`, `mentectl mcp`).
DEFAULT_AGENT = "claude-code"

__all__ = [
    "AGENTS",
    "DEFAULT_AGENT",
    "Agent",
    "ContextEmptied",
    "SessionStarted",
    "ToolCall",
    "module_of",
]
