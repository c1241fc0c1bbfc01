"""`mentectl` verbs, one module per group. Each module has `register(subparsers, common)`."""

from mented_client.commands import explain, hooks, mcp, rules, service, status

COMMAND_MODULES = (status, rules, explain, hooks, service, mcp)
