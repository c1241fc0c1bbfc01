"""`mentectl` verbs, one module per group. Each module has `register(subparsers, common)`."""

from mented_client.commands import bench, doctor, explain, hooks, mcp, rules, service, status

COMMAND_MODULES = (status, rules, explain, hooks, service, doctor, mcp, bench)
