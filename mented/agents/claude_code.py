"""Claude Code: a `PreToolUse` command hook with matcher `Bash`.

Settings: `~/.claude/settings.json` (user) or `<project>/.claude/settings.json`.
Claude Code cuts context strings over 10,000 characters, and delivers a
PreToolUse `additionalContext` alongside the tool result, i.e. after the
command ran; only a deny reaches the model before it runs (gate mode).
"""

from __future__ import annotations

from mented.agents.pretooluse import PreToolUseAgent

AGENT = PreToolUseAgent(
    name="claude-code",
    title="Claude Code",
    settings_file=".claude/settings.json",
    project_settings_file=".claude/settings.json",
)
