"""Kiro CLI: mented's hook entries in its settings file `agents/mented.json` (`SettingsHooks`)."""

from __future__ import annotations

from mented.agents.kiro_cli import AGENT
from mented_client.agents.settings_hooks import SettingsHooks

CLIENT = SettingsHooks(AGENT)
