"""Crush: mented's hook entries in its settings file `crush.json` (`SettingsHooks`)."""

from __future__ import annotations

from mented.agents.crush import AGENT
from mented_client.agents.settings_hooks import SettingsHooks

CLIENT = SettingsHooks(AGENT)
