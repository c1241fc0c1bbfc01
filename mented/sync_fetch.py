"""What a git that talks to the sync remote may leave in the clone: at most a bound.

git has no limit of its own on what a fetch receives (`receive.maxInputSize` is the
server's), and a remote anyone can push to may send a pack of any size. So every git
that fetches (`clone`, `fetch`) runs with every object kept in its pack
(`fetch.unpackLimit=1`: nothing is unpacked into loose objects on the way), and its
clone's `.git/objects/pack/` is watched while it runs (`PackWatch`, a `scandir` every
`WATCH_EVERY_S`): past `[sync] max_fetch_mib` of new files the whole process group is
killed, and every file the fetch added there (the partial `tmp_pack_*`, or a pack it
finished between two looks) is removed. The sync then fails saying so, naming the
bound and what to do; the store and the work tree never saw any of it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

# How often a running fetch's pack directory is looked at: one `scandir` of a few files.
WATCH_EVERY_S = 0.1
# The default bound (`[sync] max_fetch_mib`): far above the records of 200,000 rules
# (a store of about 60 MB), whose one-line files compress well in a pack.
MAX_FETCH_MIB = 256
# Settings for a git that fetches: every object kept in the pack that is watched, and
# no `gc --auto` in the background while the fetch's files may still be removed.
FETCH_GIT = (
    "-c", "fetch.unpackLimit=1",
    "-c", "transfer.unpackLimit=1",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)  # fmt: skip


class PackWatch:
    """The files a fetch adds to one clone's `.git/objects/pack/`, and their bound.

    Made before git starts: the files there then are the clone's own and are never
    touched. A clone that does not exist yet (`git clone`) starts with none.
    """

    def __init__(self, clone: Path, limit: int) -> None:
        self.directory = clone / ".git" / "objects" / "pack"
        self.limit = limit
        self._before = frozenset(self._sizes())

    def _sizes(self) -> dict[str, int]:
        """Each regular file of the pack directory and its size (no link followed)."""
        sizes: dict[str, int] = {}
        try:
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    try:
                        if entry.is_file(follow_symlinks=False):
                            sizes[entry.name] = entry.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:
                        continue  # renamed meanwhile (tmp_pack_* to pack-*.pack)
        except (FileNotFoundError, NotADirectoryError):
            pass
        return sizes

    def added(self) -> int:
        """Bytes in the files the fetch added so far."""
        return sum(size for name, size in self._sizes().items() if name not in self._before)

    def over(self) -> bool:
        return self.added() > self.limit

    def remove_added(self) -> None:
        """Remove every file the fetch added (a killed git leaves its `tmp_pack_*`)."""
        for name in self._sizes():
            if name not in self._before:
                (self.directory / name).unlink(missing_ok=True)

    def refusal(self, what: str) -> str:
        """The message for a fetch stopped at the bound, for `mentectl sync` and `status`."""
        mib = self.limit / (1024 * 1024)
        return (
            f"the remote sent more than {mib:g} MiB ({what}), more than mented's records "
            "take: git was stopped and what it fetched removed; nothing of it reached the "
            "store. Look at what was pushed to the remote (`git count-objects -vH` in a "
            "clone of it) and remove it, or, if your rules really need more, raise "
            "`[sync] max_fetch_mib` in the config file"
        )
