"""opencode: mented's plugin file, `plugins/mented.js` in its config folder (`PluginFile`)."""

from __future__ import annotations

from mented.agents.opencode import AGENT
from mented_client.agents.plugin_file import PluginFile

CLIENT = PluginFile(AGENT)
