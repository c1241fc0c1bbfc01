"""Qwen Code: mented's hook entries in its settings file `settings.json` (`SettingsHooks`)."""

from __future__ import annotations

from mented.agents.qwen_code import AGENT
from mented_client.agents.settings_hooks import SettingsHooks

CLIENT = SettingsHooks(AGENT)
