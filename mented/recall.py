"""Facts recalled by topic: a full-text index over the store's facts, ranked by BM25.

A fact is a memory that is no rule (no `trigger:` tag, not pinned). `mentectl
recall QUERY` and the MCP tool `recall` find the live facts the caller may see
whose words match the query, best first. The ranking is SQLite's FTS5 `bm25()`
(the Okapi BM25 of the literature, as used by Lucene and Tantivy), over the
fact's text and, weighted higher, its tags; words are matched by their Porter
stem, case and accents aside (`unicode61 remove_diacritics 2`), any of them
(OR): a fact with more of the query's rarer words ranks higher.

Why SQLite FTS5: it ships in the standard library's `sqlite3` on every Python
mented supports (checked at open, with a clear error where a build lacks it),
is a well-kept, heavily used search engine, and adds no dependency. Tantivy
would be faster at millions of documents, which a user's memories never reach.

LMDB stays the source of truth; this index is derived, in its own SQLite file
(`recall/index.db` in the data directory), and can always be rebuilt from the
store (`mentectl reindex`). Keeping the two consistent without a distributed
transaction: the store writes, in the same LMDB transaction as the change
itself, the fact's id into its change log under the next sequence number
(`Store.fact_changes`). After each write the daemon applies the log to the
index (`catch_up`) and records, in the same SQLite transaction as the index
rows, how far it got. A crash between the two commits leaves the log ahead of
the index; the next `catch_up` (at start, after any write, and before any
search) applies what was missed. Applying is idempotent: it makes the index's
row for an id match what the store holds for it now. The index is rebuilt
whole when it belongs to another store, is ahead of the log (a store restored
from a backup), finds the log already dropped past it, or cannot be read (the
file is moved aside first).

Visibility is the store's one predicate (`mented.store.visible_to`), applied to
the ranked candidates, read back from the store, so a fact superseded or
forgotten a moment ago is never shown even if the index lagged.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
import time
from typing import TYPE_CHECKING

import msgspec

from mented.log import log
from mented.memory import InvalidInputError
from mented.protocol import FactHit as Hit
from mented.store import visible_to

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from mented.store import Store

INDEX_FILE = "index.db"
FORMAT = "1"  # of the index's tables and tokenizer: another value means a rebuild
MAX_QUERY_WORDS = 32
MAX_K = 100
CONTENT_WEIGHT = 1.0
TAGS_WEIGHT = 2.0  # a tag is a word the user chose to file the fact under
_BATCH = 10_000  # change-log entries applied per SQLite transaction
_WORD = re.compile(r"\w+")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs (rowid INTEGER PRIMARY KEY, memory_id TEXT NOT NULL UNIQUE);
CREATE VIRTUAL TABLE IF NOT EXISTS facts USING fts5(
    content, tags, tokenize = 'porter unicode61 remove_diacritics 2'
);
"""


class RecallError(Exception):
    """The index cannot be used (SQLite without FTS5, a file that cannot be written)."""


class RebuildSummary(msgspec.Struct, kw_only=True, frozen=True):
    """What a rebuild did: facts indexed, pinned rules, seconds taken."""

    facts: int
    pinned: int = 0
    seconds: float


def fts5_available() -> bool:
    """Whether this Python's SQLite has FTS5 compiled in."""
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        try:
            db.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
        except sqlite3.OperationalError:
            return False
    return True


def match_expression(query: str) -> str:
    """The FTS5 query for `query`'s words, any of them: `"w1" OR "w2"`.

    Every word is quoted, so that nothing in the query is read as FTS5 syntax
    (`AND`, `NEAR`, `col:`, `*`, unbalanced quotes).

    Raises:
        InvalidInputError: the query has no word in it.
    """
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(query)))
    if not words:
        raise InvalidInputError(
            f"the query {query!r} has no words to search for; give a few, e.g. 'staging database'"
        )
    return " OR ".join(f'"{word}"' for word in words[:MAX_QUERY_WORDS])


class RecallIndex:
    """The full-text index of the store's live facts. Thread-safe (one lock)."""

    def __init__(self, directory: Path, store: Store) -> None:
        """Open (or create) the index in `directory` and bring it up to date with `store`.

        Raises:
            RecallError: SQLite has no FTS5, or the directory or file cannot be used.
        """
        self._store = store
        self._store_id = store.store_id
        self._applied_cache: int | None = None
        self._lock = threading.Lock()
        self.path = directory / INDEX_FILE
        if not fts5_available():
            raise RecallError(
                f"this Python's SQLite ({sqlite3.sqlite_version}) has no FTS5, which recall "
                "needs; use a Python built with it (python.org, distribution and uv builds are)"
            )
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._db = self._open()
        except (OSError, sqlite3.Error) as exc:
            raise RecallError(f"cannot open the recall index {self.path}: {exc}") from exc
        self.catch_up()

    def _open(self) -> sqlite3.Connection:
        """The connection, schema in place; an unreadable file is moved aside first."""
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            damaged = self.path.with_name(INDEX_FILE + ".damaged")
            log.warning("recall_index_damaged", file=str(self.path), error=str(exc))
            self.path.replace(damaged)
            for suffix in ("-wal", "-shm"):
                self.path.with_name(INDEX_FILE + suffix).unlink(missing_ok=True)
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            # WAL: searches read while the daemon's worker thread applies changes.
            # synchronous=NORMAL: a commit lost with the machine is replayed from the log.
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            db.execute("SELECT count(*) FROM meta").fetchone()
        except sqlite3.Error:
            db.close()
            raise
        return db

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ upkeep

    def catch_up(self) -> int:
        """Apply the store's change log to the index; returns the facts looked at.

        Rebuilds the whole index when the log cannot bring it up to date (see the
        module docstring).
        """
        with self._lock:
            return self._catch_up()

    def _catch_up(self) -> int:
        applied = self._applied()
        if applied is None:
            return self._rebuild().facts
        seen = 0
        while True:
            batch = self._store.fact_changes(applied, limit=_BATCH)
            if not batch.complete:
                log.info("recall_index_rebuilt_for_log", applied=applied, log_upto=batch.upto)
                return self._rebuild().facts
            if batch.upto == applied:
                break
            self._apply(batch.changed, batch.upto)
            seen += len(batch.changed)
            applied = batch.upto
            if not batch.more:
                break
        self._store.changes_applied(applied)
        return seen

    def rebuild(self) -> RebuildSummary:
        """Rebuild the index from the store, and the store's pinned index too."""
        with self._lock:
            summary = self._rebuild()
        pinned = self._store.reindex_pinned()
        return msgspec.structs.replace(summary, pinned=pinned)

    def _applied(self) -> int | None:
        """How far into the store's change log the index is; None: it must be rebuilt."""
        if self._applied_cache is not None:
            return self._applied_cache
        meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != FORMAT or meta.get("store_id") != self._store_id:
            return None
        try:
            self._applied_cache = int(meta["applied"])
        except (KeyError, ValueError):
            return None
        return self._applied_cache

    def _rebuild(self) -> RebuildSummary:
        started = time.perf_counter()
        head, facts = self._store.live_facts()
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM docs")
            db.execute("DELETE FROM facts")
            db.executemany(
                "INSERT INTO docs (rowid, memory_id) VALUES (?, ?)",
                ((row, fact.id) for row, fact in enumerate(facts, start=1)),
            )
            db.executemany(
                "INSERT INTO facts (rowid, content, tags) VALUES (?, ?, ?)",
                (
                    (row, fact.content, " ".join(fact.tags))
                    for row, fact in enumerate(facts, start=1)
                ),
            )
            self._set_meta(head)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._store.changes_applied(head)
        seconds = time.perf_counter() - started
        log.info("recall_index_rebuilt", facts=len(facts), seconds=round(seconds, 3))
        return RebuildSummary(facts=len(facts), seconds=seconds)

    def _apply(self, changed: Sequence[str], upto: int) -> None:
        """Make the index's rows for `changed` match the store, and record `upto`."""
        now = self._store.load_many(changed)
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for memory_id in changed:
                memory = now.get(memory_id)
                row = db.execute("SELECT rowid FROM docs WHERE memory_id = ?", (memory_id,))
                found = row.fetchone()
                wanted = memory is not None and memory.is_live and not memory.is_rule
                if wanted and found is None:
                    assert memory is not None
                    rowid = db.execute(
                        "INSERT INTO docs (memory_id) VALUES (?)", (memory_id,)
                    ).lastrowid
                    db.execute(
                        "INSERT INTO facts (rowid, content, tags) VALUES (?, ?, ?)",
                        (rowid, memory.content, " ".join(memory.tags)),
                    )
                elif not wanted and found is not None:
                    db.execute("DELETE FROM facts WHERE rowid = ?", found)
                    db.execute("DELETE FROM docs WHERE rowid = ?", found)
            self._set_meta(upto)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _set_meta(self, applied: int) -> None:
        """Record how far the index is, in the transaction that gets it there."""
        self._applied_cache = None  # read again once this transaction has committed
        self._db.executemany(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            [("format", FORMAT), ("store_id", self._store_id), ("applied", str(applied))],
        )

    # ------------------------------------------------------------------ search

    def search(
        self, query: str, *, agent: str | None = None, cwd: str | None = None, k: int = 5
    ) -> list[Hit]:
        """The `k` live facts best matching `query` that the caller may see, best first.

        Raises:
            InvalidInputError: the query has no words, or `k` is out of range.
        """
        if not 1 <= k <= MAX_K:
            raise InvalidInputError(f"k must be between 1 and {MAX_K}, not {k}")
        expression = match_expression(query)
        hits: list[Hit] = []
        offset = 0
        batch = max(4 * k, 32)  # candidates read per round: most are visible
        with self._lock:
            self._catch_up()  # one read of the log's head when nothing is pending
            while len(hits) < k:
                rows = self._db.execute(
                    "SELECT docs.memory_id, bm25(facts, ?, ?) AS rank FROM facts "
                    "JOIN docs ON docs.rowid = facts.rowid "
                    "WHERE facts MATCH ? ORDER BY rank LIMIT ? OFFSET ?",
                    (CONTENT_WEIGHT, TAGS_WEIGHT, expression, batch, offset),
                ).fetchall()
                if not rows:
                    break
                memories = self._store.load_many(memory_id for memory_id, _ in rows)
                for memory_id, rank in rows:
                    memory = memories.get(memory_id)
                    if memory is not None and memory.is_live and visible_to(memory, agent, cwd):
                        hits.append(Hit(memory=memory, score=-rank))
                        if len(hits) == k:
                            break
                offset += batch
                batch *= 4
        return hits
