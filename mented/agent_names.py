"""The names of the agents the hook serves, without their adapters.

`mentectl` checks `--agent` and lists the names in its help on every rule verb;
importing `mented.agents` for that would load every adapter (their event and
settings code, a third of `mentectl rule list`'s start-up). `AGENTS` in
`mented.agents` is the registry; a test keeps this tuple in step with it.
"""

from __future__ import annotations

AGENT_NAMES = (
    "claude-code",
    "codex",
    "gemini-cli",
    "copilot-cli",
    "cursor",
    "qwen-code",
    # Built from their sources and documents (mented/agents/__init__.py).
    "crush",
    "factory-droid",
    "augment-auggie",
    "cline-cli",
    "kiro-cli",
    # mented's own plugin or extension, in the agent's process.
    "opencode",
    "pi",
    "kilo",
)
