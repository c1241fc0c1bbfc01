"""The store on disk: its named databases, the keys of its indexes, the records' codecs."""

from __future__ import annotations

import msgspec

from mented.memory import Forgotten, Memory

_DB_MEMORIES = b"memories"
_DB_TRIGGERS = b"triggers"
_DB_HANDLES = b"handles"
_DB_ACTIONS = b"actions"
_DB_META = b"meta"
_DB_FORGOTTEN = b"forgotten"
_DB_SUCCESSORS = b"successors"
_META_SCHEMA = b"schema_version"
_META_LIVE_RULES = b"live_rules"
_DB_PINNED = b"pinned"
_DB_CHANGES = b"changes"
_DB_SYNCED = b"synced"
_META_CHANGE_SEQ = b"change_seq"
_META_STORE_ID = b"store_id"
_SEQ_BYTES = 8
_MICROS_MAX = (1 << 64) - 1
_INVERT = bytes(255 - b for b in range(256))

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Memory)
_forgotten_decoder = msgspec.msgpack.Decoder(Forgotten)


def _trigger_key(action: str, memory: Memory) -> bytes:
    return action.encode() + b"\0" + _newest_first_key(memory)


def _newest_first_key(memory: Memory) -> bytes:
    """~created_at µs (8 bytes BE) | ~id: keys that put the newest memory first."""
    micros = min(max(int(memory.created_at * 1_000_000), 0), _MICROS_MAX)
    return (_MICROS_MAX - micros).to_bytes(8, "big") + memory.id.encode().translate(_INVERT)


def _handle_key(memory_id: str) -> bytes:
    return memory_id[::-1].encode()


def _decode(raw: bytes) -> Memory:
    # msgspec.DecodeError is turned into StoreDamagedError by `_read`/`_write`.
    return _decoder.decode(raw)


def _newest_first(memory: Memory) -> tuple[float, str]:
    return (memory.created_at, memory.id)
