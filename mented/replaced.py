"""Which rule a superseding rule replaces, as the session that reads it can be told.

A rule handed over may supersede another, however that happened: `mentectl rule
supersede`, the MCP tool `supersede_rule`, a sync from another machine, `mentectl
import`, or a project's committed file that carries both versions. The model must
be able to tell that the old one is void, so the handover names it
(`mented.handover.Replaced`):

- by its handle alone when the session was handed it (or a version it replaced:
  the rule was superseded twice since) -- the model has its text;
- else by its handle and its first words (at most `MAX_REPLACED_WORDS`), when the
  caller may see it (the store's one visibility predicate: a rule scoped to
  another agent or project is never named, not even by its handle) and it still
  exists (a forgotten rule is gone from the store: its text is never said);
- else not at all.

A project's rule (mented.team) names only a rule of the same project: a
repository cannot make the model think one of the user's own rules is void.

The cost: only for a rule handed over in full that supersedes another, one read
transaction per version walked back, at most `MAX_CHAIN`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mented.handover import MAX_REPLACED_WORDS, Replaced
from mented.memory import ORIGIN_PROJECT, short_handle
from mented.store import visible_to
from mented.team import RuleLookup

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Sequence

    from mented.memory import Memory
    from mented.store import Store

MAX_CHAIN = 8  # older versions looked at for one the session was handed


def replaced_in(
    rules: Sequence[Memory],
    handed: Collection[str],
    lookup: Store | RuleLookup,
    *,
    agent: str | None,
    cwd: str | None,
) -> dict[str, Replaced]:
    """For each of `rules` that supersedes another, how to name the one it replaces.

    `handed`: the rule ids the session was handed. Rules with nothing to name are
    left out of the result.
    """
    found: dict[str, Replaced] = {}
    loaders: dict[str | None, Callable[[Iterable[str]], dict[str, Memory]]] = {}
    for rule in rules:
        if rule.supersedes is None and not rule.merges:
            continue
        where = rule.project if rule.origin == ORIGIN_PROJECT else None
        if (load := loaders.get(where)) is None:
            load = loaders[where] = _loader(rule, lookup, cwd)
        named = _name(rule, handed, load, agent=agent, cwd=cwd)
        if named is not None:
            found[rule.id] = named
    return found


def first_words(text: str, limit: int = MAX_REPLACED_WORDS) -> str:
    """`text` on one line, cut between words to at most `limit` characters (with "…")."""
    words = " ".join(text[: limit * 4].split())  # bounded before it is split: up to 64 KiB
    if len(words) <= limit:
        return words
    cut = words[: limit - 1]
    if " " in cut and words[limit - 1] != " ":
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip() + "…"


def _name(
    rule: Memory,
    handed: Collection[str],
    load: Callable[[Iterable[str]], dict[str, Memory]],
    *,
    agent: str | None,
    cwd: str | None,
) -> Replaced | None:
    replaced = [old for old in (rule.supersedes, *rule.merges) if old is not None]
    project = rule.origin == ORIGIN_PROJECT
    if not project:
        # The session has its text (kept as before even once it was forgotten: only
        # the handle is said, which that session was shown).
        for old in replaced:
            if old in handed:
                return Replaced(short_handle(old))
    versions = load(replaced)
    direct = versions.get(rule.supersedes) if rule.supersedes is not None else None
    if project:
        for old in replaced:
            if old in handed and old in versions:
                return Replaced(short_handle(old))
    if direct is None or not visible_to(direct, agent, cwd):
        return None
    # Superseded twice since the session was handed a version: name that one.
    older = direct
    for _ in range(MAX_CHAIN):
        if older.supersedes is None:
            break
        if older.supersedes in handed:
            return Replaced(short_handle(older.supersedes))
        step = load([older.supersedes]).get(older.supersedes)
        if step is None:
            break
        older = step
    return Replaced(short_handle(direct.id), first_words(direct.content))


def _loader(
    rule: Memory, lookup: Store | RuleLookup, cwd: str | None
) -> Callable[[Iterable[str]], dict[str, Memory]]:
    """Where the versions `rule` replaces are looked up: the user's store, or, for a
    project's rule, that same project's rules (trusted, applying in `cwd`)."""
    if rule.origin != ORIGIN_PROJECT:
        store = lookup.store if isinstance(lookup, RuleLookup) else lookup
        return store.load_many
    if not isinstance(lookup, RuleLookup):
        return lambda _ids: {}
    same = {
        other.id: other
        for other in lookup.trusted_rules(cwd)
        if other.project == rule.project and other.origin == ORIGIN_PROJECT
    }
    return lambda ids: {memory_id: same[memory_id] for memory_id in ids if memory_id in same}
