"""Codex CLI: a `PreToolUse` command hook in `hooks.json`, same shape as Claude Code.

Settings: `~/.codex/hooks.json` (user; `$CODEX_HOME/hooks.json` when that is set)
or `<project>/.codex/hooks.json` (loaded only when the project is trusted). Codex
runs a non-managed hook only after the user has reviewed and trusted it in its
`/hooks` view, and asks again whenever the hook's definition changes.
"""

from __future__ import annotations

from mented.agents.pretooluse import PreToolUseAgent

AGENT = PreToolUseAgent(
    name="codex",
    title="Codex CLI",
    config_dir_env="CODEX_HOME",
    config_dir_name=".codex",
    settings_name="hooks.json",
    project_settings_file=".codex/hooks.json",
    install_note=(
        "Codex runs a hook it does not manage only after you trust it: open `/hooks` "
        "in Codex, review the mented entry and trust it (again after any change)."
    ),
)
