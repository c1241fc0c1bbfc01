"""What `hooks install` added to an agent's settings beside its entries, for uninstall.

Gemini CLI runs hooks only when `hooksConfig.enabled` is not false (false by
default before 0.27), so `mentectl hooks install gemini-cli` writes it when it
is missing (`SettingsLayout.enable`). Afterwards the file cannot tell whether
the setting was mented's or the user's (who may have set it for their own
hooks), so the install records which, per settings file, in mented's state
directory::

    ~/.local/state/mented/added-settings.json
    {"/home/me/.gemini/settings.json": {"hooksConfig.enabled": true}}

`true`: mented added it, and the uninstall takes it out (even when the user's
own hooks stay in the file); `false`: it was there before, and stays. A file
the record does not name (an install older than the record) falls back to the
earlier rule: the setting goes with the last hook of the file. The uninstall
drops the file's line, and the record file once it names no file.

The record is mented's own file; it is still read as untrusted (no link, a
bounded size), and one that cannot be read counts as no record.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from pathlib import Path

from mented import paths
from mented.untrusted import Refused, read_file
from mented_client.files import write_atomically

RECORD_NAME = "added-settings.json"
_RECORD_LIMIT = 1 << 20  # one line per settings file: far more than any user has


def record_path() -> Path:
    """Where the record is kept."""
    return paths.state_dir() / RECORD_NAME


def _key(settings: Path) -> str:
    return os.path.abspath(settings)  # noqa: PTH100 - as named, links kept


def _load() -> dict[str, dict[str, bool]]:
    try:
        doc = json.loads(read_file(record_path(), limit=_RECORD_LIMIT))
    except (FileNotFoundError, Refused, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {
        file: {name: value for name, value in added.items() if isinstance(value, bool)}
        for file, added in doc.items()
        if isinstance(file, str) and isinstance(added, dict)
    }


def _save(record: dict[str, dict[str, bool]]) -> None:
    path = record_path()
    if path.is_symlink():  # read as no record: not to be written through either
        raise OSError(errno.ELOOP, "it is a symbolic link", str(path))
    if not record:
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # not empty: the log is there too
            path.parent.rmdir()  # made for the record: not to be left behind
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomically(path, json.dumps(record, indent=2, sort_keys=True) + "\n", mode=0o600)


def note_install(settings: Path, setting: str, *, added: bool) -> None:
    """Record whether this install added `setting` to `settings`.

    An earlier install's "added" stays: installing again finds the setting there,
    but it is still mented's.

    Raises:
        OSError: the record cannot be written.
    """
    record = _load()
    entry = record.setdefault(_key(settings), {})
    value = added or entry.get(setting, False)
    if entry.get(setting) is value:
        return
    entry[setting] = value
    _save(record)


def added_by_mented(settings: Path, setting: str) -> bool | None:
    """Whether mented added `setting` to `settings` (None: no record of that file)."""
    return _load().get(_key(settings), {}).get(setting)


def forget(settings: Path) -> None:
    """Drop the record of `settings` (its hooks were taken out).

    Raises:
        OSError: the record cannot be written.
    """
    record = _load()
    if record.pop(_key(settings), None) is not None:
        _save(record)
