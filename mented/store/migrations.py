"""The store's schema: a foreign or newer one refused at open, older ones migrated."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mented.store.errors import StoreOpenError
from mented.store.layout import (
    _DB_ACTIONS,
    _DB_CHANGES,
    _DB_FORGOTTEN,
    _DB_HANDLES,
    _DB_MEMORIES,
    _DB_META,
    _DB_PINNED,
    _DB_SUCCESSORS,
    _DB_SYNCED,
    _DB_TRIGGERS,
    _META_SCHEMA,
    _META_STORE_ID,
    _decode,
)
from mented.store.records import _Records

if TYPE_CHECKING:
    from pathlib import Path

    import lmdb

SCHEMA_VERSION = 2  # 2: the forgotten and successors databases


class _Migrations(_Records):
    """The databases opened at start, in one write that also migrates an older schema."""

    def _check_schema(self, data_file: Path) -> None:
        """Refuse an environment that is not ours or is newer, before writing anything."""
        txn = self._env.begin()
        try:
            main = txn.cursor()
            if not main.first():
                return  # a new environment
            if not main.set_key(_DB_META):
                raise StoreOpenError(
                    f"{data_file} is an LMDB environment but not a mented store. mented "
                    "left it untouched: point --data-dir / MENTED_DATA_DIR elsewhere"
                )
            meta = self._env.open_db(_DB_META, txn=txn, create=False)
            raw = txn.get(_META_SCHEMA, db=meta)
        finally:
            txn.abort()
        try:
            version = int(raw or b"")
        except ValueError:
            raise StoreOpenError(
                f"{data_file} has no readable schema version ({raw!r}); "
                "the store may be damaged. mented left it untouched"
            ) from None
        if version > SCHEMA_VERSION:
            raise StoreOpenError(
                f"the store in {self.path} was written by a newer mented (schema {version}, "
                f"this one reads up to {SCHEMA_VERSION}); upgrade mented"
            )

    def _open_databases(self, data_file: Path) -> None:
        self._check_schema(data_file)
        with self._env.begin(write=True) as txn:
            self._memories = self._env.open_db(_DB_MEMORIES, txn=txn)
            self._triggers = self._env.open_db(_DB_TRIGGERS, txn=txn)
            self._handles = self._env.open_db(_DB_HANDLES, txn=txn)
            self._actions = self._env.open_db(_DB_ACTIONS, txn=txn)
            self._meta = self._env.open_db(_DB_META, txn=txn)
            self._forgotten = self._env.open_db(_DB_FORGOTTEN, txn=txn)
            self._successors = self._env.open_db(_DB_SUCCESSORS, txn=txn)
            # Made empty in a store older than it: its memories are all taken for yours.
            self._synced = self._env.open_db(_DB_SYNCED, txn=txn)
            self._open_lookup_databases(txn)
            raw = txn.get(_META_SCHEMA, db=self._meta)
            # Older schemas are migrated here, in this same transaction.
            if raw is not None and int(raw) < 2:
                self._index_successors(txn)
            if raw is None or int(raw) < SCHEMA_VERSION:
                txn.put(_META_SCHEMA, str(SCHEMA_VERSION).encode(), db=self._meta)

    def _index_successors(self, txn: lmdb.Transaction[bytes]) -> None:
        """Schema 1 -> 2: the successors index, from every memory's `supersedes`."""
        for raw in txn.cursor(self._memories).iternext(keys=False):
            memory = _decode(raw)
            if memory.supersedes is not None:
                self._link(txn, memory.supersedes, memory.id)

    def _open_lookup_databases(self, txn: lmdb.Transaction[bytes]) -> None:
        """The pinned-rule index and the fact change log; a store made before them
        gets its pinned index built here (its facts are indexed by the recall
        index's first rebuild), and every store an id."""
        pinned_existed = txn.get(_DB_PINNED) is not None  # named databases are keys of the main one
        self._pinned = self._env.open_db(_DB_PINNED, txn=txn)
        self._changes = self._env.open_db(_DB_CHANGES, txn=txn)
        if not pinned_existed:
            self._index_all_pinned(txn)
        if txn.get(_META_STORE_ID, db=self._meta) is None:
            txn.put(_META_STORE_ID, os.urandom(16).hex().encode(), db=self._meta)
