"""Gemini CLI: mented's hook entries in its settings file `settings.json` (`SettingsHooks`)."""

from __future__ import annotations

from mented.agents.gemini_cli import AGENT
from mented_client.agents.settings_hooks import SettingsHooks

CLIENT = SettingsHooks(AGENT)
