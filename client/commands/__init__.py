"""`mentectl` verbs, one module per group. Each module has `register(subparsers, common)`."""

from mented_client.commands import (
    bench,
    doctor,
    explain,
    facts,
    hooks,
    log,
    mcp,
    rules,
    service,
    status,
    team,
    travel,
    uninstall,
    watch,
)

COMMAND_MODULES = (
    status,
    rules,
    facts,
    explain,
    hooks,
    log,
    service,
    doctor,
    mcp,
    bench,
    travel,
    team,
    uninstall,
    watch,
)
