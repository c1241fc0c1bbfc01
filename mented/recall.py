"""Facts recalled by topic: a full-text index over the store's facts, ranked by BM25.

A fact is a memory that is no rule (no `trigger:` tag, not pinned). `mentectl
recall QUERY` and the MCP tool `recall` find the live facts the caller may see
whose words match the query, best first. The ranking is Okapi BM25 over the
fact's text and, weighted twice, its tags; words are matched lower-cased and by
their English stem ("databases" finds "database"), any of them (OR): a fact
with more of the query's rarer words ranks higher.

The index is Tantivy (the Rust search library behind Quickwit, through its
official Python bindings). SQLite's FTS5, which the standard library would
have given for free, was tried first: at 100,000 facts it scores every fact
that has any query word, 8 to 20 ms for a query of two or three common words,
where Tantivy's top-k search (block-max WAND) skips most of them, about 0.4 ms
(docs/benchmarks.md). Tantivy is a dependency of the daemon only.

LMDB stays the source of truth; this index is derived, in its own directory
(`recall/` in the data directory), and can always be rebuilt from the store
(`mentectl reindex`). Keeping the two consistent without a distributed
transaction: the store writes, in the same LMDB transaction as the change
itself, the fact's id into its change log under the next sequence number
(`Store.fact_changes`). After each write the daemon applies the log to the
index (`catch_up`) and records how far it got in a metadata document that
Tantivy commits atomically with the facts' documents. A crash between the two
commits leaves the log ahead of the index; the next `catch_up` (at start, after
any write, and before any search) applies what was missed. Applying is
idempotent: it makes the index's document for an id match what the store holds
for it now. The index is rebuilt whole when it belongs to another store, is
ahead of the log (a store restored from a backup), finds the log already
dropped past it, or cannot be opened (the directory is moved aside first).

Visibility is filtered inside the index first: each document carries its fact's
agent and project (or a mark for "everyone", "everywhere"), and the query asks
only for the caller's agent and the directories that hold the caller's working
directory. So a search costs the same whatever others' facts match (60,000 facts
of another project, all matching, once made each recall walk them all), and its
candidates are capped (`MAX_CANDIDATES`). The store's one predicate
(`mented.store.visible_to`) is then applied to the candidates, read back from the
store, so a fact superseded or forgotten a moment ago is never shown even if the
index lagged.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from typing import TYPE_CHECKING

import msgspec
import tantivy

from mented.log import log
from mented.memory import InvalidInputError
from mented.protocol import FactHit as Hit
from mented.store import MAX_PROJECT_LENGTH, visible_to

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from mented.memory import Memory
    from mented.store import Store

FORMAT = 2  # of the index's schema and tokenizers: another value means a rebuild
MAX_QUERY_WORDS = 32
MAX_K = 100
TAGS_BOOST = 2.0  # a tag is a word the user chose to file the fact under
WRITER_HEAP_BYTES = 15_000_000  # Tantivy's smallest indexing buffer
_BATCH = 10_000  # change-log entries applied per commit
# Candidates a search reads at most: visibility is filtered in the index, so only
# facts changed since it caught up (none, usually) are read and left out.
MAX_CANDIDATES = 1000
_UNSCOPED = "~all"  # a fact's agent or project when it has none: no agent or path has a `~`
_WORD = re.compile(r"\w+")
_META_ID = "~meta"  # the metadata document's id: no memory id has a `~`
SEARCH_WAIT_S = 2.0  # how long a search waits for the index held by a catch-up or rebuild
_BUSY = (
    "the recall index is being rebuilt (`mentectl reindex`, or a first start on this "
    "store); try again in a few seconds. Rules work as before"
)


class RecallError(Exception):
    """The index cannot be used (a directory that cannot be written, Tantivy refusing)."""


class RecallBusyError(RecallError):
    """The index is being rebuilt (or held longer than a search may wait): try again."""


class RebuildSummary(msgspec.Struct, kw_only=True, frozen=True):
    """What a rebuild did: facts indexed, pinned rules, seconds taken."""

    facts: int
    pinned: int = 0
    seconds: float


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("content", tokenizer_name="en_stem")
    builder.add_text_field("tags", tokenizer_name="en_stem")
    # Who may see the fact, for the search's filter: its agent, its project directory.
    builder.add_text_field("agent", tokenizer_name="raw")
    builder.add_text_field("project", tokenizer_name="raw")
    # The metadata document's fields: how far into the change log, whose store.
    builder.add_unsigned_field("applied", stored=True)
    builder.add_text_field("store_id", stored=True, tokenizer_name="raw")
    builder.add_unsigned_field("format", stored=True)
    return builder.build()


def query_words(query: str) -> list[str]:
    """The words of `query` as the index is asked for them: lower-cased, each once.

    Only word characters reach Tantivy's query parser, so nothing in a query is
    read as its syntax (`AND`, `field:`, `*`, quotes, brackets).

    Raises:
        InvalidInputError: the query has no word in it.
    """
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(query)))
    if not words:
        raise InvalidInputError(
            f"the query {query!r} has no words to search for; give a few, e.g. 'staging database'"
        )
    return words[:MAX_QUERY_WORDS]


class RecallIndex:
    """The full-text index of the store's live facts. Thread-safe (one lock)."""

    def __init__(self, directory: Path, store: Store, *, catch_up: bool = True) -> None:
        """Open (or create) the index in `directory`; bring it up to date with `store`
        unless `catch_up` is False (the daemon does that off its start-up path).

        Raises:
            RecallError: the directory cannot be used, or Tantivy refuses it twice.
        """
        self._store = store
        self._store_id = store.store_id
        self._schema = _schema()
        self._applied_cache: int | None = None
        self._lock = threading.Lock()
        self._closing = False  # a rebuild in progress stops at its next batch
        self.rebuilding = False  # set while the whole index is rebuilt
        self._writer: tantivy.IndexWriter | None = None  # made on the first write
        self._open_index: tantivy.Index | None = None  # see `release`
        self.path = directory
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._open_index = self._open()
        except (OSError, ValueError) as exc:
            raise RecallError(f"cannot open the recall index in {directory}: {exc}") from exc
        if catch_up:
            self.catch_up()

    @property
    def _index(self) -> tantivy.Index:
        """The Tantivy index, opened again after `release`."""
        if self._open_index is None:
            self._open_index = tantivy.Index(self._schema, path=str(self.path))
        return self._open_index

    def release(self) -> None:
        """Let go of Tantivy while the index is idle; the next use opens it again.

        An open Tantivy index keeps a thread that reads `meta.json` twice a
        second (its reload watcher), and a writer keeps merge threads: an idle
        daemon should wake for neither, nor hold their descriptors.
        """
        with self._lock:
            self._drop_writer()
            self._open_index = None

    def _drop_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            writer.rollback()  # nothing is pending between catch-ups
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - a Rust panic is a BaseException
            # A writer whose commit failed (no descriptors left, a full disk) can
            # panic on rollback ("does not have any lock"): it is gone either way,
            # and the next write makes a new one; a stopping daemon must not die of it.
            log.warning("recall_writer_dropped", error=str(exc))

    def _writer_now(self) -> tantivy.IndexWriter:
        """The writer, made when first needed: its buffer costs memory a reader does not."""
        if self._writer is None:
            self._writer = self._index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
        return self._writer

    def _open(self) -> tantivy.Index:
        """The index; one that Tantivy cannot open is moved aside and a new one made."""
        try:
            return tantivy.Index(self._schema, path=str(self.path))
        except ValueError as exc:
            damaged = self.path.with_name(self.path.name + ".damaged")
            log.warning("recall_index_damaged", directory=str(self.path), error=str(exc))
            shutil.rmtree(damaged, ignore_errors=True)
            self.path.replace(damaged)
            self.path.mkdir(mode=0o700)
            return tantivy.Index(self._schema, path=str(self.path))

    def close(self) -> None:
        """Let go of the writer (and its lock on the directory); a rebuild stops first."""
        self._closing = True
        self.release()

    def __len__(self) -> int:
        """The facts in the index."""
        with self._lock:
            self._index.reload()
            return int(self._index.searcher().num_docs) - (self._applied() is not None)

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
        searcher = self._index.searcher()
        query = tantivy.Query.term_query(self._schema, "id", _META_ID)
        hits = searcher.search(query, 1, count=False).hits
        if not hits:
            return None
        meta = searcher.doc(hits[0][1]).to_dict()
        if meta.get("format") != [FORMAT] or meta.get("store_id") != [self._store_id]:
            return None
        (applied,) = meta.get("applied", [None])
        self._applied_cache = applied if isinstance(applied, int) else None
        return self._applied_cache

    def _rebuild(self) -> RebuildSummary:
        """Index every live fact, a batch of the store at a time; stop early when closing."""
        self.rebuilding = True
        try:
            return self._rebuild_all()
        finally:
            self.rebuilding = False

    def _rebuild_all(self) -> RebuildSummary:
        started = time.perf_counter()
        writer = self._writer_now()
        writer.delete_all_documents()
        head, facts, after = self._store.live_facts()
        count = 0
        while True:
            for fact in facts:
                writer.add_document(self._document(fact))
            count += len(facts)
            if after is None:
                break
            if self._closing:
                writer.rollback()
                return RebuildSummary(facts=0, seconds=time.perf_counter() - started)
            _, facts, after = self._store.live_facts(after)
        self._commit(head)
        # What changed while the store was walked is in the log after `head`.
        self._store.changes_applied(head)
        seconds = time.perf_counter() - started
        log.info("recall_index_rebuilt", facts=count, seconds=round(seconds, 3))
        return RebuildSummary(facts=count, seconds=seconds)

    def _apply(self, changed: Sequence[str], upto: int) -> None:
        """Make the index's documents for `changed` match the store, and record `upto`."""
        now = self._store.load_many(changed)
        writer = self._writer_now()
        for memory_id in changed:
            # A delete applies to the documents added before it: the new one stays.
            writer.delete_documents_by_term("id", memory_id)
            memory = now.get(memory_id)
            if memory is not None and memory.is_live and not memory.is_rule:
                writer.add_document(self._document(memory))
        self._commit(upto)

    @staticmethod
    def _document(memory: Memory) -> tantivy.Document:
        return tantivy.Document(
            id=memory.id,
            content=memory.content,
            tags=" ".join(memory.tags),
            agent=memory.agent or _UNSCOPED,
            project=memory.project or _UNSCOPED,
        )

    def _commit(self, applied: int) -> None:
        """Commit what was written with the metadata saying how far it goes: one atomic step."""
        writer = self._writer_now()
        writer.delete_documents_by_term("id", _META_ID)
        writer.add_document(
            tantivy.Document(id=_META_ID, applied=applied, store_id=self._store_id, format=FORMAT)
        )
        self._applied_cache = None
        try:
            writer.commit()
        except BaseException:
            self._drop_writer()
            raise
        self._index.reload()
        self._applied_cache = applied

    # ------------------------------------------------------------------ search

    def search(
        self,
        query: str,
        *,
        agent: str | None = None,
        cwd: str | None = None,
        k: int = 5,
        wait_s: float = SEARCH_WAIT_S,
    ) -> list[Hit]:
        """The `k` live facts best matching `query` that the caller may see, best first.

        A search waits at most `wait_s` for the index (a catch-up after a write holds
        it for milliseconds, the rebuild of a small store a moment); past that it is
        refused. The caller runs it off the event loop.

        Raises:
            InvalidInputError: the query has no words, or `k` is out of range.
            RecallBusyError: the index is being rebuilt, or was held past `wait_s`.
        """
        if not 1 <= k <= MAX_K:
            raise InvalidInputError(f"k must be between 1 and {MAX_K}, not {k}")
        words = query_words(query)
        if not self._lock.acquire(timeout=wait_s):
            raise RecallBusyError(_BUSY)
        try:
            return self._search(words, agent, cwd, k)
        finally:
            self._lock.release()

    def _search(self, words: list[str], agent: str | None, cwd: str | None, k: int) -> list[Hit]:
        self._catch_up()  # one read of the log's head when nothing is pending
        query = self._visible_query(words, agent, cwd)
        searcher = self._index.searcher()
        hits: list[Hit] = []
        seen: set[str] = set()  # each candidate looked at once, whichever round found it
        limit = 2 * k
        while True:
            found = searcher.search(query, limit, count=False).hits
            ranked = []
            for score, address in found:
                memory_id = searcher.doc(address)["id"][0]
                if memory_id not in seen:
                    seen.add(memory_id)
                    ranked.append((score, memory_id))
            memories = self._store.load_many(memory_id for _, memory_id in ranked)
            for score, memory_id in ranked:
                memory = memories.get(memory_id)
                if memory is not None and memory.is_live and visible_to(memory, agent, cwd):
                    hits.append(Hit(memory=memory, score=score))
            if len(hits) >= k or len(found) < limit or limit >= MAX_CANDIDATES:
                break
            limit = min(MAX_CANDIDATES, limit * 4)
        hits.sort(key=lambda hit: -hit.score)  # stable: the index's order among equals
        return hits[:k]

    def _visible_query(self, words: list[str], agent: str | None, cwd: str | None) -> tantivy.Query:
        """`words` over the facts' text and tags, only among those the caller may see."""
        text = self._index.parse_query(
            " ".join(words), ["content", "tags"], field_boosts={"tags": TAGS_BOOST}
        )
        clauses = [(tantivy.Occur.Must, text)]
        if agent is not None:
            agents = tantivy.Query.term_set_query(self._schema, "agent", [_UNSCOPED, agent])
            clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(agents, 0.0)))
        if cwd is not None:
            places = tantivy.Query.term_set_query(
                self._schema, "project", [_UNSCOPED, *_directories_holding(cwd)]
            )
            clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(places, 0.0)))
        return tantivy.Query.boolean_query(clauses)


def _directories_holding(cwd: str) -> list[str]:
    """Every directory a fact's project may name to be seen from `cwd`: `cwd` and each
    directory above it, as given and through its symlinks (`mented.store.visible_to`).
    None longer than a project may be, so a megabyte of `cwd` costs no more than 4 KiB."""
    lexical = os.path.normpath(cwd)
    places = [lexical]
    if len(lexical) <= MAX_PROJECT_LENGTH:
        places.append(os.path.realpath(lexical))
    found = ["/"]
    for place in places:
        found.extend(
            place[:end]
            for end, char in enumerate(place[: MAX_PROJECT_LENGTH + 1])
            if char == "/" and end
        )
        if len(place) <= MAX_PROJECT_LENGTH:
            found.append(place)
    return list(dict.fromkeys(found))
