"""The client's side of each agent: how `mentectl` installs, removes and checks its hook.

`client_of(name)` is the agent's `ClientAgent` (`base.py`), one module per agent
(`mented_client.agents.<agent>`, named as its adapter in `mented.agents`), each
choosing its kind of install: entries in a settings file (`settings_hooks.py`), a
hook file of its own (`hook_file.py`), or a file run in the agent's own process
(`plugin_file.py`, `extension_file.py`; what they share: `in_process.py`). The
commands ask it and never branch on an agent's name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from mented.agents import AGENTS, module_of

if TYPE_CHECKING:
    from mented_client.agents.base import ClientAgent


def client_of(name: str) -> ClientAgent:
    """The client side of the agent `name` (a name in `mented.agents.AGENTS`).

    Raises:
        KeyError: mented serves no agent of that name.
    """
    module = importlib.import_module(f"mented_client.agents.{module_of(name)}")
    client: ClientAgent = module.CLIENT
    assert client.agent is AGENTS[name], f"{module.__name__} serves {client.name}, not {name}"
    return client


__all__ = ["client_of"]
