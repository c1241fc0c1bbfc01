"""Factory Droid: mented's hook entries in its settings file `hooks.json` (`SettingsHooks`)."""

from __future__ import annotations

from mented.agents.factory_droid import AGENT
from mented_client.agents.settings_hooks import SettingsHooks

CLIENT = SettingsHooks(AGENT)
