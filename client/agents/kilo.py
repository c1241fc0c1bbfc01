"""Kilo Code CLI: mented's plugin file, `plugin/mented.js` in its config folder (`PluginFile`)."""

from __future__ import annotations

from mented.agents.kilo import AGENT
from mented_client.agents.plugin_file import PluginFile

CLIENT = PluginFile(AGENT)
