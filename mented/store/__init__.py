"""The LMDB store: memory records, the trigger index, supersession, visibility.

One LMDB environment lives in the data directory, with ten named sub-databases:

- `memories`  id -> record (msgpack of `Memory`). ULIDs sort by time, so a
              backward cursor walk lists memories newest first.
- `triggers`  the trigger index: one key per (live rule, action)::

                  action (UTF-8) | 0x00 | ~created_at µs (8 bytes BE) | ~id (26 bytes)

              -> id. `~` is bitwise inversion, so a *forward* walk over one
              action's prefix meets its rules newest first, ties broken by the
              larger id first. `recall_for_action` is a `set_range` to the
              prefix and a `next()` per rule: its cost depends on the number of
              rules for that action, never on the size of the store. Superseded
              or forgotten rules leave this index in the write that retires
              them, so a lookup never has to skip them.
- `handles`   reversed id -> b"": a short handle (a suffix of the id) becomes a
              prefix here, so resolving one is a `set_range` too.
- `actions`   action -> number of live rules (8 bytes BE), for `stats`.
- `meta`      schema version, the live-rule counter, the change counter and the
              store's id (random, made once: tells the recall index whose it is).
- `pinned`    the pinned rules: ~created_at µs (8 bytes BE) | ~id -> id, one key
              per live pinned rule, newest first, like the trigger index; a
              session start walks it (a handful of rules, capped when added).
- `changes`   the change log of facts for the recall index (mented.recall):
              sequence number (8 bytes BE) -> id of a fact that became live or
              stopped being live, written in the same transaction as the change.
              The index applies it after the commit and records how far it got,
              so after a crash it replays what it missed; applied entries are
              dropped by a later write (`changes_applied`).
- `forgotten` id -> `Forgotten` (msgpack): what is kept of a forgotten memory, so
              that a forget travels (export, sync) and wins over a copy elsewhere.
- `successors` predecessor id (26 bytes) | successor id (26 bytes) -> b"": every
              version (or forgotten version) that supersedes a memory, so that its
              state is derived from the versions that replace it, whatever order
              they arrived in. See "Records that travel" below.
- `synced`    id -> b"": the memories a sync brought from another machine, written in
              the import's own transaction (`import_records(synced=True)`) and dropped
              when the memory is forgotten. This machine's own record of where a memory
              came from, for listings (`synced_among`): never exported nor synced, so
              the records themselves stay identical on every machine. A version made
              here (superseding a synced one) is not in it: it is yours.

Every write is one transaction, committed with fsync before it returns
(`sync=True`): an acknowledged write survives a crash. When LMDB reports the
map full, the map is doubled and the transaction retried, so writes never fail
with "map full" (until `MAX_MAP_SIZE`).

Failures say what they are, because LMDB trusts its file and its mapping: a
data file shorter than its header says is refused at open (reading past its end
would kill the process with SIGBUS); a full disk is `StoreFullError` (that write
is lost, the store reads on); damaged pages or records are `StoreDamagedError`;
an I/O error or a map that could not grow is `StoreFailedError`, after which
this `Store` refuses everything (`failure` says why) and its owner should exit.

Records that travel: a memory's own fields never change once written; a
memory's `superseded_by` and `valid_until` are derived from its successors
(`_derive`): retired as soon as any version supersedes it, `superseded_by` the
newest present successor (else the newest forgotten one), `valid_until` the
earliest successor's time. So a store that received the same records and
forgets in any order ends in the same state (`import_records`), two machines that
superseded one rule apart keep both successors (a fork, `forks`), and superseding
one tip of a fork settles it (the new version `merges` the other tips).

Threads: lookups may run on the event-loop thread while one write runs in a
worker thread. Each operation uses its own short transaction. Growing the map
invalidates every open transaction, so it waits, behind `_ResizeGate`, until no
transaction of this process is open. See docs/store.md.

Layout: `Store` is one class built of layers, each in a module of its own and each
using only those below it (the order of this list, from the top):

- `bulk.py`        records that travel: export in pages, import in one write, checks,
                   which of them came by sync.
- `lookups.py`     recall by action, listings, pinned rules, the change log, stats.
- `history.py`     supersession, the state derived from successors, forks, forgetting.
- `migrations.py`  the schema: refused when foreign or newer, older ones migrated.
- `records.py`     memories written with their index entries, read by id or handle.
- `environment.py` the LMDB environment: open, transactions, failures, map growth.

and beside them, used by the layers: `visibility.py` (the one predicate, `visible_to`),
`validation.py` (what a memory must be), `layout.py` (databases, keys, codecs),
`results.py` (what the store hands back) and `errors.py`.
"""

from __future__ import annotations

from mented.store.bulk import _Bulk, check_forgotten, check_imported
from mented.store.environment import MAX_MAP_SIZE
from mented.store.errors import (
    ConflictError,
    NotFoundError,
    StoreDamagedError,
    StoreError,
    StoreFailedError,
    StoreFullError,
    StoreOpenError,
)
from mented.store.migrations import SCHEMA_VERSION
from mented.store.results import FactChanges, Fork, ImportSummary, StoreItem, StoreStats
from mented.store.validation import MAX_AGENT_LENGTH, MAX_PROJECT_LENGTH, MAX_TAG_LENGTH, MAX_TAGS
from mented.store.visibility import visible_to

__all__ = [
    "MAX_AGENT_LENGTH",
    "MAX_MAP_SIZE",
    "MAX_PROJECT_LENGTH",
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
    "SCHEMA_VERSION",
    "ConflictError",
    "FactChanges",
    "Fork",
    "ImportSummary",
    "NotFoundError",
    "Store",
    "StoreDamagedError",
    "StoreError",
    "StoreFailedError",
    "StoreFullError",
    "StoreItem",
    "StoreOpenError",
    "StoreStats",
    "check_forgotten",
    "check_imported",
    "visible_to",
]


class Store(_Bulk):
    """The memory store in one data directory.

    Safe to share between threads: lookups from any thread, writes serialized.
    """
