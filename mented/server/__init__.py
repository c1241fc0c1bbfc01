"""The trio server: accept connections, read frames, dispatch requests, reply.

`Server.open()` does the synchronous start-up (lock the data directory, read the
config, open the store, bind or adopt the socket) and reports any problem as a
`StartupError` with a message for the user. `Server.serve()` runs until a
signal or a `shutdown` request, then stops accepting, lets requests in flight
finish (up to a grace period), and `Server.close()` releases everything.

A `subscribe` request turns its connection into a stream of events (hook fires,
rule changes, config reloads); `mented.events` queues them, bounded, and drops a
subscriber that falls behind rather than ever making a hook wait.

Reads (lookups, hook requests) run on the trio thread: they take microseconds.
Writes run in a worker thread because a durable commit waits for fsync. Long
store scans (`list`, `history`, a recall of many rules) run in a worker thread
too, one at a time, so that hooks keep their latency while one runs.

What a client can make the daemon hold is bounded by bytes, daemon-wide
(`ServerOptions.held_limit_bytes`, see `_HeldBytes`): a request from its first
partial read until its answer is sent, and an answer the client has not read,
for at most `send_timeout_s`. Past the bound a request is answered `busy`.

Layout: `Server` is one class built of layers, each in a module of its own and each
using only those below it (the order of this list, from the top). A request family
answers in its own module, so that a new request is a method there and a line in the
table (`dispatch.py`):

- `lifecycle.py`     start-up (or taking over from the first answers), serve, signals, close.
- `transport.py`     the accept loop, each connection's frames, answers sent within bounds.
- `dispatch.py`      the dispatch table: request -> its family's method; errors as replies.
- `subscriptions.py` `subscribe`: a connection turned into a stream of events.
- `hooks.py`         hook requests: answered by their deadline, slow matches off the loop.
- `rule_writes.py`   `store`, `supersede`, `forget`, `trust`; the pinned cap.
- `rule_reads.py`    `recall_for_action`, `get`, `list`, `history`, `actions`.
- `travel.py`        `export`, `import`, `sync`, and the sync that runs by itself.
- `facts.py`         the recall index's life, `recall` and `reindex`.
- `fires.py`         hook fires recorded: the activity log (`log`), the compliance `report`.
- `admin.py`         `status`, `reload`, `shutdown`; the stop when the store fails.
- `settings.py`      the config file: loaded (or the built-in settings), checked, reloaded.
- `workers.py`       work off the event loop: worker threads, long scans one at a time.
- `state.py`         what one daemon holds, made empty by `Server(options)`.

and beside them: `bounds.py` (the bytes and connections clients may hold) and
`options.py` (`ServerOptions`, `StartupError`).
"""

from __future__ import annotations

from mented.server.bounds import HOOK_SHARE, ServerBusyError
from mented.server.facts import RecallUnavailableError
from mented.server.fires import LAST_FIRE_LOOKBACK
from mented.server.lifecycle import _Lifecycle
from mented.server.options import ServerOptions, StartupError

__all__ = [
    "HOOK_SHARE",
    "LAST_FIRE_LOOKBACK",
    "RecallUnavailableError",
    "Server",
    "ServerBusyError",
    "ServerOptions",
    "StartupError",
]


class Server(_Lifecycle):
    """One daemon: the store, the matcher, the hook handler and the socket."""
