"""pi: mented's extension, `extensions/mented.ts`, in pi's own process (`InProcessPlugin`)."""

from __future__ import annotations

from mented.agents.pi import AGENT
from mented_client.agents.extension_file import InProcessPlugin

CLIENT = InProcessPlugin(AGENT)
