"""The calling side of mented, installed as `mented_client`.

- `shim.py`      the hook shim the agent spawns per shell command. Standard
                 library only (and as little of it as possible): it knows the
                 socket and nothing else. It is run by path, never imported.
- `connection.py` a small synchronous client for the daemon's socket, for
                 `mentectl`, editors and scripts.
- `cli.py`       `mentectl`: parses arguments and hands off to `commands/`,
                 one module per group of verbs.
- `bench.py`     `mentectl bench`: runs daemons of its own and measures them.

Imports point inward: `commands/` use `connection` and `mented.protocol`;
nothing here imports the daemon's server or store, except `bench.py`, which
fills its stores directly and times the matcher alone, and is imported only
when `mentectl bench` runs.
"""
