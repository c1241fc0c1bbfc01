"""Sync against what a remote holds: its tree's bounds, its layout and marker, its records.

Each test builds the remote in a temporary directory (a bare repository, and a clone
of someone who can push to it, `Attacker`) and checks what the user would notice:
what `init` and `sync` say, what reaches the store, what reaches the remote. These
are the cases the mutation run of `tests/mutation/sync.txt` found untested
(docs/testing.md, "Scores, fourth round").
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import mented.sync
from mented.memory import Memory
from mented.portable import parse_line
from mented.sync import MARKER, GitSync, SyncError, record_path
from mented.sync_files import MAX_RECORD_BYTES, CloneFiles
from tests import test_sync_hostile
from tests.test_sync_hostile import Attacker, Machine, a_record, git, remote_files

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

OTHER_FILE_BYTES = 1024 * 1024  # the most a README or a licence may be


# The hostile-sync tests' bare remote and the laptop that syncs with it.
remote = test_sync_hostile.remote
laptop = test_sync_hostile.laptop


def commits(remote: Path) -> list[str]:
    return git(remote, "log", "--format=%s", "main").stdout.splitlines()


def write(work: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(data)


def seeded(tmp_path: Path, files: dict[str, bytes], *, branch: str = "main") -> Path:
    """A bare remote (its HEAD `main`) holding one commit of `files` on `branch`."""
    remote = tmp_path / "seeded.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(remote)], check=True)
    work = tmp_path / "seed"
    subprocess.run(["git", "init", "--quiet", "-b", branch, str(work)], check=True)
    write(work, files)
    git(work, "add", "--all")
    git(work, "commit", "--quiet", "-m", "files")
    git(work, "push", "--quiet", str(remote), f"HEAD:refs/heads/{branch}")
    return remote


# ------------------------------------------------------------ nothing new, the marker


def test_a_sync_with_nothing_new_commits_and_pushes_nothing(laptop: Machine, remote: Path) -> None:
    laptop.store.store("single line", tags=["trigger:git-commit"])
    assert laptop.sync.sync(laptop.store).pushed
    before = commits(remote)

    again = laptop.sync.sync(laptop.store)  # the record and the marker are both tracked
    assert (again.written, again.pushed, again.skipped) == (0, False, [])
    assert laptop.sync.state().last_error is None
    assert commits(remote) == before


def test_the_first_sync_of_an_empty_store_marks_the_remote_as_mented(
    laptop: Machine, remote: Path
) -> None:
    result = laptop.sync.sync(laptop.store)
    assert result.pushed
    assert remote_files(remote) == [MARKER]


def test_a_remote_rewritten_by_a_newer_mented_stops_the_sync(
    laptop: Machine, remote: Path, tmp_path: Path
) -> None:
    laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    attacker = Attacker(tmp_path, remote)  # a newer mented on the desk
    name, data = a_record("in format 9", "01JDQ8Z5K3M4N5P6Q7R8S9T0D1")
    write(attacker.work, {MARKER: b'{"mented":"rules","format":9}\n', name: data})
    attacker.push()

    with pytest.raises(SyncError, match="written in format 9 by a newer mented"):
        laptop.sync.sync(laptop.store)
    assert "format 9" in (laptop.sync.state().last_error or "")
    assert laptop.rules() == ["single line"]  # nothing of the newer format imported


# ------------------------------------------------------------ the records it holds


def test_a_rule_forgotten_on_another_machine_is_not_pushed_back_by_a_new_one(
    tmp_path: Path, remote: Path
) -> None:
    laptop = Machine(tmp_path / "laptop", remote)
    rule = laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    exported = [memory for batch in laptop.store.export_records() for memory in batch]
    laptop.store.close()
    desk = Machine(tmp_path / "desk", remote)
    desk.sync.sync(desk.store)
    desk.store.forget(rule.id)
    desk.sync.sync(desk.store)
    desk.store.close()
    assert record_path("records", rule.id) not in remote_files(remote)

    # A new machine that got the rule from an export before the forget.
    travel = Machine(tmp_path / "travel", remote)
    travel.store.import_records(exported)
    result = travel.sync.sync(travel.store)
    assert result.written == 0
    assert travel.rules() == []
    assert record_path("records", rule.id) not in remote_files(remote)
    assert record_path("forgotten", rule.id) in remote_files(remote)
    travel.store.close()


def test_a_record_filed_under_another_prefix_is_skipped_and_stands_in_for_nothing(
    laptop: Machine, remote: Path, tmp_path: Path
) -> None:
    laptop.sync.sync(laptop.store)
    attacker = Attacker(tmp_path, remote)
    memory_id = "01JDQ8Z5K3M4N5P6Q7R8S9T0E1"
    _, data = a_record("filed wrongly", memory_id)
    misfiled = f"records/ZZZZ/{memory_id}.json"
    write(attacker.work, {misfiled: data})
    attacker.push()

    result = laptop.sync.sync(laptop.store)
    assert laptop.rules() == []
    assert f"{misfiled}: filed under ZZZZ, not under 01JD" in result.skipped

    # The same rule reaches this machine by an export: it is pushed where it belongs.
    record = parse_line(data, "export")
    assert isinstance(record, Memory)
    laptop.store.import_records([record])
    assert laptop.sync.sync(laptop.store).written == 1
    assert record_path("records", memory_id) in remote_files(remote)


def test_a_skipped_file_is_counted_once_not_at_every_sync(
    laptop: Machine, remote: Path, tmp_path: Path
) -> None:
    laptop.sync.sync(laptop.store)
    attacker = Attacker(tmp_path, remote)
    write(attacker.work, {"records/01JD/01JDQ8Z5K3M4N5P6Q7R8S9T0F1.json": b"not json\n"})
    attacker.push()

    assert len(laptop.sync.sync(laptop.store).skipped) == 1
    assert laptop.sync.sync(laptop.store).skipped == []
    state = laptop.sync.state()
    assert state.skipped_total == 1
    assert len(state.skipped) == 1


# ------------------------------------------------------------ the bounds of its tree


def test_a_readme_of_exactly_the_bound_is_taken_and_one_byte_more_is_refused(
    laptop: Machine, remote: Path, tmp_path: Path
) -> None:
    laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    attacker = Attacker(tmp_path, remote)
    write(attacker.work, {"README.md": b"r" * OTHER_FILE_BYTES})
    attacker.push()
    assert laptop.sync.sync(laptop.store).skipped == []
    assert (laptop.sync.repo / "README.md").stat().st_size == OTHER_FILE_BYTES

    write(attacker.work, {"README.md": b"r" * (OTHER_FILE_BYTES + 1)})
    attacker.push()
    with pytest.raises(SyncError) as refused:
        laptop.sync.sync(laptop.store)
    assert f"README.md is {OTHER_FILE_BYTES + 1} bytes" in str(refused.value)
    assert (laptop.sync.repo / "README.md").stat().st_size == OTHER_FILE_BYTES


def test_a_record_file_over_its_own_bound_is_refused_before_checkout(
    laptop: Machine, remote: Path, tmp_path: Path
) -> None:
    # Under a README's bound, over a record's: the record's bound applies.
    laptop.sync.sync(laptop.store)
    attacker = Attacker(tmp_path, remote)
    name = "records/01JD/01JDQ8Z5K3M4N5P6Q7R8S9T0G1.json"
    size = MAX_RECORD_BYTES + 1
    write(attacker.work, {name: b" " * size})
    attacker.push()
    with pytest.raises(SyncError) as refused:
        laptop.sync.sync(laptop.store)
    message = str(refused.value)
    assert f"{name} is {size} bytes (the most a file there may be is {MAX_RECORD_BYTES})" in message
    assert "was not checked out" in message
    assert not (laptop.sync.repo / name).exists()


def tree_sizes(remote: Path) -> list[int]:
    listed = git(remote, "ls-tree", "-r", "-l", "main").stdout.splitlines()
    return [int(line.split()[3]) for line in listed]


def synced_then_readme_pushed(laptop: Machine, remote: Path, tmp_path: Path) -> Attacker:
    """The laptop's rule synced, then a README pushed by someone else: the attacker."""
    laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    attacker = Attacker(tmp_path, remote)
    write(attacker.work, {"README.md": b"rules\n"})
    attacker.push()
    return attacker


def test_a_tree_of_exactly_the_most_files_is_taken_and_one_more_is_refused(
    laptop: Machine, remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bound is a million files: lowered here to the tree the remote holds.
    attacker = synced_then_readme_pushed(laptop, remote, tmp_path)
    monkeypatch.setattr(mented.sync, "MAX_INCOMING_FILES", len(tree_sizes(remote)))
    assert laptop.sync.sync(laptop.store).skipped == []
    assert (laptop.sync.repo / "README.md").exists()

    write(attacker.work, {"LICENSE": b"MIT\n"})
    attacker.push()
    with pytest.raises(SyncError, match=f"it holds more than {len(tree_sizes(remote)) - 1} files"):
        laptop.sync.sync(laptop.store)
    assert not (laptop.sync.repo / "LICENSE").exists()


def test_a_tree_of_exactly_the_most_bytes_is_taken_and_one_more_is_refused(
    laptop: Machine, remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bound is 2 GiB in all, each file under its own bound: lowered here.
    attacker = synced_then_readme_pushed(laptop, remote, tmp_path)
    total = sum(tree_sizes(remote))
    monkeypatch.setattr(mented.sync, "MAX_INCOMING_BYTES", total)
    assert laptop.sync.sync(laptop.store).skipped == []

    write(attacker.work, {"README.md": b"rules!\n"})
    attacker.push()
    with pytest.raises(SyncError, match=f"or {total} bytes"):
        laptop.sync.sync(laptop.store)
    assert (laptop.sync.repo / "README.md").read_bytes() == b"rules\n"


# ------------------------------------------------------------ what init takes


def test_init_refuses_a_directory_named_like_a_hosts_starter_file(tmp_path: Path) -> None:
    remote = seeded(tmp_path, {"README.md": b"licences\n", "license_server/main.py": b"run()\n"})
    sync = GitSync(tmp_path / "data", timeout_s=30)
    with pytest.raises(SyncError, match=r"not mented's \(license_server\)"):
        sync.init(str(remote))
    assert not sync.configured


def test_init_refuses_a_file_where_mented_keeps_its_records(tmp_path: Path) -> None:
    remote = seeded(tmp_path, {"records": b"my record collection\n"})
    sync = GitSync(tmp_path / "data", timeout_s=30)
    with pytest.raises(SyncError, match=r"not mented's \(records\)"):
        sync.init(str(remote))
    assert not sync.configured


def test_init_refuses_branches_without_the_default_one_by_name(tmp_path: Path) -> None:
    remote = seeded(tmp_path, {"app.py": b"print()\n"}, branch="dev")
    sync = GitSync(tmp_path / "data", timeout_s=30)
    with pytest.raises(SyncError) as refused:
        sync.init(str(remote))
    message = str(refused.value)
    assert "has branches (dev) but no default branch" in message
    assert "make an empty one" in message
    assert not sync.configured


# ------------------------------------------------------------ git's words, the clone


def test_a_long_refusal_from_the_server_is_cut_to_a_line_status_can_show(
    laptop: Machine, remote: Path
) -> None:
    hook = remote / "hooks" / "pre-receive"
    hook.write_text('#!/bin/sh\nfor i in $(seq 300); do echo "policy line $i" >&2; done\nexit 1\n')
    hook.chmod(0o755)
    laptop.store.store("single line", tags=["trigger:git-commit"])
    with pytest.raises(SyncError) as refused:
        laptop.sync.sync(laptop.store)
    message = str(refused.value)
    said = message.partition("git push was refused: ")[2].partition("; everything is")[0]
    assert said.startswith("remote: policy line 1; remote: policy line 2;")
    assert len(said) == 600
    assert said.endswith("...")
    assert "policy line 300" not in message


def test_attributes_changed_in_the_clone_are_put_back_before_a_filter_can_run(
    laptop: Machine, remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = tmp_path / "ran"
    laptop.sync.sync(laptop.store)
    # The user's config defines a filter; the clone's own attributes were made to select it.
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = me\n\temail = me@example.com\n"
        f'[filter "evil"]\n\tsmudge = "touch {ran}; cat"\n\tclean = "touch {ran}; cat"\n'
    )
    (laptop.sync.repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    attacker = Attacker(tmp_path, remote)
    name, data = a_record("from the desk", "01JDQ8Z5K3M4N5P6Q7R8S9T0H1")
    write(attacker.work, {name: data})
    attacker.push()
    monkeypatch.setenv("HOME", str(home))
    laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    assert laptop.rules() == ["from the desk", "single line"]
    assert not ran.exists()


def test_a_write_that_fails_leaves_no_partial_file_in_the_clone(tmp_path: Path) -> None:
    # A directory where the record goes (or a full disk): the rename fails.
    (tmp_path / "records" / "01JD" / "01JDQ8Z5K3M4N5P6Q7R8S9T0J1.json").mkdir(parents=True)
    with CloneFiles(tmp_path) as files, pytest.raises(OSError):
        files.write("records/01JD/01JDQ8Z5K3M4N5P6Q7R8S9T0J1.json", b"{}\n")
    assert sorted(path.name for path in (tmp_path / "records" / "01JD").iterdir()) == [
        "01JDQ8Z5K3M4N5P6Q7R8S9T0J1.json"
    ]
