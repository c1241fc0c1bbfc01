"""`mentectl` verbs, one module per group. Each module has `register(subparsers, common)`.

`VERBS` names the module of every verb, so that `mentectl VERB` imports that
module alone: importing every group (the store's types, the action table, the
agents, the MCP and sync code) would cost a `mentectl status` several times
what the command itself does. `mentectl --help` imports them all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import argparse

# Module names in the order `mentectl --help` lists their verbs.
COMMAND_MODULES = (
    "status",
    "rules",
    "facts",
    "explain",
    "hooks",
    "log",
    "service",
    "doctor",
    "mcp",
    "bench",
    "travel",
    "team",
    "uninstall",
    "watch",
    "report",
    "reference",
    "adopt",
    "ui",
)

# Each verb, and the module that registers it (a test keeps this in step with `register`).
VERBS = {
    "status": "status",
    "rule": "rules",
    "remember": "facts",
    "recall": "facts",
    "reindex": "facts",
    "explain": "explain",
    "actions": "explain",
    "hooks": "hooks",
    "log": "log",
    "start": "service",
    "stop": "service",
    "restart": "service",
    "reload": "service",
    "service": "service",
    "doctor": "doctor",
    "setup": "doctor",
    "mcp": "mcp",
    "bench": "bench",
    "export": "travel",
    "import": "travel",
    "sync": "travel",
    "trust": "team",
    "uninstall": "uninstall",
    "watch": "watch",
    "report": "report",
    "completion": "reference",
    "man": "reference",
    "adopt": "adopt",
    "ui": "ui",
}


class CommandModule(Protocol):
    """What every module of this package offers the command line."""

    def register(
        self,
        subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
        common: argparse.ArgumentParser,
    ) -> None: ...


def command_module(name: str) -> CommandModule:
    """The module `name` of this package, imported now."""
    module: CommandModule = importlib.import_module(f"{__name__}.{name}")
    return module
