"""The built-in action table, read and checked once, then kept: not parsed at every start.

Parsing `mented/actions.toml` with tomllib and checking its shapes took about a
tenth of a daemon's start (and of `mentectl explain`'s): the first hook after a
start waited for it. The checked table is kept as JSON in the user's cache
directory, the one of bashlex's parser tables (`mented.parser_tables.cache_dir`),
named by a digest of what made it: the TOML file, the code that reads it
(`mented/actions.py`) and mented's version. A start reads it back, decoded by
msgspec into the table's own typed structs; any other digest, or a file that is
damaged, not the user's, or in a directory others may enter, costs a parse of the
TOML as before, which writes the cache again.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import msgspec

from mented import __version__
from mented.parser_tables import cache_dir, private_directory, write_cached
from mented.untrusted import Refused, read_file

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

T = TypeVar("T")

CACHE_PREFIX = "actions-"
MAX_CACHE_BYTES = 4 << 20  # the table takes about 150 KB


def digest_of(sources: Sequence[Path]) -> str:
    """What decides the table: the files that made it, and mented's version."""
    digest = hashlib.sha256(__version__.encode())
    for source in sources:
        digest.update(source.read_bytes())
    return digest.hexdigest()


def cached(kind: type[T], build: Callable[[], T], sources: Sequence[Path]) -> T:
    """The `kind` kept for `sources`, else `build()` (then kept for the next start)."""
    try:
        digest = digest_of(sources)
    except OSError:
        return build()  # the files cannot be read here (a zipped install): as before
    name = f"{CACHE_PREFIX}{digest[:32]}.json"
    found = _read(name, kind)
    if found is not None:
        return found
    value = build()
    write_cached(name, msgspec.json.encode(value))
    return value


def _read(name: str, kind: type[T]) -> T | None:
    try:
        fd = private_directory(cache_dir())
    except (OSError, Refused):
        return None
    try:
        return msgspec.json.decode(read_file(name, dir_fd=fd, limit=MAX_CACHE_BYTES), type=kind)
    except (OSError, Refused, msgspec.DecodeError):
        return None
    finally:
        os.close(fd)
