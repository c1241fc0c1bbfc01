"""The store's schema (`mented.store.migrations`): a newer or foreign one refused."""

from __future__ import annotations

from pathlib import Path

import lmdb
import pytest

from mented.store import SCHEMA_VERSION, Store, StoreOpenError
from tests.store_helpers import file_digest


def test_a_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Store(data).close()
    env = lmdb.open(str(data), max_dbs=8)
    with env.begin(write=True) as txn:
        txn.put(b"schema_version", str(SCHEMA_VERSION + 1).encode(), db=env.open_db(b"meta", txn))
    env.close()
    before = file_digest(data / "data.mdb")

    with pytest.raises(StoreOpenError) as refused:
        Store(data)

    message = str(refused.value)
    assert str(data) in message
    assert f"schema {SCHEMA_VERSION + 1}" in message
    assert f"reads up to {SCHEMA_VERSION}" in message
    assert "upgrade mented" in message
    assert file_digest(data / "data.mdb") == before


def test_an_lmdb_environment_of_another_program_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = lmdb.open(str(data))
    with env.begin(write=True) as txn:
        txn.put(b"someone", b"else's data")
    env.close()
    before = file_digest(data / "data.mdb")

    with pytest.raises(StoreOpenError, match="not a mented store"):
        Store(data)
    assert file_digest(data / "data.mdb") == before
