"""The portable format of memories: JSON Lines, one immutable record per line.

`mentectl export` writes it, `mentectl import` reads it, sync keeps one record per
file in a git repository (mented/sync.py). The format is described for people in
docs/format.md; this module is its one reader and writer.

A file is a header line, then one line per record::

    {"mented":"rules","format":1}
    {"kind":"memory","id":"01J...","created_at":1718000000.123456,"type":"procedural","tags":["trigger:git-commit"],"text":"..."}
    {"kind":"forgotten","id":"01J...","created_at":1718000001.5,"forgotten_at":1718000100.0}

A record never changes once written: a new version of a rule is a new record
naming the one it `supersedes`; a forget is a `forgotten` record. What can be
derived (which version is current, since when) is not written: the store derives
it on import, whatever order the records arrive in.

An import reads and checks the file `IMPORT_BATCH` records at a time, all of
them inside one write: a problem anywhere aborts the write, so nothing is
imported, and is named by file and line. Unknown fields and unknown kinds of record are
ignored (a newer mented may add them); a newer major `format` is refused.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any

import msgspec

from mented import __version__
from mented.memory import Forgotten, InvalidInputError, Memory, MemoryType
from mented.store import ImportSummary, Store, check_forgotten, check_imported
from mented.untrusted import MAX_NESTING, Refused, check_nesting, shown

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Iterator
    from pathlib import Path
    from typing import BinaryIO

FORMAT_VERSION = 1
FORMAT_NAME = "rules"
# Older versions this reader still reads, each with what must be done to its records.
# Only version 1 exists so far; a version 2 adds its reader and keeps this one.
READABLE_VERSIONS = frozenset({1})
# How far in the future a record's time may be (another machine's clock runs ahead):
# past it the record is refused, else it would stay "newest" for ever.
FUTURE_SKEW_S = 24 * 3600.0
# Records checked and imported at a time: an import holds one batch, whatever the
# size of its file (all of them still go in one write: see `import_file`).
IMPORT_BATCH = 1000


class FormatError(InvalidInputError):
    """A file that is not a readable export; the message names the file and line."""


class MemoryLine(msgspec.Struct, tag="memory", tag_field="kind", omit_defaults=True, kw_only=True):
    """One memory, as a line. Field order is the order a person reads it in."""

    id: str
    created_at: float
    type: MemoryType = MemoryType.SEMANTIC
    tags: list[str] = []
    agent: str | None = None
    project: str | None = None
    supersedes: str | None = None
    merges: list[str] = []
    text: str
    checks: list[str] = []  # checks on the action's fields (mented.checks)


class ForgottenLine(
    msgspec.Struct, tag="forgotten", tag_field="kind", omit_defaults=True, kw_only=True
):
    """One forget: the memory's id, its own time and predecessor, and when it was forgotten."""

    id: str
    created_at: float
    supersedes: str | None = None
    forgotten_at: float


class Header(msgspec.Struct, kw_only=True, omit_defaults=True):
    mented: str
    format: int
    written_by: str | None = None


class Records(msgspec.Struct):
    """What a file holds, checked: the memories and the forgets, in file order."""

    memories: list[Memory] = msgspec.field(default_factory=list)
    forgotten: list[Forgotten] = msgspec.field(default_factory=list)


_encoder = msgspec.json.Encoder()
_line_decoder = msgspec.json.Decoder(MemoryLine | ForgottenLine)


def memory_line(memory: Memory) -> bytes:
    """One memory as a line of the format (with its newline)."""
    return (
        _encoder.encode(
            MemoryLine(
                id=memory.id,
                created_at=memory.created_at,
                type=memory.memory_type,
                tags=list(memory.tags),
                agent=memory.agent,
                project=memory.project,
                supersedes=memory.supersedes,
                merges=list(memory.merges),
                text=memory.content,
                checks=list(memory.checks),
            )
        )
        + b"\n"
    )


def forgotten_line(tomb: Forgotten) -> bytes:
    """One forget as a line of the format (with its newline)."""
    return (
        _encoder.encode(
            ForgottenLine(
                id=tomb.id,
                created_at=tomb.created_at,
                supersedes=tomb.supersedes,
                forgotten_at=tomb.forgotten_at,
            )
        )
        + b"\n"
    )


def header_line() -> bytes:
    header = Header(mented=FORMAT_NAME, format=FORMAT_VERSION, written_by=f"mented {__version__}")
    return _encoder.encode(header) + b"\n"


def marker_line() -> bytes:
    """The sync repository's marker (`mented-sync.json`): the header, minus who wrote it.

    Constant for a format, so that two machines that add it apart add the same
    file, which git merges without a conflict.
    """
    return _encoder.encode(Header(mented=FORMAT_NAME, format=FORMAT_VERSION)) + b"\n"


def check_marker(data: bytes, where: str) -> None:
    """Refuse a sync repository marked by a newer format (or not marked as mented's).

    Raises:
        FormatError: naming `where`, with what to do.
    """
    _check_header(data.strip(), where)


def write_export(
    out: BinaryIO,
    memories: Iterable[list[Memory]],
    forgotten: Iterable[list[Forgotten]],
) -> tuple[int, int]:
    """Write a whole export: the header, every memory, then every forget.

    Returns:
        (memories written, forgets written).
    """
    out.write(header_line())
    written = [0, 0]
    for batch in memories:
        out.write(b"".join(memory_line(memory) for memory in batch))
        written[0] += len(batch)
    for tombs in forgotten:
        out.write(b"".join(forgotten_line(tomb) for tomb in tombs))
        written[1] += len(tombs)
    return written[0], written[1]


def read_export(path: Path, *, shown_as: str | None = None) -> Records:
    """Read and check a whole export file (held in memory: `import_file` streams it).

    Raises:
        FormatError: the file cannot be read, has no header, a newer format, or a
            bad line (named by `shown_as`, else `path`, and its line number).
    """
    records = Records()
    for batch in read_batches(path, shown_as=shown_as):
        records.memories.extend(batch.memories)
        records.forgotten.extend(batch.forgotten)
    return records


def read_batches(
    path: Path, *, shown_as: str | None = None, batch: int = IMPORT_BATCH
) -> Iterator[Records]:
    """Read and check an export file, `batch` records at a time, in file order.

    The file is opened when the first batch is asked for and closed when the last is
    taken (or the caller stops). A bad line raises when its batch is reached: a
    caller that wants all or nothing imports every batch in one write and lets the
    error abort it (`Store.import_batches`).

    Raises:
        FormatError: as for `read_export`.
    """
    name = shown_as or str(path)
    try:
        with path.open("rb") as file:
            yield from read_lines(file, name, batch=batch)
    except OSError as exc:
        raise FormatError(f"{name}: cannot read it: {exc.strerror or exc}") from exc


def read_lines(
    lines: Iterable[bytes], name: str, *, header: bool = True, batch: int = IMPORT_BATCH
) -> Iterator[Records]:
    """Check the lines of one file (`header`: the first must be the format's header).

    Yields the records `batch` at a time. What is kept across batches is a 12-byte
    digest per id (an id repeated with other content is refused wherever it is), not
    the records.

    Raises:
        FormatError: as for `read_export`.
    """
    records = Records()
    # Each id's digest of its line and line number (not the line: a copy of the file).
    seen: dict[str, bytes] = {}
    expect_header = header
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        where = f"{name}:{number}"
        if expect_header:
            _check_header(line, where)
            expect_header = False
            continue
        record = parse_line(line, where)
        if record is None:
            continue
        digest = hashlib.blake2b(line, digest_size=8).digest()
        first = seen.get(record.id)
        if first is not None and first[:8] != digest:
            raise FormatError(
                f"{where}: id {record.id} is on line {int.from_bytes(first[8:])} too, with "
                "other content; a record never changes: give the new version its own id"
            )
        if first is not None:
            continue
        seen[record.id] = digest + number.to_bytes(4)
        if isinstance(record, Memory):
            records.memories.append(record)
        else:
            records.forgotten.append(record)
        if len(records.memories) + len(records.forgotten) >= batch:
            yield records
            records = Records()
    if expect_header:
        raise FormatError(f"{name}: empty, not a mented export (no header line)")
    if records.memories or records.forgotten:
        yield records


def parse_line(line: bytes, where: str) -> Memory | Forgotten | None:
    """One record line, checked; None for a kind this version does not know.

    Raises:
        FormatError: naming `where`.
    """
    item: MemoryLine | ForgottenLine | None
    try:
        check_nesting(line, limit=MAX_NESTING)
    except Refused:
        raise FormatError(
            f"{where}: nested more than {MAX_NESTING} levels deep; a record is one flat JSON object"
        ) from None
    try:
        item = _line_decoder.decode(line)
    except (msgspec.ValidationError, msgspec.DecodeError):
        item = _slow_parse(line, where)  # says what is wrong, or finds a kind to skip
    if item is None:
        return None
    _check_not_future(item, where)
    try:
        if isinstance(item, MemoryLine):
            return check_imported(
                Memory(
                    id=item.id,
                    content=item.text,
                    memory_type=item.type,
                    tags=tuple(item.tags),
                    agent=item.agent,
                    project=item.project,
                    created_at=item.created_at,
                    supersedes=item.supersedes,
                    merges=tuple(item.merges),
                    checks=tuple(item.checks),
                )
            )
        return check_forgotten(
            Forgotten(
                id=item.id,
                created_at=item.created_at,
                supersedes=item.supersedes,
                forgotten_at=item.forgotten_at,
            )
        )
    except InvalidInputError as exc:
        raise FormatError(f"{where}: {exc}") from None


def _check_not_future(item: MemoryLine | ForgottenLine, where: str) -> None:
    """Refuse a time later than now (plus `FUTURE_SKEW_S`).

    Raises:
        FormatError: naming `where` and the field.
    """
    latest = time.time() + FUTURE_SKEW_S
    times = {"created_at": item.created_at}
    if isinstance(item, ForgottenLine):
        times["forgotten_at"] = item.forgotten_at
    for name, value in times.items():
        if isinstance(value, int | float) and value > latest:
            raise FormatError(
                f"{where}: {name} {value!r} is in the future (later than now plus "
                f"{FUTURE_SKEW_S / 3600:g} h); a record's time is when it was written"
            )


def _slow_parse(line: bytes, where: str) -> MemoryLine | ForgottenLine | None:
    """A line the typed decoder refused: the reason, or None for an unknown kind."""
    try:
        data: Any = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise FormatError(f"{where}: not a JSON line ({exc})") from None
    if not isinstance(data, dict):
        raise FormatError(f"{where}: a record must be a JSON object")
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise FormatError(f"{where}: a record needs a `kind` (memory or forgotten)")
    if kind not in {"memory", "forgotten"}:
        return None  # a kind from a newer mented: ignored, as docs/format.md says
    try:
        if kind == "memory":
            return msgspec.convert(data, MemoryLine)
        return msgspec.convert(data, ForgottenLine)
    except msgspec.ValidationError as exc:
        raise FormatError(f"{where}: {exc}") from None


def _check_header(line: bytes, where: str) -> None:
    try:
        check_nesting(line, limit=MAX_NESTING)
        header = msgspec.json.decode(line, type=Header)
    except (msgspec.DecodeError, msgspec.ValidationError, Refused):
        header = None
    if header is None or header.mented != FORMAT_NAME:
        raise FormatError(
            f'{where}: not a mented export: the first line must be {{"mented":"rules","format":N}}'
        )
    if header.format > FORMAT_VERSION:
        raise FormatError(
            f"{where}: written in format {header.format} by a newer mented "
            f"({header.written_by or 'unknown'}); this one reads up to format "
            f"{FORMAT_VERSION}: upgrade mented"
        )
    if header.format not in READABLE_VERSIONS:
        raise FormatError(f"{where}: format {header.format} is not one this mented reads")


def export_store(store: Store, path: Path) -> tuple[int, int]:
    """Write every memory and forget of `store` to `path` (whole, or not at all).

    Returns:
        (memories written, forgets written).
    """
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as out:
        counts = write_export(out, store.export_records(), store.export_forgotten())
    partial.replace(path)
    return counts


def import_file(store: Store, path: Path, *, shown_as: str | None = None) -> ImportSummary:
    """Check the file and import it in one write: all of it or nothing (`import_streamed`)."""
    return import_streamed(store, path, shown_as=shown_as).summary


class Imported(msgspec.Struct):
    """What `import_streamed` did, and the actions its rules name (with their counts)."""

    summary: ImportSummary
    actions: dict[str, int] = msgspec.field(default_factory=dict)


def import_streamed(
    store: Store, path: Path, *, shown_as: str | None = None, batch: int = IMPORT_BATCH
) -> Imported:
    """Import a file `IMPORT_BATCH` records at a time, inside one write: all or nothing.

    Only one batch of records is held at a time, whatever the size of the file; a
    bad line anywhere aborts the write, so nothing of the file is imported.

    Raises:
        FormatError: see `read_export`; nothing was imported.
    """
    actions: dict[str, int] = {}

    def batches() -> Iterator[tuple[list[Memory], list[Forgotten]]]:
        actions.clear()  # a write run again (the map grew) reads the file again
        for records in read_batches(path, shown_as=shown_as, batch=batch):
            for memory in records.memories:
                for action in memory.actions:
                    actions[action] = actions.get(action, 0) + 1
            yield records.memories, records.forgotten

    summary = store.import_batches(batches)
    return Imported(summary=summary, actions=actions)


def unknown_actions(memories: Iterable[Memory], known: Collection[str], *, where: str) -> list[str]:
    """A warning for each action the rules in `memories` name that is not in `known`.

    `rule add` refuses such an action (a rule for it never fires); an import takes the
    rules whole, as written, and says so, with the closest known names.
    """
    counts: dict[str, int] = {}
    for memory in memories:
        for action in memory.actions:
            counts[action] = counts.get(action, 0) + 1
    return unknown_action_warnings(counts, known, where=where)


def unknown_action_warnings(
    counts: dict[str, int], known: Collection[str], *, where: str
) -> list[str]:
    """`unknown_actions`, from the number of rules for each action (`Imported.actions`)."""
    warnings = []
    for action, count in sorted(counts.items()):
        if action in known:
            continue
        import difflib  # noqa: PLC0415 - a suggestion only: not on a start's path

        close = difflib.get_close_matches(action, list(known), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        rules, fire = (
            ("1 rule", "it never fires") if count == 1 else (f"{count} rules", "they never fire")
        )
        warnings.append(
            f"{where}: {rules} for {shown(action)!r}, which is not an action mented knows, "
            f"so {fire}.{hint} `mentectl rule list --all` shows them, "
            "`mentectl actions` the actions there are"
        )
    return warnings
