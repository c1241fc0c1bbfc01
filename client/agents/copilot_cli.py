"""GitHub Copilot CLI: mented's hook entries in `hooks/mented.json` (`SettingsHooks`)."""

from __future__ import annotations

from mented.agents.copilot_cli import AGENT
from mented_client.agents.settings_hooks import SettingsHooks

CLIENT = SettingsHooks(AGENT)
