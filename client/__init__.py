"""The calling side of mented, installed as `mented_client`.

- `shim.py`      the hook shim the agent spawns per shell command. Standard
                 library only (and as little of it as possible): it knows the
                 socket and nothing else. It is run by path, never imported.
- `connection.py` a small synchronous client for the daemon's socket, for
                 `mentectl`, editors and scripts.
- `cli.py`       `mentectl`: parses arguments and hands off to `commands/`,
                 one module per group of verbs.

Imports point inward: `commands/` use `connection` and `mented.protocol`;
nothing here imports the daemon's server or store.
"""
