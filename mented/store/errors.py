"""What a store operation fails with: each error's message is written for the user."""

from __future__ import annotations


class StoreError(Exception):
    """A store operation failed; the message is written for the user."""


class StoreOpenError(StoreError):
    """The data directory cannot be opened as a mented store (files left untouched)."""


class StoreFullError(StoreError):
    """A write found no room (disk full, quota, the map at its limit): it was not made.


    Recoverable: the store is intact, lookups go on, and writes work again once
    there is room.
    """


class StoreDamagedError(StoreError):
    """A page or record of the data file is unreadable; the rest may still be read."""


class StoreFailedError(StoreError):
    """The store can no longer be used by this process: an I/O error, a map that
    could not grow, or a data file cut short while open. Every later call raises
    this too; the process should exit so that its service manager restarts it.
    """


class NotFoundError(StoreError):
    """No memory has that id."""


class ConflictError(StoreError):
    """The operation contradicts the current state, e.g. superseding a superseded rule."""
