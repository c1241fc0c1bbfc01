"""DigestCache: the hook's caches keyed by client text, held by digest and bounded in bytes."""

from __future__ import annotations

from pathlib import Path

from mented.digest_cache import ENTRY_OVERHEAD, DigestCache
from mented.git_aliases import GitAliases
from mented.team import ProjectRules


def test_keys_are_digests_and_the_bytes_are_bounded() -> None:
    cache: DigestCache[str] = DigestCache(max_entries=100, max_bytes=10 * (1000 + ENTRY_OVERHEAD))
    huge = "/" + "x" * 1_000_000
    cache.put(huge, "root")
    assert cache.get(huge) == "root"
    assert cache.get(huge[:-1]) is None
    assert cache.bytes == ENTRY_OVERHEAD  # the megabyte key is not held
    for n in range(50):
        cache.put(f"/dir/{n}", "v" * 1000, 1000)
    assert len(cache) == 10  # the byte bound, below the entry bound
    assert cache.bytes <= cache.max_bytes
    assert cache.get("/dir/49") == "v" * 1000  # the most recent stay
    assert cache.get("/dir/0") is None
    cache.put("/heavy", "h", 10**9)  # heavier than the whole bound: not cached
    assert cache.get("/heavy") is None
    assert cache.get("/dir/49") == "v" * 1000


def test_a_megabyte_working_directory_is_not_kept_by_the_hooks_caches(tmp_path: Path) -> None:
    # Kept whole as a key in two caches, 250 hooks with a 1 MB cwd added 478 MiB.
    rules = ProjectRules(tmp_path)
    aliases = GitAliases()
    for n in range(20):
        cwd = f"/{n}" + "x" * 1_000_000
        rules.roots_of(cwd)
        aliases.for_directory(cwd)
    assert rules._roots.bytes < 20 * 1024
    assert aliases._cache.bytes < 20 * 1024
