"""The portable format and the store's import: round trips, forgets, forks, bad files."""

from __future__ import annotations

import io
import json
import random
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from mented.memory import Forgotten, Memory, MemoryType, new_id
from mented.portable import (
    FormatError,
    export_store,
    header_line,
    import_file,
    import_streamed,
    memory_line,
    read_export,
)
from mented.store import Store

DATA = Path(__file__).parent / "data"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = Store(tmp_path / "a", sync=False)
    yield db
    db.close()


@pytest.fixture
def other(tmp_path: Path) -> Iterator[Store]:
    db = Store(tmp_path / "b", sync=False)
    yield db
    db.close()


def everything(store: Store) -> list[Memory]:
    return store.list(include_superseded=True)


def some_history(store: Store) -> dict[str, str]:
    """A store with a chain, a fork-free forget in the middle, scopes, types and tags."""
    first = store.store("v1", tags=["trigger:git-commit", "style"], memory_type="procedural")
    second, _ = store.supersede(first.id, "v2")
    third, _ = store.supersede(second.id, 'v3 {"quoted"}\nsecond line, ünïcode')
    store.forget(second.id)
    scoped = store.store("drafts", tags=["trigger:pr-create"], agent="codex", project="/src/app")
    gone = store.store("gone", tags=["trigger:git-push"])
    store.forget(gone.id)
    fact = store.store("the CI runs on Fridays", memory_type=MemoryType.EPISODIC)
    return {"first": first.id, "third": third.id, "scoped": scoped.id, "fact": fact.id}


def test_export_then_import_into_an_empty_store_gives_the_same_store(
    store: Store, other: Store, tmp_path: Path
) -> None:
    ids = some_history(store)
    path = tmp_path / "rules.jsonl"
    assert export_store(store, path) == (4, 2)

    summary = import_file(other, path)

    assert (summary.added, summary.forgotten, summary.unchanged) == (4, 2, 0)
    assert everything(other) == everything(store)
    assert other.history(ids["third"]) == store.history(ids["third"])
    for action in ("git-commit", "pr-create", "git-push"):
        assert other.recall_for_action(action) == store.recall_for_action(action)
    assert other.stats().live_rules == store.stats().live_rules
    # and the second store exports the same file, line for line past the header
    again = tmp_path / "again.jsonl"
    export_store(other, again)
    assert again.read_bytes().splitlines()[1:] == path.read_bytes().splitlines()[1:]


def test_importing_twice_changes_nothing(store: Store, other: Store, tmp_path: Path) -> None:
    some_history(store)
    path = tmp_path / "rules.jsonl"
    export_store(store, path)
    import_file(other, path)
    before = everything(other)

    summary = import_file(other, path)

    assert (summary.added, summary.forgotten, summary.unchanged) == (0, 0, 6)
    assert everything(other) == before


def test_the_file_reads_well_one_record_per_line(store: Store, tmp_path: Path) -> None:
    rule = store.store("single line", tags=["trigger:git-commit"], memory_type="procedural")
    path = tmp_path / "rules.jsonl"
    export_store(store, path)
    header, line = path.read_text().splitlines()
    assert json.loads(header)["format"] == 1
    assert json.loads(line) == {
        "kind": "memory",
        "id": rule.id,
        "created_at": rule.created_at,
        "type": "procedural",
        "tags": ["trigger:git-commit"],
        "text": "single line",
    }
    assert line.endswith('"text":"single line"}')  # the text last: a diff shows it plainly


def test_a_file_from_format_1_still_imports(store: Store) -> None:
    summary = import_file(store, DATA / "export-format-1.jsonl")
    assert (summary.added, summary.forgotten) == (3, 1)
    rules = store.recall_for_action("git-commit")
    assert [rule.content for rule in rules] == ["commit messages: single line, no emojis"]
    assert [m.content for m in store.history(rules[0].id)] == [
        "commit messages: single line",
        "commit messages: single line, no emojis",
    ]
    assert store.recall_for_action("git-push") == []  # forgotten in the file


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        (['{"kind":"memory"}'], ":1: not a mented export"),
        (["not json"], ":1: not a mented export"),
        (['{"mented":"rules","format":99,"written_by":"mented 9"}'], "newer mented"),
        (["HEADER", "{oops"], ":2: not a JSON line"),
        (["HEADER", "[1, 2]"], ":2: a record must be a JSON object"),
        (["HEADER", '{"id":"x"}'], ":2: a record needs a `kind`"),
        (["HEADER", "GOOD", '{"kind":"memory","id":"01J","created_at":1,"text":"x"}'], ":3: id "),
        (["HEADER", "GOOD", "", '{"kind":"memory","id":"ID","created_at":1,"text":" "}'], ":4:"),
        (["HEADER", '{"kind":"memory","id":"ID","created_at":"soon","text":"x"}'], "created_at"),
        (
            ["HEADER", '{"kind":"memory","id":"ID","created_at":1,"text":"x","tags":["trigger:"]}'],
            ":2: an action name cannot be empty",
        ),
        (
            ["HEADER", '{"kind":"memory","id":"ID","created_at":1,"text":"x","project":"rel"}'],
            "absolute",
        ),
        (
            ["HEADER", "GOOD", '{"kind":"memory","id":"GOODID","created_at":2,"text":"changed"}'],
            ":3: id",
        ),
    ],
)
def test_a_malformed_file_is_refused_with_its_line_and_nothing_is_imported(
    store: Store, tmp_path: Path, lines: list[str], problem: str
) -> None:
    good_id = "01JDQ8Z5K3M4N5P6Q7R8S9T0VW"
    good = f'{{"kind":"memory","id":"{good_id}","created_at":1,"text":"fine"}}'
    text = "\n".join(lines)
    text = text.replace("HEADER", '{"mented":"rules","format":1}').replace("GOODID", good_id)
    text = text.replace("GOOD", good).replace('"ID"', '"01JDQ8Z5K3M4N5P6Q7R8S9T0VX"')
    path = tmp_path / "bad.jsonl"
    path.write_text(text + "\n")

    with pytest.raises(FormatError, match=r"bad\.jsonl:") as caught:
        import_file(store, path)

    assert problem in str(caught.value)
    assert everything(store) == []


def test_unknown_fields_and_kinds_are_ignored(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "future.jsonl"
    path.write_text(
        '{"mented":"rules","format":1,"shiny":true}\n'
        '{"kind":"memory","id":"01JDQ8Z5K3M4N5P6Q7R8S9T0VW","created_at":1,"text":"x",'
        '"tags":["trigger:git-commit"],"colour":"blue"}\n'
        '{"kind":"pinned","id":"01JDQ8Z5K3M4N5P6Q7R8S9T0VX"}\n'
    )
    assert import_file(store, path).added == 1
    assert [rule.content for rule in store.recall_for_action("git-commit")] == ["x"]


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match=r"missing\.jsonl: cannot read it"):
        read_export(tmp_path / "missing.jsonl", shown_as="missing.jsonl")


def test_export_walks_a_store_in_batches_and_writes_everything(store: Store) -> None:
    from mented.portable import write_export
    from mented.store import StoreItem

    store.store_many(StoreItem(content=f"rule {n}", tags=["trigger:git-commit"]) for n in range(25))
    out = io.BytesIO()
    assert write_export(out, store.export_records(batch=7), store.export_forgotten(batch=7)) == (
        25,
        0,
    )
    assert len(out.getvalue().splitlines()) == 26


# ------------------------------------------------------ forget wins, forks


def test_a_forget_wins_over_an_unchanged_copy(store: Store, other: Store, tmp_path: Path) -> None:
    rule = store.store("single line", tags=["trigger:git-commit"])
    export_store(store, tmp_path / "before.jsonl")
    import_file(other, tmp_path / "before.jsonl")
    other.forget(rule.id)
    export_store(other, tmp_path / "after.jsonl")

    import_file(store, tmp_path / "after.jsonl")
    export_store(store, tmp_path / "back.jsonl")
    import_file(other, tmp_path / "back.jsonl")  # the copy does not come back

    assert store.recall_for_action("git-commit") == []
    assert other.recall_for_action("git-commit") == []
    assert everything(store) == everything(other) == []


def test_two_machines_that_superseded_one_rule_keep_both_versions_until_settled(
    store: Store, other: Store, tmp_path: Path
) -> None:
    rule = store.store("v1", tags=["trigger:git-commit"])
    export_store(store, tmp_path / "v1.jsonl")
    import_file(other, tmp_path / "v1.jsonl")
    here, _ = store.supersede(rule.id, "v2 here")
    there, _ = other.supersede(rule.id, "v2 there")
    export_store(store, tmp_path / "here.jsonl")
    export_store(other, tmp_path / "there.jsonl")
    import_file(store, tmp_path / "there.jsonl")
    import_file(other, tmp_path / "here.jsonl")

    both = sorted([here, there], key=lambda m: (m.created_at, m.id), reverse=True)
    for db in (store, other):
        assert [m.id for m in db.recall_for_action("git-commit")] == [m.id for m in both]
        (fork,) = db.forks()
        assert fork.root == rule.id
        assert [tip.id for tip in fork.tips] == [m.id for m in both]
        # The history from any version is the whole family: both branches, the asked one too.
        for version in (rule, here, there):
            assert [m.id for m in db.history(version.id)] == [
                rule.id,
                *reversed([m.id for m in both]),
            ]
    assert everything(store) == everything(other)

    settled, _ = store.supersede(here.id, "v3 settled")

    assert settled.merges == (there.id,)
    assert [m.content for m in store.history(there.id)][-1] == "v3 settled"
    assert len(store.history(there.id)) == 4
    assert store.recall_for_action("git-commit") == [settled]
    assert store.forks() == []
    export_store(store, tmp_path / "settled.jsonl")
    import_file(other, tmp_path / "settled.jsonl")
    assert other.recall_for_action("git-commit") == [settled]
    assert other.forks() == []
    assert everything(store) == everything(other)


def random_history(store: Store, *, seed: int) -> random.Random:
    """60 random steps of adding, superseding and forgetting rules; the generator, for more."""
    rng = random.Random(seed)
    live: list[str] = []
    for step in range(60):
        choice = rng.random()
        if not live or choice < 0.4:
            live.append(store.store(f"rule {step}", tags=["trigger:git-commit"]).id)
        elif choice < 0.8:
            old = live.pop(rng.randrange(len(live)))
            live.append(store.supersede(old, f"rule {step}")[0].id)
        else:
            store.forget(live.pop(rng.randrange(len(live))))
    return rng


def test_the_order_records_arrive_in_does_not_matter(tmp_path: Path) -> None:
    source = Store(tmp_path / "source", sync=False)
    rng = random_history(source, seed=7)
    records = [m for batch in source.export_records() for m in batch]
    forgotten = [t for batch in source.export_forgotten() for t in batch]
    expected = everything(source)
    source.close()

    for attempt in range(5):
        rng.shuffle(records)
        rng.shuffle(forgotten)
        target = Store(tmp_path / f"target{attempt}", sync=False)
        cut = rng.randrange(len(records))
        # in two parts, forgets first or last: the state is the same
        target.import_records(records[:cut], forgotten if attempt % 2 else ())
        target.import_records(records[cut:], () if attempt % 2 else forgotten)
        assert everything(target) == expected
        target.close()


def test_a_schema_1_store_gets_its_successors_index(tmp_path: Path) -> None:
    import lmdb

    old = Store(tmp_path / "old", sync=False)
    first = old.store("v1", tags=["trigger:git-commit"])
    newest, _ = old.supersede(first.id, "v2")
    old.close()
    env = lmdb.open(str(tmp_path / "old"), max_dbs=8)
    with env.begin(write=True) as txn:  # what a schema-1 store looks like
        txn.drop(env.open_db(b"successors", txn=txn), delete=True)
        txn.put(b"schema_version", b"1", db=env.open_db(b"meta", txn=txn))
    env.close()

    migrated = Store(tmp_path / "old", sync=False)
    # an older sibling from another machine: the newest version stays the one followed
    sibling = Memory(
        id="01AN4Z07BY79KA1307SR9X4MV3",
        content="v2 elsewhere",
        tags=("trigger:git-commit",),
        created_at=first.created_at,
        supersedes=first.id,
    )
    migrated.import_records([sibling])
    assert migrated.get(first.id).superseded_by == newest.id
    assert [fork.root for fork in migrated.forks()] == [first.id]
    migrated.close()


def a_big_export(path: Path, count: int, *, text_bytes: int = 1000) -> list[str]:
    """An export of `count` rules of about `text_bytes` each, written directly; their ids."""
    ids = [new_id() for _ in range(count)]
    with path.open("wb") as out:
        out.write(header_line())
        for number, memory_id in enumerate(ids):
            memory = Memory(
                id=memory_id,
                content=f"rule {number}: " + "x" * text_bytes,
                tags=("trigger:git-commit",),
                created_at=1_700_000_000.0 + number,
            )
            out.write(memory_line(memory))
    return ids


def test_an_import_holds_one_batch_of_records_not_the_file(store: Store, tmp_path: Path) -> None:
    """A big file is read a batch at a time (before: every record held at once, about
    2 MiB of memory per MB of file, plus the import's own copies)."""
    path = tmp_path / "big.jsonl"
    a_big_export(path, 6000)
    size = path.stat().st_size

    tracemalloc.start()
    try:
        imported = import_streamed(store, path, batch=500)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert imported.summary.added == 6000
    assert imported.actions == {"git-commit": 6000}
    assert store.stats().live_rules == 6000
    assert peak < size / 2, f"peak {peak} bytes of Python memory for a {size}-byte file"


def test_a_bad_line_past_the_first_batches_imports_nothing(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "late.jsonl"
    a_big_export(path, 25, text_bytes=10)
    with path.open("ab") as out:
        out.write(b'{"kind":"memory","id":"01JDQ8Z5K3M4N5P6Q7R8S9T0VX","created_at":1}\n')

    with pytest.raises(FormatError, match=r"late\.jsonl:27: .*text"):
        import_streamed(store, path, batch=4)

    assert everything(store) == []
    assert store.stats().live_rules == 0


def test_an_import_that_grows_the_map_reads_the_file_again_and_counts_once(
    tmp_path: Path,
) -> None:
    """The write starts again from the first batch when the map must grow."""
    small = Store(tmp_path / "small", sync=False, map_size=1)  # the least LMDB takes
    before = small.stats().map_bytes
    path = tmp_path / "grow.jsonl"
    ids = a_big_export(path, 400)

    imported = import_streamed(small, path, batch=50)

    assert small.stats().map_bytes > before
    assert (imported.summary.added, imported.summary.unchanged) == (400, 0)
    assert imported.actions == {"git-commit": 400}
    assert sorted(m.id for m in everything(small)) == sorted(ids)
    small.close()


def test_batches_in_one_write_end_as_the_records_would_in_any_order(tmp_path: Path) -> None:
    source = Store(tmp_path / "source", sync=False)
    rng = random_history(source, seed=11)
    records: list[Memory | Forgotten] = [m for batch in source.export_records() for m in batch]
    records += [t for batch in source.export_forgotten() for t in batch]
    expected = everything(source)
    source.close()

    for attempt in range(3):
        rng.shuffle(records)
        cuts = [records[n : n + 3] for n in range(0, len(records), 3)]
        batches = [
            (
                [r for r in cut if isinstance(r, Memory)],
                [r for r in cut if isinstance(r, Forgotten)],
            )
            for cut in cuts
        ]
        target = Store(tmp_path / f"target{attempt}", sync=False)
        target.import_batches(lambda batches=batches: batches)
        assert everything(target) == expected
        target.close()
