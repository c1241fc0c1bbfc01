"""`mentectl` verbs, one module per group. Each module has `register(subparsers, common)`."""

from mented_client.commands import (
    bench,
    doctor,
    explain,
    hooks,
    log,
    mcp,
    rules,
    service,
    status,
    team,
    travel,
)

COMMAND_MODULES = (status, rules, explain, hooks, log, service, doctor, mcp, bench, travel, team)
